"""The grader's own code around its sandbox (issue 39): each test grades a hostile notebook or
submission (``tests/hostile_notebooks.py``) that broke the grader before the fix.

These run the grader's functions in this process and, for the attacks on the sandbox's
processes, :func:`tmath.grade.execute` with the book's own venv as the sandbox's Python
(``tests/test_student_kit.py`` grades the same attacks with the course kit's venv, in its
hostile class run, behind the kit's install): a few seconds each.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import hostile_notebooks

# --- answers of any size (finding 1) -----------------------------------------------------------


def _executed(records: list[dict], tags=("answer",), labels=()) -> nbformat.NotebookNode:
    """An executed notebook whose one answer cell left ``records`` in its output."""
    from tmath.exercises import ANSWER_MIME

    cell = nbformat.v4.new_code_cell("...")
    cell.metadata.update(tags=list(tags), tmath={"exercise": "ex-tour-2", "answers": list(labels)})
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "x", ANSWER_MIME: r})
                    for r in records]
    return nbformat.v4.new_notebook(cells=[cell])


def _assignment():
    from tmath.grade import Assignment

    return Assignment(["tour.ipynb"], {"ex-tour-2": 1, "ex-tour-4": 1, "ex-tour-5": 1}, name="week1")


def test_an_answer_no_float_holds_is_shown_and_wrong_not_a_crash():
    """``10**400`` recorded in an answer cell (:data:`hostile_notebooks.HUGE`, a record written
    by hand): the grader crashed in the feedback (OverflowError in ``_shown``), after every
    notebook had run, with no grades.csv for anyone."""
    from tmath.grade import Execution, Submission, _feedback, _row, grades_table

    text = hostile_notebooks.HUGE  # the three values it records, as the kernel's JSON carries them
    assert "10**400" in text and "7 * 10**4000" in text
    records = [{"label": "ex-tour-2", "value": 10**400}, {"label": "ex-tour-4", "value": -10**400},
               {"label": "ex-tour-5", "value": 7 * 10**4000}]
    nb = nbformat.reads(nbformat.writes(_executed(records)), as_version=4)  # through JSON, as read
    assignment = _assignment()
    row = _row(Submission("mallory"), [Execution("tour.ipynb", nb)], assignment)
    assert row.results == {"ex-tour-2": False, "ex-tour-4": False, "ex-tour-5": False}
    feedback = _feedback(row, assignment.total)
    assert "ex-tour-2：读到 1e+400，✗ 不是一个有效的数（太大，超出浮点数的范围）" in feedback, feedback
    assert "ex-tour-4：读到 -1e+400" in feedback and "ex-tour-5：读到 7e+4000" in feedback
    assert "mallory,已评分,0,3,0,0,0" in grades_table([row], assignment)


# --- zip members (finding 2) -------------------------------------------------------------------


def test_a_zip_member_with_an_absolute_name_is_read_from_the_zip(tmp_path):
    """mallory's zip names its member by a path of the grader's machine (alice's notebook,
    ``/proc/self/cwd/submitted/alice.ipynb`` in the report): the grader read that file, and
    graded mallory on alice's answers. A member is read from the zip, whatever its name."""
    from tmath.grade import collect

    submitted = tmp_path / "submitted"
    (submitted / "alice").mkdir(parents=True)
    alice = submitted / "alice" / "tour.ipynb"
    alice.write_text("alice's answers", encoding="utf-8")
    with zipfile.ZipFile(submitted / "mallory.zip", "w") as z:
        z.writestr(str(alice), "mallory's own")  # an absolute name
        z.writestr("week1/tour.ipynb", "plain")
    subs = {s.student: s for s in collect(submitted, tmp_path / "scratch")}
    got = dict(subs["mallory"].notebooks)
    assert set(got) == {f"mallory.zip:{alice}", "mallory.zip:week1/tour.ipynb"}, got
    assert got[f"mallory.zip:{alice}"].read_text(encoding="utf-8") == "mallory's own"
    for path in got.values():
        assert path.resolve().is_relative_to((tmp_path / "scratch").resolve()), path


# --- reading answers (finding 3) ---------------------------------------------------------------


class _Counted(str):
    """A label that counts how often it is compared (a list's ``in`` compares with each item)."""

    compared = 0

    def __eq__(self, other):
        type(self).compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_reading_answers_is_linear_in_the_labels_asked():
    """Many distinct labels in answer-tagged Markdown cells (a 3.6 MB notebook added 3 min 48 s
    after its kernel ended): each new label was looked up in the list of those before it. The
    count of comparisons, not a time: ``benchmarks/bench_grade.py`` times it."""
    from tmath.grade import read_answers

    n = 3000
    cells = [{"cell_type": "markdown", "source": "", "metadata": {
        "tags": ["answer"], "tmath": {"answers": [_Counted(f"ex-x-{i}")]}}} for i in range(n)]
    _Counted.compared = 0
    found = read_answers(SimpleNamespace(cells=cells))
    assert len(found.asked) == n
    assert _Counted.compared < 10 * n, f"{_Counted.compared} comparisons for {n} labels"


# --- grades.csv, manual.csv and the feedback (finding 6) --------------------------------------

#: What a spreadsheet program evaluates at the start of a cell (LibreOffice and Excel; the
#: fullwidth forms too, which a Chinese input method types), after any spaces.
EVALUATED = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: A cell a spreadsheet reads as a number or a date, losing what it says (00123 -> 123).
NUMBER = re.compile(r"[\s\d.,:/+\-%eE]*\d[\s\d.,:/+\-%eE]*")

HOSTILE_NAMES = ["=HYPERLINK(\"http://x\";\"点我\")", "00123", "\uff1d1+1", "+1", "-2+3", "@SUM(A1)",
                 " =1", "\t=1", "3-4", "alice"]
HOSTILE_STATUS = "执行出错：tour.ipynb 第 2 个单元格 ValueError: a\r=1+1\rb\n=2+2\t-3"


def _spreadsheet_check(text: str, names: int = 1) -> list[list[str]]:
    """The rows of ``text`` (a CSV file): no cell breaks a row (no line break or tab in any
    cell: a bare ``\\r`` split a row in LibreOffice), and every cell a spreadsheet would
    evaluate, or read as a number, starts with ``'``; the first ``names`` cells of a row are
    names, whose number-like text must stay text too. The scores stay numbers."""
    lines = text.split("\n")
    assert lines[-1] == "" and "\r" not in text, "one line per row"
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == len(lines) - 1
    for row in rows:
        for i, cell in enumerate(row):
            assert "\t" not in cell and "\n" not in cell and "\r" not in cell, cell
            if cell.lstrip()[:1] in EVALUATED or (i < names and NUMBER.fullmatch(cell)):
                raise AssertionError(f"a spreadsheet evaluates {cell!r}")
    return rows


def test_grades_csv_cells_are_text_a_spreadsheet_never_evaluates():
    from tmath.grade import Graded, grades_table

    assignment = _assignment()
    rows = [Graded(name, HOSTILE_STATUS, {"ex-tour-2": True, "ex-tour-4": False, "ex-tour-5": None}, [],
                   assignment.points) for name in HOSTILE_NAMES]
    table = _spreadsheet_check(grades_table(rows, assignment))
    assert [r[0] for r in table[1:]] == ["'" + n.replace("\t", " ") if n != "alice" else n
                                         for n in HOSTILE_NAMES]
    assert table[1][2:] == ["1", "3", "1", "0", ""], "the scores stay numbers"
    assert table[1][1] == "执行出错：tour.ipynb 第 2 个单元格 ValueError: a ⏎ =1+1 ⏎ b ⏎ =2+2 -3"


def test_manual_csv_cells_are_text_a_spreadsheet_never_evaluates():
    from tmath.grade import Assignment, Execution, Submission, manual_table

    assignment = Assignment(["tour.ipynb"], {}, {"ex-tour-2": 1}, name="week1")
    cell = nbformat.v4.new_code_cell("=1+1\r-2\n@3\tx")
    cell.metadata.update(tags=["answer"], tmath={"exercise": "ex-tour-2", "answers": []})
    nb = nbformat.v4.new_notebook(cells=[cell])
    subs = [Submission(name) for name in HOSTILE_NAMES]
    runs = {name: [Execution("=cmd|' /C calc'!A0.ipynb", nb)] for name in HOSTILE_NAMES}
    table = _spreadsheet_check(manual_table(subs, runs, assignment))
    assert table[1][2] == "'=cmd|' /C calc'!A0.ipynb" and table[1][5] == "'=1+1 ⏎ -2 ⏎ @3 x"


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return path


def test_grade_merge_keeps_student_ids_as_text_and_takes_123_for_00123(tmp_path, capsys):
    """Student ID 00123 is written ``'00123`` (a spreadsheet keeps it); a spreadsheet that
    still turned it into 123 in one of the two files: the merge takes 123 for 00123 when only
    one student has that number, and refuses, naming the row, when two do."""
    from tmath.cli import main
    from tmath.grade import HEADER, MANUAL_HEADER

    grades = _write_csv(tmp_path / "grades.csv", [
        [*HEADER, "ex-tour-2"], ["'00123", "已评分", "1", "1", "1"], ["'=1+1", "超时", "0", "1", ""]])
    manual = _write_csv(tmp_path / "manual.csv", [
        MANUAL_HEADER, ["123", "ex-crossover-2", "'00123.ipynb", "1", "1", ""],
        ["'=1+1", "ex-crossover-2", "", "1", "0.5", ""]])
    out = tmp_path / "total.csv"
    assert main(["grade-merge", str(grades), str(manual), "--out", str(out)]) == 0, capsys.readouterr().err
    rows = _spreadsheet_check(out.read_text(encoding="utf-8-sig"))
    assert rows[1:] == [["'00123", "已评分", "2", "2", "1", "1"], ["'=1+1", "超时", "0.5", "2", "", "0.5"]]
    # two students whose IDs are the number 123: which one is meant?
    _write_csv(tmp_path / "grades.csv", [
        [*HEADER, "ex-tour-2"], ["'00123", "已评分", "1", "1", "1"], ["'0123", "已评分", "1", "1", "1"]])
    out.unlink()
    assert main(["grade-merge", str(grades), str(manual), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "第 2 行（学生 123，练习 ex-crossover-2）：学号 123 可能是 00123、0123 中的任何一个" in err, err
    assert not out.exists()


def test_feedback_shows_the_students_text_never_as_markdown_or_html():
    from tmath.grade import Graded, _feedback

    row = Graded("<b>x</b>", "执行出错：ValueError: <img src=x onerror=alert(1)>\n# 满分 **7/7** [领奖](http://x)",
                 {"ex-tour-2": None},
                 ["ex-tour-2：没有读到答案：答案单元格运行出错（ValueError: `rm` _x_ <script>）"],
                 {"ex-tour-2": 1})
    text = _feedback(row, 1)
    assert "<" not in text and ">" not in text, text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\\*\\*7/7\\*\\* \\[领奖\\](http://x)" in text
    assert "\n# 满分" not in text and "\\`rm\\` \\_x\\_" in text
    assert text.startswith("# 作业反馈：&lt;b&gt;x&lt;/b&gt;\n")


# --- which notebooks are graded (findings 7 and 8) -------------------------------------------


def _release(tmp_path: Path, *names: str):
    from tmath.grade import Assignment

    return Assignment(list(names), {"ex-tour-2": 1}, name="week1")


def test_one_notebook_per_release_notebook_the_others_listed(tmp_path):
    """An honest student hands in a blank ``tour_draft.ipynb`` beside ``tour.ipynb``: both ran,
    and the draft's empty answers overwrote the real ones (0/7, 已评分, no word of it)."""
    from tmath.grade import _status, collect, select

    submitted = tmp_path / "submitted"
    (submitted / "judy").mkdir(parents=True)
    for name in ("tour.ipynb", "tour_draft.ipynb", "zz.ipynb"):
        (submitted / "judy" / name).write_text("{}", encoding="utf-8")
    sub = collect(submitted, tmp_path / "scratch")[0]
    select(sub, _release(tmp_path, "tour.ipynb"))
    assert [n for n, _ in sub.notebooks] == ["tour.ipynb"]
    assert sub.skipped == ["tour_draft.ipynb（不是这次作业发下的笔记本）",
                           "zz.ipynb（不是这次作业发下的笔记本）"]
    assert _status(sub, [], []) == ("已评分；没有评分的笔记本：tour_draft.ipynb（不是这次作业发下的笔记本）、"
                                    "zz.ipynb（不是这次作业发下的笔记本）")


def test_nbgrader_layout_grades_only_the_releases_assignment(tmp_path):
    """``submitted/<student>/week1/`` and ``week2/``, graded with ``--release release/week1``:
    every week-2 notebook ran too (twice the time; 状态 named week-2 errors)."""
    from tmath.grade import collect, select

    submitted = tmp_path / "submitted"
    for path in ("kim/week1/tour.ipynb", "kim/week2/tour.ipynb", "kim/week2/memory.ipynb",
                 "lee/tour.ipynb", "lee/old/tour.ipynb", "one/我的作业.ipynb"):
        (submitted / path).parent.mkdir(parents=True, exist_ok=True)
        (submitted / path).write_text("{}", encoding="utf-8")
    with zipfile.ZipFile(submitted / "zed.zip", "w") as z:
        z.writestr("week2/memory.ipynb", "{}")
        z.writestr("week1/sub/memory.ipynb", "{}")
        z.writestr("week1/tour.ipynb", "{}")
    subs = {s.student: s for s in collect(submitted, tmp_path / "scratch")}
    for sub in subs.values():
        select(sub, _release(tmp_path, "memory.ipynb", "tour.ipynb"))
    assert [n for n, _ in subs["kim"].notebooks] == ["week1/tour.ipynb"]
    assert subs["kim"].skipped == ["week2/memory.ipynb（不是这次作业 week1 的文件夹里的）",
                                   "week2/tour.ipynb（不是这次作业 week1 的文件夹里的）"]
    assert [n for n, _ in subs["lee"].notebooks] == ["tour.ipynb"]  # the release's own path
    assert subs["lee"].skipped == ["old/tour.ipynb（与 tour.ipynb 同名，只评了后者）"]
    assert [n for n, _ in subs["zed"].notebooks] == ["zed.zip:week1/sub/memory.ipynb",
                                                     "zed.zip:week1/tour.ipynb"]
    assert subs["one"].notebooks == [] and "都不同名" in subs["one"].problems[0]
    # a release of one notebook: a student's one notebook is it, whatever its name, but not one
    # in a folder of its own (next week's)
    (submitted / "solo" / "week2").mkdir(parents=True)
    (submitted / "solo" / "week2" / "memory.ipynb").write_text("{}", encoding="utf-8")
    subs = {s.student: s for s in collect(submitted, tmp_path / "scratch2")}
    for sub in subs.values():
        select(sub, _release(tmp_path, "tour.ipynb"))
    assert [n for n, _ in subs["one"].notebooks] == ["我的作业.ipynb"] and not subs["one"].skipped
    assert subs["solo"].notebooks == []
    assert subs["solo"].skipped == ["week2/memory.ipynb（不是这次作业发下的笔记本）"]


# --- the sandbox's processes (findings 4, 5 and 9) --------------------------------------------

REPO_VENV = Path(sys.prefix)


def _kit():
    """The book's own venv as the sandbox's Python (the grader refuses it: it has the keys; these
    attacks need none, and the course kit's venv takes minutes to install)."""
    from tmath import sandbox

    return sandbox.KitEnv(REPO_VENV / "bin" / "python", REPO_VENV, Path(sys.base_prefix))


def _as_a_normal_user(monkeypatch):
    """Grade as a normal user: the sandbox as the grader makes it for one (a user namespace of
    bwrap's), run by a process that is uid 1000 in a user namespace of its own (owning, as root
    does outside, the files it reads: the venv under /root)."""
    from tmath import sandbox

    if os.geteuid() == 0:
        if not shutil.which("unshare"):
            pytest.skip("unshare (util-linux) is missing")
        monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
        real_run = sandbox.run
        monkeypatch.setattr(sandbox, "run", lambda cmd, *a: real_run(
            ["unshare", "--user", "--map-user=1000", "--map-group=1000", *cmd], *a))


def _grade_one(tmp_path: Path, code: str, memory: int | None = None):
    """:func:`tmath.grade.execute` on a notebook whose first cell divides by zero and whose
    second is ``code``: (the execution's problem, the text of the executed notebook's outputs)."""
    from tmath.grade import execute

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0"), nbformat.v4.new_code_cell(code)])
    path = tmp_path / "tour.ipynb"
    nbformat.write(nb, path)
    dest = tmp_path / "autograded" / "tour.ipynb"
    run = execute("tour.ipynb", path, dest, 120, _kit(), 0, 60, *[memory] if memory else [])
    outputs = json.dumps([c.get("outputs") for c in run.nb.cells], ensure_ascii=False) if run.nb else ""
    return run, outputs


@pytest.mark.parametrize("user", ["root", "normal"])
def test_the_kernel_cannot_reach_the_workers_output(tmp_path, monkeypatch, user):
    """The kernel ran as the worker's user, took the worker's output pipe (``pidfd_getfd``) and
    wrote its own "executed" notebook: status ok despite a ZeroDivisionError, text the code
    never printed (:data:`hostile_notebooks.PIDFD`). As root the worker was the only copy's
    holder; as a normal user bwrap's pid 1 held one too."""
    if user == "root" and os.geteuid() != 0:
        pytest.skip("grading as root needs root")
    if user == "normal":
        _as_a_normal_user(monkeypatch)
    run, outputs = _grade_one(tmp_path, hostile_notebooks.PIDFD)
    assert run.nb is not None and "FORGED-BY-THE-KERNEL" not in outputs, (run.problem, outputs[:2000])
    assert "ZeroDivisionError" in outputs and "took []" in outputs, outputs[:2000]
    assert run.problem is None


def test_the_sandbox_never_sees_the_graders_environment(tmp_path, monkeypatch):
    """Graded as a normal user, the notebook read the teacher's environment (a token) in
    ``/proc/1/environ``: bwrap's, which the grader started with its own environment."""
    _as_a_normal_user(monkeypatch)
    monkeypatch.setenv("TMATH_TEACHER_TOKEN", "teacher-token-8f2b")
    run, outputs = _grade_one(tmp_path, hostile_notebooks.ENVIRON)
    assert run.nb is not None and "TMATH_GRADING=1" in outputs, "it read its own environment"
    assert "teacher-token-8f2b" not in outputs, outputs[:3000]


def test_a_sandboxs_memory_is_bounded_as_a_whole(tmp_path):
    """Four processes of one notebook, each under its 4 GiB address-space limit, held 10 GiB
    together (:data:`hostile_notebooks.HOG` holds 2.4 GiB, in 600 MiB each): with the sandbox
    held to 1 GiB as a whole they cannot (a cgroup: this machine's, v1 or v2)."""
    from tmath import sandbox

    with sandbox.cgroups(0, 2**30) as groups:
        if not groups:
            pytest.skip("no cgroup this process may make: the README says what holds then")
    run, outputs = _grade_one(tmp_path, hostile_notebooks.HOG, memory=2**30)
    assert "held 2400 MiB" not in outputs, outputs[:2000]


def test_the_sandbox_tells_the_kits_check_not_to_hash(tmp_path):
    """The kit's answer cells hashed for seconds while grading (an answered tour notebook took 22
    to 65 s); in the sandbox ``TMATH_GRADING`` tells them to record the answer unchecked."""
    code = "import os\nprint(os.environ.get('TMATH_GRADING'))"
    run, outputs = _grade_one(tmp_path, code)
    assert '"1\\n"' in outputs, outputs


def test_grading_env_makes_the_kits_answer_cell_record_without_checking(monkeypatch):
    """The kit's ``answer_record`` (the kit edition is simulated: its flag set) records the
    value without a check under ``TMATH_GRADING=1``; elsewhere it checks."""
    import tmath.exercises as ex

    ex._load()
    monkeypatch.setattr(ex, "_KIT", True)
    monkeypatch.setattr(ex, "check", lambda *a: (_ for _ in ()).throw(AssertionError("hashed")))
    monkeypatch.setenv("TMATH_GRADING", "1")
    message, record = ex.answer_record("ex-tour-2", 108)
    assert record == {"label": "ex-tour-2", "value": 108} and "评分时不自查" in message
    monkeypatch.setenv("TMATH_GRADING", "0")
    with pytest.raises(AssertionError, match="hashed"):
        ex.answer_record("ex-tour-2", 108)


def test_bwrap_is_started_with_a_clean_environment(monkeypatch):
    from tmath import sandbox

    seen = {}

    class Popen:
        def __init__(self, cmd, **kw):
            seen.update(kw)
            raise OSError("stop")

    monkeypatch.setenv("TMATH_TEACHER_TOKEN", "x")
    monkeypatch.setattr(subprocess, "Popen", Popen)
    with pytest.raises(OSError):
        sandbox.run(["true"], b"", 1)
    assert seen.get("env") is not None and "TMATH_TEACHER_TOKEN" not in seen["env"]

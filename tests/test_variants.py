"""Every student their own numbers (issue 39, item 3; :mod:`tmath.variants`).

Kits for three students are built once for the module (``scripts/student_kit.py --roster``):
two students' kits differ in at least 30 exercise parts; each student's right answers score full
marks through the grader's own row builder, a classmate's copied answers score 0 on every part
whose keys differ; the students' keys are recomputed here from the formulas, not by the key
functions.
"""

from __future__ import annotations

import hmac
import itertools
import json
import math
import re
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

SECRET = b"a course secret of the test, 32+ bytes long"
STUDENTS = ("00123", "alice")
#: Two students of this secret differ in 33 of the 34 varied parts; a random pair of students,
#: in 30 on average (tmath.variants says which parts may coincide, grade-keys lists them).


@pytest.fixture(scope="module")
def roster(tmp_path_factory):
    from tmath.variants import Roster

    d = tmp_path_factory.mktemp("roster")
    (d / "roster.csv").write_text("学号\n" + "\n".join(STUDENTS) + "\n", encoding="utf-8")
    (d / "secret.txt").write_bytes(SECRET + b"\n")
    return Roster.load(d / "roster.csv", d / "secret.txt")


@pytest.fixture(scope="module")
def kits(roster, tmp_path_factory) -> dict[str, Path]:
    import student_kit

    out = tmp_path_factory.mktemp("kits")
    kits = student_kit.build_student_kits(out, roster)
    return {k.parent.name: k for k in kits}


def _statements(kit: Path) -> dict[str, str]:
    """exercise label -> the statement's text in a kit's notebooks."""
    found = {}
    for path in (kit / "notebooks").rglob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            for part in re.split(r"\*\*练习 \d+\*\*", cell.source)[1:]:  # the kit's "**练习 12**"
                label = re.search(r'check\([^)]*"(ex-[\w-]+?)(?:/[\w-]+)?"\)', part)
                if label:
                    found.setdefault(label[1], part)
    return found


# --- the draw ------------------------------------------------------------------------------------


def test_the_roster_keeps_ids_as_text_and_the_draw_is_the_hmac_of_the_secret(roster):
    from tmath.variants import PARAMETERS, draw

    assert roster.students == STUDENTS  # 00123 stays 00123, the header row is skipped
    for student, exercise in itertools.product(STUDENTS, PARAMETERS):
        params = PARAMETERS[exercise]
        names = list(params)
        combos = [c for c in itertools.product(*[(params[n].default, *params[n].choices) for n in names])
                  if c != tuple(params[n].default for n in names)]
        mac = hmac.new(SECRET, f"{exercise}|{student}".encode(), "sha256").digest()
        picked = combos[int.from_bytes(mac, "big") % len(combos)]
        assert draw(SECRET, student, exercise) == dict(zip(names, picked, strict=True))


def test_a_bad_roster_or_secret_is_refused_in_chinese(tmp_path):
    from tmath.variants import Roster, VariantError

    (tmp_path / "r.csv").write_text("a/b\n", encoding="utf-8")
    (tmp_path / "s.txt").write_text("short", encoding="utf-8")
    (tmp_path / "ok.txt").write_bytes(SECRET)
    with pytest.raises(VariantError, match="第 1 行.*不能用作文件夹名"):
        Roster.load(tmp_path / "r.csv", tmp_path / "ok.txt")
    (tmp_path / "good.csv").write_text("alice\n", encoding="utf-8")
    with pytest.raises(VariantError, match="至少要 16 个字节"):
        Roster.load(tmp_path / "good.csv", tmp_path / "s.txt")
    with pytest.raises(VariantError, match="没有 --secret-file"):
        Roster.load(tmp_path / "r.csv", None)


# --- the keys, recomputed ------------------------------------------------------------------------


def _independent(label: str, p: dict) -> float | None:
    """The key of ``label`` for parameters ``p`` from the formula, with the models' sizes read
    from their configs (None: not recomputed here)."""
    from tmath import count_params, get_hardware, preset

    ex = label.split("/")[0]
    if ex == "ex-units-1":
        cfg = preset(p["model"])
        t, f, d = p["tokens"], cfg.intermediate_size, cfg.hidden_size
        flops, nbytes = 2 * t * f * d, 2 * (t * f + f * d + t * d)
        return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}[label.split("/")[1]]
    if ex == "ex-fwd-1":
        elements = preset("gpt3-175b").num_heads * p["tokens"] ** 2
        return elements if label.endswith("elements") else 2 * elements / 1e6
    if ex == "ex-data-2":
        n = p["microbatches"]
        return {"zero3": 3 * n / 2, "zero2": (n + 1) / 2, "fsdp2": (n + 2) / 2}[label.split("/")[1]]
    if ex in ("ex-mem-1", "ex-data-4"):
        n = p["gpus"]
        params = 7.5e9 if ex == "ex-data-4" else count_params(preset(p["model"])).total
        stage = int(label.split("/")[1].replace("zero", ""))
        per_param = {0: 16, 1: 4 + 12 / n, 2: 2 + 14 / n, 3: 16 / n}[stage]
        return params * per_param / 1e9
    if ex == "ex-arch-3":
        w = 2 * count_params(preset(p["model"])).total
        return w / 1e9 if label.endswith("gb") else math.ceil(w / get_hardware(p["gpu"]).hbm_bytes)
    if ex == "ex-arch-4":
        s = 16 * count_params(preset(p["model"])).total
        return s / 1e12 if label.endswith("tb") else math.ceil(s / get_hardware(p["gpu"]).hbm_bytes)
    if ex == "ex-units-2":
        hw = get_hardware(p["gpu"])
        b = 2 if label.endswith("bf16") else 4
        return math.ceil(hw.dense_flops / hw.hbm_bandwidth * 3 * b / 2 - 1e-9)
    if ex == "ex-sixpt-4":
        from tmath import roofline

        run = roofline.reported_run("llama3-70b")
        flops = 6 * count_params(preset("llama3-70b")).active * run.tokens
        peak = get_hardware(run.gpu).dense_flops
        mfu = 0.40 if label.endswith("mfu40") else flops / (run.gpu_hours * 3600 * peak)
        return flops / (peak * mfu) / 3600 / p["gpus"] / 24
    if ex == "ex-tour-1":
        cfg = preset(p["model"])
        total = count_params(cfg).total
        share = 100 * (cfg.vocab_size + cfg.max_position) * cfg.hidden_size / total
        # outside the embedding tables: L layers of 12d^2 + 13d and the final layer norm's 2d
        d = cfg.hidden_size
        layers = cfg.num_layers * (12 * d**2 + 13 * d) + 2 * d
        return layers if label == "ex-tour-1" else share
    return None


def test_every_students_keys_are_those_of_the_formulas(roster):
    """Each recomputed key is right for its student under the student's keys (the grader's
    check), and every varied part of the students is recomputed but a few."""
    from tmath.exercises import check
    from tmath.variants import varied_labels

    done = set()
    for student in STUDENTS:
        draws = roster.draws(student)
        with roster.keys(student):
            for label in varied_labels():
                value = _independent(label, draws[label.split("/")[0]])
                if value is None:
                    continue
                done.add(label)
                assert check(value, label), (student, label, draws[label.split("/")[0]], value)
    assert len(done) >= 20, sorted(done)


# --- the kits ------------------------------------------------------------------------------------


def test_two_students_kits_differ_in_30_parts(kits, roster):
    """Two kits state at least 30 parts with other numbers, and these parts' keys differ beyond
    the tolerance (a key does not accept the other's)."""
    from tmath.variants import PARAMETERS, key_value, varied_labels

    a, b = _statements(kits["alice"]), _statements(kits["00123"])
    da, db = roster.draws("alice"), roster.draws("00123")
    differ = []
    with roster.keys("alice"):
        from tmath.exercises import _KEYS

        for label in varied_labels():
            ex = label.split("/")[0]
            if not _KEYS[label].accepts(key_value(label, db[ex])):
                differ.append(label)
                assert a[ex] != b[ex], (label, da[ex], db[ex])
    assert len(differ) >= 30, differ
    # the statement shows the student's numbers; the book's stay in the book
    assert set(a) == set(b) and all(a[ex] == b[ex] for ex in a if ex not in PARAMETERS)
    assert "`var-" not in "".join(a.values())


def test_the_variant_kit_has_no_hash_of_a_varied_part_and_says_so(kits):
    import zipfile

    from tmath.variants import varied_labels

    kit = kits["00123"]
    (wheel,) = kit.glob("tmath-*.whl")
    with zipfile.ZipFile(wheel) as z:
        hashes = z.read("tmath/_answer_hashes.py").decode()
        assert "tmath/variants.py" in z.namelist() and not any("answer_keys" in n for n in z.namelist())
    keys_part = hashes.split("GRADED =")[0]
    for label in varied_labels():
        assert repr(label) not in keys_part and repr(label) in hashes.split("GRADED =")[1]
    readme = (kit / "README.md").read_text(encoding="utf-8")
    assert "为你（00123）生成" in readme and "由老师评分" in readme
    assert (kit.parent / "transformer-math-kit.zip").is_file()


# --- grading -------------------------------------------------------------------------------------


def _executed(answers: dict[str, float]):
    from tmath.exercises import ANSWER_MIME

    cells = [nbformat.v4.new_code_cell(
        "", metadata={"tags": ["answer"], "tmath": {"answers": [label]}},
        outputs=[nbformat.v4.new_output("display_data", data={ANSWER_MIME: {"label": label, "value": v},
                                                               "text/plain": ""})])
        for label, v in answers.items()]
    return nbformat.v4.new_notebook(cells=cells)


def _right_answers(roster, student: str) -> dict[str, float]:
    from tmath.variants import key_value, varied_labels

    draws = roster.draws(student)
    return {label: key_value(label, draws[label.split("/")[0]]) for label in varied_labels()}


def test_the_grader_scores_own_answers_full_and_copied_ones_zero_on_the_differing_parts(roster):
    from tmath import grade
    from tmath.variants import keys_table, varied_labels

    labels = varied_labels()
    assignment = grade.Assignment(["x.ipynb"], dict.fromkeys(labels, 1))

    def graded(student, answers):
        sub = grade.Submission(student)
        return grade._graded_row(sub, [grade.Execution("x.ipynb", _executed(answers))], assignment, roster)

    same = {}  # (student, label) -> classmates with the same answer, as keys.csv says
    for row in list(__import__("csv").reader(keys_table(roster).splitlines()))[1:]:
        same[row[0].lstrip("'"), row[1]] = set(filter(None, row[5].split("、")))
    for student in STUDENTS:
        own = graded(student, _right_answers(roster, student))
        assert own.score == len(labels), (student, own.feedback)
    copied = graded("alice", _right_answers(roster, "00123"))
    for label in labels:
        assert copied.results[label] == ("00123" in same["alice", label]), label
    assert sum(not ok for ok in copied.results.values()) >= 30
    # the book's answers are wrong for a student on the roster; right for one who is not
    book = {label: float(__import__("tmath").exercises._KEYS[label].compute()) for label in labels}
    # (a part that depends only on parameters alice drew as the book's, such as ex-mem-1/0 on
    # the model alone, has the book's key: right there, wrong everywhere else)
    mine = _right_answers(roster, "alice")
    with roster.keys("alice"):
        from tmath.exercises import _KEYS

        same_as_book = {label for label in labels if _KEYS[label].accepts(book[label])}
    assert len(same_as_book) <= 3 and all(mine[label] != book[label] for label in set(labels) - same_as_book)
    assert {label for label, ok in graded("alice", book).results.items() if ok} == same_as_book
    stranger = graded("carol", book)
    assert stranger.score == len(labels) and stranger.status.startswith("不在名单上")


def test_grade_keys_writes_every_students_keys(roster, tmp_path):
    from tmath.cli import main
    from tmath.variants import varied_labels

    (tmp_path / "r.csv").write_text("\n".join(STUDENTS), encoding="utf-8")
    (tmp_path / "s.txt").write_bytes(SECRET)
    out = tmp_path / "keys.csv"
    assert main(["grade-keys", "--roster", str(tmp_path / "r.csv"), "--secret-file", str(tmp_path / "s.txt"),
                 "--out", str(out)]) == 0
    rows = out.read_text(encoding="utf-8-sig").splitlines()
    assert rows[0] == "学生,练习,参数,答案,容差,同答案的同学"
    assert len(rows) == 1 + len(STUDENTS) * len(varied_labels())
    fwd = next(r for r in rows if r.startswith("00123,ex-fwd-1/elements,"))
    tokens = roster.draws("00123")["ex-fwd-1"]["tokens"]
    assert fwd.split(",")[3] == str(96 * tokens * tokens)


def test_without_a_roster_the_book_shows_the_defaults():
    from tmath.variants import PARAMETERS, texts

    pages = {p: json.loads(p.read_text(encoding="utf-8")) for p in (ROOT / "book").rglob("*.ipynb")}
    glued = {}
    for nb in pages.values():
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                meta = out.get("metadata", {}).get("scrapbook", {})
                if meta.get("name", "").startswith("var-"):
                    glued[meta["name"]] = "".join(out["data"][meta["mime_prefix"] + "text/plain"])
    for exercise in PARAMETERS:
        from tmath.variants import defaults

        for name, text in texts(exercise, defaults(exercise)).items():
            assert glued.get(name) == repr(text), (name, glued.get(name))

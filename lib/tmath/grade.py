"""Grade handed-in notebooks: ``python -m tmath grade SUBMISSIONS_DIR --out grades.csv``.

The teacher's side of the course kit (``make student-kit``).  Runs in the full
edition, where the answer keys are computed; the kit's tmath refuses to grade.

**Layout** (nbgrader's, so that a JupyterHub course with nbgrader's exchange
can point this at its ``submitted/`` folder as it is): one entry per student in
``SUBMISSIONS_DIR``,

- a folder ``SUBMISSIONS_DIR/<student>/`` holding the student's notebooks at any depth
  (nbgrader: ``submitted/<student>/<assignment>/<notebook>.ipynb``), or
- one file ``SUBMISSIONS_DIR/<student>.ipynb``, or a zip of notebooks
  ``<student>.zip`` (otter-grader's way of collecting).

Next to ``--out`` it writes, with nbgrader's folder names,
``autograded/<student>/...`` (the notebooks as executed) and
``feedback/<student>.md`` (in Chinese: each exercise right or not, with the
tolerance used, never the key).

**Execution** (as nbgrader's autograde): each notebook runs from the top in a new
kernel of this Python (``python3``, whatever kernel the notebook names), its saved
outputs cleared first, with the history in memory, errors allowed (a cell that
raises does not stop the cells after it), and ``--timeout`` seconds for the whole
notebook's cells, counted from the moment its kernel answers: the kernel gets
:data:`KERNEL_START_SECONDS` of its own to start, so a busy machine (many notebooks
graded at once) does not fail a student before any cell has run.  One process per
notebook: nothing a notebook does stops the run.  On Linux and macOS the kernel talks
over Unix sockets in a folder of its own (ZeroMQ's ``ipc`` transport), not TCP ports:
with TCP, a port the client picked for the kernel can be taken by another program before
the kernel binds it, and ipykernel, failing to bind its IOPub or heartbeat port, does not
exit but hangs, so the notebook would fail after :data:`KERNEL_START_SECONDS`.

**Answers** are read only from the cells tagged ``answer`` (the student
edition's answer cells, :mod:`student_edition`): each ``my_answer(label, value)``
call leaves a record (:data:`tmath.exercises.ANSWER_MIME`) in the cell's output;
the last record of a label counts.  The exercises graded are those the answer
cells ask (their ``metadata.tmath.answers``) in the released notebooks
(``--release``, nbgrader's ``release/`` folder or the kit's ``notebooks/``), or,
without it, in any notebook handed in.  Each is checked by
:func:`tmath.exercises.check` against the real key: the same grid rule the
student's self-check applied.

``grades.csv``: one row per student (学生, 状态, 得分, 满分) and one column per
exercise: 1 right, 0 wrong, empty when not answered.  UTF-8 with a byte-order
mark, which spreadsheet programs need to show Chinese.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["add_grade_parser", "run_grade", "grade", "read_answers", "Graded"]

ANSWER_TAG = "answer"
HEADER = ["学生", "状态", "得分", "满分"]
#: Extra seconds the parent allows a notebook's process beyond the notebook's own limit
#: (kernel start and shutdown) before it kills it.
GRACE_SECONDS = 120
#: How long a notebook's kernel may take to start, outside its ``--timeout`` (nbclient's own
#: default is 60 s: a kernel started beside a dozen others on two cores can take longer).
KERNEL_START_SECONDS = 300


class GradeError(Exception):
    """A usage error: printed as one line, exit status 2."""


def add_grade_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tmath grade`` on the CLI's sub-command parsers."""
    p = subparsers.add_parser(
        "grade", help="评分：重新运行交上来的笔记本，读出答案单元格，与答案核对",
        description="评分：在干净的内核里限时重新运行每个学生交来的笔记本，从答案单元格读出答案，"
                    "与完整版的答案核对，写出成绩表和每个学生的反馈。",
    )
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                   help="交上来的作业：每个学生一个文件夹（nbgrader 的 submitted/），"
                        "或一个 .ipynb / .zip 文件")
    p.add_argument("--out", required=True, metavar="grades.csv", help="成绩表的路径")
    p.add_argument("--timeout", type=float, default=600, metavar="秒",
                   help="每个笔记本的单元格从头运行完的时限，单位秒"
                        "（默认 600；内核启动另有 300 秒，不计在内）")
    p.add_argument("--release", metavar="DIR",
                   help="发给学生的笔记本所在的文件夹（课程包的 notebooks/）：据它决定哪些题计分；"
                        "默认按交上来的笔记本里的答案单元格")
    p.add_argument("--jobs", type=int, default=1, help="同时运行几个笔记本（默认 1）")
    p.set_defaults(func=run_grade)
    return p


def run_grade(args: argparse.Namespace) -> int:
    """The CLI's ``grade``: returns the exit status."""
    try:
        rows = grade(Path(args.submissions), Path(args.out), timeout=args.timeout,
                     release=Path(args.release) if args.release else None, jobs=args.jobs)
    except GradeError as e:
        print(f"tmath grade：错误：{e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    print(f"已评 {len(rows)} 个学生：成绩表 {out}，反馈 {out.parent / 'feedback'}，"
          f"运行过的笔记本 {out.parent / 'autograded'}")
    return 0


# --- collecting -----------------------------------------------------------------------------------


@dataclass
class Submission:
    student: str
    notebooks: list[tuple[str, Path]] = field(default_factory=list)  # (name shown, file)
    problems: list[str] = field(default_factory=list)


def _visible(path: Path) -> bool:
    return not any(part.startswith(".") or part in ("__MACOSX", ".ipynb_checkpoints")
                   for part in path.parts)


def collect(folder: Path, scratch: Path) -> list[Submission]:
    """One :class:`Submission` per entry of ``folder`` (zips are unpacked into ``scratch``)."""
    subs = []
    for entry in sorted(p for p in folder.iterdir() if _visible(p.relative_to(folder))):
        if entry.is_dir():
            sub = Submission(entry.name)
            files = sorted(p for p in entry.rglob("*") if p.is_file() and _visible(p.relative_to(entry)))
            sub.notebooks = [(str(p.relative_to(entry)), p) for p in files if p.suffix == ".ipynb"]
            if not sub.notebooks:
                others = "、".join(str(p.relative_to(entry)) for p in files[:3]) or "空文件夹"
                sub.problems.append(f"没有找到笔记本：交来的是 {others}，没有 .ipynb 文件")
        elif entry.suffix == ".zip":
            sub = Submission(entry.stem)
            try:
                with zipfile.ZipFile(entry) as z:
                    names = [n for n in z.namelist() if n.endswith(".ipynb") and _visible(Path(n))]
                    target = scratch / "unzipped" / entry.stem
                    for n in names:
                        z.extract(n, target)
                    sub.notebooks = [(f"{entry.name}:{n}", target / n) for n in sorted(names)]
                if not names:
                    sub.problems.append(f"没有找到笔记本：{entry.name} 里没有 .ipynb 文件")
            except zipfile.BadZipFile:
                sub.problems.append(f"不是笔记本：{entry.name} 不是有效的 zip 文件")
        else:
            sub = Submission(entry.stem, [(entry.name, entry)])
        subs.append(sub)
    return subs


# --- executing ------------------------------------------------------------------------------------


@dataclass
class Execution:
    name: str
    nb: object | None  # the executed notebook (nbformat), None if it could not be read or run
    problem: str | None = None  # a notebook-level problem: not a notebook, timeout, dead kernel


def _read_notebook(path: Path):
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except UnicodeDecodeError:
        return None, "无法按 Jupyter 笔记本（.ipynb）读取：不是 UTF-8 文本"
    except ValueError as e:  # json.JSONDecodeError and nbformat's NotJSONError
        if type(e).__name__ in ("NotJSONError", "JSONDecodeError"):
            return None, "无法按 Jupyter 笔记本（.ipynb）读取：不是 JSON 文件"
        return None, f"无法按 Jupyter 笔记本（.ipynb）读取：{type(e).__name__}"
    except Exception as e:  # noqa: BLE001 - jsonschema's ValidationError and the like
        return None, f"无法按 Jupyter 笔记本（.ipynb）读取：内容不符合笔记本格式（{type(e).__name__}）"
    return nb, None


def execute(name: str, path: Path, dest: Path, timeout: float) -> Execution:
    """Run one notebook in a fresh process and kernel; the executed copy goes to ``dest``."""
    nb, problem = _read_notebook(path)
    if nb is None:
        return Execution(name, None, f"不是笔记本：{name} {problem}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    status_file = dest.with_name(dest.name + ".status.json")
    status_file.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="tmath-grade-") as work:
        src = Path(work) / path.name
        shutil.copyfile(path, src)
        try:
            subprocess.run(
                [sys.executable, "-m", "tmath.grade", str(src), str(dest), str(timeout), str(status_file)],
                cwd=work, capture_output=True, check=False,
                timeout=KERNEL_START_SECONDS + timeout + GRACE_SECONDS,
            )
        except subprocess.TimeoutExpired:
            pass
    status = json.loads(status_file.read_text(encoding="utf-8")) if status_file.exists() else {
        "status": "timeout"}
    status_file.unlink(missing_ok=True)
    executed = _read_notebook(dest)[0] if dest.exists() else None
    kind = status.get("status")
    if kind == "timeout":
        where = f"（停在第 {status['cell']} 个单元格）" if status.get("cell") else ""
        problem = f"超时：{name} 超过 {timeout:g} 秒没有运行完{where}，超时前读到的答案照常计分"
    elif kind == "dead":
        problem = f"内核崩溃：{name} 运行中内核退出，之前读到的答案照常计分"
    elif kind != "ok":
        problem = f"无法运行：{name}（{status.get('detail', kind)}）"
    return Execution(name, executed, problem)


def _worker(argv: list[str]) -> int:
    """Child process: execute ``src`` into ``dest`` within ``budget`` seconds, write a status file."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    src, dest, budget, status_file = argv
    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:  # nothing saved by the student counts: only what runs here
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    deadline = float("inf")  # set once the kernel answers: the budget is the cells'
    sockets = tempfile.mkdtemp(prefix="tmath-kernel-")
    client = NotebookClient(
        nb, km=kernel_manager(sockets), allow_errors=True, interrupt_on_timeout=False,
        startup_timeout=KERNEL_START_SECONDS,
        timeout_func=lambda cell: max(0.1, deadline - time.monotonic()),
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        resources={"metadata": {"path": str(Path(src).parent)}},
    )
    status: dict = {"status": "ok"}
    index = 0
    try:
        with client.setup_kernel():
            deadline = time.monotonic() + float(budget)
            for index, cell in enumerate(nb.cells):
                if time.monotonic() >= deadline:
                    raise CellTimeoutError(f"budget of {budget} s spent before cell {index + 1}")
                client.execute_cell(cell, index)
    except CellTimeoutError:
        status = {"status": "timeout", "cell": index + 1}
        # the kernel was stopped in this cell: its KeyboardInterrupt is the timeout, not an error
        cell = nb.cells[index]
        cell.outputs = [o for o in cell.get("outputs", []) if o.get("ename") != "KeyboardInterrupt"]
    except DeadKernelError:
        status = {"status": "dead"}
    except Exception as e:  # noqa: BLE001 - reported in the student's row, never raised
        status = {"status": "failed", "detail": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"}
    shutil.rmtree(sockets, ignore_errors=True)
    nbformat.write(nb, dest)
    Path(status_file).write_text(json.dumps(status), encoding="utf-8")
    return 0


def unix_sockets(folder: str) -> dict[str, str]:
    """A kernel manager's settings for a kernel listening on Unix sockets in ``folder`` (no TCP
    port that another program could take first: see the module's docstring); none, so TCP,
    where there are no Unix sockets, or where ``folder`` is so deep that a socket's path would
    pass the 104 bytes some systems allow (macOS)."""
    ip = os.path.join(folder, "kernel")
    if os.name != "posix" or len(os.fsencode(ip)) + len("-5") >= 104:
        return {}
    return {"transport": "ipc", "ip": ip}


def kernel_manager(folder: str, kernel_name: str = "python3"):
    """nbclient's kind of kernel manager (asynchronous: a synchronous one blocks nbclient's
    event loop while it waits for output, and a cell's timeout never fires), on
    :func:`unix_sockets` in ``folder``."""
    from jupyter_client.manager import AsyncKernelManager

    return AsyncKernelManager(kernel_name=kernel_name, **unix_sockets(folder))


# --- reading and checking -------------------------------------------------------------------------


@dataclass
class Answers:
    values: dict[str, object] = field(default_factory=dict)  # label -> value (None: not answered)
    notes: dict[str, str] = field(default_factory=dict)  # label -> why the answer could not be read
    asked: list[str] = field(default_factory=list)  # labels the answer cells ask, in order
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (cell number, ename, evalue)
    outside: list[str] = field(default_factory=list)  # labels answered in untagged cells


def read_answers(nb) -> Answers:
    """The answers recorded in the tagged answer cells of an executed notebook."""
    from tmath.exercises import ANSWER_MIME

    found = Answers()
    for number, cell in enumerate(nb.cells, start=1):
        tagged = ANSWER_TAG in cell.get("metadata", {}).get("tags", [])
        if tagged:
            found.asked += [a for a in cell.metadata.get("tmath", {}).get("answers", [])
                            if isinstance(a, str) and a not in found.asked]
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                error = (number, output.get("ename", ""), output.get("evalue", ""))
                found.errors.append(error)
                if tagged:  # the answers this cell did not get to record
                    for label in cell.metadata.get("tmath", {}).get("answers", []):
                        found.notes.setdefault(label, f"答案单元格运行出错（{error[1]}: {error[2]}）")
            record = output.get("data", {}).get(ANSWER_MIME)
            if not isinstance(record, dict) or not isinstance(record.get("label"), str):
                continue
            label = record["label"]
            if not tagged:
                found.outside.append(label)
                continue
            found.values[label] = record.get("value")
            if record.get("error"):
                found.notes[label] = record["error"]
            else:
                found.notes.pop(label, None)
    for label in list(found.notes):  # an answer recorded before its cell failed still counts
        if found.values.get(label) is not None:
            del found.notes[label]
    return found


@dataclass
class Graded:
    student: str
    status: str
    results: dict[str, bool | None]  # label -> right / wrong / None (not answered)
    feedback: list[str]

    @property
    def score(self) -> int:
        return sum(1 for v in self.results.values() if v)


def _check(label: str, value, note: str | None = None) -> tuple[bool | None, str]:
    from tmath.exercises import _KEYS, check

    tolerance = _KEYS[label].tolerance_text()
    if value is None:
        if note:
            return None, f"{label}：没有读到答案：{note}（容差：{tolerance}）"
        return None, f"{label}：未作答（容差：{tolerance}）"
    try:
        result = check(value, label)
    except (TypeError, ValueError) as e:
        return False, f"{label}：✗ 读到的答案不是一个有效的数（{e}）"
    return result.correct, result.message


def _status(sub: Submission, runs: list[Execution], answers: list[Answers]) -> str:
    problems = list(sub.problems)
    for run, found in zip(runs, answers, strict=True):
        if run.problem:
            problems.append(run.problem)
        if found.errors:
            number, ename, evalue = found.errors[0]
            more = f"（另有 {len(found.errors) - 1} 个单元格出错）" if len(found.errors) > 1 else ""
            problems.append(f"执行出错：{run.name} 第 {number} 个单元格 {ename}: {evalue}{more}，"
                            "其余单元格照常运行，读到的答案照常计分")
    return "；".join(problems) if problems else "已评分"


def grade(submissions: Path, out: Path, *, timeout: float = 600, release: Path | None = None,
          jobs: int = 1) -> list[Graded]:
    """Execute, read and check every submission; write ``out`` (CSV), feedback and autograded copies."""
    from tmath.exercises import has_keys, labels

    if not submissions.is_dir():
        raise GradeError(f"SUBMISSIONS_DIR：{submissions} 不是一个文件夹")
    if not has_keys():
        raise GradeError("这个 tmath 是课程包版（只有答案的哈希），不能评分：请在本书仓库的完整版环境里运行")
    if timeout <= 0:
        raise GradeError(f"--timeout 必须大于 0 秒（现在是 {timeout:g}）")
    if jobs < 1:
        raise GradeError(f"--jobs 至少为 1（现在是 {jobs}）")
    if release is not None and not release.is_dir():
        raise GradeError(f"--release：{release} 不是一个文件夹")
    known = set(labels())
    submissions, out = submissions.resolve(), out.resolve()
    base = out.parent
    autograded, feedback_dir = base / "autograded", base / "feedback"
    with tempfile.TemporaryDirectory(prefix="tmath-grade-") as scratch:
        subs = collect(submissions, Path(scratch))
        tasks = [(sub, name, path, autograded / sub.student / name.replace(":", "/"))
                 for sub in subs for name, path in sub.notebooks]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            runs = list(pool.map(lambda t: execute(t[1], t[2], t[3], timeout), tasks))
    by_student: dict[str, list[Execution]] = {sub.student: [] for sub in subs}
    for (sub, *_), run in zip(tasks, runs, strict=True):
        by_student[sub.student].append(run)
    found = {s: [read_answers(r.nb) if r.nb is not None else Answers() for r in rs]
             for s, rs in by_student.items()}

    columns: list[str] = []
    if release is not None:
        for path in sorted(release.rglob("*.ipynb")):
            nb, _ = _read_notebook(path)
            columns += [a for a in (read_answers(nb).asked if nb else []) if a not in columns]
    else:
        for answers in found.values():
            for a in answers:
                columns += [label for label in a.asked if label not in columns]
    columns = [c for c in columns if c in known]

    rows = []
    for sub in subs:
        merged = Answers()
        for a in found[sub.student]:
            merged.values.update(a.values)
            merged.notes.update(a.notes)
            merged.outside += a.outside
        results, lines = {}, []
        for label in columns:
            ok, message = _check(label, merged.values.get(label), merged.notes.get(label))
            results[label] = ok
            lines.append(message)
        extra = sorted({x for x in merged.values if x not in columns})
        if extra:
            lines.append(f"不是本次作业的题目，没有计分：{'、'.join(extra)}")
        outside = sorted(set(merged.outside) & set(columns) - {x for x in merged.values})
        if outside:
            lines.append(f"这些题的答案写在了答案单元格以外，没有计分：{'、'.join(outside)}"
                         "（请写在练习后面的答案单元格里）")
        rows.append(Graded(sub.student, _status(sub, by_student[sub.student], found[sub.student]),
                           results, lines))

    base.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8-sig", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(HEADER + columns)
        for row in rows:
            cells = ["" if row.results[c] is None else int(row.results[c]) for c in columns]
            writer.writerow([row.student, row.status, row.score, len(columns), *cells])
    feedback_dir.mkdir(parents=True, exist_ok=True)
    for row in rows:
        (feedback_dir / f"{row.student}.md").write_text(_feedback(row, len(columns)), encoding="utf-8")
    return rows


def _feedback(row: Graded, total: int) -> str:
    lines = [f"# 作业反馈：{row.student}", "", f"状态：{row.status}", "",
             f"得分：{row.score} / {total}（答对一题得 1 分）", ""]
    lines += [f"- {line}" for line in row.feedback]
    lines += ["", "容差说明：容差以内的答案都判为正确；“精确整数”的题必须填与答案完全相等的整数。"
              "反馈不给出正确答案。"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # the child process of execute()
    # nbformat imports jsonschema, which builds an IRI grammar (lark) at import when
    # rfc3987_syntax is installed: about 1.5 s in every child, for the "iri" format, which
    # nbformat's schema (JSON Schema draft 4) does not have. This process only runs notebooks.
    sys.modules.setdefault("rfc3987_syntax", None)
    sys.exit(_worker(sys.argv[1:]))

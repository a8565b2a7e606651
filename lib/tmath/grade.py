"""Grade handed-in notebooks: ``python -m tmath grade SUBMISSIONS_DIR --release DIR
--kit-env VENV --out grades.csv``.

The teacher's side of the course kit (``make student-kit``, ``make grading-env``).  Runs in
the full edition, where the answer keys are computed; the kit's tmath refuses to grade.  The
students' notebooks never run here: each runs with the kit's Python (``--kit-env``, the
keyless edition) in a sandbox of its own (:mod:`tmath.sandbox`), and only the executed copy
comes back, as untrusted data.

**Layout** (nbgrader's, so that a JupyterHub course with nbgrader's exchange
can point this at its ``submitted/`` folder as it is): one entry per student in
``SUBMISSIONS_DIR``,

- a folder ``SUBMISSIONS_DIR/<student>/`` holding the student's notebooks at any depth
  (nbgrader: ``submitted/<student>/<assignment>/<notebook>.ipynb``), or
- one file ``SUBMISSIONS_DIR/<student>.ipynb``, or a zip of notebooks
  ``<student>.zip`` (otter-grader's way of collecting).

Symbolic links are not followed.  One notebook of a student's runs per notebook of the release,
matched by name, and in nbgrader's layout only those in the folder named as the release's
(:func:`select`); the others are listed in 状态 and the feedback, not run.  A zip's members
are read from the zip, whatever their names.  Next to ``--out`` it writes, with nbgrader's folder names,
``autograded/<student>/...`` (the notebooks as executed) and ``feedback/<student>.md`` (in
Chinese: for each exercise part the value read, right or not, with the tolerance used, never
the key).

**Execution** (as nbgrader's autograde, in :mod:`tmath._grade_worker`): each notebook runs
from the top in a new kernel of the kit's Python (``python3``, whatever kernel the notebook
names), its saved outputs cleared first, with the history in memory, errors allowed (a cell
that raises does not stop the cells after it), and ``--timeout`` seconds for the whole
notebook's cells (and ``--cell-timeout`` for one cell: then the kernel is interrupted and the
cells after it run, so an infinite loop costs one cell, not every answer after it), counted from
the moment its kernel answers: the kernel gets
:data:`KERNEL_START_SECONDS` of its own to start, so a busy machine (many notebooks graded at
once) does not fail a student before any cell has run.  One sandbox per notebook, killed with
every process in it after :func:`sandbox_seconds`: nothing a notebook does stops the run or
reaches another notebook.  On Linux and macOS the kernel talks over Unix sockets in a folder
of its own (ZeroMQ's ``ipc`` transport), not TCP ports: with TCP, a port the client picked
for the kernel can be taken by another program before the kernel binds it, and ipykernel,
failing to bind its IOPub or heartbeat port, does not exit but hangs, so the notebook would
fail after :data:`KERNEL_START_SECONDS`.

**Answers** are read only from the cells tagged ``answer`` (the student
edition's answer cells, :mod:`student_edition`): each ``my_answer(label, value)``
call leaves a record (:data:`tmath.exercises.ANSWER_MIME`) in the cell's output;
the last record of a label counts.  **The release fixes the assignment**
(:class:`Assignment`): the exercise parts graded are those the answer cells of the released
notebooks ask (``--release``, nbgrader's ``release/<assignment>/``), each worth its
``metadata.tmath.points`` (1 by default); nothing in a submission adds a part or changes the
maximum.  Each answer is checked by :func:`tmath.exercises.check` against the real key: the
same grid rule the student's self-check applied.

``grades.csv``: one row per student (学生, 状态, 得分, 满分) and one column per exercise
part: its points when right, 0 wrong, empty when not answered. ``manual.csv`` beside it: one
row per student and part graded by hand (an answer cell with no key, or one whose
``metadata.tmath.manual`` gives it points), with the student's text and an empty 得分 for the
teacher; ``tmath grade-merge grades.csv manual.csv --out total.csv`` adds the filled scores to
the totals (:func:`merge_manual`).  UTF-8 with a byte-order
mark, which spreadsheet programs need to show Chinese; no cell holds a line break or starts
as a formula, and an ID like ``00123`` stays text (:func:`_spreadsheet_safe`).  Written after
every notebook has run, atomically, as the feedback files are (whose student text is escaped
for Markdown and HTML, :func:`_markdown_safe`).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import queue
import re
import sys
import tempfile
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tmath import sandbox
from tmath._grade_worker import KERNEL_START_SECONDS, kernel_manager, unix_sockets

__all__ = ["add_grade_parser", "add_merge_parser", "run_grade", "run_merge", "grade", "merge_manual",
           "manual_answers", "read_answers", "Graded", "Assignment",
           "kernel_manager", "unix_sockets", "KERNEL_START_SECONDS"]

ANSWER_TAG = "answer"
HEADER = ["学生", "状态", "得分", "满分"]
#: Extra seconds the grader allows a notebook's sandbox beyond the notebook's own limit
#: (kernel start and shutdown) before it kills it.
GRACE_SECONDS = 120
#: How long one cell may run by default (``--cell-timeout``): then its kernel is interrupted and
#: the cells after it run (:mod:`tmath._grade_worker`).
CELL_SECONDS = 120
#: A handed-in notebook larger than this is not run (nor read).
NOTEBOOK_BYTES = 50 * 2**20
#: What the notebooks of one student's zip may unpack to, in all.
ZIP_BYTES = 200 * 2**20


class GradeError(Exception):
    """A usage error: printed as one line, exit status 2."""


def add_grade_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tmath grade`` on the CLI's sub-command parsers."""
    p = subparsers.add_parser(
        "grade", help="评分：在沙箱里重新运行交上来的笔记本，读出答案单元格，与答案核对",
        description="评分：在课程包的环境里、每个笔记本一个沙箱，限时重新运行每个学生交来的笔记本，"
                    "从答案单元格读出答案，与完整版的答案核对，写出成绩表和每个学生的反馈。",
    )
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                   help="交上来的作业：每个学生一个文件夹（nbgrader 的 submitted/），"
                        "或一个 .ipynb / .zip 文件")
    p.add_argument("--out", required=True, metavar="grades.csv", help="成绩表的路径")
    p.add_argument("--release", required=True, metavar="DIR",
                   help="这次作业发给学生的笔记本所在的文件夹（nbgrader 的 release/<作业>/）："
                        "它决定哪些题计分、每题几分，也就决定满分")
    p.add_argument("--kit-env", required=True, metavar="DIR",
                   help="课程包的 Python 虚拟环境（不含答案；make grading-env 建在 _build/grading-env）："
                        "学生的笔记本在这个环境里运行")
    p.add_argument("--timeout", type=float, default=600, metavar="秒",
                   help="每个笔记本的单元格从头运行完的时限，单位秒"
                        f"（默认 600；内核启动另有 {KERNEL_START_SECONDS} 秒，不计在内）")
    p.add_argument("--cell-timeout", type=float, default=CELL_SECONDS, metavar="秒",
                   help=f"一个单元格最多运行多少秒（默认 {CELL_SECONDS:g}）：超过就中断它，"
                        "后面的单元格照常运行，死循环只让这一个单元格失分")
    p.add_argument("--jobs", type=int, default=1, help="同时运行几个笔记本（默认 1）")
    p.add_argument("--memory", type=float, default=sandbox.SANDBOX_MEMORY_BYTES / 2**30, metavar="GiB",
                   help="一个笔记本的沙箱里所有进程合计最多用多少内存，单位 GiB"
                        f"（默认 {sandbox.SANDBOX_MEMORY_BYTES / 2**30:g}；要有 cgroup 才能限制合计，"
                        "没有时只限制每个进程的地址空间）")
    # every student their own numbers (tmath.variants): the roster and secret the kits were built with
    p.add_argument("--roster", metavar="roster.csv",
                   help="名单（与 make student-kit ROSTER= 相同）：每个学生按自己那组数的答案评分")
    p.add_argument("--secret-file", metavar="F",
                   help="课程密钥文件（与 make student-kit COURSE_SECRET_FILE= 相同）")
    p.set_defaults(func=run_grade)
    return p


def run_grade(args: argparse.Namespace) -> int:
    """The CLI's ``grade``: returns the exit status."""
    from tmath.variants import Roster, VariantError

    try:
        roster = Roster.load(args.roster and Path(args.roster), args.secret_file and Path(args.secret_file))
        rows = grade(Path(args.submissions), Path(args.out), timeout=args.timeout,
                     release=Path(args.release), kit_env=Path(args.kit_env), jobs=args.jobs,
                     cell_timeout=args.cell_timeout, memory=args.memory, roster=roster)
    except (GradeError, VariantError) as e:
        print(f"tmath grade：错误：{e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    print(f"已评 {len(rows)} 个学生：成绩表 {out}，人工评分表 {out.parent / MANUAL_NAME}，"
          f"反馈 {out.parent / 'feedback'}，运行过的笔记本 {out.parent / 'autograded'}")
    return 0


# --- collecting -----------------------------------------------------------------------------------


@dataclass
class Submission:
    student: str
    notebooks: list[tuple[str, Path]] = field(default_factory=list)  # (name shown, file)
    problems: list[str] = field(default_factory=list)
    #: notebooks handed in and not graded (not the release's, another assignment's, a second
    #: copy), each with why: listed in 状态 and the feedback
    skipped: list[str] = field(default_factory=list)


def _visible(path: Path) -> bool:
    return not any(part.startswith(".") or part in ("__MACOSX", ".ipynb_checkpoints")
                   for part in path.parts)


def _unzip(entry: Path, sub: Submission, target: Path) -> None:
    """The notebooks of a student's zip, unpacked into ``target`` if they are not too large.

    Each member is read from the zip and written to a file of its own under ``target``
    (numbered: two members may have one name): a member's name is never a path of this
    machine. (``target / name`` was, for a name that starts with ``/``: the member
    ``/proc/self/cwd/submitted/alice.ipynb`` had the grader read alice's notebook.)"""
    try:
        with zipfile.ZipFile(entry) as z:
            members = [i for i in z.infolist()
                       if i.filename.endswith(".ipynb") and not i.is_dir()
                       and _visible(PurePosixPath(i.filename.replace("\\", "/")))]
            if sum(i.file_size for i in members) > ZIP_BYTES:
                sub.problems.append(f"文件太大：{entry.name} 里的笔记本解压后超过 {ZIP_BYTES // 2**20} MB")
                return
            members.sort(key=lambda i: i.filename)
            for number, info in enumerate(members):
                path = target / str(number) / _inside(info.filename).name
                path.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, path.open("wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                sub.notebooks.append((f"{entry.name}:{info.filename}", path))
        if not members:
            sub.problems.append(f"没有找到笔记本：{entry.name} 里没有 .ipynb 文件")
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError, EOFError, zlib.error):
        # RuntimeError: an encrypted member; zlib.error: a damaged one
        sub.notebooks = []
        sub.problems.append(f"不是笔记本：{entry.name} 不是有效的 zip 文件")


def collect(folder: Path, scratch: Path) -> list[Submission]:
    """One :class:`Submission` per entry of ``folder`` (zips are unpacked into ``scratch``).

    A symbolic link is never followed: it could point the grader, which reads every file
    handed in, at a file of the teacher's (a key module) and copy it into the sandbox."""
    subs = []
    for entry in sorted(p for p in folder.iterdir() if _visible(p.relative_to(folder))):
        if entry.is_symlink():
            sub = Submission(entry.stem if entry.suffix in (".ipynb", ".zip") else entry.name)
            sub.problems.append(f"不是笔记本：{entry.name} 是一个符号链接，没有读取")
        elif entry.is_dir():
            sub = Submission(entry.name)
            files, links = [], []
            for p in sorted(entry.rglob("*")):
                if not _visible(p.relative_to(entry)):
                    continue
                if p.is_symlink():  # rglob lists a link, and does not go into a linked folder
                    links.append(p)
                elif p.is_file():
                    files.append(p)
            sub.notebooks = [(str(p.relative_to(entry)), p) for p in files if p.suffix == ".ipynb"]
            if links:
                named = "、".join(str(p.relative_to(entry)) for p in links[:3])
                sub.problems.append(f"没有读取符号链接：{named}")
            if not sub.notebooks:
                others = "、".join(str(p.relative_to(entry)) for p in files[:3]) or "空文件夹"
                sub.problems.append(f"没有找到笔记本：交来的是 {others}，没有 .ipynb 文件")
        elif entry.suffix == ".zip":
            sub = Submission(entry.stem)
            _unzip(entry, sub, scratch / "unzipped" / entry.stem)
        else:
            sub = Submission(entry.stem, [(entry.name, entry)])
        subs.append(sub)
    return subs


#: At most this many bytes of one student's notebooks run (each one at most NOTEBOOK_BYTES).
STUDENT_BYTES = 200 * 2**20


def _parts(name: str) -> tuple[str, ...]:
    """The folders and file name of a notebook shown as ``name`` (``a.zip:w1/t.ipynb``: the
    member's path in the zip), ``\\`` read as ``/``."""
    return tuple(p for p in PurePosixPath(name.split(":", 1)[-1].replace("\\", "/")).parts
                 if p not in ("/", ".", ".."))


def _in_assignment(name: str, assignment: str) -> tuple[str, ...]:
    """The path of a notebook shown as ``name`` below the folder ``assignment`` (or whole)."""
    parts = _parts(name)
    folders = [i for i, p in enumerate(parts[:-1]) if p == assignment]
    return parts[folders[-1] + 1:] if folders else parts


def select(sub: Submission, assignment: Assignment) -> None:
    """Keep in ``sub.notebooks`` one handed-in notebook per notebook of the release, matched by
    file name, and move the others to ``sub.skipped`` (graded, a blank ``tour_draft.ipynb``
    beside ``tour.ipynb`` overwrote the real answers).

    nbgrader's layout (``submitted/<student>/<assignment>/``): where a student's notebooks lie
    in a folder named as the release's folder (``--release release/week1``: ``week1``), only
    those are this assignment's; the rest (``week2/``) are not run. Of two notebooks with the
    release's name, the one at the release's own path counts (else the least deep, then the
    first in sorted order). A student who hands in one notebook for a release of one (``alice.ipynb``, or a
    renamed copy), not in a folder of its own (``week2/``), is graded on it. At most
    :data:`STUDENT_BYTES` of a student's notebooks run."""
    handed = list(sub.notebooks)
    if not handed:
        return
    inside = [(n, p) for n, p in handed if assignment.name in _parts(n)[:-1]]
    if inside and len(inside) < len(handed):
        sub.skipped += [f"{n}（不是这次作业 {assignment.name} 的文件夹里的）" for n, p in handed
                        if (n, p) not in inside]
        handed = inside
    alone = len(handed) == 1 and len(_in_assignment(handed[0][0], assignment.name)) == 1
    if len(assignment.notebooks) == 1 and alone:
        sub.notebooks = handed  # not in a folder (another week's?): the one notebook, whatever its name
    else:
        chosen: list[tuple[str, Path]] = []
        by_name: dict[str, list[tuple[str, Path]]] = {}
        for n, p in handed:
            by_name.setdefault(_parts(n)[-1] if _parts(n) else "", []).append((n, p))
        for released in assignment.notebooks:
            want = PurePosixPath(released).parts
            same = by_name.pop(want[-1], [])
            if not same:
                continue
            best = next((x for x in same if _in_assignment(x[0], assignment.name) == want),
                        min(same, key=lambda x: (len(_parts(x[0])), x[0])))
            chosen.append(best)
            sub.skipped += [f"{n}（与 {best[0]} 同名，只评了后者）" for n, p in same if (n, p) != best]
        for rest in by_name.values():
            sub.skipped += [f"{n}（不是这次作业发下的笔记本）" for n, p in rest]
        sub.notebooks = chosen
        if not chosen:
            sub.problems.append("没有找到这次作业的笔记本：交来的笔记本与 --release 里的"
                                f"（{'、'.join(assignment.notebooks[:5])}）都不同名")
    kept, size = [], 0
    for n, p in sub.notebooks:
        try:
            size += p.stat().st_size
        except OSError:
            pass
        if size > STUDENT_BYTES:
            sub.skipped.append(f"{n}（这个学生的笔记本合计超过 {STUDENT_BYTES // 2**20} MB）")
        else:
            kept.append((n, p))
    sub.notebooks = kept


# --- executing ------------------------------------------------------------------------------------


@dataclass
class Execution:
    name: str
    nb: object | None  # the executed notebook (nbformat), None if it could not be read or run
    problem: str | None = None  # a notebook-level problem: not a notebook, timeout, dead kernel
    #: what :func:`digest` read from ``nb`` before letting it go (the executed copy is on disk):
    #: the grader holds no class's worth of notebooks (three 41 MB ones held 5.5 GB)
    answers: Answers | None = None
    manual: dict[str, str] | None = None


def digest(run: Execution, assignment: Assignment) -> Execution:
    """``run`` with its answers and its parts graded by hand read, and its notebook dropped."""
    if run.nb is not None:
        try:
            run.answers = read_answers(run.nb)
        except Exception as e:  # noqa: BLE001 - a notebook the reader cannot follow: its row says so
            run.answers = Answers(errors=[(0, "评分读取出错", type(e).__name__)])
        try:
            run.manual = manual_answers(run.nb, assignment)
        except Exception:  # noqa: BLE001 - an executed copy the reader cannot follow
            run.manual = {}
        run.nb = None
    return run


def _read_notebook(path: Path | None = None, text: str | None = None):
    """(notebook, None) or (None, why not, in Chinese): from ``path`` or from ``text``."""
    import nbformat

    try:
        if text is None:
            if path.stat().st_size > NOTEBOOK_BYTES:
                return None, f"文件太大（超过 {NOTEBOOK_BYTES // 2**20} MB）"
            text = path.read_bytes().decode("utf-8")
        nb = nbformat.reads(text, as_version=4)
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


def execute(name: str, path: Path, dest: Path, timeout: float, kit: sandbox.KitEnv, slot: int,
            cell_timeout: float | None = None, memory: int = sandbox.SANDBOX_MEMORY_BYTES) -> Execution:
    """Run one notebook in a new sandbox (:mod:`tmath.sandbox`) with the course kit's Python;
    the executed copy goes to ``dest``. Whatever the notebook does, this returns."""
    nb, problem = _read_notebook(path)
    if nb is None:
        return Execution(name, None, f"不是笔记本：{name} {problem}")
    import nbformat

    wall = sandbox_seconds(timeout)
    with sandbox.cgroups(slot, memory) as groups:
        worker = [str(kit.python), "/grader/worker.py", repr(float(timeout)), Path(name).name]
        if cell_timeout is not None:
            worker.append(repr(float(cell_timeout)))
        cmd = sandbox.command(kit, slot, timeout, Path(name).name, int(wall) + 1, program=worker,
                              groups=groups)
        outcome = sandbox.run(cmd, nbformat.writes(nb).encode("utf-8"), wall)
    status: dict = {"status": "timeout"} if outcome.returncode is None else {"status": "failed"}
    executed = None
    if outcome.stdout is None:
        status = {"status": "failed", "detail": f"输出超过 {sandbox.OUTPUT_BYTES // 2**20} MB"}
    elif outcome.stdout:
        head, _, body = outcome.stdout.partition(b"\n")
        try:
            said = json.loads(head)
            if isinstance(said, dict) and said.get("status") in ("ok", "timeout", "dead", "failed"):
                status = {"status": said["status"], "cell": said.get("cell") if isinstance(
                    said.get("cell"), int) else None, "detail": str(said.get("detail", ""))[:200]}
        except ValueError:
            pass
        executed, _ = _read_notebook(text=body.decode("utf-8", errors="replace"))
    if executed is None and status["status"] == "ok":  # said ok, but sent no readable notebook
        status = {"status": "failed", "detail": "运行后的笔记本无法读取"}
    if status["status"] == "failed" and not status.get("detail"):
        last = outcome.stderr.strip().splitlines()[-1:]
        status["detail"] = (last[0][:200] if last else f"退出码 {outcome.returncode}")
    if executed is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, dest)
    kind = status["status"]
    if kind == "timeout":
        where = f"（停在第 {status['cell']} 个单元格）" if status.get("cell") else ""
        problem = f"超时：{name} 超过 {timeout:g} 秒没有运行完{where}，超时前读到的答案照常计分"
    elif kind == "dead":
        problem = f"内核崩溃：{name} 运行中内核退出，之前读到的答案照常计分"
    elif kind != "ok":
        problem = f"无法运行：{name}（{status.get('detail') or kind}）"
    return Execution(name, executed, problem)


def sandbox_seconds(timeout: float) -> float:
    """How long a notebook's sandbox may live: its kernel's start, its cells, and a grace."""
    return KERNEL_START_SECONDS + timeout + GRACE_SECONDS


# --- reading and checking -------------------------------------------------------------------------


@dataclass
class Answers:
    values: dict[str, object] = field(default_factory=dict)  # label -> value (None: not answered)
    notes: dict[str, str] = field(default_factory=dict)  # label -> why the answer could not be read
    asked: list[str] = field(default_factory=list)  # labels the answer cells ask, in order
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (cell number, ename, evalue)
    outside: list[str] = field(default_factory=list)  # labels answered in untagged cells


def read_answers(nb) -> Answers:
    """The answers recorded in the tagged answer cells of an executed notebook (which the
    student's code wrote: every field is checked for its type before it is used)."""
    from tmath.exercises import ANSWER_MIME

    found = Answers()
    seen: set[str] = set()  # found.asked as a set: a membership test in the list made reading quadratic
    for number, cell in enumerate(nb.cells, start=1):
        meta = _tmath_meta(cell)
        tagged = meta is not None
        asked = _labels(meta) if tagged else []
        for a in asked:
            if a not in seen:
                seen.add(a)
                found.asked.append(a)
        if cell.get("cell_type") != "code":
            continue
        failed = False
        for output in cell.get("outputs", []):
            if not isinstance(output, dict):
                continue
            if output.get("output_type") == "error":
                error = (number, str(output.get("ename", ""))[:100], str(output.get("evalue", ""))[:200])
                found.errors.append(error)
                for label in asked if not failed else ():  # the answers this cell did not get to record
                    found.notes.setdefault(label, f"答案单元格运行出错（{error[1]}: {error[2]}）")
                failed = True
            data = output.get("data")
            record = data.get(ANSWER_MIME) if isinstance(data, dict) else None
            if not isinstance(record, dict) or not isinstance(record.get("label"), str):
                continue
            label = record["label"][:100]
            if not tagged:
                found.outside.append(label)
                continue
            found.values[label] = record.get("value")
            if record.get("error"):
                found.notes[label] = str(record["error"])[:200]
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
    points: dict[str, int] = field(default_factory=dict)  # label -> its points (the release's)

    @property
    def score(self) -> int:
        return sum(self.points.get(label, 1) for label, v in self.results.items() if v)


@dataclass
class Assignment:
    """What the release fixes: the exercise parts graded, in order, and the points of each
    (``metadata.tmath.points`` of the answer cell, ``{label: points}``; 1 by default)."""

    notebooks: list[str]  # the release's notebooks, relative to it
    points: dict[str, int]  # label -> points, in the order of the release's answer cells
    #: exercise -> points of its part graded by hand (``manual.csv``): an answer cell without
    #: a key (a derivation, a why), or one whose ``metadata.tmath.manual`` gives it points
    manual: dict[str, int] = field(default_factory=dict)
    #: the ids of the release's cells: a submission's cell with another id is the student's own
    cell_ids: frozenset[str] = frozenset()
    #: the release folder's name (nbgrader's ``release/<assignment>/``): a student's notebooks in
    #: a folder of this name are this assignment's (:func:`select`)
    name: str = ""

    @property
    def total(self) -> int:
        return sum(self.points.values())

    @classmethod
    def from_release(cls, release: Path, known: set[str]) -> Assignment:
        if not release.is_dir():
            raise GradeError(f"--release：{release} 不是一个文件夹")
        notebooks, points, manual, ids = [], {}, {}, set()
        for path in sorted(release.rglob("*.ipynb")):
            if not _visible(path.relative_to(release)):
                continue
            nb, problem = _read_notebook(path)
            if nb is None:
                raise GradeError(f"--release：{path} {problem}")
            notebooks.append(str(path.relative_to(release)))
            for cell in nb.cells:
                if isinstance(cell.get("id"), str):
                    ids.add(cell["id"])
                meta = _tmath_meta(cell)
                if meta is None:
                    continue
                exercise = meta.get("exercise")
                by_hand = meta.get("manual", 0 if _labels(meta) else 1)
                if not isinstance(by_hand, int) or isinstance(by_hand, bool) or by_hand < 0:
                    raise GradeError(f"--release：{path.name} 里 {exercise} 的人工评分分值 {by_hand!r} "
                                     "不是非负整数（metadata.tmath.manual）")
                if by_hand and isinstance(exercise, str):
                    manual.setdefault(exercise, by_hand)
                given = meta.get("points", {})
                for label in _labels(meta):
                    value = given.get(label, 1) if isinstance(given, dict) else 1
                    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                        raise GradeError(f"--release：{path.name} 里 {label} 的分值 {value!r} 不是非负整数")
                    if label not in known:
                        raise GradeError(f"--release：{path.name} 的答案单元格问的 {label} 没有答案，"
                                         "无法评分")
                    points.setdefault(label, value)
        if not points and not manual:
            raise GradeError(f"--release：{release} 的笔记本里没有答案单元格（标签 answer），"
                             "没有可以评分的题")
        return cls(notebooks, points, manual, frozenset(ids), release.resolve().name)


def _tmath_meta(cell) -> dict | None:
    """The ``metadata.tmath`` of an answer cell (tagged ``answer``); None for any other cell."""
    meta = cell.get("metadata")
    if not isinstance(meta, dict) or ANSWER_TAG not in (meta.get("tags") or []):
        return None
    tm = meta.get("tmath")
    return tm if isinstance(tm, dict) else {}


def _labels(meta: dict) -> list[str]:
    answers = meta.get("answers")
    return [a for a in answers if isinstance(a, str)] if isinstance(answers, list) else []


def _shown(value) -> str:
    """A value read from an answer cell, as the feedback shows it (the student's own number)."""
    from tmath.exercises import plain_number

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    if isinstance(value, int):
        if abs(value) < 10**30:
            return str(value)
        # 10**400 has no float: its digits, in scientific form (a JSON integer has at most
        # sys.get_int_max_str_digits() of them: nbformat could not read more)
        try:
            digits = str(abs(value))
        except ValueError:
            return f"{'-' if value < 0 else ''}约 2^{abs(value).bit_length() - 1} 的整数"
        mantissa = f"{digits[0]}.{digits[1:6]}".rstrip("0").rstrip(".")
        return f"{'-' if value < 0 else ''}{mantissa}e+{len(digits) - 1}"
    try:
        return plain_number(value) if 1e-6 <= abs(value) < 1e21 or value == 0 else repr(value)
    except (ValueError, OverflowError):
        return repr(value)


def _why(e: Exception) -> str:
    if isinstance(e, OverflowError):
        return "太大，超出浮点数的范围"
    return " ".join(str(e).split())[:200]


def _check(label: str, value, note: str | None = None) -> tuple[bool | None, str]:
    """(right?, the feedback's line): the value read, ✓ or ✗, and the tolerance; never the key."""
    from tmath.exercises import check, keys_of

    key = next((k for k in keys_of(label) if k.label == label), None)
    tolerance = key.tolerance_text() if key else ""
    if value is None:
        if note:
            return None, f"{label}：没有读到答案：{note}（容差：{tolerance}）"
        return None, f"{label}：未作答（容差：{tolerance}）"
    try:
        if isinstance(value, int) and value.bit_length() > 1024:  # 10**400: no float holds it
            raise OverflowError(value.bit_length())
        result = check(value, label)
    except (TypeError, ValueError, ArithmeticError) as e:
        return False, f"{label}：读到 {_shown(value)}，✗ 不是一个有效的数（{_why(e)}）"
    verdict = "✓ 正确" if result.correct else "✗ 还不对"
    return result.correct, f"{label}：读到 {_shown(value)}，{verdict}（容差：{tolerance}）"


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
    status = "；".join(problems) if problems else "已评分"
    if sub.skipped:  # graded all the same: a draft handed in beside the notebook is not a problem
        more = f"等 {len(sub.skipped)} 个" if len(sub.skipped) > 5 else ""
        status += f"；没有评分的笔记本：{'、'.join(sub.skipped[:5])}{more}"
    return status


def _row(sub: Submission, runs: list[Execution], assignment: Assignment) -> Graded:
    """One student's row, from the executed notebooks (untrusted: whatever they hold)."""
    found = []
    for r in runs:
        if r.answers is not None:
            found.append(r.answers)
            continue
        try:
            found.append(read_answers(r.nb) if r.nb is not None else Answers())
        except Exception as e:  # noqa: BLE001 - a notebook the reader cannot follow: its row says so
            found.append(Answers(errors=[(0, "评分读取出错", type(e).__name__)]))
    merged = Answers()
    for a in found:
        merged.values.update(a.values)
        merged.notes.update(a.notes)
        merged.outside += a.outside
    results, lines = {}, []
    for label in assignment.points:
        ok, message = _check(label, merged.values.get(label), merged.notes.get(label))
        results[label] = ok
        lines.append(message)
    extra = sorted({x for x in merged.values if x not in assignment.points})
    if extra:
        shown = "、".join(_shown(x) if not isinstance(x, str) else x[:40] for x in extra[:10])
        lines.append(f"不是本次作业的题目，没有计分：{shown}")
    outside = sorted(set(merged.outside) & set(assignment.points) - {x for x in merged.values})
    if outside:
        lines.append(f"这些题的答案写在了答案单元格以外，没有计分：{'、'.join(outside)}"
                     "（请写在练习后面的答案单元格里）")
    return Graded(sub.student, _status(sub, runs, found), results, lines, assignment.points)


def _graded_row(sub: Submission, runs: list[Execution], assignment: Assignment, roster) -> Graded:
    """:func:`_row`, with the student's own keys of the varied exercises when there is a roster
    (:class:`tmath.variants.Roster`); a student not on it is graded with the book's keys."""
    if roster is None:
        return _row(sub, runs, assignment)
    with roster.keys(sub.student):
        row = _row(sub, runs, assignment)
    if sub.student not in roster.students:
        row.status = f"不在名单上，变体题按书上的数评分；{row.status}"
    return row


def _inside(name: str) -> Path:
    """The path under ``autograded/<student>/`` of the notebook shown as ``name`` (``a.zip:b/c.ipynb``
    goes to ``a.zip/b/c.ipynb``): a zip's member named ``../../x.ipynb`` stays inside."""
    path = PurePosixPath(name.replace(":", "/").replace("\\", "/"))
    parts = [p for p in path.parts if p not in ("/", ".", "..")]
    return Path(*parts) if parts else Path("notebook.ipynb")


def _write_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``path`` whole or not at all (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def grade(submissions: Path, out: Path, *, release: Path, kit_env: Path, timeout: float = 600,
          jobs: int = 1, cell_timeout: float | None = CELL_SECONDS,
          memory: float = sandbox.SANDBOX_MEMORY_BYTES / 2**30, roster=None) -> list[Graded]:
    """Execute every submission in a sandbox of its own with the kit's Python (``kit_env``),
    read its answers and check them against the keys; write ``out`` (CSV), the feedback and
    the executed copies. The release fixes the exercises, their points and so the maximum."""
    from tmath.exercises import has_keys, labels

    if not submissions.is_dir():
        raise GradeError(f"SUBMISSIONS_DIR：{submissions} 不是一个文件夹")
    if not has_keys():
        raise GradeError("这个 tmath 是课程包版（只有答案的哈希），不能评分：请在本书仓库的完整版环境里运行")
    if timeout <= 0:
        raise GradeError(f"--timeout 必须大于 0 秒（现在是 {timeout:g}）")
    if cell_timeout is not None and cell_timeout <= 0:
        raise GradeError(f"--cell-timeout 必须大于 0 秒（现在是 {cell_timeout:g}）")
    if jobs < 1:
        raise GradeError(f"--jobs 至少为 1（现在是 {jobs}）")
    if not 0.25 <= memory <= 1024:
        raise GradeError(f"--memory 应在 0.25 到 1024 GiB 之间（现在是 {memory:g}）："
                         "一个内核启动就要约 0.2 GiB")
    assignment = Assignment.from_release(Path(release), set(labels()))
    try:
        kit = sandbox.KitEnv.probe(Path(kit_env).resolve())
        sandbox.check_works(kit)
    except sandbox.SandboxError as e:
        raise GradeError(str(e)) from None
    submissions, out = submissions.resolve(), out.resolve()
    base = out.parent
    autograded, feedback_dir = base / "autograded", base / "feedback"
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(jobs):
        slots.put(slot)

    def run(task) -> Execution:
        sub, name, path, dest = task
        slot = slots.get()
        try:
            return digest(execute(name, path, dest, timeout, kit, slot, cell_timeout, int(memory * 2**30)),
                          assignment)
        except Exception as e:  # noqa: BLE001 - one notebook's failure is its own row's
            return Execution(name, None, f"无法运行：{name}（评分程序出错：{type(e).__name__}）")
        finally:
            slots.put(slot)

    with tempfile.TemporaryDirectory(prefix="tmath-grade-") as scratch:
        subs = collect(submissions, Path(scratch))
        for sub in subs:
            select(sub, assignment)
        tasks = [(sub, name, path, autograded / sub.student / _inside(name))
                 for sub in subs for name, path in sub.notebooks]
        handed_in = {Path(name.split(":")[-1]).name for _, name, _, _ in tasks}
        missing = [n for n in assignment.notebooks if Path(n).name not in handed_in]
        if missing and tasks:
            print(f"tmath grade：注意：发布的笔记本 {'、'.join(missing[:5])} 没有一个学生交来；"
                  f"满分仍按 --release 的全部 {len(assignment.points)} 题（{assignment.total} 分）计算。"
                  "--release 应指向这次作业的文件夹，而不是整套课程包", file=sys.stderr)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            runs = list(pool.map(run, tasks))
    by_student: dict[str, list[Execution]] = {sub.student: [] for sub in subs}
    for (sub, *_), r in zip(tasks, runs, strict=True):
        by_student[sub.student].append(r)
    rows = [_graded_row(sub, by_student[sub.student], assignment, roster) for sub in subs]

    for row in rows:
        _write_atomic(feedback_dir / f"{row.student}.md", _feedback(row, assignment.total))
    _write_atomic(base / MANUAL_NAME, manual_table(subs, by_student, assignment), encoding="utf-8-sig")
    _write_atomic(out, grades_table(rows, assignment), encoding="utf-8-sig")
    return rows


def grades_table(rows: list[Graded], assignment: Assignment) -> str:
    """grades.csv: one row per student, every cell :func:`_spreadsheet_safe`."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    columns = list(assignment.points)
    writer.writerow([_spreadsheet_safe(c) for c in HEADER + columns])
    for row in rows:
        cells = ["" if row.results[c] is None else assignment.points[c] * int(row.results[c])
                 for c in columns]
        writer.writerow([_spreadsheet_safe(row.student, name=True), _spreadsheet_safe(row.status),
                         row.score, assignment.total, *cells])
    return table.getvalue()


def _feedback(row: Graded, total: int) -> str:
    points = set(row.points.values())
    rule = "答对一题得 1 分" if points <= {1} else "每题的分值见成绩表"
    lines = [f"# 作业反馈：{_markdown_safe(row.student)}", "", f"状态：{_markdown_safe(row.status)}", "",
             f"得分：{row.score} / {total}（{rule}）", ""]
    lines += [f"- {_markdown_safe(line)}" for line in row.feedback]
    lines += ["", "“读到”后面是从你的答案单元格里读出的答案。容差以内的答案都判为正确；“精确整数”的题必须填"
              "与答案完全相等的整数。反馈不给出正确答案。"]
    return "\n".join(lines) + "\n"


# --- grading by hand: manual.csv, and its merge into the totals ------------------------------------

#: Written next to ``--out``: one row per student and exercise part graded by hand.
MANUAL_NAME = "manual.csv"
MANUAL_HEADER = ["学生", "练习", "笔记本", "满分", "得分", "学生的答案"]
#: At most this many characters of one answer go into manual.csv (the executed notebook in
#: ``autograded/`` holds all of it).
MANUAL_CHARS = 5000


#: What makes a spreadsheet read a cell as a formula (LibreOffice and Excel also read the
#: fullwidth forms, which a Chinese input method types, as their ASCII ones).
FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20", "\t", "\r")
#: A line break or tab in a cell: shown as this mark (a bare ``\r`` split a row of grades.csv in
#: three in LibreOffice, though the CSV quotes it).
LINE_MARK = " ⏎ "
_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")
#: A name a spreadsheet would read as a number or a date (``00123`` as 123, ``3-4`` as 4 March).
_NUMBER_LIKE = re.compile(r"[\s\d.,:/+\-%eE]*\d[\s\d.,:/+\-%eE]*")


def _spreadsheet_safe(text, name: bool = False) -> str:
    """``text`` as one cell a spreadsheet shows as it is, never as a formula: no line break or
    tab (each becomes :data:`LINE_MARK` or a space), and ``'`` before a cell that starts, spaces
    aside, with a formula's first character (:data:`FORMULA_START`: the student's text must
    not run in the teacher's spreadsheet). ``name``: a student's or a notebook's name, which
    also gets ``'`` when a spreadsheet would read it as a number or a date (student ID
    ``00123`` stays ``00123``; :func:`merge_manual` reads it back either way). A cell that
    already starts with ``'`` is left as it is, so this can be applied twice."""
    text = _CONTROLS.sub(" ", _BREAKS.sub(LINE_MARK, str(text)).replace("\t", " "))
    if text.startswith("'"):
        return text
    if text.lstrip()[:1] in FORMULA_START or (name and _NUMBER_LIKE.fullmatch(text)):
        return "'" + text
    return text


def _id(cell: str) -> str:
    """A student's name as :func:`_spreadsheet_safe` wrote it, read back (its ``'`` dropped)."""
    cell = cell.strip()
    return cell[1:] if cell.startswith("'") else cell


#: Characters that Markdown or HTML would read in the feedback (``_`` only at a word's edge).
_MARKDOWN = re.compile(r"[\\`*\[\]<>|~!#&{}$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def _markdown_safe(text) -> str:
    """``text`` (the student's: an error message, a name, a value) as Markdown shows it
    literally: one line, Markdown's and HTML's characters escaped (``&lt;`` for ``<``)."""
    text = _CONTROLS.sub(" ", _BREAKS.sub(" ", str(text)).replace("\t", " "))
    entities = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
    return _MARKDOWN.sub(lambda m: entities.get(m.group(), "\\" + m.group()), text)


def _cell_text(cell) -> str:
    """A cell as the teacher reads it: its source, and for a code cell its text output."""
    source = cell.get("source", "")
    parts = [source if isinstance(source, str) else "".join(map(str, source))]
    if cell.get("cell_type") == "code":
        for out in cell.get("outputs", []):
            if not isinstance(out, dict):
                continue
            data = out.get("data") if isinstance(out.get("data"), dict) else {}
            text = out.get("text") or data.get("text/plain")
            if out.get("output_type") == "error":
                text = f"{out.get('ename', '')}: {out.get('evalue', '')}"
            if text:
                parts.append("［输出］" + (text if isinstance(text, str) else "".join(map(str, text))))
    return "\n".join(p.strip("\n") for p in parts if p.strip())


def manual_answers(nb, assignment: Assignment) -> dict[str, str]:
    """exercise -> what the student wrote for its part graded by hand: the exercise's answer cell
    (code, or turned into Markdown) and the cells the student added right after it (those whose
    id the release does not have), with the text outputs of the code cells."""
    found: dict[str, str] = {}
    cells = list(nb.cells)
    for i, cell in enumerate(cells):
        meta = _tmath_meta(cell)
        exercise = meta.get("exercise") if meta is not None else None
        if not isinstance(exercise, str) or exercise not in assignment.manual or exercise in found:
            continue
        texts = [_cell_text(cell)]
        for after in cells[i + 1:] if assignment.cell_ids else []:  # no ids: the answer cell alone
            if after.get("id") in assignment.cell_ids or _tmath_meta(after) is not None:
                break
            texts.append(_cell_text(after))
        text = "\n\n".join(t for t in texts if t)
        found[exercise] = text if len(text) <= MANUAL_CHARS else text[:MANUAL_CHARS] + "…（已截断）"
    return found


def manual_table(subs: list[Submission], runs: dict[str, list[Execution]], assignment: Assignment) -> str:
    """manual.csv: one row per student and part graded by hand, 得分 left empty for the teacher."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(MANUAL_HEADER)
    for sub in subs:
        answers: dict[str, tuple[str, str]] = {}
        for run in runs.get(sub.student, []):
            if run.manual is not None:
                found = run.manual
            elif run.nb is None:
                continue
            else:
                try:
                    found = manual_answers(run.nb, assignment)
                except Exception:  # noqa: BLE001 - an executed copy the reader cannot follow
                    continue
            for exercise, text in found.items():
                answers.setdefault(exercise, (run.name, text))
        for exercise, points in assignment.manual.items():
            name, text = answers.get(exercise, ("", "（没有找到这道题的答案单元格）"))
            writer.writerow([_spreadsheet_safe(sub.student, name=True), _spreadsheet_safe(exercise),
                             _spreadsheet_safe(name, name=True), points, "", _spreadsheet_safe(text)])
    return table.getvalue()


def add_merge_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tmath grade-merge`` (the filled manual.csv added to grades.csv)."""
    p = subparsers.add_parser(
        "grade-merge", help="把老师填好分数的 manual.csv 并入 grades.csv，算出总分",
        description="把 tmath grade 写出的 manual.csv（老师在“得分”一栏填好分数）并入 grades.csv："
                    "每道人工评分的题加一列，得分与满分都加上人工评分的部分。",
    )
    p.add_argument("grades", metavar="grades.csv", help="tmath grade 写出的成绩表")
    p.add_argument("manual", metavar="manual.csv", help="填好“得分”一栏的人工评分表")
    p.add_argument("--out", required=True, metavar="total.csv", help="合并后的成绩表的路径")
    p.set_defaults(func=run_merge)
    return p


def run_merge(args: argparse.Namespace) -> int:
    try:
        text = merge_manual(Path(args.grades), Path(args.manual))
    except GradeError as e:
        print(f"tmath grade-merge：错误：{e}", file=sys.stderr)
        return 2
    _write_atomic(Path(args.out), text, encoding="utf-8-sig")
    print(f"已合并：总成绩表 {args.out}")
    return 0


def _read_csv(path: Path, what: str) -> list[list[str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            return list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise GradeError(f"{what}：无法读取 {path}（{type(e).__name__}）") from None


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def merge_manual(grades: Path, manual: Path) -> str:
    """grades.csv with one column per part graded by hand (``练习（人工）``) and 得分, 满分
    raised by them: the text of the merged table. Every row of manual.csv must have its 得分
    filled, a number from 0 to its 满分; each error names the row and the fix."""
    rows = _read_csv(grades, "grades.csv")
    if not rows or rows[0][:len(HEADER)] != HEADER:
        raise GradeError(f"grades.csv：{grades} 不是 tmath grade 写出的成绩表"
                         f"（第一行应以 {','.join(HEADER)} 开头）")
    marks = _read_csv(manual, "manual.csv")
    if not marks or marks[0][:len(MANUAL_HEADER) - 1] != MANUAL_HEADER[:-1]:
        raise GradeError(f"manual.csv：{manual} 不是 tmath grade 写出的人工评分表"
                         f"（第一行应以 {','.join(MANUAL_HEADER)} 开头）")
    students = [_id(r[0]) for r in rows[1:] if r]
    # A spreadsheet may have turned student ID 00123 into 123 in one file (the other keeping it):
    # 123 stands for 00123 when exactly one student of grades.csv has that number.
    by_number: dict[int, list[str]] = {}
    for s in students:
        if s.isdigit():
            by_number.setdefault(int(s), []).append(s)
    exercises: list[str] = []
    given: dict[tuple[str, str], float] = {}
    most: dict[str, float] = {}
    errors = []
    for number, row in enumerate(marks[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        student, exercise, _name, top, score = (_id(c) for c in (row + [""] * 5)[:5])
        where = f"第 {number} 行（学生 {student}，练习 {exercise}）"
        if student not in students and student.isdigit():
            same = by_number.get(int(student), [])
            if len(same) > 1:
                errors.append(f"{where}：学号 {student} 可能是 {'、'.join(same)} 中的任何一个"
                              "（电子表格去掉了学号开头的 0）：请把这一行的学号改回 grades.csv 里的写法")
                continue
            student = same[0] if same else student
        try:
            top_value = float(top)
        except ValueError:
            errors.append(f"{where}：满分 {top!r} 不是数：请保留 tmath grade 写出的值")
            continue
        if student not in students:
            errors.append(f"{where}：grades.csv 里没有这个学生：两个文件应来自同一次 tmath grade")
            continue
        if not score.strip():
            errors.append(f"{where}：得分为空：请填 0 到 {_number_text(top_value)} 之间的数")
            continue
        try:
            value = float(score)
        except ValueError:
            errors.append(f"{where}：得分 {score!r} 不是数：请填 0 到 {_number_text(top_value)} 之间的数")
            continue
        if not 0 <= value <= top_value:
            errors.append(f"{where}：得分 {score} 超出范围：请填 0 到 {_number_text(top_value)} 之间的数")
            continue
        if (student, exercise) in given:
            errors.append(f"{where}：这个学生的这道题出现了两次：请删去多余的一行")
            continue
        given[student, exercise] = value
        most[exercise] = top_value
        if exercise not in exercises:
            exercises.append(exercise)
    missing = [f"{s}（{e}）" for s in students for e in exercises if (s, e) not in given]
    if missing:
        errors.append(f"缺少这些学生的人工评分：{'、'.join(missing[:10])}：请为每个学生的每道题填一行")
    if errors:
        more = f"（另有 {len(errors) - 10} 处）" if len(errors) > 10 else ""
        raise GradeError("manual.csv：" + "；".join(errors[:10]) + more)
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow([_spreadsheet_safe(c) for c in rows[0] + [f"{e}（人工）" for e in exercises]])
    for row in rows[1:]:
        if not row:
            continue
        student, status, score, top, *cells = row
        student = _id(student)
        extra = [given[student, e] for e in exercises]
        try:
            total = float(score) + sum(extra)
            out_of = float(top) + sum(most[e] for e in exercises)
        except ValueError:
            raise GradeError(f"grades.csv：学生 {student} 的得分 {score!r} 或满分 {top!r} 不是数") from None
        writer.writerow([_spreadsheet_safe(student, name=True), _spreadsheet_safe(status),
                         _number_text(total), _number_text(out_of), *map(_spreadsheet_safe, cells),
                         *map(_number_text, extra)])
    return table.getvalue()

"""The student edition's notebooks: every solution removed, an answer cell in its place.

Sphinx copies each page's source into ``_sources/`` of the HTML folder, and the
page's download button serves that copy.  In the student edition the copy must
not hold the solutions that the pages no longer show.  :func:`strip_notebook`
removes every gated solution (``solution-start`` … ``solution-end``), the
markdown and the code cells between the markers alike, and puts one answer cell
after each exercise (``exercise-end``), where the student's answer goes.
:func:`strip_markdown` does the same for the text of a MyST page.  The course
kit (``scripts/student_kit.py``) hands out the same notebooks.

The answer cell is tagged ``answer`` and carries ``metadata.tmath`` (the exercise
and the labels of its answer keys), the way nbgrader marks its graded cells.  For
an exercise with answer keys it is pre-filled with one line per key,
``my_answer("ex-tour-1", None)`` (``from tmath.exercises import my_answer``): the
student replaces ``None`` by the answer, runs the cell, sees ✓ / ✗, and
``python -m tmath grade`` reads the value from the cell's output (:mod:`tmath.grade`).

The setup cell at the top of each notebook (hidden on the site) tells a kernel
without tmath how to get it; in the student edition it points to the course
kit instead of the book's repository, which holds every solution.

The book's exercises use the gated form only (an executable cell cannot sit inside
a ``{solution}`` directive); a plain ``{solution}`` directive is removed too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import nbformat

__all__ = [
    "answer_cell_source", "solution_texts", "strip_markdown", "strip_notebook", "strip_sources",
]

# One directive fence: its opening line, its option lines, its closing fence.
_DIRECTIVE = r"(?P<fence>`{3,}|~{3,})\{%s\}[^\n]*\n(?:[^\n]*\n)*?(?P=fence)[ \t]*(?:\n|$)"
_SOL_START = re.compile(_DIRECTIVE % "solution-start")
_SOL_END = re.compile(_DIRECTIVE % "solution-end")
_EX_START = re.compile(_DIRECTIVE % "exercise-start")
_EX_END = re.compile(_DIRECTIVE % "exercise-end")
_LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
# A plain (non-gated) solution: a fenced {solution} directive with its body.
_SOL_PLAIN = re.compile(
    r"(?P<fence>`{3,}|~{3,})\{solution\}[^\n]*\n(?:[^\n]*\n)*?(?P=fence)[ \t]*(?:\n|$)"
)
ANSWER_TAG = "answer"


class _Answer:
    """Where an answer cell goes: after the exercise ``label``."""

    def __init__(self, label: str | None):
        self.label = label


class _Removed(str):
    """Text removed with a solution."""


class _Scanner:
    """Walks the markdown of a notebook in order: kept text, removed text, answer slots."""

    def __init__(self):
        self.in_solution = False
        self.label: str | None = None

    def pieces(self, text: str) -> list:
        out: list = []
        pos = 0
        while pos <= len(text):
            if self.in_solution:
                m = _SOL_END.search(text, pos)
                if not m:
                    out.append(_Removed(text[pos:]))
                    return out
                out.append(_Removed(text[pos:m.end()]))
                pos, self.in_solution = m.end(), False
                continue
            found = [m for m in (_SOL_START.search(text, pos), _EX_START.search(text, pos),
                                 _EX_END.search(text, pos)) if m]
            nxt = min(found, key=lambda m: m.start(), default=None)
            if nxt is None:
                out.append(text[pos:])
                break
            if nxt.re is _SOL_START:
                out.append(text[pos:nxt.start()])
                self.in_solution = True
                pos = nxt.start()
                continue
            out.append(text[pos:nxt.end()])
            if nxt.re is _EX_START:
                label = _LABEL.search(nxt.group(0))
                self.label = label.group(1) if label else None
            else:
                out.append(_Answer(self.label))
                self.label = None
            pos = nxt.end()
        return out


_FULL_ONLY = re.compile(r"^(`{3,}|:{3,})\{only\}[ \t]+not[ \t]+student[ \t]*\n.*?^\1[ \t]*\n?", re.M | re.S)


def strip_markdown(text: str) -> str:
    """A MyST page's text without solutions (an answer slot is just a blank line there)."""
    text = _FULL_ONLY.sub("", text)  # ```{only} not student``` (the teacher's worked example)
    scanner = _Scanner()
    pieces = scanner.pieces(_SOL_PLAIN.sub("", text))
    if scanner.in_solution:
        raise ValueError("a solution-start has no matching solution-end")
    return "".join(p for p in pieces if isinstance(p, str) and not isinstance(p, _Removed))


def answer_cell_source(label: str | None, keys: list | None = None) -> str:
    """The pre-filled answer cell of exercise ``label``.

    ``keys``: its answer keys (:func:`tmath.exercises.keys_of`, looked up when None).
    One ``my_answer(label, None)`` line per key, with the unit as a comment; an
    exercise without a key (a proof, an explanation) gets a comment saying who reads it.
    """
    if keys is None and label:
        from tmath.exercises import keys_of

        keys = keys_of(label)
    if not keys:
        return (f"# 练习 {label or ''} 没有可以自动核对的数值答案：在这里写代码，\n"
                "# 或把本单元格改成 Markdown，写下推导和解释，由老师批阅。")
    lines = [
        f"# 练习 {label} 的答案：把 None 换成你算出的数（也可以写变量名或算式），",
        "# 运行本单元格即可自查；老师评分时从这里读答案，请保留本单元格。",
        "from tmath.exercises import my_answer",
        "",
    ]
    for key in keys:
        notes = (["整数"] if key.count else []) + ([f"单位：{key.unit}"] if key.unit else [])
        comment = f"  # {'，'.join(notes)}" if notes else ""
        lines.append(f'my_answer("{key.label}", None){comment}')
    return "\n".join(lines)


def _answer_cell(label: str | None, answer_source: Callable[[str | None], str]):
    cell = nbformat.v4.new_code_cell(answer_source(label), metadata={"tags": [ANSWER_TAG]})
    if label:
        from_source = re.findall(r'my_answer\("([^"]+)"', cell.source)
        cell.metadata["tmath"] = {"exercise": label, "answers": from_source}
    return cell


# --- the setup cell --------------------------------------------------------------------------------

_SETUP_HEADER = "# Setup (hidden on the website)"
# The branch of the setup cell that runs when the kernel lacks tmath (up to the next
# unindented line): the full edition installs tmath from the repository or says to run `make lab`.
_TMATH_BRANCH = re.compile(
    r'^(if importlib\.util\.find_spec\("tmath"\) is None:\n)(?:[ \t]+[^\n]*(?:\n|$))+', re.M
)
STUDENT_TMATH_BRANCH = (
    "    raise ModuleNotFoundError(\n"
    '        "这个内核里没有本书的库 tmath：请按课程包 README 的说明安装 "\n'
    '        "tmath 的 wheel 和 requirements.txt，然后重启内核"\n'
    "    )\n"
)


def student_setup_source(source: str) -> str:
    """The setup cell for students: without tmath, point to the course kit (never the repository)."""
    if not source.startswith(_SETUP_HEADER):
        return source
    new, n = _TMATH_BRANCH.subn(lambda m: m.group(1) + STUDENT_TMATH_BRANCH, source, count=1)
    if n != 1:
        raise ValueError("the setup cell has no `if importlib.util.find_spec(\"tmath\") is None:` branch")
    return new.rstrip("\n")


# --- notebooks -------------------------------------------------------------------------------------


def strip_notebook(nb: nbformat.NotebookNode,
                   answer_source: Callable[[str | None], str] | None = None) -> nbformat.NotebookNode:
    """A copy of ``nb`` without solutions, and with an answer cell after each exercise.

    ``answer_source(label)`` writes an answer cell's code (default: :func:`answer_cell_source`,
    which looks the exercise's keys up in tmath).
    """
    answer_source = answer_source or answer_cell_source
    nb = nbformat.from_dict(nb)
    cells: list = []
    scanner = _Scanner()

    def add_markdown(text: str, template) -> None:
        if not text.strip():
            return
        if cells and cells[-1].cell_type == "markdown" and cells[-1].get("_merge"):
            cells[-1].source += text
            return
        cell = nbformat.v4.new_markdown_cell(text)
        cell.metadata = dict(template.metadata)
        cell["_merge"] = True
        cells.append(cell)

    for cell in nb.cells:
        if cell.cell_type != "markdown":
            if not scanner.in_solution:
                if cell.cell_type == "code":
                    cell.source = student_setup_source(cell.source)
                cells.append(cell)
            continue
        for piece in scanner.pieces(_SOL_PLAIN.sub("", cell.source)):
            if isinstance(piece, _Answer):
                cells.append(_answer_cell(piece.label, answer_source))
            elif not isinstance(piece, _Removed):
                add_markdown(piece, cell)
        if cells and cells[-1].get("_merge"):
            cells[-1].pop("_merge")
    if scanner.in_solution:
        raise ValueError("a solution-start has no matching solution-end")
    for cell in cells:
        cell.pop("_merge", None)
        if cell.cell_type == "markdown":
            cell.source = cell.source.strip("\n")
    nb.cells = cells
    return nb


def _cell_texts(cell) -> list[str]:
    """A cell's source and the text of its outputs (streams, glue records, tables)."""
    texts = [cell.source]
    for output in cell.get("outputs", []):
        texts.append(output.get("text", ""))
        texts.extend(v for v in output.get("data", {}).values() if isinstance(v, str))
    return texts


def solution_texts(nb: nbformat.NotebookNode) -> tuple[list[str], list[str]]:
    """(kept, removed): the texts the student edition keeps and the texts it removes.

    The removed texts are the solutions: their markdown, and the source and outputs
    of the code cells between the markers (where the worked numbers are glued).
    """
    kept: list[str] = []
    removed: list[str] = []
    scanner = _Scanner()
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            (removed if scanner.in_solution else kept).extend(_cell_texts(cell))
            continue
        for piece in scanner.pieces(_SOL_PLAIN.sub("", cell.source)):
            if isinstance(piece, _Removed):
                removed.append(piece)
            elif isinstance(piece, str):
                kept.append(piece)
        for match in _SOL_PLAIN.finditer(cell.source):
            removed.append(match.group(0))
    return kept, removed


def strip_sources(folder: str | Path) -> list[Path]:
    """Strip every ``.ipynb`` and ``.md`` source under ``folder`` (an HTML build's ``_sources``)."""
    changed = []
    for path in sorted(Path(folder).rglob("*")):
        name = path.name
        if name.endswith(".ipynb"):
            nb = nbformat.read(path, as_version=4)
            nbformat.write(strip_notebook(nb), path)
            changed.append(path)
        elif name.endswith((".md", ".md.txt", ".ipynb.txt")):
            text = path.read_text(encoding="utf-8")
            new = strip_markdown(text)
            if new != text:
                path.write_text(new, encoding="utf-8")
                changed.append(path)
    return changed

"""The student edition's downloadable sources: every solution removed, an answer cell in its place.

Sphinx copies each page's source into ``_sources/`` of the HTML folder, and the
page's download button serves that copy.  In the student edition the copy must
not hold the solutions that the pages no longer show.  :func:`strip_notebook`
removes every gated solution (``solution-start`` … ``solution-end``), the
markdown and the code cells between the markers alike, and puts one empty code
cell after each exercise (``exercise-end``), where the student's answer goes.
:func:`strip_markdown` does the same for the text of a MyST page.

The book's exercises use the gated form only (an executable cell cannot sit inside
a ``{solution}`` directive); a plain ``{solution}`` directive is removed too.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

__all__ = ["strip_markdown", "strip_notebook", "strip_sources"]

# One directive fence: its opening line, its option lines, its closing fence.
_DIRECTIVE = r"(?P<fence>`{3,}|~{3,})\{%s\}[^\n]*\n(?:[^\n]*\n)*?(?P=fence)[ \t]*(?:\n|$)"
_SOL_START = re.compile(_DIRECTIVE % "solution-start")
_SOL_END = re.compile(_DIRECTIVE % "solution-end")
_EX_END = re.compile(_DIRECTIVE % "exercise-end")
# A plain (non-gated) solution: a fenced {solution} directive with its body.
_SOL_PLAIN = re.compile(
    r"(?P<fence>`{3,}|~{3,})\{solution\}[^\n]*\n(?:[^\n]*\n)*?(?P=fence)[ \t]*(?:\n|$)"
)

ANSWER = object()  # marks where an empty answer cell goes


def _pieces(text: str, in_solution: bool) -> tuple[list, bool]:
    """Split one markdown text into kept text and answer slots; track the solution state."""
    out: list = []
    pos = 0
    while pos <= len(text):
        if in_solution:
            m = _SOL_END.search(text, pos)
            if not m:
                return out, True
            pos, in_solution = m.end(), False
            continue
        start = _SOL_START.search(text, pos)
        end_ex = _EX_END.search(text, pos)
        nxt = min((m for m in (start, end_ex) if m), key=lambda m: m.start(), default=None)
        if nxt is None:
            out.append(text[pos:])
            break
        out.append(text[pos:nxt.end()] if nxt is end_ex else text[pos:nxt.start()])
        if nxt is end_ex:
            out.append(ANSWER)
        else:
            in_solution = True
        pos = nxt.end()
    return out, in_solution


def strip_markdown(text: str) -> str:
    """A MyST page's text without solutions (an answer slot is just a blank line there)."""
    text = _SOL_PLAIN.sub("", text)
    pieces, open_solution = _pieces(text, False)
    if open_solution:
        raise ValueError("a solution-start has no matching solution-end")
    return "".join(p for p in pieces if p is not ANSWER)


def strip_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` without solutions, and with an empty code cell after each exercise."""
    nb = nbformat.from_dict(nb)
    cells: list = []
    in_solution = False

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
            if not in_solution:
                cells.append(cell)
            continue
        pieces, in_solution = _pieces(_SOL_PLAIN.sub("", cell.source), in_solution)
        for piece in pieces:
            if piece is ANSWER:
                cells.append(nbformat.v4.new_code_cell("", metadata={"tags": ["answer"]}))
            else:
                add_markdown(piece, cell)
        if cells and cells[-1].get("_merge"):
            cells[-1].pop("_merge")
    if in_solution:
        raise ValueError("a solution-start has no matching solution-end")
    for cell in cells:
        cell.pop("_merge", None)
        if cell.cell_type == "markdown":
            cell.source = cell.source.strip("\n")
    nb.cells = cells
    return nb


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

"""No graded answer stands printed in its chapter (issue 31, finding 7).

For every answer key, the chapter that holds the exercise is read as a reader sees it: its
markdown outside the solutions, with every ``{glue:text}`` resolved to the text the page shows,
and the saved outputs of its visible code cells (not those tagged ``remove-cell`` or
``remove-output``, not those inside a solution). Every number in that text, in every way the
book writes numbers (``25,905``, ``3.229 × 10²³``, ``$3.229\\times 10^{23}$``, ``1.2e+23``,
``12.3%``, ``320 万``), is checked against the key with the key's own rule
(:meth:`tmath.exercises.AnswerKey.accepts`): a number the check would accept is a leak. A
student who copies it gets the point.

A number the key accepts by coincidence (another quantity of the chapter that falls within the
tolerance) is listed in :data:`COINCIDENCES` with what it is. One rule narrows the search, and
is stated here, not applied by hand: for a key whose value is small and round (a multiple of one
half, at most :data:`ROUND_LIMIT`: 8 cards, 12 layers, 4.5 times ...), only the numbers written
with a decimal point (``29.0``, ``96.02``) are searched: a bare 8 or 12 is everywhere in a
chapter (a head count, a byte width). :data:`OPEN_CHAPTERS` can leave a chapter out while it is
rewritten elsewhere; it leaves none out now.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT

#: Chapters not searched yet (none: book/parallel/ is searched too since its leaks were fixed).
OPEN_CHAPTERS = ()

#: Numbers a chapter prints that its key accepts by coincidence: another quantity, which happens
#: to fall within the tolerance. Each was read in its chapter; the reason says what it is.
COINCIDENCES: dict[tuple[str, str], str] = {
    ("ex-arch-3/gb", "350"): "the model name GPT-3 350M in the table of sizes, not GB of weights",
    ("ex-full-ledger-1/norms", "8,192"): "the chapter's T = 8,192 (and 70B's D); the answer is 8B's 2D",
    ("ex-full-ledger-1/norms", "8192"): "the chapter's T = 8192; the answer is 2D of Llama 3 8B",
    ("ex-mh-4/head", "0.353"): "the paper's wrong weight in the erratum table, not head_3's component",
    ("ex-mh-6/alpha-2", "0.33"): "the paper's partial dot product 0.33, not the second weight",
    ("ex-arch-2", "2.0"): "GPT-3 1.3B's learning rate (2.0 × 10⁻⁴) in the table of sizes, not F/d",
    ("ex-energy-3", "26.9"): "seconds per training step in an erratum, not a utilization in %",
    ("ex-moe-1/bf16", "16.00"): "a ratio of communication times in a table, not a number of cards",
    ("ex-moe-1/fp8", "8.0"): "TP's message over link bandwidth in a table, not a number of cards",
    ("ex-moe-1/fp8", "8.00"): "a ratio of communication times in a table, not a number of cards",
    ("ex-collectives-5/ring", "1.75"): "an all-reduce's busiest-link load on an 8-card switch (in M_arr), "
    "not gpt-oss-20b's TP/EP ratio on a ring",
    ("ex-pipeline-2/1f1b", "6.3"): "the number of the source's section 6.3, not micro-batches in flight",
    ("ex-pipeline-2/1f1b", "6.361"): "how many times the ring-attention threshold Table 4's 8,192-token "
    "chunk is, not micro-batches in flight",
}

#: Answers that are a multiple of one half up to this are not searched (see the module's docstring).
ROUND_LIMIT = 100

SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-−]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?:\s*(?:×|\\times)\s*10\s*(?:\^\{?(?P<tex>[-−]?\d+)\}?|(?P<sup>[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+))"
    r"|[eE](?P<e>[+-]?\d+)"
    r"|\s*(?P<cn>[万亿]))?"
    r"(?P<pct>\s*%)?"
)
GLUE = re.compile(r"\{glue(?::(?P<kind>\w+))?\}`(?P<name>[^`:]+)(?::(?P<spec>[^`]*))?`")


def numbers_in(text: str) -> list[tuple[float, str]]:
    """Every number of ``text`` as (value, as written); a percentage also as its fraction."""
    found = []
    for m in NUMBER.finditer(text):
        digits = m["int"].replace(",", "") + (m["frac"] or "")
        exponent = m["tex"] or (m["sup"].translate(SUPERSCRIPT) if m["sup"] else None) or m["e"]
        try:
            value = float(digits) * (10.0 ** int(exponent.replace("−", "-")) if exponent else 1.0)
        except (ValueError, OverflowError):
            continue
        value *= {"万": 1e4, "亿": 1e8}.get(m["cn"] or "", 1.0)
        if m["sign"]:
            value = -value
        found.append((value, m.group(0).strip()))
        if m["pct"]:
            found.append((value / 100, m.group(0).strip()))
    return found


def _glue_values(nb: dict) -> dict[str, object]:
    """The notebook's glue records: name → the Python value (or its text when not a literal)."""
    values = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            scrap = out.get("metadata", {}).get("scrapbook")
            if not scrap:
                continue
            prefix = scrap.get("mime_prefix", "")
            data = out.get("data", {})
            text = "".join(data.get(prefix + "text/markdown") or data.get(prefix + "text/plain") or "")
            try:
                values[scrap["name"]] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                values[scrap["name"]] = text
    return values


def _rendered(markdown: str, glue: dict[str, object]) -> str:
    """``markdown`` with each glue role replaced by what the page shows in its place."""

    def paste(m: re.Match) -> str:
        value = glue.get(m["name"], "")
        if m["spec"] and m["kind"] == "text":
            try:
                return format(value, m["spec"])
            except (ValueError, TypeError):
                return str(value)
        return str(value)

    return GLUE.sub(paste, markdown)


def _output_text(out: dict) -> str:
    if out.get("metadata", {}).get("scrapbook"):
        return ""  # a glue record: shown only where a page pastes it
    if out.get("output_type") == "stream":
        return "".join(out.get("text", ""))
    data = out.get("data", {})
    for mime in ("text/markdown", "text/html", "text/plain"):
        if mime in data:
            return re.sub(r"<[^>]+>", " ", "".join(data[mime]))
    return ""


def chapter_text(path: Path) -> str:
    """What a reader of the chapter sees, but for the solutions (a ``.md`` page: its text)."""
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    glue = _glue_values(nb)
    shown, in_solution = [], False
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            lines = iter(source.splitlines())
            for line in lines:
                if line.startswith("```{solution-start}"):
                    in_solution = True
                elif line.startswith("```{solution-end}"):
                    in_solution = False
                    next(lines, None)  # the directive's closing fence
                elif not in_solution:
                    shown.append(_rendered(line, glue))
        elif cell["cell_type"] == "code" and not in_solution:
            tags = cell.get("metadata", {}).get("tags", [])
            if "remove-cell" in tags or "remove-output" in tags:
                continue
            shown += [_output_text(o) for o in cell.get("outputs", [])]
    return "\n".join(shown)


@cache
def _chapters() -> dict[str, Path]:
    """Exercise label → the notebook that states it."""
    where = {}
    for path in sorted((ROOT / "book").rglob("*.ipynb")):
        for label in re.findall(r":label: (ex-[\w.-]+)", path.read_text(encoding="utf-8")):
            where[label] = path
    return where


def _is_round(key, value: float) -> bool:
    """A small round answer (a multiple of one half, at most 100): 8 bytes, 12 layers, 4.5 times."""
    half = round(2 * value) / 2
    return abs(half) <= ROUND_LIMIT and bool(key.accepts(half))


def leaks(open_chapters: tuple[str, ...] = OPEN_CHAPTERS) -> dict[str, list[str]]:
    """Key label → the numbers its chapter shows that the key accepts."""
    from tmath.exercises import _KEYS, labels

    texts: dict[Path, list[tuple[float, str]]] = {}
    found = {}
    for label in labels():
        path = _chapters()[label.split("/")[0]]
        if str(path.relative_to(ROOT)).startswith(open_chapters):
            continue
        value = float(_KEYS[label].compute())
        key = replace(_KEYS[label], compute=lambda value=value: value)  # computed once, not per number
        round_key = _is_round(key, value)
        if path not in texts:
            texts[path] = numbers_in(chapter_text(path))
        hits = sorted({written for x, written in texts[path]
                       if key.accepts(x) and (label, written) not in COINCIDENCES
                       and (not round_key or "." in written)})
        if hits:
            found[label] = hits
    return found


# --- the finder finds what it should --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [("共 25,905 个", [25905.0]), ("约 3.229 × 10²³ FLOPs", [3.229e23]), ("$1.5\\times 10^{-3}$", [1.5e-3]),
     ("1.2e+23", [1.2e23]), ("占 12.3%", [12.3, 0.123]), ("320 万张", [3.2e6]), ("v1.0274", []),
     ("−2.5", [-2.5])],
)
def test_numbers_are_read_as_the_book_writes_them(text, values):
    assert [v for v, _ in numbers_in(text)] == pytest.approx(values)


def test_the_finder_sees_glue_and_outputs_but_not_solutions(tmp_path):
    def md(text):
        return {"cell_type": "markdown", "metadata": {}, "source": text}

    def code(tags, outputs):
        return {"cell_type": "code", "metadata": {"tags": tags}, "source": "", "outputs": outputs,
                "execution_count": None}

    record = {"output_type": "display_data", "metadata": {"scrapbook": {
        "name": "n", "mime_prefix": "application/papermill.record/"}},
        "data": {"application/papermill.record/text/plain": "25905"}}
    printed = {"output_type": "stream", "name": "stdout", "text": "ratio 1.0274\n"}
    hidden = {"output_type": "stream", "name": "stdout", "text": "hidden 777\n"}
    nb = {"cells": [
        code(["remove-cell"], [record, hidden]),
        md("正文 {glue:text}`n:,` 个。\n\n```{exercise-start}\n:label: ex-x-1\n```\n题目\n"
           "```{exercise-end}\n```\n\n```{solution-start} ex-x-1\n:class: dropdown\n```\n解 888"),
        code([], [{"output_type": "stream", "name": "stdout", "text": "solution 999\n"}]),
        md("```{solution-end}\n```\n之后 4242"),
        code(["hide-input"], [printed]),
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    text = chapter_text(path)
    assert "25,905" in text and "4242" in text and "1.0274" in text
    assert "888" not in text and "999" not in text and "777" not in text


# --- the book --------------------------------------------------------------------------------------


def test_no_answer_is_printed_in_its_chapter():
    found = leaks()
    assert not found, (
        "answers printed in their chapter (ask for the step the chapter did not show, or hide the "
        f"number where it is not the chapter's point): {found}"
    )


def test_every_coincidence_is_still_printed():
    """An entry of COINCIDENCES that the chapter no longer prints is stale: remove it."""
    from tmath.exercises import _KEYS, labels

    labels()
    stale = []
    for label, written in COINCIDENCES:
        path = _chapters()[label.split("/")[0]]
        shown = {w for x, w in numbers_in(chapter_text(path)) if _KEYS[label].accepts(x)}
        if written not in shown:
            stale.append((label, written))
    assert not stale, f"coincidences no longer printed: {stale}"


# --- the whole book ---------------------------------------------------------------------------------


def book_pages() -> list[Path]:
    """Every page of the book: each notebook and Markdown page under book/ (a page another
    helper adds is read without being listed here)."""
    return sorted(p for p in (ROOT / "book").rglob("*") if p.suffix in (".ipynb", ".md") and p.is_file()
                  and not any(part.startswith((".", "_")) for part in p.relative_to(ROOT / "book").parts))


@cache
def _page_numbers(path: Path) -> list[tuple[float, str]]:
    return numbers_in(chapter_text(path))


def _significant(written: str) -> int:
    """Significant digits of a number as written (``48,132``: 5, ``2.69%``: 3)."""
    mantissa = re.match(r"[-−]?[\d,]*\.?\d*", written.replace(",", ""))[0].lstrip("-−")
    return len(mantissa.replace(".", "").lstrip("0")) or 1


def _as_precise(key, value: float, written: str) -> bool:
    """Whether a number of another page is written as precisely as the answer is asked: a large
    exact count, down to an absolute tolerance (``2.69%`` for ±0.005), or to the digits of a
    careful hand calculation (:data:`tmath.exercises.HAND_DIGITS`, or the key's ``digits``)."""
    from tmath.exercises import HAND_DIGITS

    frac = re.search(r"\.(\d+)", written.split("×")[0])
    if key.count:
        return abs(value) >= 1000 and "." not in written
    if key.abs_tol and "×" not in written:
        return 10 ** -(len(frac[1]) if frac else 0) <= key.abs_tol * 2.0001
    return _significant(written) >= (key.digits or HAND_DIGITS)


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT / "book")) if path.is_relative_to(ROOT / "book") else str(path)


def leaks_elsewhere(labels: list[str]) -> dict[str, list[str]]:
    """Key label -> ``page: number`` for the numbers any page of the book other than the
    exercise's own (read as a reader sees it, but for its solutions) prints as precisely as the
    answer is asked and that the key accepts."""
    from tmath.exercises import _KEYS

    found = {}
    for label in labels:
        home = _chapters()[label.split("/")[0]]
        value = float(_KEYS[label].compute())
        key = replace(_KEYS[label], compute=lambda value=value: value)  # computed once
        hits = sorted(f"{_where(path)}: {w}" for path in book_pages() if path != home
                      for x, w in _page_numbers(path) if key.accepts(x) and _as_precise(key, value, w))
        if hits:
            found[label] = hits
    return found


#: The answers issue 39 found printed in another chapter (the cheatsheet's T* = 48,132 and
#: 1.3287, the energy chapter's 2.69 %, Llama 3 70B's model states in the memory chapter and
#: the cheatsheet), and the exercises changed so that a reader of the whole book does not find them.
ISSUE_39_CROSS_LEAKS = ("ex-crossover-1", "ex-crossover-1/over-d", "ex-mem-4", "ex-fails-2",
                        "ex-arch-4/tb", "ex-arch-4/gpus", "ex-sixpt-1/flops", "ex-sixpt-1/ratio")


def test_the_answers_issue_39_found_elsewhere_are_printed_nowhere():
    from tmath.exercises import labels

    labels()
    found = leaks_elsewhere(list(ISSUE_39_CROSS_LEAKS))
    assert not found, f"answers printed in another page of the book: {found}"


def test_the_whole_book_finder_finds_an_answer_printed_in_another_chapter(tmp_path, monkeypatch):
    """The cheatsheet as it was: Mixtral's T* = 48,132 in its table."""
    from tmath.exercises import labels

    labels()
    page = tmp_path / "cheat.md"
    page.write_text("| `mixtral-8x7b` | 8.29 × 10¹⁰ | 48,132 |\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "book_pages", lambda: [page])
    assert leaks_elsewhere(["ex-crossover-1"]) == {"ex-crossover-1": [f"{page}: 48,132"]}

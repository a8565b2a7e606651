"""No graded answer stands printed in the book (issue 31, finding 7; issue 39: the whole book).

Every page of the book is read as a reader sees it: a notebook's markdown outside the solutions
(of any exercise), with every ``{glue:text}`` resolved to the text the page shows, and the saved
outputs of its visible code cells (not those tagged ``remove-cell`` or ``remove-output``, not
those inside a solution); a Markdown page (the notation, the guides under ``book/guides``) as it
is written. Every number in that text, in every way the book writes numbers (``25,905``,
``3.229 × 10²³``, ``$3.229\\times 10^{23}$``, ``1.2e+23``, ``12.3%``, ``320 万``), is read once per
page (:func:`_page_numbers`), and all of them are sorted into one index (:func:`_book_index`), in
which each key looks up only the numbers near its value: the whole book costs about as much as
one chapter did.

**The exercise's own chapter**: every number the key would accept (with the key's own rule,
:meth:`tmath.exercises.AnswerKey.accepts`) is a leak: a student who copies it gets the point.

**Every other page**: a number is a leak when the key accepts it and the page prints *the
answer*: the key's value to the digits the number is written with (:func:`_as_written`:
``349.2`` or ``0.75`` for 0.7472, but not ``347.9`` for 349.21, a page's other quantity that
happens to fall within the tolerance). However few its digits: the cheatsheet's ``0.75`` TB
was Mixtral's training state, the answer of ex-arch-4 to its 1 %. A small round answer (a
multiple of one half, at most :data:`ROUND_LIMIT`: 8 cards, 1.5 times) is not searched on other
pages: ``2.00``, ``8.0000`` or ``1.500`` is some ratio on every page, and a bare integer up to
that limit (``27``, ``42``) some count.

A number the key accepts by coincidence (another quantity that falls within the tolerance, or
one that equals the answer without being it) is listed in :data:`COINCIDENCES` with what it is,
for one page (``(label, number, page)``) or, when it is the same everywhere (a context length
that appears on every page), for all of them (``(label, number)``). One rule narrows the search,
and is stated here, not applied by hand: for a key whose value is small and round (a multiple of
one half, at most :data:`ROUND_LIMIT`: 8 cards, 12 layers, 4.5 times ...), only the numbers of
its own chapter written with a decimal point (``29.0``, ``96.02``) are searched: a bare 8 or 12
is everywhere in a chapter (a head count, a byte width). :data:`OPEN_CHAPTERS` can leave a
chapter out while it is rewritten elsewhere; it leaves none out now.
"""

from __future__ import annotations

import ast
import bisect
import json
import math
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT

#: Chapters not searched yet (none: book/parallel/ is searched too since its leaks were fixed).
OPEN_CHAPTERS = ()

#: Numbers a page prints that a key accepts by coincidence: another quantity, which happens to
#: fall within the tolerance (or to equal the answer). ``(label, number)``: on every page,
#: ``(label, number, page)``: on that page only (its path under book/). Each was read where it
#: is printed; the reason says what it is.
COINCIDENCES: dict[tuple[str, str] | tuple[str, str, str], str] = {
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
    ("ex-arch-4/gpus", "6.0"): "GPT-3 125M's learning rate 6.0 × 10⁻⁴ in the table of sizes, not a number "
    "of cards",
    # --- on other pages (issue 39) ---
    ("ex-arch-3/gb", "812", "parallel/collectives.ipynb"): "NCCL's issue 812 in a citation key, not GB of "
    "weights",
    ("ex-cheat-3/gb", "6.3"): "the source's section 6.3, not GB per card",
    ("ex-cheat-3/gb", "6.34", "parallel/together.ipynb"): "seconds per step (ZeRO-1 with fp32 gradients; "
    "Llama 3 405B on 16,384 cards), not GB per card",
    ("ex-collectives-2", "350"): "the model name GPT-3 350M (gpt3-350m), not microseconds",
    ("ex-collectives-4", "2.13"): "torch's version 2.13, not a ratio of times",
    ("ex-data-1/s", "0.75", "ledger/cheatsheet.ipynb"): "Mixtral 8x7B's training state in TB, not seconds",
    ("ex-data-4/zero2", "15.1%", "ledger/full-ledger.ipynb"): "the Q/K/V/O projections' share of Llama 3 "
    "70B's training FLOPs, not GB",
    ("ex-data-4/zero3", "11.7%", "parallel/together.ipynb"): "a share in the table of pipeline interleaving, "
    "not GB",
    ("ex-data-5/s", "1.54", "appendix/calculator.ipynb"): "Gemma 2 27B's KV cache per sequence in GB, not "
    "seconds",
    ("ex-dc-2", "7.0"): "other quantities: Llama 3.1 70B's 7.0M GPU hours (energy), 7.0 D (memory), 7.0 ms "
    "(memory-scheduling); not seconds",
    ("ex-dc-2", "6.99", "flops/when-6pt-fails.ipynb"): "Llama 3 8B's T*/D in the crossover table, not "
    "seconds",
    ("ex-dc-2", "7%", "notation.md"): "the difference between GB and GiB (about 7 %), not seconds",
    ("ex-flash-measure-1", "384"): "16 days of 384 hours (the fleet erratum), 8 NICs' 384 GB/s, 384 bytes "
    "of a toy layout; not MiB at T = 4,096",
    ("ex-flash-naive-1", "8.8"): "GB of weights per card (DualPipe's card 0; fp8 Llama 3 70B at TP 8), not "
    "TB of scores",
    ("ex-flash-naive-4", "3.98", "serving/speculative-quant.ipynb"): "a decode step of 3.98 ms, not a ratio",
    ("ex-flash-naive-5", "1.52"): "GPT-3 XL's 1.52B parameters with the table's 3,072-wide attention (an "
    "erratum), not a ratio",
    ("ex-flash-naive-6/128k", "11.6"): "the source's 11.6 s per step (the energy erratum), 11.6 ms per "
    "sequence (together); not a percentage",
    ("ex-fwd-3/gap", "10.8%", "ledger/full-ledger.ipynb"): "Qwen2-7B's attention projections' share of its "
    "parameters, not a logit gap",
    ("ex-fwd-3/gap", "10.8", "parallel/published-runs.ipynb"): "10.8 s per step of PaLM's model with its "
    "communication hidden, not a logit gap",
    ("ex-llama3-70b-1", "429", "serving/speculative-quant.ipynb"): "Llama 3 70B at TP 4 with int4 weights "
    "and a bf16 cache of 2,048-token sequences (another deployment whose bytes per card happen to be the "
    "exercise's: a quarter of the cache per token, four times the tokens)",
    ("ex-llama3-70b-2/ms", "3.6", "ledger/cheatsheet.ipynb"): "gpt-oss-20b's 3.6B active parameters, not ms",
    ("ex-llama3-70b-2/ms", "3.62%", "ledger/full-ledger.ipynb"): "Mistral 7B's embedding share, not ms",
    ("ex-mem-1/1", "295"): "H100's ridge point, 295 FLOP/byte, not GB",
    ("ex-mem-1/3", "17.6"): "17.6 GB of Llama 3 70B's weights per card at TP 8 (calculator, Llama 3 70B, "
    "serving) and PaLM's 17.6 s per step; not ZeRO-3's model state per card",
    ("ex-mem-1/3", "17.6%", "flops/six-pt.ipynb"): "DeepSeek V3's MFU over the FP8 peak, not GB",
    ("ex-mem-3", "24.8", "parallel/pipeline-expert-context.ipynb"): "DeepSeek V3's dispatch of 24.8 kB per "
    "token per layer, not GB",
    ("ex-mem-3", "25%", "parallel/pipeline-expert-context.ipynb"): "fewer dispatch bytes than deduplication "
    "alone, not GB",
    ("ex-mem-6/gb", "3.2"): "GPT-3's batch of 3.2M tokens and the sources' sections 3.2, not GB",
    ("ex-mem-6/gb", "3.22", "ledger/cheatsheet.ipynb"): "gpt-oss-20b's full-length KV cache in GB, not a "
    "backward peak",
    ("ex-mh-3/s2-s1", "2.8%"): "the exact training count's excess over GPT-3's 6PT, not a softmax weight",
    ("ex-mh-3/s3-s2", "7.3%", "parallel/tensor.ipynb"): "attention's share of one layer's 45.9 ms, not a "
    "softmax weight",
    ("ex-mh-5", "1.04%", "ledger/full-ledger.ipynb"): "Llama 3.1 405B's embedding share, not a variance",
    ("ex-mh-6/alpha-2", "33%", "ledger/memory.ipynb"): "full recomputation's extra compute (6PT to 8PT), not "
    "an attention weight",
    ("ex-moe-6/mla", "34%", "energy/energy.ipynb"): "Llama 3's average utilisation, not MLA's cache share",
    ("ex-ms-3", "5.9", "ledger/cheatsheet.ipynb"): "Llama 3.1 405B's T*/D, not a ratio of heads",
    ("ex-pipeline-3", "92%", "parallel/collectives.ipynb"): "NCCL LL128's share of the bandwidth, not a "
    "pipeline efficiency",
    ("ex-pipeline-4", "6.1"): "the source's section 6.1, not seconds",
    ("ex-pipeline-4", "6.1%", "flops/when-6pt-fails.ipynb"): "Llama 3 8B's 6PT error at T = 512, not seconds",
    ("ex-runs-1", "2.4", "appendix/calculator.ipynb"): "GPT-2 medium's training GFLOPs per token, not days",
    ("ex-runs-1", "2.4%", "ledger/memory.ipynb"): "selective recomputation's extra FLOPs at T = 4,096, not "
    "days",
    ("ex-runs-1", "2.4", "serving/speculative-quant.ipynb"): "int4's speed-up of a decode step, not days",
    ("ex-runs-2", "4.8"): "H200's 4.8 TB/s (statements) and 4.8 times the source's activations (memory), not "
    "seconds",
    ("ex-runs-5", "8.59", "flash/naive-memory.ipynb"): "Q, K, V and O at T = 131,072 in GB, not billions of "
    "parameters",
    ("ex-runs-5", "8.6", "flash/naive-memory.ipynb"): "one layer's scores at T = 8,192 in GB, not billions "
    "of parameters",
    ("ex-runs-5", "8.6", "parallel/together.ipynb"): "8.6 µs per small all-reduce, not billions of "
    "parameters",
    ("ex-tensor-4", "8.5", "parallel/together.ipynb"): "ZeRO-3's 8.5 s of traffic, not a critical TP degree",
    ("ex-together-2", "12%"): "other shares: V100's overestimated efficiency (errata, energy), throughput "
    "drops (data, tensor); not GB",
    ("ex-together-2", "12.1%"): "Llama 3 70B's 6PT error at T = 8,192 (when-6pt-fails) and the notation "
    "page's example of a percentage, not GB",
    ("ex-together-3", "7.9", "parallel/data.ipynb"): "GB a card sends per step for GPT-3 on 88-card V100 "
    "replicas, not ms",
    ("ex-tour-3/share", "4.0"): "4.0 times (errata), 4.0 s (a toy schedule in memory-scheduling), not a "
    "share",
    ("ex-tour-3/share", "4.0%", "parallel/together.ipynb"): "the full T² count's excess at 8K, not a share "
    "of parameters",
    ("ex-units-1/bytes", "6.2 亿", "gpt3/architecture.ipynb"): "GPT-3 175B's embedding parameters (the "
    "source's 6.2 亿), not bytes of W_down",
    ("ex-arch-1/share", "8.1", "flash/naive-memory.ipynb"): "the source's section 8.1, not a share in %",
    ("ex-arch-1/share", "8.14", "gpt3/multihead.ipynb"): "the source's equation numbers 8.10-8.14, not a "
    "share in %",
    ("ex-flash-backward-2/lse", "2,048"): "GPT-3's context T = 2,048, on nearly every page; the answer is "
    "Llama 3 70B's lse of one layer at T = 8,192 (64 x 8,192 x 4 bytes), which is 2,048 KiB",
    ("ex-flash-backward-2/lse", "2048"): "GPT-3's context T = 2048, as code writes it",
    ("ex-flash-naive-6", "2.09", "appendix/calculator.ipynb"): "Gemma 2 27B's decode step in ms in the "
    "calculator's table, not FlashAttention's extra FLOPs in %",
    ("ex-flash-online-4", "51.6%", "parallel/together.ipynb"): "the modelled MFU of Llama 3 405B on "
    "16,384 cards with its communication hidden (naive 1F1B), not a share of causal blocks",
    ("ex-flash-online-5", "−6.4%", "flops/when-6pt-fails.ipynb"): "6PT's error (GPT-2 small at T = 512, "
    "Llama 3 8B at 8,192), not the log10 of float32's relative error",
    ("ex-mem-1/3", "17.64", "ledger/llama3-70b.ipynb"): "Llama 3 70B's bf16 weights per card at TP 8 (2P/8); "
    "ZeRO-3's model state per card on 64 cards (16P/64) is the same number, another quantity",
    ("ex-mem-1/3", "17.64", "appendix/errata.ipynb"): "the same weights per card at TP 8, in the erratum of "
    "the Llama 3 70B chapter's batch",
    ("ex-moe-6/mla", "0.34", "gpt3/forward.ipynb"): "GPT-3's output layer over one block (0.34 times), not "
    "MLA's cache as a share of the weights",
    ("ex-moe-6/mla", "0.34", "ledger/llama3-70b.ipynb"): "a 4K sequence's KV cache per card at TP 8 "
    "(GB), not MLA's cache as a share of the weights",
    ("ex-pipeline-1/mb", "135", "serving/speculative-quant.ipynb"): "how many sequences fit at TP 2 with "
    "fp8 weights, not micro-batches",
    ("ex-units-1/flops", "9.621 × 10¹¹", "flash/naive-memory.ipynb"): "FlashAttention's attention FLOPs of "
    "one layer at GPT-2 medium's shape, not Llama 3 70B's W_down",
    ("ex-runs-3", "52.2%", "parallel/published-runs.ipynb"): "the paper's share of the A100 peak "
    "(163 of 312 TFLOP/s) for two other rows of its Table 1, not the ratio to the model",
    ("ex-runs-3", "51.5%", "parallel/published-runs.ipynb"): "the model's MFU for DeepSeek-V3's report "
    "layout, which plan prints in that section, not the Megatron row's ratio to the model",
    ("ex-runs-3", "0.52", "gpt3/multihead.ipynb"): "the source's dot product for 猫, "
    "not a ratio of throughputs",
    ("ex-runs-3", "0.52", "ledger/memory.ipynb"): "the Llama block's activations over the GPT constants', "
    "not a ratio of throughputs",
    ("ex-ms-5", "327", "ledger/llama3-70b.ipynb"): "the first digits of 327,680 bytes of KV cache per token, "
    "not a number of KV blocks",
    ("ex-ms-5", "327", "appendix/errata.ipynb"): "4K sequences in the source's 440 GB pool, not a number of "
    "KV blocks",
    ("ex-dc-4", "2.9", "energy/energy.ipynb"): "years for GPU efficiency to double, not dollars per GPU-hour",
    ("ex-pd-5", "6.8", "appendix/calculator.ipynb"): "GB per card of GPT-3 6.7B's plan in the calculator's "
    "table, not seconds of a request",
    ("ex-sq-4", "41%"): "Llama 3 405B's MFU (its Table 4, or the model's), not an acceptance rate",
    ("ex-sq-4", "41.0%"): "an MFU the model gives Llama 3 405B, not an acceptance rate",
}

#: Pages that show right answers on purpose. The teacher's guide grades a worked example (five
#: students' tour notebooks, graded as written by tests/test_student_kit.py), and a grading example
#: needs right answers; a course that varies the tour's numbers per student (ex-tour-1, ex-tour-3)
#: gives each student other keys than these.
SHOWN_ON_PURPOSE: dict[tuple[str, str, str], str] = {
    (label, written, "guides/teachers.md"): "a right answer of the teacher's guide's worked example"
    for label, written in (("ex-tour-1/share", "32.08"), ("ex-tour-1/share", "32.1"),
                           ("ex-tour-3/extra", "257315840"), ("ex-tour-3/share", "4.0053"),
                           ("ex-tour-3/share", "4.01"), ("ex-tour-4", "3.9998"), ("ex-tour-5", "218112000"),
                           ("ex-tour-2", "108"))
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


def book_pages() -> list[Path]:
    """Every page of the book: each notebook and Markdown page under book/ (a page another
    helper adds is read without being listed here)."""
    return sorted(p for p in (ROOT / "book").rglob("*") if p.suffix in (".ipynb", ".md") and p.is_file()
                  and not any(part.startswith((".", "_")) for part in p.relative_to(ROOT / "book").parts))


def _where(path: Path) -> str:
    """A page as COINCIDENCES names it: its path under book/."""
    return str(path.relative_to(ROOT / "book")) if path.is_relative_to(ROOT / "book") else str(path)


@cache
def _page_numbers(path: Path) -> tuple[tuple[float, str], ...]:
    """The numbers of one page as a reader sees it: read once, whatever the number of keys."""
    return tuple(numbers_in(chapter_text(path)))


@cache
def _book_index(pages: tuple[Path, ...]) -> tuple[list[float], list[tuple[float, str, Path]]]:
    """Every number of ``pages``, sorted by value (and the sorted values, for bisection)."""
    entries = sorted(((x, w, path) for path in pages for x, w in _page_numbers(path)
                      if math.isfinite(x)), key=lambda e: e[0])
    return [e[0] for e in entries], entries


def _near(key, value: float, pages: tuple[Path, ...]) -> list[tuple[float, str, Path]]:
    """The numbers of ``pages`` that ``key`` may accept: those within 1.25 times its tolerance
    of ``value`` (the grid never accepts more, see :mod:`tmath.exercises`), with a margin."""
    if key.count:
        span = key.abs_tol + 1
    elif key.abs_tol:
        span = 1.5 * key.abs_tol
    elif key.rel_tol < 0.5:
        span = 1.5 * key.rel_tol * abs(value) / (1 - 1.5 * key.rel_tol)
    else:
        span = math.inf
    values, entries = _book_index(pages)
    return entries[bisect.bisect_left(values, value - span):bisect.bisect_right(values, value + span)]


def _is_round(key, value: float) -> bool:
    """A small round answer (a multiple of one half, at most 100): 8 bytes, 12 layers, 4.5 times."""
    half = round(2 * value) / 2
    return abs(half) <= ROUND_LIMIT and bool(key.accepts(half))


def _as_written(value: float, x: float, written: str) -> bool:
    """Whether ``written`` (read as ``x``) is ``value`` to the digits it is written with: within
    half a unit of its last digit (``349.2`` is 349.21; ``347.9`` and ``3.987`` for 3.984 are not)."""
    m = re.match(r"[-−]?([\d,]+)(\.\d+)?", written)
    mantissa = float(m[1].replace(",", "") + (m[2] or ""))
    if mantissa == 0:
        return value == 0
    last = abs(x) / mantissa * 10.0 ** -(len(m[2]) - 1 if m[2] else 0)  # the last digit's unit, in x's scale
    return abs(x - value) <= last / 2 * (1 + 1e-9)


def _small_integer(x: float, written: str) -> bool:
    """A bare integer up to :data:`ROUND_LIMIT` (27 layers, 42 micro-batches): on another page, a
    count of something else, not an answer asked to an absolute tolerance of a half."""
    return abs(x) <= ROUND_LIMIT and re.fullmatch(r"[-−]?\d+", written) is not None


def _pinned(label: str) -> tuple:
    """The key of ``label`` computed once (not once per number) and its value."""
    from tmath.exercises import _KEYS

    value = float(_KEYS[label].compute())
    return replace(_KEYS[label], compute=lambda value=value: value), value


def _coincidence(label: str, written: str, path: Path) -> bool:
    """Whether ``written`` on ``path`` is listed: in COINCIDENCES (for every page or this one)
    or SHOWN_ON_PURPOSE."""
    here = (label, written, _where(path))
    return (label, written) in COINCIDENCES or here in COINCIDENCES or here in SHOWN_ON_PURPOSE


def leaks(open_chapters: tuple[str, ...] = OPEN_CHAPTERS) -> dict[str, list[str]]:
    """Key label → the numbers its chapter shows that the key accepts."""
    from tmath.exercises import labels

    found = {}
    for label in labels():
        path = _chapters()[label.split("/")[0]]
        if str(path.relative_to(ROOT)).startswith(open_chapters):
            continue
        key, value = _pinned(label)
        round_key = _is_round(key, value)
        hits = sorted({w for x, w, _ in _near(key, value, (path,))
                       if key.accepts(x) and not _coincidence(label, w, path)
                       and (not round_key or "." in w)})
        if hits:
            found[label] = hits
    return found


def leaks_elsewhere(labels: list[str], pages: tuple[Path, ...] | None = None) -> dict[str, list[str]]:
    """Key label -> ``page: number`` for the numbers that any page of the book other than the
    exercise's own prints as the answer (its value to the digits written) and that the key
    accepts; a small round answer (a multiple of one half, at most :data:`ROUND_LIMIT`) is not
    searched there, nor a bare integer up to that limit."""
    pages = tuple(book_pages()) if pages is None else pages
    found = {}
    for label in labels:
        home = _chapters()[label.split("/")[0]]
        key, value = _pinned(label)
        if abs(value) <= ROUND_LIMIT and 2 * value == round(2 * value):  # 8 cards, 1.5 times
            continue
        hits = sorted({f"{_where(path)}: {w}" for x, w, path in _near(key, value, pages)
                       if path != home and not _small_integer(x, w) and key.accepts(x)
                       and _as_written(value, x, w) and not _coincidence(label, w, path)})
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


def test_no_answer_is_printed_in_another_page():
    """Issue 39: the cheatsheet printed Mixtral's T* = 48,132 (ex-crossover-1), the energy
    chapter GPT-3's 2.69 % (ex-fails-2); a reader of the whole book copies those too."""
    from tmath.exercises import labels

    found = leaks_elsewhere(labels())
    assert not found, (
        "answers printed in another page of the book (change the exercise: another model, size or "
        f"quantity; or list a coincidence in COINCIDENCES with what it is): {found}"
    )


def test_every_coincidence_is_still_printed():
    """An entry of COINCIDENCES that its page (or, for an entry of every page, no page) no longer
    prints as a number the key accepts is stale: remove it."""
    from tmath.exercises import labels

    labels()
    pages = {_where(p): p for p in book_pages()}
    stale = []
    for entry in [*COINCIDENCES, *SHOWN_ON_PURPOSE]:
        label, written = entry[:2]
        key, value = _pinned(label)
        where = [pages[entry[2]]] if len(entry) == 3 and entry[2] in pages else (
            [] if len(entry) == 3 else list(pages.values()))
        if not any(w == written and key.accepts(x) for path in where for x, w in _page_numbers(path)):
            stale.append(entry)
    assert not stale, f"coincidences no longer printed: {stale}"


def test_the_whole_book_finder_finds_an_answer_printed_in_another_chapter(tmp_path):
    """The cheatsheet as it was: Mixtral's T* = 48,132 in its table (ex-crossover-1), beside
    numbers it must not report: neighbours within the tolerance that are other values (48,100
    and 48,140 are not 48,132 to their digits); and any key's value rounded to two digits (the
    cheatsheet's 0.75 TB for ex-arch-4's 0.7472) is found."""
    from tmath.exercises import labels

    labels()
    page = tmp_path / "cheat.md"
    page.write_text("| `mixtral-8x7b` | 8.29 × 10¹⁰ | 48,132 | 48,100 | 48,140 |\n", encoding="utf-8")
    key, value = _pinned("ex-crossover-1")
    mixtral = key.accepts(48132.0) and key.accepts(48140.0) and key.accepts(48100.0)
    found = leaks_elsewhere(["ex-crossover-1"], pages=(page,))
    if mixtral:  # the key is Mixtral's T* (as issue 39 found it)
        assert found == {"ex-crossover-1": [f"{page}: 48,132"]}
    # whatever the exercise asks now, its own answer written on a page is found
    page.write_text(f"| {value:,.0f} | {value * 1.0004:,.0f} |\n", encoding="utf-8")
    _book_index.cache_clear()
    _page_numbers.cache_clear()
    assert leaks_elsewhere(["ex-crossover-1"], pages=(page,)) == {"ex-crossover-1": [f"{page}: {value:,.0f}"]}
    key, value = _pinned("ex-arch-4/tb")
    written = f"{value:.2g}"
    page.write_text(f"| 训练状态（TB） | {written} |\n", encoding="utf-8")
    _book_index.cache_clear()
    _page_numbers.cache_clear()
    assert leaks_elsewhere(["ex-arch-4/tb"], pages=(page,)) == {"ex-arch-4/tb": [f"{page}: {written}"]}


@pytest.mark.parametrize(
    ("value", "written", "expected"),
    [(349.2085, "349.2", True), (349.2085, "347.9", False), (3.98426, "3.987", False), (0.7472, "0.75", True),
     (0.0269, "2.69%", True), (48132.0, "48,132", True), (48132.0, "48,100", False),
     (9.62e11, "9.620 × 10¹¹", True), (9.62e11, "9.621 × 10¹¹", False), (-12.07, "−12.1%", True)],
)
def test_a_number_is_the_answer_only_to_the_digits_it_is_written_with(value, written, expected):
    ((x, w), *rest) = [(x, w) for x, w in numbers_in(written) if math.isclose(x, value, rel_tol=0.01)]
    assert _as_written(value, x, w) is expected

"""The errata registry: every entry is a real disagreement, explained in a chapter of the book."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from book_pdf import toc_pages
from conftest import ROOT
from tmath import SOURCES
from tmath.errata import ERRATA, erratum


def test_keys_are_unique():
    keys = [e.key for e in ERRATA]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("e", ERRATA, ids=lambda e: e.key)
def test_each_erratum_is_a_real_disagreement(e):
    assert e.seed in {"000", "003"} or e.seed in SOURCES, f"{e.key}: unknown source {e.seed!r}"
    if e.is_numeric:
        assert e.rel_error() > e.rel_tol, f"{e.key}: stated {e.stated} agrees with {e.recomputed()}"
    else:
        assert e.verify(), f"{e.key}: the computation does not settle the correction"


def written_half_unit(x: float) -> float:
    """Half a unit in the last digit a stated figure is written with: 140 -> 5, 41.8 -> 0.05,
    2 -> 0.5 (trailing zeros of an integer are not significant)."""
    from decimal import Decimal

    return 0.5 * 10.0 ** Decimal(repr(float(x))).normalize().as_tuple().exponent


def test_written_half_unit():
    assert [written_half_unit(x) for x in (140, 41.8, 2.0, 65536, 1.67e18)] == pytest.approx(
        [5, 0.05, 0.5, 0.5, 5e15])


@pytest.mark.parametrize("e", [e for e in ERRATA if e.is_numeric], ids=lambda e: e.key)
def test_each_numeric_erratum_exceeds_the_rounding_of_the_stated_figure(e):
    """The recomputed figure, rounded to the digits the source wrote, is not the source's figure:
    140 GB for 141.1 GB or 2 TB for 2.2 TB (exactly 2 TiB) would be rounding, not an erratum."""
    half_unit = 0.0 if e.stated_exact else written_half_unit(e.stated)
    assert abs(e.stated - e.recomputed()) > half_unit, (
        f"{e.key}: {e.stated} is {e.recomputed()} rounded to the digits the source wrote")


@pytest.mark.parametrize("e", ERRATA, ids=lambda e: e.key)
def test_each_erratum_is_explained_in_its_chapter(e):
    assert e.chapter in toc_pages(), f"{e.key}: chapter {e.chapter} is not in _toc.yml"
    source = next(ROOT.glob(f"{e.chapter}.*")).read_text(encoding="utf-8")
    assert e.key in source, f"{e.key}: chapter {e.chapter} has no errata box gluing erratum({e.key!r})"


def test_softmax_recomputation_by_hand():
    # Independent of tmath: softmax of the seed's three scores.
    scores = [0.029, 0.046, 0.063]
    z = sum(math.exp(s) for s in scores)
    assert erratum("heimaoshui-softmax").recomputed() == pytest.approx(math.exp(0.029) / z, rel=1e-12)
    assert math.exp(0.029) / z == pytest.approx(0.32768, abs=1e-5)


def test_unknown_key_names_the_known_ones():
    with pytest.raises(ValueError, match="gpt3-vocab"):
        erratum("no-such-erratum")


def test_an_erratum_needs_a_figure_or_a_checked_formula():
    from tmath.errata import Erratum

    with pytest.raises(ValueError, match="stated= and compute="):
        Erratum(key="x", seed="000", location="", claim="", cause="", chapter="book/index", stated=1.0)


# Names that carry digits but are not figures: models, chips, formats, sections, equations.
NAMED = re.compile(
    r"GPT-\d|Llama[- ]?\d(?:\.\d)?(?: \d+B)?|Gemma[- ]?\d(?: \d+B)?|DeepSeek[- ]?V\d(?:-Lite)?"
    r"|Qwen\d?(?:\.\d)?|Mixtral|[HAV]100|H[28]00|B200|TPU ?v5e|bf16|fp\d+|int\d|[Ee]q\. ?\d+"
    r"|表 ?\d+(?:\.\d+)?|图 ?\d+|第 ?\d+ ?[节章]|\(?8\.1\d′?\)?|\d{4}-\d{2}-\d{2}|v\d\b|\d+(?:\.\d+)?[BM]\b"
    r"|\b(?:19|20)[0-3]\d\b|\b\d{4}\.\d{4,5}\b"  # years and arXiv numbers
)
FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?")


def typed_figures(text: str) -> list[str]:
    """Numbers in an erratum's text that look recomputed (a decimal point or three digits or
    more) and are not a name such as GPT-3, H100 or 表 2.1: they must be ``{fields}``."""
    text = re.sub(r"\{[^{}]+\}", " ", NAMED.sub(" ", text))
    return [m for m in FIGURE.findall(text)
            if "." in m.strip(".") or len(m.replace(",", "")) >= 3]


def test_typed_figures_finds_what_it_should():
    assert typed_figures("24 × 128 = 3072，全模型约 1.52B") == ["128", "3072"]
    assert typed_figures("GPT-3 论文表 2.1 在 H100 上，{total} 个参数") == []


@pytest.mark.parametrize("e", ERRATA, ids=lambda e: e.key)
def test_numbers_in_causes_are_computed(e):
    """Every figure an erratum's cause or correction quotes comes from its values(), so it
    cannot drift from the computation (a typed 3,072 next to a computed 2,048 did)."""
    typed = typed_figures(e.cause) + typed_figures(e.correction)
    assert not typed, f"{e.key}: typed figures {typed}; put them in values() as {{fields}}"
    e.cause_text(), e.correction_text()  # every field is filled


@pytest.mark.parametrize("e", ERRATA, ids=lambda e: e.key)
def test_the_appendix_shows_the_code_that_settles_each_erratum(e):
    """Erratum.computation() is the entry's compute= or verify= read from tmath/errata.py, with
    every helper function of that module it calls defined above it: the code runs as shown."""
    import ast

    import tmath.errata as module

    code = e.computation()
    tree = ast.parse(code)
    last = tree.body[-1]
    assert isinstance(last, ast.Assign) and last.targets[0].id == ("compute" if e.is_numeric else "verify")
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    called = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id.startswith("_")
              and callable(getattr(module, n.id, None))}
    assert called <= defined, f"{e.key}: helpers used but not shown: {sorted(called - defined)}"
    namespace = {"np": np, "math": math}
    exec(compile(tree, f"<erratum {e.key}>", "exec"), namespace)  # noqa: S102
    shown = namespace["compute" if e.is_numeric else "verify"]
    if e.is_numeric:
        assert shown() == pytest.approx(e.recomputed(), rel=1e-12)
    else:
        assert shown() is True

"""The errata registry: every entry is a real disagreement, explained in a chapter of the book."""

from __future__ import annotations

import math

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

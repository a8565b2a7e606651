"""tmath.plan.render_text(plan, width=...) wraps the plan for a page: no line wider than the
width (a CJK character counts two), nothing lost, no continuation line starting with a comma."""

from __future__ import annotations

import pytest

import tmath
from tmath.plan import _columns, build_plan, render_text


@pytest.fixture(scope="module")
def plan():
    return build_plan(tmath.preset("llama3.1-405b"), dp=128, tp=8, pp=16, zero=1, micro_batch=1,
                      global_batch=2048, seq_len=8192, pp_edge_layers=7)


@pytest.mark.parametrize("width", [40, 64, 80])
def test_wrapped_plan_fits_and_keeps_every_character(plan, width):
    whole, wrapped = render_text(plan), render_text(plan, width=width)
    assert max(_columns(line) for line in whole.splitlines()) > width  # there is work to do
    assert max(_columns(line) for line in wrapped.splitlines()) <= width
    squeeze = str.maketrans("", "", " \n")
    assert wrapped.translate(squeeze) == whole.translate(squeeze)
    assert not [ln for ln in wrapped.splitlines() if ln.lstrip()[:1] in tuple("，、；：）。")]
    # a number keeps its unit: no line ends in a bare number that the next line's unit belongs to
    lines = wrapped.splitlines()
    split = [a for a, b in zip(lines[:-1], lines[1:], strict=True)
             if a[-1:].isdigit() and b.lstrip()[:2] in ("GB", "MB", "kB", "ms")]
    assert not split, split


def test_columns_count_cjk_twice():
    assert _columns("ab") == 2 and _columns("显存") == 4 and _columns("GB，余") == 6


def test_width_is_checked(plan):
    with pytest.raises(ValueError, match="width"):
        render_text(plan, width=5)

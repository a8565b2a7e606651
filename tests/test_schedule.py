"""tmath.schedule plays GPipe and 1F1B; its bubble and in-flight counts are the closed forms
tmath.layout uses, found independently by simulation."""

from __future__ import annotations

from fractions import Fraction

import pytest

import tmath
from tmath.layout import build_layout
from tmath.schedule import simulate, stage_order

CASES = [(2, 1), (2, 5), (4, 3), (4, 8), (5, 7), (8, 8), (16, 16), (16, 4)]


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("pp, m", CASES)
@pytest.mark.parametrize("tf, tb", [(1, 2), (1, 1), (2, 3)])
def test_bubble_is_the_closed_form_for_any_forward_backward_ratio(schedule, pp, m, tf, tb):
    s = simulate(pp, m, schedule, t_forward=tf, t_backward=tb)
    assert s.step_time == (m + pp - 1) * (tf + tb)
    assert s.bubble_fraction == Fraction(pp - 1, m + pp - 1)
    assert all(s.idle_time(i) == (pp - 1) * (tf + tb) for i in range(pp))


@pytest.mark.parametrize("pp, m", CASES)
def test_layout_agrees_with_the_simulation(pp, m):
    cfg = tmath.preset("llama3-70b")  # 80 layers: every pp in CASES divides it
    s = simulate(pp, m, "1f1b")
    for stage in range(pp):
        lay = build_layout(cfg, pp=pp, micro_batch=1, global_batch=m, seq_len=1024, stage=stage)
        assert lay.bubble_fraction == s.bubble_fraction
        assert lay.in_flight == s.in_flight(stage) == min(pp - stage, m)


@pytest.mark.parametrize("pp, m", CASES)
def test_gpipe_holds_every_micro_batch(pp, m):
    s = simulate(pp, m, "gpipe")
    assert [s.in_flight(i) for i in range(pp)] == [m] * pp


def test_every_operation_runs_once_and_respects_its_neighbours():
    s = simulate(4, 6)
    assert len(s.ops) == 2 * 4 * 6
    end = {(o.stage, o.kind, o.micro_batch): o.end for o in s.ops}
    for o in s.ops:
        if o.kind == "F" and o.stage > 0:
            assert o.start >= end[(o.stage - 1, "F", o.micro_batch)]
        if o.kind == "B":
            dep = (o.stage + 1, "B", o.micro_batch) if o.stage < 3 else (3, "F", o.micro_batch)
            assert o.start >= end[dep]
    for stage in range(4):  # a stage never runs two operations at once
        ops = s.stage_ops(stage)
        assert all(a.end <= b.start for a, b in zip(ops[:-1], ops[1:], strict=True))


def test_1f1b_order_fills_alternates_and_drains():
    assert stage_order("1f1b", 4, 6, 1) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3),
                                          ("B", 1), ("F", 4), ("B", 2), ("F", 5), ("B", 3),
                                          ("B", 4), ("B", 5)]
    assert stage_order("1f1b", 4, 6, 3)[:4] == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]


@pytest.mark.parametrize("kwargs, match", [
    (dict(pp=0, micro_batches=2), "pp"),
    (dict(pp=2, micro_batches=2, schedule="zb"), "schedule"),
    (dict(pp=2, micro_batches=2, t_forward=0), "t_forward"),
    (dict(pp=2, micro_batches=2.5), "micro_batches"),
])
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        simulate(**kwargs)
    with pytest.raises(ValueError, match="stage"):
        simulate(2, 2).in_flight(2)

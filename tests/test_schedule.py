"""tmath.schedule plays GPipe, 1F1B, interleaved 1F1B, ZB-H1 and DualPipe; its bubble and
in-flight counts are the closed forms tmath.layout uses and the published ones (Narayanan et
al. 2021 §2.2.2; Qi et al. 2024; DeepSeek-V3 report Table 2), found independently by
simulation.  Expected values are the papers' formulas, written out here."""

from __future__ import annotations

from fractions import Fraction

import pytest

import tmath
from tmath import schedule as sched
from tmath.layout import build_layout
from tmath.schedule import simulate, stage_order

CASES = [(2, 1), (2, 5), (4, 3), (4, 8), (5, 7), (8, 8), (16, 16), (16, 4)]


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("pp, m", CASES)
@pytest.mark.parametrize("tf, tb", [(1, 2), (1, 1), (2, 3)])
def test_bubble_is_the_closed_form_for_any_forward_backward_ratio(schedule, pp, m, tf, tb):
    s = simulate(pp, m, schedule, t_forward=tf, t_backward=tb)
    assert s.step_time == (m + pp - 1) * (tf + tb)
    assert s.busy_time == m * (tf + tb) == s.busy(0)  # a number (the page prints it)
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
    assert all(type(s.in_flight(i)) is int for i in range(pp))  # 6, not Fraction(6, 1)


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
    (dict(pp=4, micro_batches=3, schedule="interleaved", virtual_stages=2), "micro_batches"),
    (dict(pp=4, micro_batches=8, schedule="interleaved"), "virtual_stages"),
    (dict(pp=4, micro_batches=8, virtual_stages=2), "virtual_stages"),
    (dict(pp=5, micro_batches=10, schedule="dualpipe"), "pp"),
    (dict(pp=4, micro_batches=6, schedule="dualpipe"), "micro_batches"),
    (dict(pp=4, micro_batches=9, schedule="dualpipe"), "micro_batches"),
    (dict(pp=4, micro_batches=8, schedule="zb-h1", t_weight=2), "t_weight"),
    (dict(pp=4, micro_batches=8, virtual_stages=65), "virtual_stages"),
    (dict(pp=513, micro_batches=8), "pp"),
])
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        simulate(**kwargs)
    with pytest.raises(ValueError, match="stage"):
        simulate(2, 2).in_flight(2)


# --- interleaved 1F1B (Narayanan et al. 2021, §2.2.2) --------------------------------------

INTERLEAVED = [(2, 2, 2), (2, 6, 3), (4, 4, 2), (4, 8, 2), (4, 12, 3), (3, 9, 3), (8, 16, 4),
               (8, 8, 2)]


@pytest.mark.parametrize("pp, m, v", INTERLEAVED)
@pytest.mark.parametrize("tf, tb", [(1, 2), (1, 1), (2, 3)])
def test_interleaved_bubble_is_one_vth_of_1f1b(pp, m, v, tf, tb):
    s = simulate(pp, m, "interleaved", t_forward=tf, t_backward=tb, virtual_stages=v)
    bubble = Fraction((pp - 1) * (tf + tb), v)  # the paper's t_pb = (p−1)(t_f+t_b)/v
    assert all(s.idle_time(i) == bubble for i in range(pp))
    assert s.bubble_ratio == Fraction(pp - 1, v * m)  # the paper's bubble fraction (1/v)(p−1)/m
    assert s.bubble_fraction == Fraction(pp - 1, v * m + pp - 1)  # idle share of the step
    assert len(s.ops) == 2 * pp * m * v


@pytest.mark.parametrize("pp, m, v", INTERLEAVED)
def test_interleaved_in_flight_is_megatrons_warmup_plus_one(pp, m, v):
    s = simulate(pp, m, "interleaved", virtual_stages=v)
    for st in range(pp):
        # Megatron: num_warmup = 2(pp − rank − 1) + (v − 1)·pp chunks (all when m = pp),
        # then one more forward before the first backward; a chunk is 1/v of a stage
        chunks = m * v if m == pp else min(2 * (pp - st - 1) + (v - 1) * pp + 1, m * v)
        assert s.in_flight(st) == Fraction(chunks, v)
        assert sched.in_flight("interleaved", pp, m, st, v) == Fraction(chunks, v)
    if m > pp:  # more than 1F1B's pp on the first stage: the price of the smaller bubble
        assert s.in_flight(0) == pp + Fraction(pp - 1, v) > pp


def test_interleaved_chunks_follow_the_virtual_stages():
    s = simulate(2, 4, "interleaved", virtual_stages=2)
    end = {(o.stage, o.chunk, o.kind, o.micro_batch): o.end for o in s.ops}
    for o in s.ops:  # virtual stage c·pp + s: chunk 1 of GPU 0 follows chunk 0 of GPU 1
        if o.kind == "F" and (o.stage, o.chunk) == (0, 1):
            assert o.start >= end[(1, 0, "F", o.micro_batch)]
        if o.kind == "B" and (o.stage, o.chunk) == (1, 0):
            assert o.start >= end[(0, 1, "B", o.micro_batch)]
    assert stage_order("interleaved", 2, 4, 0, 2)[:4] == [("F", 0, 0), ("F", 1, 0),
                                                          ("F", 0, 1), ("F", 1, 1)]


# --- ZB-H1 (Qi et al. 2024) ------------------------------------------------------------------

ZB_TIMES = [(1, 2, 1), (1, 3, 1), (2, 3, 1), (1, 2, Fraction(1, 2)), (3, 2, 1), (2, 4, 2)]  # W ≤ F, W ≤ B − W


@pytest.mark.parametrize("pp, m", [(2, 2), (2, 5), (4, 4), (4, 8), (5, 7), (8, 8), (8, 24)])
@pytest.mark.parametrize("tf, tb, tw", ZB_TIMES)
def test_zb_h1_bubble_is_the_papers(pp, m, tf, tb, tw):
    # tb the whole backward; the paper's T_B is its input part tb − tw:
    # (p−1)(T_F + T_B − T_W) = (p−1)(F + B − 2W) in the DeepSeek-V3 report's notation
    s = simulate(pp, m, "zb-h1", t_forward=tf, t_backward=tb, t_weight=tw)
    assert s.bubble_time == (pp - 1) * (tf + (tb - tw) - tw)
    assert s.bubble_time < (pp - 1) * (tf + tb)  # less than 1F1B's
    # the same peak as 1F1B's first stage: pp micro-batches, now on every stage
    assert [s.in_flight(i) for i in range(pp)] == [pp] * pp
    assert max(s.in_flight(i) for i in range(pp)) == max(
        simulate(pp, m, "1f1b").in_flight(i) for i in range(pp))
    kinds = [o.kind for o in s.ops]
    assert kinds.count("F") == kinds.count("B") == kinds.count("W") == pp * m


def test_zb_h1_is_a_third_of_1f1b_when_f_b_w_are_equal():
    # the paper's Figure 3 setting: T_F = T_B = T_W
    for pp, m in [(4, 8), (8, 16)]:
        zb = simulate(pp, m, "zb-h1", t_forward=1, t_backward=2, t_weight=1)
        one = simulate(pp, m, "1f1b", t_forward=1, t_backward=2)
        assert zb.bubble_time * 3 == one.bubble_time == (pp - 1) * 3


def test_every_w_follows_its_b():
    s = simulate(4, 8, "zb-h1")
    end = {(o.stage, o.kind, o.micro_batch): o.end for o in s.ops}
    for o in s.ops:
        if o.kind == "W":
            assert o.start >= end[(o.stage, "B", o.micro_batch)]


# --- DualPipe (DeepSeek-V3 report §3.2.1, Table 2) ------------------------------------------

DUAL = [(2, 4), (4, 8), (4, 10), (6, 12), (8, 16), (8, 20), (8, 40), (16, 32)]


@pytest.mark.parametrize("pp, m", DUAL)
@pytest.mark.parametrize("f, b, w, fb", [(1, 2, 1, 3), (1, 2, 1, 2), (1, 2, 1, Fraction(5, 2)),
                                         (3, 5, 2, 6), (2, 3, 1, 4)])
def test_dualpipe_bubble_is_table_2s(pp, m, f, b, w, fb):
    # The report's chunks: F forward, B whole backward, W its weight part, F&B an overlapped
    # forward-and-backward pair.  Its bubble (PP/2 − 1)(F&B + B − 3W) is exact when the
    # input part B − W takes as long as F (as here), on the middle GPUs (the largest idle).
    assert b - w == f
    s = simulate(pp, m, "dualpipe", t_forward=f, t_backward=b, t_weight=w, t_overlap=fb)
    assert s.bubble_time == (Fraction(pp, 2) - 1) * (fb + b - 3 * w)
    assert s.idle_time(pp // 2) == s.bubble_time
    assert all(s.idle_time(i) <= s.bubble_time for i in range(pp))


@pytest.mark.parametrize("pp, m", DUAL)
@pytest.mark.parametrize("f, b, w, fb", [(2, 4, 1, 5), (1, 3, 1, 3), (1, 4, 1, 4)])
def test_dualpipe_bubble_is_at_most_table_2s_when_b_minus_w_exceeds_f(pp, m, f, b, w, fb):
    s = simulate(pp, m, "dualpipe", t_forward=f, t_backward=b, t_weight=w, t_overlap=fb)
    assert s.bubble_time <= (Fraction(pp, 2) - 1) * (fb + b - 3 * w)


@pytest.mark.parametrize("pp, m, f, b, w, want", [
    # the input part B − W shorter than F: the simulation exceeds (p/2 − 1)(F&B + B − 3W)
    (4, 8, 2, 2, 1, 4), (8, 20, 2, 2, 1, 12),
    # B − W = F but W longer than F: larger too
    (4, 8, 1, Fraction(5, 2), Fraction(3, 2), 2), (8, 20, 1, Fraction(5, 2), Fraction(3, 2), 6)])
def test_dualpipe_bubble_exceeds_table_2s_when_b_minus_w_short_or_w_long(pp, m, f, b, w, want):
    s = simulate(pp, m, "dualpipe", t_forward=f, t_backward=b, t_weight=w)
    formula = (Fraction(pp, 2) - 1) * ((f + b) + b - 3 * w)
    assert s.bubble_time == want > formula
    with pytest.raises(ValueError, match="t_weight"):
        sched.bubble_time("dualpipe", pp, m, t_forward=f, t_backward=b, t_weight=w)


def test_dualpipe_bubble_time_is_exact_only_when_b_minus_w_is_f_and_w_at_most_f():
    # B − W = F = W = 2: the formula (8/2 − 1)(6 + 4 − 6) = 12 is the simulation's
    assert simulate(8, 20, "dualpipe", t_forward=2, t_backward=4, t_weight=2).bubble_time == 12
    assert sched.bubble_time("dualpipe", 8, 20, t_forward=2, t_backward=4, t_weight=2) == 12
    # B − W = 3 > F = 1: an upper bound (12 against 11)
    assert sched.bubble_time("dualpipe", 8, 20, t_forward=1, t_backward=3, t_weight=1) == 12
    assert simulate(8, 20, "dualpipe", t_forward=1, t_backward=3, t_weight=1).bubble_time == 11


@pytest.mark.parametrize("pp, m, n", [(4, 8, 4), (4, 6, 6), (4, 9, 5), (4, 10, 5), (8, 20, 10),
                                      (16, 24, 24), (4, 5, 5)])
def test_interleave_group_is_megatron_cores_smallest_valid_n(pp, m, n):
    # pp ≤ N ≤ n_mb, and n_mb mod N is 0 or at least pp (Megatron-Core's two checks)
    assert sched.interleave_group(pp, m) == n
    assert pp <= n <= m and (m % n == 0 or m % n >= pp)
    assert all(not (m % k == 0 or m % k >= pp) for k in range(pp, n))


@pytest.mark.parametrize("pp, m, v", [(4, 6, 2), (4, 9, 2), (4, 7, 3), (8, 12, 2), (8, 20, 4)])
def test_interleaved_runs_micro_batches_not_a_multiple_of_pp(pp, m, v):
    # Megatron-Core's relaxed rule: the bubble is still (p − 1)(F + B)/V, and the peak
    # activations follow the warm-up 2(pp − s − 1) + (V − 1)·N with N > pp
    s = simulate(pp, m, "interleaved", virtual_stages=v)
    assert s.bubble_time == Fraction(pp - 1, v) * 3
    n = sched.interleave_group(pp, m)
    assert n > pp
    for i in range(pp):
        assert s.in_flight(i) == sched.in_flight("interleaved", pp, m, i, v) \
            == Fraction(min(2 * (pp - i - 1) + (v - 1) * n + 1, v * m), v)
    # Megatron-Core's table: micro-batches 0 … N−1 through chunk 0, then through chunk 1
    order = [e for e in s.stage_ops(pp - 1) if e.kind == "F"]
    assert [(o.micro_batch, o.chunk) for o in order[:2 * n]] == \
        [(j, 0) for j in range(n)] + [(j, 1) for j in range(n)]


@pytest.mark.parametrize("pp, m", DUAL)
def test_dualpipe_holds_pp_plus_one_and_twice_the_weights(pp, m):
    s = simulate(pp, m, "dualpipe")
    assert [s.in_flight(i) for i in range(pp)] == [pp + 1] * pp  # Table 2: PP + 1
    assert s.weight_copies() == 2 * simulate(pp, m, "1f1b").weight_copies() == 2
    for st in range(pp):  # each GPU runs m/2 micro-batches of each direction, F and B once
        ops = s.stage_ops(st)
        for d in (0, 1):
            for kind in ("F", "B"):
                assert sorted(o.micro_batch for o in ops if o.kind == kind and o.chunk == d) \
                    == list(range(m // 2))
        split = {(o.chunk, o.micro_batch) for o in ops if o.kind == "W"}
        assert len(split) == sum(1 for o in ops if o.kind == "W")


def test_dualpipe_directions_run_opposite_ways():
    pp, m = 4, 8
    s = simulate(pp, m, "dualpipe")
    end = {(o.stage, o.chunk, o.kind, o.micro_batch): o.end for o in s.ops}
    for o in s.ops:
        if o.kind == "F" and o.chunk == 0 and o.stage > 0:  # enters at GPU 0
            assert o.start >= end[(o.stage - 1, 0, "F", o.micro_batch)]
        if o.kind == "F" and o.chunk == 1 and o.stage < pp - 1:  # enters at GPU pp−1
            assert o.start >= end[(o.stage + 1, 1, "F", o.micro_batch)]
        if o.kind == "B" and o.chunk == 1 and o.stage > 0:
            assert o.start >= end[(o.stage - 1, 1, "B", o.micro_batch)]
    pairs = [o for o in s.ops if o.overlapped]
    assert pairs and len(pairs) % 2 == 0
    for st in range(pp):  # a GPU never runs two things at once, a pair counted once
        spans = sorted({(o.start, o.end) for o in s.stage_ops(st)})
        assert all(a[1] <= b[0] for a, b in zip(spans[:-1], spans[1:], strict=True))


# --- the closed forms tmath.plan uses are the simulation's --------------------------------

@pytest.mark.parametrize("schedule, pp, m, v", [
    ("gpipe", 4, 6, 1), ("1f1b", 4, 2, 1), ("1f1b", 8, 16, 1), ("interleaved", 4, 8, 2),
    ("interleaved", 4, 4, 4), ("zb-h1", 4, 4, 1), ("zb-h1", 8, 12, 1), ("dualpipe", 4, 8, 1),
    ("dualpipe", 8, 20, 1)])
def test_closed_forms_equal_the_simulation(schedule, pp, m, v):
    s = simulate(pp, m, schedule, virtual_stages=v, t_forward=1, t_backward=2, t_weight=1)
    assert sched.bubble_time(schedule, pp, m, v, t_forward=1, t_backward=2, t_weight=1) \
        == s.bubble_time
    assert sched.bubble_ratio(schedule, pp, m, v, t_forward=1, t_backward=2, t_weight=1) \
        == s.bubble_ratio
    assert [sched.in_flight(schedule, pp, m, i, v) for i in range(pp)] \
        == [s.in_flight(i) for i in range(pp)]


def test_1f1b_bubble_ratio_is_p_minus_1_over_m():
    assert simulate(8, 16).bubble_ratio == Fraction(7, 16)


def test_errors_are_chinese():
    with pytest.raises(ValueError, match="偶数"):
        simulate(5, 10, "dualpipe")
    with pytest.raises(ValueError, match="不少于 pp"):
        simulate(4, 3, "interleaved", virtual_stages=2)

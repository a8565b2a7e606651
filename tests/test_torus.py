"""Collectives on a TPU torus, brute force: every message routed hop by hop, bytes counted on
every directed link, the busiest link set beside :func:`tmath.comm.torus_link_load`.

The expected values come from the simulation below, which knows nothing of the closed forms:

* all-gather, the way the JAX scaling book runs it over several axes: the array is cut into d
  parts (d = the torus' axes); part r is gathered along axis r, then r+1, … (cyclically).  In
  each stage every chip forwards the data it holds to the other chips of its line along that
  axis: on a ring (wraparound link) each way round to the nearer half, the chip straight
  across getting half from each side; on a line (no wraparound) each way to the end.  A block
  crosses each link of its tree once (it is forwarded, not sent again per destination).
* reduce-scatter: the same trees with every edge reversed (partial sums flow to their owner,
  added on the way); all-reduce: a reduce-scatter, then an all-gather (two phases one after the
  other: their busiest links add).  Within a gather the stages of the d parts pipeline, so a
  link's load is summed over all of them.
* all-to-all: every chip sends M/n to every other chip, dimension-order routing (axis 0 first),
  the shorter way round each ring axis, half each way when both are as short.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from fractions import Fraction

import pytest

from tmath import comm, hardware

# --- the simulator ----------------------------------------------------------------------------


def chips(sides):
    return list(itertools.product(*(range(a) for a in sides)))


def hop(chip, axis, step, sides, wraps):
    """The chip one hop from ``chip`` along ``axis`` (step ±1), or None off the end of a line."""
    x = chip[axis] + step
    if wraps[axis]:
        x %= sides[axis]
    elif not 0 <= x < sides[axis]:
        return None
    return chip[:axis] + (x,) + chip[axis + 1:]


def line_tree(src, axis, sides, wraps):
    """The forwarding tree of one block from ``src`` to the rest of its line along ``axis``:
    a list of (share, directed links) — on a ring of even side two halves of the block, each
    with the chip straight across on its own side."""
    a = sides[axis]
    if not wraps[axis]:
        links = []
        for step in (+1, -1):
            node = src
            while (nxt := hop(node, axis, step, sides, wraps)) is not None:
                links.append((node, nxt))
                node = nxt
        return [(Fraction(1), links)]
    halves = [(+1, -1)] if a % 2 else [(+1, -1), (-1, +1)]  # who takes the chip across
    trees = []
    for first, second in halves:
        links = []
        for step, reach in ((first, a // 2), (second, (a - 1) // 2)):
            node = src
            for _ in range(reach):
                nxt = hop(node, axis, step, sides, wraps)
                links.append((node, nxt))
                node = nxt
        trees.append((Fraction(1, len(halves)), links))
    return trees


def gather_messages(sides, wraps, v):
    """Every (bytes, links) forwarding of the multi-axis all-gather of a ``v``-byte array."""
    d, n = len(sides), math.prod(sides)
    out = []
    for r in range(d):
        held = Fraction(v, d) / n  # each chip holds 1/n of part r
        for s in range(d):
            axis = (r + s) % d
            for src in chips(sides):
                for share, links in line_tree(src, axis, sides, wraps):
                    out.append((held * share, links))
            held *= sides[axis]
    return out


def all_to_all_loads(sides, wraps, m):
    """Bytes on every directed link of an all-to-all, each chip's input ``m`` bytes, every
    (source, destination) piece routed in dimension order."""
    n = math.prod(sides)
    load = defaultdict(Fraction)
    for src in chips(sides):
        for dst in chips(sides):
            if src == dst:
                continue
            routes = [(Fraction(m, n), src)]
            for axis, a in enumerate(sides):
                nxt_routes = []
                for share, node in routes:
                    delta = (dst[axis] - node[axis]) % a if wraps[axis] else dst[axis] - node[axis]
                    if wraps[axis]:
                        ways = ([(+1, delta)] if 2 * delta < a else
                                [(-1, a - delta)] if 2 * delta > a else
                                [(+1, delta), (-1, delta)])
                    else:
                        ways = [(1 if delta > 0 else -1, abs(delta))]
                    for step, count in ways:
                        part, here = share / len(ways), node
                        for _ in range(count):
                            nxt = hop(here, axis, step, sides, wraps)
                            load[here, nxt] += part
                            here = nxt
                        nxt_routes.append((part, here))
                routes = nxt_routes
            assert all(node == dst for _, node in routes)
    return load


def link_loads(messages, reverse=False):
    load = defaultdict(Fraction)
    for nbytes, links in messages:
        for u, w in links:
            load[(w, u) if reverse else (u, w)] += nbytes
    return load


def busiest(kind, sides, wraps, v):
    if kind == "all_to_all":
        return max(all_to_all_loads(sides, wraps, v).values())
    msgs = gather_messages(sides, wraps, v)
    if kind == "all_gather":
        return max(link_loads(msgs).values())
    rs = max(link_loads(msgs, reverse=True).values())
    if kind == "reduce_scatter":
        return rs
    return rs + max(link_loads(msgs).values())  # the reduce-scatter, then the all-gather


# --- the checks ---------------------------------------------------------------------------------

TORI = [(4, 4), (16, 16), (4, 4, 4)]
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@pytest.mark.parametrize("sides", TORI, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", KINDS)
def test_the_busiest_link_of_the_simulation_is_the_closed_form(kind, sides):
    wraps = (True,) * len(sides)
    n = math.prod(sides)
    v = 8 * n * len(sides)  # whole bytes in every piece
    sim = busiest(kind, sides, wraps, v)
    assert comm.torus_link_load(kind, v, sides) == sim


def test_the_simulated_loads_are_the_books_numbers():
    # spelled out for the three tori (V = 1): (n−1)/n · V/(2d) for the gathers, M·a/8 for the
    # all-to-all (a = the longest side), so the figure and the page can quote them
    for sides in ((4, 4), (4, 4, 4)):
        n, d = math.prod(sides), len(sides)
        v = 8 * n * d
        assert busiest("all_gather", sides, (True,) * d, v) / v == Fraction(n - 1, n) / (2 * d)
        assert busiest("all_reduce", sides, (True,) * d, v) / v == Fraction(n - 1, n) / d
        assert busiest("all_to_all", sides, (True,) * d, v) / v == Fraction(4, 8)


@pytest.mark.parametrize("sides, wraps", [
    ((4, 2), (False, False)),  # a v5e slice too small for wraparound links
    ((16, 4), (True, False)),  # 64 chips of a v5e pod: one full side, one line
    ((8, 4, 4), (True, True, True)),  # 128 chips of v5p: not a cube
    ((2, 2, 2), (False, False, False)),  # a v4/v5p 2x2x2: no optical wraparound
])
@pytest.mark.parametrize("kind", ["all_gather", "all_reduce", "all_to_all"])
def test_lines_and_boxes_that_are_not_cubes(kind, sides, wraps):
    n = math.prod(sides)
    v = 8 * n * len(sides)
    sim = busiest(kind, sides, wraps, v)
    assert comm.torus_link_load(kind, v, tuple(zip(sides, wraps, strict=True))) == sim


def test_a_ring_is_a_torus_of_one_axis():
    # the ring model tmath already had: one axis, wraparound
    for a in (4, 8, 16):
        v = 16 * a
        sim_a2a = busiest("all_to_all", (a,), (True,), v)
        sim_ag = busiest("all_gather", (a,), (True,), v)
        assert comm.link_load("all_to_all", v, a, "ring") == sim_a2a
        assert comm.link_load("all_gather", v, a, "ring") == sim_ag


def test_the_all_to_all_is_its_bisection_bound():
    # cut the torus across its longest axis: half the chips send to the other half, and only
    # the links crossing the two cut planes (the wraparound makes two) can carry it
    for sides in ((4, 4), (8, 4), (4, 4, 4)):
        n, m = math.prod(sides), 8 * math.prod(sides)
        a = max(sides)
        axis = sides.index(a)
        left = [c for c in chips(sides) if c[axis] < a // 2]
        crossing = Fraction(m, n) * len(left) * (n - len(left))  # bytes left → right
        cut_links = 2 * (n // a)  # directed links left → right: two planes of n/a each
        bound = crossing / cut_links
        assert busiest("all_to_all", sides, (True,) * len(sides), m) == bound
        assert comm.torus_link_load("all_to_all", m, sides) == bound


def test_the_longest_path_is_the_steps():
    for sides, wraps in (((4, 4), (True, True)), ((4, 4, 4), (True,) * 3), ((4, 2), (False,) * 2)):
        start = (0,) * len(sides)
        far = {start: 0}
        frontier = [start]
        while frontier:  # breadth-first over the torus
            nxt = []
            for c in frontier:
                for axis in range(len(sides)):
                    for step in (+1, -1):
                        h = hop(c, axis, step, sides, wraps)
                        if h is not None and h not in far:
                            far[h] = far[c] + 1
                            nxt.append(h)
            frontier = nxt
        diameter = max(far.values())
        dims = tuple(zip(sides, wraps, strict=True))
        assert comm.torus_steps("all_gather", dims) == diameter
        assert comm.torus_steps("all_reduce", dims) == 2 * diameter


# --- what the plan and the page rely on ---------------------------------------------------------

def test_the_pod_against_one_ring_of_all_its_chips():
    # one ring of n chips was tmath's model before: 2x (2D) and 3x (3D) too slow for the
    # gathers, 16x for the all-to-all of a 16x16 pod and of a 4x4x4 cube
    v = 1
    for sides, d in (((16, 16), 2), ((4, 4, 4), 3)):
        n = math.prod(sides)
        ring_ag = comm.link_load("all_gather", v, n, "ring")
        ring_a2a = comm.link_load("all_to_all", v, n, "ring")
        assert ring_ag / comm.torus_link_load("all_gather", v, sides) == d
        assert ring_ag / comm.torus_link_load("all_gather", v, sides) == d
        assert ring_a2a / comm.torus_link_load("all_to_all", v, sides) == n // max(sides) == 16


def test_which_box_a_group_takes():
    v5p, v5e = hardware.link("ICI-v5p"), hardware.link("ICI-v5e")

    def box(n, lk, slice_chips=None, kind="all_gather"):
        return comm.torus_shape(n, axes=lk.torus_axes, wrap_multiple=lk.wrap_multiple,
                                max_side=lk.torus_max_side, slice_chips=slice_chips, kind=kind)

    assert box(64, v5p) == ((4, True),) * 3  # the group is a whole one-cube slice
    assert box(4096, hardware.link("ICI-v4")) == ((16, True),) * 3
    assert box(256, v5e) == ((16, True),) * 2
    assert box(64, v5e) == ((8, False),) * 2  # a 64-chip v5e slice is 8 x 8: no wraparound
    # 64 chips of a whole v5e pod: one full side (wrapped), one 4-chip side (a line)
    assert sorted(box(64, v5e, 256)) == [(4, False), (16, True)]
    assert box(17 * 16, v5e) is None  # no box of sides ≤ 16 holds 272 chips: a ring
    assert box(1, v5e) == ()


# --- a group inside a larger slice: the slice's wraparound joins the slice's ends ----------------

def group_wraps(group, whole, whole_wraps):
    """Brute force: axis i of a box ``group`` put at the corner of the slice ``whole`` is a ring
    when the chip at its far end has a link, in the slice, back to the group's first chip."""
    out = []
    for axis, g in enumerate(group):
        far = tuple(g - 1 if i == axis else 0 for i in range(len(group)))
        nxt = hop(far, axis, +1, whole, whole_wraps)
        out.append(nxt is not None and nxt == (0,) * len(group) and g > 2)
    return tuple(out)


SUB_BOXES = [
    # (link, chips of the slice, chips of the group, the collective the box is chosen for)
    ("ICI-v5p", 2048, 64, "all_to_all"),  # EP 64 in DeepSeek-V3's 2,048-chip slice
    ("ICI-v5p", 2048, 64, "all_gather"),
    ("ICI-v5p", 128, 32, "all_gather"),  # a 4x4x8 slice: a 4x4x2 or 4x8 group
    ("ICI-v5p", 64, 16, "all_to_all"),
    ("ICI-v5e", 256, 32, "all_gather"),  # a 16x16 pod: the group spans a whole side or not
    ("ICI-v5e", 128, 64, "all_to_all"),  # an 8x16 slice: only its 16 side wraps
    ("ICI-v5e", 64, 16, "all_gather"),  # an 8x8 slice has no wraparound at all
    ("ICI-v4", 1024, 64, "all_to_all"),  # 8x8x16: a 4x4x4 group is a mesh
]


@pytest.mark.parametrize("name, whole_n, n, kind", SUB_BOXES,
                         ids=lambda x: str(x))
def test_a_group_inside_a_larger_slice_has_no_wraparound_unless_it_spans_the_side(
        name, whole_n, n, kind):
    lk = hardware.link(name)
    args = dict(axes=lk.torus_axes, wrap_multiple=lk.wrap_multiple, max_side=lk.torus_max_side)
    whole = comm.torus_slice(whole_n, **args)
    assert math.prod(a for a, _ in whole) == whole_n
    dims = comm.torus_shape(n, slice_chips=whole_n, kind=kind, **args)
    assert math.prod(a for a, _ in dims) == n
    # put the box in the slice: each of its sides on a slice axis no shorter than it
    sides, wraps = [a for a, _ in whole], tuple(w for _, w in whole)
    placed = None
    for perm in itertools.permutations(range(len(sides))):
        group = [1] * len(sides)
        for (a, _), axis in zip(dims, perm, strict=False):
            group[axis] = a
        if all(g <= s for g, s in zip(group, sides, strict=True)):
            want = group_wraps(group, sides, wraps)
            got = [False] * len(sides)
            for (_, w), axis in zip(dims, perm, strict=False):
                got[axis] = w
            if tuple(got) == want:
                placed = (group, want)
                break
    assert placed is not None, (dims, whole)
    group, gw = placed
    kept = [(g, w) for g, w in zip(group, gw, strict=True) if g > 1]
    g_sides, g_wraps = tuple(a for a, _ in kept), tuple(w for _, w in kept)
    v = 8 * n * len(g_sides)
    sim = busiest(kind, g_sides, g_wraps, v)
    assert comm.torus_link_load(kind, v, dims) == sim


def test_the_old_rule_priced_a_sub_cube_as_a_torus():
    # a 4x4x4 group of a bigger v5p slice has no wraparound: the busiest link of its
    # all-to-all carries twice what the wrapped cube would (brute force, both)
    m = 8 * 64
    mesh = busiest("all_to_all", (4, 4, 4), (False,) * 3, m)
    cube = busiest("all_to_all", (4, 4, 4), (True,) * 3, m)
    assert mesh == 2 * cube == m
    dims = comm.torus_shape(64, axes=3, wrap_multiple=4, slice_chips=2048, kind="all_to_all")
    assert comm.torus_link_load("all_to_all", m, dims) == mesh
    assert not any(w for a, w in dims if a < 8)  # only a side spanning the slice's 8 wraps


def test_plan_prices_ep64_on_a_v5p_slice_on_the_torus():
    import tmath
    from tmath.plan import build_plan

    p = build_plan(tmath.preset("deepseek-v3"), gpu="TPUv5p", dp=128, pp=16, ep=64, zero=1,
                   global_batch=15360, seq_len=4096, stage_layers="3,4*14,2")
    ep = next(c for c in p["collectives"] if c["axis"] == "ep")
    m = ep["nbytes"]  # each chip's input of one all-to-all
    # by hand: the 2,048 chips are a 16x16x8 slice; a 64-chip box inside it spans no 16 side,
    # so at best one side (the 8) wraps and the busiest link carries m (a 4x4x4 mesh: m·4/4),
    # twice the wrapped cube's m·4/8
    dims = comm.torus_shape(64, axes=3, wrap_multiple=4, slice_chips=2048, kind="all_to_all")
    assert comm.torus_link_load("all_to_all", m, dims) == m
    want = comm.torus_steps("all_to_all", dims) * 1e-6 + m / 100e9
    assert ep["seconds_each"] == pytest.approx(want, rel=1e-12)
    assert 4.69e-3 < ep["seconds_each"] < 4.72e-3
    one_ring = comm.collective_time("all_to_all", m, 64, bandwidth=100e9, alpha=1e-6,
                                    topology="ring")
    assert 7.9 < one_ring / ep["seconds_each"] < 8.1
    assert "16×16×8（2,048 颗，各边有回绕）" in p["conventions_zh"][-1]
    assert "环面" in p["conventions_zh"][-1]


def test_plan_gives_the_wraparound_to_a_group_that_is_the_whole_slice():
    import tmath
    from tmath.plan import build_plan

    # 64 chips in all: the EP group is the slice, a 4x4x4 cube with every side wrapped
    p = build_plan(tmath.preset("deepseek-v3"), gpu="TPUv5p", dp=64, pp=1, ep=64, zero=1,
                   global_batch=64, seq_len=4096)
    ep = next(c for c in p["collectives"] if c["axis"] == "ep")
    m = ep["nbytes"]
    assert ep["seconds_each"] == pytest.approx(6 * 1e-6 + m * 4 / 8 / 100e9, rel=1e-12)
    assert "4×4×4（各边有回绕）" in p["conventions_zh"][-1]


def test_bad_torus_arguments_are_clear():
    with pytest.raises(TypeError, match="dims"):
        comm.torus_link_load("all_gather", 1, "4x4")
    with pytest.raises(ValueError, match="3 个轴"):
        comm.torus_link_load("all_gather", 1, (2, 2, 2, 2))
    with pytest.raises(ValueError, match="bandwidth"):
        comm.torus_time("all_gather", 1, (4, 4), bandwidth=0)


def test_a_small_block_without_wraparound_is_threaded_by_one_ring():
    # a 4 x 2 block of a v5e pod (tp = 8): no wraparound links, so the gather on both axes
    # loads its busiest link more than one ring snaking through the block on its own links
    sides, wraps = (4, 2), (False, False)
    snake = [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)]
    links = set()
    for c in chips(sides):
        for axis in range(2):
            for step in (+1, -1):
                if (h := hop(c, axis, step, sides, wraps)) is not None:
                    links.add((c, h))
    v = 8 * 8 * 2
    ring = link_loads(gather_messages((8,), (True,), v))
    on_block = {(snake[u[0]], snake[w[0]]): x for (u, w), x in ring.items()}
    assert set(on_block) <= links  # the ring uses only the block's own links
    ring_busiest = max(on_block.values())
    box_busiest = busiest("all_gather", sides, wraps, v)
    assert ring_busiest < box_busiest
    assert comm.torus_has_ring(tuple(zip(sides, wraps, strict=True)))
    assert comm.link_load("all_gather", v, 8, "ring") == ring_busiest
    # and the plan takes the faster: tp = 8 on v5e
    from tmath.plan import _ici_time

    lk = hardware.link("ICI-v5e")
    big = 10**6  # a 128 MB gather: bandwidth-bound (the ring's 7 hops cost more latency)
    t = _ici_time("all_gather", v * big, 8, lk)
    assert t == pytest.approx(7 * lk.alpha + float(ring_busiest * big) / lk.bandwidth,
                              rel=1e-12)

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

    def box(n, lk):
        return comm.torus_shape(n, axes=lk.torus_axes, wrap_multiple=lk.wrap_multiple,
                                max_side=lk.torus_max_side)

    assert box(64, v5p) == ((4, True),) * 3
    assert box(4096, hardware.link("ICI-v4")) == ((16, True),) * 3
    assert box(256, v5e) == ((16, True),) * 2
    assert box(64, v5e) == ((16, True), (4, False))  # a 4-chip side of a v5e pod: no wrap
    assert box(17 * 16, v5e) is None  # no box of sides ≤ 16 holds 272 chips: a ring
    assert box(1, v5e) == ()


def test_plan_prices_ep64_on_a_v5p_cube_on_the_torus():
    import tmath
    from tmath.plan import build_plan

    p = build_plan(tmath.preset("deepseek-v3"), gpu="TPUv5p", dp=128, pp=16, ep=64, zero=1,
                   global_batch=15360, seq_len=4096, stage_layers="3,4*14,2")
    ep = next(c for c in p["collectives"] if c["axis"] == "ep")
    m = ep["nbytes"]  # each chip's input of one all-to-all
    # by hand: 4x4x4 with wraparound, the busiest link carries m·4/8; 2 + 2 + 2 hops of 1 µs
    want = 6 * 1e-6 + m * 4 / 8 / 100e9
    assert ep["seconds_each"] == pytest.approx(want, rel=1e-12)
    one_ring = comm.collective_time("all_to_all", m, 64, bandwidth=100e9, alpha=1e-6,
                                    topology="ring")
    assert one_ring / ep["seconds_each"] > 15.9
    assert "4×4×4（各边有回绕）" in p["conventions_zh"][-1]
    assert "环面" in p["conventions_zh"][-1]


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

"""Collective communication: bytes each GPU sends, and seconds on a named link.

The book's convention (Part V, 多卡的账): **bytes sent per GPU by the ring algorithm**.
``V`` (``nbytes`` below) is the size of the *whole* array a collective works on, on the
side where it is largest:

==================  ==========================================  ====================  ===========
collective          V is                                        bytes sent per GPU    steps
==================  ==========================================  ====================  ===========
``all_reduce``      the array every GPU holds (input = output)  2(n−1)/n · V          2(n−1)
``all_gather``      the gathered output (each GPU holds V/n)    (n−1)/n · V           n−1
``reduce_scatter``  the input (each GPU keeps V/n of the sum)   (n−1)/n · V           n−1
``all_to_all``      each GPU's input, V/n for every GPU         (n−1)/n · V           n−1
``send``            the tensor sent (point to point)            V                     1
==================  ==========================================  ====================  ===========

``n`` is the number of GPUs in the group.  The ring all-reduce is a reduce-scatter followed
by an all-gather (hence 2(n−1) steps of V/n each); an all-to-all keeps its own V/n and sends
the rest straight to its owners, which is what a switch (NVSwitch, a full-bisection
InfiniBand fat tree) lets every GPU do at once.  :func:`ring_derivation` derives the first
four rows with SymPy, step by step.

The results are exact (:class:`fractions.Fraction`, an ``int`` when whole): a tensor whose
element count is a multiple of n gives whole bytes.  Layouts that do not divide evenly pad
(NCCL and FSDP split into n equal chunks); :func:`whole_bytes` rounds up.

**Time, the α–β model.**  A collective of s steps on a link of latency α (seconds per step)
and bandwidth W (bytes/s, per direction) takes ``s·α + L/W`` seconds, where L is the load of
the busiest directed link (:func:`link_load`).  Two topologies:

* ``"switch"`` — every GPU has its own full-bandwidth port into a non-blocking switch
  (NVSwitch inside a DGX/HGX node; a full-bisection fat tree across nodes): L = the bytes the
  GPU sends.
* ``"ring"`` — a bidirectional ring, one axis of a TPU torus: each GPU has a link to each
  neighbour, W per direction.  Ring all-reduce/all-gather/reduce-scatter send half their
  bytes each way, L = bytes/2.  An all-to-all must relay: the piece for a GPU d hops away
  crosses d links, the shorter way round, so each directed link carries
  ``V·⌊n²/4⌋/(2n)`` bytes (V/n·n/8 for even n).  In terms of the *global* array
  ``V_g = n·V`` and the *bidirectional* link bandwidth ``2W``, that is ``V_g/(4·2W)`` for
  even n: the source's (and the JAX scaling book's) ``V/(4W)``, whose W is bidirectional
  and whose V is the whole array.  On a switch the same all-to-all costs (n−1)/n·V/W with V
  one GPU's input.

**What NCCL charges** (:func:`nccl_time`).  NCCL's own cost model, ring algorithm, every
constant from one tagged release, :data:`NCCL_VERSION` (``src/graph/tuning.cc``, ``topo.h``,
``topo.cc``, ``search.cc`` at that tag).  Three protocols (:data:`PROTOCOLS`): LL has the
smallest latency per step but gets half of the bus bandwidth, and at most ``llMaxBw``
(141 GB/s on one Hopper node, :attr:`tmath.hardware.Link.ll_max_bw`; across nodes the CPU's
figure, 39.0 GB/s on two Intel nodes and 20.4 GB/s on more); LL128 92 %; Simple all of it,
with the largest latency.  Each adds a base latency once per collective, and NCCL runs the
fastest of the three for the size at hand.  The bus bandwidth is the link's *effective*
figure (:attr:`tmath.hardware.Link.bandwidth`: H100 NVLink 18 × 20.6 = 370.8 GB/s, not the
450 GB/s line rate).  A group that spans nodes with ``per_node`` members in each node:
NCCL's ring threads the members of a node over NVLink and leaves the node once per channel,
one channel per NIC, so the node's inter-node traffic is spread over ``per_node`` NICs (one
per GPU, DGX/HGX): the bus bandwidth is ``min(per_node · W_inter, W_intra)``
(:func:`group_bandwidth`); of the ring's steps, 2(nodes−1) (all-reduce) or nodes−1 cross
the network and pay its latency (the Tree algorithm's network latency when there is one
member per node: "with ppn=1 latencies are fully exposed"), and the others pay at least
NCCL's network overhead (1 µs a step, 3 µs with Simple; Intel CPUs).  Left out: the
per-channel caps of LL128 (36.7 GB/s a channel on Hopper: they bind below 10 channels), the
"plateau" factor 1.4 on a multi-node Simple all-reduce's latency, the network's own latency
from the NIC plugin, LL128 being enabled by default only over NVLink-class paths (the model
offers it on PCIe too), and every algorithm but the ring: tree, PAT, CollNet and NVLS (NVLink
SHARP, which an H100 node's all-reduce uses by default, with a bus bandwidth the ring cannot
reach; nccl-tests issue 212).

Every function takes plain numbers; :mod:`tmath.layout` lists a layout's collectives and
:mod:`tmath.plan` prices them on the links of :data:`tmath.hardware.LINKS`.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tmath._checks import int_arg

__all__ = [
    "KINDS",
    "KIND_ZH",
    "TOPOLOGIES",
    "bytes_sent",
    "steps",
    "whole_bytes",
    "link_load",
    "collective_time",
    "torus_dims",
    "torus_link_load",
    "torus_steps",
    "torus_time",
    "torus_has_ring",
    "torus_shape",
    "torus_slice",
    "ring_derivation",
    "NCCL_VERSION",
    "Protocol",
    "PROTOCOLS",
    "group_bandwidth",
    "nccl_times",
    "nccl_time",
    "allreduce_bytes_per_rank",
    "allgather_bytes_per_rank",
    "alltoall_bytes_per_rank",
    "tp_allreduce_bytes_per_layer",
    "moe_alltoall_bytes_per_layer",
    "RingComm",
    "ring_comm_units",
]

#: The collectives this module prices (``send``: one point-to-point message).
KINDS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send")
#: Chinese names for tables and messages.
KIND_ZH: dict[str, str] = {
    "all_reduce": "all-reduce（全归约）",
    "all_gather": "all-gather（全收集）",
    "reduce_scatter": "reduce-scatter（归约散发）",
    "all_to_all": "all-to-all（全交换）",
    "send": "send/recv（点对点）",
}
#: Link topologies of :func:`link_load`.
TOPOLOGIES: tuple[str, ...] = ("switch", "ring")


def _kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} 不是已知的集合通信；可选：{', '.join(KINDS)}")
    return kind


def _nbytes(nbytes: Any) -> Fraction:
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float, Fraction)):
        raise TypeError(f"nbytes 必须是字节数（非负的数），收到 {nbytes!r}")
    if isinstance(nbytes, float) and (math.isnan(nbytes) or math.isinf(nbytes)):
        raise ValueError(f"nbytes 必须是有限的非负字节数，收到 {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"nbytes 必须是非负的字节数，收到 {nbytes!r}")
    return Fraction(nbytes)


def _exact(x: Fraction) -> int | Fraction:
    return int(x) if x.denominator == 1 else x


def steps(kind: str, n: int) -> int:
    """Sequential steps of the ring algorithm (what multiplies α): 2(n−1), n−1 or 1."""
    n = int_arg("n", n)
    kind = _kind(kind)
    if kind == "send":
        return 1
    if n == 1:
        return 0
    return 2 * (n - 1) if kind == "all_reduce" else n - 1


def bytes_sent(kind: str, nbytes: int | float | Fraction, n: int) -> int | Fraction:
    """Bytes one GPU sends in a ``kind`` collective of a ``nbytes`` array over ``n`` GPUs.

    See the module table for what ``nbytes`` (V) means for each kind.  Exact: an ``int``
    when whole, else a :class:`~fractions.Fraction`.  A group of one sends nothing.

    >>> bytes_sent("all_reduce", 800, 4), bytes_sent("all_gather", 800, 4)
    (1200, 600)
    """
    kind = _kind(kind)
    v = _nbytes(nbytes)
    n = int_arg("n", n)
    if kind == "send":
        return _exact(v)
    factor = Fraction(2 * (n - 1), n) if kind == "all_reduce" else Fraction(n - 1, n)
    return _exact(factor * v)


def whole_bytes(x: int | float | Fraction) -> int:
    """``x`` rounded up to whole bytes (the padded chunk of a split that is not even)."""
    return math.ceil(Fraction(x))


def link_load(kind: str, nbytes: int | float | Fraction, n: int,
              topology: str = "switch") -> int | Fraction:
    """Bytes crossing the busiest directed link during one collective.

    ``"switch"``: a GPU's own uplink carries everything it sends (:func:`bytes_sent`).
    ``"ring"`` (a bidirectional ring / one torus axis): reduce-scatter, all-gather and
    all-reduce send half their data each way round; an all-to-all of V per GPU relays each
    piece the shorter way, so a directed link carries ``V·⌊n²/4⌋/(2n)``; a send uses one link.
    """
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology={topology!r} 未知；可选：{', '.join(TOPOLOGIES)}"
                         "（switch：交换机，全二分带宽；ring：双向环或环面的一个轴）")
    sent = Fraction(bytes_sent(kind, nbytes, n))
    if topology == "switch" or kind == "send":
        return _exact(sent)
    if kind == "all_to_all":
        return _exact(_nbytes(nbytes) * Fraction(n * n // 4, 2 * n))
    return _exact(sent / 2)


def collective_time(kind: str, nbytes: int | float | Fraction, n: int, *, bandwidth: float,
                    alpha: float = 0.0, topology: str = "switch") -> float:
    """Seconds of one collective in the α–β model: ``steps·α + link_load / bandwidth``.

    ``bandwidth`` is bytes/s per direction of one link (a :class:`tmath.hardware.Link`'s
    ``bandwidth``), ``alpha`` seconds per step.  A group of one takes no time.
    """
    for name, v in (("bandwidth", bandwidth), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
            raise ValueError(f"{name} 必须是非负的数，收到 {v!r}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth 必须是正的字节/秒，收到 {bandwidth!r}")
    if int_arg("n", n) == 1 and kind != "send":
        return 0.0
    load = link_load(kind, nbytes, n, topology)
    return steps(kind, n) * alpha + float(load) / bandwidth


# --- a group on a TPU torus (2D: v5e, v6e; 3D: v4, v5p) ----------------------------------------
#
# A TPU pod has no switch: every chip is wired to its neighbours along 2 or 3 axes, each axis a
# bidirectional ring when it has a wraparound link (a line when it has none).  A wraparound link
# joins the two ends of a whole slice's side (:func:`torus_slice`), so a group inside a larger
# slice has one only on the sides it runs end to end (:func:`torus_shape`).  A group of chips
# that is a sub-torus (its chips fill a box of sides a_1 × a_2 × …) runs a collective on all its
# axes at once (the JAX scaling book, "Sharded matrices": gathering over several axes "increases
# the available bandwidth by a factor of n_axes"):
#
# * all-gather / reduce-scatter: the array is cut into d equal parts (d = the axes of more than one
#   chip); part r is gathered along axis r first, then r+1, …, cyclically (a ring per axis, half
#   each way round; on a line, each way to the ends).  Each axis carries the last, largest stage
#   of one part, so on a cube of side a with every axis wrapped the busiest directed link carries
#   (n−1)/n · V/(2d): the bound of a chip's 2d incoming links, d times less than one ring of n.
#   The stages of the d parts pipeline: a link's load is summed over all of them.  An
#   all-reduce is a reduce-scatter, then an all-gather: twice that.
# * all-to-all: dimension-order routing, each piece the shorter way round each axis (a piece
#   straight across: half each way).  Axis i's links carry M·⌊a_i²/4⌋/(2a_i) each (a line: twice
#   that), which equals the bisection bound across that axis (n/2 chips send nM/4 bytes across a
#   cut of 2n/a_i links each way): the longest axis decides.  One ring of n chips carries M·n/8.


def torus_dims(dims: Any) -> tuple[tuple[int, bool], ...]:
    """``dims`` as ``((side, wraps), …)``: a sequence of sides (every axis wrapped) or of
    ``(side, wraps)`` pairs; axes of one chip are dropped.

    >>> torus_dims([4, 4, 1]), torus_dims([(16, True), (4, False)])
    (((4, True), (4, True)), ((16, True), (4, False)))
    """
    if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__"):
        raise TypeError(f"dims 必须是各轴的边长（如 (4, 4, 4)）或 (边长, 是否有回绕) 的序列，收到 {dims!r}")
    out = []
    for d in dims:
        if isinstance(d, tuple):
            if len(d) != 2 or not isinstance(d[1], bool):
                raise TypeError(f"dims 的每一项是边长或 (边长, 是否有回绕)，收到 {d!r}")
            side, wraps = int_arg("dims 的边长", d[0]), d[1]
        else:
            side, wraps = int_arg("dims 的边长", d), True
        if side > 1:
            out.append((side, wraps))
    if len(out) > 3:
        raise ValueError(f"dims 至多 3 个轴（TPU 的环面是二维或三维），收到 {len(out)} 个")
    return tuple(out)


def torus_link_load(kind: str, nbytes: int | float | Fraction, dims: Any) -> int | Fraction:
    """Bytes on the busiest directed link when a group that fills the torus box ``dims``
    (:func:`torus_dims`) runs ``kind`` on all its axes at once (the schedule above).

    ``nbytes`` means what it means in :func:`bytes_sent` (V: the gathered array, the
    reduced array, or each chip's all-to-all input).  Exact.

    >>> torus_link_load("all_gather", 64 * 3 * 2, (4, 4, 4)), torus_link_load("all_to_all", 8, (4, 4, 4))
    (63, 4)
    """
    kind = _kind(kind)
    v = _nbytes(nbytes)
    d = torus_dims(dims)
    if kind == "send":
        return _exact(v)
    if not d:
        return 0
    share = [Fraction(1, 2) if wraps else Fraction(1) for _, wraps in d]  # a ring halves it
    if kind == "all_to_all":
        return _exact(max(c * v * Fraction(a * a // 4, a) for (a, _), c in zip(d, share, strict=True)))
    n = math.prod(a for a, _ in d)
    part = v / len(d)
    loads = []
    for i, (a, _) in enumerate(d):
        load = Fraction(0)
        for r in range(len(d)):  # part r: axes r, r+1, …; axis i is stage (i − r) mod d
            held = math.prod(d[(r + t) % len(d)][0] for t in range((i - r) % len(d) + 1))
            load += share[i] * Fraction(a - 1, a) * part * held / n
        loads.append(load)
    return _exact(max(loads) * (2 if kind == "all_reduce" else 1))


def torus_steps(kind: str, dims: Any) -> int:
    """Sequential hops (what multiplies α) of ``kind`` on the torus box ``dims``: the longest
    path, Σ ⌊a/2⌋ over wrapped axes and a − 1 over lines (the scaling book's Σ|X_i|/2); an
    all-reduce twice; a send one."""
    kind = _kind(kind)
    if kind == "send":
        return 1
    hops = sum(a // 2 if wraps else a - 1 for a, wraps in torus_dims(dims))
    return 2 * hops if kind == "all_reduce" else hops


def torus_time(kind: str, nbytes: int | float | Fraction, dims: Any, *, bandwidth: float,
               alpha: float = 0.0) -> float:
    """Seconds of ``kind`` on the torus box ``dims``: ``torus_steps·α + torus_link_load / W``,
    ``bandwidth`` W bytes/s per direction of one link (a :class:`tmath.hardware.Link`'s)."""
    for name, x in (("bandwidth", bandwidth), ("alpha", alpha)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x) or x < 0:
            raise ValueError(f"{name} 必须是非负的数，收到 {x!r}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth 必须是正的字节/秒，收到 {bandwidth!r}")
    if not torus_dims(dims) and kind != "send":
        return 0.0
    return torus_steps(kind, dims) * alpha + float(torus_link_load(kind, nbytes, dims)) / bandwidth


def torus_has_ring(dims: Any) -> bool:
    """Whether one bidirectional ring can thread every chip of the box ``dims``, on its own
    links: a single axis with a wraparound link, or a box of two or three axes with an even
    number of chips (a grid graph has a Hamiltonian cycle then, wraparound or not).  A box whose
    sides lack wraparound links may do better on that one ring than on all its axes (a 4 × 2
    block: 7/16 of the array against 9/16 on the busiest link of the gather)."""
    d = torus_dims(dims)
    if len(d) == 1:
        return d[0][1]
    return len(d) > 1 and math.prod(a for a, _ in d) % 2 == 0


def _divisors(n: int) -> list[int]:
    small = [a for a in range(1, math.isqrt(n) + 1) if n % a == 0]
    return sorted(set(small + [n // a for a in small]))


def _boxes(n: int, axes: int, max_side: int | None) -> list[tuple[int, ...]]:
    """Every way to write ``n`` as ``axes`` sides, largest first, none above ``max_side``
    (time: the divisors of n, found in √n steps)."""
    if axes == 1:
        return [(n,)] if max_side is None or n <= max_side else []
    out = []
    for a in _divisors(n):
        if max_side is not None and a > max_side:
            break
        out += [(a, *rest) for rest in _boxes(n // a, axes - 1, a)]
    return out


def _slice_wraps(box: tuple[int, ...], axes: int, wrap_multiple: int) -> tuple[bool, ...]:
    """Which sides of a whole slice ``box`` (``axes`` sides, ones included) have wraparound
    links.  v4, v5p (3 axes): the optical switches that close the rings join whole 4 × 4 × 4
    cubes, so a slice has them on every axis when every side is a multiple of 4 and on none
    otherwise ("a ``2x2x4`` won't have any wraparounds since they are provided by the optical
    switches which are only available on a full cube", the JAX scaling book).  v5e, v6e (2
    axes): a side has one when it is the pod's whole side, 16 ("smaller topologies can be
    requested without wraps on dims < 16"; "a TPU v5e 8x16 *will* have a wraparound on the
    longer axis")."""
    if axes == 3:
        cubes = all(a % wrap_multiple == 0 for a in box)
        return tuple(cubes for _ in box)
    return tuple(a % wrap_multiple == 0 for a in box)


@functools.lru_cache(maxsize=256)
def torus_slice(chips: int, *, axes: int, wrap_multiple: int, max_side: int | None = None
                ) -> tuple[tuple[int, bool], ...] | None:
    """The box of a whole TPU slice of ``chips`` chips, as ``((side, wraps), …)`` with all
    ``axes`` sides (ones included), or ``None`` if no box of sides ≤ ``max_side`` holds them.

    The book's assumption: the slice is the most cube-like box (the smallest longest side,
    then the smallest next one), made of whole 4 × 4 × 4 cubes when it can be on v4 and v5p
    (the shapes Google's v5p page lists: 4x4x4, 4x4x8, 4x8x8, …, 16x16x24); its wraparound
    links are those of :func:`_slice_wraps`.

    >>> torus_slice(2048, axes=3, wrap_multiple=4)
    ((16, True), (16, True), (8, True))
    >>> torus_slice(64, axes=2, wrap_multiple=16, max_side=16)
    ((8, False), (8, False))
    """
    chips = int_arg("chips", chips)
    axes = int_arg("axes", axes)
    wrap_multiple = int_arg("wrap_multiple", wrap_multiple)
    if max_side is not None:
        max_side = int_arg("max_side", max_side)
    if chips > 10**7:
        raise ValueError(f"chips={chips:,} 超过任何 TPU pod 的芯片数")
    boxes = _boxes(chips, axes, max_side)
    if not boxes:
        return None
    whole = [b for b in boxes if all(a % wrap_multiple == 0 for a in b)] if axes == 3 else []
    box = min(whole or boxes, key=lambda b: tuple(b))
    return tuple(zip(box, _slice_wraps(box, axes, wrap_multiple), strict=True))


@functools.lru_cache(maxsize=256)
def torus_shape(n: int, *, axes: int, wrap_multiple: int, max_side: int | None = None,
                slice_chips: int | None = None, kind: str = "all_gather"
                ) -> tuple[tuple[int, bool], ...] | None:
    """The torus box a group of ``n`` chips occupies inside a slice of ``slice_chips`` chips
    (default ``n``: the group is the whole slice) of a pod of ``axes`` (2 or 3) axes, or
    ``None`` if no box holds exactly ``n`` chips inside the slice.

    The book's assumption (the mesh's axes laid on the torus's, as JAX's device meshes do):
    the slice is the box :func:`torus_slice` gives; each group is a box inside it (its sides no
    longer than the slice's); of those the one whose collective ``kind`` loads the busiest
    link least (then the other of all-gather and all-to-all, then the fewest axes): a group
    that runs all-to-alls (expert parallelism) takes the box best for them.  A side of the
    group has a wraparound link only when it runs the slice's whole side and that side has
    one: the wraparound joins the two ends of the slice, not of a group inside it (a 4 × 4
    × 4 group in a 2,048-chip v5p slice is a mesh, no torus).  A group that is not a box
    (for instance tp = 8 on half of a 16-chip side, whose dp groups then straddle two
    halves) is priced as the box of its size: optimistic.

    >>> torus_shape(64, axes=3, wrap_multiple=4)
    ((4, True), (4, True), (4, True))
    >>> torus_shape(64, axes=3, wrap_multiple=4, slice_chips=2048, kind="all_to_all")
    ((2, False), (4, False), (8, True))
    """
    n = int_arg("n", n)
    if n > 10**7:
        raise ValueError(f"n={n:,} 超过任何 TPU pod 的芯片数")
    slice_chips = n if slice_chips is None else int_arg("slice_chips", slice_chips)
    if n > slice_chips:
        raise ValueError(f"组有 {n:,} 颗芯片，多于它所在的 slice（{slice_chips:,} 颗）：slice_chips 至少取 n")
    whole = torus_slice(slice_chips, axes=axes, wrap_multiple=wrap_multiple, max_side=max_side)
    if whole is None:
        return None
    first = "all_to_all" if _kind(kind) == "all_to_all" else "all_gather"
    then = "all_gather" if first == "all_to_all" else "all_to_all"
    best, key = None, None
    for box in _boxes(n, axes, None):
        for sides in set(itertools.permutations(box)):
            if any(a > s for a, (s, _) in zip(sides, whole, strict=True)):
                continue
            dims = tuple((a, w and a == s) for a, (s, w) in zip(sides, whole, strict=True) if a > 1)
            k = (torus_link_load(first, 1, dims), torus_link_load(then, 1, dims), len(dims), dims)
            if key is None or k < key:
                best, key = dims, k
    return best


#: The NCCL release every constant of this module's NCCL model comes from (GitHub tag of
#: NVIDIA/nccl); the book names it where it uses the model.
NCCL_VERSION = "v2.27.7-1"
#: ``llMaxBws`` of that release across nodes, Intel CPUs (DGX H100: Xeon): LL's bus bandwidth
#: cap on 2 nodes and on 3 or more, bytes/s.
LL_MAX_BW_NET: tuple[float, float] = (39.0e9, 20.4e9)
#: ``hwLat[NET][TREE]``: per-step network latency (LL, LL128, Simple) NCCL charges a ring with
#: one member per node ("with ppn=1 latencies are fully exposed, use the Tree network latency").
NET_LATENCY_ONE_PER_NODE: tuple[float, float, float] = (5.0e-6, 8.5e-6, 14.0e-6)
#: ``getNetOverhead`` (Intel CPUs): a ring that spans nodes pays at least this per intra-node
#: step, times 3 with Simple.
NET_OVERHEAD = 1.0e-6


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol in NCCL's cost model (ring algorithm), :data:`NCCL_VERSION`.

    ``base_latency``: seconds charged once per collective (``baseLat``); ``efficiency``:
    the fraction of the bus bandwidth it reaches (LL's is also capped:
    :meth:`bus_bandwidth`); ``index``: its place in a link's ``step_latency`` (LL, LL128,
    Simple).
    """

    name: str
    index: int
    base_latency: float
    efficiency: float
    note_zh: str

    def bus_bandwidth(self, bus_bw: float, *, nodes: int = 1, intra: Any = None) -> float:
        """The bus bandwidth this protocol gets out of ``bus_bw`` (bytes/s) on ``nodes``
        nodes: ``efficiency · bus_bw``, and for LL at most ``llMaxBw`` (one node: the
        ``intra`` link's :attr:`~tmath.hardware.Link.ll_max_bw`; more: :data:`LL_MAX_BW_NET`).
        """
        w = self.efficiency * bus_bw
        if self.name != "LL":
            return w
        if nodes > 1:
            return min(w, LL_MAX_BW_NET[0] if nodes == 2 else LL_MAX_BW_NET[1])
        cap = _link(intra).ll_max_bw if intra is not None else None
        return w if cap is None else min(w, cap)


#: NCCL's three protocols, ring algorithm (:data:`NCCL_VERSION`'s ``tuning.cc``: ``baseLat``,
#: and the bandwidth refinements of ``ncclTopoTuneModel``: LL ``min(llMaxBw, busBw·0.5)``,
#: LL128 ``busBw·0.92``; LL128's per-channel cap left out).
PROTOCOLS: dict[str, Protocol] = {
    "LL": Protocol("LL", 0, 6.6e-6, 1 / 2,
                   "低延迟：每 8 字节里 4 字节是标志位，带宽至多一半，另有上限 llMaxBw"),
    "LL128": Protocol("LL128", 1, 14.0e-6, 0.92, "每 128 字节里 8 字节是标志位，带宽约 92 %"),
    "Simple": Protocol("Simple", 2, 8.4e-6, 1.0, "整块发送后再同步：带宽全用上，每步延迟最大"),
}


def _link(lk: Any):
    from tmath.hardware import link

    return link(lk)


def _split(n: int, per_node: Any) -> tuple[int, int]:
    if per_node is None:
        return n, 1
    g = int_arg("per_node", per_node)
    if g > n:
        raise ValueError(f"per_node={g} 大于组的卡数 n={n}：每台机器里的组员不会比整组多")
    if n % g:
        raise ValueError(f"per_node={g} 不能整除 n={n}：每台机器里的组员数必须相同")
    return g, n // g


def group_bandwidth(n: int, *, intra: Any, inter: Any = None, per_node: int | None = None
                    ) -> float:
    """Bus bandwidth (bytes/s each GPU sends) of a ring over ``n`` GPUs, ``per_node`` of them
    in each node (``None``: all in one node).

    One node: the intra-node link's bandwidth.  Several: each node leaves over ``per_node``
    NICs (one per GPU, each ``inter.bandwidth``) and NCCL spreads its channels over them, so
    ``min(per_node · W_inter, W_intra)``; with one member per node it is one NIC's bandwidth.
    """
    n = int_arg("n", n)
    g, nodes = _split(n, per_node)
    w_intra = _link(intra).bandwidth
    if nodes == 1:
        return w_intra
    if inter is None:
        raise ValueError("组跨了机器（per_node < n）：请给出节点间的链路 inter（如 \"IB-NDR\"）")
    return min(g * _link(inter).bandwidth, w_intra)


def nccl_times(kind: str, nbytes: int | float | Fraction, n: int, *, intra: Any,
               inter: Any = None, per_node: int | None = None, base: bool = True
               ) -> dict[str, float]:
    """Seconds of one collective for each NCCL protocol (:data:`PROTOCOLS`), ring algorithm.

    ``base + steps_intra·α_intra + steps_inter·α_inter + load / W_protocol``: ``α`` from the
    links' ``step_latency`` (:data:`NCCL_VERSION`); ring collectives cross the network on
    2(nodes−1) (all-reduce) or nodes−1 of their steps, at the bus bandwidth of
    :func:`group_bandwidth`, of which each protocol gets :meth:`Protocol.bus_bandwidth`.
    Spanning nodes, an intra-node step costs at least :data:`NET_OVERHEAD` (3× with Simple),
    and with one member per node a network step costs :data:`NET_LATENCY_ONE_PER_NODE`.
    An all-to-all sends (per_node−1)/n of its input over NVLink and (n−per_node)/n through its
    own NIC, n−1 steps at the network latency when it spans nodes; a send crosses one link.
    ``base=False`` leaves out the protocols' base latency (a caller that adds its own).
    """
    kind = _kind(kind)
    v = _nbytes(nbytes)
    n = int_arg("n", n)
    g, nodes = _split(n, per_node)
    lk_in = _link(intra)
    lk_out = _link(inter) if inter is not None else None
    if nodes > 1 and lk_out is None:
        raise ValueError("组跨了机器（per_node < n）：请给出节点间的链路 inter（如 \"IB-NDR\"）")
    for lk in (lk_in, lk_out):
        if lk is not None and lk.step_latency is None:
            raise ValueError(f"链路 {lk.name} 不走 NCCL（没有各协议的每步延迟）："
                             "请用 collective_time 和它的 alpha")
    if n == 1 and kind != "send":
        return dict.fromkeys(PROTOCOLS, 0.0)
    s = steps(kind, n)
    if nodes == 1:
        s_inter = 0
    elif kind == "all_reduce":
        s_inter = 2 * (nodes - 1)
    elif kind in ("all_gather", "reduce_scatter"):
        s_inter = nodes - 1
    else:  # all_to_all and send: every step may wait on the network
        s_inter = s
    # the bulk term: (bytes, bus bandwidth) pairs whose slowest sets the time
    if kind == "all_to_all" and nodes > 1:
        bulk = [(v * Fraction(g - 1, n), lk_in.bandwidth), (v * Fraction(n - g, n), lk_out.bandwidth)]
    elif kind == "send":
        bulk = [(v, lk_out.bandwidth if nodes > 1 else lk_in.bandwidth)]
    else:
        bulk = [(Fraction(bytes_sent(kind, v, n)), group_bandwidth(
            n, intra=lk_in, inter=lk_out, per_node=g if nodes > 1 else None))]
    out = {}
    for name, p in PROTOCOLS.items():
        intra_lat = lk_in.step_latency[p.index]
        if nodes > 1:  # "inter-node rings still have to launch nsteps * net overhead"
            intra_lat = max(intra_lat, NET_OVERHEAD * (3 if name == "Simple" else 1))
        lat = (p.base_latency if base else 0.0) + (s - s_inter) * intra_lat
        if s_inter:
            inter_lat = (NET_LATENCY_ONE_PER_NODE if g == 1 else lk_out.step_latency)[p.index]
            lat += s_inter * inter_lat
        out[name] = lat + max(float(load) / p.bus_bandwidth(w, nodes=nodes, intra=lk_in)
                              for load, w in bulk)
    return out


def nccl_time(kind: str, nbytes: int | float | Fraction, n: int, *, intra: Any,
              inter: Any = None, per_node: int | None = None, protocol: str | None = None,
              base: bool = True) -> float:
    """Seconds of one collective as NCCL's cost model prices it (:func:`nccl_times`): the
    fastest protocol, or ``protocol`` (``"LL"``, ``"LL128"``, ``"Simple"``) if given.

    >>> round(nccl_time("all_reduce", 1e9, 64, intra="NVLink4", inter="IB-NDR", per_node=8)
    ...       * 1e3, 2)
    5.89
    """
    t = nccl_times(kind, nbytes, n, intra=intra, inter=inter, per_node=per_node, base=base)
    if protocol is None:
        return min(t.values())
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol={protocol!r} 未知；可选：{', '.join(PROTOCOLS)}")
    return t[protocol]


def ring_derivation() -> dict[str, Any]:
    """The ring volumes derived with SymPy, step by step, in the book's letters.

    Returns a dict: ``"symbols"`` (N_gpu the group size, M_arr the array bytes, α, W_link),
    and for each kind a dict with ``"chunk"`` (bytes per step), ``"steps"`` and
    ``"sent"`` = steps × chunk simplified, and ``"time"`` = steps·α + sent/W_link on a
    switch.  The all-reduce is derived as a reduce-scatter then an all-gather.  Also
    ``"all_to_all_ring"``: the busiest-link load of an all-to-all on a bidirectional ring
    of even size, ``Σ_d min(d, N_gpu − d)`` pieces of M_arr/N_gpu shared by 2·N_gpu links.
    """
    import sympy as sp

    from tmath.notation import sym

    n, v, a, w = sym("N_gpu"), sym("M_arr"), sym("alpha"), sym("W_link")
    d = sp.Symbol("d", positive=True, integer=True)  # hop distance (a summation dummy)
    chunk = v / n
    rs = {"chunk": chunk, "steps": n - 1}
    ag = {"chunk": chunk, "steps": n - 1}
    ar = {"chunk": chunk, "steps": rs["steps"] + ag["steps"]}
    a2a = {"chunk": chunk, "steps": n - 1}
    out: dict[str, Any] = {"symbols": {"N_gpu": n, "M_arr": v, "alpha": a, "W_link": w}}
    for name, part in (("reduce_scatter", rs), ("all_gather", ag), ("all_reduce", ar),
                       ("all_to_all", a2a)):
        sent = sp.factor(sp.simplify(part["steps"] * part["chunk"]))
        out[name] = {**part, "sent": sent, "time": part["steps"] * a + sent / w}
    # all-to-all on a bidirectional ring of even size n = 2h: the piece (M_arr/n bytes) for
    # the GPU d places away travels min(d, n - d) hops, the shorter way round
    h = sp.Symbol("h", positive=True, integer=True)
    hops = sp.summation(d, (d, 1, h)) + sp.summation(d, (d, 1, h - 1))  # sum of min(d, n-d)
    hops_n = sp.factor(sp.simplify(hops)).subs(h, n / 2)  # = n^2/4
    total = n * chunk * hops_n  # link crossings of all n sources, in bytes
    load = sp.simplify(total / (2 * n))  # shared evenly by the 2n directed links
    out["all_to_all_ring"] = {"hops_per_source": sp.expand(hops_n), "load_per_link": load,
                              "time": (n - 1) * a + load / w}
    return out


# --- the older helpers (float results), kept for the chapters that call them ------------

def _nonneg(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
        raise ValueError(f"{name} 必须是非负的数，收到 {v!r}")
    return v


def allreduce_bytes_per_rank(nbytes: float, world: int) -> float:
    """Bytes each rank sends in a ring all-reduce of an ``nbytes`` array: 2 (W-1)/W x nbytes
    (a reduce-scatter then an all-gather).  Float form of :func:`bytes_sent`."""
    return float(bytes_sent("all_reduce", _nonneg("nbytes", nbytes), int_arg("world", world)))


def allgather_bytes_per_rank(nbytes: float, world: int) -> float:
    """Bytes each rank sends in a ring all-gather (or reduce-scatter) of a full
    ``nbytes`` array: (W-1)/W x nbytes."""
    return float(bytes_sent("all_gather", _nonneg("nbytes", nbytes), int_arg("world", world)))


def alltoall_bytes_per_rank(local_bytes: float, world: int) -> float:
    """Bytes each rank sends in an all-to-all when it holds ``local_bytes`` spread
    evenly over all destinations: (W-1)/W x local_bytes (its own share stays)."""
    return float(bytes_sent("all_to_all", _nonneg("local_bytes", local_bytes),
                            int_arg("world", world)))


def tp_allreduce_bytes_per_layer(
    tokens: int, hidden: int, tp: int, *, act_bytes: float = 2, training: bool = False
) -> float:
    """Bytes each rank sends per transformer layer for Megatron tensor parallelism.

    ``tokens`` = tokens processed by the TP group (every rank sees all of them).
    Forward: 2 all-reduces of the [tokens, hidden] activation (after attention
    and after the MLP); training adds 2 more in backward.
    """
    n = 4 if training else 2
    v = int_arg("tokens", tokens) * int_arg("hidden", hidden) * act_bytes
    return n * allreduce_bytes_per_rank(v, tp)


def moe_alltoall_bytes_per_layer(
    tokens: int, hidden: int, ep: int, experts_per_token: int, *, act_bytes: float = 2,
    training: bool = False
) -> float:
    """Bytes each rank sends per MoE layer for expert parallelism over ``ep`` ranks.

    ``tokens`` = tokens processed by the whole EP group, ``tokens/ep`` per rank.
    Dispatch sends each local token's hidden vector to its k experts (uniform
    routing: a fraction (ep-1)/ep leaves the rank); combine sends the k results
    back.  Forward: 2 all-to-alls; training adds 2 more in backward.
    """
    tokens, ep = int_arg("tokens", tokens), int_arg("ep", ep)
    k = int_arg("experts_per_token", experts_per_token)
    n = 4 if training else 2
    local = tokens / ep * k * int_arg("hidden", hidden) * act_bytes
    return n * alltoall_bytes_per_rank(local, ep)


@dataclass(frozen=True)
class RingComm:
    """Per-layer communication in units of V/W (see :func:`ring_comm_units`)."""

    tp: Fraction
    moe: Fraction

    @property
    def ratio(self) -> Fraction:
        """TP all-reduce volume over MoE all-to-all volume."""
        return self.tp / self.moe


def ring_comm_units(
    experts_per_token: int = 1, *, tp_training: bool = True, moe_training: bool = True
) -> RingComm:
    """Per-layer communication cost of Megatron TP and of MoE expert parallelism, in the
    source document's ring model (JAX scaling book).

    V = bytes of one [tokens, D] activation, W the (bidirectional) link bandwidth.  TP: 2
    all-reduces of V forward, 2 more backward (``tp_training``), each 2V/W.  MoE: a dispatch
    and a combine all-to-all forward, 2 more backward (``moe_training``); each moves every
    token to its k experts, i.e. an array of k·V, costing k·V/(4W) on a bidirectional ring
    (:func:`link_load`, ``topology="ring"``).  The source document uses
    ``tp_training=True``, ``moe_training=False`` and k = 1, which gives 16.
    """
    k = int_arg("experts_per_token", experts_per_token)
    for name, v in (("tp_training", tp_training), ("moe_training", moe_training)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} must be a bool, got {v!r}")
    tp = (4 if tp_training else 2) * Fraction(2)
    moe = (4 if moe_training else 2) * Fraction(k, 4)
    return RingComm(tp, moe)

"""Pipeline schedules, simulated: when each stage runs each micro-batch's forward and backward.

:func:`simulate` plays a pipeline of ``pp`` GPUs ("stages") and ``micro_batches``
micro-batches under one of five schedules, and returns every operation with its start and
end; the bubble, the activations each GPU holds and the weights it keeps are read off them.

* ``"gpipe"`` — GPipe (Huang et al., 2019): every stage runs all forwards, then all
  backwards.  A stage holds the activations of every micro-batch at once.
* ``"1f1b"`` — one forward, one backward (PipeDream-Flush; Megatron-LM's default,
  Narayanan et al., 2021): stage s runs ``min(pp − s − 1, n_mb)`` forwards to fill the
  pipe, then alternates one forward and one backward, then drains the backwards.  A stage
  holds at most ``min(pp − s, n_mb)`` micro-batches' activations.
* ``"interleaved"`` — Megatron-LM's interleaved 1F1B (Narayanan et al., 2021, §2.2.2):
  each GPU holds ``virtual_stages`` (V) model chunks of L/(V·pp) layers; chunk c of GPU s
  is virtual stage c·pp + s.  Megatron's order: forwards run in groups of pp micro-batches
  per chunk (N = :func:`interleave_group` micro-batches, Megatron-Core's
  ``microbatch_group_size_per_vp_stage``); stage s warms up with ``2(pp − s − 1) +
  (V − 1)·N`` chunk forwards (all of them when n_mb = pp), then alternates one forward and
  one backward.  The 2021 paper (and Megatron's default N = pp) requires n_mb to be a
  multiple of pp; Megatron-Core accepts any n_mb ≥ pp with another N.  Each operation
  takes 1/V of a whole stage's time (chunks of equal size), so the bubble shrinks
  V-fold: ``(pp − 1)(t_F + t_B)/V``.
* ``"zb-h1"`` — zero bubble ZB-H1 (Qi et al., ICLR 2024): the backward is split into B
  (the input gradient, which the previous stage waits for) and W (the weight gradient,
  which nobody waits for).  The order of F and B is 1F1B's; a W runs right after its B
  when the stage would otherwise exceed 1F1B's ``pp − s`` micro-batches in flight, and
  otherwise waits to fill an idle gap (or the end).  Bubble ``(pp − 1)(t_F + t_B − t_W)``
  with B the input part only (paper's convention); same peak activations as 1F1B.
* ``"dualpipe"`` — DeepSeek-V3's DualPipe (DeepSeek-V3 Technical Report, §3.2.1; public
  implementation ``deepseek-ai/DualPipe``): the model's pp stages are placed twice, stage
  i and stage pp−1−i on GPU i, so half the micro-batches enter at GPU 0 and half at GPU
  pp−1.  The order of each GPU is the implementation's eight steps (forwards of one
  direction; forwards of both; B–W–F with zero bubble; the main loop of overlapped
  forward-and-backward pairs; ...; trailing W's).  A pair runs as one operation of
  ``t_overlap`` (the report's F&B).  Needs even pp and an even n_mb ≥ 2·pp.

Rules of the simulation: an operation of micro-batch j starts when its stage is free and
its inputs exist — a forward needs the forward of the previous (virtual) stage, a backward
the backward of the next one (on the last: its own forward), a W its own B.  Each stage
runs its operations in its schedule's order, as soon as it can (ZB-H1 places its W's by
the rule above).  Sends take no time (communication is priced in :mod:`tmath.comm`).

Times: ``t_forward`` (F) and ``t_backward`` (the **whole** backward, input and weight
gradients, the report's B) are per micro-batch per pipeline stage of L/pp layers;
``t_weight`` (W) is the weight-gradient part of ``t_backward``; ``t_overlap`` (F&B) the
time of an overlapped forward-and-backward pair (default ``t_forward + t_backward``: no
gain from overlap).  Interleaved chunks take 1/V of these.

This is an independent check of the closed forms :mod:`tmath.layout` uses and of the
published bubbles (:data:`BUBBLE_FORMULAS`; tests compare the two).  Nothing here imports
NumPy.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction

from tmath._checks import int_arg

__all__ = ["SCHEDULES", "BUBBLE_FORMULAS", "WEIGHT_COPIES", "NAMES_ZH", "Op", "Schedule",
           "stage_order", "bubble_time", "bubble_ratio", "in_flight",
           "simulate", "check_schedule", "interleave_group"]

#: Schedules :func:`simulate` knows.
SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe")

#: The published bubble (idle time per GPU per step) of each schedule, in the notation of
#: the DeepSeek-V3 report's Table 2: F forward, B whole backward, W its weight part, F&B an
#: overlapped pair, p the number of pipeline stages, V virtual stages.  The simulator's
#: idle time equals these (tests); DualPipe's only when B − W = F and W ≤ F (see
#: :func:`bubble_time`).
BUBBLE_FORMULAS: dict[str, str] = {
    "gpipe": "(p−1)(F+B)",
    "1f1b": "(p−1)(F+B)",
    "interleaved": "(p−1)(F+B)/V",
    "zb-h1": "(p−1)(F+B−2W)",
    "dualpipe": "(p/2−1)(F&B+B−3W)",
}

#: Copies of the model's parameters the pipeline keeps (DualPipe places every stage twice).
WEIGHT_COPIES: dict[str, int] = {"gpipe": 1, "1f1b": 1, "interleaved": 1, "zb-h1": 1,
                                 "dualpipe": 2}

#: Bounds of the arguments (the simulation takes time ∝ pp · n_mb · V).
MAX_PP = 512
MAX_MICRO_BATCHES = 65536
MAX_VIRTUAL_STAGES = 64


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` ``"F"`` (forward), ``"B"`` (backward: the whole backward,
    or only the input gradient when a ``"W"`` of the same micro-batch and chunk follows) or
    ``"W"`` (weight gradient) of micro-batch ``micro_batch`` on stage (GPU) ``stage``, from
    ``start`` to ``end``.  ``chunk`` is the model chunk on that GPU (interleaved: 0 … V−1;
    DualPipe: the direction, 0 entering at GPU 0, 1 at GPU pp−1); ``overlapped`` marks the
    two halves of a DualPipe forward-and-backward pair (same start and end)."""

    stage: int
    kind: str
    micro_batch: int
    start: Fraction
    end: Fraction
    chunk: int = 0
    overlapped: bool = False


@dataclass(frozen=True)
class Schedule:
    """The result of :func:`simulate`.  Times are exact fractions."""

    schedule: str
    pp: int
    micro_batches: int
    t_forward: Fraction
    t_backward: Fraction
    ops: tuple[Op, ...]
    virtual_stages: int = 1
    t_weight: Fraction = Fraction(0)
    t_overlap: Fraction = Fraction(0)

    @property
    def step_time(self) -> Fraction:
        """From the first forward to the last operation."""
        return max(op.end for op in self.ops)

    @property
    def busy_time(self) -> Fraction:
        """Time one stage computes when nothing overlaps: n_mb · (t_forward + t_backward)."""
        return self.micro_batches * (self.t_forward + self.t_backward)

    def busy(self, stage: int) -> Fraction:
        """Time ``stage`` computes (a DualPipe overlapped pair counted once)."""
        spans = sorted({(op.start, op.end) for op in self.stage_ops(stage)})
        return sum((e - s for s, e in spans), Fraction(0))

    def idle_time(self, stage: int) -> Fraction:
        """How long ``stage`` waits during a step: the bubble."""
        return self.step_time - self.busy(stage)

    @property
    def bubble_time(self) -> Fraction:
        """The largest idle time of a stage in one step (the report's "bubble")."""
        return max(self.idle_time(s) for s in range(self.pp))

    @property
    def bubble_ratio(self) -> Fraction:
        """:attr:`bubble_time` over the ideal compute time n_mb·(t_forward + t_backward)
        (Narayanan et al.'s t_pb/t_id; 1F1B: (p−1)/n_mb, interleaved (p−1)/(V·n_mb))."""
        return self.bubble_time / self.busy_time

    @property
    def bubble_fraction(self) -> Fraction:
        """The idle share of a step, averaged over the stages."""
        busy = sum((self.busy(s) for s in range(self.pp)), Fraction(0))
        return 1 - busy / (self.pp * self.step_time)

    def in_flight(self, stage: int) -> int | Fraction:
        """The most activations ``stage`` holds at once, in micro-batches of a whole stage
        (L/pp layers): a forward adds its chunk at its start, the end of the last backward
        operation of that micro-batch and chunk (its W, if split) frees it.  Interleaved
        chunks count 1/V each; DualPipe's each count one (a chunk is a whole stage).  An int
        when whole, else a Fraction."""
        s = _stage(stage, self.pp)
        last: dict[tuple[int, int], Fraction] = {}
        events = []
        for op in self.ops:
            if op.stage == s:
                if op.kind == "F":
                    events.append((op.start, 1))
                else:
                    key = (op.chunk, op.micro_batch)
                    last[key] = max(last.get(key, op.end), op.end)
        events += [(t, -1) for t in last.values()]
        held = peak = 0
        for _, d in sorted(events):  # frees before adds at equal times
            held += d
            peak = max(peak, held)
        return _whole(Fraction(peak, self.virtual_stages))

    def weight_copies(self) -> int:
        """How many copies of its stage's parameters each GPU keeps (DualPipe: 2)."""
        return WEIGHT_COPIES[self.schedule]

    def stage_ops(self, stage: int) -> list[Op]:
        """The operations of ``stage`` in the order it runs them."""
        s = _stage(stage, self.pp)
        return sorted((op for op in self.ops if op.stage == s), key=lambda op: (op.start, op.kind))


def _whole(x: Fraction) -> int | Fraction:
    return int(x) if x.denominator == 1 else x


def _stage(stage: int, pp: int) -> int:
    s = int_arg("stage", stage, 0)
    if s >= pp:
        raise ValueError(f"stage={s} 超出范围：只有 {pp} 段（0 到 {pp - 1}）")
    return s


def _count(name: str, v: object, top: int, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) and not hasattr(v, "__index__"):
        raise TypeError(f"{name} 必须是整数，收到 {v!r}")
    v = int(v)  # type: ignore[call-overload]
    if not minimum <= v <= top:
        raise ValueError(f"{name} 必须在 {minimum} 到 {top} 之间，收到 {v}")
    return v


def check_schedule(schedule: str, pp: int, micro_batches: int, virtual_stages: int = 1) -> None:
    """Raise ``ValueError`` (Chinese, naming the field) when ``schedule`` cannot run with
    these counts, as the real implementations require:

    * interleaved: n_mb ≥ pp (Megatron-Core: "The number of contiguous micro-batches in a
      virtual pipeline stage should range in [PP, M]"; the 2021 paper's rule, n_mb a
      multiple of pp, is Megatron's default N = pp, see :func:`interleave_group`), V ≥ 2
      and pp ≥ 2;
    * dualpipe: pp even, n_mb even and ≥ 2·pp (``deepseek-ai/DualPipe``,
      ``assert num_ranks % 2 == 0`` and ``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``);
    * ``virtual_stages`` > 1 only with interleaved.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} 未知；可选：{'、'.join(SCHEDULES)}")
    if schedule == "interleaved":
        if virtual_stages < 2:
            raise ValueError("virtual_stages：交错 1F1B 每张卡至少放 2 个模型块（V ≥ 2）；"
                             "V = 1 就是普通的 1F1B")
        if pp < 2:
            raise ValueError("pp：交错调度需要流水线至少 2 段")
        if micro_batches < pp:
            raise ValueError(f"micro_batches：交错 1F1B 要求微批次数不少于 pp（Megatron-Core："
                             f"每组微批次数 N 在 pp 与 n_mb 之间），收到 n_mb={micro_batches}、pp={pp}")
    elif virtual_stages != 1:
        raise ValueError(f"virtual_stages：只有交错调度（interleaved）有虚拟段，"
                         f"{schedule} 必须取 1")
    if schedule == "dualpipe":
        if pp % 2:
            raise ValueError(f"pp：DualPipe 从两端各送一半微批次，要求 pp 为偶数，收到 {pp}")
        if micro_batches % 2 or micro_batches < 2 * pp:
            raise ValueError(f"micro_batches：DualPipe 要求微批次数为偶数且至少 2·pp = {2 * pp}"
                             f"（DeepSeek 的实现如此断言），收到 {micro_batches}")


def interleave_group(pp: int, micro_batches: int) -> int:
    """Megatron-Core's ``microbatch_group_size_per_vp_stage`` N for interleaved 1F1B: how
    many consecutive micro-batches run through one model chunk before the next chunk.
    Megatron-Core requires pp ≤ N ≤ n_mb and n_mb mod N = 0 or ≥ pp; its default N = pp
    (so n_mb must then be a multiple of pp, the 2021 paper's rule).  Here: pp when it
    divides n_mb, else the smallest N that Megatron-Core accepts (n_mb itself always is)."""
    m = micro_batches
    if m % pp == 0:
        return pp
    return next(n for n in range(pp, m + 1) if m % n == 0 or m % n >= pp)


def _interleaved_order(pp: int, m: int, v: int, s: int) -> list[tuple]:
    # Megatron-Core's get_schedule_table: groups of N micro-batches, every chunk in turn;
    # the last group takes the rest.  Backwards run the same table, chunks reversed.
    n = interleave_group(pp, m)
    table: list[tuple[int, int]] = []
    for lo in range(0, m, n):
        hi = m if lo + n >= m else lo + n
        table += [(j, c) for c in range(v) for j in range(lo, hi)]
    total = m * v

    def fwd(k: int) -> tuple:
        return ("F", table[k][0], table[k][1])

    def bwd(k: int) -> tuple:
        return ("B", table[k][0], v - 1 - table[k][1])

    warmup = total if m == pp else min(2 * (pp - s - 1) + (v - 1) * n, total)
    order = [fwd(k) for k in range(warmup)]
    for i in range(total - warmup):
        order += [fwd(warmup + i), bwd(i)]
    return order + [bwd(k) for k in range(total - warmup, total)]


def _dualpipe_order(pp: int, m: int, s: int) -> list[tuple]:
    """The eight steps of ``deepseek-ai/DualPipe`` (``DualPipe.step``), written as ops.
    Phase 0 is, on the first half of the GPUs, the direction entering at GPU 0; on the
    second half the direction entering at GPU pp−1."""
    half, hr, hm = pp // 2, min(s, pp - 1 - s), m // 2
    second = int(s >= half)
    middle = s in (half - 1, half)
    nf, nb = [0, 0], [0, 0]
    pending: deque[tuple[int, int]] = deque()
    out: list[tuple] = []

    def f(ph: int) -> tuple:
        d = ph ^ second
        nf[d] += 1
        return ("F", nf[d] - 1, d)

    def b(ph: int, zb: bool = False) -> tuple:
        d = ph ^ second
        nb[d] += 1
        if zb:
            pending.append((nb[d] - 1, d))
        return ("B", nb[d] - 1, d, zb)

    def w() -> tuple:
        j, d = pending.popleft()
        return ("W", j, d)

    out += [f(0) for _ in range((half - hr - 1) * 2)]               # 1: nF0
    for _ in range(hr + 1):                                           # 2: nF0F1
        out += [f(0), f(1)]
    for _ in range(half - hr - 1):                                    # 3: nB1W1F1 (zero bubble)
        out.append(b(1, True))
        out += [w(), f(1)]
    for i in range(hm - pp + hr + 1):                                 # 4: nF0B1F1B0
        if i == 0 and middle:  # the implementation does not overlap this pair
            out += [f(0), b(1)]
        else:
            out.append(("F&B", f(0), b(1)))
        out.append(("F&B", f(1), b(0)))
    for _ in range(half - hr - 1):                                    # 5: nB1F1B0
        out.append(b(1))
        out.append(("F&B", f(1), b(0)))
    zb = False
    for i in range(hr + 1):                                           # 6: nB1B0
        if i == (hr + 1) // 2 and hr % 2 == 1:
            zb = True
        out.append(b(1, zb))
        if i == (hr + 1) // 2 and hr % 2 == 0:
            zb = True
        out.append(b(0, zb))
    for _ in range(half - hr - 1):                                    # 7: nWB0
        out.append(w())
        out.append(b(0, True))
    out += [w() for _ in range(hr + 1)]                               # 8: nW
    assert not pending
    return out


def stage_order(schedule: str, pp: int, micro_batches: int, stage: int,
                virtual_stages: int = 1) -> list[tuple]:
    """The order in which ``stage`` runs its operations: ``[("F", 0), ("F", 1), ("B", 0),
    ...]`` for GPipe and 1F1B; ``("F", j, chunk)`` for interleaved; DualPipe's entries are
    ``("F", j, d)``, ``("B", j, d, split)``, ``("W", j, d)`` and ``("F&B", F, B)``.
    ZB-H1's W's are placed during the simulation: its order is 1F1B's."""
    check_schedule(schedule, pp, micro_batches, virtual_stages)
    s = _stage(stage, pp)
    m = micro_batches
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    if schedule == "interleaved":
        return _interleaved_order(pp, m, virtual_stages, s)
    if schedule == "dualpipe":
        return _dualpipe_order(pp, m, s)
    warmup = min(pp - s - 1, m)
    order = [("F", j) for j in range(warmup)]
    for i in range(m - warmup):  # steady state: one forward, one backward
        order += [("F", warmup + i), ("B", i)]
    order += [("B", j) for j in range(m - warmup, m)]
    return order


def _time(name: str, v: object) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)) or not v > 0 \
            or v == float("inf"):
        raise ValueError(f"{name} 必须是正的有限时间（任意单位），收到 {v!r}")
    return Fraction(v)


def simulate(pp: int, micro_batches: int, schedule: str = "1f1b", *, t_forward: float = 1,
             t_backward: float = 2, t_weight: float | None = None,
             t_overlap: float | None = None, virtual_stages: int = 1) -> Schedule:
    """Play ``schedule`` on ``pp`` stages with ``micro_batches`` micro-batches.

    ``t_forward`` and ``t_backward`` are the times of one micro-batch's forward and whole
    backward on one stage (any unit; the backward of a matmul costs about twice its
    forward); ``t_weight`` the weight-gradient part of the backward (default half of it),
    which ZB-H1 and DualPipe split off; ``t_overlap`` DualPipe's overlapped
    forward-and-backward pair (default ``t_forward + t_backward``); ``virtual_stages`` V
    model chunks per GPU (interleaved only).  Bounds: pp ≤ 512, n_mb ≤ 65,536, V ≤ 64.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} 未知；可选：{'、'.join(SCHEDULES)}")
    pp = _count("pp", pp, MAX_PP)
    m = _count("micro_batches", micro_batches, MAX_MICRO_BATCHES)
    v = _count("virtual_stages", virtual_stages, MAX_VIRTUAL_STAGES)
    check_schedule(schedule, pp, m, v)
    if pp * m * v > 2**20:
        raise ValueError(f"pp·micro_batches·virtual_stages = {pp * m * v} 太大（上限 2²⁰）：模拟要逐个算子走")
    tf, tb = _time("t_forward", t_forward), _time("t_backward", t_backward)
    tw = tb / 2 if t_weight is None else _time("t_weight", t_weight)
    if tw >= tb:
        raise ValueError(f"t_weight 是反向里算权重梯度的那部分，必须小于 t_backward={tb}，收到 {tw}")
    tfb = tf + tb if t_overlap is None else _time("t_overlap", t_overlap)
    orders = [stage_order(schedule, pp, m, s, v) for s in range(pp)]
    if schedule == "zb-h1":
        ops = _play_zb(pp, m, orders, tf, tb - tw, tw)
    else:
        ops = _play(schedule, pp, v, orders, tf, tb, tw, tfb)
    return Schedule(schedule, pp, m, tf, tb, tuple(ops), v, tw, tfb)


def _position(schedule: str, pp: int, v: int, s: int, chunk: int) -> tuple[int, int, int]:
    """(line, virtual stage, virtual stages on the line) of ``chunk`` on GPU ``s``."""
    if schedule == "interleaved":
        return 0, chunk * pp + s, v * pp
    if schedule == "dualpipe":
        return chunk, (s if chunk == 0 else pp - 1 - s), pp
    return 0, s, pp


def _dep(kind: str, line: int, vs: int, n: int, j: int) -> tuple | None:
    if kind == "F":
        return (line, vs - 1, "F", j) if vs > 0 else None
    if kind == "B":
        return (line, vs + 1, "B", j) if vs < n - 1 else (line, vs, "F", j)
    return (line, vs, "B", j)  # W


def _play(schedule: str, pp: int, v: int, orders: list[list[tuple]], tf: Fraction,
          tb: Fraction, tw: Fraction, tfb: Fraction) -> list[Op]:
    scale = Fraction(1, v)
    done: dict[tuple, Fraction] = {}
    free = [Fraction(0)] * pp
    nxt = [0] * pp
    ops: list[Op] = []

    def parts(entry: tuple) -> list[tuple[str, int, int, Fraction]]:
        kind = entry[0]
        if kind == "F&B":
            return [parts(entry[1])[0], parts(entry[2])[0]]
        j = entry[1]
        chunk = entry[2] if len(entry) > 2 else 0
        if kind == "F":
            dur = tf
        elif kind == "B":
            dur = tb - tw if len(entry) > 3 and entry[3] else tb
        else:
            dur = tw
        return [(kind, j, chunk, dur * scale)]

    while any(nxt[s] < len(orders[s]) for s in range(pp)):
        progressed = False
        for s in range(pp):
            while nxt[s] < len(orders[s]):
                entry = orders[s][nxt[s]]
                ps = parts(entry)
                deps, keys = [], []
                for kind, j, chunk, _ in ps:
                    line, vs, n = _position(schedule, pp, v, s, chunk)
                    dep = _dep(kind, line, vs, n, j)
                    if dep is not None:
                        deps.append(dep)
                    keys.append((line, vs, kind, j))
                if any(d not in done for d in deps):
                    break  # wait for the neighbour
                start = max([free[s], *(done[d] for d in deps)])
                end = start + (tfb if entry[0] == "F&B" else ps[0][3])
                for key, (kind, j, chunk, _) in zip(keys, ps, strict=True):
                    done[key] = end
                    ops.append(Op(s, kind, j, start, end, chunk, entry[0] == "F&B"))
                free[s] = end
                nxt[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover - the schedules never deadlock
            raise RuntimeError(f"schedule {schedule} deadlocked")
    return ops


def _play_zb(pp: int, m: int, orders: list[list[tuple]], tf: Fraction, tb: Fraction,
             tw: Fraction) -> list[Op]:
    """ZB-H1: 1F1B's F and B (B the input gradient only); each stage keeps its W's
    pending and runs one when its next F or B would wait, when the next F would put more
    than 1F1B's ``pp − s`` micro-batches in flight (a micro-batch is held until its W),
    or at the end."""
    done: dict[tuple, Fraction] = {}
    free = [Fraction(0)] * pp
    nxt = [0] * pp
    pending: list[deque[int]] = [deque() for _ in range(pp)]
    held = [0] * pp
    ops: list[Op] = []

    def run(s: int, kind: str, j: int, start: Fraction, dur: Fraction) -> None:
        end = start + dur
        done[(s, kind, j)] = end
        free[s] = end
        ops.append(Op(s, kind, j, start, end))

    def weight(s: int) -> None:
        j = pending[s].popleft()
        run(s, "W", j, free[s], tw)
        held[s] -= 1

    while any(nxt[s] < len(orders[s]) or pending[s] for s in range(pp)):
        progressed = False
        for s in range(pp):
            while nxt[s] < len(orders[s]) or pending[s]:
                if nxt[s] == len(orders[s]):
                    weight(s)  # the tail: the W's left
                    progressed = True
                    continue
                kind, j = orders[s][nxt[s]]
                if kind == "F" and held[s] >= pp:
                    weight(s)  # 1F1B's memory: a W must free a micro-batch first
                    progressed = True
                    continue
                if kind == "F":
                    dep = (s - 1, "F", j) if s > 0 else None
                else:
                    dep = (s + 1, "B", j) if s < pp - 1 else (s, "F", j)
                if dep is not None and dep not in done:
                    break  # wait to learn when the neighbour delivers
                ready = done[dep] if dep is not None else Fraction(0)
                if ready > free[s] and pending[s]:
                    weight(s)  # fill the gap with a W
                    progressed = True
                    continue
                run(s, kind, j, max(free[s], ready), tf if kind == "F" else tb)
                if kind == "F":
                    held[s] += 1
                else:
                    pending[s].append(j)
                nxt[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover
            raise RuntimeError("schedule zb-h1 deadlocked")
    return ops


# --- closed forms, for tmath.plan (the simulator checks them in tests) -------------------

#: Chinese names of the schedules.
NAMES_ZH: dict[str, str] = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "交错 1F1B",
                            "zb-h1": "零气泡 ZB-H1", "dualpipe": "DualPipe"}


def bubble_time(schedule: str, pp: int, micro_batches: int, virtual_stages: int = 1, *,
                t_forward: float = 1, t_backward: float = 2, t_weight: float | None = None,
                t_overlap: float | None = None) -> Fraction:
    """The published idle time per GPU per step (:data:`BUBBLE_FORMULAS`), exact.

    ZB-H1's form needs n_mb ≥ pp and W no longer than the forward or the input-gradient
    part (t_weight ≤ t_forward, t_weight ≤ t_backward − t_weight: a deferred W must fit
    the gaps it fills; the simulation is larger otherwise).  DualPipe's needs W no longer
    than the forward (t_weight ≤ t_forward) and the input-gradient part no shorter than
    it (t_backward − t_weight ≥ t_forward): it is exact when that part takes as long as
    the forward (the report's chunks) and an upper bound of the simulation when longer;
    when the input part is shorter than F, or W longer than F, the simulation is LARGER
    (pp = 4, n_mb = 8, F = 2, B = 2, W = 1: 4 against the formula's 3).  Raises
    ``ValueError`` outside those.
    """
    check_schedule(schedule, pp, micro_batches, virtual_stages)
    f, b = _time("t_forward", t_forward), _time("t_backward", t_backward)
    w = b / 2 if t_weight is None else _time("t_weight", t_weight)
    fb = f + b if t_overlap is None else _time("t_overlap", t_overlap)
    if schedule in ("gpipe", "1f1b"):
        return (pp - 1) * (f + b)
    if schedule == "interleaved":
        return Fraction(pp - 1, virtual_stages) * (f + b)
    if schedule == "zb-h1":
        if micro_batches < pp:
            raise ValueError(f"micro_batches：ZB-H1 的气泡公式 (p−1)(F+B−2W) 要求微批次数不少于 "
                             f"pp = {pp}，收到 {micro_batches}")
        if 2 * w > b or w > f:
            raise ValueError("t_weight：ZB-H1 的气泡公式要求 W 不长于前向，也不长于反向里算输入梯度的"
                             "部分（W ≤ F，2W ≤ B）")
        return (pp - 1) * (f + b - 2 * w)
    if w > f or b - w < f:
        raise ValueError("t_weight：DualPipe 的气泡公式 (p/2−1)(F&B+B−3W) 要求 W 不长于前向、"
                         "反向里算输入梯度的部分不短于前向（W ≤ F，B − W ≥ F）；否则实际气泡比公式大")
    return (Fraction(pp, 2) - 1) * (fb + b - 3 * w)


def bubble_ratio(schedule: str, pp: int, micro_batches: int, virtual_stages: int = 1,
                 **times: float) -> Fraction:
    """Bubble time over the ideal compute time n_mb·(F + B): the step takes (1 + this)
    times the compute (Narayanan et al.'s t_pb/t_id; 1F1B: (p−1)/n_mb)."""
    f = Fraction(times.get("t_forward", 1))
    b = Fraction(times.get("t_backward", 2))
    return bubble_time(schedule, pp, micro_batches, virtual_stages, **times) / (
        micro_batches * (f + b))


def in_flight(schedule: str, pp: int, micro_batches: int, stage: int,
              virtual_stages: int = 1) -> int | Fraction:
    """Activations ``stage`` holds at its peak, in micro-batches of a whole stage (what
    :meth:`Schedule.in_flight` measures): GPipe n_mb; 1F1B min(pp − s, n_mb); interleaved
    min(2(pp − s − 1) + (V − 1)·N + 1, V·n_mb)/V (Megatron's warm-up plus one; N
    :func:`interleave_group`, pp when it divides n_mb), all
    forwards when n_mb = pp; ZB-H1 min(pp, n_mb) on every stage (each W deferred as far
    as 1F1B's first stage's memory allows); DualPipe pp + 1 on every GPU (report, Table 2)."""
    check_schedule(schedule, pp, micro_batches, virtual_stages)
    s, m, v = _stage(stage, pp), micro_batches, virtual_stages
    if schedule == "gpipe":
        return m
    if schedule == "1f1b":
        return min(pp - s, m)
    if schedule == "interleaved":
        if m == pp:
            return m
        n = interleave_group(pp, m)
        return _whole(Fraction(min(2 * (pp - s - 1) + (v - 1) * n + 1, v * m), v))
    if schedule == "zb-h1":
        return min(pp, m)
    return pp + 1

"""Pipeline schedules, simulated: when each stage runs each micro-batch's forward and backward.

:func:`simulate` plays a pipeline of ``pp`` stages and ``micro_batches`` micro-batches
under one of two schedules, and returns every operation with its start and end:

* ``"gpipe"`` — GPipe (Huang et al., 2019): every stage runs all forwards, then all
  backwards.  A stage holds the activations of every micro-batch at once.
* ``"1f1b"`` — one forward, one backward (PipeDream-Flush; Megatron-LM's default,
  Narayanan et al., 2021): stage s runs ``min(pp − s − 1, n_mb)`` forwards to fill the
  pipe, then alternates one forward and one backward, then drains the backwards.  A stage
  holds at most ``min(pp − s, n_mb)`` micro-batches' activations.

Rules of the simulation: a forward of micro-batch j on stage s starts when stage s is free
and the forward of j on stage s−1 has ended; a backward of j on stage s when stage s is free
and the backward of j on stage s+1 has ended (on the last stage: its own forward of j).
Each stage runs its operations in the schedule's order, as soon as it can.  Sends take no
time (the communication is priced elsewhere, :mod:`tmath.comm`).  Every stage takes
``t_forward`` per forward and ``t_backward`` per backward.

This is an independent check of the closed forms :mod:`tmath.layout` uses: the bubble
``(pp−1)/(n_mb+pp−1)`` and the micro-batches in flight ``min(pp−s, n_mb)`` (tests compare
the two).  Nothing here imports NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tmath._checks import int_arg

__all__ = ["SCHEDULES", "Op", "Schedule", "stage_order", "simulate"]

#: Schedules :func:`simulate` knows.
SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` ``"F"`` (forward) or ``"B"`` (backward) of micro-batch
    ``micro_batch`` on stage ``stage``, from ``start`` to ``end``."""

    stage: int
    kind: str
    micro_batch: int
    start: Fraction
    end: Fraction


@dataclass(frozen=True)
class Schedule:
    """The result of :func:`simulate`.  Times are exact fractions."""

    schedule: str
    pp: int
    micro_batches: int
    t_forward: Fraction
    t_backward: Fraction
    ops: tuple[Op, ...]

    @property
    def step_time(self) -> Fraction:
        """From the first forward to the last backward."""
        return max(op.end for op in self.ops)

    @property
    def busy_time(self) -> Fraction:
        """Time one stage computes: n_mb · (t_forward + t_backward)."""
        return self.micro_batches * (self.t_forward + self.t_backward)

    @property
    def bubble_fraction(self) -> Fraction:
        """The idle share of a step, averaged over the stages (every stage is equally busy)."""
        return 1 - self.busy_time / self.step_time

    def idle_time(self, stage: int) -> Fraction:
        """How long ``stage`` waits during a step."""
        _stage(stage, self.pp)
        return self.step_time - self.busy_time

    def in_flight(self, stage: int) -> int:
        """The largest number of micro-batches whose activations ``stage`` holds at once:
        its forward has run and its backward has not finished."""
        s = _stage(stage, self.pp)
        events = []
        for op in self.ops:
            if op.stage == s:
                # a forward adds one at its start; a backward frees one at its end
                events.append((op.start, 1) if op.kind == "F" else (op.end, -1))
        held = peak = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):  # frees before adds
            held += d
            peak = max(peak, held)
        return peak

    def stage_ops(self, stage: int) -> list[Op]:
        """The operations of ``stage`` in the order it runs them."""
        s = _stage(stage, self.pp)
        return sorted((op for op in self.ops if op.stage == s), key=lambda op: op.start)


def _stage(stage: int, pp: int) -> int:
    s = int_arg("stage", stage, 0)
    if s >= pp:
        raise ValueError(f"stage={s} 超出范围：只有 {pp} 段（0 到 {pp - 1}）")
    return s


def stage_order(schedule: str, pp: int, micro_batches: int, stage: int) -> list[tuple[str, int]]:
    """The order in which ``stage`` runs its operations: ``[("F", 0), ("F", 1), ("B", 0), ...]``."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} 未知；可选：{'、'.join(SCHEDULES)}")
    pp = int_arg("pp", pp)
    m = int_arg("micro_batches", micro_batches)
    s = _stage(stage, pp)
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warmup = min(pp - s - 1, m)
    order = [("F", j) for j in range(warmup)]
    for i in range(m - warmup):  # steady state: one forward, one backward
        order += [("F", warmup + i), ("B", i)]
    order += [("B", j) for j in range(m - warmup, m)]
    return order


def _time(name: str, v: object) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)) or not v > 0:
        raise ValueError(f"{name} 必须是正的时间（任意单位），收到 {v!r}")
    return Fraction(v)


def simulate(pp: int, micro_batches: int, schedule: str = "1f1b", *, t_forward: float = 1,
             t_backward: float = 2) -> Schedule:
    """Play ``schedule`` on ``pp`` stages with ``micro_batches`` micro-batches.

    ``t_forward`` and ``t_backward`` are the times of one micro-batch's forward and backward
    on one stage (any unit; the backward of a matmul costs about twice its forward).
    """
    pp = int_arg("pp", pp)
    m = int_arg("micro_batches", micro_batches)
    tf, tb = _time("t_forward", t_forward), _time("t_backward", t_backward)
    orders = [stage_order(schedule, pp, m, s) for s in range(pp)]
    done: dict[tuple[int, str, int], Fraction] = {}  # (stage, kind, mb) -> end
    free = [Fraction(0)] * pp
    nxt = [0] * pp
    ops: list[Op] = []
    while any(nxt[s] < len(orders[s]) for s in range(pp)):
        progressed = False
        for s in range(pp):
            while nxt[s] < len(orders[s]):
                kind, j = orders[s][nxt[s]]
                if kind == "F":
                    dep = (s - 1, "F", j) if s > 0 else None
                else:
                    dep = (s + 1, "B", j) if s < pp - 1 else (s, "F", j)
                if dep is not None and dep not in done:
                    break  # wait for the neighbour
                start = max(free[s], done[dep] if dep is not None else Fraction(0))
                end = start + (tf if kind == "F" else tb)
                done[(s, kind, j)] = end
                free[s] = end
                ops.append(Op(s, kind, j, start, end))
                nxt[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover - the two schedules never deadlock
            raise RuntimeError(f"schedule {schedule} deadlocked")
    return Schedule(schedule, pp, m, tf, tb, tuple(ops))

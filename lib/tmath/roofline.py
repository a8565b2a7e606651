"""FLOPs, bytes and arithmetic intensity of the basic operations, the roofline, and a CPU probe.

Conventions:

* FLOPs: a multiply and an add are 2 FLOPs, so a length-P dot product is
  ``2P`` (strictly ``2P - 1``; the convention of the book and of
  ``FlopCounterMode``). An element-wise add or multiply is 1 FLOP per element.
* Bytes: every operand is read from memory once and the result written once,
  ``bytes_per_value`` bytes per number (2 for bf16/fp16, 4 for fp32). Caches
  and re-reads are ignored: this is the minimum traffic to main memory / HBM.
* Arithmetic intensity = FLOPs / bytes (FLOP per byte).
* Roofline: attainable FLOP/s = ``min(peak_flops, intensity x bandwidth)``;
  the ridge point ``peak_flops / bandwidth`` separates memory-bound (left)
  from compute-bound (right). For accelerators take the numbers from
  :mod:`tmath.hardware` (``Hardware.ridge_intensity``).

For a token-batch x weight matmul with separate weight/activation dtypes and
MoE routing see :func:`tmath.serving.matmul_intensity` and
:func:`tmath.serving.critical_batch`.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OpCost",
    "op_cost",
    "attainable_flops",
    "CpuProbe",
    "measure_matmul_flops",
    "measure_copy_bandwidth",
    "probe_cpu",
    "gpu_hours",
    "implied_mfu",
    "ReportedRun",
    "REPORTED_RUNS",
    "reported_run",
    "MEASURED_H100_BF16",
    "LLAMA3_405B_TABLE4",
]

OPS = ("dot", "matvec", "matmul", "add")


@dataclass(frozen=True)
class OpCost:
    """FLOPs and minimum memory traffic of one operation."""

    op: str
    flops: int
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte."""
        return self.flops / self.bytes


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {v!r}")
    if v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v}")
    return int(v)


def _pos_num(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0:
        raise ValueError(f"{name} must be a positive number, got {v!r}")
    return float(v)


def op_cost(op: str, n: int, p: int | None = None, m: int | None = None,
            bytes_per_value: float = 2) -> OpCost:
    """FLOPs and bytes of a basic operation.

    * ``"dot"``: ``x · y`` with ``x, y`` of length ``n``: ``2n`` FLOPs; reads
      ``2n`` values, writes 1.
    * ``"matvec"``: ``A x`` with ``A`` ``[n, p]``, ``x`` ``[p]``: ``2np`` FLOPs;
      ``np + p`` values in, ``n`` out.
    * ``"matmul"``: ``A B`` with ``A`` ``[n, p]``, ``B`` ``[p, m]``: ``2npm``
      FLOPs (``nm`` outputs, each a length-``p`` dot product); ``np + pm`` in,
      ``nm`` out.
    * ``"add"``: ``x + y`` element-wise, length ``n``: ``n`` FLOPs; ``2n`` in, ``n`` out.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    n = _pos_int("n", n)
    b = _pos_num("bytes_per_value", bytes_per_value)
    if op in ("matvec", "matmul"):
        if p is None:
            raise ValueError(f"op={op!r} needs the inner dimension p")
        p = _pos_int("p", p)
    if op == "matmul":
        if m is None:
            raise ValueError("op='matmul' needs the output width m")
        m = _pos_int("m", m)
    if op == "dot":
        flops, values = 2 * n, 2 * n + 1
    elif op == "matvec":
        flops, values = 2 * n * p, n * p + p + n
    elif op == "matmul":
        flops, values = 2 * n * p * m, n * p + p * m + n * m
    else:
        flops, values = n, 3 * n
    return OpCost(op, flops, values * b)


def attainable_flops(intensity: Any, peak_flops: float, bandwidth: float) -> Any:
    """Roofline: ``min(peak_flops, intensity x bandwidth)`` (FLOP/s), elementwise for arrays."""
    peak = _pos_num("peak_flops", peak_flops)
    bw = _pos_num("bandwidth", bandwidth)
    import numpy as np

    i = np.asarray(intensity, dtype=float)
    if np.any(~np.isfinite(i)) or np.any(i < 0):
        raise ValueError("intensity must be finite and non-negative (FLOP per byte)")
    out = np.minimum(peak, i * bw)
    return float(out) if out.ndim == 0 else out


# --- measuring the reader's CPU ----------------------------------------------


def measure_matmul_flops(n: int = 512, repeats: int = 5, dtype: str = "float32") -> float:
    """Best-of-``repeats`` FLOP/s of an ``n x n`` by ``n x n`` NumPy matmul (``2n^3`` FLOPs).

    The result varies from run to run and machine to machine: it is a
    measurement, not a constant.
    """
    n = _pos_int("n", n)
    repeats = _pos_int("repeats", repeats)
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    out = np.empty((n, n), dtype=dtype)
    np.matmul(a, b, out=out)  # warm-up
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / max(best, 1e-9)


def measure_copy_bandwidth(nbytes: int = 64 * 2**20, repeats: int = 5) -> float:
    """Best-of-``repeats`` bytes/s of copying an ``nbytes`` array (counts read + write = 2 x nbytes).

    Pick ``nbytes`` well above the last-level cache so the copy goes to DRAM.
    """
    nbytes = _pos_int("nbytes", nbytes)
    repeats = _pos_int("repeats", repeats)
    import numpy as np

    src = np.ones(max(nbytes // 8, 1), dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # warm-up, page in
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / max(best, 1e-9)


@dataclass(frozen=True)
class CpuProbe:
    """A measured roofline of this machine: matmul FLOP/s and copy bandwidth."""

    peak_flops: float  # FLOP/s of the matmul
    bandwidth: float  # bytes/s of the copy
    matmul_n: int
    copy_bytes: int

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the measured roofline bends."""
        return self.peak_flops / self.bandwidth


def probe_cpu(matmul_n: int = 1024, copy_bytes: int = 128 * 2**20, repeats: int = 3) -> CpuProbe:
    """Measure this CPU's float32 matmul throughput and memory-copy bandwidth (a second or two)."""
    return CpuProbe(measure_matmul_flops(matmul_n, repeats), measure_copy_bandwidth(copy_bytes, repeats),
                    matmul_n, copy_bytes)


# --- utilization: FLOPs <-> GPU-hours ------------------------------------------


def gpu_hours(flops: float, peak_flops: float, mfu: float) -> float:
    """GPU-hours to do ``flops`` at model FLOPs utilization ``mfu`` of ``peak_flops`` per GPU.

    ``flops / (peak_flops x mfu) / 3600``.
    """
    f = _pos_num("flops", flops)
    p = _pos_num("peak_flops", peak_flops)
    u = _pos_num("mfu", mfu)
    if u > 1:
        raise ValueError(f"mfu is a fraction of peak in (0, 1], got {mfu!r} (40% is 0.4)")
    return f / (p * u) / 3600


def implied_mfu(flops: float, gpu_hours: float, peak_flops: float) -> float:
    """The utilization that doing ``flops`` in ``gpu_hours`` implies: ``flops / (gpu_hours x 3600 x peak)``.

    With reported wall-clock GPU-hours this is an *effective* MFU: restarts,
    failures, evaluation and idle time all lower it.
    """
    f = _pos_num("flops", flops)
    h = _pos_num("gpu_hours", gpu_hours)
    p = _pos_num("peak_flops", peak_flops)
    return f / (h * 3600 * p)


@dataclass(frozen=True)
class ReportedRun:
    """A published training run: what its authors reported, with the source key.

    ``gpu_hours`` are the hours of the stage that consumed ``tokens`` (``None``
    if not published); ``gpu_hours_total`` includes later stages;
    ``reported_flops`` is the authors' own compute figure, if any.
    """

    preset: str
    gpu: str
    tokens: float
    seq_len: int
    source: str
    gpu_hours: float | None = None
    gpu_hours_total: float | None = None
    reported_flops: float | None = None
    note: str = ""


#: name -> :class:`ReportedRun`.
REPORTED_RUNS: dict[str, ReportedRun] = {
    "gpt3-175b": ReportedRun(
        "gpt3-175b", "V100", 300e9, 2048, "brown2020gpt3",
        reported_flops=3.14e23,
        note="Table D.1: total train compute 3.14E+23 FLOPs, 300B training tokens; "
        "Appendix D neglects the attention operation.",
    ),
    "llama3-8b": ReportedRun(
        "llama3-8b", "H100", 15e12, 8192, "meta2024llama3_modelcard",
        gpu_hours=1.3e6, gpu_hours_total=1.3e6,
        note="Model card: 1.3M H100-80GB GPU hours for pretraining; 'over 15 trillion tokens'.",
    ),
    "llama3-70b": ReportedRun(
        "llama3-70b", "H100", 15e12, 8192, "meta2024llama3_modelcard",
        gpu_hours=6.4e6, gpu_hours_total=6.4e6,
        note="Model card: 6.4M H100-80GB GPU hours for pretraining; 'over 15 trillion "
        "tokens' (so 15e12 is a lower bound); context 8k.",
    ),
    "deepseek-v3": ReportedRun(
        "deepseek-v3", "H800", 14.8e12, 4096, "deepseek2024v3report",
        gpu_hours=2.664e6, gpu_hours_total=2.788e6,
        note="Report Table 1: pre-training 2,664K H800 GPU hours (14.8T tokens, maximum "
        "sequence length 4K), plus 119K context extension and 5K post-training = 2,788K.",
    ),
}


#: Llama 3 405B's pre-training layouts and what they achieved, "The Llama 3 Herd of Models"
#: (llama3herd2024), Table 4 (arXiv v3, section 3.3.2): GPUs, the TP, CP, PP and DP degrees,
#: sequence length, sequences per DP group, tokens per batch, TFLOP/s per GPU and BF16 MFU.
LLAMA3_405B_TABLE4: tuple[dict[str, Any], ...] = (
    {"gpus": 8192, "tp": 8, "cp": 1, "pp": 16, "dp": 64, "seq_len": 8192, "batch_per_dp": 32,
     "tokens_per_batch": 16e6, "tflops_per_gpu": 430, "mfu": 0.43},
    {"gpus": 16384, "tp": 8, "cp": 1, "pp": 16, "dp": 128, "seq_len": 8192, "batch_per_dp": 16,
     "tokens_per_batch": 16e6, "tflops_per_gpu": 400, "mfu": 0.41},
    {"gpus": 16384, "tp": 8, "cp": 16, "pp": 16, "dp": 8, "seq_len": 131072, "batch_per_dp": 16,
     "tokens_per_batch": 16e6, "tflops_per_gpu": 380, "mfu": 0.38},
)

#: What a large run achieves of an H100's datasheet peak (989 TFLOP/s dense bf16), from
#: :data:`LLAMA3_405B_TABLE4`: 380 to 430 TFLOP/s per GPU, a BF16 MFU of 38 % to 43 %, on
#: 8,192 to 16,384 H100s.  The roofline, critical-batch, time and energy figures of the book
#: use the datasheet peaks; this is the measured fraction they cite beside them.
MEASURED_H100_BF16 = {
    "flops_per_gpu": (min(r["tflops_per_gpu"] for r in LLAMA3_405B_TABLE4) * 1e12,
                      max(r["tflops_per_gpu"] for r in LLAMA3_405B_TABLE4) * 1e12),
    "mfu": (min(r["mfu"] for r in LLAMA3_405B_TABLE4), max(r["mfu"] for r in LLAMA3_405B_TABLE4)),
    "gpus": (min(r["gpus"] for r in LLAMA3_405B_TABLE4), max(r["gpus"] for r in LLAMA3_405B_TABLE4)),
    "source": "llama3herd2024",
}


def reported_run(name: str) -> ReportedRun:
    """Look up a :data:`REPORTED_RUNS` entry (``ValueError`` listing the names)."""
    try:
        return REPORTED_RUNS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown run {name!r}; choose one of {', '.join(REPORTED_RUNS)}") from None

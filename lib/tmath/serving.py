"""Serving arithmetic: decode-step bound, concurrency, roofline.

How tensor parallelism splits the heads is :mod:`tmath.layout`'s (``tp_layout`` is
re-exported here); the communication helpers that used to live here are
:mod:`tmath.comm`'s (re-exported too).

Units: bytes, seconds, FLOPs (one multiply-add = 2 FLOPs).  The cores take
plain numbers; the ``*_for`` wrappers take a ``tmath.ModelConfig`` and a
hardware name and call ``count_params`` / ``kv_cache_bytes_per_token`` lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tmath._checks import int_arg
from tmath.comm import (  # one implementation, in tmath.comm; re-exported for older callers
    allgather_bytes_per_rank,
    allreduce_bytes_per_rank,
    alltoall_bytes_per_rank,
    moe_alltoall_bytes_per_layer,
    tp_allreduce_bytes_per_layer,
)
from tmath.hardware import Hardware, hardware
from tmath.layout import TPLayout, kv_share_per_gpu, tp_layout  # the split lives in tmath.layout

__all__ = [
    "DTYPE_BYTES",
    "dtype_bytes",
    "decode_time_lower_bound",
    "DecodeBound",
    "decode_bound",
    "MOE_WEIGHTS",
    "WORKSPACE_BYTES_PER_GPU",
    "TPLayout",
    "tp_layout",
    "max_concurrent_sequences",
    "kv_bytes_per_token_per_gpu",
    "kv_sequence_bytes",
    "Concurrency",
    "concurrency",
    "matmul_intensity",
    "critical_batch",
    "allreduce_bytes_per_rank",
    "allgather_bytes_per_rank",
    "alltoall_bytes_per_rank",
    "tp_allreduce_bytes_per_layer",
    "moe_alltoall_bytes_per_layer",
    "expected_experts_touched",
    "NCCL_BASE_LATENCY",
    "StepTime",
    "decode_step",
    "prefill_step",
]

#: bytes per value of the storage formats used for weights and the KV cache.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "float32": 4,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per value of ``dtype`` (fp32, bf16, fp16, fp8, int8, int4)."""
    try:
        return DTYPE_BYTES[str(dtype).lower()]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; choose one of: fp32, bf16, fp16, fp8, int8, int4"
        ) from None


def _pos(name: str, v: Any, allow_zero: bool = False) -> float:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or math.isnan(v)
        or (v < 0 if allow_zero else v <= 0)
    ):
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {v!r}")
    return v


#: Memory per GPU that a deployment needs beyond weights and KV cache, in bytes: the CUDA
#: context and library workspaces (cuBLAS, NCCL buffers), the activations of one forward
#: step, and allocator fragmentation.  5 GB is the book's stated convention (the Llama 3 70B
#: chapter's concurrency budget); real servers reserve a fraction instead (vLLM's
#: ``gpu_memory_utilization=0.9`` keeps 10 %), so every function that uses it takes it as a
#: parameter.
WORKSPACE_BYTES_PER_GPU = 5e9


# --- decode latency ---------------------------------------------------------


def decode_time_lower_bound(
    weight_bytes: float, bandwidth: float, *, kv_bytes: float = 0, tp: int = 1
) -> float:
    """Seconds per decode step if HBM bandwidth were the only limit.

    Every step reads the weights once (shared by the whole batch) plus the KV
    cache of every sequence in the batch; with tensor parallelism ``tp`` the
    bytes are split evenly over ``tp`` GPUs reading in parallel:
    ``(weight_bytes + kv_bytes) / (bandwidth x tp)``.  Compute, communication
    and kernel overheads are ignored, so real steps are slower.
    """
    _pos("weight_bytes", weight_bytes, True)
    _pos("bandwidth", bandwidth)
    _pos("kv_bytes", kv_bytes, True)
    tp = int_arg("tp", tp)
    return (weight_bytes + kv_bytes) / (bandwidth * tp)


@dataclass(frozen=True)
class DecodeBound:
    """Decode-step lower bound for a model on a GPU type (see :func:`decode_bound`)."""

    gpu: str
    tp: int
    batch: int
    context_len: int
    weight_bytes: float  # the weights one step reads (all but the looked-up embedding tables)
    kv_bytes: float
    bandwidth: float
    seconds: float
    kv_bytes_per_gpu: float | None = None  # what each GPU reads of kv_bytes (default kv_bytes / tp)
    moe_weights: str = "touched"  # how the routed experts were counted (see decode_bound)
    experts_read: float | None = None  # routed experts read per MoE layer (None: dense model)
    kv_replicas: int = 1  # GPUs holding each KV head (> 1: replicated, K < tp; MLA: tp)

    @property
    def bytes_per_gpu(self) -> float:
        """Bytes each GPU reads per step: its share of the weights plus its share of the KV cache."""
        kv = self.kv_bytes / self.tp if self.kv_bytes_per_gpu is None else self.kv_bytes_per_gpu
        return self.weight_bytes / self.tp + kv

    @property
    def tokens_per_s_per_seq(self) -> float:
        """Upper bound on one sequence's decode speed (1 / step time)."""
        return 1.0 / self.seconds

    @property
    def tokens_per_s(self) -> float:
        """Upper bound on the batch's decode throughput (batch / step time)."""
        return self.batch / self.seconds


#: Ways :func:`decode_bound` counts a MoE model's routed experts.
MOE_WEIGHTS = ("touched", "total", "active")


def decode_bound(
    cfg: Any,
    gpu: str | Hardware = "H100",
    *,
    tp: int = 1,
    batch: int = 1,
    context_len: int = 0,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    moe_weights: str = "touched",
) -> DecodeBound:
    """Decode-step lower bound for ``cfg``: the weights a step reads, plus its KV cache.

    A step reads every weight matrix once, except the input embedding table (and learned
    position table), of which it only looks up one row per sequence: those tables are left out
    of ``weight_bytes`` (a tied table is read whole anyway, as the LM head). The KV cache read is
    the cache of ``batch`` sequences of ``context_len`` tokens.

    With tensor parallelism each GPU reads 1/tp of the weights and the KV heads it
    holds (:func:`tp_layout`: tp must divide the query heads; K/tp KV heads each, or one
    whole head replicated on tp/K GPUs when K < tp; all of MLA's latent, which is not
    split by heads); the GPUs read in parallel.

    MoE: one decode step routes ``batch`` tokens (one per sequence) through each MoE layer.
    ``moe_weights="touched"`` (default) reads, per MoE layer, the expected number of
    distinct routed experts those tokens touch, E·(1 − (1 − k/E)^B)
    (:func:`expected_experts_touched`, uniform routing), plus the shared experts
    and everything else always; ``"total"`` reads every routed expert (the worst case, what
    a large batch approaches); ``"active"`` reads k experts (exactly the batch-1 case).
    """
    from tmath import count_params  # lazy: ledger modules

    hw = hardware(gpu)
    if moe_weights not in MOE_WEIGHTS:
        raise ValueError(f"moe_weights must be one of {MOE_WEIGHTS}, got {moe_weights!r}")
    tp = int_arg("tp", tp)
    batch = int_arg("batch", batch)
    context_len = int_arg("context_len", context_len, 0)
    layout = tp_layout(cfg, tp)
    p = count_params(cfg)
    looked_up = p.breakdown["positions"] + (0 if cfg.tie_embeddings else p.breakdown["embedding"])
    routed = p.breakdown.get("routed_experts", 0)
    experts_read = None
    if cfg.is_moe and routed:
        e, k = cfg.n_routed_experts, cfg.experts_per_token
        experts_read = {"total": float(e), "active": float(k),
                        "touched": expected_experts_touched(e, k, batch)}[moe_weights]
        n = p.total - routed + routed * experts_read / e
    else:
        n = p.total
    wb = (n - looked_up) * dtype_bytes(weight_dtype)
    kvb = kv_sequence_bytes(cfg, context_len, kv_dtype) * batch if context_len else 0
    kv_gpu = kvb * float(kv_share_per_gpu(cfg, tp))  # the heads this GPU holds (tmath.layout)
    sec = decode_time_lower_bound(wb / tp, hw.hbm_bandwidth, kv_bytes=kv_gpu)
    return DecodeBound(hw.name, tp, batch, context_len, wb, kvb, hw.hbm_bandwidth, sec, kv_gpu,
                       moe_weights, experts_read, layout.kv_replicas)


def kv_sequence_bytes(cfg: Any, seq_len: int, dtype: str = "bf16") -> int:
    """KV-cache bytes of one sequence of ``seq_len`` tokens (all layers, all KV heads).

    :func:`tmath.kv_cache_bytes_sequence`, which honours sliding-window layers.
    """
    from tmath.kvcache import kv_cache_bytes_sequence

    return kv_cache_bytes_sequence(cfg, int_arg("seq_len", seq_len), dtype=dtype)


def expected_experts_touched(experts: int, experts_per_token: int, tokens: int) -> float:
    """Expected number of distinct experts that ``tokens`` tokens touch in one MoE layer.

    Each token picks ``experts_per_token`` = k of the ``experts`` = E routed experts.
    Assumption: uniform routing, tokens independent, so a given expert is missed by one
    token with probability 1 - k/E and by all B tokens with probability (1 - k/E)^B:
    ``E * (1 - (1 - k/E)**B)``.  B = 1 gives exactly k; as B grows it tends to E.
    Real routers are not uniform (load-balancing losses push them towards it), and
    correlated tokens touch fewer experts, so this is a model, not a measurement.
    (Also importable from :mod:`tmath.moe`, where it used to live.)
    """
    from fractions import Fraction

    e = int_arg("experts", experts)
    k = int_arg("experts_per_token", experts_per_token)
    b = int_arg("tokens", tokens)
    if k > e:
        raise ValueError(f"experts_per_token ({k}) must be <= experts ({e})")
    if k == e:
        return float(e)
    if b <= 256:  # exact rational arithmetic, then one rounding
        return float(e * (1 - (1 - Fraction(k, e)) ** b))
    return e * (1 - (1 - k / e) ** b)


# --- concurrency -------------------------------------------------------------


def max_concurrent_sequences(kv_budget_bytes: float, kv_bytes_per_token: float, context_len: int) -> int:
    """How many sequences of ``context_len`` tokens fit a KV-cache budget.

    ``floor(kv_budget_bytes / (kv_bytes_per_token x context_len))``; both bytes
    must refer to the same scope (one GPU, or the whole TP group).  A negative
    budget (weights do not fit) gives 0.
    """
    _pos("kv_bytes_per_token", kv_bytes_per_token)
    context_len = int_arg("context_len", context_len)
    if isinstance(kv_budget_bytes, bool) or not isinstance(kv_budget_bytes, (int, float)):
        raise ValueError(f"kv_budget_bytes must be a number, got {kv_budget_bytes!r}")
    if kv_budget_bytes <= 0:
        return 0
    return int(kv_budget_bytes // (kv_bytes_per_token * context_len))


def kv_bytes_per_token_per_gpu(
    kv_bytes_per_token: float, num_kv_heads: int, tp: int, mla: bool = False
) -> float:
    """KV bytes per token held by each of ``tp`` GPUs.

    Tensor parallelism splits KV heads: each GPU holds ceil(K / tp) of the K
    heads (heads are replicated when tp > K).  MLA's compressed latent is not
    split by heads, so every GPU holds all of it.  A plain-number helper: for a
    config, :func:`tmath.kvcache.kv_cache_bytes_per_token_per_gpu` reads the split from
    :func:`tmath.layout.tp_layout`, which refuses the splits no framework runs (8 KV
    heads over 3 GPUs, where this helper answers with ceil(8/3) = 3 heads).
    """
    _pos("kv_bytes_per_token", kv_bytes_per_token)
    k = int_arg("num_kv_heads", num_kv_heads)
    tp = int_arg("tp", tp)
    if mla:
        return kv_bytes_per_token
    return kv_bytes_per_token * math.ceil(k / tp) / k


@dataclass(frozen=True)
class Concurrency:
    """Concurrency on one TP group (see :func:`concurrency`)."""

    gpu: str
    tp: int
    context_len: int
    hbm_bytes_per_gpu: float
    weight_bytes_per_gpu: float
    overhead_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    sequences: int


def concurrency(
    cfg: Any,
    gpu: str | Hardware = "H100",
    *,
    tp: int = 8,
    context_len: int = 4096,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    overhead_bytes_per_gpu: float = WORKSPACE_BYTES_PER_GPU,
    hbm_bytes_per_gpu: float | None = None,
) -> Concurrency:
    """Sequences of ``context_len`` that fit a TP group of ``tp`` GPUs.

    Per GPU: budget = HBM - weights/tp - overhead; each GPU holds its share of
    every sequence's KV cache (:func:`kv_bytes_per_token_per_gpu`), so the
    group serves ``floor(budget / (kv_per_token_per_gpu x context_len))`` sequences.
    """
    from tmath import count_params  # lazy: ledger modules
    from tmath.kvcache import kv_cache_bytes_per_token_per_gpu

    hw = hardware(gpu)
    tp = int_arg("tp", tp)
    tp_layout(cfg, tp)
    hbm = hw.hbm_bytes if hbm_bytes_per_gpu is None else _pos("hbm_bytes_per_gpu", hbm_bytes_per_gpu)
    _pos("overhead_bytes_per_gpu", overhead_bytes_per_gpu, True)
    w = count_params(cfg).total * dtype_bytes(weight_dtype) / tp
    budget = hbm - w - overhead_bytes_per_gpu
    kv_tok = kv_cache_bytes_per_token_per_gpu(cfg, tp, kv_dtype)
    n = max_concurrent_sequences(budget, kv_tok, context_len)
    return Concurrency(hw.name, tp, context_len, hbm, w, overhead_bytes_per_gpu, budget, kv_tok, n)


# --- roofline ---------------------------------------------------------------


def matmul_intensity(
    tokens: int,
    d_in: int,
    d_out: int,
    *,
    weight_bytes: float = 2,
    act_bytes: float = 2,
    experts: int = 1,
    experts_per_token: int = 1,
) -> float:
    """Arithmetic intensity (FLOP per HBM byte) of a token-batch x weight matmul.

    Dense: FLOPs 2 B d_in d_out; bytes = weights d_in d_out x ``weight_bytes`` +
    activations in and out (B d_in + B d_out) x ``act_bytes``.  MoE layer with
    E experts of this shape and top-k routing: FLOPs 2 k B d_in d_out, bytes =
    E d_in d_out x ``weight_bytes`` (every expert read; uniform routing with
    k B >= E) + activations k B (d_in + d_out) x ``act_bytes``.
    Pass ``act_bytes=0`` for the weights-only approximation 2kB/(E x weight_bytes).
    """
    b = int_arg("tokens", tokens)
    d_in, d_out = int_arg("d_in", d_in), int_arg("d_out", d_out)
    e, k = int_arg("experts", experts), int_arg("experts_per_token", experts_per_token)
    if k > e:
        raise ValueError(f"experts_per_token ({k}) must be <= experts ({e})")
    _pos("weight_bytes", weight_bytes)
    _pos("act_bytes", act_bytes, True)
    flops = 2 * k * b * d_in * d_out
    byts = e * d_in * d_out * weight_bytes + k * b * (d_in + d_out) * act_bytes
    return flops / byts


def critical_batch(
    peak_flops: float,
    bandwidth: float,
    *,
    weight_bytes: float = 2,
    experts: int = 1,
    experts_per_token: int = 1,
) -> float:
    """Tokens per batch above which a weight-bound matmul becomes compute-bound.

    Weights-only roofline: intensity 2 k B / (E x weight_bytes) must exceed
    the ridge peak_flops / bandwidth, so
    ``B* = (peak_flops / bandwidth) x weight_bytes x E / (2 k)``.
    Dense (E = k = 1) with bf16 weights: B* = ridge (H100: 989e12 / 3.35e12 = 295).
    """
    _pos("peak_flops", peak_flops)
    _pos("bandwidth", bandwidth)
    _pos("weight_bytes", weight_bytes)
    e, k = int_arg("experts", experts), int_arg("experts_per_token", experts_per_token)
    if k > e:
        raise ValueError(f"experts_per_token ({k}) must be <= experts ({e})")
    return peak_flops / bandwidth * weight_bytes * e / (2 * k)


# --- one serving step on a TP group, communication included (Part V) -----------------------

#: NCCL's fixed cost per collective in its own cost model (``baseLat`` of the ring algorithm
#: with the LL protocol, src/graph/tuning.cc; :data:`tmath.sources` key ``nccl-tuning``), on
#: top of the per-step latency and bandwidth of the protocol NCCL runs for the message
#: (:func:`tmath.comm.nccl_time` without its base latency: LL for a decode step's few KB).
#: A model constant, not a measurement; pass it as ``base_latency`` to :func:`decode_step` for
#: the pessimistic end of the α–β bound.
NCCL_BASE_LATENCY = 6.6e-6


@dataclass(frozen=True)
class StepTime:
    """One step of serving on a TP group, per GPU (see :func:`decode_step`, :func:`prefill_step`).

    The step reads ``bytes_per_gpu`` from HBM and does ``flops_per_gpu`` FLOPs; whichever
    takes longer sets the compute part (a roofline: ``max(compute_seconds, memory_seconds)``).
    Tensor parallelism adds ``all_reduces`` all-reduces of ``all_reduce_bytes`` each (2 per
    layer, Megatron), priced by the α–β model on ``link`` and not overlapped with compute.
    """

    phase: str  # "decode" or "prefill"
    gpu: str
    tp: int
    batch: int
    tokens: int  # new tokens per sequence in this step: 1 (decode) or the prompt (prefill)
    context_len: int  # tokens each sequence attends to at the end of the step
    flops_per_gpu: float
    bytes_per_gpu: float
    compute_seconds: float
    memory_seconds: float
    all_reduces: int
    all_reduce_bytes: int
    all_reduce_seconds: float  # one all-reduce, base latency included
    link: str

    @property
    def comm_seconds(self) -> float:
        """All the step's all-reduces, one after another."""
        return self.all_reduces * self.all_reduce_seconds

    @property
    def seconds(self) -> float:
        """The step: the slower of compute and HBM reads, plus the all-reduces."""
        return max(self.compute_seconds, self.memory_seconds) + self.comm_seconds

    @property
    def tokens_per_s(self) -> float:
        """Tokens the whole batch produces per second (decode) or takes in (prefill)."""
        return self.batch * self.tokens / self.seconds


def _peak_flops(hw: Hardware, compute_dtype: str) -> float:
    if compute_dtype in ("bf16", "bfloat16", "fp16", "float16"):
        return hw.dense_flops
    if compute_dtype == "fp8":
        if hw.fp8_flops is None:
            raise ValueError(f"{hw.name} 没有 fp8 张量核心峰值：取 compute_dtype='bf16'")
        return hw.fp8_flops
    raise ValueError(f"compute_dtype={compute_dtype!r} 未知；可取 bf16、fp8")


def _tp_all_reduce(cfg: Any, hw: Hardware, tp: int, tokens: int, act_bytes: float,
                   link: Any, base_latency: float) -> tuple[int, int, float, str]:
    """(count, bytes of one, seconds of one, link name) of a step's TP all-reduces."""
    from tmath import comm
    from tmath.hardware import link as get_link
    from tmath.hardware import node

    _pos("act_bytes", act_bytes)
    _pos("base_latency", base_latency, True)
    nbytes = math.ceil(tokens * cfg.hidden_size * act_bytes)
    if tp == 1:  # no group: no link needed (a GPU without node data serves alone too)
        return 0, nbytes, 0.0, "" if link is None else get_link(link).name
    lk = get_link(node(hw).intra if link is None else link)
    if lk.step_latency is None:  # not an NCCL link: the plain α–β model
        one = comm.collective_time("all_reduce", nbytes, tp, bandwidth=lk.bandwidth,
                                   alpha=lk.alpha, topology=lk.topology) + base_latency
    else:  # NCCL's per-step latency and bandwidth of the fastest protocol for this size
        one = comm.nccl_time("all_reduce", nbytes, tp, intra=lk, base=False) + base_latency
    return 2 * cfg.num_layers, nbytes, one, lk.name


def decode_step(
    cfg: Any,
    gpu: str | Hardware = "H100",
    *,
    tp: int = 8,
    batch: int = 1,
    context_len: int = 0,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    compute_dtype: str | None = None,
    act_bytes: float = 2,
    link: Any = None,
    base_latency: float = 0.0,
) -> StepTime:
    """One decode step of ``batch`` sequences, each attending to ``context_len`` cached tokens.

    HBM reads: the weights and the KV cache, as :func:`decode_bound` counts them (each GPU
    its share).  FLOPs: the forward of one more token per sequence
    (``forward_flops(T+1) − forward_flops(T)``, causal: projections, MLP, LM head and the
    new row of attention), split over ``tp``.  Communication: 2 all-reduces per layer of
    the batch's hidden states, ``batch·D·act_bytes`` bytes each, over ``tp`` GPUs on the
    node's own link (NVLink for an H100) unless ``link`` names another, with
    ``base_latency`` seconds added to each (:data:`NCCL_BASE_LATENCY` for NCCL's model).
    ``compute_dtype`` defaults to the weights' (fp8 weights use the fp8 peak).
    """
    from tmath.flops import forward_flops

    hw = hardware(gpu)
    tp, batch = int_arg("tp", tp), int_arg("batch", batch)
    context_len = int_arg("context_len", context_len, 0)
    if context_len + 1 > cfg.max_position:
        raise ValueError(f"context_len={context_len:,} 超过了 {cfg.name} 的 {cfg.max_position:,} "
                         "个位置：取更短的上下文")
    bound = decode_bound(cfg, hw, tp=tp, batch=batch, context_len=context_len,
                         weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    peak = _peak_flops(hw, compute_dtype or ("fp8" if weight_dtype == "fp8" else "bf16"))
    per_token = forward_flops(cfg, context_len + 1, causal=True).total - (
        forward_flops(cfg, context_len, causal=True).total if context_len else 0)
    flops = batch * per_token / tp
    n, nbytes, one, lk = _tp_all_reduce(cfg, hw, tp, batch, act_bytes, link, base_latency)
    return StepTime("decode", hw.name, tp, batch, 1, context_len + 1, flops, bound.bytes_per_gpu,
                    flops / peak, bound.bytes_per_gpu / hw.hbm_bandwidth, n, nbytes, one, lk)


def prefill_step(
    cfg: Any,
    gpu: str | Hardware = "H100",
    *,
    tp: int = 8,
    prompt_len: int,
    batch: int = 1,
    weight_dtype: str = "bf16",
    compute_dtype: str | None = None,
    act_bytes: float = 2,
    link: Any = None,
    base_latency: float = 0.0,
) -> StepTime:
    """The prefill of ``batch`` prompts of ``prompt_len`` tokens: the time to the first token.

    FLOPs: a causal forward of the prompt (:func:`tmath.forward_flops`), with the LM head
    only for the last position (the one token the step samples), split over ``tp``.  HBM
    reads: the weights once (the KV cache is written, not read).  Communication: 2
    all-reduces per layer of ``batch·prompt_len·D·act_bytes`` bytes each.
    """
    from tmath import count_params
    from tmath.flops import forward_flops

    hw = hardware(gpu)
    tp, batch = int_arg("tp", tp), int_arg("batch", batch)
    t = int_arg("prompt_len", prompt_len)
    if t > cfg.max_position:
        raise ValueError(f"prompt_len={t:,} 超过了 {cfg.name} 的 {cfg.max_position:,} 个位置")
    tp_layout(cfg, tp)
    f = forward_flops(cfg, t, batch, causal=True)
    flops = (f.total - f.breakdown["lm_head"] * (t - 1) / t) / tp
    peak = _peak_flops(hw, compute_dtype or ("fp8" if weight_dtype == "fp8" else "bf16"))
    p = count_params(cfg)
    looked_up = p.breakdown["positions"] + (0 if cfg.tie_embeddings else p.breakdown["embedding"])
    read = (p.total - looked_up) * dtype_bytes(weight_dtype) / tp
    n, nbytes, one, lk = _tp_all_reduce(cfg, hw, tp, batch * t, act_bytes, link, base_latency)
    return StepTime("prefill", hw.name, tp, batch, t, t, flops, read, flops / peak,
                    read / hw.hbm_bandwidth, n, nbytes, one, lk)

"""Serving arithmetic for Part VI (推理与服务的账) and ``tmath serve``.

Public names (each documented below; units: bytes, seconds, FLOPs, tokens):

* :func:`prefill_time` -- the prefill of ``batch`` prompts on the roofline (the TTFT), a
  :class:`StepTime`.
* :func:`decode_step` -- one decode step of ``batch`` sequences at a given context, a
  :class:`StepTime`; the same function (:func:`tmath.serving.decode_step`) and the same
  conventions as ``tmath ledger``'s decode step, so at batch 1 both print the same numbers.
* :func:`tpot` -- the mean decode step over a generation (exact sum, see its docstring).
* :func:`latency_throughput` -- TPOT and output tokens/s against batch size.
* :func:`serve` -- one deployment, as ``tmath serve`` prints it: TTFT, TPOT, tokens/s,
  concurrency, speculative decoding, cost, feasibility (a dict).
* :func:`paged_kv` -- blocks, bytes and rounding waste of paged KV (:class:`PagedKV`).
* :func:`kv_capacity` -- sequences that fit a TP group, paged or contiguous
  (:class:`KVCapacity`).
* :func:`speculative_tokens_per_step`, :func:`speculative_speedup`,
  :func:`speculative_at_batch`, :func:`speculative_breakeven_batch` -- speculative decoding
  (Leviathan et al. 2023; Chen et al. 2023), and the batch where it stops paying.
* :func:`request_trace`, :func:`simulate`, :func:`roofline_step_time` -- a small
  discrete-event simulation of static and continuous batching and chunked prefill
  (:class:`Request`, :class:`SimResult`).
* :func:`disaggregated` -- prefill and decode in separate pools (DistServe, Splitwise)
  against one colocated pool.
* :func:`cost_per_million` -- dollars per million input and output tokens from a
  GPU-hour price.
* :func:`ep_decode_step` -- a MoE decode step with expert parallelism (DeepSeek-V3's layout);
  :data:`DEEPSEEK_V3_SERVING` -- DeepSeek's published deployment units and throughput, with the
  words they are read from and their ``tmath.sources`` keys.
* :data:`WEIGHT_DTYPES`, :data:`KV_DTYPES`, :data:`LIMITS`.

Importing this module loads neither SymPy nor NumPy (``tmath serve`` runs in Pyodide);
nothing here does.  Conventions shared by every function:

* Per GPU of a TP group of ``tp`` GPUs; HBM at its peak bandwidth, FLOPs at the dense peak
  (fp8 weights compute at the fp8 peak where the GPU has one; int8/int4 weights are
  weight-only quantization: read at their size, computed in bf16).  The roofline takes
  the slower of reads and compute, then adds tensor parallelism's all-reduces
  (:mod:`tmath.serving`).  These are model estimates of a perfect kernel, not measurements.
* The decode step that takes in a sequence's token number ``n`` (counting the prompt; it
  emits token ``n + 1``) reads the KV cache of the ``n - 1`` tokens before it (``context``),
  as ``tmath ledger --seq-len n`` counts it.  The prefill of a ``P``-token prompt emits the
  first output token; output token ``i + 1`` comes from the decode step at context ``P + i - 1``.
* Accuracy of quantized weights or KV is not modelled; it is the cost named in the text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "WEIGHT_DTYPES", "KV_DTYPES", "LIMITS", "StepTime", "prefill_time", "decode_step", "tpot",
    "latency_throughput", "serve", "PagedKV", "paged_kv", "KVCapacity", "kv_capacity",
    "speculative_tokens_per_step", "speculative_speedup", "speculative_at_batch",
    "speculative_breakeven_batch",
    "Request", "request_trace", "SimResult", "simulate", "roofline_step_time",
    "disaggregated", "cost_per_million", "DEEPSEEK_V3_SERVING", "ep_decode_step",
]

#: Weight formats ``serve`` accepts (bytes per value in :data:`tmath.serving.DTYPE_BYTES`).
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
#: KV-cache formats ``serve`` accepts.
KV_DTYPES = ("bf16", "fp16", "fp8")

#: Bounds of every setting (the command line's flags say the same).
LIMITS: dict[str, tuple[float, float]] = {
    "tp": (1, 1024),
    "prompt_len": (1, 10**7),
    "output_len": (1, 10**7),
    "batch": (1, 10**6),
    "block_size": (1, 4096),
    "draft_len": (1, 64),
    "acceptance": (0.0, 1.0),
    "gpu_hour_price": (0.0, 1e4),
}


def _err(msg: str, fld: str) -> Exception:
    from tmath.errors import InputError

    return InputError(msg, fld)


def _int_setting(name: str, v: Any) -> int:
    from tmath.errors import InputTypeError, show

    lo, hi = LIMITS[name]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputTypeError(f"{name} 必须是整数，收到 {show(v)}", name)
    if not lo <= v <= hi:
        raise _err(f"{name} 必须在 {int(lo):,} 到 {int(hi):,} 之间，收到 {show(v)}", name)
    return v


def _num_setting(name: str, v: Any, *, lo_open: bool = False) -> float:
    from tmath.errors import InputTypeError, show

    lo, hi = LIMITS[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputTypeError(f"{name} 必须是数，收到 {show(v)}", name)
    if not (math.isfinite(v) and (lo < v if lo_open else lo <= v) and v <= hi):
        rng = f"{'大于' if lo_open else '不小于'} {lo:g}、不超过 {hi:g}"
        raise _err(f"{name} 必须{rng}，收到 {show(v)}", name)
    return float(v)


def _dtype(name: str, v: Any, allowed: tuple[str, ...]) -> str:
    from tmath.errors import show

    s = v.lower() if isinstance(v, str) else v
    if s not in allowed:
        raise _err(f"{name} 不能取 {show(v)}：请用 {'、'.join(allowed)} 之一", name)
    return s


def _hw(gpu: Any) -> Any:
    from tmath.hardware import hardware

    return hardware(gpu)


def _compute_dtype(hw: Any, weight_dtype: str) -> str:
    """The ledger's convention: fp8 weights compute at the fp8 peak where the GPU has one."""
    return "fp8" if weight_dtype == "fp8" and hw.fp8_flops else "bf16"


def _check_cfg(cfg: Any) -> Any:
    import tmath
    from tmath.errors import InputTypeError

    if not isinstance(cfg, tmath.ModelConfig):
        raise InputTypeError(f"cfg 必须是 tmath.ModelConfig，收到 {type(cfg).__name__}", "cfg")
    return cfg


def _check_tp(cfg: Any, tp: int) -> Any:
    from tmath.errors import has_chinese
    from tmath.layout import tp_layout

    try:
        return tp_layout(cfg, tp)
    except (ValueError, TypeError) as e:
        msg = str(e) if has_chinese(str(e)) else f"TP={tp} 无法均分 {cfg.name} 的注意力头：{e}"
        raise _err(msg, "tp") from None


# --- one step on the roofline ------------------------------------------------------------


@dataclass(frozen=True)
class StepTime:
    """One prefill or decode step on a TP group, per GPU.

    ``seconds = max(compute_seconds, memory_seconds) + comm_seconds``; ``bound`` says which
    of the two roofline terms is larger (``"显存带宽"`` or ``"算力"``).  ``bytes_read`` is
    ``weight_bytes + kv_bytes`` (per GPU; a prefill writes its KV cache: ``kv_bytes`` then
    counts the bytes written).  ``flops`` per GPU.  ``experts_read``: routed experts read
    per MoE layer (None for a dense model).
    """

    phase: str
    gpu: str
    tp: int
    batch: int
    tokens: int  # new tokens per sequence: 1 (decode) or the prompt (prefill)
    context: int  # cached tokens each sequence attends to before the step
    flops: float
    weight_bytes: float
    kv_bytes: float
    compute_seconds: float
    memory_seconds: float
    comm_seconds: float
    all_reduces: int
    all_reduce_bytes: int
    link: str
    compute_dtype: str
    experts_read: float | None = None

    @property
    def bytes_read(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def seconds(self) -> float:
        return max(self.compute_seconds, self.memory_seconds) + self.comm_seconds

    @property
    def bound(self) -> str:
        return "显存带宽" if self.memory_seconds >= self.compute_seconds else "算力"

    @property
    def tokens_per_s(self) -> float:
        """Tokens the batch produces (decode) or takes in (prefill) per second."""
        return self.batch * self.tokens / self.seconds

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(bytes_read=self.bytes_read, seconds=self.seconds, bound=self.bound,
                 tokens_per_s=self.tokens_per_s)
        return d


def decode_step(cfg: Any, gpu: Any = "H100", *, tp: int = 1, batch: int = 1, context: int = 0,
                weight_dtype: str = "bf16", kv_dtype: str = "bf16", link: Any = None,
                base_latency: float = 0.0) -> StepTime:
    """One decode step: ``batch`` sequences, each with ``context`` cached tokens, make one
    token each.

    The numbers are :func:`tmath.serving.decode_step`'s (the function ``tmath ledger`` calls
    for its decode step, with the same compute-dtype rule), split into weights and KV by
    :func:`tmath.serving.decode_bound`: MoE layers read the expected distinct experts the
    ``batch`` tokens touch (uniform routing), MLA reads its latent cache on every GPU, GQA
    reads each GPU's KV heads.
    """
    from tmath.serving import decode_bound
    from tmath.serving import decode_step as _step

    hw = _hw(gpu)
    cd = _compute_dtype(hw, weight_dtype)
    st = _step(cfg, hw, tp=tp, batch=batch, context_len=context, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, compute_dtype=cd, link=link, base_latency=base_latency)
    b = decode_bound(cfg, hw, tp=tp, batch=batch, context_len=context, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype)
    kv = b.kv_bytes_per_gpu if b.kv_bytes_per_gpu is not None else b.kv_bytes / tp
    return StepTime("decode", hw.name, tp, batch, 1, context, st.flops_per_gpu, b.weight_bytes / tp,
                    kv, st.compute_seconds, st.memory_seconds, st.comm_seconds, st.all_reduces,
                    st.all_reduce_bytes, st.link, cd, b.experts_read)


def prefill_time(cfg: Any, gpu: Any = "H100", *, tp: int = 1, prompt_len: int, batch: int = 1,
                 weight_dtype: str = "bf16", kv_dtype: str = "bf16", link: Any = None) -> StepTime:
    """The prefill of ``batch`` prompts of ``prompt_len`` tokens in one step: the TTFT.

    FLOPs, weight reads and all-reduces are :func:`tmath.serving.prefill_step`'s (a causal
    forward of the prompt, the LM head for the last position only; every weight read once:
    ``batch·prompt_len`` tokens touch every expert of a MoE model in practice).  The KV
    cache the prefill writes, ``batch`` sequences of ``prompt_len`` tokens, is added to the
    HBM traffic (``kv_bytes``).  Queueing is not included: the prompt starts at once.
    """
    from tmath.kvcache import kv_cache_bytes_sequence
    from tmath.layout import kv_share_per_gpu
    from tmath.serving import prefill_step

    hw = _hw(gpu)
    cd = _compute_dtype(hw, weight_dtype)
    st = prefill_step(cfg, hw, tp=tp, prompt_len=prompt_len, batch=batch,
                      weight_dtype=weight_dtype, compute_dtype=cd, link=link)
    kv = kv_cache_bytes_sequence(cfg, prompt_len, dtype=kv_dtype, batch=batch) * float(
        kv_share_per_gpu(cfg, tp))
    mem = (st.bytes_per_gpu + kv) / hw.hbm_bandwidth
    return StepTime("prefill", hw.name, tp, batch, prompt_len, 0, st.flops_per_gpu,
                    st.bytes_per_gpu, kv, st.compute_seconds, mem, st.comm_seconds,
                    st.all_reduces, st.all_reduce_bytes, st.link, cd,
                    float(cfg.n_routed_experts) if cfg.is_moe else None)


def _affine_sum(f0: float, f1: float, c0: int, c1: int, lo: int, hi: int) -> float:
    """Σ f(c) for integers c in [lo, hi], f affine through (c0, f0), (c1, f1)."""
    if hi < lo:
        return 0.0
    if c1 == c0:
        return f0 * (hi - lo + 1)
    s = (f1 - f0) / (c1 - c0)
    return (hi - lo + 1) * (f0 + s * ((lo + hi) / 2 - c0))


def tpot(cfg: Any, gpu: Any = "H100", *, tp: int = 1, batch: int = 1, prompt_len: int,
         output_len: int, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> float:
    """Time per output token: the mean decode step over a generation of ``output_len`` tokens.

    The first token comes from the prefill; the other ``output_len - 1`` come from decode
    steps at contexts ``prompt_len .. prompt_len + output_len - 2``.  Each part of the step
    (reads, FLOPs) is affine in the context between the kinks of sliding windows, so the sum
    of ``max(compute, reads) + all-reduces`` over every step is done exactly on each affine
    piece (split where compute and reads cross) from the steps at the piece's ends.
    ``output_len == 1``: no decode step; the TPOT is that of the step at ``prompt_len``
    (what a second token would cost).
    """
    c0 = prompt_len
    c1 = prompt_len + max(output_len - 1, 1) - 1
    kw = dict(tp=tp, batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    cuts = sorted({c0, c1} | {w for w in cfg.layer_windows if w is not None and c0 < w < c1})
    steps = {c: decode_step(cfg, gpu, context=c, **kw) for c in cuts}
    total, n = 0.0, c1 - c0 + 1
    for i, (a, b) in enumerate(zip(cuts, cuts[1:] or cuts, strict=False)):
        sa, sb = steps[a], steps[b]
        lo = a if i == 0 else a + 1  # each piece owns its right end
        m0, m1 = sa.memory_seconds, sb.memory_seconds
        f0, f1 = sa.compute_seconds, sb.compute_seconds
        total += _affine_sum(sa.comm_seconds, sb.comm_seconds, a, b, lo, b)
        d0, d1 = m0 - f0, m1 - f1
        if (d0 >= 0) == (d1 >= 0) or b == a:  # one term is the larger on the whole piece
            top0, top1 = (m0, m1) if d0 >= 0 else (f0, f1)
            total += _affine_sum(top0, top1, a, b, lo, b)
        else:  # they cross at x: reads larger on one side
            x = a + d0 / (d0 - d1) * (b - a)
            k = min(max(math.floor(x), lo - 1), b)
            first = (m0, m1) if d0 >= 0 else (f0, f1)
            second = (f0, f1) if d0 >= 0 else (m0, m1)
            total += _affine_sum(*first, a, b, lo, k) + _affine_sum(*second, a, b, k + 1, b)
    return total / n


def latency_throughput(cfg: Any, gpu: Any = "H100", *, tp: int = 1, context: int,
                       batches: Sequence[int], weight_dtype: str = "bf16",
                       kv_dtype: str = "bf16") -> list[dict[str, Any]]:
    """The latency–throughput curve: for each batch size, the decode step at ``context``
    (its seconds = TPOT, the bound) and the output tokens/s of the batch."""
    out = []
    for b in batches:
        st = decode_step(cfg, gpu, tp=tp, batch=b, context=context, weight_dtype=weight_dtype,
                         kv_dtype=kv_dtype)
        out.append({"batch": b, "tpot_s": st.seconds, "output_tokens_per_s": st.tokens_per_s,
                    "tokens_per_s_per_gpu": st.tokens_per_s / tp, "bound": st.bound,
                    "memory_seconds": st.memory_seconds, "compute_seconds": st.compute_seconds,
                    "comm_seconds": st.comm_seconds})
    return out


# --- paged KV cache ---------------------------------------------------------------------


@dataclass(frozen=True)
class PagedKV:
    """Blocks a set of sequences occupies (see :func:`paged_kv`)."""

    blocks: int
    bytes: float  # blocks × block_size × bytes_per_token
    waste: float  # bytes allocated but holding no token (the partly filled last blocks)
    tokens: int  # tokens stored (a shared prefix once)
    block_size: int
    shared_blocks: int  # blocks of the shared prefix, stored once


def paged_kv(lengths: Sequence[int], block_size: int, bytes_per_token: float, *,
             prefix_shared: int = 0) -> PagedKV:
    """Paged KV (vLLM's PagedAttention): each sequence of ``L`` tokens holds ⌈L/b⌉ blocks of
    ``b = block_size`` tokens; the last block is partly empty (the rounding loss).

    ``prefix_shared`` tokens at the start of every sequence are the same (a system prompt):
    its ⌊s/b⌋ full blocks are stored once and shared (their reference count is the number of
    sequences); a partly filled last prefix block is not shared (vLLM copies on write), so each
    sequence holds ⌈(L − ⌊s/b⌋·b)/b⌉ blocks of its own.  ``bytes_per_token`` is one token's KV
    (all layers, or one GPU's share: the same scope comes out).
    """
    from tmath._checks import int_arg

    b = int_arg("block_size", block_size)
    s = int_arg("prefix_shared", prefix_shared, 0)
    ls = [int_arg("lengths", v) for v in lengths]
    if isinstance(bytes_per_token, bool) or not isinstance(bytes_per_token, (int, float)) or not (
            math.isfinite(bytes_per_token) and bytes_per_token > 0):
        raise ValueError(f"bytes_per_token must be a positive number, got {bytes_per_token!r}")
    if ls and s > min(ls):
        raise ValueError(f"prefix_shared ({s}) exceeds the shortest sequence ({min(ls)})")
    shared = s // b if ls else 0
    own = sum(-(-(L - shared * b) // b) for L in ls)
    blocks = shared + own
    tokens = shared * b + sum(L - shared * b for L in ls)
    return PagedKV(blocks, blocks * b * bytes_per_token, (blocks * b - tokens) * bytes_per_token,
                   tokens, b, shared)


@dataclass(frozen=True)
class KVCapacity:
    """How many sequences' KV caches fit a TP group (see :func:`kv_capacity`)."""

    mode: str
    sequences: int
    hbm_bytes_per_gpu: float
    weight_bytes_per_gpu: float
    workspace_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    bytes_per_sequence_per_gpu: float  # paged: its blocks; contiguous: the reservation
    tokens_reserved_per_sequence: int
    draft_weight_bytes_per_gpu: float = 0.0  # included in weight_bytes_per_gpu
    draft_kv_bytes_per_token_per_gpu: float = 0.0  # included in kv_bytes_per_token_per_gpu


def kv_capacity(cfg: Any, gpu: Any = "H100", *, tp: int = 1, max_len: int,
                block_size: int = 16, kv_dtype: str = "bf16", weight_dtype: str = "bf16",
                mode: str = "paged", lengths: Sequence[int] | None = None,
                workspace_bytes: float | None = None, draft: Any = None) -> KVCapacity:
    """Sequences whose KV caches fit beside the weights on every GPU of the TP group.

    Budget per GPU: HBM − weights/tp (all of them, every expert) − workspace
    (:data:`tmath.serving.WORKSPACE_BYTES_PER_GPU` unless given).  ``mode="contiguous"``
    reserves ``max_len`` tokens for every sequence when it starts (the pre-vLLM way: the
    length it may reach); ``mode="paged"`` holds ⌈L/b⌉ blocks for a sequence of ``L`` tokens,
    ``L = max_len`` unless ``lengths`` gives the sequences (then: how many of them, in order,
    fit).  Sliding-window layers keep at most their window (tmath.kvcache's convention),
    rounded up to whole blocks.

    With a ``draft`` model (speculative decoding on the same GPUs, same ``tp`` and dtypes),
    its weights come off the budget too, and every sequence keeps the draft's KV cache of the
    same length beside the target's (both in ``weight_bytes_per_gpu`` and
    ``kv_bytes_per_token_per_gpu``; the draft's own shares in the ``draft_*`` fields).
    """
    from tmath import count_params
    from tmath.kvcache import kv_cache_bytes_sequence
    from tmath.layout import kv_share_per_gpu
    from tmath.serving import WORKSPACE_BYTES_PER_GPU, dtype_bytes

    hw = _hw(gpu)
    if mode not in ("paged", "contiguous"):
        raise _err(f"mode 不能取 {mode!r}：请用 paged 或 contiguous", "mode")
    _check_tp(cfg, tp)
    work = WORKSPACE_BYTES_PER_GPU if workspace_bytes is None else workspace_bytes
    models = [cfg] if draft is None else [cfg, draft]
    if draft is not None:
        _check_tp(draft, tp)
    w_of = [count_params(m).total * dtype_bytes(weight_dtype) / tp for m in models]
    w = sum(w_of)
    budget = hw.hbm_bytes - w - work
    shares = [float(kv_share_per_gpu(m, tp)) for m in models]

    def seq_bytes(L: int) -> float:
        tokens = L if mode == "contiguous" else -(-L // block_size) * block_size
        return sum(kv_cache_bytes_sequence(m, tokens, dtype=kv_dtype) * sh
                   for m, sh in zip(models, shares, strict=True))

    per_tok_of = [kv_cache_bytes_sequence(m, 1, dtype=kv_dtype) * sh
                  for m, sh in zip(models, shares, strict=True)]
    per_tok = sum(per_tok_of)
    if lengths is None or mode == "contiguous":
        one = seq_bytes(max_len)
        n = 0 if budget <= 0 else int(budget // one)
        if lengths is not None:
            n = min(n, len(lengths))
    else:
        one, n, used = seq_bytes(max_len), 0, 0.0
        for L in lengths:
            used += seq_bytes(L)
            if used > budget:
                break
            n += 1
    reserved = max_len if mode == "contiguous" else -(-max_len // block_size) * block_size
    return KVCapacity(mode, n, hw.hbm_bytes, w, work, budget, per_tok, one, reserved,
                      sum(w_of[1:]), sum(per_tok_of[1:]))


# --- speculative decoding ---------------------------------------------------------------


def speculative_tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens one target step yields with ``k`` drafted tokens, each accepted with
    probability ``alpha`` independently (Leviathan et al. 2023, eq. 1):
    ``(1 − α^(k+1)) / (1 − α)``; ``k + 1`` when ``α = 1``.

    The target verifies the k drafts in one step; the first rejection stops the run and the
    target's own token replaces it (or, all accepted, the target adds one more): so a step
    always yields at least one token.
    """
    a = float(alpha)
    if not 0 <= a <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    if a == 1:
        return float(k + 1)
    return (1 - a ** (k + 1)) / (1 - a)


def speculative_speedup(alpha: float, k: int, draft_cost_ratio: float) -> float:
    """Walltime speed-up over plain decoding when a draft step costs ``c = draft_cost_ratio``
    target steps and verifying k tokens costs one target step (Leviathan et al. 2023,
    Theorem 3.8): ``(1 − α^(k+1)) / ((1 − α)(k·c + 1))``.

    The "one target step" assumption holds while decode is bound by reading the weights;
    :func:`speculative_at_batch` drops it.
    """
    c = float(draft_cost_ratio)
    if not (math.isfinite(c) and c >= 0):
        raise ValueError(f"draft_cost_ratio must be a non-negative number, got {draft_cost_ratio!r}")
    return speculative_tokens_per_step(alpha, k) / (k * c + 1)


def _verify_step(cfg: Any, hw: Any, *, tp: int, batch: int, k: int, context: int,
                 weight_dtype: str, kv_dtype: str) -> StepTime:
    """The target's step that checks ``k`` drafted tokens for each of ``batch`` sequences:
    ``k + 1`` positions per sequence in one forward.  Reads: the weights once (MoE: the
    experts ``batch·(k+1)`` tokens touch) and each sequence's KV once; FLOPs and all-reduce
    bytes: ``k + 1`` times a decode step's."""
    from tmath.serving import decode_bound

    one = decode_step(cfg, hw, tp=tp, batch=batch, context=context, weight_dtype=weight_dtype,
                      kv_dtype=kv_dtype)
    wide = decode_step(cfg, hw, tp=tp, batch=batch * (k + 1), context=0,
                       weight_dtype=weight_dtype, kv_dtype=kv_dtype)  # comm of B(k+1) tokens
    wb = decode_bound(cfg, hw, tp=tp, batch=batch * (k + 1), context_len=0,
                      weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    wbytes = wb.weight_bytes / tp
    mem = (wbytes + one.kv_bytes) / hw.hbm_bandwidth
    return StepTime("verify", hw.name, tp, batch, k + 1, context, one.flops * (k + 1), wbytes,
                    one.kv_bytes, one.compute_seconds * (k + 1), mem, wide.comm_seconds,
                    wide.all_reduces, wide.all_reduce_bytes, wide.link, one.compute_dtype,
                    wb.experts_read)


def speculative_at_batch(cfg: Any, draft: Any, gpu: Any = "H100", *, tp: int = 1,
                         batch: int = 1, context: int, k: int, alpha: float,
                         weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> dict[str, Any]:
    """Speculative decoding on the roofline at a batch size: the draft runs ``k`` decode steps
    on the same GPUs (same ``tp``), then the target verifies ``k + 1`` positions per
    sequence in one step (:func:`_verify_step`).  At small batches the verify step costs
    about one decode step (reads dominate) and the speed-up is Leviathan's; at large batches
    decode turns compute-bound, the verify step costs about ``k + 1`` decode steps, and the
    speed-up falls below 1.

    Returns the plain step, the draft step, the verify step, expected tokens per target step,
    seconds per output token with and without the draft, and ``speedup``.
    """
    hw = _hw(gpu)
    plain = decode_step(cfg, hw, tp=tp, batch=batch, context=context,
                        weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    d = decode_step(draft, hw, tp=tp, batch=batch, context=context,
                    weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    v = _verify_step(cfg, hw, tp=tp, batch=batch, k=k, context=context,
                     weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    n = speculative_tokens_per_step(alpha, k)
    cycle = k * d.seconds + v.seconds
    return {"batch": batch, "k": k, "alpha": alpha, "tokens_per_target_step": n,
            "plain_step_s": plain.seconds, "draft_step_s": d.seconds, "verify_step_s": v.seconds,
            "draft_cost_ratio": d.seconds / plain.seconds, "cycle_s": cycle,
            "tpot_plain_s": plain.seconds, "tpot_s": cycle / n,
            "speedup": plain.seconds * n / cycle, "verify_bound": v.bound,
            "plain_bound": plain.bound}


def speculative_breakeven_batch(cfg: Any, draft: Any, gpu: Any = "H100", *, tp: int = 1,
                                context: int, k: int, alpha: float, weight_dtype: str = "bf16",
                                kv_dtype: str = "bf16", max_batch: int = 1 << 16) -> int | None:
    """The smallest batch at which speculative decoding stops paying (speed-up below 1 in
    :func:`speculative_at_batch`), searched by doubling then bisection over batches up to
    ``max_batch``; None if it still pays there (or never paid: then 1 is returned).

    Assumes the speed-up falls as the batch grows (decode turning compute-bound), which is
    what the roofline gives; the test checks the neighbours of the answer.
    """
    def pays(b: int) -> bool:
        return speculative_at_batch(cfg, draft, gpu, tp=tp, batch=b, context=context, k=k,
                                    alpha=alpha, weight_dtype=weight_dtype,
                                    kv_dtype=kv_dtype)["speedup"] >= 1

    if not pays(1):
        return 1
    lo = 1  # pays
    hi = 2
    while hi <= max_batch and pays(hi):
        lo, hi = hi, hi * 2
    if hi > max_batch:
        if pays(max_batch):
            return None
        hi = max_batch
    while hi - lo > 1:  # lo pays, hi does not
        mid = (lo + hi) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid
    return hi


# --- cost -------------------------------------------------------------------------------


def cost_per_million(gpu_hour_price: float, gpus: int, tokens_per_s: float) -> float:
    """Dollars per million tokens when ``gpus`` GPUs at ``gpu_hour_price`` dollars per GPU-hour
    together process ``tokens_per_s`` tokens per second (all the time busy)."""
    if not (math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise ValueError(f"tokens_per_s must be positive, got {tokens_per_s!r}")
    return gpu_hour_price * gpus / 3600 / tokens_per_s * 1e6


# --- one deployment ---------------------------------------------------------------------


def serve(cfg: Any, gpu: Any = "H100", *, tp: int = 1, prompt_len: int, output_len: int,
          batch: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
          block_size: int = 16, draft: Any = None, draft_len: int | None = None,
          acceptance: float | None = None, gpu_hour_price: float | None = None,
          workspace_bytes: float | None = None) -> dict[str, Any]:
    """One deployment: ``batch`` requests of ``prompt_len`` prompt tokens and ``output_len``
    output tokens on a TP group of ``tp`` GPUs (``gpu``), served together (a static batch:
    the prompts are prefilled in one step, then decoded together).

    Keys: ``ttft_s`` (the batch's prefill), ``tpot_s`` (:func:`tpot`), ``output_tokens_per_s``
    (the batch: ``batch / tpot_s``), ``output_tokens_per_s_per_gpu``,
    ``request_latency_s`` (TTFT + (O − 1)·TPOT), ``max_concurrent_sequences`` (paged KV with
    ``block_size``, sequences of ``prompt_len + output_len`` tokens),
    ``max_concurrent_sequences_contiguous`` (each reserving the model's context),
    ``decode_last`` (the last decode step: ``tmath ledger --seq-len prompt_len+output_len−1``
    prints the same), ``feasibility`` (weights + the batch's KV + workspace against HBM;
    with a draft, its weights and its KV too).
    With a ``draft`` model (a :class:`tmath.ModelConfig`), ``draft_len`` and ``acceptance``:
    ``speculative`` and ``tokens_per_target_step``, and ``tpot_s`` becomes the speculative
    one.  With ``gpu_hour_price``: ``cost_per_million_output_tokens`` (decode GPU-seconds over
    output tokens) and ``cost_per_million_input_tokens`` (prefill GPU-seconds over prompt
    tokens).

    Settings outside :data:`LIMITS`, a ``tp`` that does not divide the heads or is larger
    than one node of ``gpu`` (:data:`tmath.hardware.NODES`; a GPU without node data serves
    with ``tp=1`` only), or ``prompt_len + output_len`` beyond the model's context raise
    :class:`tmath.errors.InputError` naming the setting.  A deployment that does not fit is
    computed but flagged (``feasibility["feasible"]`` False).
    """
    from tmath.ledger import _decode_with_comm
    from tmath.serving import WORKSPACE_BYTES_PER_GPU, dtype_bytes

    _check_cfg(cfg)
    tp = _int_setting("tp", tp)
    prompt_len = _int_setting("prompt_len", prompt_len)
    output_len = _int_setting("output_len", output_len)
    batch = _int_setting("batch", batch)
    block_size = _int_setting("block_size", block_size)
    weight_dtype = _dtype("weight_dtype", weight_dtype, WEIGHT_DTYPES)
    kv_dtype = _dtype("kv_dtype", kv_dtype, KV_DTYPES)
    hw = _hw(gpu)
    layout = _check_tp(cfg, tp)
    if tp > 1:
        from tmath.hardware import node

        try:
            size = node(hw).size
        except ValueError:
            raise _err(f"{hw.name} 没有节点与链路数据，TP={tp} 的 all-reduce 无法计时：请用 TP=1，"
                       "或换一种有节点数据的 GPU", "tp") from None
        if tp > size:
            raise _err(f"TP={tp} 超过了 {hw.name} 一个节点的 {size} 张卡：张量并行每层 2 次 all-reduce，"
                       f"只在节点内的高速链路上划算；请用不超过 {size} 的 TP", "tp")
    total_len = prompt_len + output_len
    if total_len > cfg.max_position:
        raise _err(f"prompt_len + output_len = {total_len:,} 超过了 {cfg.name} 的 "
                   f"{cfg.max_position:,} 个位置：请缩短提示或输出", "output_len")
    spec_args = (draft, draft_len, acceptance)
    if any(a is not None for a in spec_args) and not all(a is not None for a in spec_args):
        raise _err("投机解码要同时给出 draft、draft_len 与 acceptance", "draft")
    if draft is not None:
        _check_cfg(draft)
        draft_len = _int_setting("draft_len", draft_len)
        acceptance = _num_setting("acceptance", acceptance)
        if draft.vocab_size != cfg.vocab_size:
            raise _err(f"草稿模型 {draft.name} 的词表（{draft.vocab_size:,}）与目标模型 {cfg.name} 的"
                       f"（{cfg.vocab_size:,}）不同：投机解码要两者共用一个分词器", "draft")
        try:
            _check_tp(draft, tp)
        except ValueError as e:
            raise _err(f"草稿模型 {draft.name} 在同一 TP 组上运行，但 {e}", "draft") from None
        if total_len + draft_len > draft.max_position:
            raise _err(f"草稿模型 {draft.name} 只有 {draft.max_position:,} 个位置，"
                       f"不够 {total_len + draft_len:,}", "draft")
    if gpu_hour_price is not None:
        gpu_hour_price = _num_setting("gpu_hour_price", gpu_hour_price, lo_open=True)

    pre = prefill_time(cfg, hw, tp=tp, prompt_len=prompt_len, batch=batch,
                       weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    t_plain = tpot(cfg, hw, tp=tp, batch=batch, prompt_len=prompt_len, output_len=output_len,
                   weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    last_ctx = prompt_len + max(output_len - 1, 1) - 1
    last = decode_step(cfg, hw, tp=tp, batch=batch, context=last_ctx,
                       weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    # The ledger's own summary of that step (same function, its conventions: weights and KV
    # in one dtype there, so only when they agree).
    ledger_view = (_decode_with_comm(cfg, hw, tp=tp, batch=batch, seq_len=last_ctx + 1,
                                     dtype=weight_dtype) if weight_dtype == kv_dtype else None)
    # The draft shares the GPUs: its weights and its KV cache (one per sequence, as long as
    # the target's) take memory from the target's KV budget.
    cap = kv_capacity(cfg, hw, tp=tp, max_len=total_len, block_size=block_size,
                      kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                      workspace_bytes=workspace_bytes, draft=draft)
    cont = kv_capacity(cfg, hw, tp=tp, max_len=cfg.max_position, kv_dtype=kv_dtype,
                       weight_dtype=weight_dtype, mode="contiguous",
                       workspace_bytes=workspace_bytes, draft=draft)
    kv_batch = batch * cap.bytes_per_sequence_per_gpu  # whole blocks, windows honoured
    work = WORKSPACE_BYTES_PER_GPU if workspace_bytes is None else workspace_bytes
    need = cap.weight_bytes_per_gpu + kv_batch + work
    fits_weights = cap.kv_budget_bytes_per_gpu > 0
    feas = {
        "feasible": bool(need <= hw.hbm_bytes),
        "gpu": hw.name,
        "hbm_bytes_per_gpu": hw.hbm_bytes,
        "weight_bytes_per_gpu": cap.weight_bytes_per_gpu - cap.draft_weight_bytes_per_gpu,
        "draft_weight_bytes_per_gpu": cap.draft_weight_bytes_per_gpu,
        "kv_bytes_per_gpu": kv_batch,
        "workspace_bytes_per_gpu": work,
        "needed_bytes_per_gpu": need,
        "weights_fit": bool(fits_weights),
    }
    out: dict[str, Any] = {
        "model": cfg.name,
        "gpu": hw.name,
        "settings": {"tp": tp, "prompt_len": prompt_len, "output_len": output_len,
                     "batch": batch, "weight_dtype": weight_dtype, "kv_dtype": kv_dtype,
                     "block_size": block_size, "compute_dtype": pre.compute_dtype},
        "feasibility": feas,
        "ttft_s": pre.seconds,
        "prefill": pre.as_dict(),
        "tpot_s": t_plain,
        "decode_last": last.as_dict(),
        "decode_last_ledger": ledger_view,
        "ledger_seq_len": last_ctx + 1,
        "output_tokens_per_s": batch / t_plain,
        "output_tokens_per_s_per_gpu": batch / t_plain / tp,
        "input_tokens_per_s": pre.tokens_per_s,
        "request_latency_s": pre.seconds + (output_len - 1) * t_plain,
        "max_concurrent_sequences": cap.sequences,
        "max_concurrent_sequences_contiguous": cont.sequences,
        "contiguous_reserve_len": cfg.max_position,
        "kv_bytes_per_token_per_gpu": cap.kv_bytes_per_token_per_gpu,
        "draft_kv_bytes_per_token_per_gpu": cap.draft_kv_bytes_per_token_per_gpu,
        "kv_blocks_per_sequence": -(-total_len // block_size),
        "kv_budget_bytes_per_gpu": cap.kv_budget_bytes_per_gpu,
        "tp_layout": {"kv_replicas": layout.kv_replicas, "mla": bool(layout.mla)},
        "moe_experts_read_per_layer": last.experts_read,
        "weight_bytes_per_value": dtype_bytes(weight_dtype),
    }
    if draft is not None:
        ctx_mid = prompt_len + (output_len - 1) // 2
        sp = speculative_at_batch(cfg, draft, hw, tp=tp, batch=batch, context=ctx_mid,
                                  k=draft_len, alpha=acceptance, weight_dtype=weight_dtype,
                                  kv_dtype=kv_dtype)
        sp["draft"] = draft.name
        sp["context"] = ctx_mid
        sp["leviathan_speedup"] = speculative_speedup(acceptance, draft_len,
                                                      sp["draft_cost_ratio"])
        out["speculative"] = sp
        out["tokens_per_target_step"] = sp["tokens_per_target_step"]
        out["tpot_plain_s"] = t_plain
        out["tpot_s"] = t_plain / sp["speedup"]
        out["output_tokens_per_s"] = batch / out["tpot_s"]
        out["output_tokens_per_s_per_gpu"] = out["output_tokens_per_s"] / tp
        out["request_latency_s"] = pre.seconds + (output_len - 1) * out["tpot_s"]
    if gpu_hour_price is not None:
        out["gpu_hour_price"] = gpu_hour_price
        out["cost_per_million_output_tokens"] = cost_per_million(
            gpu_hour_price, tp, out["output_tokens_per_s"])
        out["cost_per_million_input_tokens"] = cost_per_million(
            gpu_hour_price, tp, pre.tokens_per_s)
    return out


# --- request traces and the event simulation --------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request of a trace: arrival time (s), prompt and output lengths (tokens)."""

    id: int
    arrival: float
    prompt_len: int
    output_len: int


def request_trace(n: int, seed: int, *, rate: float = 1.0, prompt_median: float = 512,
                  prompt_sigma: float = 1.0, output_median: float = 128,
                  output_sigma: float = 1.0, max_prompt: int = 8192,
                  max_output: int = 4096) -> list[Request]:
    """``n`` requests, reproducible from ``seed`` (Python's ``random.Random``):

    * arrivals: a Poisson process of ``rate`` requests per second (exponential gaps; the
      first request arrives after one gap);
    * prompt and output lengths: log-normal with the given medians and log-space standard
      deviations ``sigma`` (``round(median · e^{σ·z})``, ``z`` standard normal), clipped to
      ``[1, max_prompt]`` and ``[1, max_output]``.

    Log-normal lengths are the usual fit to the length histograms of chat traces (long right
    tail); the parameters are the reader's to set, not a measured trace.
    """
    import random

    from tmath._checks import int_arg

    n = int_arg("n", n, 0)
    for name, v in (("rate", rate), ("prompt_median", prompt_median),
                    ("output_median", output_median)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    for name, v in (("prompt_sigma", prompt_sigma), ("output_sigma", output_sigma)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                math.isfinite(v) and 0 <= v <= 10):
            raise ValueError(f"{name} must be a number in [0, 10], got {v!r}")
    max_prompt = int_arg("max_prompt", max_prompt)
    max_output = int_arg("max_output", max_output)
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        p = min(max(round(prompt_median * math.exp(prompt_sigma * rng.gauss(0, 1))), 1), max_prompt)
        o = min(max(round(output_median * math.exp(output_sigma * rng.gauss(0, 1))), 1), max_output)
        out.append(Request(i, t, int(p), int(o)))
    return out


@dataclass
class SimResult:
    """What :func:`simulate` measured, per request and overall."""

    policy: str
    ttft: dict[int, float]
    tpot: dict[int, float]  # (finish − first token) / (output_len − 1); absent when output_len 1
    finish: dict[int, float]
    steps: int
    makespan: float
    output_tokens: int
    log: list[tuple[float, int, int, int]] = field(default_factory=list)  # (end, p, d, kv)
    #: the longest wait between two consecutive output tokens of each request (absent when
    #: output_len 1): what a reader sees as a stall when a prefill holds up the decode steps
    max_itl: dict[int, float] = field(default_factory=dict)

    @property
    def mean_ttft(self) -> float:
        return sum(self.ttft.values()) / len(self.ttft) if self.ttft else 0.0

    @property
    def mean_tpot(self) -> float:
        return sum(self.tpot.values()) / len(self.tpot) if self.tpot else 0.0

    @property
    def throughput(self) -> float:
        """Output tokens per second over the whole run (first arrival at time 0)."""
        return self.output_tokens / self.makespan if self.makespan else 0.0

    def percentile(self, what: str, q: float) -> float:
        """The ``q``-quantile (0..1, nearest rank) of ``"ttft"``, ``"tpot"`` or ``"max_itl"``."""
        v = sorted(getattr(self, what).values())
        if not v:
            return 0.0
        return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def roofline_step_time(cfg: Any, gpu: Any = "H100", *, tp: int = 1,
                       weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> Callable[..., float]:
    """A ``step_time(prefill_tokens, decode_tokens, kv_tokens)`` for :func:`simulate` from the
    roofline: one iteration reads every weight once (all experts of a MoE model) and the KV
    of ``kv_tokens`` cached tokens, and does ``2·N_active`` FLOPs per token processed (the
    matmuls; attention's own FLOPs left out, stated), on a TP group without its all-reduces.
    """
    from tmath import count_params
    from tmath.kvcache import kv_cache_bytes_per_token
    from tmath.layout import kv_share_per_gpu
    from tmath.serving import _peak_flops, dtype_bytes

    hw = _hw(gpu)
    p = count_params(cfg)
    w = p.total * dtype_bytes(weight_dtype) / tp
    kv = kv_cache_bytes_per_token(cfg, kv_dtype) * float(kv_share_per_gpu(cfg, tp))
    peak = _peak_flops(hw, _compute_dtype(hw, weight_dtype))
    per_tok = 2 * p.active / tp

    def step_time(prefill_tokens: int, decode_tokens: int, kv_tokens: int) -> float:
        mem = (w + kv * kv_tokens) / hw.hbm_bandwidth
        return max(mem, per_tok * (prefill_tokens + decode_tokens) / peak)

    return step_time


def simulate(trace: Sequence[Request], policy: str = "continuous", *, chunk: int | None = None,
             max_batch: int = 8, step_time: Callable[[int, int, int], float]) -> SimResult:
    """A discrete-event simulation of one server, iteration by iteration.

    ``step_time(p, d, kv)`` is the seconds of one iteration that prefills ``p`` prompt tokens,
    decodes ``d`` tokens (one per running sequence) and reads ``kv`` cached tokens
    (:func:`roofline_step_time` gives one from the roofline).  The clock starts at 0.

    * ``"static"``: when the server is idle it takes up to ``max_batch`` requests that have
      arrived (first come, first served); if none has, it waits for the next arrival.  One
      iteration prefills all their prompts and gives each its first token; then the batch
      decodes until its longest output is done, every iteration costing ``d = batch size``
      (finished sequences stay in the batch as padding); only then does the next batch start.
    * ``"continuous"`` (iteration-level scheduling, Orca; vLLM): before every iteration,
      arrived requests join while fewer than ``max_batch`` are running.  ``chunk`` None: a
      joining request's whole prompt is prefilled in the iteration it joins, beside one decode
      token of every running sequence (its first token at the iteration's end).  ``chunk=C``
      (chunked prefill, Sarathi-Serve): each iteration processes at most ``C`` tokens: first
      one decode token per running sequence, then prompt tokens of the joined requests in
      arrival order, so a long prompt is spread over several iterations; its first token comes
      at the end of the iteration that finishes its prompt.
    A request's TTFT = first token − arrival; its TPOT = (finish − first token)/(O − 1); its
    ``max_itl`` the longest gap between two of its consecutive tokens.  A request's KV
    (``kv``) counts its prompt tokens processed so far plus tokens generated.
    """
    from tmath._checks import int_arg

    if policy not in ("static", "continuous"):
        raise ValueError(f"policy must be 'static' or 'continuous', got {policy!r}")
    max_batch = int_arg("max_batch", max_batch)
    if chunk is not None:
        chunk = int_arg("chunk", chunk)
        if policy == "static":
            raise ValueError("chunk applies to the continuous policy only")
        if chunk <= max_batch:
            raise ValueError(f"chunk ({chunk}) must exceed max_batch ({max_batch}): the decode "
                             "tokens of a full batch come first")
    reqs = sorted(trace, key=lambda r: (r.arrival, r.id))
    for r in reqs:  # a request with nothing to do would never leave the batch
        int_arg("prompt_len", r.prompt_len)
        int_arg("output_len", r.output_len)
        if not math.isfinite(r.arrival):
            raise ValueError(f"request {r.id}: arrival must be a finite time, got {r.arrival!r}")
    if len({r.id for r in reqs}) != len(reqs):
        raise ValueError("every request of the trace needs its own id")
    res = SimResult(policy, {}, {}, {}, 0, 0.0, sum(r.output_len for r in reqs))
    first: dict[int, float] = {}
    last: dict[int, float] = {}  # when each request's latest token came
    t, i = 0.0, 0  # clock, next request not yet admitted

    def token(r: Request) -> None:
        if r.id in last:
            res.max_itl[r.id] = max(res.max_itl.get(r.id, 0.0), t - last[r.id])
        else:
            first[r.id] = t
        last[r.id] = t

    def step(p: int, d: int, kv: int) -> None:
        nonlocal t
        t += step_time(p, d, kv)
        res.steps += 1
        res.log.append((t, p, d, kv))

    def done(r: Request) -> None:
        res.finish[r.id] = t
        res.ttft[r.id] = first[r.id] - r.arrival
        if r.output_len > 1:
            res.tpot[r.id] = (t - first[r.id]) / (r.output_len - 1)

    if policy == "static":
        while i < len(reqs):
            if reqs[i].arrival > t:
                t = reqs[i].arrival
            batch = []
            while i < len(reqs) and reqs[i].arrival <= t and len(batch) < max_batch:
                batch.append(reqs[i])
                i += 1
            step(sum(r.prompt_len for r in batch), 0, 0)
            for r in batch:
                token(r)
            gen = 1
            for r in batch:
                if r.output_len == 1:
                    done(r)
            while gen < max(r.output_len for r in batch):
                kv = sum(r.prompt_len + min(gen, r.output_len) for r in batch)
                step(0, len(batch), kv)
                gen += 1
                for r in batch:
                    if r.output_len >= gen:
                        token(r)
                    if r.output_len == gen:
                        done(r)
        res.makespan = t
        return res

    # continuous
    running: list[list[Any]] = []  # [request, prompt tokens done, tokens generated]
    while i < len(reqs) or running:
        if not running and i < len(reqs) and reqs[i].arrival > t:
            t = reqs[i].arrival
        while i < len(reqs) and reqs[i].arrival <= t and len(running) < max_batch:
            running.append([reqs[i], 0, 0])
            i += 1
        decoding = [s for s in running if s[2] >= 1]
        d = len(decoding)
        kv = sum(s[1] + s[2] for s in decoding)
        budget = None if chunk is None else chunk - d
        p, took = 0, []
        for s in running:
            if s[2] >= 1:
                continue
            need = s[0].prompt_len - s[1]
            n = need if budget is None else min(need, budget - p)
            if n <= 0:
                break
            took.append((s, n))
            p += n
        kv += sum(s[1] for s, _ in took)  # a chunk attends to the prompt chunks before it
        step(p, d, kv)
        for s in decoding:
            s[2] += 1
            token(s[0])
        for s, n in took:
            s[1] += n
            if s[1] == s[0].prompt_len:
                s[2] = 1
                token(s[0])
        for s in list(running):
            if s[2] >= 1 and s[2] == s[0].output_len:
                done(s[0])
                running.remove(s)
    res.makespan = t
    return res


# --- disaggregated prefill and decode ---------------------------------------------------


def disaggregated(cfg: Any, gpu: Any = "H100", *, prompt_len: int, output_len: int,
                  prefill_tp: int = 1, decode_tp: int = 1, decode_batch: int,
                  prefill_batch: int = 1, weight_dtype: str = "bf16",
                  kv_dtype: str = "bf16", tpot_slo: float | None = None) -> dict[str, Any]:
    """Prefill and decode on separate pools (DistServe, Splitwise) against one pool doing both.

    Disaggregated: a prefill instance (``prefill_tp`` GPUs) prefills ``prefill_batch`` prompts
    per step; a decode instance (``decode_tp`` GPUs) decodes ``decode_batch`` sequences at a
    time at the TPOT of :func:`tpot`.  Each pool's request rate: prefill
    ``prefill_batch / TTFT``; decode ``decode_batch / ((O − 1)·TPOT)``.  The pools are sized
    in the ratio of those rates, so neither idles: ``prefill_instances_per_decode_instance``;
    output tokens per second per GPU follows.  The KV cache moves from one pool to the other
    (``kv_transfer_bytes`` per request; its time is not counted, as if overlapped).

    Colocated: the same ``decode_tp`` GPUs run both; every request's prefill stalls the
    running decode batch for its TTFT (no chunking), so over one request's life of ``O − 1``
    decode steps the batch sees ``decode_batch`` prefills: the effective TPOT is
    ``TPOT + decode_batch · TTFT₁ / (O − 1)`` (TTFT₁: one prompt's prefill on those GPUs).
    ``tpot_slo`` given: the largest decode batch for each layout that keeps its TPOT under it
    (and fits the decode instance's paged KV), and the output tokens per second per GPU there
    (the goodput, DistServe's measure): with the prefills taken out of the decode steps, the
    decode pool can run a larger batch under the same SLO.  Without an SLO the two layouts
    give the same tokens per GPU in this additive model; the difference is in the latency.
    ``kv_transfer_seconds``: the prompt's KV over the decode instance's network ports (the
    node's inter-node link), if it is not overlapped with the next steps.
    """
    from tmath.hardware import link as get_link
    from tmath.hardware import node
    from tmath.kvcache import kv_cache_bytes_sequence

    p_step = prefill_time(cfg, gpu, tp=prefill_tp, prompt_len=prompt_len, batch=prefill_batch,
                          weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    kw = dict(prompt_len=prompt_len, output_len=output_len, weight_dtype=weight_dtype,
              kv_dtype=kv_dtype)
    steps = max(output_len - 1, 1)
    prefill_rate = prefill_batch / p_step.seconds  # requests/s per prefill instance
    one = prefill_time(cfg, gpu, tp=decode_tp, prompt_len=prompt_len, batch=1,
                       weight_dtype=weight_dtype, kv_dtype=kv_dtype)

    def disagg_tpot(b: int) -> float:
        return tpot(cfg, gpu, tp=decode_tp, batch=b, **kw)

    def coloc_tpot(b: int) -> float:  # every request's prefill stalls the batch once
        return disagg_tpot(b) + b * one.seconds / steps

    def per_gpu_disagg(b: int) -> tuple[float, float, float]:
        rate = b / (steps * disagg_tpot(b))  # requests/s per decode instance
        ratio = rate / prefill_rate  # prefill instances per decode instance
        gpus = ratio * prefill_tp + decode_tp
        return rate * output_len / gpus, rate, ratio

    def per_gpu_coloc(b: int) -> float:
        return b / (steps * coloc_tpot(b)) * output_len / decode_tp

    out_tok, decode_rate, ratio = per_gpu_disagg(decode_batch)
    kv_bytes = kv_cache_bytes_sequence(cfg, prompt_len, dtype=kv_dtype)
    hw = _hw(gpu)
    try:
        inter = get_link(node(hw).inter)
        kv_s: float | None = kv_bytes / (decode_tp * inter.bandwidth)
    except ValueError:
        kv_s = None
    cap = kv_capacity(cfg, hw, tp=decode_tp, max_len=prompt_len + output_len,
                      kv_dtype=kv_dtype, weight_dtype=weight_dtype).sequences
    res: dict[str, Any] = {
        "ttft_s": p_step.seconds, "tpot_s": disagg_tpot(decode_batch),
        "prefill_requests_per_s_per_instance": prefill_rate,
        "decode_requests_per_s_per_instance": decode_rate,
        "prefill_instances_per_decode_instance": ratio,
        "output_tokens_per_s_per_gpu": out_tok,
        "input_tokens_per_s_per_gpu": out_tok / output_len * prompt_len,
        "kv_transfer_bytes": kv_bytes,
        "kv_transfer_seconds": kv_s,  # over the decode GPUs' network ports, if not overlapped
        "decode_kv_capacity_sequences": cap,
        "colocated_tpot_s": coloc_tpot(decode_batch),
        "colocated_ttft_s": one.seconds,
        "colocated_output_tokens_per_s_per_gpu": per_gpu_coloc(decode_batch),
    }
    if tpot_slo is not None:
        def largest(fn: Callable[[int], float]) -> int:
            """The largest batch up to the KV capacity whose TPOT meets the SLO (0: none)."""
            top = min(cap, int(LIMITS["batch"][1]))
            if top < 1 or fn(1) > tpot_slo:
                return 0
            lo = 1
            while lo * 2 <= top and fn(lo * 2) <= tpot_slo:
                lo *= 2
            hi = min(lo * 2, top + 1)  # fails, or past the capacity
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fn(mid) <= tpot_slo:
                    lo = mid
                else:
                    hi = mid
            return lo

        bd, bc = largest(disagg_tpot), largest(coloc_tpot)
        res["tpot_slo_s"] = tpot_slo
        res["decode_batch_at_slo"] = bd
        res["colocated_batch_at_slo"] = bc
        res["output_tokens_per_s_per_gpu_at_slo"] = per_gpu_disagg(bd)[0] if bd else 0.0
        res["colocated_output_tokens_per_s_per_gpu_at_slo"] = per_gpu_coloc(bc) if bc else 0.0
    return res


# --- MoE serving with expert parallelism: DeepSeek-V3's published deployment ------------------

#: DeepSeek-V3's published serving: the technical report's minimum deployment units (§3.4,
#: source key ``deepseek2024v3report``) and the online system's units and statistics
#: (DeepSeek's "Day 6" inference-system overview, ``deepseek2025inferencesystem``), each with
#: the words it is read from.  Recomputed: 4 × 8 = 32 and 40 × 8 = 320 GPUs; 32 × 8 = 256
#: routed experts + 32 redundant = 288 = 32 × 9; 256 + 64 = 320 (one expert a GPU);
#: 18 × 8 = 144 and 144 × 2 = 288 = 256 + 32; 226.75 nodes × 8 GPUs × $2 × 24 h = $87,072;
#: 342 / 608 = 56.25 % ("56.3%"); at R1's prices 342B × $0.14 + 266B × $0.55 + 168B × $2.19 =
#: $562,100 a day against the published $562,027 (the token counts are rounded to billions);
#: (562,027 − 87,072) / 87,072 = 545.47 % ("545%").
DEEPSEEK_V3_SERVING: dict[str, dict[str, Any]] = {
    "report_prefill": {
        "nodes": 4, "gpus": 32, "attention_tp": 4, "attention_dp": 8, "moe_ep": 32,
        "routed_experts_per_gpu": 9, "gpu": "H800", "source": "deepseek2024v3report",
        "where": "§3.4.1 Prefilling",
        "quote": "The minimum deployment unit of the prefilling stage consists of 4 nodes with 32 "
                 "GPUs. The attention part employs 4-way Tensor Parallelism (TP4) with Sequence "
                 "Parallelism (SP), combined with 8-way Data Parallelism (DP8). ... For the MoE "
                 "part, we use 32-way Expert Parallelism (EP32) ... For each GPU, besides the "
                 "original 8 experts it hosts, it will also host one additional redundant expert.",
    },
    "report_decode": {
        "nodes": 40, "gpus": 320, "attention_tp": 4, "attention_dp": 80, "moe_ep": 320,
        "routed_experts_per_gpu": 1, "gpu": "H800", "source": "deepseek2024v3report",
        "where": "§3.4.2 Decoding",
        "quote": "The minimum deployment unit of the decoding stage consists of 40 nodes with 320 "
                 "GPUs. The attention part employs TP4 with SP, combined with DP80, while the MoE "
                 "part uses EP320. For the MoE part, each GPU hosts only one expert, and 64 GPUs "
                 "are responsible for hosting redundant experts and shared experts. ... the batch "
                 "size per expert is relatively small (usually within 256 tokens), and the "
                 "bottleneck is memory access rather than computation.",
    },
    "online_prefill": {
        "nodes": 4, "gpus": 32, "moe_ep": 32, "attention_dp": 32, "routed_experts_per_gpu": 9,
        "shared_experts_per_gpu": 1, "gpu": "H800", "source": "deepseek2025inferencesystem",
        "where": "Large-scale Cross-node Expert Parallelism",
        "quote": "Prefilling Phase [Routed Expert EP32, MLA/Shared Expert DP32]: Each deployment "
                 "unit spans 4 nodes with 32 redundant routed experts, where each GPU handles 9 "
                 "routed experts and 1 shared expert.",
    },
    "online_decode": {
        "nodes": 18, "gpus": 144, "moe_ep": 144, "attention_dp": 144, "routed_experts_per_gpu": 2,
        "shared_experts_per_gpu": 1, "gpu": "H800", "source": "deepseek2025inferencesystem",
        "where": "Large-scale Cross-node Expert Parallelism",
        "quote": "Decoding Phase [Routed Expert EP144, MLA/Shared Expert DP144]: Each deployment "
                 "unit spans 18 nodes with 32 redundant routed experts, where each GPU manages 2 "
                 "routed experts and 1 shared expert.",
    },
    "online_statistics": {
        "gpus_per_node": 8, "prefill_input_tokens_per_s_per_node": 73.7e3,
        "decode_output_tokens_per_s_per_node": 14.8e3, "output_tokens_per_s_per_user": (20, 22),
        "mean_kv_len_per_output_token": 4989, "peak_nodes": 278, "mean_nodes": 226.75,
        "gpu_hour_price_usd": 2.0, "daily_cost_usd": 87_072, "input_tokens_per_day": 608e9,
        "cache_hit_input_tokens_per_day": 342e9, "output_tokens_per_day": 168e9,
        "r1_price_usd_per_million": {"input_cache_hit": 0.14, "input_cache_miss": 0.55,
                                     "output": 2.19},
        "theoretical_daily_revenue_usd": 562_027, "cost_profit_margin_percent": 545,
        "precision": "as in training (fp8 weights and matmuls, per the report)",
        "source": "deepseek2025inferencesystem", "where": "Statistics of DeepSeek's Online Service",
        "quote": "Each H800 node delivers an average throughput of ~73.7k tokens/s input "
                 "(including cache hits) during prefilling or ~14.8k tokens/s output during "
                 "decoding. ... The average output speed was 20–22 tokens per second, and the "
                 "average kvcache length per output token was 4,989 tokens.",
    },
}


def ep_decode_step(cfg: Any, gpu: Any = "H800", *, ep: int, attention_tp: int = 1,
                   batch_per_gpu: int, context: int, routed_experts_per_gpu: int | None = None,
                   shared_experts_per_gpu: int | None = None, weight_dtype: str = "fp8",
                   kv_dtype: str = "bf16", dispatch_bytes: float = 1, combine_bytes: float = 2,
                   link: Any = None, overlap: bool = True) -> dict[str, Any]:
    """One decode step of a MoE model served with expert parallelism over ``ep`` GPUs, per GPU.

    Layout (DeepSeek-V3's): the routed experts are spread over the ``ep`` GPUs,
    ``routed_experts_per_gpu`` per MoE layer on each (default ⌈E/ep⌉; redundant copies fill
    the rest); ``shared_experts_per_gpu`` shared experts each (default: all of them, copied on
    every GPU as DeepSeek's online system does; the report's EP320 unit puts them on their own
    GPUs: pass 0 there).  Attention, the dense layers and the LM head run data-parallel in
    groups of ``attention_tp`` GPUs (TP inside a group), each GPU serving ``batch_per_gpu``
    sequences, so a step routes ``ep · batch_per_gpu`` tokens.

    Per GPU: reads its resident experts whole (each gets ``ep·batch_per_gpu·k/E`` tokens on
    average: all read when that is ≥ 1) plus the non-expert weights over ``attention_tp``, plus
    the KV cache of its attention group's ``attention_tp·batch_per_gpu`` sequences (MLA's
    latent is read whole by every GPU of the group; GQA heads split); FLOPs: ``batch_per_gpu``
    tokens' forward (balanced routing: the total work spread evenly).  All-to-all per MoE layer:
    every token goes to its ``k`` experts (dispatch, ``dispatch_bytes`` a value: fp8) and comes
    back (combine, bf16), ``batch_per_gpu·k·D`` values each way through the GPU's own network
    port (``link``: the node's inter-node link, IB for an H800).  ``fits``: the resident
    weights, that KV cache and the 5 GB workspace within the GPU's memory.  ``overlap`` (DeepSeek's two
    micro-batches): the step is the slower of the roofline and the all-to-all; otherwise
    their sum.  A model of a perfectly balanced system; routing skew, kernel efficiency and
    MTP's extra tokens are the named differences from a measured deployment.
    """
    from tmath import count_params
    from tmath._checks import int_arg
    from tmath.flops import forward_flops
    from tmath.hardware import link as get_link
    from tmath.hardware import node
    from tmath.kvcache import kv_cache_bytes_sequence
    from tmath.layout import kv_share_per_gpu
    from tmath.serving import WORKSPACE_BYTES_PER_GPU, _peak_flops, dtype_bytes

    if not cfg.is_moe:
        raise _err(f"{cfg.name} 不是 MoE 模型：专家并行无从谈起", "cfg")
    hw = _hw(gpu)
    ep = int_arg("ep", ep)
    attention_tp = int_arg("attention_tp", attention_tp)
    b = int_arg("batch_per_gpu", batch_per_gpu)
    context = int_arg("context", context, 0)
    _check_tp(cfg, attention_tp)
    e, k = cfg.n_routed_experts, cfg.experts_per_token
    per = -(-e // ep) if routed_experts_per_gpu is None else int_arg(
        "routed_experts_per_gpu", routed_experts_per_gpu)
    shared = cfg.n_shared_experts if shared_experts_per_gpu is None else int_arg(
        "shared_experts_per_gpu", shared_experts_per_gpu, 0)
    p = count_params(cfg)
    moe_layers = cfg.num_layers - cfg.first_k_dense
    one_expert = p.breakdown["routed_experts"] / (e * moe_layers)  # one expert of one layer
    wb = dtype_bytes(weight_dtype)
    non_expert = (p.total - p.breakdown["routed_experts"] - p.breakdown.get("shared_experts", 0)
                  - p.breakdown["embedding"] - p.breakdown["positions"])
    w_gpu = (non_expert / attention_tp + (per + shared) * one_expert * moe_layers) * wb
    tokens = ep * b
    per_expert_tokens = tokens * k / e
    kv_gpu = (kv_cache_bytes_sequence(cfg, context, dtype=kv_dtype) * b * attention_tp
              * float(kv_share_per_gpu(cfg, attention_tp))) if context else 0.0
    f = forward_flops(cfg, context + 1, causal=True).total - (
        forward_flops(cfg, context, causal=True).total if context else 0)
    flops = b * f
    peak = _peak_flops(hw, _compute_dtype(hw, weight_dtype))
    mem_s, comp_s = (w_gpu + kv_gpu) / hw.hbm_bandwidth, flops / peak
    lk = get_link(node(hw).inter if link is None else link)
    a2a_bytes = b * k * cfg.hidden_size * (dispatch_bytes + combine_bytes) * moe_layers
    a2a_s = a2a_bytes / lk.bandwidth
    roof = max(mem_s, comp_s)
    step = max(roof, a2a_s) if overlap else roof + a2a_s
    work = WORKSPACE_BYTES_PER_GPU
    need = w_gpu + kv_gpu + work
    return {
        "hbm_bytes_per_gpu": hw.hbm_bytes, "workspace_bytes_per_gpu": work,
        "needed_bytes_per_gpu": need, "fits": bool(need <= hw.hbm_bytes),
        "ep": ep, "attention_tp": attention_tp, "batch_per_gpu": b, "context": context,
        "tokens_per_step": tokens, "tokens_per_expert": per_expert_tokens,
        "routed_experts_per_gpu": per, "shared_experts_per_gpu": shared,
        "weight_bytes_per_gpu": w_gpu, "kv_bytes_per_gpu": kv_gpu, "flops_per_gpu": flops,
        "memory_seconds": mem_s, "compute_seconds": comp_s, "all_to_all_bytes_per_gpu": a2a_bytes,
        "all_to_all_seconds": a2a_s, "link": lk.name, "overlap": overlap, "step_seconds": step,
        "bound": ("全对全通信" if a2a_s > roof and overlap else
                  "显存带宽" if mem_s >= comp_s else "算力"),
        "tokens_per_s_per_user": 1 / step,
        "output_tokens_per_s_per_gpu": b / step,
        "output_tokens_per_s_per_node": b / step * node(hw).size,
    }

"""The layout of a model on a mesh of GPUs: what each GPU holds, and what each step sends.

One module owns the split.  Memory (:mod:`tmath.memory`), the KV cache
(:mod:`tmath.kvcache`), serving (:mod:`tmath.serving`), the ledger and ``tmath plan``
(:mod:`tmath.plan`) read it from here; none of them computes a split of its own.  This
module imports none of them (only the configuration, the parameter counts and
:mod:`tmath.comm`).

Two entry points:

* :func:`tp_layout` — how tensor parallelism over ``tp`` GPUs splits the attention heads
  (serving and training).
* :func:`build_layout` — a training layout over the five axes (data, tensor, pipeline, expert
  and context parallelism, ``dp tp pp ep cp``) with a ZeRO stage, a micro-batch, a global
  batch, a sequence length, recomputation and dtypes.  It returns a :class:`Layout`: which
  heads, KV heads, layers and experts each GPU holds, the parameters, gradients and
  optimizer states per GPU, what the activations depend on, and the list of collectives one
  optimizer step runs on each axis (:class:`Collective`: kind, group size, bytes of the
  array, count per step, phase, link).

Conventions (they are the book's, Part V; ``tmath plan --help`` repeats them):

* **Mesh.** ``world = dp·tp·pp·cp`` GPUs.  Ranks are laid out Megatron-style, tp fastest,
  then cp, then dp (with the ep groups innermost inside dp), then pp (``order="llama3"``: the
  Llama 3 paper's tp, cp, pp, dp, see :data:`ORDERS`): a group fits inside a
  node of ``gpus_per_node`` GPUs if its members (the group holding rank 0) are less than
  ``gpus_per_node`` ranks apart; it then rides ``intra_link``, else ``inter_link``.
* **Expert parallelism is carved out of data parallelism** (Megatron-LM, DeepSpeed-MoE):
  ``ep`` must divide ``dp``; the GPUs of one EP group hold different experts and process
  different data, so the experts' gradients are reduced over ``dp·cp/ep`` GPUs while every
  other gradient is reduced over ``dp·cp``.  Routed experts are split over ``ep`` (E/ep each)
  and each expert's matrices over ``tp``.
* **The GPU described** is one GPU of pipeline stage ``stage``; by default a *middle* stage
  (stage 1 when pp ≥ 3): it holds no embedding and no LM head and sends to both neighbours.
  With pp ≤ 2 there is no middle stage and the default is stage 0.  Stage 0 holds the token
  embedding (split over tp by vocabulary), the last stage the final norm and the LM head (a
  copy of a tied embedding when pp > 1).  :meth:`Layout.at_stage` gives any other stage.
* **Pipeline schedule: 1F1B** with ``n_mb = global_batch/(dp·micro_batch)`` micro-batches per
  step; bubble ``(pp−1)/(n_mb+pp−1)``; stage s keeps the activations of ``min(pp−s, n_mb)``
  micro-batches.  Pipeline sends are split over the TP group (Megatron's scatter/gather, or
  sequence parallelism): ``b·(T/cp)·D/tp`` elements per micro-batch each way; without
  sequence parallelism the receiver all-gathers them over tp.
* **Bytes sent per GPU per optimizer step, ring algorithms** (:mod:`tmath.comm`), bf16
  activations and gradients by default (``act_bytes = grad_bytes = 2``).
* **Transformer layers only**: the collectives of the embedding and the LM head (a
  vocabulary-parallel embedding's all-reduce, the cross-entropy's reductions, a tied
  embedding's gradient exchange between first and last stage) are left out.  The gradient
  reduction over dp covers every parameter the GPU holds, the embedding included where it
  holds it.
* **Tensor parallelism (Megatron).**  Per layer and micro-batch: without sequence
  parallelism 2 all-reduces of ``b·(T/cp)·D`` forward and 2 backward; with it, 2 all-gathers
  and 2 reduce-scatters of the same array each way (the sum is the same bytes), plus, by
  default (``sp_regather``), 2 more all-gathers in the backward: Megatron's column-parallel
  linear saves only its sequence shard of the input (Korthikanti et al. 2022, "we store
  only the Y_i^s part ... extra all-gather in the backward pass"; Megatron-LM
  ``LinearWithGradAccumulationAndAsyncCommunication.backward``) and gathers it again for
  the weight gradient.  That is 6 all-gathers and 4 reduce-scatters, 5/4 the bytes of
  plain TP, and it is what :func:`tmath.memory.activation_bytes` assumes (the inputs of the
  Q/K/V projection and of the MLP kept split by n_TP).  ``sp_regather=False`` counts a
  stack that keeps the gathered input instead (PyTorch DTensor's ``SequenceParallel``):
  4 + 4, but then the activation memory the library computes is too small.  With full
  recomputation the re-gather stays: the recomputed forward all-gathers the input again
  (phase ``"recompute"``) and its linear layers again keep only the shard, so the backward
  re-gathers it once more (8 all-gathers and 6 reduce-scatters per layer).  The routed
  experts' tokens (ep > 1) are gathered by the token dispatcher and kept whole: no
  re-gather.  With
  sequence parallelism the parameters every TP rank holds whole (norms, biases of row-parallel
  layers, the router, MLA's down-projections) see different tokens on each rank, so their
  gradients are all-reduced over tp once per step.  KV heads replicated over ``r`` GPUs
  (K < tp) have their projection gradients all-reduced over those ``r`` once per step.
* **Expert parallelism**: uniform routing, each token sent to its k experts (k copies):
  per MoE layer and micro-batch a dispatch and a combine all-to-all of ``k·t·D`` forward and
  the same two backward, ``t = b·(T/cp)/tp`` tokens per GPU (sequence parallelism is required
  with ep > 1 and tp > 1, as in Megatron-LM, and the received tokens are all-gathered over
  tp before the TP-split experts and reduce-scattered after).  The small all-to-all that
  exchanges the token counts first is left out.
* **Context parallelism (ring attention)**: per layer and micro-batch each GPU passes its
  chunk of K and V, ``2·b·(T/cp)·K_gpu·H`` elements, cp−1 times round the ring forward.  The
  backward (ring-flash-attention's, zhuzilin/ring-flash-attention) passes K, V round again,
  cp−1 hops, and with them the dK, dV of the chunk each GPU holds, accumulated on the way in
  ``cp_grad_bytes`` (fp32: 4) and passed cp hops, one more than K, V: the last hop brings
  them back to their owner.  Sliding windows are ignored.
* **ZeRO** (group ``dp·cp``; experts ``dp·cp/ep``): stage 0 all-reduces the gradients once
  per step; stage 1 reduce-scatters them and all-gathers the updated weights once per step
  (the bytes of one all-reduce); stage 2 keeps only its gradient shard, so it
  reduce-scatters after every micro-batch's backward (n_mb per step) and all-gathers the
  weights once; stage 3 all-gathers the weights before each micro-batch's forward and again
  before its backward and reduce-scatters the gradients, n_mb times each (1.5× an all-reduce
  when n_mb = 1).  Shards are padded to whole elements: ``⌈P/n⌉`` parameters per GPU.
* **Recomputation**: ``"full"`` re-runs each layer's forward in the backward pass, so its
  TP, CP and EP collectives run once more (phase ``"recompute"``); ``"selective"``
  recomputes the attention core only, which sends nothing new.

Impossible layouts raise :class:`LayoutError` (a ``ValueError`` with ``.field``), in
Chinese, naming the field and the values that would work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from tmath import comm
from tmath.config import ModelConfig

__all__ = [
    "LayoutError",
    "TPLayout",
    "tp_layout",
    "kv_heads_per_gpu",
    "AXES",
    "AXIS_ZH",
    "PHASES",
    "ZERO_STAGES",
    "RECOMPUTES",
    "ORDERS",
    "Collective",
    "Layout",
    "build_layout",
    "kv_share_per_gpu",
    "parse_stage_layers",
]


class LayoutError(ValueError):
    """A layout that cannot exist.  ``field`` names the argument (``"tp"``, ``"pp"``, ...)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def _index(v: Any) -> int:
    """``v`` as an int if it is an integer (NumPy integers too), else ``TypeError``."""
    import operator

    if isinstance(v, bool):
        raise TypeError
    return operator.index(v)


def _pos_int(name: str, v: Any, minimum: int = 1) -> int:
    try:
        v = _index(v)
    except TypeError:
        raise LayoutError(f"{name} 必须是整数，收到 {v!r}", name) from None
    if v < minimum:
        what = "正整数" if minimum == 1 else f"不小于 {minimum} 的整数"
        raise LayoutError(f"{name} 必须是{what}，收到 {v}", name)
    return v


def _bytes_arg(name: str, v: Any) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)) or not v > 0:
        raise LayoutError(f"{name} 必须是正的字节数（bf16 为 2，fp32 为 4），收到 {v!r}", name)
    return Fraction(v)


# --- tensor parallelism over the heads ---------------------------------------------------


@dataclass(frozen=True)
class TPLayout:
    """How tensor parallelism over ``tp`` GPUs splits a model's attention heads.

    Query heads are split evenly: ``heads_per_gpu = N / tp``.  KV heads are split when
    ``K >= tp`` (``K / tp`` per GPU, ``kv_replicas = 1``); when ``K < tp`` each GPU holds one
    whole KV head and every KV head is replicated on ``tp / K`` GPUs (``kv_replicas > 1``).
    MLA's latent cache is not split by heads: every GPU holds all of it (``mla=True``).
    """

    tp: int
    num_heads: int
    num_kv_heads: int
    heads_per_gpu: int
    kv_heads_per_gpu: int
    kv_replicas: int
    mla: bool

    @property
    def kv_replicated(self) -> bool:
        """Whether some KV data is held by more than one GPU (K < tp, or MLA with tp > 1)."""
        return self.kv_replicas > 1

    def heads_of(self, tp_rank: int) -> range:
        """Query heads held by TP rank ``tp_rank`` (0-based head indices)."""
        r = _rank("tp_rank", tp_rank, self.tp)
        return range(r * self.heads_per_gpu, (r + 1) * self.heads_per_gpu)

    def kv_heads_of(self, tp_rank: int) -> range:
        """KV heads held by TP rank ``tp_rank`` (all of MLA's latent: ``range(0)``)."""
        r = _rank("tp_rank", tp_rank, self.tp)
        if self.mla:
            return range(0)
        if self.kv_replicas > 1:
            h = r // self.kv_replicas
            return range(h, h + 1)
        return range(r * self.kv_heads_per_gpu, (r + 1) * self.kv_heads_per_gpu)


def _rank(name: str, r: Any, n: int) -> int:
    r = _pos_int(name, r, 0)
    if r >= n:
        raise LayoutError(f"{name}={r} 超出范围：只有 {n} 个（0 到 {n - 1}）", name)
    return r


def tp_layout(cfg: Any, tp: int) -> TPLayout:
    """Check that ``tp`` can split ``cfg``'s heads and say how (see :class:`TPLayout`).

    Megatron-LM and vLLM give every GPU the same number of query heads, so ``tp`` must
    divide ``num_heads``; KV heads must either be split evenly (``K % tp == 0``) or
    replicated evenly (``tp % K == 0``).  Anything else raises :class:`LayoutError`
    (a ``ValueError``) naming both numbers and the degrees that would work.
    """
    try:
        tp = _index(tp)
    except TypeError:
        # a TypeError, as before the move: a float tp is a programming error
        raise TypeError(f"tp 必须是整数，收到 {tp!r}") from None
    if tp < 1:
        raise LayoutError(f"tp 必须是正整数，收到 {tp}", "tp")
    n, k = cfg.num_heads, cfg.num_kv_heads
    if n % tp:
        raise LayoutError(
            f"tp={tp} 不能整除 num_heads={n}（query 头数）：每张卡必须分到同样多的头；"
            f"tp 可取 {_divisors(n)}", "tp")
    if cfg.is_mla:
        return TPLayout(tp, n, k, n // tp, n // tp, tp, True)
    if k >= tp:
        if k % tp:
            raise LayoutError(
                f"tp={tp} 不能整除 num_kv_heads={k}：KV 头必须平均分到各卡；tp 可取 {_divisors(k)}"
                f"（或取 {k} 的倍数且整除 {n}，让每个 KV 头复制到几张卡上）", "tp")
        return TPLayout(tp, n, k, n // tp, k // tp, 1, False)
    if tp % k:
        raise LayoutError(
            f"tp={tp} 不是 num_kv_heads={k} 的倍数：KV 头比卡少时每个 KV 头要复制到同样多张卡上，"
            f"tp 必须能被 {k} 整除；tp 可取 {_divisors(k)}，或 {k} 的倍数且整除 {n}", "tp")
    return TPLayout(tp, n, k, n // tp, 1, tp // k, False)


def kv_heads_per_gpu(cfg: Any, tp: int) -> int:
    """KV heads each GPU holds under ``tp`` (:func:`tp_layout`; MLA: every head's latent)."""
    return tp_layout(cfg, tp).kv_heads_per_gpu


def kv_share_per_gpu(cfg: Any, tp: int) -> Fraction:
    """The fraction of the KV cache each of ``tp`` GPUs holds: K_gpu/K, or 1 for MLA's
    latent, which is not split by heads (:func:`tp_layout` checks ``tp``)."""
    lay = tp_layout(cfg, tp)
    return Fraction(1) if lay.mla else Fraction(lay.kv_heads_per_gpu, lay.num_kv_heads)


# --- the training layout ----------------------------------------------------------------

#: The five axes, in the order the book lists them.
AXES: tuple[str, ...] = ("dp", "tp", "pp", "ep", "cp")
#: Chinese names of the axes.
AXIS_ZH: dict[str, str] = {
    "dp": "数据并行（DP）", "tp": "张量并行（TP）", "pp": "流水线并行（PP）",
    "ep": "专家并行（EP）", "cp": "上下文并行（CP）",
}
#: When a collective runs: in a micro-batch's forward, its backward, the recomputed forward
#: (full recomputation), or once per optimizer step.
PHASES: tuple[str, ...] = ("forward", "backward", "recompute", "step")
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
RECOMPUTES: tuple[str, ...] = ("none", "selective", "full")
#: Orders of the mesh, innermost axis first (ep always sits inside dp): Megatron-LM's, the
#: book's default, and the Llama 3 paper's [TP, CP, PP, DP] (section 3.3.2, Figure 5).
ORDERS: dict[str, tuple[str, ...]] = {
    "megatron": ("tp", "cp", "dp", "pp"),
    "llama3": ("tp", "cp", "pp", "dp"),
}


@dataclass(frozen=True)
class Collective:
    """One kind of collective in one optimizer step, on one GPU.

    ``nbytes`` is V, the whole array (:mod:`tmath.comm` says which side); ``group`` the GPUs
    in the group; ``count`` how many times one step runs it; ``bytes_sent`` what this GPU
    sends each time (ring algorithm) and ``total_bytes_sent`` = count × that.
    """

    axis: str
    kind: str
    group: int
    nbytes: int | Fraction
    count: int
    phase: str
    what: str
    what_zh: str
    link: str
    #: Node-limited routing (DeepSeek-V3's all-to-all, :meth:`Layout.collectives`): the bytes
    #: this GPU sends over the network and over the node's link each time, ``(ib, nvlink)``;
    #: ``None`` for a collective the ring model of :mod:`tmath.comm` prices.
    routed: tuple[Fraction, Fraction] | None = None

    @property
    def bytes_sent(self) -> int | Fraction:
        if self.routed is not None:
            return self.routed[0] + self.routed[1]
        return comm.bytes_sent(self.kind, self.nbytes, self.group)

    @property
    def total_bytes_sent(self) -> int | Fraction:
        return self.count * self.bytes_sent

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers (bytes rounded up to whole bytes) for JSON."""
        return {
            "axis": self.axis, "kind": self.kind, "group": self.group,
            "nbytes": comm.whole_bytes(self.nbytes), "count": self.count, "phase": self.phase,
            "what": self.what, "what_zh": self.what_zh, "link": self.link,
            "bytes_sent": comm.whole_bytes(self.bytes_sent),
            "total_bytes_sent": comm.whole_bytes(self.total_bytes_sent),
            **({"network_bytes_sent": comm.whole_bytes(self.routed[0]),
                "node_bytes_sent": comm.whole_bytes(self.routed[1])} if self.routed else {}),
        }


@dataclass(frozen=True)
class _LayerParams:
    """Parameters of one layer on one GPU: ``dense`` (reduced over dp·cp) and ``expert``
    (over dp·cp/ep); ``tp_replicated`` the part of both every TP rank holds whole;
    ``kv_replicated`` the KV projections held by ``kv_replicas`` GPUs."""

    dense: int
    expert: int
    tp_replicated: int
    kv_replicated: int


def _mlp_split(cfg: ModelConfig, width: int, tp: int, bias: bool) -> tuple[int, int]:
    """(per GPU, of which replicated) of one MLP of inner ``width`` split over tp."""
    d = cfg.hidden_size
    mats = 3 if cfg.mlp == "gated" else 2
    sharded = mats * d * width // tp
    if bias:
        sharded += (mats - 1) * width // tp
        return sharded + d, d
    return sharded, 0


def _attention_split(cfg: ModelConfig, tpl: TPLayout) -> tuple[int, int, int]:
    """(per GPU, of which TP-replicated, of which KV-replicated) of one attention block."""
    d, n_loc = cfg.hidden_size, tpl.heads_per_gpu
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        b = cfg.qkv_bias
        rep = 0
        if cfg.q_lora_rank is None:
            q = d * n_loc * qk
        else:
            r = cfg.q_lora_rank
            rep += d * r + (r if b else 0)
            q = r * n_loc * qk
        rep += d * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
        rep += (cfg.kv_lora_rank + cfg.qk_rope_head_dim) if b else 0
        kv_b = cfg.kv_lora_rank * n_loc * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        o = n_loc * cfg.v_head_dim * d
        o_bias = d if cfg.out_bias else 0
        return q + kv_b + o + rep + o_bias, rep + o_bias, 0
    h, kv = cfg.head_dim, tpl.kv_heads_per_gpu
    q = d * n_loc * h + (n_loc * h if cfg.qkv_bias else 0)
    kvp = 2 * d * kv * h + (2 * kv * h if cfg.qkv_bias else 0)
    o = n_loc * h * d
    o_bias = d if cfg.out_bias else 0
    sinks = n_loc if cfg.attention_sinks else 0
    return q + kvp + o + o_bias + sinks, o_bias, kvp if tpl.kv_replicas > 1 else 0


def _layer_params(cfg: ModelConfig, tpl: TPLayout, ep: int, moe_layer: bool) -> _LayerParams:
    from tmath.params import norm_params_per_layer

    tp = tpl.tp
    attn, attn_rep, kv_rep = _attention_split(cfg, tpl)
    norms = norm_params_per_layer(cfg)
    dense = attn + norms
    rep = attn_rep + norms
    expert = 0
    if moe_layer:
        router = cfg.n_routed_experts * cfg.hidden_size + (
            cfg.n_routed_experts if cfg.router_linear_bias else 0)
        dense += router
        rep += router
        if cfg.n_shared_experts:
            sh, sh_rep = _mlp_split(cfg, cfg.n_shared_experts * cfg.moe_intermediate_size, tp,
                                    cfg.mlp_bias)
            dense += sh
            rep += sh_rep
        one, one_rep = _mlp_split(cfg, cfg.moe_intermediate_size, tp, cfg.expert_bias)
        per_gpu = cfg.n_routed_experts // ep
        expert = per_gpu * one
        rep += per_gpu * one_rep
    else:
        m, m_rep = _mlp_split(cfg, cfg.intermediate_size, tp, cfg.mlp_bias)
        dense += m
        rep += m_rep
    return _LayerParams(dense, expert, rep, kv_rep)


def _ceil_div(a: int | Fraction, n: int) -> int:
    return math.ceil(Fraction(a) / n)


@dataclass(frozen=True)
class Layout:
    """A model on a mesh: build it with :func:`layout` (which checks it can exist).

    The fields are the inputs; everything else is derived.  Sizes are elements or
    parameters unless named ``*_bytes``.
    """

    cfg: ModelConfig
    dp: int
    tp: int
    pp: int
    ep: int
    cp: int
    zero: int
    micro_batch: int
    global_batch: int
    seq_len: int
    recompute: str
    sequence_parallel: bool
    stage: int
    stage_layers: tuple[int, ...]
    act_bytes: Fraction
    param_bytes: Fraction
    grad_bytes: Fraction
    optimizer_bytes: Fraction
    gpus_per_node: int
    intra_link: str
    inter_link: str
    tp_split: TPLayout = field(repr=False)
    #: With sequence parallelism: the backward all-gathers each block's input again for the
    #: weight gradient (Megatron-LM keeps only the shard; see the module docstring).
    sp_regather: bool = True
    #: Bytes per element of the dK, dV the CP ring's backward accumulates and passes on
    #: (ring-flash-attention keeps them in fp32).
    cp_grad_bytes: Fraction = Fraction(4)
    #: The mesh order, innermost first: a value of :data:`ORDERS`.
    order: tuple[str, ...] = ORDERS["megatron"]
    #: DeepSeek-V3's expert parallelism (report §3.2.2 and §3.3.3): the dispatch (and the
    #: backward's all-to-all in the same direction) in FP8, the combine in BF16.
    ep_fp8_dispatch: bool = False
    #: Node-limited routing: each token goes to at most this many nodes (DeepSeek-V3: 4),
    #: once over the network to each, then over the node's link to its experts; ``None``:
    #: the plain all-to-all.
    node_limit: int | None = None

    # -- the mesh -----------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        """GPUs in the mesh: dp·tp·pp·cp (ep is carved out of dp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def micro_batches(self) -> int:
        """n_mb = global_batch / (dp · micro_batch): micro-batches per step on each pipeline."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def bubble_fraction(self) -> Fraction:
        """1F1B pipeline bubble (pp−1)/(n_mb+pp−1): the idle share of a step (exact)."""
        return Fraction(self.pp - 1, self.micro_batches + self.pp - 1)

    @property
    def strides(self) -> dict[str, int]:
        """Rank distance between neighbours along each axis, in :attr:`order` (by default tp
        fastest, then cp, dp, pp); ep's groups sit innermost inside dp: dp's stride."""
        out, step = {}, 1
        for axis in self.order:
            out[axis] = step
            step *= getattr(self, axis)
        out["ep"] = out["dp"]
        return out

    def coords(self, rank: int) -> dict[str, int]:
        """A GPU's position on each axis (``ep``: its index in its EP group)."""
        rest = _rank("rank", rank, self.world_size)
        out = {}
        for axis in self.order:
            rest, out[axis] = divmod(rest, getattr(self, axis))
        out["ep"] = out["dp"] % self.ep
        return out

    def _span(self, factors: list[tuple[int, int]]) -> int:
        """Largest rank offset in the group holding rank 0 (factors: (stride, size))."""
        return sum((size - 1) * stride for stride, size in factors)

    def _link(self, factors: list[tuple[int, int]]) -> str:
        return self.intra_link if self._span(factors) < self.gpus_per_node else self.inter_link

    @property
    def links(self) -> dict[str, str]:
        """The link each axis rides (:meth:`_link` on the group holding rank 0)."""
        s = self.strides
        return {
            "tp": self._link([(1, self.tp)]),
            "cp": self._link([(s["cp"], self.cp)]),
            "ep": self._link([(s["ep"], self.ep)]),
            "dp": self._link([(s["cp"], self.cp), (s["dp"], self.dp)]),
            "dp_expert": self._link([(s["cp"], self.cp),
                                     (s["dp"] * self.ep, self.dp // self.ep)]),
            "pp": self._link([(s["pp"], self.pp)]),
        }

    # -- what a GPU holds ---------------------------------------------------------------
    @property
    def heads_per_gpu(self) -> int:
        return self.tp_split.heads_per_gpu

    @property
    def kv_heads_per_gpu(self) -> int:
        return self.tp_split.kv_heads_per_gpu

    @property
    def experts_per_gpu(self) -> int:
        """Routed experts per GPU (E/ep; 0 for a dense model)."""
        return self.cfg.n_routed_experts // self.ep if self.cfg.is_moe else 0

    @property
    def tokens_per_gpu(self) -> int:
        """Tokens of one micro-batch on one GPU's CP shard: b·T/cp (all TP ranks see them)."""
        return self.micro_batch * self.seq_len // self.cp

    def layers_of(self, stage: int) -> range:
        """The layers (0-based) pipeline stage ``stage`` holds."""
        s = _rank("stage", stage, self.pp)
        start = sum(self.stage_layers[:s])
        return range(start, start + self.stage_layers[s])

    def experts_of(self, ep_rank: int) -> range:
        """Routed experts held by EP rank ``ep_rank``."""
        r = _rank("ep_rank", ep_rank, self.ep)
        e = self.experts_per_gpu
        return range(r * e, (r + 1) * e)

    def tokens_of(self, cp_rank: int) -> range:
        """Positions of each sequence that CP rank ``cp_rank`` holds (contiguous chunks; a
        load-balanced causal split reorders the chunks but not their size)."""
        r = _rank("cp_rank", cp_rank, self.cp)
        t = self.seq_len // self.cp
        return range(r * t, (r + 1) * t)

    def holdings(self, rank: int) -> dict[str, Any]:
        """What GPU ``rank`` holds: its coordinates, heads, KV heads, layers, experts, tokens."""
        c = self.coords(rank)
        return {
            "rank": rank, **{f"{a}_rank": c[a] for a in AXES},
            "heads": self.tp_split.heads_of(c["tp"]),
            "kv_heads": self.tp_split.kv_heads_of(c["tp"]),
            "layers": self.layers_of(c["pp"]),
            "experts": self.experts_of(c["ep"]) if self.cfg.is_moe else range(0),
            "tokens": self.tokens_of(c["cp"]),
        }

    @property
    def layers(self) -> range:
        """Layers of the described stage."""
        return self.layers_of(self.stage)

    @property
    def moe_layers(self) -> int:
        """MoE layers in the described stage (the first ``first_k_dense`` layers are dense)."""
        if not self.cfg.is_moe:
            return 0
        return sum(1 for i in self.layers if i >= self.cfg.first_k_dense)

    @property
    def dense_layers(self) -> int:
        return len(self.layers) - self.moe_layers

    @property
    def is_first_stage(self) -> bool:
        return self.stage == 0

    @property
    def is_last_stage(self) -> bool:
        return self.stage == self.pp - 1

    @property
    def in_flight(self) -> int:
        """Micro-batches whose activations the stage holds at once under 1F1B: min(pp−s, n_mb)."""
        return min(self.pp - self.stage, self.micro_batches)

    def _per_layer(self, moe_layer: bool) -> _LayerParams:
        return _layer_params(self.cfg, self.tp_split, self.ep, moe_layer)

    @property
    def params_per_gpu(self) -> dict[str, int]:
        """Parameters this GPU holds (before ZeRO-3 sharding), by part.

        ``layers`` (attention, norms, dense MLPs, routers, shared experts), ``experts``
        (routed experts), ``embedding`` (stage 0: ⌈V/tp⌉·D, and GPT-2's learned positions),
        ``lm_head`` (last stage: final norm and ⌈V/tp⌉·D, unless tied with pp = 1).
        """
        cfg = self.cfg
        dense_l, moe_l = self._per_layer(False), self._per_layer(True) if cfg.is_moe else None
        layers = self.dense_layers * dense_l.dense + (self.moe_layers * moe_l.dense if moe_l else 0)
        experts = self.moe_layers * moe_l.expert if moe_l else 0
        vocab = _ceil_div(cfg.vocab_size, self.tp) * cfg.hidden_size
        emb = 0
        if self.is_first_stage:
            emb = vocab + (cfg.max_position * cfg.hidden_size if cfg.learned_positions else 0)
        head = 0
        if self.is_last_stage:
            from tmath.params import _norm_params

            head = _norm_params(cfg, cfg.hidden_size)
            if not cfg.tie_embeddings or self.pp > 1:
                head += vocab
        return {"layers": layers, "experts": experts, "embedding": emb, "lm_head": head}

    @property
    def dense_params(self) -> int:
        """Parameters reduced over the dp·cp group (all but the routed experts)."""
        p = self.params_per_gpu
        return p["layers"] + p["embedding"] + p["lm_head"]

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters, reduced over dp·cp/ep."""
        return self.params_per_gpu["experts"]

    @property
    def dp_group(self) -> int:
        """GPUs that reduce a (non-expert) gradient together: dp·cp."""
        return self.dp * self.cp

    @property
    def expert_dp_group(self) -> int:
        """GPUs that reduce an expert's gradient together: dp·cp/ep."""
        return self.dp * self.cp // self.ep

    def _shard(self, params: int, group: int, sharded: bool) -> int:
        return _ceil_div(params, group) if sharded else params

    def _state_bytes(self, per_param: Fraction, min_stage: int) -> int:
        """Bytes of one kind of state; sharded over the DP groups from ZeRO ``min_stage`` on."""
        z = self.zero >= min_stage
        params = (self._shard(self.dense_params, self.dp_group, z)
                  + self._shard(self.expert_params, self.expert_dp_group, z))
        return math.ceil(params * per_param)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weights this GPU holds (ZeRO-3: its shard)."""
        return self._state_bytes(self.param_bytes, 3)

    @property
    def grad_bytes_per_gpu(self) -> int:
        """Bytes of gradients this GPU holds (ZeRO-2 and 3: its shard)."""
        return self._state_bytes(self.grad_bytes, 2)

    @property
    def optimizer_bytes_per_gpu(self) -> int:
        """Bytes of optimizer states this GPU holds (ZeRO-1, 2, 3: its shard)."""
        return self._state_bytes(self.optimizer_bytes, 1)

    @property
    def state_bytes(self) -> dict[str, int]:
        """``{"weights", "grads", "optimizer"}`` bytes per GPU."""
        return {"weights": self.weight_bytes, "grads": self.grad_bytes_per_gpu,
                "optimizer": self.optimizer_bytes_per_gpu}

    @property
    def activation_args(self) -> dict[str, Any]:
        """What the activation memory of this GPU depends on, as keyword arguments of
        :func:`tmath.memory.activation_bytes` (per micro-batch, all ``cfg`` layers), plus the
        layer counts of this stage and the micro-batches in flight."""
        return {"seq_len": self.seq_len // self.cp, "micro_batch": self.micro_batch,
                "tp": self.tp, "sequence_parallel": self.sequence_parallel,
                "recompute": self.recompute, "dense_layers": self.dense_layers,
                "moe_layers": self.moe_layers, "in_flight": self.in_flight}

    # -- what a step sends ----------------------------------------------------------------
    @property
    def activation_nbytes(self) -> Fraction:
        """Bytes of one micro-batch's hidden states on one CP shard: b·(T/cp)·D·act_bytes."""
        return self.tokens_per_gpu * self.cfg.hidden_size * self.act_bytes

    @property
    def kv_chunk_nbytes(self) -> Fraction:
        """Bytes of the K and V one GPU passes round the CP ring per layer and micro-batch."""
        cfg, t = self.cfg, self.tokens_per_gpu
        if cfg.is_mla:
            width = self.heads_per_gpu * (cfg.qk_head_dim + cfg.value_head_dim)
        else:
            width = 2 * self.kv_heads_per_gpu * cfg.head_dim
        return t * width * self.act_bytes

    def collectives(self) -> list[Collective]:
        """Every collective one optimizer step runs on this GPU, with its size and count."""
        out: list[Collective] = []
        m = self.micro_batches
        lk = self.links
        tp, cp, ep = self.tp, self.cp, self.ep
        n_layers = len(self.layers)
        passes = {"forward": 1, "backward": 1}
        if self.recompute == "full":
            passes["recompute"] = 1

        def add(axis: str, kind: str, group: int, nbytes: Any, count: int, phase: str,
                what: str, what_zh: str, link: str, routed: Any = None) -> None:
            if count and (group > 1 or kind == "send") and nbytes:
                out.append(Collective(axis, kind, group, comm._exact(Fraction(nbytes)), count,
                                      phase, what, what_zh, link, routed))

        # --- tensor parallelism --------------------------------------------------------
        v = self.activation_nbytes
        if tp > 1:
            for phase in passes:
                if self.sequence_parallel:
                    # attention block: all-gather in, reduce-scatter out; same for an MLP
                    blocks = n_layers + self.dense_layers  # attention everywhere, dense MLPs
                    if self.ep == 1:
                        blocks += self.moe_layers  # MoE MLP split over tp like a dense one
                    elif self.cfg.n_shared_experts:
                        blocks += self.moe_layers  # the shared experts' own pair
                    for kind, zh, zh_moe in (
                        ("all_gather", "每层注意力与 MLP 块输入的 all-gather（序列并行）",
                         "MoE 层分发来的 k 份 token 在 TP 组内 all-gather（专家按 tp 切开）"),
                        ("reduce_scatter", "每层注意力与 MLP 块输出的 reduce-scatter（序列并行）",
                         "专家算完后在 TP 组内 reduce-scatter，再合并回去"),
                    ):
                        add("tp", kind, tp, v, m * blocks, phase,
                            f"block {kind} (sequence parallel)", zh, lk["tp"])
                        if kind == "all_gather" and phase == "backward" and self.sp_regather:
                            add("tp", kind, tp, v, m * blocks, phase,
                                "block input re-gathered for the weight gradient",
                                "反向为算权重梯度再 all-gather 一次块输入（Megatron 只存了自己那一片）",
                                lk["tp"])
                        if self.ep > 1 and self.moe_layers:
                            add("tp", kind, tp, v * self.cfg.experts_per_token,
                                m * self.moe_layers, phase, f"routed tokens {kind}", zh_moe,
                                lk["tp"])
                else:
                    add("tp", "all_reduce", tp, v, m * 2 * n_layers, phase,
                        "block output all-reduce", "每层注意力与 MLP 输出的 all-reduce", lk["tp"])
            if self.sequence_parallel:
                rep = (self.dense_layers * self._per_layer(False).tp_replicated
                       + (self.moe_layers * self._per_layer(True).tp_replicated
                          if self.moe_layers else 0))
                add("tp", "all_reduce", tp, rep * self.grad_bytes, 1, "step",
                    "grads of TP-replicated params", "整份存在每张卡上的参数（归一化、偏置、路由器）"
                    "的梯度（序列并行下各卡只见到部分 token）", lk["tp"])
            if self.tp_split.kv_replicas > 1:
                kv = (self.dense_layers * self._per_layer(False).kv_replicated
                      + (self.moe_layers * self._per_layer(True).kv_replicated
                         if self.moe_layers else 0))
                add("tp", "all_reduce", self.tp_split.kv_replicas, kv * self.grad_bytes, 1, "step",
                    "grads of replicated KV projections",
                    f"复制在 {self.tp_split.kv_replicas} 张卡上的 KV 投影的梯度", lk["tp"])
            if self.pp > 1 and not self.sequence_parallel:
                # Megatron's scatter/gather: a stage receives 1/tp and all-gathers the rest
                for phase, receives in (("forward", not self.is_first_stage),
                                        ("backward", not self.is_last_stage)):
                    add("tp", "all_gather", tp, v, m * receives, phase,
                        "gather of pipeline messages", "收到的流水线消息在 TP 组内 all-gather"
                        "（Megatron 的 scatter/gather）", lk["tp"])

        # --- pipeline parallelism ----------------------------------------------------------
        if self.pp > 1:
            msg = v / tp
            if not self.is_last_stage:
                add("pp", "send", 2, msg, m, "forward", "activations to next stage",
                    "激活发往下一段", lk["pp"])
            if not self.is_first_stage:
                add("pp", "send", 2, msg, m, "backward", "gradients to previous stage",
                    "激活的梯度发回上一段", lk["pp"])

        # --- expert parallelism -------------------------------------------------------------
        if ep > 1 and self.moe_layers:
            elems = Fraction(self.tokens_per_gpu, tp) * self.cfg.experts_per_token \
                * self.cfg.hidden_size
            if not self.ep_fp8_dispatch and self.ep_routing is None:
                for phase in passes:
                    add("ep", "all_to_all", ep, elems * self.act_bytes, m * 2 * self.moe_layers,
                        phase, "dispatch and combine",
                        "MoE 分发（dispatch）与合并（combine），每个 token k 份", lk["ep"])
            else:
                for phase in passes:
                    for what, zh, nbytes in self._ep_directions(elems):
                        add("ep", "all_to_all", ep, nbytes, m * self.moe_layers, phase, what,
                            zh, lk["ep"], routed=self._ep_routed(nbytes))

        # --- context parallelism ------------------------------------------------------------
        if cp > 1:
            kv = self.kv_chunk_nbytes
            for phase in passes:  # forward, the backward's second round, a recomputed forward
                add("cp", "send", cp, kv, m * n_layers * (cp - 1), phase,
                    "K,V round the ring (cp-1 hops)", "环形注意力：K、V 沿环传 cp−1 跳", lk["cp"])
            add("cp", "send", cp, kv / self.act_bytes * self.cp_grad_bytes, m * n_layers * cp,
                "backward", "dK,dV accumulated on the way, back to their owner (cp hops)",
                "环形注意力的反向：dK、dV 边传边累加，多传一跳回到自己的卡（cp 跳）", lk["cp"])

        # --- data parallelism and ZeRO --------------------------------------------------------
        for params, group, link, tag, zh in (
            (self.dense_params, self.dp_group, lk["dp"], "", ""),
            (self.expert_params, self.expert_dp_group, lk["dp_expert"], " (experts)", "（路由专家）"),
        ):
            if not params or group == 1:
                continue
            g, w = params * self.grad_bytes, params * self.param_bytes
            z = self.zero
            if z == 0:
                add("dp", "all_reduce", group, g, 1, "step", "gradients" + tag,
                    "梯度 all-reduce" + zh, link)
            elif z == 1:
                add("dp", "reduce_scatter", group, g, 1, "step", "gradients" + tag,
                    "梯度 reduce-scatter" + zh, link)
                add("dp", "all_gather", group, w, 1, "step", "updated weights" + tag,
                    "更新后的权重 all-gather" + zh, link)
            elif z == 2:
                add("dp", "reduce_scatter", group, g, m, "backward", "gradients" + tag,
                    "每个微批次反向后梯度 reduce-scatter" + zh, link)
                add("dp", "all_gather", group, w, 1, "step", "updated weights" + tag,
                    "更新后的权重 all-gather" + zh, link)
            else:
                add("dp", "all_gather", group, w, m, "forward", "weights before forward" + tag,
                    "前向前 all-gather 权重" + zh, link)
                add("dp", "all_gather", group, w, m, "backward", "weights before backward" + tag,
                    "反向前再 all-gather 权重" + zh, link)
                add("dp", "reduce_scatter", group, g, m, "backward", "gradients" + tag,
                    "梯度 reduce-scatter" + zh, link)
        return out

    # -- DeepSeek-V3's expert parallelism (report §3.2.2, §3.3.3) ------------------------
    @property
    def ep_per_node(self) -> int:
        """Members of one EP group on each node (the group's rank stride against the node
        size; all ``ep`` when the group fits in a node)."""
        if self.links["ep"] != self.inter_link or self.intra_link == self.inter_link:
            return self.ep
        return max(1, min(self.ep, self.gpus_per_node // self.strides["ep"]))

    @property
    def ep_nodes(self) -> int:
        """Nodes one EP group spans (1 when its members share a node)."""
        return -(-self.ep // self.ep_per_node)

    @property
    def ep_routing(self) -> dict[str, Any] | None:
        """Node-limited routing as it applies to this layout, or ``None`` when it does not
        (no limit, or the EP group on one node).

        ``nodes`` the nodes the group spans, ``per_node`` its members on each, ``limit``
        M.  Under uniform routing a token's k copies go to ``min(M, nodes)`` nodes (the M
        chosen among the ``nodes``), its own among them with probability
        ``min(M, nodes)/nodes``: ``network_copies = min(M, nodes)·(nodes−1)/nodes`` copies
        leave the node, one per remote node, each to the GPU with the same index there,
        which forwards it over the node's link to the GPUs holding its experts.  Of the k
        copies of each token a share ``(per_node−1)/per_node`` are forwarded:
        ``node_copies = k·(per_node−1)/per_node``.
        """
        if self.node_limit is None or self.ep <= 1:
            return None
        nodes, g = self.ep_nodes, self.ep_per_node
        if nodes <= 1:
            return None
        reach = min(self.node_limit, nodes)
        return {"limit": self.node_limit, "nodes": nodes, "per_node": g,
                "network_copies": Fraction(reach * (nodes - 1), nodes),
                "node_copies": self.cfg.experts_per_token * Fraction(g - 1, g)}

    def _ep_directions(self, elems: Fraction) -> list[tuple[str, str, Fraction]]:
        """The two all-to-alls of a MoE layer in one pass (dispatch-direction, combine-
        direction), with the bytes of each: FP8 (1 byte) and BF16 with ``ep_fp8_dispatch``
        (the forward dispatch and the backward's gradient before the down-projections go
        FP8; both combines BF16, report §3.3.3), else ``act_bytes`` each."""
        d = Fraction(1) if self.ep_fp8_dispatch else self.act_bytes
        c = Fraction(2) if self.ep_fp8_dispatch else self.act_bytes
        tag = "（FP8）" if self.ep_fp8_dispatch else ""
        ctag = "（BF16）" if self.ep_fp8_dispatch else ""
        return [("dispatch-direction all-to-all", f"MoE 分发方向的全交换{tag}：前向分发 token、"
                 "反向发回下投影输出的梯度", elems * d),
                ("combine-direction all-to-all", f"MoE 合并方向的全交换{ctag}：前向合并专家输出、"
                 "反向发回专家输入的梯度", elems * c)]

    def _ep_routed(self, nbytes: Fraction) -> tuple[Fraction, Fraction] | None:
        """``(network, node)`` bytes this GPU sends in one node-limited all-to-all of
        ``nbytes`` (the k copies of its tokens), or ``None`` without node-limited routing."""
        r = self.ep_routing
        if r is None:
            return None
        per_copy = nbytes / self.cfg.experts_per_token
        return (per_copy * r["network_copies"], per_copy * r["node_copies"])

    def comm_bytes_per_gpu(self) -> dict[str, int]:
        """Bytes this GPU sends per optimizer step on each axis (whole bytes, rounded up)."""
        tot = dict.fromkeys(AXES, Fraction(0))
        for c in self.collectives():
            tot[c.axis] += Fraction(c.total_bytes_sent)
        return {a: comm.whole_bytes(v) for a, v in tot.items()}

    def at_stage(self, stage: int) -> Layout:
        """The same layout seen from pipeline stage ``stage``."""
        return replace(self, stage=_rank("stage", stage, self.pp))


#: Most entries a ``stage_layers`` list may have (the pipeline bound of ``tmath plan``).
MAX_STAGES = 10_000


def parse_stage_layers(text: Any) -> tuple[int, ...]:
    """Layers per pipeline stage from the command line's ``--stage-layers``: comma-separated
    counts, ``a*n`` repeating ``a`` n times (DeepSeek-V3's 61 layers over 16 stages, say,
    ``"3,4*14,2"``).  At most :data:`MAX_STAGES` entries, counted before any list is built."""
    if not isinstance(text, str):
        raise LayoutError(f"stage_layers 必须是形如 \"3,4*14,2\" 的字符串，收到 {type(text).__name__}",
                          "stage_layers")
    if len(text) > 100_000:
        raise LayoutError(f"stage_layers 太长（{len(text):,} 个字符）：每段层数用逗号隔开，"
                          "重复的写成 层数*段数，如 3,4*14,2", "stage_layers")
    parts, total = [], 0
    for item in text.split(","):
        item = item.strip()
        count, _, times = item.partition("*")
        try:
            a, k = int(count.strip()), int(times.strip()) if times else 1
        except ValueError:
            raise LayoutError(f"stage_layers 里的 {item[:40]!r} 不是层数：每段层数用逗号隔开，重复的写成"
                              " 层数*段数，如 3,4*14,2", "stage_layers") from None
        if a < 1 or k < 1:
            raise LayoutError(f"stage_layers 里的 {item[:40]!r}：层数和段数都必须是正整数（每段至少一层）",
                              "stage_layers")
        total += k
        if total > MAX_STAGES:
            raise LayoutError(f"stage_layers 超过 {MAX_STAGES:,} 段：流水线至多 {MAX_STAGES:,} 段",
                              "stage_layers")
        parts.append((a, k))
    return tuple(a for a, k in parts for _ in range(k))


def _uneven_fixes(n: int, pp: int) -> str:
    """What works when ``pp`` stages do not split ``n`` layers evenly: stage_layers always (a
    list that adds up to ``n``), pp_edge_layers only when some edge leaves the middle stages an
    even share (never for 61 layers over 16 stages: 61 − 2e is odd, 14 stages need a multiple
    of 14)."""
    q, r = divmod(n, pp)
    listed = f"{q + 1}*{r},{q}*{pp - r}" if q else None
    edges = [e for e in range(1, n // 2 + 1)
             if (pp == 2 and n == 2 * e) or (pp > 2 and n - 2 * e >= pp - 2 and (n - 2 * e) % (pp - 2) == 0)]
    text = (f"或用 stage_layers（命令行 --stage-layers）逐段给出层数，例如 {listed}（DeepSeek-V3 的 61 层、"
            "16 段：3,4*14,2）") if listed else ""
    if edges:
        e = min(edges, key=lambda e: abs(e - n / pp))
        mid = "" if pp == 2 else f"，中间各 {(n - 2 * e) // (pp - 2)} 层"
        text += f"；或用 pp_edge_layers（命令行 --pp-edge-layers）让首末两段各放 {e} 层{mid}"
    return text


def _stage_layers(cfg: ModelConfig, pp: int, edge: int | None,
                  given: Any = None) -> tuple[int, ...]:
    n = cfg.num_layers
    if given is not None:
        if edge is not None:
            raise LayoutError("stage_layers 与 pp_edge_layers 只能给一个：前者逐段给出层数，"
                              "后者只规定首末两段", "stage_layers")
        layers = parse_stage_layers(given) if isinstance(given, str) else given
        try:
            layers = tuple(_pos_int("stage_layers", v) for v in layers)
        except TypeError:
            raise LayoutError(f"stage_layers 必须是每段层数的列表，收到 {type(given).__name__}",
                              "stage_layers") from None
        if len(layers) != pp:
            raise LayoutError(f"stage_layers 给了 {len(layers):,} 段，但 pp={pp}：每个流水线段给一个层数",
                              "stage_layers")
        if sum(layers) != n:
            raise LayoutError(f"stage_layers 的层数之和是 {sum(layers):,}，但 {cfg.name} 有 "
                              f"num_layers={n} 层：各段层数加起来必须等于总层数", "stage_layers")
        return layers
    if edge is None:
        if pp > n:
            raise LayoutError(f"pp={pp} 超过了层数 num_layers={n}：每段至少要有一层；pp 可取 "
                              f"{_divisors(n)}", "pp")
        if n % pp:
            raise LayoutError(
                f"pp={pp} 不能整除 num_layers={n}：每段必须分到同样多的层；pp 可取 {_divisors(n)}，"
                f"{_uneven_fixes(n, pp)}", "pp")
        return (n // pp,) * pp
    e = _pos_int("pp_edge_layers", edge)
    if pp < 2:
        raise LayoutError("pp_edge_layers 只在 pp ≥ 2 时有意义：它规定首末两段各放几层", "pp_edge_layers")
    rest = n - 2 * e
    if pp == 2:
        if rest:
            raise LayoutError(f"pp=2 时首末两段就是全部：pp_edge_layers 必须等于 num_layers/2 = "
                              f"{n / 2:g}，收到 {e}", "pp_edge_layers")
        return (e, e)
    if rest < pp - 2 or rest % (pp - 2):
        raise LayoutError(
            f"首末两段各 {e} 层之后剩下 {rest} 层，不能平均分给中间的 {pp - 2} 段；"
            f"取 pp_edge_layers 使 num_layers−2·pp_edge_layers 是 {pp - 2} 的正倍数", "pp_edge_layers")
    return (e,) + (rest // (pp - 2),) * (pp - 2) + (e,)


def build_layout(
    cfg: ModelConfig,
    *,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    cp: int = 1,
    zero: int = 0,
    micro_batch: int = 1,
    global_batch: int | None = None,
    seq_len: int,
    recompute: str = "none",
    sequence_parallel: bool | None = None,
    sp_regather: bool = True,
    stage: int | None = None,
    pp_edge_layers: int | None = None,
    stage_layers: Any = None,
    act_bytes: float = 2,
    param_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
    cp_grad_bytes: float = 4,
    order: str = "megatron",
    gpus_per_node: int = 8,
    intra_link: str = "NVLink4",
    inter_link: str = "IB-NDR",
    ep_fp8_dispatch: bool = False,
    node_limit: int | None = None,
) -> Layout:
    """Check and build the layout of ``cfg`` on a ``dp × tp × pp × cp`` mesh (ep inside dp).

    ``micro_batch`` (b) sequences per micro-batch per pipeline; ``global_batch`` (default
    ``dp·micro_batch``, one micro-batch per step) sequences per optimizer step; ``seq_len``
    (T) tokens per sequence.  ``sequence_parallel`` defaults to ``tp > 1``; ``sp_regather``
    (default ``True``, Megatron-LM) whether its backward all-gathers each block's input again
    (the module docstring says when to turn it off).  ``stage`` the
    pipeline stage described (default: a middle stage, see the module docstring);
    ``pp_edge_layers`` puts that many layers on the first and on the last stage and splits
    the rest evenly; ``stage_layers`` (a sequence of pp counts summing to ``num_layers``, or
    the string :func:`parse_stage_layers` reads) gives every stage's count, for any uneven
    split (Megatron-LM's ``--decoder-first-pipeline-num-layers`` and
    ``--decoder-last-pipeline-num-layers`` are the case first, last, the rest even).
    Dtypes in bytes: activations ``act_bytes``, weights ``param_bytes``, gradients
    ``grad_bytes``, optimizer states ``optimizer_bytes`` per parameter (mixed-precision
    Adam: 2, 2, 12); the dK, dV the CP ring's backward passes on ``cp_grad_bytes``
    (4: fp32, as ring-flash-attention accumulates them).  ``order`` names the mesh order
    (:data:`ORDERS`: ``"megatron"``, tp, cp, dp, pp; ``"llama3"``, the paper's [TP, CP, PP,
    DP]): which axis is nearer the node decides which rides NVLink.  ``gpus_per_node`` and the two
    link names decide which link each axis rides (names of :data:`tmath.hardware.LINKS`).
    ``ep_fp8_dispatch`` and ``node_limit`` price the MoE all-to-alls as DeepSeek-V3 runs them
    (:attr:`Layout.ep_routing`); both need ep > 1.
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg 必须是 tmath.ModelConfig，收到 {type(cfg).__name__}")
    dp, tp, pp, ep, cp = (_pos_int(n, v) for n, v in
                          (("dp", dp), ("tp", tp), ("pp", pp), ("ep", ep), ("cp", cp)))
    b = _pos_int("micro_batch", micro_batch)
    T = _pos_int("seq_len", seq_len)
    G = dp * b if global_batch is None else _pos_int("global_batch", global_batch)
    gpn = _pos_int("gpus_per_node", gpus_per_node)
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise LayoutError(f"zero={zero!r} 不是 ZeRO 的阶段；可取 0、1、2、3", "zero")
    if not isinstance(order, str) or order not in ORDERS:
        raise LayoutError(f"order={order!r} 未知：卡号的排法取 megatron（tp、cp、dp、pp，Megatron-LM）"
                          "或 llama3（tp、cp、pp、dp，Llama 3 论文的 [TP, CP, PP, DP]）", "order")
    if recompute not in RECOMPUTES:
        raise LayoutError(f"recompute={recompute!r} 未知；可取 none、selective、full", "recompute")
    if T > cfg.max_position:
        raise LayoutError(f"seq_len={T:,} 超过了 {cfg.name} 的 {cfg.max_position:,} 个位置"
                          f"（max_position_embeddings）；取 seq_len ≤ {cfg.max_position}", "seq_len")
    tpl = tp_layout(cfg, tp)
    if sequence_parallel is None:
        sequence_parallel = tp > 1
    if not isinstance(sequence_parallel, bool):
        raise LayoutError(f"sequence_parallel 必须是 True、False 或 None，收到 {sequence_parallel!r}",
                          "sequence_parallel")
    if sequence_parallel and tp == 1:
        sequence_parallel = False  # nothing to split over one GPU
    if not isinstance(sp_regather, bool):
        raise LayoutError(f"sp_regather 必须是 True 或 False，收到 {sp_regather!r}", "sp_regather")
    if cfg.num_dense_layers and cfg.intermediate_size % tp:
        raise LayoutError(
            f"tp={tp} 不能整除 intermediate_size={cfg.intermediate_size}（FFN 宽度 F）：MLP 的列要平均"
            f"分到各卡；tp 可取 {_divisors(math.gcd(cfg.intermediate_size, cfg.num_heads))}", "tp")
    if cfg.is_moe:
        for name, width in (("moe_intermediate_size", cfg.moe_intermediate_size),
                            ("n_shared_experts·moe_intermediate_size",
                             cfg.n_shared_experts * cfg.moe_intermediate_size)):
            if width and width % tp:
                raise LayoutError(f"tp={tp} 不能整除 {name}={width}：专家的列要平均分到各卡；tp 可取 "
                                  f"{_divisors(math.gcd(width, cfg.num_heads))}", "tp")
    if ep > 1:
        if not cfg.is_moe:
            raise LayoutError(f"ep={ep}，但 {cfg.name} 没有路由专家（不是 MoE 模型）：取 ep=1", "ep")
        e = cfg.n_routed_experts
        if e % ep:
            raise LayoutError(f"ep={ep} 不能整除路由专家数 n_routed_experts={e}：每张卡必须分到同样多的"
                              f"专家；ep 可取 {_divisors(e)}", "ep")
        if dp % ep:
            raise LayoutError(
                f"ep={ep} 不能整除 dp={dp}：专家并行组是从数据并行的副本里划出来的（Megatron-LM、"
                f"DeepSpeed-MoE 的约定），ep 必须整除 dp；ep 可取 {_divisors(math.gcd(dp, e))}", "ep")
        if tp > 1 and not sequence_parallel:
            raise LayoutError("专家并行与张量并行同用时需要序列并行（Megatron-LM 的要求）："
                              "取 sequence_parallel=True，或 tp=1", "sequence_parallel")
    if T % cp:
        raise LayoutError(f"cp={cp} 不能整除 seq_len={T}：每张卡要分到同样长的一段序列；"
                          f"cp 可取 {_divisors(T) if T <= 4096 else '能整除 seq_len 的数'}", "cp")
    if sequence_parallel and (b * T // cp) % tp:
        raise LayoutError(f"序列并行要把每个微批次的 b·T/cp = {b * T // cp} 个 token 平均分给 tp={tp} "
                          "张卡；调整 micro_batch 或 seq_len", "tp")
    if G % (dp * b):
        raise LayoutError(
            f"global_batch={G} 不是 dp×micro_batch = {dp}×{b} = {dp * b} 的整数倍：每个数据并行副本"
            f"每步要处理整数个微批次；取 global_batch 为 {dp * b} 的倍数", "global_batch")
    if not isinstance(ep_fp8_dispatch, bool):
        raise LayoutError(f"ep_fp8_dispatch 必须是 True 或 False，收到 {ep_fp8_dispatch!r}",
                          "ep_fp8_dispatch")
    if node_limit is not None:
        node_limit = _pos_int("node_limit", node_limit)
    for name, on in (("ep_fp8_dispatch", ep_fp8_dispatch), ("node_limit", node_limit is not None)):
        if on and ep == 1:
            raise LayoutError(f"{name} 规定专家并行的全交换怎么发，ep=1 时没有全交换：取 ep > 1，"
                              "或不给它", name)
    layers = _stage_layers(cfg, pp, pp_edge_layers, stage_layers)
    if stage is None:
        stage = 1 if pp >= 3 else 0
    stage = _rank("stage", stage, pp)
    return Layout(cfg, dp, tp, pp, ep, cp, zero, b, G, T, recompute, sequence_parallel, stage,
                  layers, _bytes_arg("act_bytes", act_bytes), _bytes_arg("param_bytes", param_bytes),
                  _bytes_arg("grad_bytes", grad_bytes),
                  _bytes_arg("optimizer_bytes", optimizer_bytes), gpn, str(intra_link),
                  str(inter_link), tpl, sp_regather and sequence_parallel,
                  cp_grad_bytes=_bytes_arg("cp_grad_bytes", cp_grad_bytes), order=ORDERS[order],
                  ep_fp8_dispatch=ep_fp8_dispatch, node_limit=node_limit)

"""Training memory: bytes per parameter, ZeRO sharding, activations, recomputation.

Units: bytes (decimal prefixes when printed: 1 GB = 1e9 B, 1 TB = 1e12 B).

Three pieces:

* :func:`training_bytes_per_param` -- model + gradient + optimizer state per
  parameter for common recipes, with the breakdown; :func:`zero_bytes_per_param`
  shards it over a data-parallel group (ZeRO stages 0-3, Rajbhandari et al. 2020).
* :func:`activation_bytes_per_layer` -- Korthikanti et al. 2022, Eqs. (1)-(4):
  the bytes of activations one transformer layer keeps for the backward pass,
  for no / selective / full recomputation, with tensor and sequence
  parallelism.  Beside it :func:`activation_bytes_seed_heuristic`, the source
  document's "about 20 tensors per layer" estimate.
* :func:`activation_bytes` -- the same count per architecture, term by term
  (:func:`tmath.symbolic.activation_terms`): the GPT block and the Llama block
  (RMSNorm, GQA, no dropout, gated SiLU MLP), per GPU and per micro-batch, with
  TP / sequence parallelism, recomputation, and eager or FlashAttention;
  checked byte for byte against transformers by :mod:`tmath.actmeasure`.
* :func:`segment_checkpoint_bytes` -- checkpointing every L_seg layers (Chen et al. 2016's
  sqrt(L) schedule, Megatron-LM's ``--recompute-method uniform --recompute-num-layers``):
  the peak activation bytes of the backward pass; :data:`PCIE_GEN5_X16_BYTES_PER_S` the
  host link an activation offload crosses.
* :func:`recompute_flops` -- the FLOP cost of each recomputation strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tmath._checks import int_arg
from tmath.errors import InputError, InputTypeError, show

__all__ = [
    "RECIPES",
    "RECIPE_SOURCES",
    "RECIPE_NOTES_ZH",
    "RecipeBytes",
    "training_bytes_per_param",
    "zero_bytes_per_param",
    "training_memory_bytes",
    "activation_bytes_per_layer",
    "activation_memory",
    "ActivationBytes",
    "activation_bytes",
    "activation_bytes_seed_heuristic",
    "deepseek_activation_terms",
    "FP8_BYTES",
    "E5M6_BYTES",
    "PCIE_GEN5_X16_BYTES_PER_S",
    "SegmentCheckpoint",
    "segment_checkpoint_bytes",
    "RecomputeFlops",
    "recompute_flops",
    "attention_core_forward_flops",
    "checkpoint_flops",
]

# --- bytes per parameter ----------------------------------------------------

#: recipe -> {component: bytes per parameter}.  Components are grouped into
#: "weights", "grads" and optimizer state (everything else) for ZeRO.
RECIPES: dict[str, dict[str, int]] = {
    # bf16 weights and grads used in forward/backward; fp32 master copy and
    # fp32 Adam moments in the optimizer (Micikevicius et al. 2018; ZeRO's K=12).
    "mixed-adam": {"weights_bf16": 2, "grads_bf16": 2, "master_fp32": 4, "adam_m_fp32": 4, "adam_v_fp32": 4},
    # Same, but gradients accumulated in fp32 (Megatron's main_grad), no bf16 grad copy.
    "mixed-adam-fp32-grads": {
        "weights_bf16": 2,
        "grads_fp32": 4,
        "master_fp32": 4,
        "adam_m_fp32": 4,
        "adam_v_fp32": 4,
    },
    # Everything in fp32: weights, grads, Adam m and v.  No separate master copy.
    "fp32-adam": {"weights_fp32": 4, "grads_fp32": 4, "adam_m_fp32": 4, "adam_v_fp32": 4},
    # Pure bf16 weights and grads (no fp32 master), fp32 Adam moments.
    "bf16-adam": {"weights_bf16": 2, "grads_bf16": 2, "adam_m_fp32": 4, "adam_v_fp32": 4},
    # Pure bf16 everything (weights, grads, both moments).
    "bf16-adam-bf16-states": {"weights_bf16": 2, "grads_bf16": 2, "adam_m_bf16": 2, "adam_v_bf16": 2},
    # Inference only: the bf16 weights.
    "bf16-inference": {"weights_bf16": 2},
    # --- recipes of published runs (issue 36; RECIPE_SOURCES names each one's source) ---
    # DeepSeek-V3 (report §3.3.1, §3.3.3): FP8 GEMMs; "the master weights (stored by the
    # optimizer) and gradients (used for batch size accumulation) are still retained in
    # FP32"; "BF16 ... to track the first and second moments in the AdamW".  The copy of the
    # weights the GEMMs read (cast to FP8 per 128 x 128 block on the fly) is taken as BF16:
    # the report's text does not say how it is kept (an assumption, RECIPE_NOTES_ZH).
    "deepseek-v3-fp8": {"weights_bf16": 2, "grads_fp32": 4, "master_fp32": 4,
                        "adam_m_bf16": 2, "adam_v_bf16": 2},
    # The JAX scaling book ("How to Parallelize a Transformer for Training", data
    # parallelism): "Since the params are in bfloat16 and optimizer state is in float32, this
    # gives us 2 + 8 = 10 bytes per parameters."  Gradients are not counted (in JAX they are
    # a transient of the step, not a buffer kept between steps).
    "scaling-book": {"weights_bf16": 2, "adam_m_fp32": 4, "adam_v_fp32": 4},
}

#: The primary source of each published recipe (keys of :data:`tmath.sources.SOURCES`).
RECIPE_SOURCES: dict[str, str] = {
    "deepseek-v3-fp8": "deepseek2024v3infra",
    "scaling-book": "austin2025scalingbooktraining",
}
#: What each published recipe assumes beyond its source's words, in Chinese.
RECIPE_NOTES_ZH: dict[str, str] = {
    "deepseek-v3-fp8": "DeepSeek-V3 报告 §3.3.1、§3.3.3：主权重与梯度 FP32（4 + 4），"
                       "AdamW 的一阶、二阶矩 BF16（2 + 2）；GEMM 读的那份权重按 BF16 计"
                       "（2，报告正文没说它怎么存，FP8 在每次 GEMM 前按块转换）：共 14 字节/参数",
    "scaling-book": "JAX Scaling Book 第 5 节：参数 bf16（2）、Adam 两个矩 fp32（4 + 4），共 10 字节/参数；"
                    "梯度不计（JAX 里它只在一步之内存在）",
}


@dataclass(frozen=True)
class RecipeBytes:
    """Bytes per parameter of a training recipe, with its parts."""

    recipe: str
    total: float
    breakdown: dict[str, float]

    @property
    def weights(self) -> float:
        return sum(v for k, v in self.breakdown.items() if k.startswith("weights"))

    @property
    def grads(self) -> float:
        return sum(v for k, v in self.breakdown.items() if k.startswith("grads"))

    @property
    def optimizer(self) -> float:
        return self.total - self.weights - self.grads


def training_bytes_per_param(recipe: str = "mixed-adam") -> RecipeBytes:
    """Bytes each parameter costs for ``recipe`` (see :data:`RECIPES`).

    >>> training_bytes_per_param("mixed-adam").total
    16
    """
    if recipe not in RECIPES:
        raise InputError(f"未知的训练配方 recipe={show(recipe)}：请用 {'、'.join(RECIPES)} 之一",
                         "recipe")
    parts = dict(RECIPES[recipe])
    return RecipeBytes(recipe, sum(parts.values()), parts)


def zero_bytes_per_param(recipe: str = "mixed-adam", stage: int = 0, dp: int = 1) -> float:
    """Bytes per parameter *per data-parallel rank* under ZeRO ``stage`` over ``dp`` ranks.

    Stage 0: nothing sharded; 1: optimizer state (master copy, moments) / dp;
    2: + gradients / dp; 3: + weights / dp (Rajbhandari et al. 2020, Fig. 1).
    """
    stage = int_arg("stage", stage, 0)
    if stage > 3:
        raise InputError(f"ZeRO 的 stage 必须是 0、1、2 或 3，收到 {stage}", "stage")
    dp = int_arg("dp", dp)
    rb = training_bytes_per_param(recipe)
    w, g, o = Fraction(rb.weights), Fraction(rb.grads), Fraction(rb.optimizer)
    if stage >= 1:
        o /= dp
    if stage >= 2:
        g /= dp
    if stage >= 3:
        w /= dp
    return float(w + g + o)


def training_memory_bytes(n_params: int, recipe: str = "mixed-adam", stage: int = 0, dp: int = 1) -> float:
    """Bytes per rank for weights + grads + optimizer state of ``n_params`` parameters."""
    n_params = int_arg("n_params", n_params, 0)
    return n_params * zero_bytes_per_param(recipe, stage, dp)


# --- activations --------------------------------------------------------------

_RECOMPUTE = ("none", "selective", "full")


def activation_bytes_per_layer(
    seq_len: int,
    batch: int,
    hidden: int,
    heads: int,
    *,
    recompute: str = "none",
    tp: int = 1,
    sequence_parallel: bool = False,
) -> float:
    """Activation bytes one transformer layer stores for backward (Korthikanti et al. 2022).

    With s = ``seq_len``, b = ``batch``, h = ``hidden``, a = ``heads``, t = ``tp``
    (16-bit activations, 1-byte dropout masks, GPT layer with a 4h two-matrix MLP,
    attention scores materialised; per GPU):

    ============  ==========================  ===========================
    recompute     tensor parallel only        tensor + sequence parallel
    ============  ==========================  ===========================
    ``none``      sbh(10 + 24/t + 5as/(ht))   (sbh/t)(34 + 5as/h)
    ``selective`` sbh(10 + 24/t)              34 sbh / t
    ``full``      2 sbh                       2 sbh / t
    ============  ==========================  ===========================

    With t = 1 the first row is the paper's Eq. (1), sbh(34 + 5as/h).  The
    5as/h term is, per head, the s x s softmax output (2 bytes), its dropout
    mask (1 byte) and the dropout output (2 bytes); "selective" recomputes
    exactly those.  "full" keeps only the layer
    input (2sbh bytes); sharding it over t with sequence parallelism follows
    the paper's Sec. 4.2.3 remark.  Other architectures (gated MLP, GQA, no
    dropout) change the constants: this is the paper's GPT case, kept for the
    chapters that discuss it; :func:`activation_bytes` counts each architecture
    term by term (and adds the norm statistics the paper leaves out).
    """
    s = int_arg("seq_len", seq_len)
    b = int_arg("batch", batch)
    h = int_arg("hidden", hidden)
    a = int_arg("heads", heads)
    t = int_arg("tp", tp)
    if recompute not in _RECOMPUTE:
        raise InputError(f"recompute 必须是 {'、'.join(_RECOMPUTE)} 之一，收到 {show(recompute)}",
                         "recompute")
    sbh = Fraction(s * b * h)
    scores = Fraction(5 * a * s, h)  # 5as/h
    if recompute == "full":
        out = 2 * sbh / (t if sequence_parallel else 1)
    elif sequence_parallel:
        out = sbh / t * (34 + (scores if recompute == "none" else 0))
    else:
        out = sbh * (10 + Fraction(24, t) + (scores / t if recompute == "none" else 0))
    return float(out)


def activation_memory(
    cfg: Any,
    seq_len: int,
    batch: int = 1,
    *,
    recompute: str = "none",
    tp: int = 1,
    sequence_parallel: bool = False,
) -> float:
    """Korthikanti activation bytes for all ``cfg.num_layers`` layers (per GPU).

    Uses ``cfg.hidden_size`` as h and ``cfg.num_heads`` as a; see
    :func:`activation_bytes_per_layer` for the conventions and the GPT-layout caveat
    (:func:`activation_bytes` is the per-architecture count the ledger uses).
    """
    per_layer = activation_bytes_per_layer(
        seq_len,
        batch,
        cfg.hidden_size,
        cfg.num_heads,
        recompute=recompute,
        tp=tp,
        sequence_parallel=sequence_parallel,
    )
    return per_layer * cfg.num_layers


@dataclass(frozen=True)
class ActivationBytes:
    """Activation bytes kept for backward, per GPU, for one micro-batch (see :func:`activation_bytes`)."""

    model: str
    block: str  # "gpt" or "llama" (tmath.symbolic.ACT_BLOCKS)
    seq_len: int
    micro_batch: int
    tp: int
    sequence_parallel: bool
    recompute: str
    attention: str
    kernels: str
    act_bytes: float
    mask_bytes: float
    layers: int
    terms: dict[str, float]  # bytes per GPU of each kept tensor of one layer (a MoE layer if any)
    total: float  # bytes per GPU, all layers
    checked: bool  # the block is the one tmath.actmeasure measures against transformers
    note: str

    @property
    def per_layer(self) -> float:
        """Bytes per GPU of one layer (the sum of :attr:`terms`)."""
        return float(sum(self.terms.values()))

    def describe_zh(self) -> str:
        """The assumptions in one Chinese phrase, for tables and the ledger."""
        rec = {"none": "不重计算", "selective": "选择性重计算", "full": "整层重计算"}[self.recompute]
        att = "softmax 显式保存" if self.attention == "eager" else "FlashAttention"
        sp_ = "序列并行开" if self.sequence_parallel else "序列并行关"
        return f"每卡、微批次 {self.micro_batch}、TP={self.tp}、{sp_}、{rec}、{att}"


def activation_bytes(
    cfg: Any,
    seq_len: int,
    micro_batch: int = 1,
    *,
    recompute: str = "none",
    tp: int = 1,
    sequence_parallel: bool | None = None,
    attention: str = "eager",
    kernels: str = "fused",
    dtype: str = "bf16",
    mask_bytes: float = 1,
    dropout: bool | None = None,
    recompute_norm_up: bool = False,
    fp8_cache: bool = False,
) -> ActivationBytes:
    """Activation bytes one GPU keeps for backward, per architecture, term by term.

    Evaluates :func:`tmath.symbolic.activation_layer_terms` for ``cfg``'s block:
    ``model_type="gpt2"`` (GPT-2/GPT-3) is the GPT block (LayerNorm, GELU MLP, dropout);
    every other family is the Llama block (RMSNorm, GQA, rotary, no dropout, gated MLP).
    ``micro_batch`` is the number of sequences one GPU processes in one forward pass
    (not the global batch); ``tp`` the tensor-parallel degree (checked by
    :func:`tmath.layout.tp_layout`); ``sequence_parallel`` defaults to ``tp > 1``.
    ``attention="eager"`` keeps the s x s softmax; ``"flash"`` keeps Q, K, V, the output
    and a float32 logsumexp.  ``dtype`` sets the activation bytes (bf16 2, fp32 4);
    ``mask_bytes`` the dropout-mask bytes (1 on CUDA; the CPU keeps an activation-dtype
    mask).  ``dropout`` (default: only the GPT block has dropout) drops the three
    dropout terms when False.

    Caveats, named: the rotary cos/sin tables (one pair for the whole model), the
    embedding dropout and the final norm and LM head are not per-layer terms and are left
    out.  For MoE layers the MLP width f is (k + shared) x moe_intermediate_size (each
    token's k routed experts and the shared ones); the router logits and the gathered
    copies of each expert's input tokens are not modelled.  MLA uses its query/key head
    dim (nope + rope) and value head dim for every head; its latent down-projections are
    not modelled.  Those cases have ``checked=False``.

    DeepSeek-V3's two activation savings (report §3.2.3 and §3.3.3, source
    ``deepseek2024v3infra``), applied by :func:`deepseek_activation_terms`:
    ``recompute_norm_up`` recomputes every RMSNorm and, for MLA, the up-projections in the
    backward pass; ``fp8_cache`` caches the Linear inputs in FP8.  Neither goes with
    ``recompute="full"`` (nothing is left to save).
    """
    from tmath.actterms import activation_layer_terms
    from tmath.kvcache import dtype_bytes
    from tmath.layout import tp_layout

    s = int_arg("seq_len", seq_len)
    b = int_arg("micro_batch", micro_batch)
    t = int_arg("tp", tp)
    layout = tp_layout(cfg, t)
    if sequence_parallel is None:
        sequence_parallel = t > 1
    if not isinstance(sequence_parallel, bool):
        raise InputTypeError(f"sequence_parallel 必须是布尔值或 None，收到 {show(sequence_parallel)}",
                             "sequence_parallel")
    if isinstance(mask_bytes, bool) or not isinstance(mask_bytes, (int, float)) or mask_bytes <= 0:
        raise InputError(f"mask_bytes 必须是正数，收到 {show(mask_bytes)}", "mask_bytes")
    alpha = dtype_bytes(dtype)
    block = "gpt" if cfg.model_type == "gpt2" else "llama"
    if dropout is None:
        dropout = block == "gpt"
    if not isinstance(dropout, bool):
        raise InputTypeError(f"dropout 必须是布尔值或 None，收到 {show(dropout)}", "dropout")
    d = cfg.qk_head_dim if cfg.is_mla else cfg.head_dim
    e = cfg.value_head_dim if cfg.is_mla else cfg.head_dim
    # keyed by tmath.symbolic.ACT_KEYS, the notation registry's letters
    values = {"T": s, "B": b, "D": cfg.hidden_size, "N": cfg.num_heads,
              "K": layout.kv_heads_per_gpu * t, "H": d, "d_v": e, "n_TP": Fraction(t),
              "b": Fraction(alpha), "b_mask": Fraction(mask_bytes), "b_stat": 4}

    for name, flag in (("recompute_norm_up", recompute_norm_up), ("fp8_cache", fp8_cache)):
        if not isinstance(flag, bool):
            raise InputTypeError(f"{name} 必须是布尔值，收到 {show(flag)}", name)
        if flag and recompute == "full":
            raise InputError(f"{name} 与整层重计算（recompute=\"full\"）不能同用：整层重计算只存层输入，"
                             "没有别的激活可省；取 recompute=\"none\" 或 \"selective\"", name)

    def layer(f: int, moe: bool = False) -> dict[str, float]:
        terms = activation_layer_terms(block, recompute=recompute, attention=attention,
                                       kernels=kernels, sequence_parallel=sequence_parallel,
                                       values=dict(values, F=f))
        if not dropout:
            terms = {k_: v_ for k_, v_ in terms.items() if "dropout" not in k_}
        if recompute_norm_up or fp8_cache:
            terms = deepseek_activation_terms(
                terms, cfg, s * b, alpha, t if sequence_parallel else 1, moe=moe,
                recompute_norm_up=recompute_norm_up, fp8_cache=fp8_cache)
        return {k_: float(v_) for k_, v_ in terms.items()}

    dense = layer(cfg.intermediate_size)
    n_moe = cfg.num_moe_layers if cfg.is_moe else 0
    n_dense = cfg.num_layers - n_moe
    terms = dense
    total = n_dense * sum(dense.values())
    if n_moe:
        terms = layer((cfg.experts_per_token + cfg.n_shared_experts) * cfg.moe_intermediate_size,
                      moe=True)
        total += n_moe * sum(terms.values())
    checked = cfg.model_type in ("gpt2", "llama") and not cfg.is_moe and not cfg.is_mla
    note = ("cross-checked block" if checked else
            f"{cfg.model_type}: the {block} block's terms; not cross-checked against transformers")
    return ActivationBytes(cfg.name, block, s, b, t, sequence_parallel, recompute, attention,
                           kernels, float(alpha), float(mask_bytes), cfg.num_layers, terms,
                           float(total), checked, note)


#: Bytes per element of an activation cached in FP8 (E4M3) and of the attention output
#: DeepSeek-V3 caches in its own E5M6 format (12 bits), report §3.3.3.  The FP32 scaling
#: factor of each 1 x 128 tile (4/128 byte per element, 3 %) is left out.
FP8_BYTES = Fraction(1)
E5M6_BYTES = Fraction(3, 2)
#: The RMSNorm outputs (:func:`tmath.actterms.activation_terms`): the inputs of the first
#: projections of the attention and of the MLP.
NORM_OUTPUTS = ("qkv_input", "mlp_input")
#: Activations that are the input of a Linear operator (FP8 when cached in FP8).
LINEAR_INPUTS = ("qkv_input", "mlp_input", "mlp_hidden")


def deepseek_activation_terms(terms: dict[str, Any], cfg: Any, tokens: int, act_bytes: Any,
                              split: int, *, moe: bool, recompute_norm_up: bool,
                              fp8_cache: bool) -> dict[str, Any]:
    """One layer's kept activations (``terms``, bytes per GPU) under DeepSeek-V3's savings.

    Source ``deepseek2024v3infra`` (DeepSeek-V3 report):

    * ``recompute_norm_up`` (§3.2.3, "We recompute all RMSNorm operations and MLA
      up-projections during back-propagation, thereby eliminating the need to persistently
      store their output activations"): the RMSNorm outputs (:data:`NORM_OUTPUTS`) are
      dropped; for an MLA model so are Q, K and V, the up-projections' outputs, and the
      latents they are recomputed from are kept instead: the query latent (``q_lora_rank``,
      if the queries are compressed; otherwise Q is a projection of the norm output and is
      kept), the KV latent and the shared rotary key (``kv_lora_rank + qk_rope_head_dim``),
      in the activation dtype, with the fp32 statistics of their RMSNorms.  The norms'
      inputs (the residual stream) stay: the norms are recomputed from them.
    * ``fp8_cache`` (§3.3.3, "it is a natural choice to cache activations in FP8 format for
      the backward pass of the Linear operator"): every Linear input still kept
      (:data:`LINEAR_INPUTS`) costs :data:`FP8_BYTES`; the attention output, the input of
      the Linear after attention, :data:`E5M6_BYTES` ("a customized E5M6 data format");
      in a MoE layer the SwiGLU inputs (gate and up) are cached in FP8 and its output is
      recomputed ("we cache the inputs of the SwiGLU operator and recompute its output"),
      so the down-projection's input is not kept.  Normalisation and attention keep their
      precision (§3.3.1): norm inputs and statistics, Q, K, V and the logsumexp unchanged.

    ``tokens`` is b·T on this GPU, ``act_bytes`` the activation bytes, ``split`` what divides
    a tensor that tensor parallelism does not split (n_TP with sequence parallelism, else 1).
    """
    out = dict(terms)
    if recompute_norm_up:
        for name in NORM_OUTPUTS:
            out.pop(name, None)
        if cfg.is_mla:
            q_lat = cfg.q_lora_rank or 0
            for name in (("q", "k", "v") if q_lat else ("k", "v")):
                out.pop(name, None)
            width = q_lat + cfg.kv_lora_rank + cfg.qk_rope_head_dim
            out["mla_latents"] = Fraction(act_bytes) * tokens * width / split
            out["mla_latent_stats"] = Fraction(4 * tokens * (2 if q_lat else 1), split)
    if fp8_cache:
        scale = FP8_BYTES / Fraction(act_bytes)
        for name in LINEAR_INPUTS:
            if name in out:
                out[name] = out[name] * scale
        if "attn_out" in out:
            out["attn_out"] = out["attn_out"] * E5M6_BYTES / Fraction(act_bytes)
        if moe and "gate" in out:
            out["gate"] = out["gate"] * scale
            out["up"] = out["up"] * scale
            out.pop("mlp_hidden", None)
    return out


#: One direction of a PCIe Gen5 x16 link, bytes/s: the H100 SXM datasheet prints "PCIe Gen5:
#: 128 GB/s" (both directions together; source ``nvidia-h100-datasheet``).  What an
#: activation offload to host memory crosses, each way.
PCIE_GEN5_X16_BYTES_PER_S = 64e9


@dataclass(frozen=True)
class SegmentCheckpoint:
    """Checkpointing every ``segment`` layers: the bytes one GPU holds at the backward's peak.

    ``checkpoint`` is one saved segment input (the layer input, b T B D / n_TP with
    sequence parallelism); ``layer`` the bytes one layer keeps without recomputation (the
    ``activation_bytes`` terms of the chosen attention).  In the backward pass of the last
    segment every other segment's input is still held and the segment's own ``segment``
    layers are recomputed with all their activations (its input is one of them), so
    ``peak = (n_segments - 1) x checkpoint + segment x layer``.  Every layer but those of
    a segment left un-checkpointed is recomputed once: one extra forward pass in total,
    whatever ``segment`` is.
    """

    layers: int
    segment: int
    checkpoint: float
    layer: float

    @property
    def n_segments(self) -> int:
        return -(-self.layers // self.segment)

    @property
    def peak(self) -> float:
        return (self.n_segments - 1) * self.checkpoint + self.segment * self.layer


def segment_checkpoint_bytes(
    cfg: Any,
    seq_len: int,
    micro_batch: int = 1,
    segment: int = 1,
    *,
    tp: int = 1,
    sequence_parallel: bool | None = None,
    attention: str = "flash",
    dtype: str = "bf16",
) -> SegmentCheckpoint:
    """:class:`SegmentCheckpoint` of ``cfg``: checkpoints every ``segment`` layers, per GPU.

    ``segment=1`` is per-layer (``recompute="full"``) checkpointing; Megatron-LM's
    ``--recompute-granularity full --recompute-method uniform --recompute-num-layers
    segment`` is this schedule; Chen et al. 2016's choice is ``segment`` ~ sqrt(L).
    MoE models use their MoE layers' bytes for every layer (an upper bound).
    """
    seg = int_arg("segment", segment)
    if seg > cfg.num_layers:
        raise InputError(f"segment={seg} 超过 num_layers={cfg.num_layers}：请在 1 到 {cfg.num_layers} 之间选",
                         "segment")
    kw = dict(tp=tp, sequence_parallel=sequence_parallel, attention=attention, dtype=dtype)
    full = activation_bytes(cfg, seq_len, micro_batch, recompute="full", **kw)
    keep = activation_bytes(cfg, seq_len, micro_batch, recompute="none", **kw)
    return SegmentCheckpoint(cfg.num_layers, seg, full.per_layer, keep.per_layer)


def activation_bytes_seed_heuristic(
    tokens: float,
    hidden: int,
    layers: int,
    tensors_per_layer: float = 20,
    bytes_per_value: float = 2,
) -> float:
    """The source document's estimate: ``bytes_per_value x tensors_per_layer x tokens x D x L``.

    This is the seed's heuristic ("about 20 intermediate tensors of size
    tokens x D per layer, 2 bytes each"), not a published formula.  The seed
    uses 7 tensors for "big matmuls only" and 1 for block rematerialisation.
    """
    for name, v in (
        ("tokens", tokens),
        ("hidden", hidden),
        ("layers", layers),
        ("tensors_per_layer", tensors_per_layer),
        ("bytes_per_value", bytes_per_value),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise InputError(f"{name} 必须是正数，收到 {show(v)}", name)
    return bytes_per_value * tensors_per_layer * tokens * hidden * layers


# --- FLOP cost of recomputation ---------------------------------------------


@dataclass(frozen=True)
class RecomputeFlops:
    """Training FLOPs of one step under a recomputation strategy.

    ``base`` = forward + backward (backward = 2 x forward for matmuls), the
    6 x params x tokens regime; ``extra`` = what the strategy recomputes;
    ``total = base + extra``; ``ratio = total / base``.
    """

    strategy: str
    base: float
    extra: float

    @property
    def total(self) -> float:
        return self.base + self.extra

    @property
    def ratio(self) -> float:
        return self.total / self.base


def recompute_flops(
    training_flops: float,
    forward_flops: float,
    attention_core_forward: float,
    strategy: str = "none",
    *,
    outside_layers_forward: float = 0,
) -> RecomputeFlops:
    """FLOPs of a training step with recomputation.

    * ``none``: nothing recomputed, ``extra = 0`` (6 x params x tokens).
    * ``full`` (block remat, keep only layer inputs): the forward pass of the
      checkpointed layers once more, ``extra = forward_flops -
      outside_layers_forward``.  Layer checkpointing (Megatron-LM's
      ``--recompute-granularity full``, ``torch.utils.checkpoint`` around each block)
      recomputes the transformer layers only: the LM head after the last layer keeps
      its activations and is not run again, so pass its forward FLOPs as
      ``outside_layers_forward`` (:func:`checkpoint_flops` does).  With it 0 the
      whole forward is redone: 8 x params x tokens when training = 3 x forward.
    * ``selective`` (Korthikanti): only the attention core is recomputed --
      the two s x s matmuls Q K^T and P V (softmax/dropout are not matmuls and
      count 0 here), ``extra = attention_core_forward``.
    """
    for name, v in (
        ("training_flops", training_flops),
        ("forward_flops", forward_flops),
        ("attention_core_forward", attention_core_forward),
        ("outside_layers_forward", outside_layers_forward),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise InputError(f"{name} 必须是非负数，收到 {show(v)}", name)
    if outside_layers_forward > forward_flops:
        raise InputError(
            f"outside_layers_forward={show(outside_layers_forward)} 超过了 forward_flops="
            f"{show(forward_flops)}：它只是前向中层以外的部分（输出层），请传入更小的数",
            "outside_layers_forward",
        )
    if strategy == "none":
        extra = 0
    elif strategy == "full":
        extra = forward_flops - outside_layers_forward
    elif strategy == "selective":
        extra = attention_core_forward
    else:
        raise InputError(f"strategy 必须是 {'、'.join(_RECOMPUTE)} 之一，收到 {show(strategy)}",
                         "strategy")
    return RecomputeFlops(strategy, training_flops, extra)


def attention_core_forward_flops(cfg: Any, seq_len: int, batch: int = 1, causal: bool = False) -> int:
    """Forward FLOPs of Q K^T and P V over all layers (2 FLOPs per multiply-add).

    Per layer: 2 b N s_pairs (d_qk + d_v), with s_pairs = s^2 (``causal=False``)
    or s(s+1)/2 (the lower triangle including the diagonal).  d_qk = d_v = H,
    except MLA (``cfg.kv_lora_rank > 0``): d_qk = qk_nope + qk_rope, d_v = v_head_dim.
    """
    s = int_arg("seq_len", seq_len)
    b = int_arg("batch", batch)
    if getattr(cfg, "kv_lora_rank", 0):
        d_qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        d_v = cfg.v_head_dim
    else:
        d_qk = d_v = cfg.head_dim
    pairs = s * s if not causal else s * (s + 1) // 2
    return cfg.num_layers * 2 * b * cfg.num_heads * pairs * (d_qk + d_v)


def checkpoint_flops(
    cfg: Any, seq_len: int, batch: int = 1, strategy: str = "full", causal: bool = False
) -> RecomputeFlops:
    """:func:`recompute_flops` for a model config, using ``tmath.training_flops``.

    Forward FLOPs are taken as training / 3 (each matmul's backward costs twice
    its forward under the FlopCounterMode convention).  ``full`` recomputes the
    layers, not the LM head (its forward, ``lm_head`` / 3, is left out of ``extra``):
    slightly less than 4/3 of the training FLOPs, by the LM head's share.
    """
    from tmath import training_flops  # lazy: provided by the flops module

    f = training_flops(cfg, seq_len=seq_len, batch=batch, causal=causal)
    return recompute_flops(
        f.total,
        f.total / 3,
        attention_core_forward_flops(cfg, seq_len, batch, causal),
        strategy,
        outside_layers_forward=f.breakdown["lm_head"] / 3,
    )

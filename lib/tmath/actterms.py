"""Activations a transformer block keeps for backward, term by term (no SymPy import).

The formulas are written once and evaluated on whatever they are given: with the
book's SymPy symbols (the default, for the derivations that :mod:`tmath.symbolic`
re-exports and the memory chapter displays) or with numbers for every key of
:data:`ACT_KEYS` (what :func:`tmath.memory.activation_bytes`, the ledger and the
command line do, without importing SymPy).
"""

from __future__ import annotations

from typing import Any

# --- activations saved for backward, per layer, per architecture ------------------
#
# Every term is (bytes it costs, whether tensor parallelism splits it).  The symbols are
# the book's (tmath.notation): T sequence length, B micro-batch (sequences per GPU per
# step, not the global batch), D width, N query heads, K KV heads, H head dim
# (queries/keys), d_v value head dim (= H except MLA), F MLP hidden width (4D for GPT,
# intermediate_size for a gated MLP), n_TP tensor-parallel degree, b bytes per
# activation (2 bf16, 4 fp32), b_mask bytes per dropout-mask element (1: CUDA's fused
# dropout keeps a bool mask; on the CPU PyTorch keeps the scaled mask in the activation
# dtype, b_mask = b), b_stat bytes of a norm statistic (4: LayerNorm's mean and rstd and
# RMSNorm's rstd are float32 whatever the activation dtype).  Korthikanti et al. write
# the same count with s, b, h, a (sequence, batch, width, heads); the book quotes their
# sbh(34 + 5as/h) in their letters only.

#: Keys of the activation derivation's symbols (see the comment above).
ACT_KEYS = ("T", "B", "D", "N", "K", "H", "d_v", "F", "n_TP", "b", "b_mask", "b_stat")

#: Blocks the derivation covers.
ACT_BLOCKS = ("gpt", "llama")
#: ``"eager"`` keeps the T x T softmax (and its dropout) for backward; ``"flash"``
#: (FlashAttention / fused SDPA) keeps Q, K, V, the output and a float32 logsumexp.
ACT_ATTENTION = ("eager", "flash")
#: ``"fused"``: the kernels of a training stack (Megatron-LM / Apex / FlashAttention):
#: a norm keeps its input and statistics, GELU keeps its input, SwiGLU keeps its two
#: inputs.  ``"hf"``: what transformers' eager PyTorch modules keep (GPT-2's tanh GELU is
#: written as eight elementwise ops and keeps four 4h tensors; Llama's RMSNorm keeps its
#: input and the normalised x before the weight; SiLU and the gating product keep three f
#: tensors).  ``"hf"`` is the variant the CPU cross-check measures, in float32.
ACT_KERNELS = ("fused", "hf")
ACT_RECOMPUTE = ("none", "selective", "full")

#: What each term is, in Chinese, for the book's tables.
ACT_TERM_NAMES_ZH: dict[str, str] = {
    "norm1_input": "第一个归一化的输入",
    "norm1_xhat": "第一个 RMSNorm 乘权重前的 x̂（仅 transformers）",
    "norm1_stats": "第一个归一化的统计量（fp32）",
    "qkv_input": "Q/K/V 投影的输入",
    "q": "Q（QKᵀ 的输入）",
    "k": "K（QKᵀ 的输入）",
    "v": "V（PV 的输入）",
    "softmax_out": "softmax 输出（T×T）",
    "attn_dropout_mask": "注意力 dropout 掩码（T×T）",
    "attn_dropout_out": "注意力 dropout 输出（T×T）",
    "attn_out": "输出投影的输入（注意力输出）",
    "logsumexp": "FlashAttention 的 logsumexp（fp32）",
    "resid1_dropout_mask": "注意力残差 dropout 掩码",
    "norm2_input": "第二个归一化的输入",
    "norm2_xhat": "第二个 RMSNorm 乘权重前的 x̂（仅 transformers）",
    "norm2_stats": "第二个归一化的统计量（fp32）",
    "mlp_input": "MLP 第一层的输入",
    "gelu_input": "GELU 的输入",
    "gelu_unfused": "逐元素写成的 tanh-GELU 多存的 3 个张量（仅 transformers）",
    "gate": "门控分支 gate（SiLU 的输入）",
    "up": "up 分支",
    "silu_out": "SiLU 输出（仅 transformers）",
    "mlp_hidden": "MLP 第二层的输入",
    "resid2_dropout_mask": "MLP 残差 dropout 掩码",
    "layer_input": "层输入（整层重计算只存它）",
}


def _act_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return str(value)


def activation_terms(
    block: str = "gpt",
    *,
    attention: str = "eager",
    kernels: str = "fused",
    values: dict | None = None,
) -> dict[str, tuple[Any, bool]]:
    """Bytes each tensor a block keeps for backward costs, before any parallelism.

    Returns ``{term: (bytes, split_by_tp)}`` for one layer, no recomputation.  ``block``:

    * ``"gpt"`` (GPT-2/GPT-3): pre-LayerNorm (mean and rstd kept in fp32), fused QKV with
      bias, softmax, dropout on the attention probabilities and on both residual branches,
      a two-matrix GELU MLP of width F;
    * ``"llama"``: pre-RMSNorm (rstd in fp32), GQA with K <= N KV heads, rotary embeddings,
      no dropout, a gated SiLU MLP of width F.

    ``split_by_tp`` marks the tensors inside Megatron's tensor-parallel region (the heads
    and the MLP hidden units: each of n_TP GPUs keeps 1/n_TP); the others (norm inputs and
    statistics, the inputs of the first projections, the residual dropout masks) are
    whole on every GPU unless sequence parallelism splits them along T.
    Biases and the linear layers' inputs that coincide with another term's tensor are one
    tensor (one storage) and count once.  Rotary embeddings keep their cos and sin
    tables, (T, H) each, but one pair serves every layer and every sequence: a per-model
    constant, not in the per-layer sum.  With ``attention="eager"`` and K < N, the K and
    V kept are the ones repeated to all N heads (``repeat_kv``); FlashAttention keeps
    the K heads.  ``values`` substitutes numbers for the symbols, keyed by
    :data:`ACT_KEYS` (the library's numeric path evaluates the same expressions).
    """
    _act_choice("block", block, ACT_BLOCKS)
    _act_choice("attention", attention, ACT_ATTENTION)
    _act_choice("kernels", kernels, ACT_KERNELS)
    v = _values(values)
    s, b, h, a, k, d, e, f = (v[n] for n in ("T", "B", "D", "N", "K", "H", "d_v", "F"))
    alpha, mu, sigma = v["b"], v["b_mask"], v["b_stat"]
    sb = s * b
    gpt = block == "gpt"
    hf = kernels == "hf"
    stats = 2 if gpt else 1  # LayerNorm: mean and rstd; RMSNorm: rstd
    terms: dict[str, tuple[Any, bool]] = {}

    def norm(i: int) -> None:
        terms[f"norm{i}_input"] = (alpha * sb * h, False)
        if hf and not gpt:
            terms[f"norm{i}_xhat"] = (alpha * sb * h, False)
        terms[f"norm{i}_stats"] = (sigma * stats * sb, False)

    norm(1)
    terms["qkv_input"] = (alpha * sb * h, False)
    kv_heads = a if attention == "eager" else k
    terms["q"] = (alpha * sb * a * d, True)
    terms["k"] = (alpha * sb * kv_heads * d, True)
    terms["v"] = (alpha * sb * kv_heads * e, True)
    if attention == "eager":
        terms["softmax_out"] = (alpha * a * s * s * b, True)
        if gpt:
            terms["attn_dropout_mask"] = (mu * a * s * s * b, True)
            terms["attn_dropout_out"] = (alpha * a * s * s * b, True)
    else:
        terms["logsumexp"] = (sigma * a * sb, True)
    terms["attn_out"] = (alpha * sb * a * e, True)
    if gpt:
        terms["resid1_dropout_mask"] = (mu * sb * h, False)
    norm(2)
    terms["mlp_input"] = (alpha * sb * h, False)
    if gpt:
        terms["gelu_input"] = (alpha * sb * f, True)
        if hf:
            terms["gelu_unfused"] = (3 * alpha * sb * f, True)
    else:
        terms["gate"] = (alpha * sb * f, True)
        terms["up"] = (alpha * sb * f, True)
        if hf:
            terms["silu_out"] = (alpha * sb * f, True)
    terms["mlp_hidden"] = (alpha * sb * f, True)
    if gpt:
        terms["resid2_dropout_mask"] = (mu * sb * h, False)
    return terms


#: Terms that selective recomputation (Korthikanti et al. 2022) drops: the T x T ones.
ACT_SELECTIVE_DROPS = ("softmax_out", "attn_dropout_mask", "attn_dropout_out")


def activation_layer_terms(
    block: str = "gpt",
    *,
    recompute: str = "none",
    attention: str = "eager",
    kernels: str = "fused",
    sequence_parallel: bool = False,
    values: dict | None = None,
) -> dict[str, Any]:
    """Bytes per GPU each kept tensor of one layer costs, with n_TP-way tensor parallelism.

    ``recompute``: ``"none"`` keeps every term of :func:`activation_terms`;
    ``"selective"`` recomputes the attention core and drops its T x T terms;
    ``"full"`` keeps only the layer input (b T B D) and recomputes the whole layer.
    A term inside the TP region is divided by n_TP; the rest only with
    ``sequence_parallel`` (then everything is divided by n_TP).
    """
    _act_choice("recompute", recompute, ACT_RECOMPUTE)
    if not isinstance(sequence_parallel, bool):
        raise TypeError(f"sequence_parallel must be a bool, got {sequence_parallel!r}")
    v = _values(values)
    t = v["n_TP"]
    if recompute == "full":
        full = v["b"] * v["T"] * v["B"] * v["D"]
        return {"layer_input": full / t if sequence_parallel else full}
    out = {}
    for name, (expr, split) in activation_terms(block, attention=attention, kernels=kernels,
                                                values=values).items():
        if recompute == "selective" and name in ACT_SELECTIVE_DROPS:
            continue
        out[name] = expr / t if (split or sequence_parallel) else expr
    return out


def _values(values: dict | None) -> dict[str, Any]:
    """``values`` completed with the registry's SymPy symbols for every missing key."""
    given = dict(values or {})
    missing = [key for key in ACT_KEYS if key not in given]
    if missing:
        from tmath.notation import sym

        given.update({key: sym(key) for key in missing})
    return given

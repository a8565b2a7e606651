"""SymPy derivations the book states and simplifies.

These are written independently of :mod:`tmath.params` (which counts from a
:class:`~tmath.config.ModelConfig` the way the reference implementations lay out
their tensors), so that the two can check each other.
"""

from __future__ import annotations

import sympy as sp

from tmath.notation import sym, syms

#: Model width, FFN width, layers, vocabulary and context length (Part I's letters),
#: from the book's notation registry (:mod:`tmath.notation`).
d, f, n_layers, vocab, n_ctx = syms("d F L V n_ctx")


def gpt_layer_terms(width: sp.Expr = d, ffn: sp.Expr = f) -> dict[str, sp.Expr]:
    """Parameters of one GPT-2/GPT-3 block, tensor by tensor.

    A GPT block holds the fused Q, K, V projection and the output projection
    (each with a bias), a 2-matrix MLP ``W_1`` (d -> F) and ``W_2`` (F -> d) with
    biases, and two LayerNorms with a scale and a shift each.
    Keys are LaTeX names of the tensors, so a table of them renders as math.
    """
    return {
        "W^Q, W^K, W^V": 3 * width * width,
        "b^Q, b^K, b^V": 3 * width,
        "W^O": width * width,
        "b^O": width,
        "W_1": width * ffn,
        "b_1": ffn,
        "W_2": ffn * width,
        "b_2": width,
        r"\gamma, \beta \text{ of 2 LayerNorms}": 4 * width,
    }


def gpt_layer_params(width: sp.Expr = d, ffn: sp.Expr = f) -> sp.Expr:
    """Total parameters of one GPT block (sum of :func:`gpt_layer_terms`)."""
    return sp.expand(sum(gpt_layer_terms(width, ffn).values()))


def gpt_model_params(
    width: sp.Expr = d,
    ffn: sp.Expr = f,
    layers: sp.Expr = n_layers,
    vocabulary: sp.Expr = vocab,
    context: sp.Expr = n_ctx,
) -> sp.Expr:
    """Parameters of a GPT-2/GPT-3 model with tied input/output embeddings.

    ``layers`` blocks, a token embedding ``V x d`` (shared with the LM head), a
    learned position embedding ``n_ctx x d`` and the final LayerNorm (2d).
    """
    return sp.expand(
        layers * gpt_layer_params(width, ffn) + vocabulary * width + context * width + 2 * width
    )


# --- the full ledger of a decoder-only transformer (seed 003, section 3) ------
#
# Notation of the ledger chapters (tmath.notation): B sequences of T tokens, width D,
# FFN width F, L layers, N query heads and K key/value heads of width H, vocabulary V,
# and n_ctx learned positions (GPT-2 only; P is the parameter count, never positions).
# All are positive integer symbols.
B, T, D, F, L, N, K, H, V = syms("B T D F L N K H V")

#: Components of one decoder layer, in the order the ledger prints them.
LAYER_COMPONENTS: tuple[str, ...] = ("mlp", "attention_proj", "attention_dot", "norms")
#: Components of the whole model (layer components summed over L, plus the global ones).
MODEL_COMPONENTS: tuple[str, ...] = (
    "embedding", "positions", "attention_proj", "attention_dot", "mlp", "norms", "lm_head",
)
_MLP_KINDS = ("gated", "gelu")
_NORM_KINDS = ("rmsnorm", "layernorm")


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(map(repr, choices))}")
    return value  # type: ignore[return-value]


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True/False), got {value!r}")
    return value


def ledger_terms(
    mlp: str = "gated",
    *,
    causal: bool = False,
    norm: str = "rmsnorm",
    bias: bool = False,
    qkv_bias: bool = False,
) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """Per-layer ledger: ``{component: (parameters, training FLOPs)}`` as SymPy expressions.

    Components (:data:`LAYER_COMPONENTS`) of one decoder layer processing ``B``
    sequences of ``T`` tokens:

    ``mlp``            gated (SiLU, 3 matrices D x F, D x F, F x D: ``3DF``) or
                       ``mlp="gelu"`` (2 matrices: ``2DF``); training ``6BT x`` params
    ``attention_proj`` W_Q (D x NH), W_K and W_V (D x KH each), W_O (NH x D):
                       ``2D(N+K)H``; training ``12BTD(N+K)H``
    ``attention_dot``  Q K^T and P V over all N query heads (GQA keys and values
                       are shared, not smaller in FLOPs): no parameters, training
                       ``12 B T^2 N H``, or ``6 B N H T(T+1)`` with ``causal=True``
                       (only the lower triangle, diagonal included)
    ``norms``          two pre-norms: ``2D`` (RMSNorm) or ``4D`` (LayerNorm, scale
                       and shift); no FLOPs

    FLOPs follow ``tmath.training_flops``: matmuls only (2 per multiply-add),
    backward = 2 x forward, so training = 3 x forward; norms, softmax,
    activations and biases cost nothing.  ``bias=True`` adds the GPT-2 biases:
    ``(N+2K)H + D`` in attention and ``F + D`` in a gelu MLP (``2F + D`` gated);
    ``qkv_bias=True`` (Qwen2) adds only the Q, K, V biases ``(N+2K)H``.
    """
    _check_choice("mlp", mlp, _MLP_KINDS)
    _check_choice("norm", norm, _NORM_KINDS)
    _check_bool("causal", causal)
    _check_bool("bias", bias)
    _check_bool("qkv_bias", qkv_bias)
    n_mat = 3 if mlp == "gated" else 2
    mlp_p = n_mat * D * F + (((n_mat - 1) * F + D) if bias else 0)
    attn_p = 2 * D * (N + K) * H + (((N + 2 * K) * H + D) if bias else 0)
    if qkv_bias and not bias:
        attn_p += (N + 2 * K) * H
    entries = T * (T + 1) / 2 if causal else T**2  # score entries per head and sequence
    # forward: Q K^T is 2 B N H x entries, P V the same; training is 3 x forward
    dot_f = 3 * 2 * 2 * B * N * H * entries
    return {
        "mlp": (mlp_p, 6 * B * T * n_mat * D * F),
        "attention_proj": (attn_p, 6 * B * T * 2 * D * (N + K) * H),
        "attention_dot": (sp.Integer(0), sp.expand(dot_f)),
        "norms": ((2 if norm == "rmsnorm" else 4) * D, sp.Integer(0)),
    }


def ledger_model(
    mlp: str = "gated",
    *,
    causal: bool = False,
    norm: str = "rmsnorm",
    bias: bool = False,
    qkv_bias: bool = False,
    tied: bool = False,
    learned_positions: bool = False,
) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """Whole-model ledger ``{component: (parameters, training FLOPs)}`` (:data:`MODEL_COMPONENTS`).

    The layer components of :func:`ledger_terms` times ``L``; ``norms`` also
    holds the final norm.  ``embedding`` is the V x D token table (a lookup: no
    FLOPs), ``positions`` the n_ctx x D learned position table (0 unless
    ``learned_positions``), ``lm_head`` the D x V unembedding (``DV`` parameters
    unless ``tied`` to the embedding; ``6BTDV`` training FLOPs either way).

    Keys match ``tmath.count_params(cfg).breakdown`` (``attention_proj`` is its
    ``attention``) and ``tmath.training_flops(cfg, T, B).breakdown``
    (``attention_dot`` is ``attention_scores + attention_values``); the rotary
    table that ``training_flops`` counts as ``rope`` is not in this ledger.
    """
    _check_bool("tied", tied)
    _check_bool("learned_positions", learned_positions)
    layer = ledger_terms(mlp, causal=causal, norm=norm, bias=bias, qkv_bias=qkv_bias)
    final_norm = (2 if norm == "layernorm" else 1) * D
    out: dict[str, tuple[sp.Expr, sp.Expr]] = {
        "embedding": (V * D, sp.Integer(0)),
        "positions": (n_ctx * D if learned_positions else sp.Integer(0), sp.Integer(0)),
    }
    for name in ("attention_proj", "attention_dot", "mlp"):
        p, f = layer[name]
        out[name] = (sp.expand(L * p), sp.expand(L * f))
    out["norms"] = (sp.expand(L * layer["norms"][0] + final_norm), sp.Integer(0))
    out["lm_head"] = (sp.Integer(0) if tied else D * V, 6 * B * T * D * V)
    return {k: out[k] for k in MODEL_COMPONENTS}


def ledger_totals(ledger: dict[str, tuple[sp.Expr, sp.Expr]]) -> tuple[sp.Expr, sp.Expr]:
    """(total parameters, total training FLOPs) of a ledger, expanded."""
    return (
        sp.expand(sum(p for p, _ in ledger.values())),
        sp.expand(sum(f for _, f in ledger.values())),
    )


def ledger_subs(cfg: object, seq_len: int = 1, batch: int = 1) -> dict[sp.Symbol, int]:
    """Values of the ledger symbols for a dense, non-MLA ``tmath.ModelConfig``.

    ``{B: batch, T: seq_len, D, F, L, N, K, H, V, n_ctx}`` (n_ctx = ``max_position``).
    MoE and MLA configs raise ``ValueError``: this ledger has no experts or latents.
    """
    from tmath.config import ModelConfig

    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if cfg.is_moe or cfg.is_mla:
        raise ValueError(
            f"cfg {cfg.name!r} is a MoE or MLA model; ledger_subs covers dense GQA/MHA "
            "models only (use tmath.count_params for the others)"
        )
    for name, v in (("seq_len", seq_len), ("batch", batch)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    return {
        B: batch, T: seq_len, D: cfg.hidden_size, F: cfg.intermediate_size, L: cfg.num_layers,
        N: cfg.num_heads, K: cfg.num_kv_heads, H: cfg.head_dim, V: cfg.vocab_size,
        n_ctx: cfg.max_position,
    }


def ledger_for(cfg: object, *, causal: bool = False) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """The symbolic :func:`ledger_model` whose options match ``cfg`` (dense models)."""
    ledger_subs(cfg)  # validates cfg
    extras = [f for f, plain in (("qk_norm", "none"), ("norms_per_layer", 2), ("attention_sinks", False))
              if getattr(cfg, f, plain) != plain]
    if extras:
        raise ValueError(
            f"cfg {cfg.name!r} sets {', '.join(extras)}: the symbolic ledger knows two norms per "  # type: ignore[attr-defined]
            "layer, no q/k norms and no attention sinks; use tmath.count_params for this family"
        )
    all_bias = cfg.qkv_bias and cfg.out_bias and cfg.mlp_bias  # type: ignore[attr-defined]
    if not all_bias and (cfg.out_bias or cfg.mlp_bias):  # type: ignore[attr-defined]
        raise ValueError(
            f"cfg {cfg.name!r}: the symbolic ledger knows all biases (GPT-2) or Q/K/V "  # type: ignore[attr-defined]
            "biases only (Qwen2); set out_bias and mlp_bias both True with qkv_bias, or False"
        )
    return ledger_model(
        cfg.mlp,  # type: ignore[attr-defined]
        causal=causal,
        norm=cfg.norm,  # type: ignore[attr-defined]
        bias=all_bias,
        qkv_bias=cfg.qkv_bias,  # type: ignore[attr-defined]
        tied=cfg.tie_embeddings,  # type: ignore[attr-defined]
        learned_positions=cfg.learned_positions,  # type: ignore[attr-defined]
    )


#: The seed's simplifying assumptions for "T > 8D": F = 4D, MHA (K = N) and N H = D.
SEED_ASSUMPTIONS: dict[sp.Symbol, sp.Expr] = {F: 4 * D, K: N, H: D / N}


def crossover_expr(
    mlp: str = "gated", *, against: str = "all", causal: bool = False
) -> sp.Expr:
    """Context length T* at which attention dot-product FLOPs equal the other matmuls.

    Solves ``attention_dot(T) = other(T)`` per layer for the positive root T,
    using :func:`ledger_terms`: ``against="all"`` compares with the MLP and the
    Q/K/V/O projections, ``"ffn"`` with the MLP only.  The LM head (one per
    model, not per layer) is left out, as in the seed.  B and L cancel.  Returns
    an expression in D, F, N, K, H; substitute :data:`SEED_ASSUMPTIONS` to get
    the seed's 8D (gated, all, not causal).
    """
    _check_choice("against", against, ("all", "ffn"))
    terms = ledger_terms(mlp, causal=causal)
    other = terms["mlp"][1] + (terms["attention_proj"][1] if against == "all" else 0)
    roots = [r for r in sp.solve(sp.Eq(terms["attention_dot"][1], other), T) if r != 0]
    if len(roots) != 1:  # pragma: no cover - the equation is linear in T after T = 0
        raise RuntimeError(f"expected one nonzero crossover root, got {roots}")
    return sp.simplify(roots[0])


# --- multi-head attention as block matrices (book/gpt3/multihead) -----------------------
# n tokens, model width, head width, output width: symbols for the block-matrix identities.
n_tok, d_head, d_out = syms("n d_head d_out")


def _check_h(h: int) -> int:
    if isinstance(h, bool) or not isinstance(h, int) or h < 1:
        raise ValueError(f"h (number of heads) must be a positive int, got {h!r}")
    return h


def head_blocks(name: str, h: int, rows: sp.Expr, cols: sp.Expr) -> list[sp.MatrixSymbol]:
    """``h`` matrix symbols ``name^{(1)} .. name^{(h)}``, each ``rows x cols``."""
    _check_h(h)
    return [sp.MatrixSymbol(f"{name}^{{({c})}}", rows, cols) for c in range(1, h + 1)]


def split_projection_identity(h: int = 3) -> tuple[sp.MatrixExpr, sp.MatrixExpr]:
    """``X [W^(1) | ... | W^(h)]`` block-collapsed, and ``[X W^(1) | ... | X W^(h)]``.

    ``X`` is ``n x d``, each ``W^(c)`` is ``d x d_head``.  The two are equal: one big
    product split into column blocks is the ``h`` per-head products (8.10').
    """
    X = sp.MatrixSymbol("X", n_tok, d)
    ws = head_blocks("W", h, d, d_head)
    big = sp.block_collapse(X * sp.BlockMatrix([ws]))
    per_head = sp.BlockMatrix([[X * w for w in ws]])
    return big, per_head


def concat_output_identity(h: int = 3) -> tuple[sp.MatrixExpr, sp.MatrixExpr]:
    """``[Z^(1) | ... | Z^(h)] W^O`` with ``W^O`` split into row blocks, block-collapsed,
    and ``sum_c Z^(c) W^{O,(c)}``.  ``Z^(c)`` (a head's output) is ``n x d_head``,
    ``W^{O,(c)}`` is ``d_head x d_out``.  The two are equal (8.14'-8.15')."""
    hs = head_blocks("Z", h, n_tok, d_head)
    os_ = head_blocks("W_O", h, d_head, d_out)
    concat_then_project = sp.block_collapse(sp.BlockMatrix([hs]) * sp.BlockMatrix([[o] for o in os_]))
    sum_of_heads = sp.MatAdd(*[a * b for a, b in zip(hs, os_, strict=True)])
    return concat_then_project, sum_of_heads


def entrywise_split_difference(n: int = 2, width: int = 4, h: int = 2) -> sp.Matrix:
    """Entry by entry, with explicit symbols: ``(X W)`` minus ``[X W^(1) | ... | X W^(h)]``
    for ``X`` ``n x width`` and ``W`` ``width x width`` (``width / h`` columns per head).

    Returns the expanded difference matrix, which is the zero matrix.
    """
    _check_h(h)
    if width % h:
        raise ValueError(f"width={width} must be divisible by h={h}")
    X = sp.Matrix(n, width, lambda i, j: sp.Symbol(f"x_{i + 1}{j + 1}"))
    W = sp.Matrix(width, width, lambda i, j: sp.Symbol(f"w_{i + 1}{j + 1}"))
    k = width // h
    per_head = sp.Matrix.hstack(*[X * W[:, c * k:(c + 1) * k] for c in range(h)])
    return sp.expand(X * W - per_head)


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
#: The symbols themselves, from the notation registry, by key.
ACT_SYMBOLS: dict[str, sp.Symbol] = {key: sym(key) for key in ACT_KEYS}

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
) -> dict[str, tuple[sp.Expr, bool]]:
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
    v = dict(ACT_SYMBOLS)
    if values:
        v.update({name: values[name] for name in values})
    s, b, h, a, k, d, e, f = (v[n] for n in ("T", "B", "D", "N", "K", "H", "d_v", "F"))
    alpha, mu, sigma = v["b"], v["b_mask"], v["b_stat"]
    sb = s * b
    gpt = block == "gpt"
    hf = kernels == "hf"
    stats = 2 if gpt else 1  # LayerNorm: mean and rstd; RMSNorm: rstd
    terms: dict[str, tuple[sp.Expr, bool]] = {}

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
) -> dict[str, sp.Expr]:
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
    v = dict(ACT_SYMBOLS)
    if values:
        v.update(values)
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


# --- FLOPs counted from the entries of a product (book/flops) ------------------------
#
# A matmul's FLOPs are not typed in: SymPy writes out the entries of the product (and,
# by differentiating a loss, of its gradients), and the functions below count the
# multiplications and additions in those entries.  An entry of a product of matrix
# symbols with symbolic sizes is a ``Sum`` over the contracted index, so its number of
# terms is a symbol (the inner size); an entry of an explicit ``sp.Matrix`` is a plain
# sum of products, counted term by term.


def entry_ops(entry: sp.Expr) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """``(terms, multiplications, additions)`` in one entry of a product.

    ``terms`` is the number of products added up (a ``Sum`` over ``j`` from 0 to
    ``d_2 - 1`` has ``d_2`` of them); a product of ``n`` factors is ``n - 1``
    multiplications; adding ``m`` terms is ``m - 1`` additions.  Numeric
    coefficients are not counted (there are none in a matmul).
    """
    if isinstance(entry, sp.Sum):
        terms, muls, adds = entry_ops(entry.function)
        count = sp.Integer(1)
        for _, lo, hi in entry.limits:
            count *= hi - lo + 1
        return terms * count, muls * count, adds * count + count - 1
    if isinstance(entry, sp.Add):
        parts = [entry_ops(a) for a in entry.args]
        terms = sum((p[0] for p in parts), sp.Integer(0))
        muls = sum((p[1] for p in parts), sp.Integer(0))
        adds = sum((p[2] for p in parts), sp.Integer(0))
        return terms, muls, adds + len(parts) - 1
    if isinstance(entry, sp.Mul):
        factors = [a for a in entry.args if not a.is_number]
        parts = [entry_ops(a) for a in factors]
        if any(p[0] != 1 for p in parts):
            return entry_ops(sp.expand(entry))
        muls = sum((p[1] for p in parts), sp.Integer(0))
        return sp.Integer(1), muls + len(factors) - 1, sp.Integer(0)
    if entry.is_number:
        raise ValueError(f"entry {entry} is a number: count the entries of a product of matrices")
    return sp.Integer(1), sp.Integer(0), sp.Integer(0)


def product_ops(product: sp.MatrixBase | sp.MatrixExpr) -> dict[str, sp.Expr]:
    """Operations in all the entries of ``product``: its counts, and its FLOPs.

    ``product`` is an explicit ``sp.Matrix`` (every entry counted) or a matrix
    expression of matrix symbols with symbolic sizes (one generic entry
    ``product[i, j]`` counted, times the number of entries).  Returns ``entries``,
    ``terms`` (per entry), ``muls`` and ``adds`` (over all entries) and ``flops``:
    one multiply-add, 2 FLOPs, per term, the convention of
    ``torch.utils.flop_counter.FlopCounterMode`` (it writes 2·d_1·d_2·d_3 for a
    product that strictly needs d_1·d_3·(2·d_2 − 1) operations).
    """
    rows, cols = product.shape
    if isinstance(product, sp.MatrixBase):
        counts = [entry_ops(sp.expand(e)) for e in product]
        terms = {c[0] for c in counts}
        total_terms = sum((c[0] for c in counts), sp.Integer(0))
        muls = sum((c[1] for c in counts), sp.Integer(0))
        adds = sum((c[2] for c in counts), sp.Integer(0))
        per_entry = terms.pop() if len(terms) == 1 else sp.nan
    else:
        i, j = sp.Dummy("i", integer=True), sp.Dummy("j", integer=True)
        per_entry, m1, a1 = entry_ops(product[i, j])
        n = rows * cols
        total_terms, muls, adds = n * per_entry, n * m1, n * a1
    return {
        "entries": sp.expand(rows * cols),
        "terms": sp.expand(per_entry),
        "muls": sp.expand(muls),
        "adds": sp.expand(adds),
        "flops": sp.expand(2 * total_terms),
    }


def matmul_training_products(d_1: sp.Expr, d_2: sp.Expr, d_3: sp.Expr,
                             ) -> dict[str, sp.MatrixExpr]:
    """The three products of one training step of ``C = A B``, derived by SymPy.

    ``A`` is ``d_1 x d_2`` (d_1 tokens), ``B`` is ``d_2 x d_3`` (the parameters),
    ``G = dL/dC`` is the upstream gradient.  A loss whose differential is
    ``dL = Σ G_ik dC_ik`` is ``L = tr(Gᵀ C)``; SymPy's matrix calculus
    differentiates it: ``"grad_A"`` is ``dL/dA`` (``G Bᵀ``) and ``"grad_B"`` is
    ``dL/dB`` (``Aᵀ G``).  ``"forward"`` is ``A B``.
    """
    A = sp.MatrixSymbol("A", d_1, d_2)
    B_ = sp.MatrixSymbol("B", d_2, d_3)
    G = sp.MatrixSymbol("G", d_1, d_3)
    loss = sp.trace(G.T * (A * B_))
    return {"forward": A * B_, "grad_A": sp.diff(loss, A), "grad_B": sp.diff(loss, B_)}


def matmul_training_flops(d_1: sp.Expr, d_2: sp.Expr, d_3: sp.Expr) -> dict[str, sp.Expr]:
    """FLOPs of the forward product and of the two gradients of ``C = A B``, counted.

    ``{"forward", "grad_A", "grad_B", "total"}``: :func:`product_ops` of each of
    :func:`matmul_training_products`; the total is ``6 d_1 d_2 d_3``.
    """
    out = {k: product_ops(v)["flops"] for k, v in matmul_training_products(d_1, d_2, d_3).items()}
    out["total"] = sp.expand(sum(out.values()))
    return out

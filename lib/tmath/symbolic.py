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


# --- activations saved for backward: the formulas live in tmath.actterms (no SymPy import) --
from tmath.actterms import (  # noqa: E402, F401  (re-exported)
    ACT_ATTENTION,
    ACT_BLOCKS,
    ACT_KERNELS,
    ACT_KEYS,
    ACT_RECOMPUTE,
    ACT_SELECTIVE_DROPS,
    ACT_TERM_NAMES_ZH,
    activation_layer_terms,
    activation_terms,
)

#: The symbols of the activation derivation, from the notation registry, by key.
ACT_SYMBOLS: dict[str, sp.Symbol] = {key: sym(key) for key in ACT_KEYS}


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

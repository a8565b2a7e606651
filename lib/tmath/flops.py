"""Exact FLOP counts of one forward / forward+backward pass, and the einsum rule.

Conventions (the same as ``torch.utils.flop_counter.FlopCounterMode``):

* Only matmul-family ops count: a product of an ``m×k`` by a ``k×n`` matrix is
  ``2·m·k·n`` FLOPs (one multiply and one add per term); biases, norms,
  softmax, activations, residual adds, and embedding lookups are free.
* The LM head is counted for every position (``2·B·T·D·V``).
* Attention is the "eager" implementation: ``Q·Kᵀ`` and ``P·V`` as full
  ``T×T`` batched matmuls over all ``N`` query heads (GQA/MLA keys and values
  are expanded to ``N`` heads first). ``causal=True`` instead counts only the
  lower triangle, diagonal included: ``T(T+1)/2`` of the ``T²`` score entries
  (what a causal kernel that skips masked blocks could save at best).
* Backward = 2 × forward for every matmul: for ``Y = X·W`` both ``dX = dY·Wᵀ``
  and ``dW = Xᵀ·dY`` are computed. That includes the first layer's input
  gradient, because the token embedding is trainable, so the embedding output
  requires grad; its own gradient (a scatter-add) is free. Training = 3 × forward.
* ``rope``: transformers builds the rotary cos/sin table each forward with one
  small matmul of inverse frequencies by positions, ``2·(rope_dim/2)·T`` FLOPs
  (independent of the batch: default ``position_ids`` have batch 1). It needs
  no gradient, so it is counted once in training. It is 0 with learned positions.
  Gemma 3 builds one table per layer type (local and global): twice that.
* Element-wise work is free, as in FlopCounterMode: norms (q/k norms
  included), Gemma's logit and attention softcapping (``tanh``), the embedding
  scale, gpt-oss's attention sinks (a concatenated logit column) and the
  biases of its experts and router (an add after the matmul).
* Fused projections (Phi-3's ``qkv_proj``, ``gate_up_proj``) are the same
  products concatenated: the same count.

Sliding-window attention (``cfg.sliding_window``, per layer ``cfg.layer_types``)
has two counts, and the ``window`` argument picks one:

* ``window=False`` (the default): what eager attention computes. It builds
  the whole ``T×T`` score matrix and masks the positions outside the window,
  so a window layer costs what a global layer costs. This is the count that
  FlopCounterMode measures, and the one cross-checked against it.
* ``window=True``: the useful FLOPs, those of the (query, key) pairs a window
  layer actually uses; what a kernel that skips the masked blocks could do at
  best. With ``causal=True`` a window-W layer counts the pairs
  ``0 ≤ i − j < W``: ``Σᵢ min(i + 1, W)`` entries; with ``causal=False`` it
  counts ``T·min(T, W)`` (each query against a dense band of W keys, the
  analogue of the full ``T²`` count of a global layer). Global layers are
  counted as without the option. Models without windows give the same
  number either way.

Breakdown keys: ``attention_proj`` (Q/K/V/O, or MLA's projections),
``attention_scores`` (Q·Kᵀ), ``attention_values`` (P·V), ``mlp`` (dense
layers), ``routed_experts`` (k experts per token), ``shared_experts``,
``router``, ``lm_head``, ``rope``; :func:`training_flops` with
``attention="flash"`` adds ``attention_recompute`` (the backward's second QKᵀ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from math import prod

from tmath._checks import int_arg
from tmath.config import ModelConfig
from tmath.params import count_params

FLOP_KEYS: tuple[str, ...] = (
    "attention_proj",
    "attention_scores",
    "attention_values",
    "mlp",
    "routed_experts",
    "shared_experts",
    "router",
    "lm_head",
    "rope",
)
ATTENTION_DOT_KEYS = ("attention_scores", "attention_values")
FFN_KEYS = ("mlp", "routed_experts", "shared_experts")


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one pass over ``batch`` sequences of ``seq_len`` tokens."""

    total: int
    breakdown: dict[str, int] = field(default_factory=dict)
    seq_len: int = 0
    batch: int = 0
    causal: bool = False
    window: bool = False


def _score_entries(T: int, causal: bool) -> int:
    return T * (T + 1) // 2 if causal else T * T


def _window_entries(T: int, W: int, causal: bool) -> int:
    """Score entries a window-W layer uses: Σᵢ min(i+1, W) causal, T·min(T, W) otherwise."""
    if not causal:
        return T * min(T, W)
    if T <= W:
        return T * (T + 1) // 2
    return W * (W + 1) // 2 + (T - W) * W


def score_entries_per_head(cfg: ModelConfig, seq_len: int, causal: bool = False,
                           window: bool = False) -> int:
    """Score-matrix entries of one sequence and one head, summed over the layers.

    ``window=False``: every layer computes ``T²`` (``T(T+1)/2`` causal) entries;
    ``window=True``: a sliding-window layer counts only the entries inside its
    window (see the module docstring).
    """
    T = int_arg("seq_len", seq_len)
    full = _score_entries(T, causal)
    if not window:
        return cfg.num_layers * full
    return sum(full if w is None else _window_entries(T, w, causal) for w in cfg.layer_windows)


def attention_proj_flops_per_token(cfg: ModelConfig) -> int:
    """Forward FLOPs of one layer's attention projections for one token."""
    D, N = cfg.hidden_size, cfg.num_heads
    if cfg.is_mla:
        qk = cfg.qk_head_dim
        q = 2 * D * N * qk if cfg.q_lora_rank is None else 2 * cfg.q_lora_rank * (D + N * qk)
        kv = 2 * D * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
        kv += 2 * cfg.kv_lora_rank * N * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        return q + kv + 2 * N * cfg.v_head_dim * D
    H, K = cfg.head_dim, cfg.num_kv_heads
    return 2 * D * (N + 2 * K) * H + 2 * N * H * D


def _mlp_flops_per_token(cfg: ModelConfig, width: int) -> int:
    return 2 * cfg.hidden_size * width * (2 if cfg.mlp == "gelu" else 3)


def _check_flags(causal: object, window: object) -> None:
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if not isinstance(window, bool):
        raise TypeError(f"window must be a bool (False: what eager computes, True: useful "
                        f"FLOPs inside sliding windows), got {window!r}")


def forward_flops(cfg: ModelConfig, seq_len: int, batch: int = 1, causal: bool = False,
                  window: bool = False) -> FlopCount:
    """Matmul FLOPs of one forward pass (see the module docstring for what counts).

    ``window=False`` counts what eager attention computes (cross-checked against
    FlopCounterMode); ``window=True`` counts only the useful pairs inside each
    sliding-window layer's window.
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    T = int_arg("seq_len", seq_len)
    B = int_arg("batch", batch)
    _check_flags(causal, window)
    BT, N = B * T, cfg.num_heads
    S = score_entries_per_head(cfg, T, causal, window)
    b = dict.fromkeys(FLOP_KEYS, 0)
    L = cfg.num_layers
    b["attention_proj"] = L * BT * attention_proj_flops_per_token(cfg)
    b["attention_scores"] = 2 * B * N * S * cfg.qk_head_dim
    b["attention_values"] = 2 * B * N * S * cfg.value_head_dim
    b["mlp"] = cfg.num_dense_layers * BT * _mlp_flops_per_token(cfg, cfg.intermediate_size)
    if cfg.is_moe:
        Lm, Fm = cfg.num_moe_layers, cfg.moe_intermediate_size
        b["routed_experts"] = Lm * BT * cfg.experts_per_token * _mlp_flops_per_token(cfg, Fm)
        b["shared_experts"] = Lm * BT * _mlp_flops_per_token(cfg, cfg.n_shared_experts * Fm)
        b["router"] = Lm * BT * 2 * cfg.hidden_size * cfg.n_routed_experts
    b["lm_head"] = 2 * BT * cfg.hidden_size * cfg.vocab_size
    b["rope"] = cfg.rope_dim * T * cfg.rope_tables
    return FlopCount(sum(b.values()), b, T, B, causal, window)


def training_flops(cfg: ModelConfig, seq_len: int, batch: int = 1, causal: bool = False,
                   window: bool = False, attention: str = "eager") -> FlopCount:
    """Matmul FLOPs of one forward + backward pass: 3 × forward, the rope table once.

    ``window`` as in :func:`forward_flops`.

    ``attention`` names the attention kernel's convention:

    * ``"eager"`` (the default, what FlopCounterMode measures on transformers'
      eager attention): the forward saves the probabilities, so the backward
      does two matmuls per forward matmul and the two attention products cost
      3 × their forward, 12·B·T·S·N·H per layer (T = S, H = head width).
    * ``"flash"``: FlashAttention saves neither the scores nor the
      probabilities; its backward recomputes S = QKᵀ once more, so the scores
      product costs 4 × its forward and the attention products 14·B·T·S·N·H
      per layer (Dao et al. 2022 measure 75.2 against 66.6 GFLOPs on GPT-2
      medium for this reason).  The extra matmul is the breakdown's
      ``"attention_recompute"`` entry.
    """
    if attention not in ("eager", "flash"):
        raise ValueError(
            f"attention={attention!r}: use 'eager' (probabilities saved) or 'flash' "
            "(the backward recomputes QK^T)"
        )
    fwd = forward_flops(cfg, seq_len, batch, causal, window)
    b = {k: (v if k == "rope" else 3 * v) for k, v in fwd.breakdown.items()}
    if attention == "flash":
        b["attention_recompute"] = fwd.breakdown["attention_scores"]
    return FlopCount(sum(b.values()), b, fwd.seq_len, fwd.batch, causal, window)


def einsum_flops(spec: str, *shapes: tuple[int, ...]) -> int:
    """FLOPs of a two-operand einsum by the einsum rule.

    ``2 × (product of the sizes of all distinct indices)`` when some index is summed
    away (contracting: in both inputs, not in the output; or in one input only and not
    in the output): every index is counted once, whether it is free (in one input and
    the output), batching (in both inputs and the output) or contracting.  E.g.
    ``einsum_flops("BTD,DF->BTF", (B, T, D), (D, F)) == 2*B*T*D*F``.  The factor 2 is
    one multiply plus one add per term (FlopCounterMode's convention for matmuls,
    which it applies even when the contraction has length 1).

    When every index reaches the output nothing is added: an outer product
    (``"i,j->ij"``) or an element-wise product (``"ij,ij->ij"``) is one multiply per
    output element, ``1 × (product of the sizes)``.
    """
    if not isinstance(spec, str) or "->" not in spec:
        raise ValueError(f"spec must look like 'ij,jk->ik', got {spec!r}")
    lhs, out = spec.replace(" ", "").split("->", 1)
    terms = lhs.split(",")
    if len(terms) != 2:
        raise ValueError(f"spec {spec!r} must have exactly two operands, got {len(terms)}")
    if len(shapes) != 2:
        raise ValueError(f"einsum_flops needs 2 shapes for {spec!r}, got {len(shapes)}")
    sizes: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        if not term.isalpha() or len(set(term)) != len(term):
            raise ValueError(
                f"operand {i} subscripts {term!r} must be distinct letters (no '...', no repeats)"
            )
        shape = tuple(shape)
        if len(term) != len(shape):
            raise ValueError(
                f"operand {i} has subscripts {term!r} ({len(term)} dims) but shape {shape} "
                f"({len(shape)} dims); make them match"
            )
        for ch, n in zip(term, shape, strict=True):
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise ValueError(f"size of index {ch!r} must be a positive int, got {n!r}")
            if sizes.setdefault(ch, n) != n:
                raise ValueError(
                    f"index {ch!r} has size {sizes[ch]} in one operand and {n} in another"
                )
    if not out.isalpha() and out != "" or len(set(out)) != len(out):
        raise ValueError(f"output subscripts {out!r} must be distinct letters")
    missing = set(out) - set(sizes)
    if missing:
        raise ValueError(f"output index/indices {''.join(sorted(missing))!r} appear in no input")
    summed = set(sizes) - set(out)  # indices added over: without one, no additions at all
    return (2 if summed else 1) * prod(sizes.values())


def einsum_dims(spec: str) -> dict[str, str]:
    """Classify each index of a two-operand spec: 'batching', 'contracting', 'free' (in one
    input and the output) or 'summed' (in one input only, summed away)."""
    lhs, out = spec.replace(" ", "").split("->", 1)
    a, b = lhs.split(",")
    kinds = {}
    for ch in dict.fromkeys(a + b):
        both = ch in a and ch in b
        if both:
            kinds[ch] = "batching" if ch in out else "contracting"
        else:
            kinds[ch] = "free" if ch in out else "summed"
    return kinds


_N_CHOICES = ("active", "total", "non_embedding")


def _n_for_6nt(cfg: ModelConfig, which: str) -> int:
    if which not in _N_CHOICES:
        raise ValueError(f"which={which!r}: use one of {', '.join(_N_CHOICES)}")
    p = count_params(cfg)
    if which == "total":
        return p.total
    if which == "active":
        return p.active
    return p.active - p.breakdown["embedding"] - p.breakdown["positions"]


def six_n_t(cfg: ModelConfig, tokens: int, which: str = "active") -> int:
    """The 6·N·tokens approximation of training FLOPs.

    ``which`` picks N: ``"active"`` (default; per-token parameters, so for a MoE
    only ``experts_per_token`` routed experts, the usual convention),
    ``"total"``, or ``"non_embedding"`` (active minus the token and position
    embeddings, which cost no matmul; Kaplan et al.'s N).
    """
    int_arg("tokens", tokens)
    return 6 * _n_for_6nt(cfg, which) * tokens


def six_n_t_error(cfg: ModelConfig, seq_len: int, batch: int = 1, which: str = "active",
                  causal: bool = False, window: bool = True) -> float:
    """Relative error (6·N·B·T − exact) / exact against :func:`training_flops`.

    ``window=True`` (the default) takes the useful attention FLOPs inside
    sliding windows as exact, so a windowed model's error saturates instead of
    growing without bound with T; ``window=False`` takes what eager attention
    computes. Models without windows give the same number either way.
    """
    exact = training_flops(cfg, seq_len, batch, causal, window).total
    approx = six_n_t(cfg, seq_len * batch, which)
    return (approx - exact) / exact


def _linear_per_token(cfg: ModelConfig, against: str, include_lm_head: bool) -> int:
    f = forward_flops(cfg, 1, 1).breakdown  # per-token linear terms (T = B = 1)
    if against == "ffn":
        return sum(f[k] for k in FFN_KEYS)
    if against == "all":
        keys = ("attention_proj", *FFN_KEYS, "router") + (("lm_head",) if include_lm_head else ())
        return sum(f[k] for k in keys)
    raise ValueError(f"against={against!r}: use 'all' (every other matmul) or 'ffn'")


def attention_matmul_ratio(cfg: ModelConfig, seq_len: int, causal: bool = False,
                           against: str = "all", include_lm_head: bool = False,
                           window: bool = True) -> float:
    """FLOPs of the attention dot products (Q·Kᵀ and P·V) over the other matmuls.

    ``against="all"``: every other matmul of the decoder layers (projections,
    MLP/experts, router; the LM head too if ``include_lm_head``); ``"ffn"``: the
    MLP/experts only. Independent of batch, and the same for training as for
    the forward pass (everything is 3×). The rope table is left out.
    ``window=True`` (the default) counts a sliding-window layer's useful pairs
    only (see :func:`forward_flops`), so with windows the ratio saturates;
    ``window=False`` counts the full masked matrix that eager attention computes.
    """
    f = forward_flops(cfg, seq_len, 1, causal, window).breakdown
    attn = sum(f[k] for k in ATTENTION_DOT_KEYS)
    return attn / (seq_len * _linear_per_token(cfg, against, include_lm_head))


def attention_crossover(cfg: ModelConfig, against: str = "all", causal: bool = False,
                        include_lm_head: bool = False,
                        window: bool = True) -> Fraction | float:
    """Context length T* where attention dot-product FLOPs equal the other matmuls, exactly.

    Per sequence, attention costs ``a·T²`` (``a·T(T+1)/2`` causal) with
    ``a = 2·L·N·(H_qk + H_v)``, and the other matmuls ``b·T``. Full: ``T* = b/a``;
    causal: ``T* = 2b/a − 1``. For T > T* attention dominates. With the seed's
    assumptions (gated MLP with F = 4D, N = K, N·H = D, no LM head), per layer
    ``b = 2·3·D·4D + 2·4·D² = 32D²`` and ``a = 2·N·2H = 4D``, so T* = 8D; with a
    realistic gated F = 8D/3 (or a 2-matrix MLP with F = 4D), b = 24D² and T* = 6D.

    Sliding windows (``window=True``, the default): a window-W layer uses at
    most W keys per query, so its attention grows only linearly beyond T = W
    (see :func:`forward_flops` for the two counts). Then:

    * every layer windowed and no crossing at T ≤ W: the attention share
      saturates below 1 and never crosses: returns ``math.inf``;
    * a mix of global and window layers: beyond W only the global layers'
      attention still grows, and T* is where it catches up. Exact (a
      ``Fraction``) except in the causal case beyond W, where T* is the root
      of a quadratic and is returned as a ``float``.

    ``window=False`` ignores windows (the full masked matrix eager computes).
    Without windows the result is the same either way, a ``Fraction``.
    """
    _check_flags(causal, window)
    b = _linear_per_token(cfg, against, include_lm_head)
    per_layer = 2 * cfg.num_heads * (cfg.qk_head_dim + cfg.value_head_dim)
    windows = cfg.layer_windows if window else (None,) * cfg.num_layers
    a = per_layer * cfg.num_layers
    t_small = Fraction(2 * b, a) - 1 if causal else Fraction(b, a)
    sliding = [w for w in windows if w is not None]
    if not sliding or t_small <= min(sliding):
        return t_small
    if len(set(sliding)) > 1:
        raise ValueError("attention_crossover supports one sliding_window size per model")
    W = sliding[0]
    a_f = per_layer * (len(windows) - len(sliding))  # global layers
    a_w = per_layer * len(sliding)  # window layers
    if a_f == 0:
        return math.inf
    if not causal:
        # a_f·T² + a_w·T·W = b·T  (T > W)
        return Fraction(b - a_w * W, a_f)
    # a_f·T(T+1)/2 + a_w·(W(W+1)/2 + (T−W)·W) = b·T  (T > W), a quadratic in T.
    qa = Fraction(a_f, 2)
    qb = Fraction(a_f, 2) + a_w * W - b
    qc = -Fraction(a_w * W * (W - 1), 2)
    return float((-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa))

"""A small NumPy GPT with GPT-3's exact structure, plus the pieces the book takes apart.

GPT-3 (Brown et al. 2020, source key ``brown2020gpt3``) is the GPT-2 architecture
(``radford2019gpt2``) scaled up.  This module implements that structure for any
:class:`~tmath.config.ModelConfig` with ``model_type="gpt2"``, so a scaled-down
configuration (``tmath.preset("gpt3-175b").replace(hidden_size=..., ...)``) runs the
same operations, in the same order, on shapes small enough for a laptop:

1. token embedding ``wte[V, D]`` (looked up by id) + learned position embedding ``wpe[n_ctx, D]``;
2. ``L`` pre-LayerNorm blocks, each
   ``x = x + Attn(LN_1(x))`` and ``x = x + MLP(LN_2(x))``, where ``Attn`` uses one fused
   projection ``W_qkv[D, 3D]`` (columns: all query heads, then all key heads, then all
   value heads, each head a contiguous slice of ``H = D / N`` columns), causal
   multi-head scaled dot-product attention, and an output projection ``W_O[D, D]``;
   the MLP is ``GELU(x W_1 + b_1) W_2 + b_2`` with ``W_1[D, F]``, ``W_2[F, D]``;
3. a final LayerNorm, the LM head tied to the token embedding (``logits = h wte^T``),
   and a softmax over the vocabulary.

Conventions
-----------
* Row vectors, as in the book: a sequence of ``T`` tokens is ``X[T, D]`` and a
  projection is ``X W`` with ``W[in, out]`` (the layout of GPT-2's ``Conv1D``).
* GELU is GPT-2's tanh approximation (``gelu_new`` in transformers); LayerNorm
  uses the biased variance and ``eps = 1e-5``, as GPT-2.
* Shapes in a trace are tuples of ints; the batch axis is omitted (one sequence).
* Dense causal attention in every layer.  The GPT-3 paper alternates dense and
  locally banded sparse attention layers; that changes which scores are computed,
  not the parameters or any shape shown here.

The paper's training hyper-parameters the book quotes (batch size in tokens and
learning rate of Table 2.1, 300B training tokens) are in :data:`GPT3_TRAINING`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tmath.attention import causal_mask
from tmath.config import ModelConfig

__all__ = [
    "GPT3_TRAINING",
    "GPT3_TRAIN_TOKENS",
    "Block",
    "ForwardResult",
    "GPTParams",
    "LayerNormSteps",
    "TraceStep",
    "attention_probs",
    "forward",
    "gelu",
    "head_columns",
    "head_rows",
    "init_params",
    "layer_norm",
    "layer_norm_steps",
    "markdown_table",
    "merge_heads",
    "multihead_attention",
    "multihead_attention_per_head",
    "scaled_down",
    "shape_formulas",
    "shape_trace",
    "softmax",
    "split_heads",
]

#: GPT-3 Table 2.1 (source ``brown2020gpt3``): preset name -> (batch size in tokens,
#: learning rate).  The paper prints the batch sizes rounded ("0.5M", "3.2M").
GPT3_TRAINING: dict[str, tuple[int, float]] = {
    "gpt3-125m": (500_000, 6.0e-4),
    "gpt3-350m": (500_000, 3.0e-4),
    "gpt3-760m": (500_000, 2.5e-4),
    "gpt3-1.3b": (1_000_000, 2.0e-4),
    "gpt3-2.7b": (1_000_000, 1.6e-4),
    "gpt3-6.7b": (2_000_000, 1.2e-4),
    "gpt3-13b": (2_000_000, 1.0e-4),
    "gpt3-175b": (3_200_000, 0.6e-4),
}
#: Tokens every GPT-3 size was trained on (source ``brown2020gpt3``, Sec. 2.2).
GPT3_TRAIN_TOKENS: int = 300_000_000_000

LN_EPS = 1e-5


# ----------------------------------------------------------------------------- validation


def _as_float(name: str, x, min_ndim: int = 1) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating)
                                   or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one element")
    arr = arr.astype(np.result_type(arr.dtype, np.float32), copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains nan or inf")
    return arr


def _as_matrix(name: str, w) -> np.ndarray:
    """Cheap check for slicing (no copy, no finiteness scan of a possibly huge matrix)."""
    arr = np.asarray(w)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {arr.shape}")
    return arr


def _check_heads(name: str, width: int, n_heads) -> int:
    if isinstance(n_heads, bool) or not isinstance(n_heads, numbers.Integral) or n_heads <= 0:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    if width % n_heads:
        raise ValueError(
            f"{name} has width {width}, not divisible by n_heads={n_heads}; "
            "the head width H = D / n_heads must be an integer"
        )
    return int(n_heads)


def _check_cfg(cfg) -> ModelConfig:
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if cfg.model_type != "gpt2" or not cfg.tie_embeddings:
        raise ValueError(
            f"cfg {cfg.name!r} has model_type={cfg.model_type!r}, tie_embeddings="
            f"{cfg.tie_embeddings}; tmath.gpt implements the GPT-2/GPT-3 structure only: use "
            "a gpt2-type config with tie_embeddings=True, e.g. tmath.preset('gpt3-175b').replace(...)"
        )
    return cfg


# ----------------------------------------------------------------------------- elementwise


def softmax(x, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, computed as ``exp(x - max) / sum``; ``-inf`` entries give 0."""
    z = np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, np.float32))
    m = np.max(z, axis=axis, keepdims=True)
    if not np.all(np.isfinite(m)):
        raise ValueError("softmax: every slice along axis needs at least one finite entry")
    with np.errstate(under="ignore"):
        e = np.exp(z - m)
    return e / e.sum(axis=axis, keepdims=True)


def gelu(x) -> np.ndarray:
    """GELU, tanh approximation (GPT-2's ``gelu_new``; Hendrycks & Gimpel 2016):

    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.
    """
    x = _as_float("x", x, 0)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class LayerNormSteps(NamedTuple):
    """The intermediate values of LayerNorm over the last axis (each keeps that axis as 1)."""

    mean: np.ndarray
    var: np.ndarray
    normalized: np.ndarray


def layer_norm_steps(x, eps: float = LN_EPS) -> LayerNormSteps:
    """Mean, biased variance ``mean((x - mu)^2)`` and ``(x - mu) / sqrt(var + eps)`` over the last axis."""
    x = _as_float("x", x)
    if not (isinstance(eps, numbers.Real) and eps >= 0):
        raise ValueError(f"eps must be a real number >= 0, got {eps!r}")
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return LayerNormSteps(mu, var, (x - mu) / np.sqrt(var + eps))


def layer_norm(x, gamma, beta, eps: float = LN_EPS) -> np.ndarray:
    """LayerNorm over the last axis: ``gamma * (x - mu) / sqrt(var + eps) + beta``.

    ``gamma`` and ``beta`` have the shape of the last axis of ``x``.
    """
    x = _as_float("x", x)
    gamma = _as_float("gamma", gamma)
    beta = _as_float("beta", beta)
    d = x.shape[-1]
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p.shape != (d,):
            raise ValueError(f"{name} must have shape ({d},) to match x's last axis, got {p.shape}")
    return gamma * layer_norm_steps(x, eps).normalized + beta


# ----------------------------------------------------------------------------- heads


def split_heads(x, n_heads: int) -> np.ndarray:
    """``[..., T, D]`` -> ``[..., N, T, H]``: head ``c`` gets columns ``c*H .. (c+1)*H - 1``."""
    x = _as_float("x", x, 2)
    n = _check_heads("x", x.shape[-1], n_heads)
    *lead, T, D = x.shape
    return np.moveaxis(x.reshape(*lead, T, n, D // n), -2, -3)


def merge_heads(x) -> np.ndarray:
    """``[..., N, T, H]`` -> ``[..., T, N*H]``: the concatenation Concat(head^(1), ..., head^(N))."""
    x = _as_float("x", x, 3)
    *lead, N, T, H = x.shape
    return np.moveaxis(x, -3, -2).reshape(*lead, T, N * H)


def head_columns(w, c: int, n_heads: int) -> np.ndarray:
    """Columns of head ``c`` (0-based) of a projection ``W[D_in, N*H]``: ``W^{(c)}[D_in, H]``."""
    w = _as_matrix("w", w)
    n = _check_heads("w", w.shape[-1], n_heads)
    if isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= c < n:
        raise ValueError(f"c (head index, 0-based) must be in [0, {n}), got {c!r}")
    H = w.shape[-1] // n
    return w[..., c * H:(c + 1) * H]


def head_rows(w_o, c: int, n_heads: int) -> np.ndarray:
    """Rows of head ``c`` (0-based) of the output projection ``W^O[N*H, D]``: ``W^{O,(c)}[H, D]``."""
    w_o = _as_matrix("w_o", w_o)
    n = _check_heads("w_o", w_o.shape[0], n_heads)
    if isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= c < n:
        raise ValueError(f"c (head index, 0-based) must be in [0, {n}), got {c!r}")
    H = w_o.shape[0] // n
    return w_o[c * H:(c + 1) * H, :]


def attention_probs(q, k, causal: bool = True, scale: float | None = None) -> np.ndarray:
    """Attention weights ``softmax(q k^T * scale + M)`` over the key axis, ``[..., T, S]``.

    ``scale`` defaults to ``1/sqrt(H)``; the causal mask ``M`` is
    :func:`tmath.attention.causal_mask` (0 where ``j <= i``, ``-inf`` elsewhere).
    """
    q = _as_float("q", q, 2)
    k = _as_float("k", k, 2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the head width, got {q.shape[-1]} and {k.shape[-1]}")
    T, S = q.shape[-2], k.shape[-2]
    if causal and T > S:
        raise ValueError(f"causal attention needs at least as many keys as queries (T={T}, S={S})")
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(causal_mask(T, S), s, -np.inf)
    return softmax(s, axis=-1)


def _check_proj(x: np.ndarray, w_q, w_k, w_v, w_o):
    D = x.shape[-1]
    ws = [_as_float(n, w, 2) for n, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o))]
    for name, w in zip(("w_q", "w_k", "w_v"), ws[:3], strict=True):
        if w.shape[0] != D:
            raise ValueError(f"{name} must have {D} rows (x's width), got shape {w.shape}")
    if ws[0].shape != ws[1].shape:
        raise ValueError(f"w_q {ws[0].shape} and w_k {ws[1].shape} must have the same shape")
    if ws[3].shape[0] != ws[2].shape[1]:
        raise ValueError(
            f"w_o must have {ws[2].shape[1]} rows (the concatenated value heads), got {ws[3].shape}"
        )
    return ws


def multihead_attention(x, w_q, w_k, w_v, w_o, n_heads: int, causal: bool = True) -> np.ndarray:
    """The engineering form: one big ``X W^Q`` (and K, V), split into heads, attend, concat, ``W^O``.

    ``x``: ``[T, D]``; ``w_q, w_k, w_v``: ``[D, N*H]``; ``w_o``: ``[N*H, D_out]``.  No biases.
    """
    x = _as_float("x", x, 2)
    w_q, w_k, w_v, w_o = _check_proj(x, w_q, w_k, w_v, w_o)
    q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    return merge_heads(attention_probs(q, k, causal) @ v) @ w_o


def multihead_attention_per_head(x, w_q, w_k, w_v, w_o, n_heads: int,
                                 causal: bool = True) -> np.ndarray:
    """The definition (8.10'-8.15'): a separate ``X W^{Q,(c)}`` per head, concat, then ``W^O``."""
    x = _as_float("x", x, 2)
    w_q, w_k, w_v, w_o = _check_proj(x, w_q, w_k, w_v, w_o)
    heads = []
    for c in range(n_heads):
        q, k, v = (x @ head_columns(w, c, n_heads) for w in (w_q, w_k, w_v))
        heads.append(attention_probs(q, k, causal) @ v)
    return np.concatenate(heads, axis=-1) @ w_o


# ----------------------------------------------------------------------------- parameters


@dataclass
class Block:
    """Parameters of one GPT block (GPT-2 names in comments)."""

    ln1_g: np.ndarray  # ln_1.weight [D]
    ln1_b: np.ndarray  # ln_1.bias [D]
    w_qkv: np.ndarray  # attn.c_attn.weight [D, 3D]: Q heads | K heads | V heads
    b_qkv: np.ndarray  # attn.c_attn.bias [3D]
    w_o: np.ndarray  # attn.c_proj.weight [D, D]
    b_o: np.ndarray  # attn.c_proj.bias [D]
    ln2_g: np.ndarray  # ln_2.weight [D]
    ln2_b: np.ndarray  # ln_2.bias [D]
    w_1: np.ndarray  # mlp.c_fc.weight [D, F]
    b_1: np.ndarray  # mlp.c_fc.bias [F]
    w_2: np.ndarray  # mlp.c_proj.weight [F, D]
    b_2: np.ndarray  # mlp.c_proj.bias [D]

    def arrays(self) -> dict[str, np.ndarray]:
        return dict(vars(self))


@dataclass
class GPTParams:
    """All parameters of a GPT; ``wte`` doubles as the LM head (tied)."""

    cfg: ModelConfig
    wte: np.ndarray  # [V, D]
    wpe: np.ndarray  # [n_ctx, D]
    blocks: list[Block]
    lnf_g: np.ndarray  # [D]
    lnf_b: np.ndarray  # [D]

    def arrays(self) -> dict[str, np.ndarray]:
        """Every parameter tensor once, by name (``h.<layer>.<name>`` for blocks)."""
        out = {"wte": self.wte, "wpe": self.wpe}
        for i, b in enumerate(self.blocks):
            out.update({f"h.{i}.{k}": v for k, v in b.arrays().items()})
        out.update(lnf_g=self.lnf_g, lnf_b=self.lnf_b)
        return out

    def num_params(self) -> int:
        """Number of scalars in all tensors (the tied LM head counted once)."""
        return int(sum(a.size for a in self.arrays().values()))


def scaled_down(cfg: ModelConfig, hidden_size: int, num_heads: int, num_layers: int,
                vocab_size: int, max_position: int) -> ModelConfig:
    """``cfg`` with smaller widths but the same structure: FFN width kept at the same
    multiple of ``hidden_size`` (4 for GPT-3), ``num_kv_heads = num_heads`` (MHA)."""
    cfg = _check_cfg(cfg)
    if cfg.intermediate_size % cfg.hidden_size:
        raise ValueError(f"cfg's intermediate_size {cfg.intermediate_size} is not a multiple of "
                         f"hidden_size {cfg.hidden_size}; use cfg.replace(...) directly")
    ratio = cfg.intermediate_size // cfg.hidden_size
    for name, v in (("hidden_size", hidden_size), ("num_heads", num_heads),
                    ("num_layers", num_layers), ("vocab_size", vocab_size),
                    ("max_position", max_position)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}; "
                         "pick hidden_size = num_heads * head width")
    return cfg.replace(name=f"{cfg.name}-scaled-down", hidden_size=hidden_size,
                       intermediate_size=ratio * hidden_size, num_heads=num_heads,
                       num_kv_heads=num_heads, num_layers=num_layers, vocab_size=vocab_size,
                       max_position=max_position, head_dim=hidden_size // num_heads)


def init_params(cfg: ModelConfig, seed: int = 0, std: float = 0.02,
                dtype=np.float64) -> GPTParams:
    """Random parameters for ``cfg`` (GPT-2's scheme): weights ~ N(0, std²), the two
    residual-output projections ~ N(0, std²/(2L)), biases 0, LayerNorm gamma 1 and beta 0.

    Deterministic for a given ``seed`` (``np.random.default_rng(seed)``).  Meant for
    scaled-down configs: the full GPT-3 175B would need ~700 GB in float32.
    """
    cfg = _check_cfg(cfg)
    if not (isinstance(std, numbers.Real) and std > 0):
        raise ValueError(f"std must be a positive number, got {std!r}")
    n = cfg.hidden_size * cfg.hidden_size * 12 * cfg.num_layers
    if n > 2_000_000_000:
        raise ValueError(
            f"cfg {cfg.name!r} has ~{n:,} block weights; init_params is for scaled-down "
            "configs: shrink it with cfg.replace(hidden_size=..., num_layers=..., ...)"
        )
    rng = np.random.default_rng(seed)
    D, F, L, V, P = (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers, cfg.vocab_size,
                     cfg.max_position)

    def normal(*shape: int, s: float = std) -> np.ndarray:
        return (s * rng.standard_normal(shape)).astype(dtype)

    def zeros(k: int) -> np.ndarray:
        return np.zeros(k, dtype=dtype)

    def ones(k: int) -> np.ndarray:
        return np.ones(k, dtype=dtype)

    wte, wpe = normal(V, D), normal(P, D)
    res_std = std / math.sqrt(2 * L)
    blocks = [
        Block(ones(D), zeros(D), normal(D, 3 * D), zeros(3 * D), normal(D, D, s=res_std), zeros(D),
              ones(D), zeros(D), normal(D, F), zeros(F), normal(F, D, s=res_std), zeros(D))
        for _ in range(L)
    ]
    return GPTParams(cfg, wte, wpe, blocks, ones(D), zeros(D))


# ----------------------------------------------------------------------------- forward


@dataclass(frozen=True)
class TraceStep:
    """One operation of the forward pass: its name, output shape, layer (None outside blocks)."""

    op: str
    shape: tuple[int, ...]
    layer: int | None = None
    formula: str = ""


@dataclass
class ForwardResult:
    """Logits ``[T, V]``, probabilities ``[T, V]``, per-layer attention weights ``[N, T, T]``
    and the shape trace."""

    logits: np.ndarray
    probs: np.ndarray
    attention: list[np.ndarray] = field(default_factory=list)
    trace: list[TraceStep] = field(default_factory=list)


# (op, formula, shape as a function of T, D, N, H, F, V) for every step, in order.
_PRE = [
    ("token ids", "ids", lambda T, D, N, H, F, V: (T,)),
    ("token embedding", "W_E[ids]", lambda T, D, N, H, F, V: (T, D)),
    ("position embedding", "W_pos[0:T]", lambda T, D, N, H, F, V: (T, D)),
    ("x0 = tok + pos", "x0 = W_E[ids] + W_pos[0:T]", lambda T, D, N, H, F, V: (T, D)),
]
_BLOCK = [
    ("ln_1", "LN_1(x)", lambda T, D, N, H, F, V: (T, D)),
    ("qkv", "x W_qkv + b_qkv", lambda T, D, N, H, F, V: (T, 3 * D)),
    ("q (split heads)", "Q -> h heads", lambda T, D, N, H, F, V: (N, T, H)),
    ("k (split heads)", "K -> h heads", lambda T, D, N, H, F, V: (N, T, H)),
    ("v (split heads)", "V -> h heads", lambda T, D, N, H, F, V: (N, T, H)),
    ("scores", "S = Q K^T / sqrt(d_head) + M", lambda T, D, N, H, F, V: (N, T, T)),
    ("softmax", "P = softmax_row(S)", lambda T, D, N, H, F, V: (N, T, T)),
    ("heads", "P V", lambda T, D, N, H, F, V: (N, T, H)),
    ("concat", "Concat(heads)", lambda T, D, N, H, F, V: (T, D)),
    ("attn out", "o W^O + b^O", lambda T, D, N, H, F, V: (T, D)),
    ("residual 1", "x + attn", lambda T, D, N, H, F, V: (T, D)),
    ("ln_2", "LN_2(x)", lambda T, D, N, H, F, V: (T, D)),
    ("mlp up", "x W_1 + b_1", lambda T, D, N, H, F, V: (T, F)),
    ("gelu", "g = GELU(x W_1 + b_1)", lambda T, D, N, H, F, V: (T, F)),
    ("mlp down", "g W_2 + b_2", lambda T, D, N, H, F, V: (T, D)),
    ("residual 2", "x + mlp", lambda T, D, N, H, F, V: (T, D)),
]
_POST = [
    ("ln_f", "LN_f(x)", lambda T, D, N, H, F, V: (T, D)),
    ("logits", "x_final W_E^T", lambda T, D, N, H, F, V: (T, V)),
    ("probs", "softmax(logits)", lambda T, D, N, H, F, V: (T, V)),
]


def shape_trace(cfg: ModelConfig, seq_len: int = 1) -> list[TraceStep]:
    """The shapes :func:`forward` produces for ``seq_len`` tokens, computed without running it.

    Same steps and names as ``forward(..., trace=True).trace``; block steps are listed
    for every layer (filter ``step.layer in (None, 0)`` for one layer).
    """
    cfg = _check_cfg(cfg)
    if isinstance(seq_len, bool) or not isinstance(seq_len, numbers.Integral) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    if seq_len > cfg.max_position:
        raise ValueError(f"seq_len={seq_len} exceeds cfg.max_position={cfg.max_position}")
    dims = (int(seq_len), cfg.hidden_size, cfg.num_heads, cfg.head_dim, cfg.intermediate_size,
            cfg.vocab_size)
    steps = [TraceStep(op, f(*dims), None, fm) for op, fm, f in _PRE]
    for layer in range(cfg.num_layers):
        steps += [TraceStep(op, f(*dims), layer, fm) for op, fm, f in _BLOCK]
    steps += [TraceStep(op, f(*dims), None, fm) for op, fm, f in _POST]
    return steps


def _check_ids(token_ids, cfg: ModelConfig) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"token_ids must be a non-empty 1-D sequence of ints, got shape {ids.shape}, "
            f"dtype {ids.dtype}"
        )
    if ids.min() < 0 or ids.max() >= cfg.vocab_size:
        raise ValueError(f"token_ids must lie in [0, vocab_size={cfg.vocab_size}), got "
                         f"min {ids.min()}, max {ids.max()}")
    if ids.size > cfg.max_position:
        raise ValueError(f"token_ids has {ids.size} tokens, more than max_position="
                         f"{cfg.max_position}")
    return ids


def forward(params: GPTParams, token_ids, trace: bool = False) -> ForwardResult:
    """Run the GPT on one sequence of token ids; returns logits, probabilities for the next
    token at every position, the attention weights of every layer, and (``trace=True``) the
    shape of every intermediate, in the order of :func:`shape_trace`."""
    if not isinstance(params, GPTParams):
        raise TypeError(f"params must be tmath.gpt.GPTParams (see init_params), got "
                        f"{type(params).__name__}")
    cfg = params.cfg
    ids = _check_ids(token_ids, cfg)
    steps: list[TraceStep] = []
    names = iter([(op, fm) for op, fm, _ in _PRE + _BLOCK * cfg.num_layers + _POST])

    def rec(a: np.ndarray, layer: int | None = None) -> np.ndarray:
        op, fm = next(names)
        if trace:
            steps.append(TraceStep(op, tuple(int(n) for n in a.shape), layer, fm))
        return a

    N, T, D = cfg.num_heads, ids.size, cfg.hidden_size
    rec(ids)
    x = rec(rec(params.wte[ids]) + rec(params.wpe[:T]))
    attn_maps = []
    for i, b in enumerate(params.blocks):
        h = rec(layer_norm(x, b.ln1_g, b.ln1_b), i)
        qkv = rec(h @ b.w_qkv + b.b_qkv, i)
        q, k, v = (rec(split_heads(qkv[:, j * D:(j + 1) * D], N), i) for j in range(3))
        scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(cfg.head_dim)
        scores = rec(np.where(causal_mask(T, T), scores, -np.inf), i)
        a = rec(softmax(scores, axis=-1), i)
        attn_maps.append(a)
        o = rec(merge_heads(rec(a @ v, i)), i)
        x = rec(x + rec(o @ b.w_o + b.b_o, i), i)
        h = rec(layer_norm(x, b.ln2_g, b.ln2_b), i)
        h = rec(gelu(rec(h @ b.w_1 + b.b_1, i)), i)
        x = rec(x + rec(h @ b.w_2 + b.b_2, i), i)
    h = rec(layer_norm(x, params.lnf_g, params.lnf_b))
    logits = rec(h @ params.wte.T)
    probs = rec(softmax(logits, axis=-1))
    return ForwardResult(logits, probs, attn_maps, steps)


def markdown_table(header: list[str], rows: list[list[object]]):
    """A Markdown table (``IPython.display.Markdown``) for the chapters' generated tables."""
    from IPython.display import Markdown

    if any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row must have {len(header)} cells (the header's length)")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return Markdown("\n".join(lines))


def shape_formulas() -> list[TraceStep]:
    """The steps of :func:`shape_trace` for one layer, with SymPy shapes in the symbols
    ``T`` (tokens), ``d`` (width), ``h`` (heads), ``d_head``, ``F`` (FFN width), ``V``.

    Substituting a config's numbers gives its :func:`shape_trace` (block steps of layer 0
    carry ``layer=0``).
    """
    import sympy as sp

    T, d, h, dh, F, V = sp.symbols("T d h d_head F V", positive=True, integer=True)
    out = [TraceStep(op, f(T, d, h, dh, F, V), None, fm) for op, fm, f in _PRE]
    out += [TraceStep(op, f(T, d, h, dh, F, V), 0, fm) for op, fm, f in _BLOCK]
    out += [TraceStep(op, f(T, d, h, dh, F, V), None, fm) for op, fm, f in _POST]
    return out

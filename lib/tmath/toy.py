"""A tiny attention model that really trains: one causal head learns to look at the previous token.

The multi-head chapter's heatmap of a *random* model shows only the structure of
attention (a causal triangle, rows that sum to 1).  This module trains the
smallest model whose head has to learn where to look, so that the chapter can
show a learned pattern beside the random one.

Model (all NumPy, forward and backward written out by hand):

- input ``x_j = E[t_j] + P[j]`` (token and learned position embeddings, ``[T, D]``);
- one causal attention head: ``q = x W_Q``, ``k = x W_K``, ``v = x W_V`` (``[T, H]``),
  ``A = softmax(q k^T / sqrt(H) + M)`` with the causal mask ``M``;
- read-out ``logits = (A v) W_U`` (``[T, V]``), no residual path, so the only way to
  see another token is through ``A``.

Task: at every position ``i >= 1`` predict the *previous* token ``t_{i-1}`` of a
random sequence (cross-entropy; position 0 has no target).  The tokens are
uniform and independent, so the current token says nothing about the previous
one: the loss can only fall below ``ln V`` if the head puts its weight on
position ``i - 1``, a previous-token head.

Training is plain full-batch-per-step Adam with a fixed seed; the default run
takes well under a second on one core.  Results depend on floating-point
rounding only in the last bits (BLAS kernels), so print or glue rounded
summaries only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ToyParams",
    "TrainResult",
    "init_params",
    "forward",
    "loss_and_grads",
    "previous_token_targets",
    "train_previous_token",
    "previous_token_weight",
    "TWO_HEAD_EXAMPLE",
    "two_head_example",
]


@dataclass
class ToyParams:
    """Parameters of the one-head model: embeddings, the head's projections, the read-out."""

    E: np.ndarray  # [V, D] token embedding
    P: np.ndarray  # [n_pos, D] learned position embedding
    W_Q: np.ndarray  # [D, H]
    W_K: np.ndarray  # [D, H]
    W_V: np.ndarray  # [D, H]
    W_U: np.ndarray  # [H, V] read-out to the vocabulary

    def arrays(self) -> dict[str, np.ndarray]:
        return dict(vars(self))

    def copy(self) -> ToyParams:
        return ToyParams(**{k: v.copy() for k, v in self.arrays().items()})


@dataclass
class TrainResult:
    """The trained parameters, the initial ones, and the loss after every step."""

    params: ToyParams
    initial: ToyParams
    losses: list[float] = field(default_factory=list)
    vocab_size: int = 0
    seq_len: int = 0

    @property
    def chance_loss(self) -> float:
        """``ln V``: the loss of a model that ignores the previous token."""
        return math.log(self.vocab_size)


def init_params(vocab_size: int, n_pos: int, d_model: int, d_head: int, seed: int = 0,
                std: float = 0.3) -> ToyParams:
    """Normal(0, std) embeddings and projections (``std / sqrt(fan-in)`` for the matrices)."""
    for name, v in (("vocab_size", vocab_size), ("n_pos", n_pos), ("d_model", d_model),
                    ("d_head", d_head)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float) -> np.ndarray:
        return rng.normal(0.0, scale, shape)

    return ToyParams(
        E=w(vocab_size, d_model, scale=std),
        P=w(n_pos, d_model, scale=std),
        W_Q=w(d_model, d_head, scale=std / math.sqrt(d_model) * 3),
        W_K=w(d_model, d_head, scale=std / math.sqrt(d_model) * 3),
        W_V=w(d_model, d_head, scale=std / math.sqrt(d_model) * 3),
        W_U=w(d_head, vocab_size, scale=std / math.sqrt(d_head) * 3),
    )


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _check_ids(params: ToyParams, ids) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim == 1:
        ids = ids[None, :]
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer) or ids.size == 0:
        raise ValueError(f"ids must be a [T] or [B, T] array of ints, got shape {ids.shape}")
    V, n_pos = params.E.shape[0], params.P.shape[0]
    if ids.min() < 0 or ids.max() >= V:
        raise ValueError(f"token ids must lie in [0, {V}), got min {ids.min()}, max {ids.max()}")
    if ids.shape[1] > n_pos:
        raise ValueError(f"sequence length {ids.shape[1]} exceeds the {n_pos} positions")
    return ids


def forward(params: ToyParams, ids) -> dict[str, np.ndarray]:
    """All intermediates for ids ``[B, T]`` (or ``[T]``): x, q, k, v, the softmax weights
    ``[B, T, T]`` (key ``"P"``, the book's letter; ``"A"`` is the same array), z, logits."""
    ids = _check_ids(params, ids)
    T = ids.shape[1]
    x = params.E[ids] + params.P[:T]
    q, k, v = x @ params.W_Q, x @ params.W_K, x @ params.W_V
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    A = _softmax(s)
    z = A @ v
    return {"ids": ids, "x": x, "q": q, "k": k, "v": v, "A": A, "P": A, "z": z,
            "logits": z @ params.W_U, "scale": np.float64(scale)}


def previous_token_targets(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets ``t_{i-1}`` and the mask of positions that have one (all but position 0)."""
    ids = np.asarray(ids)
    targets = np.zeros_like(ids)
    targets[:, 1:] = ids[:, :-1]
    mask = np.ones(ids.shape, dtype=bool)
    mask[:, 0] = False
    return targets, mask


def loss_and_grads(params: ToyParams, ids, targets=None,
                   mask=None) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy over the masked positions and its gradient for every parameter.

    Defaults to the previous-token task (:func:`previous_token_targets`).
    """
    c = forward(params, ids)
    ids = c["ids"]
    if targets is None:
        targets, mask = previous_token_targets(ids)
    targets = np.asarray(targets)
    mask = np.ones(ids.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    n = int(mask.sum())
    logits = c["logits"]
    logp = logits - logits.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    loss = float(-(picked * mask).sum() / n)

    # backward, step by step through the forward pass above
    d_logits = np.exp(logp)
    np.put_along_axis(d_logits, targets[..., None],
                      np.take_along_axis(d_logits, targets[..., None], -1) - 1.0, axis=-1)
    d_logits *= mask[..., None] / n
    g_WU = np.einsum("bth,btv->hv", c["z"], d_logits)
    d_z = d_logits @ params.W_U.T
    A, v, q, k, scale = c["A"], c["v"], c["q"], c["k"], float(c["scale"])
    d_A = d_z @ np.swapaxes(v, -1, -2)
    d_v = np.swapaxes(A, -1, -2) @ d_z
    d_s = A * (d_A - (d_A * A).sum(-1, keepdims=True))  # softmax backward; 0 where masked
    d_q = d_s @ k * scale
    d_k = np.swapaxes(d_s, -1, -2) @ q * scale
    x = c["x"]
    g_WQ = np.einsum("btd,bth->dh", x, d_q)
    g_WK = np.einsum("btd,bth->dh", x, d_k)
    g_WV = np.einsum("btd,bth->dh", x, d_v)
    d_x = d_q @ params.W_Q.T + d_k @ params.W_K.T + d_v @ params.W_V.T
    g_E = np.zeros_like(params.E)
    np.add.at(g_E, ids, d_x)
    g_P = np.zeros_like(params.P)
    g_P[: ids.shape[1]] = d_x.sum(0)
    return loss, {"E": g_E, "P": g_P, "W_Q": g_WQ, "W_K": g_WK, "W_V": g_WV, "W_U": g_WU}


def train_previous_token(vocab_size: int = 16, seq_len: int = 8, d_model: int = 32,
                         d_head: int = 16, batch: int = 64, steps: int = 300,
                         lr: float = 0.01, seed: int = 0) -> TrainResult:
    """Train the one-head model on the previous-token task with Adam (fixed seed).

    Every step draws a fresh batch of ``batch`` uniform random sequences of
    ``seq_len`` tokens.  ``losses[0]`` is the loss of the initial model on the
    first batch; ``losses[s]`` the loss on batch ``s`` before its update.
    """
    rng = np.random.default_rng(seed)
    params = init_params(vocab_size, seq_len, d_model, d_head, seed=seed)
    initial = params.copy()
    m = {k: np.zeros_like(a) for k, a in params.arrays().items()}
    u = {k: np.zeros_like(a) for k, a in params.arrays().items()}
    b1, b2, eps = 0.9, 0.999, 1e-8
    losses = []
    for step in range(1, steps + 1):
        ids = rng.integers(0, vocab_size, (batch, seq_len))
        loss, grads = loss_and_grads(params, ids)
        losses.append(loss)
        for name, g in grads.items():
            m[name] = b1 * m[name] + (1 - b1) * g
            u[name] = b2 * u[name] + (1 - b2) * g * g
            m_hat = m[name] / (1 - b1**step)
            u_hat = u[name] / (1 - b2**step)
            getattr(params, name)[...] -= lr * m_hat / (np.sqrt(u_hat) + eps)
    return TrainResult(params, initial, losses, vocab_size, seq_len)


def previous_token_weight(A: np.ndarray) -> float:
    """Mean attention weight on the previous position, ``mean_i A[i, i-1]`` over ``i >= 1``.

    ``A`` is ``[T, T]`` or ``[B, T, T]`` (averaged over the batch too).
    """
    A = np.asarray(A)
    if A.ndim == 2:
        A = A[None]
    T = A.shape[-1]
    return float(np.mean([A[:, i, i - 1] for i in range(1, T)]))


#: A multi-head attention small enough to run 8.10'-8.15' by hand: two tokens, d = 4,
#: h = 2 heads of d_head = 2 (head c uses columns 2c-1, 2c of W^Q, W^K, W^V and rows
#: 2c-1, 2c of W^O).  Rows of X are the tokens x_1, x_2.  No biases.
TWO_HEAD_EXAMPLE: dict[str, tuple[tuple[int, ...], ...]] = {
    "X": ((1, 0, 1, 0), (0, 1, 1, 1)),
    "W_Q": ((1, 0, 0, 1), (0, 1, 1, 0), (1, 1, 0, 0), (0, 0, 1, 1)),
    "W_K": ((1, 0, 1, 0), (1, 1, 0, 0), (0, 1, 0, 1), (0, 0, 1, 1)),
    "W_V": ((1, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 1), (0, 1, 1, 0)),
    "W_O": ((1, 0, 0, 1), (0, 1, 0, 0), (0, 0, 1, 0), (1, 0, 0, -1)),
}


def two_head_example() -> dict[str, np.ndarray]:
    """:data:`TWO_HEAD_EXAMPLE` as float arrays (``X`` is ``[2, 4]``, the weights ``[4, 4]``)."""
    return {k: np.array(v, dtype=float) for k, v in TWO_HEAD_EXAMPLE.items()}

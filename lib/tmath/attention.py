"""Scaled dot-product attention in NumPy: naive and tiled (FlashAttention).

Conventions
-----------
* ``q`` has shape ``[..., T, H]`` (T queries, head dimension H); ``k`` has shape
  ``[..., S, H]`` and ``v`` has shape ``[..., S, Hv]`` (S keys/values).  The
  leading ``...`` dimensions (batch, heads) of ``q``, ``k`` and ``v`` follow
  NumPy broadcasting, so ``k``/``v`` with a head axis of size 1 serve every
  query head (multi-query / grouped-query attention); gradients are summed
  back over broadcast axes.
* Scores are ``s[i, j] = scale * q_i . k_j`` with ``scale = 1/sqrt(H)`` unless
  given; ``P = softmax(s)`` along the key axis; ``O = P V``.
* Row statistics: ``m[i] = max_j s[i, j]`` (over visible keys) and
  ``l[i] = sum_j exp(s[i, j] - m[i])``; the log-sum-exp is
  ``lse[i] = m[i] + log(l[i])``.  These are what the backward pass needs.
* Causal masking with ``T != S`` uses *bottom-right* alignment, as in
  FlashAttention-2 (>= 2.1) and in KV-cache decoding: query ``i`` sees key
  ``j`` iff ``j <= i + (S - T)``.  The last query sees every key.  Causal
  attention requires ``S >= T`` so that every query sees at least one key;
  ``T > S`` raises ``ValueError`` (there would be queries with no keys).
* Masking uses ``-inf`` scores; every ``exp`` is guarded so that fully masked
  blocks (or rows that see no key inside one block) contribute exact zeros
  and never ``nan``.  Underflow of ``exp`` to 0 is intended and silenced;
  overflow, invalid operations and division by zero cannot occur for finite
  inputs (the tests run with ``np.errstate(over/invalid/divide="raise")``).

IO accounting (:func:`attention_hbm_bytes`) follows Dao et al. 2022,
"FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness"
(source key ``dao2022flashattention``), Algorithm 0 (standard attention) and
Theorem 2: standard attention makes Theta(N d + N^2) HBM accesses, FlashAttention
Theta(N^2 d^2 / M) for SRAM size M.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

__all__ = [
    "AttentionResult",
    "attention_hbm_bytes",
    "attention_memory_bytes",
    "DAO2022_GPT2_MEDIUM",
    "causal_mask",
    "flash_attention",
    "flash_attention_backward",
    "flash_training_attention_flops",
    "merge_attention_states",
    "naive_attention",
    "naive_attention_backward",
    "peak_memory_and_time",
]


class AttentionResult(NamedTuple):
    """Output of attention with the per-row softmax statistics.

    ``o``: ``[..., T, Hv]``; ``m`` (row max of the scores) and ``l`` (row sum of
    ``exp(s - m)``): ``[..., T]``.  Unpacks as ``o, m, l = result``.
    """

    o: np.ndarray
    m: np.ndarray
    l: np.ndarray  # noqa: E741

    @property
    def lse(self) -> np.ndarray:
        """Row log-sum-exp of the scores, ``m + log(l)``."""
        return self.m + np.log(self.l)


# ----------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------


def _as_float_array(name: str, x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(
            f"{name} must be a real floating-point array (float16/32/64), got dtype "
            f"{arr.dtype}; convert it with {name}.astype(np.float64)"
        )
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have at least 2 dimensions [..., length, head_dim], got shape "
            f"{arr.shape}; add a length axis, e.g. {name}[None, :]"
        )
    if 0 in arr.shape:
        raise ValueError(f"{name} has an empty axis (shape {arr.shape}); every axis must be >= 1")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains nan or inf; attention needs finite inputs")
    return arr


def _check_qkv(q, k, v, causal: bool):
    q = _as_float_array("q", q)
    k = _as_float_array("k", k)
    v = _as_float_array("v", v)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k's head dimension {k.shape[-1]} differs from q's {q.shape[-1]}; "
            "q is [..., T, H] and k is [..., S, H] with the same H"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v has {v.shape[-2]} positions but k has {k.shape[-2]}; "
            "k and v must both be [..., S, *] with the same S"
        )
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch/head) dimensions of q {q.shape[:-2]}, k {k.shape[:-2]} and "
            f"v {v.shape[:-2]} do not broadcast; make them equal or 1"
        ) from None
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    T, S = q.shape[-2], k.shape[-2]
    if causal and T > S:
        raise ValueError(
            f"causal=True needs at least as many keys as queries (got T={T} queries, "
            f"S={S} keys): with bottom-right alignment query i sees keys j <= i + (S - T), "
            "so the first T - S queries would see nothing; pass causal=False or more keys"
        )
    return q, k, v


def _check_scale(scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a positive real number or None, got {scale!r}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and > 0 (default 1/sqrt(H)), got {scale}")
    return scale


def _check_block(name: str, b) -> int:
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (numbers.Integral,)):
        raise TypeError(f"{name} must be a positive int (e.g. 64 or 128), got {b!r}")
    if b <= 0:
        raise ValueError(f"{name} must be a positive int (e.g. 64 or 128), got {b}")
    return int(b)


def _tiled_setup(q, k, v, causal, block_q, block_k, scale):
    """Checked arguments of the tiled forward/backward, with T, S, the causal offset S - T
    (bottom-right alignment) and the broadcast leading shape."""
    q, k, v = _check_qkv(q, k, v, causal)
    block_q = _check_block("block_q", block_q)
    block_k = _check_block("block_k", block_k)
    scale = _check_scale(scale, q.shape[-1])
    T, S = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return q, k, v, block_q, block_k, scale, T, S, S - T, lead


def causal_mask(T: int, S: int, i0: int = 0, i1: int | None = None, j0: int = 0,
                j1: int | None = None) -> np.ndarray:
    """Boolean mask ``[i1 - i0, j1 - j0]``, True where query i may see key j.

    Bottom-right alignment: ``j <= i + (S - T)``.  The optional ranges select a
    tile (rows ``i0:i1``, columns ``j0:j1``) of the full ``[T, S]`` mask.
    """
    i1 = T if i1 is None else i1
    j1 = S if j1 is None else j1
    rows = np.arange(i0, i1)[:, None]
    cols = np.arange(j0, j1)[None, :]
    return cols <= rows + (S - T)


def _unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


# ----------------------------------------------------------------------------
# forward
# ----------------------------------------------------------------------------


def naive_attention(q, k, v, causal: bool = False, scale: float | None = None,
                    return_stats: bool = False):
    """Standard attention that materializes the full ``[..., T, S]`` score matrix.

    Returns ``O`` of shape ``[..., T, Hv]``, or an :class:`AttentionResult`
    ``(o, m, l)`` when ``return_stats`` is true.  Memory: O(T * S) per
    (batch, head) for the scores and probabilities.
    """
    q, k, v = _check_qkv(q, k, v, causal)
    scale = _check_scale(scale, q.shape[-1])
    T, S = q.shape[-2], k.shape[-2]
    with np.errstate(under="ignore"):
        s = (q * scale) @ _swap(k)
        if causal:
            s = np.where(causal_mask(T, S), s, -np.inf)
        m = s.max(axis=-1)  # finite: every row sees >= 1 key
        p = np.exp(s - m[..., None])
        del s
        l = p.sum(axis=-1)  # noqa: E741
        o = (p @ v) / l[..., None]
    if return_stats:
        return AttentionResult(o, m, l)
    return o


def flash_attention(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64,
                    scale: float | None = None, return_stats: bool = False):
    """Tiled attention with online softmax (FlashAttention-2 loop order).

    The outer loop runs over query blocks of ``block_q`` rows, the inner loop
    over key/value blocks of ``block_k`` columns; only a ``[..., block_q,
    block_k]`` tile of scores exists at any time.  Per query row three running
    states are kept: the max ``m``, the sum ``l`` of ``exp(s - m)`` and the
    unnormalized output ``acc``.  A new block with scores ``s_b`` updates them by

        m' = max(m, rowmax(s_b))
        l' = exp(m - m') l + rowsum(exp(s_b - m'))
        acc' = exp(m - m') acc + exp(s_b - m') V_b

    and ``O = acc / l`` at the end.  Key blocks entirely in the causal future of
    a query block are skipped.  Block sizes need not divide T or S.  Returns
    ``O`` or, with ``return_stats``, an :class:`AttentionResult` ``(o, m, l)``.
    """
    q, k, v, block_q, block_k, scale, T, S, offset, lead = _tiled_setup(
        q, k, v, causal, block_q, block_k, scale)
    dtype = np.result_type(q, k, v)
    o = np.empty(lead + (T, v.shape[-1]), dtype=dtype)
    m_all = np.empty(lead + (T,), dtype=dtype)
    l_all = np.empty(lead + (T,), dtype=dtype)
    with np.errstate(under="ignore"):
        for i0 in range(0, T, block_q):
            i1 = min(i0 + block_q, T)
            qi = q[..., i0:i1, :] * scale
            m = np.full(lead + (i1 - i0,), -np.inf, dtype=dtype)
            l = np.zeros(lead + (i1 - i0,), dtype=dtype)  # noqa: E741
            acc = np.zeros(lead + (i1 - i0, v.shape[-1]), dtype=dtype)
            for j0 in range(0, S, block_k):
                if causal and j0 > i1 - 1 + offset:
                    break  # this and all later key blocks are in the future
                j1 = min(j0 + block_k, S)
                s = qi @ _swap(k[..., j0:j1, :])
                if causal and j1 - 1 > i0 + offset:  # tile straddles the diagonal
                    s = np.where(causal_mask(T, S, i0, i1, j0, j1), s, -np.inf)
                m_new = np.maximum(m, s.max(axis=-1))
                # Rows that have seen no key yet keep m_new = -inf; shift them by 0
                # so exp(-inf - 0) = 0 instead of exp(-inf + inf) = nan.
                shift = np.where(np.isfinite(m_new), m_new, 0.0)
                alpha = np.exp(m - shift)
                p = np.exp(s - shift[..., None])
                l = alpha * l + p.sum(axis=-1)  # noqa: E741
                acc = alpha[..., None] * acc + p @ v[..., j0:j1, :]
                m = m_new
            o[..., i0:i1, :] = acc / l[..., None]
            m_all[..., i0:i1] = m
            l_all[..., i0:i1] = l
    if return_stats:
        return AttentionResult(o, m_all, l_all)
    return o


def merge_attention_states(a: AttentionResult, b: AttentionResult) -> AttentionResult:
    """Combine attention over two disjoint key sets into attention over their union.

    ``a`` and ``b`` hold normalized outputs and row statistics ``(o, m, l)`` of the
    same queries against key sets K1 and K2.  With ``m = max(m1, m2)`` and
    weights ``w_r = exp(m_r - m) l_r``: ``l = w_1 + w_2`` and
    ``o = (w_1 o_1 + w_2 o_2) / l``.  This is the online-softmax merge used by
    FlashAttention's inner loop and by ring / context-parallel attention.
    """
    o1, m1, l1 = a
    o2, m2, l2 = b
    with np.errstate(under="ignore"):
        m = np.maximum(m1, m2)
        shift = np.where(np.isfinite(m), m, 0.0)
        w1 = np.exp(m1 - shift) * l1
        w2 = np.exp(m2 - shift) * l2
        l = w1 + w2  # noqa: E741
        o = (w1[..., None] * o1 + w2[..., None] * o2) / l[..., None]
    return AttentionResult(o, m, l)


# ----------------------------------------------------------------------------
# backward
# ----------------------------------------------------------------------------


def naive_attention_backward(q, k, v, do, causal: bool = False, scale: float | None = None):
    """Gradients ``(dq, dk, dv)`` of ``sum(O * dO)`` from the materialized ``P``.

    With ``s = scale q k^T``, ``P = softmax(s)``, ``O = P V``:
    ``dV = P^T dO``, ``dP = dO V^T``, ``D_i = sum_j P_ij dP_ij = dO_i . O_i``,
    ``dS = P * (dP - D)``, ``dQ = scale dS K``, ``dK = scale dS^T Q``.
    Gradients have the shapes of ``q``, ``k``, ``v`` (summed over broadcast axes).
    """
    q, k, v = _check_qkv(q, k, v, causal)
    scale = _check_scale(scale, q.shape[-1])
    res = naive_attention(q, k, v, causal=causal, scale=scale, return_stats=True)
    do = _check_do(do, res.o.shape)
    T, S = q.shape[-2], k.shape[-2]
    with np.errstate(under="ignore"):
        s = (q * scale) @ _swap(k)
        if causal:
            s = np.where(causal_mask(T, S), s, -np.inf)
        p = np.exp(s - res.m[..., None]) / res.l[..., None]
        del s
        dv = _swap(p) @ do
        dp = do @ _swap(v)
        d = np.sum(do * res.o, axis=-1)
        ds = p * (dp - d[..., None])
        dq = scale * (ds @ k)
        dk = scale * (_swap(ds) @ q)
    return (_unbroadcast(dq, q.shape), _unbroadcast(dk, k.shape), _unbroadcast(dv, v.shape))


def _check_do(do, o_shape) -> np.ndarray:
    do = np.asarray(do)
    if do.dtype == object or not np.issubdtype(do.dtype, np.floating):
        raise TypeError(f"do must be a real floating-point array, got dtype {do.dtype}")
    if do.shape != tuple(o_shape):
        raise ValueError(
            f"do has shape {do.shape} but the attention output O has shape {tuple(o_shape)}; "
            "pass the gradient of the loss with respect to O"
        )
    if not np.all(np.isfinite(do)):
        raise ValueError("do contains nan or inf; the upstream gradient must be finite")
    return do


def _lse_from_stats(stats, row_shape) -> np.ndarray:
    if isinstance(stats, tuple) and len(stats) == 2:
        m, l = (np.asarray(x) for x in stats)  # noqa: E741
        if m.shape != row_shape or l.shape != row_shape:
            raise ValueError(
                f"stats (m, l) must both have shape {row_shape} (one value per query row), "
                f"got {m.shape} and {l.shape}"
            )
        if not np.all(l > 0):
            raise ValueError("stats l (row sum of exp) must be > 0; pass the l the forward returned")
        return m + np.log(l)
    if isinstance(stats, AttentionResult):
        raise TypeError("pass stats=(res.m, res.l) or stats=res.lse, not the whole AttentionResult")
    lse = np.asarray(stats)
    if lse.shape != row_shape:
        raise ValueError(
            f"stats must be the row log-sum-exp of shape {row_shape} or a pair (m, l); "
            f"got an array of shape {lse.shape}"
        )
    if not np.all(np.isfinite(lse)):
        raise ValueError("stats (log-sum-exp) contains nan or inf; pass the forward's lse")
    return lse


def flash_attention_backward(q, k, v, o, stats, do, causal: bool = False, block_q: int = 64,
                             block_k: int = 64, scale: float | None = None):
    """Tiled backward pass: recomputes ``P`` tile by tile from the saved row stats.

    ``o`` is the forward output and ``stats`` its row statistics, either the
    log-sum-exp ``lse`` (shape ``[..., T]``) or the pair ``(m, l)``.  First
    ``D_i = dO_i . O_i`` is computed for every row (O(T H) work, no key axis).
    Then for every tile (query block i, key block j):

        P_ij  = exp(scale q_i k_j^T - lse_i)       (masked entries -> 0)
        dV_j += P_ij^T dO_i
        dP_ij = dO_i V_j^T
        dS_ij = P_ij * (dP_ij - D_i)
        dQ_i += scale dS_ij K_j
        dK_j += scale dS_ij^T Q_i

    Only ``[..., block_q, block_k]`` tiles of P and dS ever exist.  Returns
    ``(dq, dk, dv)`` shaped like ``q``, ``k``, ``v``.
    """
    q, k, v, block_q, block_k, scale, T, S, offset, lead = _tiled_setup(
        q, k, v, causal, block_q, block_k, scale)
    o = np.asarray(o)
    if o.shape != lead + (T, v.shape[-1]):
        raise ValueError(
            f"o has shape {o.shape}, expected {lead + (T, v.shape[-1])}; pass the forward output"
        )
    do = _check_do(do, o.shape)
    lse = _lse_from_stats(stats, lead + (T,))
    dtype = np.result_type(q, k, v, do)
    dq = np.zeros(lead + q.shape[-2:], dtype=dtype)
    dk = np.zeros(lead + k.shape[-2:], dtype=dtype)
    dv = np.zeros(lead + v.shape[-2:], dtype=dtype)
    with np.errstate(under="ignore"):
        d = np.sum(do * o, axis=-1)  # D_i = dO_i . O_i: O(T H), no key axis
        for i0 in range(0, T, block_q):
            i1 = min(i0 + block_q, T)
            qi = q[..., i0:i1, :]
            doi = do[..., i0:i1, :]
            lse_i = lse[..., i0:i1, None]
            d_i = d[..., i0:i1, None]
            for j0 in range(0, S, block_k):
                if causal and j0 > i1 - 1 + offset:
                    break
                j1 = min(j0 + block_k, S)
                kj = k[..., j0:j1, :]
                vj = v[..., j0:j1, :]
                s = (qi * scale) @ _swap(kj)
                if causal and j1 - 1 > i0 + offset:
                    s = np.where(causal_mask(T, S, i0, i1, j0, j1), s, -np.inf)
                p = np.exp(s - lse_i)
                dv[..., j0:j1, :] += _swap(p) @ doi
                ds = p * (doi @ _swap(vj) - d_i)
                dq[..., i0:i1, :] += scale * (ds @ kj)
                dk[..., j0:j1, :] += scale * (_swap(ds) @ qi)
    return (_unbroadcast(dq, q.shape), _unbroadcast(dk, k.shape), _unbroadcast(dv, v.shape))


# ----------------------------------------------------------------------------
# memory and IO accounting
# ----------------------------------------------------------------------------


def _check_count(name: str, x, minimum: int = 1) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {x!r}")
    if x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def attention_memory_bytes(B: int, T: int, S: int, N: int, dtype_bytes: int = 2) -> int:
    """Bytes of one materialized score (or probability) tensor ``[B, N, T, S]``.

    ``B`` batch, ``T`` queries, ``S`` keys, ``N`` heads, ``dtype_bytes`` bytes per
    element (2 for bf16/fp16, 4 for fp32).  Naive attention materializes two such
    tensors (S and P) per layer; FlashAttention materializes none.
    """
    B, T, S, N = (_check_count(n, x) for n, x in (("B", B), ("T", T), ("S", S), ("N", N)))
    dtype_bytes = _check_count("dtype_bytes", dtype_bytes)
    return B * N * T * S * dtype_bytes


def attention_hbm_bytes(T: int, S: int, H: int, *, method: str = "naive", B: int = 1,
                        N: int = 1, dtype_bytes: int = 2, block_q: int | None = None,
                        block_k: int | None = None) -> int:
    """HBM bytes read + written by one attention forward, element-exact model.

    Per (batch, head), counting elements moved between HBM and on-chip SRAM,
    with Q: T x H, K and V: S x H, O: T x H:

    * ``"naive"`` (Dao et al. 2022, Algorithm 0): read Q, K, write S; read S,
      write P; read P, V, write O:  ``2 T H + 2 S H + 4 T S``  -> Theta(N d + N^2).
    * ``"flash1"`` (Algorithm 1, K/V blocks of ``block_k`` outer, Q blocks inner):
      K, V once, then for each of ceil(S / block_k) outer steps read Q, O, l, m and
      write O, l, m:  ``2 S H + ceil(S / block_k) T (3 H + 4)``.
    * ``"flash2"`` (FlashAttention-2 order, as :func:`flash_attention`; Q blocks
      of ``block_q`` outer): read Q, write O and lse once, read K and V once per
      query block:  ``2 T H + T + 2 S H ceil(T / block_q)``.

    With blocks of Theta(M / H) for SRAM size M both flash counts are
    Theta(N^2 d^2 / M) (Theorem 2).  Causal skipping is not modelled.
    Result in bytes: elements x ``B N dtype_bytes``.
    """
    T, S, H = (_check_count(n, x) for n, x in (("T", T), ("S", S), ("H", H)))
    B, N = _check_count("B", B), _check_count("N", N)
    dtype_bytes = _check_count("dtype_bytes", dtype_bytes)
    if method == "naive":
        elems = 2 * T * H + 2 * S * H + 4 * T * S
    elif method == "flash1":
        if block_k is None:
            raise ValueError("method='flash1' needs block_k (the K/V block size)")
        bk = _check_block("block_k", block_k)
        elems = 2 * S * H + (-(-S // bk)) * T * (3 * H + 4)
    elif method == "flash2":
        if block_q is None:
            raise ValueError("method='flash2' needs block_q (the query block size)")
        bq = _check_block("block_q", block_q)
        elems = 2 * T * H + T + 2 * S * H * (-(-T // bq))
    else:
        raise ValueError(f"method must be 'naive', 'flash1' or 'flash2', got {method!r}")
    return elems * B * N * dtype_bytes


#: Dao et al. (2022), Fig. 2 (left): attention forward + backward of GPT-2 medium
#: (sequence length 1024, head dim 64, 16 heads, batch 64) on an A100, standard
#: attention vs FlashAttention.  Source key ``dao2022flashattention``.
DAO2022_GPT2_MEDIUM = {
    "seq_len": 1024, "head_dim": 64, "heads": 16, "batch": 64,
    "gflops": {"standard": 66.6, "flash": 75.2},
    "hbm_gb": {"standard": 40.3, "flash": 4.4},
    "runtime_ms": {"standard": 41.7, "flash": 7.3},
    "source": "dao2022flashattention",
}


def flash_training_attention_flops(cfg, seq_len: int, batch: int = 1,
                                   causal: bool = False, window: bool = False) -> int:
    """Score-matmul FLOPs of one training step (forward + backward) with recompute.

    The convention of a FlashAttention training step: the forward computes
    ``S = Q K^T`` and ``O = P V`` (2 matmuls); the backward does not read a
    saved ``P`` but **recomputes** ``S = Q K^T`` from Q, K and the saved
    log-sum-exp, then computes ``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K``
    and ``dK = dS^T Q`` (5 matmuls).  Seven ``2 T S H`` matmuls per (batch,
    head) instead of the six of :func:`tmath.training_flops` (whose
    ``attention_scores + attention_values`` is ``3 x`` the forward).  With
    MHA-shaped heads (query/key and value head dims both ``H``) that is

        14 * B * T^2 * N * H  per layer, non-causal  (vs 12 * B * T^2 * N * H),

    summed over the layers; ``causal=True`` counts the lower triangle
    (``T(T+1)/2`` entries per head) and ``window`` has the meaning of
    :func:`tmath.forward_flops`.  Only the two score matmuls are counted (the
    projections and the MLP do not change).  When the query/key head dim
    differs from the value head dim (MLA), the recompute adds one more
    query/key product.  Dao et al. (2022), Fig. 2, measure 66.6 vs 75.2
    GFLOPs (standard vs FlashAttention, forward + backward, GPT-2 medium).

    The whole-model ledger in this convention is
    ``tmath.training_flops(cfg, ..., attention="flash")``, whose breakdown adds
    ``attention_recompute``; this helper returns just the attention part of it.
    """
    from tmath.flops import training_flops

    b = training_flops(cfg, seq_len, batch, causal, window, attention="flash").breakdown
    return b["attention_scores"] + b["attention_values"] + b["attention_recompute"]


def peak_memory_and_time(fn, *args, repeat: int = 1, **kwargs) -> tuple[int, float]:
    """Run ``fn(*args, **kwargs)`` and return ``(peak_bytes, best_seconds)``.

    ``peak_bytes`` is the peak of Python/NumPy allocations made *during* the
    call, measured with :mod:`tracemalloc` (inputs allocated before the call do
    not count).  The time is the best of ``repeat`` runs without tracing, with
    :func:`time.perf_counter`.  Both vary between machines and runs.
    """
    import time
    import tracemalloc

    repeat = _check_count("repeat", repeat)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return peak, best

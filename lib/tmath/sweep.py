"""Vectorized sweeps for plots: training FLOPs as a function of sequence length.

For a fixed config and batch, the exact training FLOPs of one step are a
quadratic in the sequence length T with no constant term::

    F(T) = p T + q T^2

(p: every matmul whose size scales with the number of tokens -- projections,
MLP/experts, LM head; q: the two attention matmuls Q K^T and P V, whose size
scales with T x T, or with T(T+1)/2 under a causal count, which is still
quadratic).  :func:`quadratic_coefficients` recovers p and q exactly (as
fractions) from ``tmath.training_flops`` at T = 1 and T = 2 and verifies the
form at T = 3 and T = 5, so the sweep always agrees with the ledger whatever
its conventions; :func:`flops_vs_seq_len` then evaluates the closed form on a
NumPy array.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["quadratic_coefficients", "flops_vs_seq_len"]


def quadratic_coefficients(cfg: Any, batch: int = 1, causal: bool = False) -> tuple[Fraction, Fraction]:
    """Exact (p, q) with ``training_flops(cfg, T, batch, causal).total == p T + q T^2``."""
    from tmath import training_flops  # lazy: provided by the flops module

    def f(t: int) -> int:
        return training_flops(cfg, seq_len=t, batch=batch, causal=causal).total

    f1, f2 = f(1), f(2)
    q = Fraction(f2 - 2 * f1, 2)
    p = f1 - q
    for t in (3, 5):
        if p * t + q * t * t != f(t):
            raise ValueError(
                f"training_flops({getattr(cfg, 'name', 'cfg')}) is not of the form pT + qT^2 "
                f"(checked at T={t}); the sweep cannot use its closed form"
            )
    return p, q


def flops_vs_seq_len(
    cfg: Any, seq_lens: Any, batch: int = 1, causal: bool = False, exact: bool = False
) -> np.ndarray:
    """Training FLOPs of one step for each sequence length in ``seq_lens``.

    Returns a float64 array (relative error ~1e-16), or with ``exact=True`` an
    object array of Python ints equal to ``training_flops(...).total``.
    ``seq_lens`` must be positive integers.
    """
    t = np.asarray(seq_lens)
    if t.size == 0:
        return np.zeros(t.shape, dtype=object if exact else np.float64)
    if not np.issubdtype(t.dtype, np.integer):
        if np.issubdtype(t.dtype, np.floating) and np.all(np.isfinite(t)) and np.all(t == np.round(t)):
            t = t.astype(np.int64)
        else:
            raise ValueError("seq_lens must be positive integers (e.g. np.arange(1, 8193))")
    if np.any(t < 1):
        raise ValueError(f"seq_lens must be >= 1, got min {int(t.min())}")
    p, q = quadratic_coefficients(cfg, batch, causal)
    if exact:
        out = np.empty(t.shape, dtype=object)
        flat = out.reshape(-1)
        for i, ti in enumerate(t.reshape(-1).tolist()):
            v = p * ti + q * ti * ti
            flat[i] = int(v)
        return out
    tf = t.astype(np.float64)
    return float(p) * tf + float(q) * tf * tf

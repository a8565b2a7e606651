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

__all__ = ["quadratic_coefficients", "flops_vs_seq_len", "six_n_t_threshold"]


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


def six_n_t_threshold(cfg: Any, tolerance: float | Fraction = Fraction(1, 10), causal: bool = False) -> int:
    """Smallest sequence length T at which 6PT underestimates the exact count by more than
    ``tolerance`` (a fraction: 0.1 is 10 %).

    With the exact FLOPs of one sequence p T + q T^2 (:func:`quadratic_coefficients`) and
    6PT = 6 P T (P: the active parameters, as :func:`tmath.six_n_t`), the error
    (6PT - exact) / exact falls below -tolerance exactly when 6 P < (1 - tolerance)(p + q T),
    i.e. T > (6 P / (1 - tolerance) - p) / q: a bound linear in the coefficients, solved in
    exact fractions.  ``causal=True`` counts the lower triangle of the scores only (a kernel
    that skips the masked blocks): the attention term halves and the threshold is later.
    A sliding-window model is quadratic only up to its window: the threshold is returned
    when it falls inside it (the same number either way), an error otherwise.
    """
    from tmath import six_n_t  # lazy: provided by the flops module
    from tmath.errors import InputError

    tol = Fraction(str(tolerance)) if isinstance(tolerance, float) else Fraction(tolerance)
    if not 0 < tol < 1:
        raise InputError(f"tolerance 必须在 0 与 1 之间（0.1 表示 10%），收到 {tolerance!r}", "tolerance")
    p, q = quadratic_coefficients(cfg, 1, causal)
    if q == 0:
        raise InputError(f"{getattr(cfg, 'name', 'cfg')}：精确计数没有 T² 项，6PT 的误差不随 T 增长",
                         "cfg")
    bound = (Fraction(six_n_t(cfg, 1)) / (1 - tol) - p) / q
    t = max(1, int(bound // 1) + 1)
    from tmath import training_flops

    if training_flops(cfg, seq_len=t, causal=causal, window=True).total != p * t + q * t * t:
        # sliding windows: quadratic only up to the window, so the bound does not hold there
        raise InputError(
            f"{getattr(cfg, 'name', 'cfg')}：T = {t} 时精确计数已不是 pT + qT²（滑动窗口让注意力"
            "不再随 T 平方增长），这个门槛不适用；请用 six_n_t_error 逐个 T 计算",
            "cfg",
        )
    return t


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

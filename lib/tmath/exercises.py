"""Answer keys for the book's exercises, and a checker that does not reveal them.

A student types ``tmath.check(my_answer, "ex-tour-1")`` in a cell and learns
whether the answer is right within the exercise's stated tolerance; the key
itself is never printed.  Keys are computed by tmath, by the same functions the
chapters use, so a key cannot drift from the book.  Each chapter's solution
cell asserts that its worked answer passes :func:`check`, which ties the
registry to the notebooks (nbval re-runs those asserts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AnswerKey:
    label: str
    compute: Callable[[], float]
    rel_tol: float = 1e-3
    abs_tol: float = 0.0
    unit: str = ""

    def tolerance_text(self) -> str:
        parts = []
        if self.rel_tol:
            parts.append(f"相对误差 ≤ {self.rel_tol:.2%}")
        if self.abs_tol:
            parts.append(f"绝对误差 ≤ {self.abs_tol:g}{(' ' + self.unit) if self.unit else ''}")
        return " 或 ".join(parts)


@dataclass(frozen=True)
class CheckResult:
    label: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return self.message

    def _repr_markdown_(self) -> str:
        return self.message


_KEYS: dict[str, AnswerKey] = {}


def answer(label: str, *, rel_tol: float = 1e-3, abs_tol: float = 0.0, unit: str = ""):
    """Register the function below as the answer key of exercise ``label``."""
    if rel_tol < 0 or abs_tol < 0 or (rel_tol == 0 and abs_tol == 0):
        raise ValueError(f"{label}: give a positive rel_tol or abs_tol (got {rel_tol}, {abs_tol})")

    def register(fn: Callable[[], float]) -> Callable[[], float]:
        if label in _KEYS:
            raise ValueError(f"answer key {label!r} registered twice")
        _KEYS[label] = AnswerKey(label, fn, rel_tol, abs_tol, unit)
        return fn

    return register


def labels() -> list[str]:
    """Labels of every exercise that has an answer key."""
    _load()
    return sorted(_KEYS)


def check(value, label: str) -> CheckResult:
    """Is ``value`` the answer to exercise ``label``, within its tolerance?

    Returns a :class:`CheckResult` that is truthy when correct and prints a
    short verdict in Chinese, never the key.
    """
    _load()
    if not isinstance(label, str) or label not in _KEYS:
        raise ValueError(
            f"no answer key for exercise {label!r}; use one of the labels shown next to the "
            f"exercise, e.g. {', '.join(sorted(_KEYS)[:3])}"
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"answer must be a number (int or float), got {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"answer must be a finite number, got {value!r}")
    key = _KEYS[label]
    expected = float(key.compute())
    ok = math.isclose(x, expected, rel_tol=key.rel_tol, abs_tol=key.abs_tol)
    verdict = "✓ 正确" if ok else "✗ 还不对"
    return CheckResult(label, ok, f"{label}：{verdict}（容差：{key.tolerance_text()}）")


def _load() -> None:
    # Importing the package registers the keys (one module per part of the book).
    from tmath import answer_keys  # noqa: F401

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
import re
from collections.abc import Callable
from dataclasses import dataclass

#: Units written as symbols (SI, bytes, FLOPs, and the book's letters); every other
#: unit a reader sees in a verdict is Chinese (``个 token``, ``条序列``, ``天`` ...).
UNIT_SYMBOLS: frozenset[str] = frozenset({
    "%", "B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "ms", "s", "kWh", "MWh",
    "FLOP", "FLOPs", "GFLOP", "FLOP/s", "FLOP/字节", "FLOPs/token", "t CO₂e", "kg CO₂e/kWh", "D",
})


def unit_is_readable(unit: str) -> bool:
    """Whether ``unit`` may be shown to a reader: empty, a symbol of :data:`UNIT_SYMBOLS`,
    or Chinese (a measure word such as ``个``, with an English term such as token allowed)."""
    return not unit or unit in UNIT_SYMBOLS or bool(re.search(r"[\u4e00-\u9fff]", unit))


def _with_unit(number: str, unit: str) -> str:
    """``"0.5 个 token"``, ``"0.05%"``: a space before a unit, none before ``%``."""
    if not unit:
        return number
    return number + unit if unit == "%" else f"{number} {unit}"


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
            parts.append(f"绝对误差 ≤ {_with_unit(f'{self.abs_tol:g}', self.unit)}")
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
        raise ValueError(
            f"{label}：rel_tol 或 abs_tol 至少有一个要大于 0（现在是 {rel_tol}、{abs_tol}）"
        )

    def register(fn: Callable[[], float]) -> Callable[[], float]:
        if label in _KEYS:
            raise ValueError(f"练习 {label!r} 的答案登记了两次")
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
            f"没有练习 {label!r} 的答案：请用练习旁边写明的编号，例如 "
            f"{'、'.join(sorted(_KEYS)[:3])}"
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"答案必须是一个数（int 或 float），收到的是 {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"答案必须是有限的数，收到的是 {value!r}")
    key = _KEYS[label]
    expected = float(key.compute())
    ok = math.isclose(x, expected, rel_tol=key.rel_tol, abs_tol=key.abs_tol)
    verdict = "✓ 正确" if ok else "✗ 还不对"
    return CheckResult(label, ok, f"{label}：{verdict}（容差：{key.tolerance_text()}）")


def _load() -> None:
    # Importing the package registers the keys (one module per part of the book).
    from tmath import answer_keys  # noqa: F401

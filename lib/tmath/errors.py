"""Bad input: the one exception that names the field, for the library and the command line.

:class:`InputError` is a ``ValueError`` and :class:`InputTypeError` is also a
``TypeError``, so code that catches the built-in exceptions keeps working; the
command line reads :attr:`InputError.field` to fill the ``"field"`` of its JSON
error object.  Messages are Chinese, like everything a reader sees, and name the
field and the fix.  :func:`show` renders an offending value for a message: short
and safe whatever it is (a 10^30 integer, a list nested a thousand deep).
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["InputError", "InputTypeError", "show", "has_chinese"]


class InputError(ValueError):
    """Bad input. ``field`` names the config key, argument or flag at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its field
        return (type(self), (str(self), self.field))


class InputTypeError(InputError, TypeError):
    """Bad input of the wrong type (also a ``TypeError``)."""


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 4


def show(value: Any) -> str:
    """``repr(value)`` for an error message: at most a few dozen characters, never raising."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = len(str(abs(value))) if value.bit_length() < 13_000 else int(
            value.bit_length() * 0.30103) + 1
        return f"{'-' if value < 0 else ''}一个 {digits} 位的整数"
    try:
        return _REPR.repr(value)
    except Exception:  # a pathological object: say what it is
        return f"<{type(value).__name__}>"


def has_chinese(text: str) -> bool:
    """Whether ``text`` holds a CJK ideograph (every message a reader sees should)."""
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)

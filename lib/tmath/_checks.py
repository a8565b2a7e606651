"""Argument checks shared by the ledger modules: clear errors that name the argument."""

from __future__ import annotations

import operator
from typing import Any


def int_arg(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (NumPy integers too) of at least ``minimum``.

    A bool, a float or anything else that is not an integer raises ``TypeError``;
    a too-small integer raises ``ValueError``. Both messages name the argument.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value}")
    return value

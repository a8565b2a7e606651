"""Notebook helpers: glue values whose saved form does not depend on floating-point rounding.

The chapters' saved outputs are the book's regression tests (nbval compares every
glue record).  A float computed through a matmul or a reduction can differ in its
last bits between machines (NumPy's OpenBLAS picks its kernels by CPU at run
time, and the thread count changes the order of a sum).  :func:`glue` therefore
rounds every float to :data:`SIG_DIGITS` significant digits before it is saved:
far more than any page shows, and far fewer than the 15-17 digits where kernels
disagree.  Integers, strings and everything else are glued unchanged, so a value
that is exact by construction stays exact.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["SIG_DIGITS", "stable", "glue"]

SIG_DIGITS = 12


def stable(value: Any, digits: int = SIG_DIGITS) -> Any:
    """``value`` with every float rounded to ``digits`` significant digits.

    NumPy scalars become Python numbers (``np.float64(0.5)`` would print as
    such and break glue's format specs); lists, tuples and dict values are
    rounded element by element.  ``nan`` and ``inf`` pass through.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        x = float(value)
        if not math.isfinite(x) or x == 0.0:
            return x
        return float(f"{x:.{digits}g}")
    if isinstance(value, tuple):
        return tuple(stable(v, digits) for v in value)
    if isinstance(value, list):
        return [stable(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: stable(v, digits) for k, v in value.items()}
    return value


#: Where myst-nb's glue puts a value that is not displayed (``myst_nb.ext.glue.GLUE_PREFIX``).
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, variable: Any, display: bool = True) -> None:
    """:func:`myst_nb.glue` of ``stable(variable)``: the saved record is machine-independent.

    Without myst-nb (the course kit's notebooks have their glue resolved into their text and
    do not install it), the same record is written the way myst-nb writes it.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        _glue = _record
    _glue(name, stable(variable), display=display)


def _record(name: str, variable: Any, display: bool = True) -> None:
    """myst-nb's ``glue``, written out: the value's display bundle, tagged with its name."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)

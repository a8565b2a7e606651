"""Answer keys of the exercises of book/energy/ (see :mod:`tmath.exercises`)."""

from __future__ import annotations

from tmath.exercises import answer  # noqa: F401

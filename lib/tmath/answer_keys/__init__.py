"""Answer keys of the book's exercises, one module per part (see :mod:`tmath.exercises`).

Each module registers keys with ``@answer(label, rel_tol=..., abs_tol=...)``; the
label is the exercise's label in its notebook (``ex-<slug>-<n>``, with
``/part`` for one part of a multi-part exercise). Keys are computed with tmath,
never typed.
"""

from tmath.answer_keys import comm, energy, flash, flops, gpt3, ledger, scale, serve, tour  # noqa: F401

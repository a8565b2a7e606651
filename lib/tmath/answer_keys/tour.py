"""Answer keys of the exercises of book/intro/tour (see :mod:`tmath.exercises`)."""

from __future__ import annotations

import math

from tmath.exercises import answer


@answer("ex-tour-1", rel_tol=0, abs_tol=0.5, unit="parameters")
def _tour_1() -> float:
    from tmath import count_params, preset

    return count_params(preset("gpt3-125m")).total


@answer("ex-tour-1/share", rel_tol=0, abs_tol=0.05, unit="%")
def _tour_1_share() -> float:
    from tmath import count_params, preset

    cfg = preset("gpt3-125m")
    return 100 * (cfg.vocab_size + cfg.max_position) * cfg.hidden_size / count_params(cfg).total


@answer("ex-tour-2", rel_tol=0, abs_tol=0.5)
def _tour_2() -> float:
    # Smallest integer d with 12d / (12d + 13) > 0.99, i.e. d > 1287 / 12.
    return math.floor(1287 / 12) + 1

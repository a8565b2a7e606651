"""tmath.sweep.six_n_t_threshold: where 6PT starts to underestimate by more than a tolerance."""

from __future__ import annotations

from fractions import Fraction

import pytest

import tmath
from tmath import sweep


@pytest.mark.parametrize("causal", [False, True])
def test_threshold_is_the_first_length_beyond_the_tolerance(causal):
    # Checked against six_n_t_error itself, length by length, on both sides of the bound.
    llama = tmath.preset("llama3-70b")
    t = sweep.six_n_t_threshold(llama, 0.1, causal=causal)
    assert tmath.six_n_t_error(llama, t, causal=causal) < -0.1
    assert tmath.six_n_t_error(llama, t - 1, causal=causal) >= -0.1


def test_llama3_70b_thresholds_by_hand():
    # 6 P T = 0.9 (p T + q T^2): T = (6 P / 0.9 - p) / q, with p, q read off two lengths.
    llama = tmath.preset("llama3-70b")
    six = 6 * tmath.count_params(llama).active
    f1, f2 = (tmath.training_flops(llama, seq_len=t).total for t in (1, 2))
    q = Fraction(f2 - 2 * f1, 2)
    p = f1 - q
    bound = (Fraction(six) / Fraction(9, 10) - p) / q
    assert sweep.six_n_t_threshold(llama) == int(bound) + 1 == 6784
    # a causal kernel does about half the dot products: the threshold nearly doubles (1.66 D)
    assert sweep.six_n_t_threshold(llama, causal=True) == 13567
    assert round(13567 / llama.hidden_size, 2) == 1.66


def test_threshold_bad_input():
    llama = tmath.preset("llama3-70b")
    with pytest.raises(ValueError, match="tolerance"):
        sweep.six_n_t_threshold(llama, 1.5)
    mistral = tmath.preset("mistral-7b")  # window 4096: the threshold falls inside it
    t = sweep.six_n_t_threshold(mistral)
    assert t < mistral.sliding_window and tmath.six_n_t_error(mistral, t) < -0.1
    with pytest.raises(ValueError, match="pT"):  # a 512 window: beyond it T^2 no longer grows
        sweep.six_n_t_threshold(mistral.replace(sliding_window=512))

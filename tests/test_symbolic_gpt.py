"""The symbolic GPT parameter formulas against hand counts and against tmath.count_params."""

import sympy as sp

import tmath
from tmath import symbolic


def test_layer_formula_is_12d2_plus_13d_when_f_is_4d():
    d, f = symbolic.d, symbolic.f
    assert sp.expand(symbolic.gpt_layer_params().subs(f, 4 * d)) == 12 * d**2 + 13 * d


def test_gpt2_small_by_hand():
    # GPT-2 small: 12 layers, d = 768, F = 3072, V = 50257, n_ctx = 1024 -> 124,439,808 parameters
    # (the widely quoted count of the released checkpoint, weights tied).
    assert symbolic.gpt_model_params(768, 3072, 12, 50257, 1024) == 124_439_808


def test_formula_agrees_with_tensor_count_for_every_gpt3_size():
    for name in tmath.presets():
        cfg = tmath.preset(name)
        if cfg.model_type != "gpt2":
            continue
        formula = symbolic.gpt_model_params(
            cfg.hidden_size, cfg.intermediate_size, cfg.num_layers, cfg.vocab_size, cfg.max_position
        )
        assert formula == tmath.count_params(cfg).total, name

"""FLOPs: hand formulas, the einsum rule, 6NT, the attention crossover, invariants."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmath
from ledger_strategies import any_configs, dense_configs
from tmath.flops import FLOP_KEYS


def test_einsum_rule():
    B, T, D, F, N, H, S = 2, 3, 5, 7, 4, 6, 9
    assert tmath.einsum_flops("btd,df->btf", (B, T, D), (D, F)) == 2 * B * T * D * F
    assert tmath.einsum_flops("bqnh,bknh->bnqk", (B, T, N, H), (B, S, N, H)) == 2 * B * T * N * H * S
    assert tmath.einsum_flops("ij,jk->ik", (3, 4), (4, 5)) == 2 * 3 * 4 * 5  # 2NPM
    assert tmath.einsum_flops("i,i->", (8,), (8,)) == 2 * 8  # dot product 2P
    assert tmath.einsum_dims("bqnh,bknh->bnqk") == {"b": "batching", "q": "free", "n": "batching",
                                                    "h": "contracting", "k": "free"}


@pytest.mark.parametrize("spec,shapes,match", [
    ("btd,df->btf", [(2, 3, 4), (5, 6)], "index 'd'"),
    ("btd,df->btf", [(2, 3), (3, 6)], "operand 0"),
    ("btd,df", [(2, 3, 4), (4, 6)], "spec"),
    ("btd,df,fg->btg", [(2, 3, 4), (4, 6), (6, 2)], "two operands"),
    ("btd,df->btz", [(2, 3, 4), (4, 6)], "'z'"),
    ("...d,df->...f", [(2, 4), (4, 6)], "distinct letters"),
    ("bd,df->bf", [(2, 0), (0, 6)], "positive"),
])
def test_einsum_errors(spec, shapes, match):
    with pytest.raises(ValueError, match=match):
        tmath.einsum_flops(spec, *shapes)


def test_gpt3_175b_forward_by_hand():
    L, D, V, T, B, P = 96, 12288, 50257, 2048, 1, 2048
    f = tmath.forward_flops(tmath.preset("gpt3-175b"), seq_len=T, batch=B)
    per_token_layer = 2 * 4 * D * D + 2 * 8 * D * D  # QKV+O, two MLP matrices
    assert f.breakdown["attention_proj"] + f.breakdown["mlp"] == L * B * T * per_token_layer
    assert f.breakdown["attention_scores"] == f.breakdown["attention_values"] == L * 2 * B * T * T * D
    assert f.breakdown["lm_head"] == 2 * B * T * D * V
    assert f.breakdown["rope"] == 0 and P == 2048


def test_training_is_three_forward_except_rope():
    cfg = tmath.preset("llama3-8b")
    fwd = tmath.forward_flops(cfg, 16, 2)
    tr = tmath.training_flops(cfg, 16, 2)
    assert fwd.breakdown["rope"] == 128 * 16  # 2·(H/2)·T
    assert tr.total == 3 * (fwd.total - fwd.breakdown["rope"]) + fwd.breakdown["rope"]


def test_llama3_8b_single_token_training_is_six_times_matmul_weights():
    # T = B = 1: attention dot products are 2·2·N·H per layer; everything else is 2·(weights)
    weights = 8_030_261_248 - 128256 * 4096 - (32 * 2 * 4096 + 4096)  # minus embedding and norms
    dots = 32 * 2 * 2 * 32 * 128
    assert tmath.training_flops(tmath.preset("llama3-8b"), 1, 1).total == 6 * weights + 3 * dots + 128


def test_causal_counts_lower_triangle():
    cfg = tmath.preset("gpt2")
    T = 10
    full = tmath.forward_flops(cfg, T, 3, causal=False).breakdown
    causal = tmath.forward_flops(cfg, T, 3, causal=True).breakdown
    for k in ("attention_scores", "attention_values"):
        assert causal[k] * 2 * T * T == full[k] * T * (T + 1)
    for k in ("attention_proj", "mlp", "lm_head"):
        assert causal[k] == full[k]


def test_moe_and_mla_flops_by_hand():
    cfg = tmath.preset("deepseek-v3")
    f = tmath.forward_flops(cfg, seq_len=1, batch=1).breakdown
    D, N, E, k, Fm = 7168, 128, 256, 8, 2048
    assert f["routed_experts"] == 58 * k * 2 * 3 * D * Fm
    assert f["shared_experts"] == 58 * 2 * 3 * D * Fm
    assert f["router"] == 58 * 2 * D * E
    assert f["mlp"] == 3 * 2 * 3 * D * 18432
    assert f["attention_proj"] == 61 * 2 * (D * 1536 + 1536 * N * 192 + D * 576
                                           + 512 * N * 256 + N * 128 * D)
    assert f["attention_scores"] == 61 * 2 * N * 192 and f["attention_values"] == 61 * 2 * N * 128


def test_six_n_t():
    cfg = tmath.preset("gpt2")
    assert tmath.six_n_t(cfg, 1000) == 6 * 124_439_808 * 1000
    mix = tmath.preset("mixtral-8x7b")
    assert tmath.six_n_t(mix, 10) == 6 * 12_879_925_248 * 10
    assert tmath.six_n_t(mix, 10, which="total") == 6 * 46_702_792_704 * 10
    # Llama 3 8B at T=1: 6·N_non-embedding overestimates by exactly 6·norms minus the dots
    err = tmath.six_n_t_error(tmath.preset("llama3-8b"), 1, which="non_embedding")
    exact = tmath.training_flops(tmath.preset("llama3-8b"), 1).total
    assert err == pytest.approx((6 * (8_030_261_248 - 128256 * 4096) - exact) / exact)
    assert abs(tmath.six_n_t_error(tmath.preset("llama3-70b"), 2048)) < 0.05
    with pytest.raises(ValueError, match="which"):
        tmath.six_n_t(cfg, 5, which="dense")


def test_crossover_seed_assumptions_give_8d():
    # gated MLP, F = 4D, N = K, N·H = D, LM head excluded: T* = 8D exactly
    for D, N in [(512, 8), (1024, 16), (4096, 32)]:
        cfg = tmath.preset("llama3-8b").replace(hidden_size=D, intermediate_size=4 * D,
                                                num_heads=N, num_kv_heads=N)
        assert tmath.attention_crossover(cfg) == 8 * D
        assert tmath.attention_matmul_ratio(cfg, 8 * D) == pytest.approx(1.0)
        assert tmath.attention_matmul_ratio(cfg, 4096) == pytest.approx(4096 / (8 * D))
        # with the realistic F = 8D/3 (D divisible by 3 not needed: use F*3 = 8D) -> 6D
        gated = cfg.replace(intermediate_size=8 * D // 3)
        if (8 * D) % 3 == 0:
            assert tmath.attention_crossover(gated) == 6 * D


def test_crossover_llama3_70b_exact():
    D, F, N, K, H = 8192, 28672, 64, 8, 128
    b_all = 2 * D * (N + 2 * K) * H + 2 * N * H * D + 2 * 3 * D * F
    a = 2 * N * 2 * H
    cfg = tmath.preset("llama3-70b")
    assert tmath.attention_crossover(cfg) == Fraction(b_all, a) == 52224
    assert tmath.attention_crossover(cfg, against="ffn") == Fraction(2 * 3 * D * F, a) == 43008
    assert tmath.attention_crossover(cfg, causal=True) == 2 * 52224 - 1
    lm = tmath.attention_crossover(cfg, include_lm_head=True)
    assert lm == Fraction(80 * b_all + 2 * D * 128256, 80 * a)
    with pytest.raises(ValueError, match="against"):
        tmath.attention_crossover(cfg, against="mlp")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_bad_seq_len(bad):
    with pytest.raises((ValueError, TypeError), match="seq_len"):
        tmath.training_flops(tmath.preset("gpt2"), seq_len=bad)


@settings(max_examples=150, deadline=None)
@given(any_configs, st.integers(1, 64), st.integers(1, 4), st.booleans())
def test_breakdown_sums_and_flops_grow_with_t(cfg, T, B, causal):
    f = tmath.training_flops(cfg, T, B, causal)
    assert tuple(f.breakdown) == FLOP_KEYS
    assert sum(f.breakdown.values()) == f.total
    g = tmath.training_flops(cfg, T + 1, B, causal)
    assert g.total > f.total
    assert tmath.forward_flops(cfg, T, B, causal).total < f.total
    full = tmath.training_flops(cfg, T, B, False).total
    assert (f.total <= full) and ((f.total == full) == (not causal or T == 1))


@settings(max_examples=100, deadline=None)
@given(dense_configs(model_type="llama"), st.integers(1, 32))
def test_gqa_flops_only_change_kv_projections(cfg, T):
    mha = cfg.replace(num_kv_heads=cfg.num_heads)
    a, b = tmath.forward_flops(cfg, T).breakdown, tmath.forward_flops(mha, T).breakdown
    D, N, K, H = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    assert b["attention_proj"] - a["attention_proj"] == cfg.num_layers * T * 2 * D * 2 * (N - K) * H
    assert a["attention_scores"] == b["attention_scores"]

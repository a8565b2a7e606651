"""FLOPs: hand formulas, the einsum rule, 6NT, the attention crossover, invariants."""

from __future__ import annotations

import math
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
    # the book's letters work too (numpy accepts upper-case subscripts)
    assert tmath.einsum_flops("BTD,DF->BTF", (B, T, D), (D, F)) == 2 * B * T * D * F


def test_einsum_rule_without_a_summed_index_is_one_multiply_per_output():
    # Nothing is added: one multiply per output element, checked against numpy's result size.
    import numpy as np

    assert tmath.einsum_flops("i,j->ij", (3,), (5,)) == 3 * 5  # outer product
    assert tmath.einsum_flops("ij,ij->ij", (3, 5), (3, 5)) == 3 * 5  # element-wise product
    assert tmath.einsum_flops("bij,b->bij", (2, 3, 5), (2,)) == 2 * 3 * 5  # a scale per batch
    out = np.einsum("i,j->ij", np.ones(3), np.ones(5))
    assert tmath.einsum_flops("i,j->ij", (3,), (5,)) == out.size
    # an index in one operand only, summed away, is an addition again
    assert tmath.einsum_dims("ij,jk->k") == {"i": "summed", "j": "contracting", "k": "free"}
    assert tmath.einsum_flops("ij,jk->k", (3, 4), (4, 5)) == 2 * 3 * 4 * 5


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


# ---------------------------------------------------------------- sliding windows
def _pairs(T, W, causal):
    """Brute force: the (query i, key j) pairs a window-W layer uses."""
    if causal:
        return sum(1 for i in range(T) for j in range(T) if 0 <= i - j < W)
    return T * min(T, W)  # the dense band: each query against min(T, W) keys


def _windowed(layer_types, W):
    return tmath.preset("llama3-8b").replace(
        model_type="qwen3", num_layers=len(layer_types), qk_norm="per_head", sliding_window=W,
        layer_types=tuple(layer_types))


@pytest.mark.parametrize("T", [1, 3, 4, 5, 11])
@pytest.mark.parametrize("causal", [False, True])
def test_useful_window_flops_count_the_pairs_inside_the_window(T, causal):
    W = 4
    lt = ["full_attention", "sliding_attention", "sliding_attention"]
    cfg = _windowed(lt, W)
    B, N, H = 2, cfg.num_heads, cfg.head_dim
    full_pairs = sum(1 for i in range(T) for j in range(T) if j <= i) if causal else T * T
    pairs = full_pairs + 2 * _pairs(T, W, causal)
    f = tmath.forward_flops(cfg, T, B, causal=causal, window=True)
    assert f.breakdown["attention_scores"] == f.breakdown["attention_values"] == 2 * B * N * pairs * H
    assert f.window and not tmath.forward_flops(cfg, T, B, causal=causal).window
    # window=False: what eager computes, every layer the full (or lower-triangle) matrix
    g = tmath.forward_flops(cfg, T, B, causal=causal)
    assert g.breakdown["attention_scores"] == 2 * B * N * 3 * full_pairs * H
    for k in f.breakdown:
        if k not in ("attention_scores", "attention_values"):
            assert f.breakdown[k] == g.breakdown[k]
    t = tmath.training_flops(cfg, T, B, causal=causal, window=True)
    assert t.total == 3 * (f.total - f.breakdown["rope"]) + f.breakdown["rope"]


def test_window_flag_is_a_bool_and_changes_nothing_without_windows():
    cfg = tmath.preset("llama3-8b")
    assert tmath.forward_flops(cfg, 100, window=True).total == tmath.forward_flops(cfg, 100).total
    with pytest.raises(TypeError, match="window"):
        tmath.forward_flops(cfg, 8, window="useful")
    assert tmath.attention_crossover(cfg) == tmath.attention_crossover(cfg, window=False)


def test_mistral_never_crosses_with_its_window():
    m = tmath.preset("mistral-7b")
    assert m.sliding_window == 4096
    assert tmath.attention_crossover(m) == math.inf
    assert tmath.attention_crossover(m, causal=True) == math.inf
    assert tmath.attention_crossover(m, window=False) == 26624  # the full masked matrix
    # the attention share saturates: at most W keys per query, 4096 / 26624 of the other matmuls
    r = [tmath.attention_matmul_ratio(m, T) for T in (4096, 32768, 10**6)]
    assert r[0] == r[1] == r[2] == pytest.approx(4096 / 26624)
    assert tmath.attention_matmul_ratio(m, 32768, window=False) == pytest.approx(32768 / 26624)
    # 6PT's error saturates too, instead of growing without bound with T
    e = [tmath.six_n_t_error(m, T) for T in (8192, 65536, 2**20)]
    assert e[0] < 0 and e[1] == pytest.approx(e[2], rel=1e-3)
    assert tmath.six_n_t_error(m, 2**20, window=False) < 2 * e[2]


@pytest.mark.parametrize("causal", [False, True])
def test_mixed_window_crossover_is_where_the_ratio_crosses_one(causal):
    # Gemma-2-like: half the layers global; the crossover lies beyond the window.
    cfg = _windowed(["sliding_attention", "full_attention"] * 4, 1024)
    t = tmath.attention_crossover(cfg, causal=causal)
    assert 1024 < t < tmath.attention_crossover(cfg, causal=causal, window=False) * 2
    lo, hi = math.floor(t), math.floor(t) + 1
    assert tmath.attention_matmul_ratio(cfg, lo, causal=causal) <= 1 < tmath.attention_matmul_ratio(
        cfg, hi, causal=causal)
    # a window wider than T* changes nothing
    wide = _windowed(["sliding_attention", "full_attention"] * 4, 10**6)
    assert tmath.attention_crossover(wide, causal=causal) == tmath.attention_crossover(
        wide, causal=causal, window=False)


def test_gemma3_builds_two_rope_tables():
    from pathlib import Path

    cfg = tmath.ModelConfig.from_hf(Path(__file__).parent / "hf_configs" / "gemma-3-4b-text.json")
    assert tmath.forward_flops(cfg, 10).breakdown["rope"] == 2 * 256 * 10


def test_flash_attention_training_convention_is_14_btsnh_per_layer():
    # FlashAttention's backward recomputes QK^T: the two attention products cost
    # 12·B·T²·N·H per layer with saved probabilities and 14·B·T²·N·H with FlashAttention.
    cfg = tmath.preset("llama3-8b")
    B, T = 2, 4096
    N, H, L = cfg.num_heads, cfg.head_dim, cfg.num_layers
    eager = tmath.training_flops(cfg, seq_len=T, batch=B)
    flash = tmath.training_flops(cfg, seq_len=T, batch=B, attention="flash")
    dots = ("attention_scores", "attention_values")
    assert sum(eager.breakdown[k] for k in dots) == 12 * B * T * T * N * H * L
    assert sum(flash.breakdown[k] for k in (*dots, "attention_recompute")) == 14 * B * T * T * N * H * L
    assert flash.total - eager.total == 2 * B * T * T * N * H * L
    assert sum(flash.breakdown.values()) == flash.total
    with pytest.raises(ValueError, match="attention='sdpa'"):
        tmath.training_flops(cfg, seq_len=T, attention="sdpa")

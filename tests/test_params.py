"""count_params: hand formulas, published totals and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import tmath
from ledger_strategies import any_configs, dense_configs
from tmath.params import BREAKDOWN_KEYS

# Published totals (numel of the HF checkpoints / model cards).
PUBLISHED = {
    "gpt2": 124_439_808,          # HF gpt2 (tied)
    "llama3-8b": 8_030_261_248,   # Meta-Llama-3-8B safetensors total
    "llama3-70b": 70_553_706_496,  # Meta-Llama-3-70B safetensors total
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_totals(name):
    assert tmath.count_params(tmath.preset(name)).total == PUBLISHED[name]


def gpt2_formula(L, D, V, P):
    # per layer: attention 4D^2 + 4D, MLP 8D^2 + 5D, two LayerNorms 4D; final LN 2D
    return L * (12 * D * D + 13 * D) + V * D + P * D + 2 * D


@pytest.mark.parametrize("name,L,D", [("gpt2", 12, 768), ("gpt2-medium", 24, 1024),
                                      ("gpt2-large", 36, 1280), ("gpt2-xl", 48, 1600),
                                      ("gpt3-175b", 96, 12288)])
def test_gpt2_architecture_formula(name, L, D):
    cfg = tmath.preset(name)
    assert tmath.count_params(cfg).total == gpt2_formula(L, D, 50257, cfg.max_position)


def test_llama3_70b_breakdown_by_hand():
    D, F, L, N, K, H, V = 8192, 28672, 80, 64, 8, 128, 128256
    b = tmath.count_params(tmath.preset("llama3-70b")).breakdown
    assert b["attention"] == L * (2 * D * (N + K) * H)
    assert b["mlp"] == L * 3 * D * F
    assert b["norms"] == L * 2 * D + D
    assert b["embedding"] == b["lm_head"] == V * D
    assert b["positions"] == b["routed_experts"] == b["router"] == 0


def test_mixtral_total_and_active():
    D, F, L, N, K, H, V, E, k = 4096, 14336, 32, 32, 8, 128, 32000, 8, 2
    common = L * (2 * D * (N + K) * H + 2 * D + E * D) + D + 2 * V * D
    p = tmath.count_params(tmath.preset("mixtral-8x7b"))
    assert p.total == common + L * E * 3 * D * F
    assert p.active == common + L * k * 3 * D * F
    assert p.total == 46_702_792_704  # "47B" in the Mixtral paper


def test_deepseek_v3_by_hand():
    D, L, N, V, E, S, Fm, F = 7168, 61, 128, 129280, 256, 1, 2048, 18432
    rq, rkv, rope, nope, vd = 1536, 512, 64, 128, 128
    attn = D * rq + rq * N * (nope + rope) + D * (rkv + rope) + rkv * N * (nope + vd) + N * vd * D
    norms = L * (2 * D + rq + rkv) + D
    dense = 3 * 3 * D * F
    moe = 58 * (E * 3 * D * Fm + S * 3 * D * Fm + E * D)
    p = tmath.count_params(tmath.preset("deepseek-v3"))
    assert p.total == L * attn + norms + dense + moe + 2 * V * D
    assert round(p.total / 1e9) == 671  # the report's 671B
    assert round(p.active / 1e9) == 38  # 37.55B; the report's 37B excludes the input embedding
    assert round((p.active - V * D) / 1e8) == 366  # "36.6B activated" (DeepSeek-V3 weights README)
    # MTP module: enorm, hnorm, eh_proj (2D x D), one MoE layer, shared_head norm
    layer = attn + 2 * D + rq + rkv + E * 3 * D * Fm + 3 * D * Fm + E * D
    assert tmath.mtp_params(tmath.preset("deepseek-v3")) == 2 * D + 2 * D * D + layer + D
    assert tmath.mtp_params(tmath.preset("llama3-8b")) == 0


def test_count_params_rejects_non_config():
    with pytest.raises(TypeError, match="ModelConfig"):
        tmath.count_params({"hidden_size": 3})


@settings(max_examples=150, deadline=None)
@given(any_configs)
def test_breakdown_sums_to_total_and_active_le_total(cfg):
    p = tmath.count_params(cfg)
    assert tuple(p.breakdown) == BREAKDOWN_KEYS
    assert sum(p.breakdown.values()) == p.total
    assert sum(p.active_breakdown.values()) == p.active
    assert 0 < p.active <= p.total
    assert (p.active == p.total) == (not cfg.is_moe or cfg.experts_per_token == cfg.n_routed_experts)


@settings(max_examples=100, deadline=None)
@given(dense_configs(model_type="llama"))
def test_gqa_with_k_equal_n_is_mha(cfg):
    mha = cfg.replace(num_kv_heads=cfg.num_heads)
    D, N, H = cfg.hidden_size, cfg.num_heads, cfg.head_dim
    bias = (3 * N * H + D) if cfg.qkv_bias else 0
    assert tmath.count_params(mha).breakdown["attention"] == cfg.num_layers * (4 * D * N * H + bias)
    # and GQA saves exactly 2·D·(N−K)·H per layer
    saved = tmath.count_params(mha).total - tmath.count_params(cfg).total
    per = 2 * D * (N - cfg.num_kv_heads) * H + (2 * (N - cfg.num_kv_heads) * H if cfg.qkv_bias else 0)
    assert saved == cfg.num_layers * per


@settings(max_examples=100, deadline=None)
@given(dense_configs(model_type="mistral"))
def test_one_expert_top1_moe_equals_dense_plus_router(dense):
    # Same attention, norms, embeddings; one routed expert of width F, k = 1, no shared
    # experts, no dense layers: identical to the dense model except the E·D = D router.
    moe = dense.replace(model_type="mixtral", n_routed_experts=1, experts_per_token=1,
                        moe_intermediate_size=dense.intermediate_size)
    pd, pm = tmath.count_params(dense), tmath.count_params(moe)
    assert pm.total == pd.total + dense.num_layers * dense.hidden_size
    assert pm.active == pm.total
    assert pm.breakdown["routed_experts"] == pd.breakdown["mlp"]
    fd = tmath.training_flops(dense, seq_len=7, batch=2)
    fm = tmath.training_flops(moe, seq_len=7, batch=2)
    assert fm.breakdown["routed_experts"] == fd.breakdown["mlp"]
    assert fm.total == fd.total + 3 * 2 * 14 * dense.hidden_size * dense.num_layers

"""count_params: hand formulas, published totals and invariants."""

from __future__ import annotations

from pathlib import Path

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
    # Activated, both tables counted: 37.55B. The weights README (deepseek2024v3weights) now says
    # "36.7B (including 0.9B for Embedding and 0.9B for the output Head)": the count with both
    # tables is 0.85B more, and the count without the looked-up input embedding is 36.63B (what
    # an earlier revision of the README gave as "36.6B (including 0.9B for the output Head)").
    assert p.active == 37_552_282_624 and round(p.active / 1e9, 1) == 37.6 != 36.7
    assert round((p.active - V * D) / 1e8) == 366
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


# ---------------------------------------------------------------- the families of issue 15
HF = Path(__file__).parent / "hf_configs"

# Published parameter counts (model cards / technical reports), rounded as published. The
# exact equality with transformers is tests/test_crosscheck.py; this guards the config files.
PUBLISHED_ROUNDED = {  # file -> (total in units of 1e9, digits)
    "qwen3-8b": (8.19, 2),            # Qwen3 model card: 8.2B, 6.95B non-embedding
    "qwen3-30b-a3b": (30.5, 1),       # 30.5B total, 3.3B activated
    "gemma-2-9b": (9.24, 2),          # Gemma 2 report: 9.24B
    "gemma-2-27b": (27.23, 2),        # Gemma 2 report, Table 2: 1,179,648,000 + 26,047,480,320
    "gemma-3-1b-it": (1.00, 2),
    "phi-3-mini-4k-instruct": (3.82, 2),  # Phi-3 report: 3.8B
    "olmo-2-1124-7b": (7.30, 2),      # OLMo 2 report: 7.3B
    "gpt-oss-20b": (20.9, 1),         # gpt-oss model card: 20.9B total, 3.6B active
    "deepseek-v2-lite": (15.7, 1),    # DeepSeek-V2 report: 15.7B total
}


@pytest.mark.parametrize("name", PUBLISHED_ROUNDED)
def test_new_family_config_files_match_published_totals(name):
    total, digits = PUBLISHED_ROUNDED[name]
    cfg = tmath.ModelConfig.from_hf(HF / f"{name}.json")
    assert round(tmath.count_params(cfg).total / 1e9, digits) == total


def test_gpt_oss_published_active_count_excludes_the_embedding():
    # gpt-oss model card: 3.6B active parameters per token, not counting the token embedding.
    # (Qwen3-30B-A3B's "3.3B" activated is 3.35B with the embedding, and DeepSeek-V2-Lite's
    # "2.4B" is 2.45B without it: their rounding is not stated, so they are not tested.)
    p = tmath.count_params(tmath.ModelConfig.from_hf(HF / "gpt-oss-20b.json"))
    assert round((p.active - p.breakdown["embedding"]) / 1e9, 1) == 3.6


def test_qwen3_8b_qk_norms_and_olmo2_full_width_by_hand():
    q = tmath.count_params(tmath.ModelConfig.from_hf(HF / "qwen3-8b.json")).breakdown
    assert q["norms"] == 36 * (2 * 4096 + 2 * 128) + 4096  # 9,216 of them are q/k norms
    o = tmath.count_params(tmath.ModelConfig.from_hf(HF / "olmo-2-1124-7b.json")).breakdown
    assert o["norms"] == 32 * (2 * 4096 + (32 + 32) * 128) + 4096


def test_gemma2_27b_equals_the_report_table_2_exactly():
    # Gemma 2 report, Table 2: embedding 1,179,648,000, non-embedding 26,047,480,320 parameters
    b = tmath.count_params(tmath.preset("gemma-2-27b")).breakdown
    assert b["embedding"] == 1_179_648_000 and b["lm_head"] == 0  # tied
    assert sum(b.values()) - b["embedding"] == 26_047_480_320
    assert sum(b.values()) == 27_227_128_320


def test_gemma2_tied_and_four_norms_by_hand():
    b = tmath.count_params(tmath.ModelConfig.from_hf(HF / "gemma-2-9b.json")).breakdown
    D, L, N, K, H, F, V = 3584, 42, 16, 8, 256, 14336, 256000
    assert b["lm_head"] == 0 and b["embedding"] == V * D
    assert b["norms"] == L * 4 * D + D
    assert b["attention"] == L * (D * (N + 2 * K) * H + N * H * D)
    assert b["mlp"] == L * 3 * D * F


def test_gpt_oss_sinks_and_biases_by_hand():
    b = tmath.count_params(tmath.ModelConfig.from_hf(HF / "gpt-oss-20b.json")).breakdown
    D, L, N, K, H, E, F = 2880, 24, 64, 8, 64, 32, 2880
    assert b["attention"] == L * (D * (N + 2 * K) * H + (N + 2 * K) * H + N * H * D + D + N)
    assert b["routed_experts"] == L * E * (3 * D * F + 2 * F + D)
    assert b["router"] == L * (E * D + E)


def test_deepseek_v2_lite_mla_without_q_lora_by_hand():
    b = tmath.count_params(tmath.ModelConfig.from_hf(HF / "deepseek-v2-lite.json")).breakdown
    D, L, N, r, rope, nope, v = 2048, 27, 16, 512, 64, 128, 128
    per_layer = D * N * (nope + rope) + D * (r + rope) + r * N * (nope + v) + N * v * D
    assert b["attention"] == L * per_layer
    assert b["norms"] == L * (2 * D + r) + D
    assert b["shared_experts"] == 26 * 3 * D * 2 * 1408 and b["mlp"] == 3 * D * 10944

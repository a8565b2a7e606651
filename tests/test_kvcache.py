"""KV cache bytes for MHA, GQA, MQA and MLA."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmath
from ledger_strategies import dense_configs


def test_llama3_70b_bf16_is_320_kib():
    cfg = tmath.preset("llama3-70b")
    assert tmath.kv_cache_bytes_per_token(cfg) == 2 * 80 * 8 * 128 * 2 == 327_680 == 320 * 1024
    assert tmath.kv_cache_bytes_per_token(cfg, "fp32") == 655_360
    assert tmath.kv_cache_bytes_per_token(cfg, "fp8") == tmath.kv_cache_bytes_per_token(cfg, "int8")
    assert tmath.kv_cache_bytes_per_token(cfg, "int4") == 81_920
    assert tmath.kv_cache_bytes(cfg, 8192, batch=4) == 4 * 8192 * 327_680
    # 80 GiB holds 32 sequences of 8192 tokens: 8192 x 320 KiB = 2.5 GiB each
    assert tmath.max_sequences(cfg, 80 * 2**30, 8192) == 32


def test_mha_and_mqa():
    gpt2 = tmath.preset("gpt2")
    assert tmath.kv_cache_bytes_per_token(gpt2, "fp16") == 2 * 12 * 768 * 2
    mqa = tmath.preset("llama3-8b").replace(num_kv_heads=1)
    assert tmath.kv_cache_bytes_per_token(mqa) == 2 * 32 * 1 * 128 * 2


def test_mla_latent_cache():
    ds = tmath.preset("deepseek-v3")
    assert tmath.kv_cache_bytes_per_token(ds) == 61 * (512 + 64) * 2 == 70_272
    # the same heads in plain MHA would cache 2·L·N·(H_qk, H_v) → vs latent
    odd = ds.replace(kv_lora_rank=15, qk_rope_head_dim=8, num_layers=1, first_k_dense=0)
    assert tmath.kv_cache_bytes_per_token(odd, "int4") == 12  # 23 elements / 2 → 11.5 → 12


def test_unknown_dtype_lists_valid():
    with pytest.raises(ValueError) as e:
        tmath.kv_cache_bytes_per_token(tmath.preset("gpt2"), "fp4")
    for d in ("fp32", "bf16", "fp16", "fp8", "int8", "int4"):
        assert d in str(e.value)


def test_bad_arguments():
    cfg = tmath.preset("gpt2")
    with pytest.raises(ValueError, match="seq_len"):
        tmath.kv_cache_bytes(cfg, 0)
    with pytest.raises(ValueError, match="budget_bytes"):
        tmath.max_sequences(cfg, -5, 10)
    with pytest.raises(TypeError, match="budget_bytes"):
        tmath.max_sequences(cfg, 1.5e9, 10)
    with pytest.raises(TypeError, match="ModelConfig"):
        tmath.kv_cache_bytes_per_token("gpt2")


@settings(max_examples=100, deadline=None)
@given(dense_configs(), st.integers(1, 4096), st.integers(0, 2**34),
       st.sampled_from(["fp32", "bf16", "fp16", "fp8", "int8", "int4"]))
def test_max_sequences_is_the_floor(cfg, T, budget, dtype):
    per_seq = tmath.kv_cache_bytes(cfg, T, dtype=dtype)
    n = tmath.max_sequences(cfg, budget, T, dtype)
    assert n * per_seq <= budget < (n + 1) * per_seq
    assert per_seq == -(-2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * T
                        * {"fp32": 8, "bf16": 4, "fp16": 4, "fp8": 2, "int8": 2, "int4": 1}[dtype]
                        // 2)


# ---------------------------------------------------------------- sliding windows
def test_mistral_7b_keeps_its_4096_window():
    m = tmath.preset("mistral-7b")
    per_token = 2 * 32 * 8 * 128 * 2  # 128 KiB, all 32 layers windowed (W = 4096)
    assert tmath.kv_cache_bytes_per_token(m) == per_token
    assert tmath.kv_cache_bytes_sequence(m, 32768) == 4096 * per_token == 536_870_912  # 0.54 GB
    assert 32768 * per_token == 4_294_967_296  # what ignoring the window gave (4.295 GB)
    assert tmath.kv_cache_bytes_sequence(m, 1000) == 1000 * per_token  # below the window
    assert tmath.kv_cache_bytes(m, 32768, batch=3) == 3 * 536_870_912
    assert tmath.kv_cache_bytes_sequence(m, 32768, dtype="fp8", batch=2) == 536_870_912
    assert tmath.max_sequences(m, 80 * 10**9, 32768) == 80 * 10**9 // 536_870_912


def test_mixed_windows_by_layer():
    from pathlib import Path

    hf = Path(__file__).parent / "hf_configs"
    g = tmath.ModelConfig.from_hf(hf / "gemma-2-9b.json")  # 21 local (4096) + 21 global layers
    per_layer_token = 2 * 8 * 256 * 2
    T = 8192
    assert tmath.kv_cache_bytes_sequence(g, T) == per_layer_token * (21 * 4096 + 21 * T)
    oss = tmath.ModelConfig.from_hf(hf / "gpt-oss-20b.json")  # 12 x 128-token windows, 12 global
    assert tmath.kv_cache_bytes_sequence(oss, 131072) == 2 * 8 * 64 * 2 * (12 * 128 + 12 * 131072)
    g3 = tmath.ModelConfig.from_hf(hf / "gemma-3-1b-it.json")  # 26 layers: 22 local (512) + 4
    assert tmath.kv_cache_bytes_sequence(g3, 32768) == 2 * 1 * 256 * 2 * (22 * 512 + 4 * 32768)


@settings(max_examples=100, deadline=None)
@given(dense_configs(model_type="mistral"), st.integers(1, 300), st.integers(1, 200),
       st.integers(1, 3))
def test_window_sequence_bytes_brute_force(cfg, T, W, B):
    m = cfg.replace(sliding_window=W)
    per_layer_position = 2 * m.num_kv_heads * m.head_dim * 2
    kept = sum(1 for t in range(T) if T - t <= W)  # the last W positions
    assert tmath.kv_cache_bytes_sequence(m, T, batch=B) == B * m.num_layers * kept * per_layer_position
    assert tmath.kv_cache_bytes_sequence(m, T) <= tmath.kv_cache_bytes_sequence(
        m.replace(sliding_window=None), T)

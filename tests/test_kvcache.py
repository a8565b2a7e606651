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

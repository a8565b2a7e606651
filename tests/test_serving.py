"""Tests of tmath.serving: decode bound, concurrency, roofline, communication volume."""

import math

import pytest

import tmath
from tmath.hardware import HARDWARE
from tmath.serving import (
    allgather_bytes_per_rank,
    allreduce_bytes_per_rank,
    alltoall_bytes_per_rank,
    critical_batch,
    decode_time_lower_bound,
    dtype_bytes,
    kv_bytes_per_token_per_gpu,
    matmul_intensity,
    max_concurrent_sequences,
    moe_alltoall_bytes_per_layer,
    tp_allreduce_bytes_per_layer,
)

LLAMA3_70B_PARAMS = (
    70_553_706_496  # by hand: 80*(2*8192^2 + 2*8192*1024 + 3*8192*28672 + 2*8192) + 2*128256*8192 + 8192
)
LLAMA3_70B_KV_BF16 = 2 * 80 * 8 * 128 * 2  # K and V, L, K heads, H, 2 bytes = 327,680 = 320 KiB


def test_llama_param_constant_by_hand():
    per_layer = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    assert 80 * per_layer + 2 * 128256 * 8192 + 8192 == LLAMA3_70B_PARAMS


def test_decode_bound_seed_figures():
    # seed 003 §5.4: 140 GB / 3.35 TB/s = 41.8 ms; TP=8: 17.5 GB / 3.35 TB/s = 5.2 ms
    assert decode_time_lower_bound(140e9, 3.35e12) * 1e3 == pytest.approx(41.79, abs=0.01)
    assert decode_time_lower_bound(140e9, 3.35e12, tp=8) * 1e3 == pytest.approx(5.22, abs=0.01)
    # the whole checkpoint, 70,553,706,496 params x 2 bytes = 141.1 GB, would take 42.12 ms, 5.27 ms
    # (decode_bound reads less: the input embedding table is only looked up)
    wb = LLAMA3_70B_PARAMS * 2
    assert decode_time_lower_bound(wb, 3.35e12) * 1e3 == pytest.approx(42.121, abs=1e-3)
    assert decode_time_lower_bound(wb, 3.35e12, tp=8) * 1e3 == pytest.approx(5.265, abs=1e-3)
    # KV bytes add to the weights
    assert decode_time_lower_bound(1e9, 1e12, kv_bytes=1e9) == pytest.approx(2e-3)


def test_decode_bad_input():
    with pytest.raises(ValueError, match="bandwidth"):
        decode_time_lower_bound(1e9, 0)
    with pytest.raises(ValueError, match="tp"):
        decode_time_lower_bound(1e9, 1e12, tp=0)
    with pytest.raises(ValueError, match="weight_bytes"):
        decode_time_lower_bound(-1, 1e12)


def test_concurrency_core():
    # 440 GB of KV over the group, 320 KiB/token, 4K context: 440e9 / (327,680 * 4096) = 327.8
    assert max_concurrent_sequences(440e9, LLAMA3_70B_KV_BF16, 4096) == 327
    # the seed's 41 is one GPU's 55 GB: 55e9 / (0.32e6 * 4096) = 41.96 (0.32 "MB" for 320 KiB)
    assert max_concurrent_sequences(55e9, 0.32e6, 4096) == 41
    assert max_concurrent_sequences(-5e9, LLAMA3_70B_KV_BF16, 4096) == 0
    with pytest.raises(ValueError, match="context_len"):
        max_concurrent_sequences(1e9, 1000, 0)


def test_kv_per_gpu_sharding():
    assert kv_bytes_per_token_per_gpu(LLAMA3_70B_KV_BF16, 8, 8) == LLAMA3_70B_KV_BF16 / 8
    assert kv_bytes_per_token_per_gpu(800, 8, 16) == 100  # replicated heads: one head per GPU
    assert kv_bytes_per_token_per_gpu(800, 8, 3) == 300  # ceil(8/3) = 3 heads
    assert kv_bytes_per_token_per_gpu(576, 1, 8, mla=True) == 576


def test_critical_batch():
    h100 = HARDWARE["H100"]
    assert critical_batch(h100.dense_flops, h100.hbm_bandwidth) == pytest.approx(989 / 3.35)
    # TPU v5e: 197e12 / 819e9 = 240.5 -> the seed's "240" (bf16 weights)
    v5e = HARDWARE["TPUv5e"]
    assert critical_batch(v5e.dense_flops, v5e.hbm_bandwidth) == pytest.approx(240.54, abs=0.01)
    # seed's "2B" intensity means 1-byte weights: dense 120, MoE 120 E/k
    assert critical_batch(240e12, 1e12, weight_bytes=1) == 120
    assert critical_batch(240e12, 1e12, weight_bytes=1, experts=256, experts_per_token=8) == 3840
    # MoE over dense = E/k = 32 under one convention, not 16
    ratio = critical_batch(1, 1, experts=256, experts_per_token=8) / critical_batch(1, 1)
    assert ratio == 32
    with pytest.raises(ValueError, match="experts_per_token"):
        critical_batch(1, 1, experts=2, experts_per_token=3)


def test_matmul_intensity():
    # dense, weights only: 2 B D F / (2 D F) = B
    assert matmul_intensity(64, 4096, 4096, act_bytes=0) == pytest.approx(64)
    # with activations: by hand
    b, d, f = 64, 4096, 14336
    assert matmul_intensity(b, d, f) == pytest.approx(2 * b * d * f / (2 * d * f + 2 * b * (d + f)))
    # MoE weights-only: 2kB/(E * bytes)
    assert matmul_intensity(4096, 1024, 1024, act_bytes=0, experts=256, experts_per_token=8) == pytest.approx(
        2 * 8 * 4096 / (256 * 2)
    )


def test_collectives():
    assert allreduce_bytes_per_rank(8e9, 8) == pytest.approx(2 * 7 / 8 * 8e9)
    assert allgather_bytes_per_rank(8e9, 8) == pytest.approx(7e9)
    assert alltoall_bytes_per_rank(8e9, 4) == pytest.approx(6e9)
    assert allreduce_bytes_per_rank(1.0, 1) == 0


def test_tp_vs_moe_volume_ratio_is_2W_over_k():
    tokens, hidden = 4096, 7168
    for w, k in ((8, 8), (8, 2), (64, 8)):
        tp = tp_allreduce_bytes_per_layer(tokens, hidden, w)
        ep = moe_alltoall_bytes_per_layer(tokens, hidden, w, k)
        assert tp / ep == pytest.approx(2 * w / k)
        assert tp_allreduce_bytes_per_layer(tokens, hidden, w, training=True) == pytest.approx(2 * tp)


def test_dtype_bytes():
    assert [dtype_bytes(d) for d in ("fp32", "bf16", "fp8", "int8", "int4")] == [4, 2, 1, 1, 0.5]
    with pytest.raises(ValueError, match="dtype"):
        dtype_bytes("fp12")


# --- wrappers on presets (need tmath.preset / count_params / kv_cache_bytes_per_token) ---


def test_preset_decode_bound_llama3_70b():
    import tmath

    cfg = tmath.preset("llama3-70b")
    d = tmath.decode_bound(cfg, "H100", tp=8)
    # Every matrix is read once, but of the 128,256 x 8192 input embedding only one row per sequence.
    read = LLAMA3_70B_PARAMS - 128256 * 8192
    assert d.weight_bytes == 2 * read
    assert d.seconds == pytest.approx(2 * read / (8 * 3.35e12))
    assert tmath.decode_bound(cfg, "H100", tp=1).seconds * 1e3 == pytest.approx(41.49, abs=0.01)
    d2 = tmath.decode_bound(cfg, "H100", tp=8, batch=4, context_len=8192)
    assert d2.kv_bytes == 4 * 8192 * LLAMA3_70B_KV_BF16
    assert d2.tokens_per_s == pytest.approx(4 / d2.seconds)


@pytest.mark.parametrize("ctx,expected", [(4096, 377), (8192, 188), (32768, 47)])
def test_preset_concurrency_llama3_70b_8xh100(ctx, expected):
    import tmath

    c = tmath.concurrency(
        tmath.preset("llama3-70b"), "H100", tp=8, context_len=ctx, overhead_bytes_per_gpu=5e9
    )
    budget = 80 * 2**30 - 2 * LLAMA3_70B_PARAMS / 8 - 5e9  # 80 GiB per card
    assert c.kv_budget_bytes_per_gpu == pytest.approx(budget)
    assert c.sequences == math.floor(budget / (LLAMA3_70B_KV_BF16 / 8 * ctx)) == expected


def test_decode_bound_reads_the_whole_mla_latent_on_every_gpu():
    # DeepSeek V3: 671,026,404,352 bf16 parameters split over 8 GPUs; the MLA latent cache
    # (61 layers x (512 + 64) x 2 bytes per token) is not split by heads, so each GPU reads all of it.
    d = tmath.decode_bound(tmath.preset("deepseek-v3"), "H100", tp=8, context_len=4096,
                           moe_weights="total")
    kv = 61 * 576 * 2 * 4096
    weights = (671_026_404_352 - 129280 * 7168) * 2  # all but the input embedding table
    assert d.bytes_per_gpu == pytest.approx(weights / 8 + kv)
    assert d.seconds == pytest.approx((weights / 8 + kv) / 3.35e12)


def test_decode_bound_replicates_kv_heads_when_tp_exceeds_them():
    # Llama 3 70B has K = 8 KV heads: with tp = 16 each GPU holds one whole head (an eighth of
    # the cache), and each head sits on 2 GPUs.
    d = tmath.decode_bound(tmath.preset("llama3-70b"), "H100", tp=16, context_len=1000)
    assert d.kv_bytes == LLAMA3_70B_KV_BF16 * 1000
    assert d.kv_replicas == 2
    read = (LLAMA3_70B_PARAMS - 128256 * 8192) * 2
    assert d.bytes_per_gpu == pytest.approx(read / 16 + LLAMA3_70B_KV_BF16 * 1000 / 8)


def test_tp_must_divide_the_query_heads():
    # Qwen2-7B: 28 query heads, 4 KV heads.
    qwen = tmath.preset("qwen2-7b")
    with pytest.raises(ValueError, match=r"tp=8 不能整除 num_heads=28.*tp 可取 1, 2, 4, 7, 14, 28"):
        tmath.decode_bound(qwen, "H100", tp=8)
    with pytest.raises(ValueError, match=r"tp=3 不能整除 num_heads=64"):
        tmath.concurrency(tmath.preset("llama3-70b"), "H100", tp=3)
    # 28 heads split over 7 GPUs, but 4 KV heads cannot be replicated evenly over 7
    with pytest.raises(ValueError, match=r"tp=7 不是 num_kv_heads=4 的倍数"):
        tmath.tp_layout(qwen, 7)
    lay = tmath.tp_layout(qwen, 4)
    assert (lay.heads_per_gpu, lay.kv_heads_per_gpu, lay.kv_replicas) == (7, 1, 1)
    assert not lay.kv_replicated
    with pytest.raises(TypeError, match="tp"):
        tmath.tp_layout(qwen, 2.0)


def test_moe_decode_reads_the_experts_a_batch_touches():
    # DeepSeek V3: 58 MoE layers of 256 routed experts, each 3 x 7168 x 2048; 8 per token.
    cfg = tmath.preset("deepseek-v3")
    routed = 58 * 256 * 3 * 7168 * 2048
    rest = 671_026_404_352 - routed - 129280 * 7168  # shared experts, attention, ... (no input table)
    d1 = tmath.decode_bound(cfg, "H100", tp=8, batch=1)
    assert d1.experts_read == 8
    assert d1.weight_bytes == pytest.approx(2 * (rest + routed * 8 / 256))
    assert d1.weight_bytes == tmath.decode_bound(cfg, "H100", tp=8, moe_weights="active").weight_bytes
    # batch 32: 256 (1 - (1 - 8/256)^32) experts, by hand with exact fractions
    from fractions import Fraction

    e32 = float(256 * (1 - Fraction(31, 32) ** 32))
    d32 = tmath.decode_bound(cfg, "H100", tp=8, batch=32)
    assert d32.experts_read == pytest.approx(e32) and 160 < e32 < 170
    assert d32.weight_bytes == pytest.approx(2 * (rest + routed * e32 / 256))
    worst = tmath.decode_bound(cfg, "H100", tp=8, batch=32, moe_weights="total")
    assert worst.experts_read == 256 and worst.weight_bytes == pytest.approx(2 * (rest + routed))
    # a dense model has no experts to count
    assert tmath.decode_bound(tmath.preset("llama3-8b")).experts_read is None
    with pytest.raises(ValueError, match="moe_weights"):
        tmath.decode_bound(cfg, moe_weights="all")


def test_decode_bound_reads_a_tied_embedding_whole_but_not_the_position_table():
    # GPT-2 small: the 50,257 x 768 token table is also the LM head (read whole every step);
    # the 1024 x 768 learned position table is only looked up.
    d = tmath.decode_bound(tmath.preset("gpt2"), "H100")
    assert d.weight_bytes == (124_439_808 - 1024 * 768) * 2

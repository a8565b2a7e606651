"""tmath.serving.decode_step and prefill_step: HBM reads, FLOPs and the TP all-reduces of one
serving step, each checked against a hand calculation from the config and the datasheets."""

from __future__ import annotations

import pytest

import tmath
from tmath.serving import NCCL_BASE_LATENCY, decode_bound, decode_step, prefill_step

CFG = tmath.preset("llama3-70b")
L, D, N, H, V = CFG.num_layers, CFG.hidden_size, CFG.num_heads, CFG.head_dim, CFG.vocab_size
P = tmath.count_params(CFG)
MATMUL_PARAMS = P.total - P.breakdown["embedding"] - P.breakdown["norms"]  # lm_head included


def ring_all_reduce_seconds(nbytes: float, n: int = 8) -> float:
    # NVLink 4 between H100s, NCCL's effective 18 x 20.6 = 370.8 GB/s each way, 2(n-1) steps
    # of nbytes/n; NCCL v2.27.7-1's protocols (tuning.cc): LL 0.6 us per step at
    # min(141 GB/s, half the bandwidth), LL128 1.9 us at 92 %, Simple 3.4 us at all of it; the
    # fastest one (base latencies are the caller's option)
    sent = 2 * (n - 1) / n * nbytes
    w = 370.8e9
    return min(2 * (n - 1) * a + sent / bw for a, bw in ((0.6e-6, min(141e9, w / 2)),
                                                         (1.9e-6, 0.92 * w), (3.4e-6, w)))


@pytest.mark.parametrize("batch, ctx", [(1, 0), (1, 8191), (64, 4095)])
def test_decode_step_by_hand(batch, ctx):
    s = decode_step(CFG, "H100", tp=8, batch=batch, context_len=ctx)
    # HBM: the same bytes as the bandwidth bound
    bound = decode_bound(CFG, "H100", tp=8, batch=batch, context_len=ctx)
    assert s.memory_seconds == pytest.approx(bound.seconds, rel=1e-12)
    # FLOPs of one more token per sequence: every matmul weight once (2 FLOPs each), and the
    # new query row against ctx + 1 keys (scores and values) in every layer
    per_token = 2 * MATMUL_PARAMS + 2 * 2 * L * N * H * (ctx + 1)
    assert s.flops_per_gpu == pytest.approx(batch * per_token / 8, rel=1e-6)
    assert s.compute_seconds == pytest.approx(s.flops_per_gpu / 989e12, rel=1e-12)
    # 2 all-reduces per layer of the batch's hidden states in bf16
    assert (s.all_reduces, s.all_reduce_bytes) == (2 * L, batch * D * 2)
    assert s.all_reduce_seconds == pytest.approx(ring_all_reduce_seconds(batch * D * 2), rel=1e-12)
    assert s.seconds == pytest.approx(max(s.compute_seconds, s.memory_seconds)
                                      + 2 * L * s.all_reduce_seconds, rel=1e-12)
    assert s.tokens_per_s == pytest.approx(batch / s.seconds)


def test_one_token_on_eight_h100s_pays_160_all_reduces():
    s = decode_step(CFG, "H100", tp=8, batch=1, context_len=8191)
    assert s.all_reduces == 160
    # alpha dominates a 16 KB all-reduce: 14 steps of LL's 0.6 us (its 141 GB/s: 2.7 %)
    assert s.comm_seconds == pytest.approx(160 * 14 * 0.6e-6, rel=0.03)
    nccl = decode_step(CFG, "H100", tp=8, batch=1, context_len=8191, base_latency=NCCL_BASE_LATENCY)
    assert nccl.seconds - s.seconds == pytest.approx(160 * 6.6e-6, rel=1e-9)
    single = decode_step(CFG, "H100", tp=1, batch=1, context_len=0)
    assert single.all_reduces == 0 and single.comm_seconds == 0


def test_prefill_step_by_hand():
    t = 4096
    s = prefill_step(CFG, "H100", tp=8, prompt_len=t)
    # every token through every matmul but the LM head, which runs for the last token only;
    # causal attention: t(t+1)/2 query-key pairs per head, scores and values
    flops = 2 * (MATMUL_PARAMS - V * D) * t + 2 * V * D + 2 * 2 * L * N * H * t * (t + 1) // 2
    assert s.flops_per_gpu == pytest.approx(flops / 8, rel=1e-6)
    assert s.compute_seconds > s.memory_seconds  # a 4K prompt is compute-bound
    assert s.all_reduce_bytes == t * D * 2
    assert s.all_reduce_seconds == pytest.approx(ring_all_reduce_seconds(t * D * 2), rel=1e-12)
    assert s.tokens_per_s == pytest.approx(t / s.seconds)


def test_fp8_weights_use_the_fp8_peak_and_half_the_bytes():
    bf = decode_step(CFG, "H100", tp=2, batch=1, context_len=100)
    f8 = decode_step(CFG, "H100", tp=2, batch=1, context_len=100, weight_dtype="fp8")
    assert f8.compute_seconds == pytest.approx(bf.compute_seconds * 989 / 1979, rel=1e-12)
    weights_bf16 = decode_bound(CFG, "H100", tp=2).weight_bytes / 2  # per GPU
    assert bf.bytes_per_gpu - f8.bytes_per_gpu == pytest.approx(weights_bf16 / 2, rel=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(context_len=8192), "context_len"),
    (dict(compute_dtype="fp4"), "compute_dtype"),
    (dict(tp=3), "tp"),
    (dict(base_latency=-1.0), "base_latency"),
])
def test_bad_input_is_refused_by_name(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        decode_step(CFG, "H100", **kwargs)


def test_fp8_compute_needs_an_fp8_chip():
    with pytest.raises(ValueError, match="fp8"):
        prefill_step(CFG, "V100", tp=8, prompt_len=16, compute_dtype="fp8")

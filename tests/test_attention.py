"""Tests for tmath.attention: naive vs tiled (FlashAttention) forward and backward.

Expected values come from an independent per-row reference (plain loops over
query rows, causal visibility decided row by row), from hand-computed cases,
or from central finite differences; never from the function under test.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmath
from tmath.attention import (
    AttentionResult,
    attention_hbm_bytes,
    attention_memory_bytes,
    causal_mask,
    flash_attention,
    flash_attention_backward,
    merge_attention_states,
    naive_attention,
    naive_attention_backward,
)

RAISE = {"over": "raise", "divide": "raise", "invalid": "raise"}


def reference_attention(q, k, v, causal=False, scale=None):
    """Row-by-row attention on 2-D inputs: query i sees keys 0..i+S-T if causal."""
    T, H = q.shape
    S = k.shape[0]
    scale = 1.0 / math.sqrt(H) if scale is None else scale
    out = np.zeros((T, v.shape[1]))
    for i in range(T):
        n_visible = i + (S - T) + 1 if causal else S
        scores = [scale * float(np.dot(q[i], k[j])) for j in range(n_visible)]
        top = max(scores)
        w = [math.exp(s - top) for s in scores]
        total = math.fsum(w)
        out[i] = sum(wj * v[j] for j, wj in enumerate(w)) / total
    return out


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def make_qkv(rng, lead, T, S, H, Hv=None):
    Hv = H if Hv is None else Hv
    return (rng.standard_normal(lead + (T, H)), rng.standard_normal(lead + (S, H)),
            rng.standard_normal(lead + (S, Hv)))


# ----------------------------------------------------------------------------
# forward
# ----------------------------------------------------------------------------


def test_hand_computed_two_keys():
    # scores 0 and log 3 (scale 1) -> weights 1/4 and 3/4
    q = np.array([[1.0]])
    k = np.array([[0.0], [math.log(3.0)]])
    v = np.array([[4.0, 0.0], [0.0, 8.0]])
    expected = np.array([[1.0, 6.0]])
    for fn in (naive_attention, lambda *a, **kw: flash_attention(*a, block_k=1, **kw)):
        np.testing.assert_allclose(fn(q, k, v, scale=1.0), expected, rtol=1e-15)
    res = flash_attention(q, k, v, scale=1.0, block_k=1, return_stats=True)
    assert res.m[0] == pytest.approx(math.log(3.0))
    assert res.l[0] == pytest.approx(4.0 / 3.0)  # exp(-log 3) + exp(0)
    assert res.lse[0] == pytest.approx(math.log(4.0))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,bq,bk", [(16, 16, 4, 4), (16, 16, 5, 3), (13, 29, 4, 7),
                                       (9, 9, 16, 16), (1, 7, 1, 2), (10, 10, 1, 1)])
def test_forward_matches_reference(causal, T, S, bq, bk):
    rng = np.random.default_rng(T * 100 + S + bq + 7 * bk)
    q, k, v = make_qkv(rng, (), T, S, 6, Hv=5)
    ref = reference_attention(q, k, v, causal=causal)
    naive = naive_attention(q, k, v, causal=causal)
    with np.errstate(**RAISE):
        flash = flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk)
    assert rel_err(naive, ref) < 1e-12
    assert rel_err(flash, ref) < 1e-12


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 24), extra=st.integers(0, 12),
       H=st.integers(1, 8), bq=st.integers(1, 30), bk=st.integers(1, 30),
       causal=st.booleans())
def test_flash_equals_naive_property(seed, T, extra, H, bq, bk, causal):
    rng = np.random.default_rng(seed)
    S = T + extra
    q, k, v = make_qkv(rng, (2,), T, S, H)
    with np.errstate(**RAISE):
        a = naive_attention(q, k, v, causal=causal, return_stats=True)
        b = flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk, return_stats=True)
    assert rel_err(b.o, a.o) < 1e-12
    np.testing.assert_allclose(b.m, a.m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.lse, a.lse, rtol=1e-12, atol=1e-12)


def test_leading_dims_and_broadcast_match_per_head_reference():
    rng = np.random.default_rng(1)
    B, N, T, S, H = 2, 4, 11, 11, 8
    q = rng.standard_normal((B, N, T, H))
    k = rng.standard_normal((B, 1, S, H))  # one K/V head shared by 4 query heads
    v = rng.standard_normal((B, 1, S, H))
    out = flash_attention(q, k, v, causal=True, block_q=4, block_k=3)
    assert out.shape == (B, N, T, H)
    for b in range(B):
        for n in range(N):
            ref = reference_attention(q[b, n], k[b, 0], v[b, 0], causal=True)
            assert rel_err(out[b, n], ref) < 1e-12


def test_causal_bottom_right_alignment():
    # T=2 queries, S=4 keys: query 0 sees keys 0..2, query 1 sees keys 0..3.
    np.testing.assert_array_equal(causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    rng = np.random.default_rng(2)
    q, k, v = make_qkv(rng, (), 2, 4, 3)
    out = flash_attention(q, k, v, causal=True, block_q=1, block_k=2)
    row0 = naive_attention(q[:1], k[:3], v[:3])  # non-causal on the visible prefix
    np.testing.assert_allclose(out[0], row0[0], rtol=1e-13)
    np.testing.assert_allclose(out[1], naive_attention(q[1:], k, v)[0], rtol=1e-13)


def test_float32_dtype_preserved():
    rng = np.random.default_rng(3)
    q, k, v = (x.astype(np.float32) for x in make_qkv(rng, (3,), 20, 20, 8))
    out = flash_attention(q, k, v, causal=True, block_q=6, block_k=7)
    assert out.dtype == np.float32
    ref = naive_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                          causal=True)
    assert rel_err(out, ref) < 1e-5


# ----------------------------------------------------------------------------
# merge identity (online softmax, ring attention)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("split", [1, 5, 12])
def test_merge_identity(split):
    rng = np.random.default_rng(4)
    q, k, v = make_qkv(rng, (), 6, 13, 4)
    a = naive_attention(q, k[:split], v[:split], return_stats=True)
    b = naive_attention(q, k[split:], v[split:], return_stats=True)
    merged = merge_attention_states(a, b)
    ref = reference_attention(q, k, v)
    assert rel_err(merged.o, ref) < 1e-12
    # l is relative to the merged max: l * exp(m) equals the total sum of exp(scores)
    s = q @ k.T / 2.0
    np.testing.assert_allclose(merged.l * np.exp(merged.m), np.exp(s).sum(axis=1), rtol=1e-12)
    # merging is symmetric
    np.testing.assert_allclose(merge_attention_states(b, a).o, merged.o, rtol=1e-13)


def test_merge_many_blocks_by_induction():
    rng = np.random.default_rng(5)
    q, k, v = make_qkv(rng, (), 4, 30, 3)
    edges = [0, 3, 4, 11, 20, 30]
    state = naive_attention(q, k[:3], v[:3], return_stats=True)
    for j0, j1 in zip(edges[1:-1], edges[2:], strict=True):
        state = merge_attention_states(
            state, naive_attention(q, k[j0:j1], v[j0:j1], return_stats=True))
    assert rel_err(state.o, reference_attention(q, k, v)) < 1e-12


# ----------------------------------------------------------------------------
# numerical safety
# ----------------------------------------------------------------------------


def test_extreme_scores_no_overflow_or_nan():
    # scale 1, q = 100 e1, k_j = +-100 e1  ->  scores exactly +-1e4
    T, S, H = 8, 16, 4
    q = np.zeros((T, H))
    q[:, 0] = 100.0
    signs = np.array([-1, 1, -1, -1, 1, -1, 1, 1, -1, -1, -1, 1, -1, 1, 1, -1], dtype=float)
    k = np.zeros((S, H))
    k[:, 0] = 100.0 * signs
    v = np.arange(S * 3, dtype=float).reshape(S, 3)
    with np.errstate(all="raise"):  # the library silences only harmless underflow
        naive = naive_attention(q, k, v, scale=1.0)
        for bq, bk in [(3, 2), (8, 16), (1, 5)]:
            flash = flash_attention(q, k, v, scale=1.0, block_q=bq, block_k=bk)
            np.testing.assert_allclose(flash, naive, rtol=1e-14)
        causal = flash_attention(q, k, v, causal=True, scale=1.0, block_q=3, block_k=2)
    # exp(-2e4) == 0 in float64: the output is the mean of the v rows with score +1e4
    np.testing.assert_allclose(naive, np.tile(v[signs > 0].mean(axis=0), (T, 1)), rtol=1e-14)
    # causal (offset S-T=8): query i sees keys 0..i+8
    for i in range(T):
        visible = signs[: i + 9] > 0
        np.testing.assert_allclose(causal[i], v[: i + 9][visible].mean(axis=0), rtol=1e-14)


def test_running_max_jumps_from_minus_1e4_to_plus_1e4():
    # the first key block has only -1e4 scores, the second +1e4: alpha = exp(-2e4) = 0
    q = np.array([[100.0]])
    k = np.array([[-100.0], [-100.0], [100.0]])
    v = np.array([[1.0], [2.0], [7.0]])
    with np.errstate(all="raise"):
        out = flash_attention(q, k, v, scale=1.0, block_k=2)
        dq, dk, dv = flash_attention_backward(
            q, k, v, out, flash_attention(q, k, v, scale=1.0, block_k=2, return_stats=True).lse,
            np.ones_like(out), scale=1.0, block_k=2)
    assert out[0, 0] == 7.0
    np.testing.assert_array_equal(dv, [[0.0], [0.0], [1.0]])
    assert np.all(np.isfinite(dq)) and np.all(np.isfinite(dk))


def test_fully_masked_blocks_and_empty_rows_in_block():
    # T = S = 12, block_q = 3, block_k = 2: most key blocks are entirely in the
    # future of early query blocks, and straddling tiles have rows with no
    # visible key; nothing may become nan.
    rng = np.random.default_rng(6)
    q, k, v = (100.0 * x for x in make_qkv(rng, (2,), 12, 12, 4))  # scores up to ~1e4
    with np.errstate(all="raise"):
        res = flash_attention(q, k, v, causal=True, block_q=3, block_k=2, return_stats=True)
        do = rng.standard_normal(res.o.shape)
        grads = flash_attention_backward(q, k, v, res.o, (res.m, res.l), do, causal=True,
                                         block_q=3, block_k=2)
    for b in range(2):
        assert rel_err(res.o[b], reference_attention(q[b], k[b], v[b], causal=True)) < 1e-12
    for g in grads:
        assert np.all(np.isfinite(g))


# ----------------------------------------------------------------------------
# backward
# ----------------------------------------------------------------------------


def finite_difference_grads(q, k, v, do, causal, h=1e-6):
    def loss(q_, k_, v_):
        return float(np.sum(reference_attention(q_, k_, v_, causal=causal) * do))

    grads = []
    for idx, x in enumerate((q, k, v)):
        g = np.zeros_like(x)
        for pos in np.ndindex(x.shape):
            args_p = [q.copy(), k.copy(), v.copy()]
            args_m = [q.copy(), k.copy(), v.copy()]
            args_p[idx][pos] += h
            args_m[idx][pos] -= h
            g[pos] = (loss(*args_p) - loss(*args_m)) / (2 * h)
        grads.append(g)
    return grads


@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_finite_differences(causal):
    rng = np.random.default_rng(7)
    q, k, v = make_qkv(rng, (), 5, 7, 3, Hv=2)
    do = rng.standard_normal((5, 2))
    fd = finite_difference_grads(q, k, v, do, causal)
    naive = naive_attention_backward(q, k, v, do, causal=causal)
    res = flash_attention(q, k, v, causal=causal, block_q=2, block_k=3, return_stats=True)
    flash = flash_attention_backward(q, k, v, res.o, res.lse, do, causal=causal,
                                     block_q=2, block_k=3)
    for g_fd, g_naive, g_flash in zip(fd, naive, flash, strict=True):
        np.testing.assert_allclose(g_naive, g_fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(g_flash, g_fd, rtol=1e-6, atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 20), extra=st.integers(0, 9),
       bq=st.integers(1, 25), bk=st.integers(1, 25), causal=st.booleans(),
       use_ml=st.booleans())
def test_flash_backward_equals_naive_property(seed, T, extra, bq, bk, causal, use_ml):
    rng = np.random.default_rng(seed)
    S = T + extra
    q, k, v = make_qkv(rng, (2, 3), T, S, 4)
    with np.errstate(**RAISE):
        res = flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk, return_stats=True)
        do = rng.standard_normal(res.o.shape)
        stats = (res.m, res.l) if use_ml else res.lse
        got = flash_attention_backward(q, k, v, res.o, stats, do, causal=causal,
                                       block_q=bq, block_k=bk)
        want = naive_attention_backward(q, k, v, do, causal=causal)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_d_identity_rowsum_p_dp_equals_do_dot_o():
    rng = np.random.default_rng(8)
    q, k, v = make_qkv(rng, (), 6, 9, 4)
    do = rng.standard_normal((6, 4))
    s = q @ k.T / 2.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    o = p @ v
    dp = do @ v.T
    np.testing.assert_allclose((p * dp).sum(axis=1), (do * o).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(o, flash_attention(q, k, v, block_q=4, block_k=4), rtol=1e-12)


def test_backward_broadcast_kv_sums_over_heads():
    rng = np.random.default_rng(9)
    q = rng.standard_normal((4, 6, 3))
    k = rng.standard_normal((1, 6, 3))
    v = rng.standard_normal((1, 6, 3))
    do = rng.standard_normal((4, 6, 3))
    dq, dk, dv = naive_attention_backward(q, k, v, do, causal=True)
    assert dk.shape == k.shape and dv.shape == v.shape
    kr, vr = np.repeat(k, 4, axis=0), np.repeat(v, 4, axis=0)
    dq_r, dk_r, dv_r = naive_attention_backward(q, kr, vr, do, causal=True)
    np.testing.assert_allclose(dq, dq_r, rtol=1e-13)
    np.testing.assert_allclose(dk[0], dk_r.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(dv[0], dv_r.sum(axis=0), rtol=1e-12)
    res = flash_attention(q, k, v, causal=True, block_q=4, block_k=4, return_stats=True)
    fl = flash_attention_backward(q, k, v, res.o, res.lse, do, causal=True, block_q=4, block_k=4)
    for g, w in zip(fl, (dq, dk, dv), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)


# ----------------------------------------------------------------------------
# memory: O(T^2) vs O(T), measured with tracemalloc (bytes, not time)
# ----------------------------------------------------------------------------


def _peak_bytes(fn, *args, **kwargs):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_naive_vs_tiled():
    T, H, block = 2048, 64, 128
    rng = np.random.default_rng(10)
    q, k, v = make_qkv(rng, (), T, T, H)
    naive_peak = _peak_bytes(naive_attention, q, k, v)
    flash_peak = _peak_bytes(flash_attention, q, k, v, block_q=block, block_k=block)
    score_bytes = T * T * 8  # one float64 [T, T] score matrix
    assert naive_peak >= score_bytes
    assert flash_peak < score_bytes / 10
    assert naive_peak > 10 * flash_peak


# ----------------------------------------------------------------------------
# memory and IO accounting
# ----------------------------------------------------------------------------


def test_attention_memory_bytes_seed_example():
    # seed 003 section 8.1: B=1, T=S=128K, N=64, bf16  ->  2^17 * 2^17 * 2^6 * 2 = 2^41 B
    n = attention_memory_bytes(B=1, T=128 * 1024, S=128 * 1024, N=64, dtype_bytes=2)
    assert n == 2**41 == 2_199_023_255_552  # 2 TiB = 2.199 TB
    assert attention_memory_bytes(2, 3, 5, 7, 4) == 2 * 3 * 5 * 7 * 4


def test_attention_hbm_bytes_hand_counts():
    # T=S=4, H=2 per head: naive 2*4*2 + 2*4*2 + 4*16 = 96 elements
    assert attention_hbm_bytes(4, 4, 2, method="naive", dtype_bytes=1) == 96
    # flash2, block_q=3: Q + O = 16, lse 4, K and V read ceil(4/3)=2 times: 2*2*8=32
    assert attention_hbm_bytes(4, 4, 2, method="flash2", block_q=3, dtype_bytes=1) == 52
    # flash1, block_k=2: K,V once (16) + 2 outer steps * 4 rows * (3*2+4) = 80
    assert attention_hbm_bytes(4, 4, 2, method="flash1", block_k=2, dtype_bytes=1) == 96
    assert attention_hbm_bytes(4, 4, 2, B=3, N=5, dtype_bytes=2) == 96 * 30
    # long sequence: naive ~ 4 T^2, flash2 ~ 2 T^2 H / block_q  ->  ratio ~ 2 block_q / H = 4
    T, H = 32768, 64
    ratio = attention_hbm_bytes(T, T, H) / attention_hbm_bytes(T, T, H, method="flash2", block_q=128)
    assert 3.9 < ratio < 4.0


def test_source_registered():
    assert "2205.14135" in tmath.sources.source("dao2022flashattention").where


# ----------------------------------------------------------------------------
# bad inputs
# ----------------------------------------------------------------------------


@pytest.fixture
def qkv():
    rng = np.random.default_rng(11)
    return make_qkv(rng, (), 4, 4, 2)


@pytest.mark.parametrize("bad,exc,match", [
    ({"block_q": 0}, ValueError, "block_q"),
    ({"block_k": -3}, ValueError, "block_k"),
    ({"block_q": 2.5}, TypeError, "block_q"),
    ({"block_k": True}, TypeError, "block_k"),
    ({"block_q": "8"}, TypeError, "block_q"),
    ({"scale": 0.0}, ValueError, "scale"),
    ({"scale": float("nan")}, ValueError, "scale"),
    ({"causal": "yes"}, TypeError, "causal"),
])
def test_bad_arguments(qkv, bad, exc, match):
    with pytest.raises(exc, match=match):
        flash_attention(*qkv, **bad)


def test_bad_arrays(qkv):
    q, k, v = qkv
    with pytest.raises(TypeError, match="q must be a real floating-point"):
        flash_attention(q.astype(int), k, v)
    with pytest.raises(TypeError, match="v must be a real floating-point"):
        naive_attention(q, k, v.astype(np.complex128))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        naive_attention(q[0], k, v)
    with pytest.raises(ValueError, match="head dimension"):
        flash_attention(q, k[:, :1], v)
    with pytest.raises(ValueError, match="same S"):
        flash_attention(q, k, v[:3])
    with pytest.raises(ValueError, match="do not broadcast"):
        flash_attention(np.stack([q, q]), np.stack([k, k, k]), np.stack([v, v, v]))
    with pytest.raises(ValueError, match="causal=True needs"):
        flash_attention(q, k[:2], v[:2], causal=True)
    with pytest.raises(ValueError, match="nan or inf"):
        flash_attention(np.where(q > 0, np.inf, q), k, v)
    with pytest.raises(ValueError, match="empty axis"):
        naive_attention(q[:0], k, v)


def test_bad_backward_arguments(qkv):
    q, k, v = qkv
    res = flash_attention(q, k, v, return_stats=True)
    do = np.ones_like(res.o)
    with pytest.raises(ValueError, match="do has shape"):
        flash_attention_backward(q, k, v, res.o, res.lse, do[:2])
    with pytest.raises(ValueError, match="do has shape"):
        naive_attention_backward(q, k, v, do[:, :1])
    with pytest.raises(ValueError, match="stats"):
        flash_attention_backward(q, k, v, res.o, res.lse[:2], do)
    with pytest.raises(ValueError, match="stats l"):
        flash_attention_backward(q, k, v, res.o, (res.m, -res.l), do)
    with pytest.raises(TypeError, match="stats"):
        flash_attention_backward(q, k, v, res.o, res, do)
    with pytest.raises(ValueError, match="o has shape"):
        flash_attention_backward(q, k, v, res.o[:3], res.lse, do)
    with pytest.raises(ValueError, match="block_k"):
        flash_attention_backward(q, k, v, res.o, res.lse, do, block_k=0)


def test_bad_accounting_arguments():
    with pytest.raises(ValueError, match="method"):
        attention_hbm_bytes(4, 4, 2, method="fast")
    with pytest.raises(ValueError, match="block_q"):
        attention_hbm_bytes(4, 4, 2, method="flash2")
    with pytest.raises(ValueError, match="T must be >= 1"):
        attention_memory_bytes(1, 0, 4, 1)
    with pytest.raises(TypeError, match="N must be an int"):
        attention_memory_bytes(1, 4, 4, 1.5)


def test_result_is_namedtuple():
    rng = np.random.default_rng(12)
    res = naive_attention(*make_qkv(rng, (), 3, 3, 2), return_stats=True)
    assert isinstance(res, AttentionResult)
    o, m, l_ = res
    assert o.shape == (3, 2) and m.shape == (3,) and l_.shape == (3,)


def test_flash_training_attention_flops_is_14_btnh_per_layer():
    import tmath
    from tmath.attention import flash_training_attention_flops

    cfg = tmath.preset("gpt2-medium")
    B, T, L, N, H = 2, 256, cfg.num_layers, cfg.num_heads, cfg.head_dim
    assert flash_training_attention_flops(cfg, T, B) == 14 * B * T**2 * N * H * L
    f = tmath.training_flops(cfg, T, B).breakdown
    assert f["attention_scores"] + f["attention_values"] == 12 * B * T**2 * N * H * L
    causal = flash_training_attention_flops(cfg, T, B, causal=True)
    assert causal == 14 * B * (T * (T + 1) // 2) * N * H * L

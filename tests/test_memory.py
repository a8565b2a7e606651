"""Tests of tmath.memory: recipes, ZeRO, Korthikanti activations, seed heuristic, recompute FLOPs."""

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmath.memory import (
    RECIPES,
    activation_bytes_per_layer,
    activation_bytes_seed_heuristic,
    attention_core_forward_flops,
    recompute_flops,
    training_bytes_per_param,
    zero_bytes_per_param,
)


def test_mixed_adam_is_16_bytes_with_parts():
    rb = training_bytes_per_param("mixed-adam")
    assert rb.total == 16
    assert rb.breakdown == {
        "weights_bf16": 2,
        "grads_bf16": 2,
        "master_fp32": 4,
        "adam_m_fp32": 4,
        "adam_v_fp32": 4,
    }
    assert (rb.weights, rb.grads, rb.optimizer) == (2, 2, 12)


@pytest.mark.parametrize(
    "recipe,total",
    [
        ("fp32-adam", 4 + 4 + 4 + 4),
        ("bf16-adam", 2 + 2 + 4 + 4),
        ("mixed-adam-fp32-grads", 2 + 4 + 12),
        ("bf16-adam-bf16-states", 8),
        ("bf16-inference", 2),
    ],
)
def test_other_recipes(recipe, total):
    assert training_bytes_per_param(recipe).total == total


def test_recipe_breakdowns_sum():
    for name in RECIPES:
        rb = training_bytes_per_param(name)
        assert sum(rb.breakdown.values()) == rb.total


def test_zero_matches_paper_figure_1():
    # ZeRO paper, Fig. 1: 7.5B params, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB.
    psi = 7.5e9
    got = [psi * zero_bytes_per_param("mixed-adam", s, 64) / 1e9 for s in range(4)]
    assert round(got[0]) == 120
    assert round(got[1], 1) == 31.4
    assert round(got[2], 1) == 16.6
    assert round(got[3], 2) == 1.88


def test_bad_recipe_and_stage():
    with pytest.raises(ValueError, match="recipe"):
        training_bytes_per_param("adamw-magic")
    with pytest.raises(ValueError, match="stage"):
        zero_bytes_per_param("mixed-adam", 4, 8)
    with pytest.raises(ValueError, match="dp"):
        zero_bytes_per_param("mixed-adam", 1, 0)
    with pytest.raises(TypeError, match="dp"):
        zero_bytes_per_param("mixed-adam", 1, 2.5)


def test_korthikanti_eq1_gpt3():
    # GPT-3 175B layer: s=2048, b=1, h=12288, a=96: sbh(34 + 5as/h) = sbh * (34 + 80).
    s, b, h, a = 2048, 1, 12288, 96
    assert activation_bytes_per_layer(s, b, h, a) == s * b * h * 114
    assert activation_bytes_per_layer(s, b, h, a, recompute="selective") == 34 * s * b * h
    assert activation_bytes_per_layer(s, b, h, a, recompute="full") == 2 * s * b * h


def test_korthikanti_tensor_and_sequence_parallel():
    s, b, h, a, t = 2048, 4, 12288, 96, 8
    sbh = s * b * h
    assert activation_bytes_per_layer(s, b, h, a, tp=t) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t))
    )
    assert activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True) == pytest.approx(
        sbh / t * (34 + 5 * a * s / h)
    )
    assert activation_bytes_per_layer(s, b, h, a, tp=t, recompute="selective") == pytest.approx(
        sbh * (10 + 3)
    )
    assert activation_bytes_per_layer(
        s, b, h, a, tp=t, recompute="selective", sequence_parallel=True
    ) == pytest.approx(34 * sbh / t)


@given(
    s=st.integers(1, 8192),
    b=st.integers(1, 64),
    h=st.integers(1, 8).map(lambda x: 128 * x),
    a=st.integers(1, 64),
    t=st.sampled_from([1, 2, 4, 8]),
)
def test_recompute_orders_memory(s, b, h, a, t):
    for sp in (False, True):
        none = activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=sp)
        sel = activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=sp, recompute="selective")
        full = activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=sp, recompute="full")
        assert full < sel < none
    # sequence parallelism never increases memory; with t = 1 it changes nothing
    assert activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True) <= activation_bytes_per_layer(
        s, b, h, a, tp=t
    )


def test_activation_bad_input():
    with pytest.raises(ValueError, match="recompute"):
        activation_bytes_per_layer(10, 1, 64, 4, recompute="some")
    with pytest.raises(ValueError, match="seq_len"):
        activation_bytes_per_layer(0, 1, 64, 4)
    with pytest.raises(TypeError, match="heads"):
        activation_bytes_per_layer(10, 1, 64, "4")


def test_seed_heuristic_recomputes_seed_figures():
    # seed 003 §7.1: B*T = 4M tokens, L = 64, D = 8192, 2 bytes: 84 TB / 29 TB / 4.2 TB.
    tb = 1e12
    assert activation_bytes_seed_heuristic(4e6, 8192, 64) == 2 * 20 * 4e6 * 8192 * 64
    assert round(activation_bytes_seed_heuristic(4e6, 8192, 64) / tb) == 84
    assert round(activation_bytes_seed_heuristic(4e6, 8192, 64, tensors_per_layer=7) / tb) == 29
    assert round(activation_bytes_seed_heuristic(4e6, 8192, 64, tensors_per_layer=1) / tb, 1) == 4.2
    # with 4M = 4 * 2**20 the first figure would be 88 TB (80 TiB), not 84
    assert round(activation_bytes_seed_heuristic(4 * 2**20, 8192, 64) / tb) == 88
    with pytest.raises(ValueError, match="tokens"):
        activation_bytes_seed_heuristic(-1, 8192, 64)


def test_recompute_flops_6_to_8():
    fwd = 2 * 10**9 * 4096  # 2 N T
    r = recompute_flops(3 * fwd, fwd, 0, "full")
    assert r.total == 8 * 10**9 * 4096
    assert r.ratio == pytest.approx(8 / 6)
    assert recompute_flops(3 * fwd, fwd, 123, "none").extra == 0
    assert recompute_flops(3 * fwd, fwd, 123, "selective").extra == 123
    with pytest.raises(ValueError, match="strategy"):
        recompute_flops(3, 1, 0, "partial")
    # layer checkpointing leaves the LM head out of the recomputed forward
    head = 10**9
    assert recompute_flops(3 * fwd, fwd, 0, "full", outside_layers_forward=head).extra == fwd - head
    with pytest.raises(ValueError, match="outside_layers_forward"):
        recompute_flops(3 * fwd, fwd, 0, "full", outside_layers_forward=2 * fwd)


def test_attention_core_forward_flops_by_hand():
    cfg = SimpleNamespace(num_layers=2, num_heads=4, head_dim=16, kv_lora_rank=0)
    # per layer: QK^T 2*b*N*T*T*H + PV 2*b*N*T*T*H
    assert attention_core_forward_flops(cfg, 10, 3) == 2 * (2 * 3 * 4 * 100 * 16 * 2)
    assert attention_core_forward_flops(cfg, 10, 3, causal=True) == 2 * (2 * 3 * 4 * 55 * 16 * 2)
    mla = SimpleNamespace(
        num_layers=1,
        num_heads=2,
        head_dim=0,
        kv_lora_rank=8,
        qk_nope_head_dim=12,
        qk_rope_head_dim=4,
        v_head_dim=10,
    )
    assert attention_core_forward_flops(mla, 5, 1) == 2 * 2 * 25 * (16 + 10)


def test_checkpoint_flops_full_recomputes_the_layers_not_the_lm_head():
    import tmath
    from tmath.memory import checkpoint_flops

    cfg = tmath.preset("llama3-8b")
    f = tmath.training_flops(cfg, seq_len=1024, batch=2, causal=False)
    train = f.total
    r = checkpoint_flops(cfg, 1024, 2, "full")
    assert r.base == train
    # one more forward of the 32 layers: every matmul's forward but the LM head's (2 D V a token)
    head_fwd = 2 * 1024 * 2 * cfg.hidden_size * cfg.vocab_size
    assert f.breakdown["lm_head"] == 3 * head_fwd
    assert r.extra == pytest.approx(train / 3 - head_fwd)
    assert r.total < train * 4 / 3
    sel = checkpoint_flops(cfg, 1024, 2, "selective")
    # Llama 3 8B: 32 layers, 32 heads of 128: 4 * b * N * T^2 * H per layer
    assert sel.extra == 32 * 4 * 2 * 32 * 1024**2 * 128


# --- activations per architecture (tmath.activation_bytes) --------------------------------


def test_gpt_block_is_korthikanti_plus_the_norm_statistics():
    import tmath

    # GPT-3 175B, s = 2048, micro-batch 1, bf16, 1-byte masks, no parallelism:
    # sbh(34 + 5as/h) (Korthikanti Eq. 1) + two LayerNorms' fp32 mean and rstd, 2 x 2 x 4 sb.
    s, b, h, a = 2048, 1, 12288, 96
    got = tmath.activation_bytes(tmath.preset("gpt3-175b"), s, b)
    assert got.per_layer == s * b * h * 34 + 5 * a * s * s * b + 16 * s * b
    assert got.total == 96 * got.per_layer and got.block == "gpt" and got.checked
    # TP = 8 without sequence parallelism: sbh(10 + 24/t) + 5as^2b/t, statistics whole on each GPU
    tp = tmath.activation_bytes(tmath.preset("gpt3-175b"), s, b, tp=8, sequence_parallel=False)
    assert tp.per_layer == s * b * h * (10 + 24 / 8) + 5 * a * s * s * b / 8 + 16 * s * b
    # selective recomputation drops the s x s terms; full keeps the layer input only
    sel = tmath.activation_bytes(tmath.preset("gpt3-175b"), s, b, recompute="selective")
    assert sel.per_layer == 34 * s * b * h + 16 * s * b
    full = tmath.activation_bytes(tmath.preset("gpt3-175b"), s, b, recompute="full", tp=8)
    assert full.per_layer == 2 * s * b * h / 8 and full.sequence_parallel


def test_llama_block_by_hand_is_about_half_of_korthikanti():
    import tmath

    # Llama 3 70B, s = 4096, micro-batch 1, TP = 8 with sequence parallelism, bf16, eager softmax:
    # 2 bytes x [norm inputs 2h + QKV input h + Q h + K, V repeated to all heads 2h + O input h
    # + MLP input h + gate, up, down input 3F] + softmax 2as^2 + rstd of two RMSNorms 2 x 4, all / 8.
    s, h, f, a, L = 4096, 8192, 28672, 64, 80
    per_layer = (2 * s * (8 * h + 3 * f) + 2 * a * s * s + 8 * s) / 8
    got = tmath.activation_bytes(tmath.preset("llama3-70b"), s, 1, tp=8)
    assert got.block == "llama" and got.per_layer == per_layer and got.total == L * per_layer
    old = tmath.activation_memory(tmath.preset("llama3-70b"), s, 1, tp=8, sequence_parallel=True)
    assert round(old / 1e9, 1) == 65.1 and 0.45 < got.total / old < 0.55
    # FlashAttention: no s x s term; K and V at the 8 KV heads (one per GPU), a fp32 logsumexp
    fl = tmath.activation_bytes(tmath.preset("llama3-70b"), s, 1, tp=8, attention="flash")
    kv = 2 * 2 * s * 8 * 128
    assert fl.per_layer == (2 * s * (6 * h + 3 * f) + kv + 4 * a * s + 8 * s) / 8
    assert "微批次 1" in got.describe_zh() and "序列并行开" in got.describe_zh()


def test_activation_bytes_bad_input():
    import tmath

    cfg = tmath.preset("llama3-8b")
    with pytest.raises(ValueError, match="recompute"):
        tmath.activation_bytes(cfg, 128, recompute="some")
    with pytest.raises(ValueError, match="attention"):
        tmath.activation_bytes(cfg, 128, attention="paged")
    with pytest.raises(ValueError, match="tp=3 不能整除 num_heads=32"):
        tmath.activation_bytes(cfg, 128, tp=3)
    with pytest.raises(ValueError, match="micro_batch"):
        tmath.activation_bytes(cfg, 128, 0)
    with pytest.raises(ValueError, match="dtype"):
        tmath.activation_bytes(cfg, 128, dtype="fp12")


def test_activation_symbols_are_the_notation_registry_letters():
    # Issue 14, item 1: the derivation speaks the book's letters (T B D N K H F n_TP b ...),
    # not Korthikanti's s b h a; a symbol outside tmath.notation would fail here.
    import sympy as sp

    from tmath import notation, symbolic

    assert set(symbolic.ACT_SYMBOLS) == set(symbolic.ACT_KEYS)
    for key, symbol in symbolic.ACT_SYMBOLS.items():
        assert symbol is notation.sym(key)
    T, B, D, N = notation.syms("T B D N")
    gpt = sum(symbolic.activation_layer_terms("gpt").values())
    subs = {notation.sym("H"): D / N, notation.sym("d_v"): D / N, notation.sym("F"): 4 * D,
            notation.sym("b"): 2, notation.sym("b_mask"): 1, notation.sym("b_stat"): 4,
            notation.sym("n_TP"): 1}
    # Korthikanti's sbh(34 + 5as/h) in the book's letters, plus the LayerNorm statistics 16TB
    assert sp.simplify(gpt.subs(subs) - (T * B * D * (34 + 5 * N * T / D) + 16 * T * B)) == 0
    assert {s.name for s in gpt.free_symbols} <= {e.sympy_name for e in notation.SYMBOLS.values()}


def test_segment_checkpointing_peak():
    import tmath
    from tmath.memory import PCIE_GEN5_X16_BYTES_PER_S, segment_checkpoint_bytes

    cfg = tmath.preset("llama3-70b")
    s, h, L = 8192, 8192, 80
    one = segment_checkpoint_bytes(cfg, s, 1, 1, tp=8)
    assert one.checkpoint == 2 * s * h / 8  # the layer input, split by sequence parallelism
    flash = tmath.activation_bytes(cfg, s, 1, tp=8, attention="flash")
    assert one.layer == flash.per_layer and one.n_segments == L
    assert one.peak == (L - 1) * one.checkpoint + one.layer
    ten = segment_checkpoint_bytes(cfg, s, 1, 10, tp=8)
    assert ten.n_segments == 8 and ten.peak == 7 * one.checkpoint + 10 * one.layer
    # 80 layers in segments of 3: 27 segments, the last one shorter
    assert segment_checkpoint_bytes(cfg, s, 1, 3, tp=8).n_segments == 27
    # a transformer layer keeps ~17x its input: sqrt(L)-sized segments cost more than one layer
    assert ten.peak > segment_checkpoint_bytes(cfg, s, 1, 2, tp=8).peak
    assert PCIE_GEN5_X16_BYTES_PER_S == 64e9
    with pytest.raises(ValueError, match="segment=81 超过 num_layers=80"):
        segment_checkpoint_bytes(cfg, s, 1, 81, tp=8)
    with pytest.raises(ValueError, match="segment"):
        segment_checkpoint_bytes(cfg, s, 1, 0, tp=8)


@pytest.mark.parametrize("block", ["gpt", "llama"])
def test_flash_attention_saves_the_terms_selective_recompute_drops(block):
    # Issue 16, item 14: FlashAttention already does the "selective" recompute. Against
    # eager attention without recomputation, both save exactly the T x T terms; FlashAttention
    # also keeps a fp32 logsumexp and (GQA) skips the repeated K, V copies.
    import sympy as sp

    from tmath import symbolic

    A = symbolic.ACT_SYMBOLS
    T, B, N, K, H, b = (A[k] for k in ("T", "B", "N", "K", "H", "b"))

    def kept(**kw):
        terms = symbolic.activation_layer_terms(block, **kw).values()
        return sp.expand(sum(terms).subs({A["n_TP"]: 1, A["d_v"]: H}))

    eager = kept()
    sel = sp.expand(eager - kept(recompute="selective"))
    flash = sp.expand(eager - kept(attention="flash"))
    assert sp.expand(sel - sel.coeff(T, 2) * T**2) == 0 and sel.coeff(T, 2) != 0
    lse = A["b_stat"] * N * T * B
    repeat = 2 * b * T * B * (N - K) * H
    assert sp.expand(flash - sel - repeat + lse) == 0

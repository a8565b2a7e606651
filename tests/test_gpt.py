"""tmath.gpt: the NumPy GPT against hand computations and against Hugging Face GPT-2."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tmath
from tmath import gpt, symbolic


@pytest.fixture(scope="module")
def tiny():
    cfg = gpt.scaled_down(tmath.preset("gpt3-175b"), hidden_size=32, num_heads=4, num_layers=2,
                          vocab_size=50, max_position=16)
    return cfg, gpt.init_params(cfg, seed=1, std=0.2)


# --------------------------------------------------------------------------- pieces


def test_layer_norm_by_hand():
    x = [1.0, 2.0, 3.0, 6.0]
    # mean 3, deviations -2,-1,0,3, biased variance (4+1+0+9)/4 = 3.5
    steps = gpt.layer_norm_steps(x, eps=0.0)
    assert steps.mean.item() == 3.0
    assert steps.var.item() == 3.5
    expected = [d / math.sqrt(3.5) for d in (-2, -1, 0, 3)]
    np.testing.assert_allclose(steps.normalized, expected, rtol=1e-12)
    y = gpt.layer_norm(x, [2.0, 2.0, 1.0, 1.0], [0.0, 1.0, 0.0, -1.0], eps=0.0)
    np.testing.assert_allclose(y, [2 * expected[0], 2 * expected[1] + 1, 0.0, expected[3] - 1],
                               rtol=1e-12)


def test_layer_norm_eps_and_bad_shapes():
    y = gpt.layer_norm([5.0, 5.0], [1.0, 1.0], [0.0, 0.0])  # zero variance: eps keeps it finite
    assert np.all(y == 0)
    with pytest.raises(ValueError, match="gamma must have shape"):
        gpt.layer_norm([1.0, 2.0, 3.0], [1.0, 1.0], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="eps"):
        gpt.layer_norm_steps([1.0, 2.0], eps=-1)


def test_gelu_tanh_form_close_to_erf_form():
    x = np.linspace(-5, 5, 101)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(gpt.gelu(x), exact, atol=1e-3)
    assert gpt.gelu(0.0) == 0.0
    assert gpt.gelu(1.0) == pytest.approx(0.8411919906082768, rel=1e-12)  # tanh formula by hand


def test_softmax_by_hand_and_masked():
    z = sum(math.exp(s) for s in (0.029, 0.046, 0.063))
    np.testing.assert_allclose(gpt.softmax([0.029, 0.046, 0.063]),
                               [math.exp(s) / z for s in (0.029, 0.046, 0.063)], rtol=1e-12)
    np.testing.assert_allclose(gpt.softmax([0.0, -np.inf]), [1.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        gpt.softmax([-np.inf, -np.inf])


def test_split_and_merge_heads():
    x = np.arange(2 * 6, dtype=float).reshape(2, 6)
    h = gpt.split_heads(x, 3)
    assert h.shape == (3, 2, 2)
    np.testing.assert_array_equal(h[1], x[:, 2:4])  # head c gets columns 2c, 2c+1
    np.testing.assert_array_equal(gpt.merge_heads(h), x)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        gpt.split_heads(x, 4)


def test_head_columns_and_rows():
    w = np.arange(4 * 6, dtype=float).reshape(4, 6)
    np.testing.assert_array_equal(gpt.head_columns(w, 2, 3), w[:, 4:6])
    np.testing.assert_array_equal(gpt.head_rows(w.T, 1, 3), w.T[2:4, :])
    with pytest.raises(ValueError, match="head index"):
        gpt.head_columns(w, 3, 3)


def test_attention_probs_causal_by_hand():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    k = np.array([[1.0, 0.0], [1.0, 1.0]])
    p = gpt.attention_probs(q, k, causal=True)
    assert p[0].tolist() == [1.0, 0.0]
    s = 1 / math.sqrt(2)  # row 1 scores: q1.k1 = 0, q1.k2 = 1, both scaled by 1/sqrt(2)
    np.testing.assert_allclose(p[1], [1 / (1 + math.exp(s)), math.exp(s) / (1 + math.exp(s))])


def test_multihead_big_matmul_equals_per_head_and_naive_attention():
    rng = np.random.default_rng(0)
    T, D, N = 5, 12, 3
    x = rng.standard_normal((T, D))
    wq, wk, wv, wo = (rng.standard_normal((D, D)) for _ in range(4))
    big = gpt.multihead_attention(x, wq, wk, wv, wo, N)
    np.testing.assert_allclose(big, gpt.multihead_attention_per_head(x, wq, wk, wv, wo, N),
                               rtol=1e-12, atol=1e-12)
    # independent: tmath.attention.naive_attention per head, concatenated, then W_O;
    # and the sum form sum_c head^(c) W_O^(c)
    H = D // N
    heads = [tmath.naive_attention(x @ wq[:, c * H:(c + 1) * H], x @ wk[:, c * H:(c + 1) * H],
                                   x @ wv[:, c * H:(c + 1) * H], causal=True) for c in range(N)]
    np.testing.assert_allclose(big, np.hstack(heads) @ wo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(big, sum(hd @ wo[c * H:(c + 1) * H] for c, hd in enumerate(heads)),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="w_o must have"):
        gpt.multihead_attention(x, wq, wk, wv, wo[:5], N)


# --------------------------------------------------------------------------- model


def test_param_count_matches_count_params(tiny):
    cfg, params = tiny
    assert params.num_params() == tmath.count_params(cfg).total
    # by hand: L (12 D^2 + 13 D) + V D + n_ctx D + 2 D with D = 32, L = 2, V = 50, n_ctx = 16
    assert params.num_params() == 2 * (12 * 32**2 + 13 * 32) + 50 * 32 + 16 * 32 + 2 * 32


def test_forward_shapes_and_trace(tiny):
    cfg, params = tiny
    r = gpt.forward(params, [3, 1, 4, 1, 5], trace=True)
    assert r.logits.shape == (5, 50) and r.probs.shape == (5, 50)
    np.testing.assert_allclose(r.probs.sum(axis=-1), 1.0, rtol=1e-12)
    assert [(s.op, s.shape, s.layer) for s in r.trace] == [
        (s.op, s.shape, s.layer) for s in gpt.shape_trace(cfg, 5)
    ]
    shapes = {s.op: s.shape for s in r.trace if s.layer in (None, 0)}
    assert shapes["qkv"] == (5, 96)
    assert shapes["scores"] == (4, 5, 5)
    assert shapes["mlp up"] == (5, 128)
    assert shapes["logits"] == (5, 50)
    assert len(r.attention) == 2 and r.attention[0].shape == (4, 5, 5)
    assert np.all(np.triu(r.attention[1], k=1) == 0)  # causal: nothing above the diagonal


def test_shape_trace_full_size_gpt3():
    steps = {s.op: s.shape for s in gpt.shape_trace(tmath.preset("gpt3-175b"), 1)
             if s.layer in (None, 0)}
    assert steps["token embedding"] == (1, 12288)
    assert steps["q (split heads)"] == (96, 1, 128)
    assert steps["mlp up"] == (1, 49152)
    assert steps["logits"] == (1, 50257)
    assert len(gpt.shape_trace(tmath.preset("gpt3-175b"), 1)) == 4 + 96 * 16 + 3


def test_forward_is_causal(tiny):
    _, params = tiny
    a = gpt.forward(params, [1, 2, 3, 4]).logits
    b = gpt.forward(params, [1, 2, 3, 9]).logits
    np.testing.assert_array_equal(a[:3], b[:3])  # changing a later token leaves earlier ones
    assert not np.allclose(a[3], b[3])


def test_bad_inputs(tiny):
    cfg, params = tiny
    with pytest.raises(ValueError, match="token_ids must lie"):
        gpt.forward(params, [0, 50])
    with pytest.raises(ValueError, match="max_position"):
        gpt.forward(params, list(range(17)))
    with pytest.raises(ValueError, match="token_ids must be"):
        gpt.forward(params, [[1, 2]])
    with pytest.raises(ValueError, match="gpt2-type"):
        gpt.init_params(tmath.preset("llama3-8b"))
    with pytest.raises(ValueError, match="scaled-down"):
        gpt.init_params(tmath.preset("gpt3-175b"))
    with pytest.raises(ValueError, match="num_heads"):
        gpt.scaled_down(tmath.preset("gpt3-175b"), 30, 4, 1, 10, 8)


def test_matches_huggingface_gpt2(tiny):
    """Same weights in transformers' GPT2LMHeadModel (an independent implementation)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg, params = tiny
    hf_cfg = transformers.GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.max_position, n_embd=cfg.hidden_size,
        n_layer=cfg.num_layers, n_head=cfg.num_heads, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
    )
    model = transformers.GPT2LMHeadModel(hf_cfg).double().eval()
    names = {"ln1_g": "ln_1.weight", "ln1_b": "ln_1.bias", "w_qkv": "attn.c_attn.weight",
             "b_qkv": "attn.c_attn.bias", "w_o": "attn.c_proj.weight", "b_o": "attn.c_proj.bias",
             "ln2_g": "ln_2.weight", "ln2_b": "ln_2.bias", "w_1": "mlp.c_fc.weight",
             "b_1": "mlp.c_fc.bias", "w_2": "mlp.c_proj.weight", "b_2": "mlp.c_proj.bias"}
    state = {"transformer.wte.weight": params.wte, "transformer.wpe.weight": params.wpe,
             "transformer.ln_f.weight": params.lnf_g, "transformer.ln_f.bias": params.lnf_b}
    for i, b in enumerate(params.blocks):
        state.update({f"transformer.h.{i}.{names[k]}": v for k, v in b.arrays().items()})
    sd = model.state_dict()
    for k, v in state.items():
        assert sd[k].shape == v.shape, k
        sd[k] = torch.from_numpy(np.ascontiguousarray(v))
    model.load_state_dict(sd)
    n_hf = sum(p.numel() for p in model.parameters())
    assert n_hf == params.num_params()
    ids = [7, 3, 42, 0, 9, 11]
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(gpt.forward(params, ids).logits, ref, rtol=1e-9, atol=1e-10)


# --------------------------------------------------------------------------- symbolic


def test_block_matrix_identities():
    big, per_head = symbolic.split_projection_identity(4)
    assert big == per_head
    collapsed, summed = symbolic.concat_output_identity(4)
    assert collapsed == summed
    assert symbolic.entrywise_split_difference(2, 6, 3).is_zero_matrix
    with pytest.raises(ValueError, match="divisible"):
        symbolic.entrywise_split_difference(2, 5, 2)


def test_shape_formulas_substitute_to_the_trace():
    import sympy as sp

    T, d, h, dh, F, V = sp.symbols("T d h d_head F V", positive=True, integer=True)
    steps = {s.op: s.shape for s in gpt.shape_formulas()}
    assert steps["qkv"] == (T, 3 * d)
    assert steps["scores"] == (h, T, T)
    assert steps["mlp up"] == (T, F)
    assert steps["logits"] == (T, V)
    vals = {T: 7, d: 12288, h: 96, dh: 128, F: 49152, V: 50257}
    full = [s for s in gpt.shape_trace(tmath.preset("gpt3-175b"), 7) if s.layer in (None, 0)]
    assert [tuple(int(sp.sympify(x).subs(vals)) for x in s.shape) for s in gpt.shape_formulas()] == [
        s.shape for s in full]


def test_markdown_table():
    t = gpt.markdown_table(["a", "b"], [[1, 2]])
    assert t.data == "| a | b |\n|---|---|\n| 1 | 2 |"
    with pytest.raises(ValueError, match="2 cells"):
        gpt.markdown_table(["a", "b"], [[1]])

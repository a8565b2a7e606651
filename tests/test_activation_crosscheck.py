"""Activations kept for backward: tmath.activation_bytes against transformers, byte for byte.

The measurement (tmath.actmeasure) runs a tiny GPT-2 (dropout 0.1, train mode) and a tiny
Llama (GQA 4/2, no dropout) in float32 on the CPU under saved_tensors_hooks and counts the
distinct storages saved per layer.  The formula is evaluated with the same assumptions
(fp32 activations, the CPU's activation-dtype dropout masks, transformers' eager kernels).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tmath import actmeasure  # noqa: E402


@pytest.mark.parametrize("seq_len,batch", [(24, 3), (40, 2)])
def test_gpt2_layer_matches_the_formula_exactly(seq_len, batch):
    r = actmeasure.check_activations(actmeasure.TINY_GPT2, seq_len, batch)
    assert r.measured == r.formula_hf
    # by hand, 4-byte elements, h = 64, a = 4, f = 4h: 30 sbh (gelu_new keeps 4 tensors of 4h)
    # + 4 sb (two LayerNorms' mean, rstd) + 3 as^2 b (softmax, dropout mask, dropout output)
    s, b, h, a = seq_len, batch, 64, 4
    assert r.measured == 4 * (30 * s * b * h + 4 * s * b + 3 * a * s * s * b)
    # the fused-kernel variant keeps one 4h tensor for GELU instead of four
    assert r.formula_hf - r.formula_fused == 4 * 3 * s * b * 4 * h


def test_gpt2_micro_batch_of_one_keeps_the_whole_qkv_buffer():
    # With b = 1 matmul keeps Q as a strided view of the fused c_attn output instead of a copy,
    # so the saved storage is the whole 3h-wide QKV buffer: 2 sbh more than the formula's Q.
    s, h = 7, 64
    r = actmeasure.check_activations(actmeasure.TINY_GPT2, s, 1)
    assert r.difference == 2 * 4 * s * h


@pytest.mark.parametrize("seq_len,batch", [(24, 3), (7, 1)])
def test_llama_layer_matches_the_formula_exactly(seq_len, batch):
    r = actmeasure.check_activations(actmeasure.TINY_LLAMA, seq_len, batch)
    assert r.measured == r.formula_hf
    # by hand: 10 sbh (two RMSNorms keep x and x-hat, QKV input, Q, K and V repeated to 4 heads,
    # O input, MLP input) + 4 sbf (gate, SiLU out, up, down input) + 2 sb (rstd) + as^2 b
    s, b, h, f, a = seq_len, batch, 64, 96, 4
    assert r.measured == 4 * (10 * s * b * h + 4 * s * b * f + 2 * s * b + a * s * s * b)


def test_llama_flash_attention_matches_the_formula_exactly():
    # transformers' sdpa attention (a flash kernel on the CPU): no s x s term; K and V at the
    # 2 KV heads; a float32 logsumexp per query head and token.
    s, b, h, f, a, k, d = 24, 3, 64, 96, 4, 2, 16
    r = actmeasure.check_activations(actmeasure.TINY_LLAMA, s, b, attention="flash")
    assert r.measured == r.formula_hf
    assert r.measured == 4 * (8 * s * b * h + 2 * s * b * k * d + 4 * s * b * f + 2 * s * b + a * s * b)


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="model_type"):
        actmeasure.check_activations({"model_type": "bert"}, 8, 1)
    with pytest.raises(ValueError, match="attention"):
        actmeasure.check_activations(actmeasure.TINY_LLAMA, 8, 1, attention="paged")

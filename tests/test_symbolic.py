"""The symbolic ledger (tmath.symbolic) against hand counts and tmath's numeric counters."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

import tmath
from tmath import symbolic as s

# The presets the symbolic ledger covers: dense, no MLA, two norms per layer (Gemma 2's four
# norms are counted by tmath.count_params only; symbolic.ledger_for refuses them).
DENSE = [
    n
    for n in tmath.presets()
    if not (tmath.preset(n).is_moe or tmath.preset(n).is_mla)
    and tmath.preset(n).norms_per_layer == 2
]


def test_llama3_70b_layer_by_hand():
    # L=80, D=8192, F=28672, N=64, K=8, H=128 (Llama 3 70B config.json), counted by hand.
    vals = {s.D: 8192, s.F: 28672, s.N: 64, s.K: 8, s.H: 128, s.B: 1, s.T: 1}
    t = {k: (int(p.subs(vals)), int(f.subs(vals))) for k, (p, f) in s.ledger_terms().items()}
    assert t["mlp"][0] == 3 * 8192 * 28672 == 704_643_072
    assert t["attention_proj"][0] == 8192 * 8192 * 2 + 2 * 8192 * 1024 == 150_994_944
    assert t["norms"] == (16_384, 0)
    assert t["attention_dot"][0] == 0
    assert t["mlp"][1] == 6 * 704_643_072  # one token: 6 FLOPs per weight
    assert t["attention_dot"][1] == 12 * 64 * 128  # T = 1: one score entry per head


def test_gelu_and_gated_mlp_and_mha_forms():
    g = s.ledger_terms("gelu")
    assert sp.expand(g["mlp"][0] - 2 * s.D * s.F) == 0
    assert sp.expand(g["mlp"][1] - 12 * s.B * s.T * s.D * s.F) == 0
    q = s.ledger_terms("gated")
    assert sp.expand(q["mlp"][1] - 18 * s.B * s.T * s.D * s.F) == 0
    mha = q["attention_proj"][0].subs({s.K: s.N, s.H: s.D / s.N})
    assert sp.simplify(mha - 4 * s.D**2) == 0
    gqa = q["attention_proj"][0].subs({s.K: s.N / 8, s.H: s.D / s.N})
    assert sp.simplify(gqa / mha) == sp.Rational(9, 16)  # 2.25 D^2 / 4 D^2


def test_causal_counts_lower_triangle():
    full = s.ledger_terms(causal=False)["attention_dot"][1]
    causal = s.ledger_terms(causal=True)["attention_dot"][1]
    vals = {s.B: 2, s.T: 5, s.N: 3, s.H: 4}
    # 3 (train) x 2 matmuls x 2 FLOPs x B N H x entries; 5 x 5 = 25 full, 15 causal
    assert full.subs(vals) == 3 * 2 * 2 * 2 * 3 * 4 * 25
    assert causal.subs(vals) == 3 * 2 * 2 * 2 * 3 * 4 * 15


@pytest.mark.parametrize("name", DENSE)
def test_model_params_match_count_params(name):
    cfg = tmath.preset(name)
    ledger = s.ledger_for(cfg)
    vals = s.ledger_subs(cfg)
    got = {k: int(p.subs(vals)) for k, (p, _) in ledger.items()}
    b = tmath.count_params(cfg).breakdown
    assert got["attention_proj"] == b["attention"]
    for k in ("embedding", "positions", "mlp", "norms", "lm_head"):
        assert got[k] == b[k], k
    assert int(s.ledger_totals(ledger)[0].subs(vals)) == tmath.count_params(cfg).total


@pytest.mark.parametrize("name", DENSE)
@pytest.mark.parametrize("causal", [False, True])
def test_model_flops_match_training_flops(name, causal):
    cfg = tmath.preset(name)
    T_, B_ = 1000, 3
    vals = s.ledger_subs(cfg, seq_len=T_, batch=B_)
    ledger = s.ledger_for(cfg, causal=causal)
    got = {k: int(f.subs(vals)) for k, (_, f) in ledger.items()}
    fb = tmath.training_flops(cfg, seq_len=T_, batch=B_, causal=causal).breakdown
    assert got["attention_dot"] == fb["attention_scores"] + fb["attention_values"]
    for k in ("attention_proj", "mlp", "lm_head"):
        assert got[k] == fb[k], k
    total = int(s.ledger_totals(ledger)[1].subs(vals))
    assert total == tmath.training_flops(cfg, T_, B_, causal).total - fb["rope"]


@pytest.mark.parametrize(
    "mlp,against,causal,expected",
    [
        ("gated", "all", False, 8), ("gated", "ffn", False, 6),
        ("gelu", "all", False, 6), ("gelu", "ffn", False, 4),
    ],
)
def test_crossover_under_seed_assumptions(mlp, against, causal, expected):
    # F = 4D, K = N, NH = D; per layer the dot products cost 12 B T^2 D and
    # gated+proj = 72+24 = 96 B T D^2, gated = 72, gelu+proj = 48+24, gelu = 48.
    e = s.crossover_expr(mlp, against=against, causal=causal)
    assert sp.simplify(e.subs(s.SEED_ASSUMPTIONS) - expected * s.D) == 0


def test_causal_crossover_is_2x_minus_1():
    e = s.crossover_expr("gated", causal=True).subs(s.SEED_ASSUMPTIONS)
    assert sp.simplify(e - (16 * s.D - 1)) == 0


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "llama3.1-405b", "mistral-7b"])
@pytest.mark.parametrize("against", ["all", "ffn"])
@pytest.mark.parametrize("causal", [False, True])
def test_crossover_matches_tmath(name, against, causal):
    cfg = tmath.preset(name)
    e = s.crossover_expr(cfg.mlp, against=against, causal=causal)
    got = sp.Rational(e.subs(s.ledger_subs(cfg)))
    # The symbolic ledger has no windows: compare with the full-matrix count.
    want = tmath.attention_crossover(cfg, against=against, causal=causal, window=False)
    assert Fraction(int(got.p), int(got.q)) == want


def test_mistral_window_never_crosses():
    # Mistral 7B's 4,096-token window caps the attention term: the share saturates below 1.
    cfg = tmath.preset("mistral-7b")
    assert cfg.sliding_window == 4096
    assert tmath.attention_crossover(cfg) == math.inf
    # Without the window: per layer per token, projections 2·D·(N+2K)·H + 2·D·D and MLP
    # 6·D·F (the per-layer crossover leaves out the LM head), against the T² coefficient 2·N·(H+H).
    b = 2 * 4096 * (32 + 2 * 8) * 128 + 2 * 4096 * 4096 + 6 * 4096 * 14336
    assert tmath.attention_crossover(cfg, window=False) == b / (2 * 32 * 256) == 26624


def test_llama3_70b_crossover_by_hand():
    # per layer per token: proj 2*8192*(64+16)*128 + 2*8192*8192, MLP 6*8192*28672;
    # T^2 coefficient 2*64*(128+128)
    b = 2 * 8192 * 80 * 128 + 2 * 8192 * 8192 + 6 * 8192 * 28672
    a = 2 * 64 * 256
    cfg = tmath.preset("llama3-70b")
    e = s.crossover_expr("gated").subs(s.ledger_subs(cfg))
    assert e == sp.Rational(b, a) == 52224


def test_bad_input():
    with pytest.raises(ValueError, match="mlp"):
        s.ledger_terms("swiglu")
    with pytest.raises(ValueError, match="norm"):
        s.ledger_terms(norm="batchnorm")
    with pytest.raises(TypeError, match="causal"):
        s.ledger_terms(causal=1)
    with pytest.raises(ValueError, match="against"):
        s.crossover_expr(against="mlp")
    with pytest.raises(ValueError, match="MoE or MLA"):
        s.ledger_subs(tmath.preset("mixtral-8x7b"))
    with pytest.raises(ValueError, match="seq_len"):
        s.ledger_subs(tmath.preset("llama3-8b"), seq_len=0)
    with pytest.raises(TypeError, match="ModelConfig"):
        s.ledger_subs({"hidden_size": 8})


def test_learned_positions_are_n_ctx_rows_not_p():
    """P is the parameter count (book/notation.md); the position table is n_ctx x D."""
    g = s.ledger_model("gelu", norm="layernorm", bias=True, tied=True, learned_positions=True)
    assert g["positions"][0] == s.n_ctx * s.D
    vals = s.ledger_subs(tmath.preset("gpt2"))
    assert vals[s.n_ctx] == 1024  # GPT-2's n_positions
    assert int(g["positions"][0].subs(vals)) == 1024 * 768
    assert sp.Symbol("P", positive=True, integer=True) not in vals


def test_ledger_for_refuses_what_it_cannot_count():
    qwen3 = tmath.ModelConfig.from_hf(Path(__file__).parent / "hf_configs" / "qwen3-8b.json")
    with pytest.raises(ValueError, match="qk_norm"):
        s.ledger_for(qwen3)
    gemma2 = tmath.ModelConfig.from_hf(Path(__file__).parent / "hf_configs" / "gemma-2-9b.json")
    with pytest.raises(ValueError, match="norms_per_layer"):
        s.ledger_for(gemma2)

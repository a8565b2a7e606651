"""tmath.moe: the seed's MoE shortcuts, MLA cache equivalents, critical batch, ring volumes.

Expected values are computed by hand from the published configs, not by tmath.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import tmath
from tmath import moe


def test_expert_params_by_hand():
    assert moe.expert_params(tmath.preset("deepseek-v3")) == 3 * 7168 * 2048
    assert moe.expert_params(tmath.preset("mixtral-8x7b")) == 3 * 4096 * 14336


def test_seed_shortcut_by_hand():
    s = moe.seed_moe_params(tmath.preset("deepseek-v3"))
    assert s["total"] == 256 * 3 * 7168 * 2048 * 61
    assert s["active"] == 8 * 3 * 7168 * 2048 * 61
    # The shortcut ignores attention, so it undercounts Mixtral's published 12.9B active.
    mix = moe.seed_moe_params(tmath.preset("mixtral-8x7b"))
    assert mix["active"] == 2 * 3 * 4096 * 14336 * 32 < 12.9e9


def test_kv_equivalents_by_hand():
    kv = moe.kv_equivalents(tmath.preset("deepseek-v3"), dtype="bf16", groups=8)
    assert kv["mla"] == 61 * (512 + 64) * 2
    assert kv["mha"] == 61 * 128 * (128 + 64 + 128) * 2
    assert kv["gqa"] == 61 * 8 * (128 + 64 + 128) * 2
    assert moe.kv_equivalents(tmath.preset("deepseek-v3"), dtype="fp8")["mla"] == 61 * 576


def test_mla_equivalent_groups_is_deepseek_v2_table_1():
    # DeepSeek-V2 Table 1: MLA's cache equals GQA with 2.25 groups.
    assert moe.mla_gqa_equivalent_groups(tmath.preset("deepseek-v3")) == Fraction(9, 4)


def test_critical_batch_by_hand():
    # TPU v5e: 197 TFLOP/s, 819 GB/s; bf16 weights -> ridge x 2 / 2 x E / k.
    ridge = 197e12 / 819e9
    assert moe.moe_critical_batch(tmath.preset("llama3-70b"), "TPUv5e") == pytest.approx(ridge)
    assert moe.moe_critical_batch(tmath.preset("deepseek-v3"), "TPUv5e") == pytest.approx(ridge * 32)
    assert moe.moe_critical_batch(tmath.preset("deepseek-v3"), "TPUv5e", "fp8") == pytest.approx(
        ridge / 2 * 32
    )
    assert moe.moe_critical_batch(tmath.preset("mixtral-8x7b"), "H100") == pytest.approx(
        989e12 / 3.35e12 * 4
    )


def test_ring_units_reproduce_seed_and_consistent_ratios():
    seed = moe.ring_comm_units(1, tp_training=True, moe_training=False)
    assert seed.ratio == 16  # (4 x 2V) / (2 x V/4)
    assert moe.ring_comm_units(1).ratio == 8
    assert moe.ring_comm_units(8).ratio == 1
    assert moe.ring_comm_units(2, tp_training=False, moe_training=False).ratio == 4


@pytest.mark.parametrize(
    "call, exc, field",
    [
        (lambda: moe.expert_params(tmath.preset("llama3-70b")), ValueError, "n_routed_experts"),
        (lambda: moe.expert_params({"hidden_size": 1}), TypeError, "cfg"),
        (lambda: moe.kv_equivalents(tmath.preset("mixtral-8x7b")), ValueError, "kv_lora_rank"),
        (lambda: moe.kv_equivalents(tmath.preset("deepseek-v3"), groups=0), ValueError, "groups"),
        (lambda: moe.kv_equivalents(tmath.preset("deepseek-v3"), groups=999), ValueError, "groups"),
        (lambda: moe.kv_equivalents(tmath.preset("deepseek-v3"), dtype="fp7"), ValueError, "dtype"),
        (lambda: moe.ring_comm_units(0), ValueError, "experts_per_token"),
        (lambda: moe.ring_comm_units(1.5), TypeError, "experts_per_token"),
        (lambda: moe.ring_comm_units(1, tp_training="yes"), TypeError, "tp_training"),
        (lambda: moe.moe_critical_batch(tmath.preset("deepseek-v3"), "nope"), ValueError, "hardware"),
    ],
)
def test_bad_input_names_the_field(call, exc, field):
    with pytest.raises(exc, match=field):
        call()


def test_symbolic_ledger_matches_hand_numbers():
    exprs = moe.moe_param_exprs()
    vals = moe.moe_subs(tmath.preset("deepseek-v3"))
    # Hand count of DeepSeek V3 (layout of the HF implementation): 671,026,404,352 total.
    D, V, L, N = 7168, 129280, 61, 128
    attn = D * 1536 + 1536 * N * 192 + D * 576 + 512 * N * 256 + N * 128 * D
    norms = L * (2 * D + 1536 + 512) + D
    moe_layer = (256 + 1) * 3 * D * 2048 + 256 * D
    total = 2 * V * D + L * attn + norms + 3 * 3 * D * 18432 + 58 * moe_layer
    active = total - 58 * (256 - 8) * 3 * D * 2048
    assert int(exprs["total"].subs(vals)) == total == 671_026_404_352
    assert int(exprs["active"].subs(vals)) == active


def test_critical_batch_expr():
    expr, s = moe.critical_batch_expr()
    e, k = moe.SYMBOLS["E"], moe.SYMBOLS["k"]
    assert expr.subs({s["R"]: 240, s["beta"]: 2, e: 256, k: 8}) == 7680
    assert expr.subs({s["R"]: 240, s["beta"]: 1, e: 1, k: 1}) == 120


def test_moe_subs_rejects_non_mla():
    with pytest.raises(ValueError, match="MLA"):
        moe.moe_subs(tmath.preset("mixtral-8x7b"))


def test_expected_experts_touched_by_hand():
    # E (1 - (1 - k/E)^B): B = 1 is k; E = 8, k = 2, B = 2: 8 (1 - 9/16) = 3.5
    assert moe.expected_experts_touched(256, 8, 1) == 8
    assert moe.expected_experts_touched(8, 2, 2) == 3.5
    assert moe.expected_experts_touched(8, 8, 5) == 8
    assert 255.9 < moe.expected_experts_touched(256, 8, 1000) <= 256
    with pytest.raises(ValueError, match="experts_per_token"):
        moe.expected_experts_touched(8, 9, 1)
    with pytest.raises(ValueError, match="tokens"):
        moe.expected_experts_touched(8, 2, 0)

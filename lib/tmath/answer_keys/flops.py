"""Answer keys of the exercises of book/flops/ (see :mod:`tmath.exercises`).

Conventions: FLOPs count a multiply-add as 2; bytes are the minimum traffic of
:func:`tmath.roofline.op_cost` (bf16 = 2 bytes per value); H100 numbers come
from ``get_hardware("H100")`` (dense bf16 peak, HBM bandwidth); percentages are
in percentage points.
"""

from __future__ import annotations

import math
from fractions import Fraction

from tmath.exercises import answer
from tmath.variants import varied

# ----------------------------------------------------------------------- units


def _ffn_down(p):
    from tmath import preset, roofline

    cfg = preset(p.model)
    return roofline.op_cost("matmul", p.tokens, cfg.intermediate_size, cfg.hidden_size)


@varied("ex-units-1/flops", rel_tol=0.01, unit="FLOPs")
def _units_1_flops(p) -> float:
    return _ffn_down(p).flops


@varied("ex-units-1/bytes", rel_tol=0.01, unit="字节")
def _units_1_bytes(p) -> float:
    return _ffn_down(p).bytes


@varied("ex-units-1/intensity", rel_tol=0.01, unit="FLOP/字节")
def _units_1_intensity(p) -> float:
    return _ffn_down(p).intensity


def _units_2(bytes_per_value: int, gpu: str) -> int:
    # Square matmul: 2N^3 FLOPs over 3 b N^2 bytes = 2N / (3b); smallest N with 2N/(3b) >= ridge.
    from tmath import get_hardware

    hw = get_hardware(gpu)
    ridge = Fraction(int(hw.dense_flops), int(hw.hbm_bandwidth))
    return math.ceil(ridge * 3 * bytes_per_value / 2)


@varied("ex-units-2/bf16", count=True)
def _units_2_bf16(p) -> float:
    return _units_2(2, p.gpu)


@varied("ex-units-2/fp32", count=True)
def _units_2_fp32(p) -> float:
    return _units_2(4, p.gpu)


@answer("ex-units-4", count=True, unit="FLOPs")
def _units_4() -> float:
    from tmath import einsum_flops

    return einsum_flops("bij,bjk->bik", (8, 96, 96), (8, 96, 96))


@answer("ex-units-5", count=True, unit="条序列")
def _units_5() -> float:
    from tmath import get_hardware, preset, roofline

    cfg, h100 = preset("llama3-70b"), get_hardware("H100")
    return next(bb for bb in range(1, 4096)
                if roofline.op_cost("matmul", bb, cfg.hidden_size, cfg.intermediate_size).intensity
                > h100.ridge_intensity)


# ---------------------------------------------------------------------- six-pt


@varied("ex-sixpt-1/flops", rel_tol=0.01, unit="FLOPs")
def _sixpt_1_flops(p) -> float:
    from tmath import forward_flops, preset

    return forward_flops(preset(p.model), seq_len=p.tokens).total / p.tokens


@varied("ex-sixpt-1/ratio", rel_tol=1e-3)
def _sixpt_1_ratio(p) -> float:
    # The causal kernel's ratio: the chapter prints the full T x T one (the training ratio).
    from tmath import count_params, forward_flops, preset

    cfg = preset(p.model)
    causal = forward_flops(cfg, seq_len=p.tokens, causal=True).total / p.tokens
    return causal / (2 * count_params(cfg).total)


@answer("ex-sixpt-2", rel_tol=0, abs_tol=0.1, unit="%")
def _sixpt_2() -> float:
    from tmath import get_hardware, preset, roofline, six_n_t

    run = roofline.reported_run("llama3-8b")
    flops = six_n_t(preset(run.preset), int(run.tokens))
    return 100 * roofline.implied_mfu(flops, run.gpu_hours, get_hardware(run.gpu).dense_flops)


def _matmul_train_per_param_token(*einsums) -> Fraction:
    # C = A B with A [n, p], B [p, m]: FLOPs of the listed einsums per parameter of B per token (row of A).
    from tmath import einsum_flops

    n, p, m = 3, 5, 7
    shapes = {"ij": (n, p), "jk": (p, m), "ik": (n, m)}
    total = sum(einsum_flops(f"{a},{b}->{c}", shapes[a], shapes[b]) for a, b, c in einsums)
    return Fraction(total, p * m * n)


@answer("ex-sixpt-3/frozen", count=True)
def _sixpt_3_frozen() -> float:
    # forward A B plus the input gradient G B^T (no weight gradient A^T G).
    return float(_matmul_train_per_param_token(("ij", "jk", "ik"), ("ik", "jk", "ij")))


@answer("ex-sixpt-3/first", count=True)
def _sixpt_3_first() -> float:
    return float(_matmul_train_per_param_token(("ij", "jk", "ik")))


def _llama70b_days(mfu: float | None, gpus: int) -> float:
    from tmath import get_hardware, preset, roofline, six_n_t

    run = roofline.reported_run("llama3-70b")
    peak = get_hardware(run.gpu).dense_flops
    flops = six_n_t(preset("llama3-70b"), int(run.tokens))
    if mfu is None:
        mfu = roofline.implied_mfu(flops, run.gpu_hours, peak)
    return roofline.gpu_hours(flops, peak, mfu) / gpus / 24


@varied("ex-sixpt-4/mfu40", rel_tol=0.01, unit="天")
def _sixpt_4_mfu40(p) -> float:
    return _llama70b_days(0.40, p.gpus)


@varied("ex-sixpt-4/card", rel_tol=0.01, unit="天")
def _sixpt_4_card(p) -> float:
    return _llama70b_days(None, p.gpus)


@answer("ex-sixpt-5", rel_tol=0, abs_tol=0.01, unit="%", decimals=2)
def _sixpt_5() -> float:
    from tmath import count_params, preset

    p = count_params(preset("llama3-8b"))
    return 100 * p.breakdown["embedding"] / p.total


# -------------------------------------------------------------- when-6pt-fails


@answer("ex-fails-1", count=True, abs_tol=1, unit="个 token")
def _fails_1() -> float:
    # Exact per-sequence FLOPs p T + q T^2; 6 N T underestimates by 10% when 6 N T = 0.9 (p T + q T^2).
    from tmath import count_params, preset, sweep

    llama = preset("llama3-70b")
    p_lin, q_quad = sweep.quadratic_coefficients(llama)
    six = 6 * count_params(llama).active
    return math.ceil((six / 0.9 - p_lin) / q_quad)


@answer("ex-fails-1/causal", count=True, abs_tol=1, unit="个 token")
def _fails_1_causal() -> float:
    # The same with a causal kernel: the exact count takes the lower triangle of the scores,
    # T (T + 1) / 2 pairs a head, so p and q come from the causal ledger.
    from tmath import count_params, preset, sweep

    llama = preset("llama3-70b")
    p_lin, q_quad = sweep.quadratic_coefficients(llama, causal=True)
    six = Fraction(6 * count_params(llama).active)
    return math.floor((six / Fraction(9, 10) - p_lin) / q_quad) + 1


# two decimals: the chapter's table shows the 6PT gap at T = 2048 to one (2.7%)
@answer("ex-fails-2", rel_tol=0, abs_tol=0.005, unit="%", decimals=2)
def _fails_2() -> float:
    from tmath import count_params, preset

    # GPT-3 13B: 175B's share (2.69 %) is printed in the energy chapter
    g3 = preset("gpt3-13b")
    attn = 12 * g3.num_layers * g3.num_heads * g3.head_dim * 2048
    return 100 * attn / (6 * count_params(g3).total + attn)


@answer("ex-fails-3", rel_tol=1e-3)
def _fails_3() -> float:
    from tmath import count_params, preset

    mx = count_params(preset("mixtral-8x7b"))
    return mx.total / mx.active


@answer("ex-fails-4", rel_tol=0, abs_tol=0.05, unit="%")
def _fails_4() -> float:
    from tmath import preset, training_flops

    llama = preset("llama3-70b")
    full = training_flops(llama, seq_len=131072).total
    causal = training_flops(llama, seq_len=131072, causal=True).total
    return 100 * (1 - causal / full)


@answer("ex-fails-5", rel_tol=0, abs_tol=0.05, unit="%")
def _fails_5() -> float:
    from tmath import preset, training_flops

    b = training_flops(preset("gpt2"), seq_len=1024)
    return 100 * b.breakdown["lm_head"] / b.total


def _attention_core_train_flops():
    # One head, one layer: S = Q K^T and O = P V and their four gradients, counted by SymPy.
    import sympy as sp

    from tmath import symbolic
    from tmath.notation import syms

    T, S, H = syms("T S H")
    Q, K = sp.MatrixSymbol("Q", T, H), sp.MatrixSymbol("K", S, H)
    P, V = sp.MatrixSymbol("P", T, S), sp.MatrixSymbol("V", S, H)
    dS, dO = sp.MatrixSymbol("dS", T, S), sp.MatrixSymbol("dO", T, H)
    ls, lo = sp.trace(dS.T * (Q * K.T)), sp.trace(dO.T * (P * V))
    prods = [Q * K.T, P * V, sp.diff(ls, Q), sp.diff(ls, K), sp.diff(lo, P), sp.diff(lo, V)]
    return sum(symbolic.product_ops(m)["flops"] for m in prods), (T, S, H)


@answer("ex-sixpt-6/coef", count=True)
def _sixpt_6_coef() -> float:
    total, (T, S, H) = _attention_core_train_flops()
    return int(total / (T * S * H))


@answer("ex-sixpt-6/llama", rel_tol=1e-3, unit="FLOPs")
def _sixpt_6_llama() -> float:
    from tmath import preset

    cfg, t = preset("llama3-70b"), 4096
    total, (T, S, H) = _attention_core_train_flops()
    per_seq = total.subs({T: t, S: t, H: cfg.head_dim}) * cfg.num_heads * cfg.num_layers
    return int(per_seq) // t

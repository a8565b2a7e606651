"""Answer keys of the exercises of book/gpt3/ (see :mod:`tmath.exercises`).

Conventions: parameter and element counts are exact integers; bytes are
reported in GB = 10^9 bytes (fp16 = 2 bytes per value); percentages are in
percentage points.
"""

from __future__ import annotations

import math

from tmath.exercises import answer
from tmath.variants import varied

# ---------------------------------------------------------------- architecture


@varied("ex-arch-1/layer", count=True, unit="个参数")
def _arch_1_layer(p) -> float:
    from tmath import preset, symbolic

    xl = preset(p.model)
    expr = symbolic.gpt_layer_params()
    return int(expr.subs({symbolic.d: xl.hidden_size, symbolic.f: xl.intermediate_size}))


@varied("ex-arch-1/share", rel_tol=0, abs_tol=0.05, unit="%")
def _arch_1_share(p) -> float:
    from tmath import count_params, preset

    xl = preset(p.model)
    return 100 * (xl.vocab_size + xl.max_position) * xl.hidden_size / count_params(xl).total


@varied("ex-arch-3/gb", rel_tol=0.01, unit="GB")
def _arch_3_gb(p) -> float:
    from tmath import count_params, preset

    return 2 * count_params(preset(p.model)).total / 1e9


@varied("ex-arch-3/gpus", count=True, unit="张 GPU")
def _arch_3_gpus(p) -> float:
    from tmath import count_params, get_hardware, preset

    w_bytes = 2 * count_params(preset(p.model)).total
    return math.ceil(w_bytes / get_hardware(p.gpu).hbm_bytes)


def _arch_4_state_bytes(model: str) -> float:
    """Mixed-precision Adam model state of ``model`` (the book's: Mixtral 8x7B, all its experts): 16 bytes per
    parameter (the chapter works GPT-3 175B's out in its text, the memory chapter and the
    cheatsheet Llama 3 70B's; the exercise asks the same recipe of another model)."""
    from tmath import count_params, preset, training_bytes_per_param

    return training_bytes_per_param("mixed-adam").total * count_params(preset(model)).total


@varied("ex-arch-4/tb", rel_tol=0.01, unit="TB")
def _arch_4_tb(p) -> float:
    return _arch_4_state_bytes(p.model) / 1e12


@varied("ex-arch-4/gpus", count=True, unit="张 GPU")
def _arch_4_gpus(p) -> float:
    from tmath import get_hardware

    return math.ceil(_arch_4_state_bytes(p.model) / get_hardware(p.gpu).hbm_bytes)


@answer("ex-arch-5", count=True, unit="个 token")
def _arch_5() -> float:
    # The source's vocabulary minus the real one (the chapter prints the real one: 50,257).
    from tmath import preset
    from tmath.errata import erratum

    return int(erratum("gpt3-vocab").stated) - preset("gpt3-175b").vocab_size


@answer("ex-arch-2", rel_tol=0, abs_tol=0.01)
def _arch_2() -> float:
    # F / d at which the two FFN matrices equal the four attention matrices: 2 d F = 4 d^2.
    return 2.0


def _arch_6(recompute: str) -> int:
    """Smallest micro-batch of 2048-token sequences whose activations exceed one H100.

    ``"none"``: one layer, nothing recomputed (Korthikanti's 34 T d + 5 h T^2 bytes a
    sequence); ``"full"``: all layers, full recomputation, at the backward's peak: the other
    95 layers' inputs (2 T d bytes each) plus one layer rebuilt with all its activations
    (eager softmax), the memory chapter's ``segment_checkpoint_bytes(..., segment=1).peak``.
    Both grow linearly with the micro-batch.
    """
    from tmath import activation_bytes_per_layer, get_hardware, preset
    from tmath.memory import segment_checkpoint_bytes

    cfg = preset("gpt3-175b")
    t = cfg.max_position
    if recompute == "full":
        per_seq = segment_checkpoint_bytes(cfg, t, 1, 1, attention="eager").peak
    else:
        per_seq = activation_bytes_per_layer(t, 1, cfg.hidden_size, cfg.num_heads)
    return math.floor(get_hardware("H100").hbm_bytes / per_seq) + 1


@answer("ex-arch-6/none", count=True, unit="条序列")
def _arch_6_none() -> float:
    return _arch_6("none")


@answer("ex-arch-6/full", count=True, unit="条序列")
def _arch_6_full() -> float:
    return _arch_6("full")


# --------------------------------------------------------------------- forward


@varied("ex-fwd-1/elements", count=True, unit="个元素")
def _fwd_1_elements(p) -> float:
    from tmath import gpt, preset

    full = preset("gpt3-175b")
    shape = {s.op: s.shape for s in gpt.shape_trace(full, p.tokens) if s.layer == 0}["scores"]
    return math.prod(shape)


@varied("ex-fwd-1/mb", rel_tol=0.01, unit="MB")
def _fwd_1_mb(p) -> float:
    return 2 * _fwd_1_elements(p) / 1e6


@answer("ex-fwd-3/p", rel_tol=0.01)
def _fwd_3_p() -> float:
    from tmath import preset

    v = preset("gpt3-175b").vocab_size
    return math.exp(10) / (math.exp(10) + v - 1)


@answer("ex-fwd-3/gap", rel_tol=0.01)
def _fwd_3_gap() -> float:
    from tmath import preset

    return math.log(preset("gpt3-175b").vocab_size - 1)


@varied("ex-fwd-4/extra", count=True, unit="个参数")
def _fwd_4_extra(p) -> float:
    from tmath import count_params, preset

    full = preset(p.model)
    return count_params(full.replace(tie_embeddings=False)).total - count_params(full).total


# three decimals: for GPT-3 175B (no longer asked: its V·d is printed in two chapters) the
# chapter prints the LM head's share of the forward FLOPs, the same fraction, to two (0.35%)
@varied("ex-fwd-4/share", rel_tol=0, abs_tol=0.0005, unit="%", decimals=3)
def _fwd_4_share(p) -> float:
    # of the model as it is (tied): the statement says so
    from tmath import count_params, preset

    return 100 * _fwd_4_extra(p) / count_params(preset(p.model)).total


# ------------------------------------------------------------------- multihead


@answer("ex-mh-1/head-dim", count=True, unit="维")
def _mh_1_head_dim() -> float:
    from tmath import preset

    return preset("gpt3-2.7b").head_dim


@answer("ex-mh-1/per-head", count=True, unit="个参数")
def _mh_1_per_head() -> float:
    from tmath import preset

    c = preset("gpt3-2.7b")
    return c.hidden_size * c.head_dim


@answer("ex-mh-1/all", count=True, unit="个参数")
def _mh_1_all() -> float:
    from tmath import preset

    return 4 * preset("gpt3-2.7b").num_heads * _mh_1_per_head()


def _seed_score_gap(i: int) -> float:
    from tmath.errata import HEIMAOSHUI_WEIGHTS_STATED as w

    return math.log(w[i + 1] / w[i])


@answer("ex-mh-3/s2-s1", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_3_d21() -> float:
    return _seed_score_gap(0)


@answer("ex-mh-3/s3-s2", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_3_d32() -> float:
    return _seed_score_gap(1)


# The exercise's given data: the seed's unscaled dot products q_3 . k_j (full 128 dims).
_SEED_DOTS = (0.33, 0.52, 0.71)


def _mh_4_weights():
    import numpy as np

    from tmath import gpt

    return gpt.softmax(np.array(_SEED_DOTS))


@answer("ex-mh-4/alpha1", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_4_alpha1() -> float:
    return float(_mh_4_weights()[0])


@answer("ex-mh-4/alpha3", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_4_alpha3() -> float:
    return float(_mh_4_weights()[2])


@answer("ex-mh-4/head", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_4_head() -> float:
    import numpy as np

    from tmath.errata import HEIMAOSHUI_V

    return float(_mh_4_weights() @ np.array(HEIMAOSHUI_V)[:, 0])


@answer("ex-mh-5", rel_tol=0.01)
def _mh_5() -> float:
    # Theory: q . k is a sum of d_k independent products of variance 1, so its variance is d_k
    # (the chapter's d_head, printed everywhere: not the key); divided by sqrt(d_model), the
    # single-head template's scale, it is d_k / d_model.
    from tmath import preset

    cfg = preset("gpt3-175b")
    return cfg.head_dim / cfg.hidden_size


def _mh_6_example():
    from tmath import gpt, toy

    ex = toy.two_head_example()
    x, h = ex["X"], 2
    q, k, v = (gpt.split_heads(x @ ex[w], h) for w in ("W_Q", "W_K", "W_V"))
    weights = gpt.attention_probs(q, k)  # [h, 2, 2]
    out = gpt.merge_heads(weights @ v) @ ex["W_O"]
    return weights, out


@answer("ex-mh-6/alpha-1", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_6_alpha_1() -> float:
    # head 1, query x_2, key x_1: alpha_21^(1)
    return float(_mh_6_example()[0][0, 1, 0])


@answer("ex-mh-6/alpha-2", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_6_alpha_2() -> float:
    return float(_mh_6_example()[0][1, 1, 0])


@answer("ex-mh-6/a2", rel_tol=0, abs_tol=5e-4, decimals=4)
def _mh_6_a2() -> float:
    # the first component of a_2 = o_2 W^O
    return float(_mh_6_example()[1][1, 0])


@answer("ex-mh-7/flops", rel_tol=1e-3, unit="FLOPs")
def _mh_7_flops() -> float:
    # concat + W^O as one einsum "cth,chD->tD" over c (heads) and h (head dims): 2 T d^2
    from tmath import preset

    c = preset("gpt3-175b")
    return 2 * c.max_position * c.num_heads * c.head_dim * c.hidden_size

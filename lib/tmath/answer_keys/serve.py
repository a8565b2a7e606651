"""Answer keys of the exercises of book/serving/ (Part VI, serving; see :mod:`tmath.exercises`).

Conventions (Part VI): bf16 weights and KV cache unless the exercise names another dtype; tensor
parallelism as Megatron splits it, its all-reduces priced by NCCL's ring model and not overlapped;
reads at HBM peak bandwidth, FLOPs at the dense peak of the weights' dtype, the slower of the two;
causal attention; batch = concurrent sequences; GB = 10^9 bytes.  Times and token counts a student
rounds get ``rel_tol=0.01``; whole counts are integers.
"""

from __future__ import annotations

from tmath.exercises import answer

# --- book/serving/prefill-decode ---------------------------------------------------------


@answer("ex-pd-1", rel_tol=0.01, unit="个 token")
def _pd_1() -> float:
    """S_lim = 2 P beta / (pi kappa) of Llama 3 70B on an H200, bf16 weights and KV cache."""
    import tmath

    cfg = tmath.preset("llama3-70b")
    hw = tmath.get_hardware("H200")
    p = tmath.count_params(cfg).total
    kappa = tmath.kv_cache_bytes_per_token(cfg, dtype="bf16")
    return 2 * p * hw.hbm_bandwidth / (hw.dense_flops * kappa)


@answer("ex-pd-2", rel_tol=0.01, unit="ms")
def _pd_2() -> float:
    """One decode step of Mixtral 8x7B on 2 x H100 (TP 2), one sequence with 8,191 cached tokens."""
    import tmath
    from tmath.serving import decode_step

    return 1e3 * decode_step(tmath.preset("mixtral-8x7b"), "H100", tp=2, batch=1,
                             context_len=8191).seconds


@answer("ex-pd-3", rel_tol=0.01, unit="个专家")
def _pd_3() -> float:
    """Expected distinct routed experts 64 tokens touch in one DeepSeek-V3 MoE layer (uniform)."""
    from tmath.serving import expected_experts_touched

    return expected_experts_touched(256, 8, 64)

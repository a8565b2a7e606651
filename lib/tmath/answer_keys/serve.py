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


@answer("ex-pd-4", count=True, unit="条序列")
def _pd_4() -> int:
    """Smallest whole batch at which the chapter's formula B* = pi P b / (2 P beta - pi S kappa)
    makes one decode step of Llama 3 70B on H100 (bf16 weights and KV cache) compute-bound,
    every sequence holding S = 768 cached tokens."""
    import math

    import tmath

    cfg = tmath.preset("llama3-70b")
    hw = tmath.get_hardware("H100")
    p = tmath.count_params(cfg).total
    kappa = tmath.kv_cache_bytes_per_token(cfg, dtype="bf16")
    pi, beta = hw.dense_flops, hw.hbm_bandwidth
    return math.ceil(pi * p * 2 / (2 * p * beta - pi * 768 * kappa))


@answer("ex-pd-5", rel_tol=0.01, unit="秒")
def _pd_5() -> float:
    """Seconds a lone user waits for 1,024 output tokens after a 1,024-token prompt, Llama 3 70B
    on 8 x H100 (TP 8, bf16, batch 1): TTFT + 1,023 decode steps, each taken as long as the
    last one (2,047 cached tokens), an upper bound."""
    import tmath
    from tmath import serve

    cfg = tmath.preset("llama3-70b")
    ttft = serve.prefill_time(cfg, "H100", tp=8, prompt_len=1024).seconds
    return ttft + 1023 * serve.decode_step(cfg, "H100", tp=8, batch=1, context=2047).seconds


# --- book/serving/memory-scheduling ------------------------------------------------------


@answer("ex-ms-1", count=True, unit="字节")
def _ms_1() -> int:
    """Bytes per GPU left empty in the last block of a 1,000-token sequence, blocks of 32
    (Llama 3 70B, TP 8, bf16 KV: one KV head per GPU)."""
    import tmath
    from tmath import serve

    kappa = tmath.kv_cache_bytes_per_token(tmath.preset("llama3-70b")) / 8
    return int(serve.paged_kv([1000], 32, kappa).waste)


@answer("ex-ms-2", count=True, unit="条序列")
def _ms_2() -> int:
    """Sequences of 2,000 tokens that fit 8 x H200 at TP 8 (paged, blocks of 16, bf16)."""
    import tmath
    from tmath import serve

    return serve.kv_capacity(tmath.preset("llama3-70b"), "H200", tp=8, max_len=2000,
                             block_size=16).sequences


@answer("ex-ms-3", rel_tol=0.01, unit="ms")
def _ms_3() -> float:
    """P90 TPOT of the chapter's trace at 30 requests/s, continuous batching, chunk 256."""
    import tmath
    from tmath import serve

    cfg = tmath.preset("llama3-70b")
    tr = serve.request_trace(300, seed=0, rate=30, prompt_median=512, prompt_sigma=1.0,
                             output_median=128, output_sigma=1.0, max_prompt=4096,
                             max_output=2048)
    res = serve.simulate(tr, "continuous", chunk=256, max_batch=64,
                         step_time=serve.roofline_step_time(cfg, "H100", tp=8))
    return 1e3 * res.percentile("tpot", 0.9)


@answer("ex-ms-4", count=True, unit="条序列")
def _ms_4() -> int:
    """Sequences of 1,100 tokens that fit 8 x H100 at TP 8 (Llama 3 70B, bf16), paged in blocks
    of 128 tokens: the per-GPU KV budget over ceil(1100/128) blocks of 128 tokens each."""
    import tmath
    from tmath import serve

    cfg = tmath.preset("llama3-70b")
    budget = serve.kv_capacity(cfg, "H100", tp=8, max_len=1100).kv_budget_bytes_per_gpu
    kappa_gpu = tmath.kv_cache_bytes_per_token(cfg) // 8  # one KV head of 8 on each GPU
    per_seq = -(-1100 // 128) * 128 * kappa_gpu
    return int(budget // per_seq)


@answer("ex-ms-5", count=True, unit="块")
def _ms_5() -> int:
    """KV blocks of 64 sequences of 1,500 tokens sharing a 1,000-token prefix, blocks of 128:
    the prefix's full blocks stored once, every other block (the partial prefix block too) per
    sequence (enumerated by tmath.serve.paged_kv)."""
    from tmath import serve

    return serve.paged_kv([1500] * 64, 128, 1, prefix_shared=1000).blocks


# --- book/serving/speculative-quant ------------------------------------------------------


@answer("ex-sq-1", rel_tol=0.01, unit="个 token")
def _sq_1() -> float:
    """Expected tokens per target step, acceptance 0.7, 5 drafted tokens."""
    from tmath import serve

    return serve.speculative_tokens_per_step(0.7, 5)


@answer("ex-sq-2", count=True, unit="个 token")
def _sq_2() -> int:
    """The draft length in 1..20 that maximizes Leviathan's speed-up at alpha 0.9, c 0.1."""
    from tmath import serve

    return max(range(1, 21), key=lambda k: serve.speculative_speedup(0.9, k, 0.1))


@answer("ex-sq-3", count=True, unit="条序列")
def _sq_3() -> int:
    """4,096-token sequences on one H200, Llama 3 70B with int4 weights and fp8 KV."""
    import tmath
    from tmath import serve

    return serve.kv_capacity(tmath.preset("llama3-70b"), "H200", tp=1, max_len=4096,
                             weight_dtype="int4", kv_dtype="fp8").sequences


@answer("ex-sq-4", rel_tol=0.01)
def _sq_4() -> float:
    """The acceptance rate at which Leviathan's speed-up is 1 (gamma = 4), with the chapter's
    c_draft (Llama 3 8B drafting for 70B, 8 x H100, batch 1), by bisection."""
    import tmath
    from tmath import serve

    c = serve.speculative_at_batch(tmath.preset("llama3-70b"), tmath.preset("llama3-8b"), "H100",
                                   tp=8, batch=1, context=2048, k=4, alpha=0.8)["draft_cost_ratio"]
    lo, hi = 0.0, 1.0
    for _ in range(60):  # (1 - a^5) / (1 - a) = 1 + a + ... + a^4 rises with a
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(5)) < 1 + 4 * c:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@answer("ex-sq-5", count=True, unit="条序列")
def _sq_5() -> int:
    """8,192-token sequences on 8 x H100 (TP 8), Llama 3 70B with fp8 weights and bf16 KV."""
    import tmath
    from tmath import serve

    return serve.kv_capacity(tmath.preset("llama3-70b"), "H100", tp=8, max_len=8192,
                             weight_dtype="fp8", kv_dtype="bf16").sequences


# --- book/serving/disaggregation-cost ----------------------------------------------------


@answer("ex-dc-1", rel_tol=0.01, unit="美元")
def _dc_1() -> float:
    """$ per million output tokens, Llama 3 70B on 8 x H100 (TP 8, bf16), prompt 2,048, output
    256, batch 64, at $2 a GPU-hour."""
    import tmath
    from tmath import serve

    return serve.serve(tmath.preset("llama3-70b"), "H100", tp=8, batch=64, prompt_len=2048,
                       output_len=256, gpu_hour_price=2.0)["cost_per_million_output_tokens"]


@answer("ex-dc-2", rel_tol=0.01, unit="ms")
def _dc_2() -> float:
    """Milliseconds to send an 8,192-token prompt's bf16 KV cache (Llama 3 70B) over 8 IB NDR
    ports in parallel."""
    import tmath
    from tmath.hardware import link

    kv = tmath.kv_cache_bytes_sequence(tmath.preset("llama3-70b"), 8192)
    return 1e3 * kv / (8 * link("IB-NDR").bandwidth)


@answer("ex-dc-3", rel_tol=0.01, unit="美元")
def _dc_3() -> float:
    """$ per million output tokens of DeepSeek-V3's online decode unit by the book's model
    (EP 144, 64 sequences a GPU, context 4,989), $2 a GPU-hour, 8 GPUs a node."""
    import tmath
    from tmath import serve

    s = serve.ep_decode_step(tmath.preset("deepseek-v3"), "H800", ep=144, batch_per_gpu=64,
                             context=4989, routed_experts_per_gpu=2, shared_experts_per_gpu=1)
    return serve.cost_per_million(2.0, 8, s["output_tokens_per_s_per_node"])


@answer("ex-dc-4", rel_tol=0.01, unit="美元")
def _dc_4() -> float:
    """The GPU-hour price at which Llama 3 70B on 8 x H100 (TP 8, bf16, batch 256, prompt 2,048,
    output 256) costs $0.50 per million output tokens: the break-even rent."""
    import tmath
    from tmath import serve

    r = serve.serve(tmath.preset("llama3-70b"), "H100", tp=8, batch=256, prompt_len=2048,
                    output_len=256)
    return 0.50 / 1e6 * r["output_tokens_per_s"] * 3600 / 8


@answer("ex-dc-5", count=True, unit="条序列")
def _dc_5() -> int:
    """Sequences per GPU at which a routed expert's matmuls of DeepSeek-V3's online decode unit
    (EP 144, 256 routed experts, 8 per token, uniform routing) reach the H800's fp8 ridge:
    tokens per expert 144 B 8 / 256, 2 FLOPs per fp8 weight byte each."""
    import math

    import tmath

    hw = tmath.get_hardware("H800")
    ridge = hw.fp8_flops / hw.hbm_bandwidth  # FLOPs per byte
    return math.ceil(ridge / (2 * 144 * 8 / 256))

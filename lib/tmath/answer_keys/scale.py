"""Answer keys of the exercises of the last two chapters of Part V, 多卡的账
(book/parallel/pipeline-expert-context and book/parallel/together; see :mod:`tmath.exercises`).

Conventions: counts (micro-batches, tokens, sequences) are exact integers (``abs_tol=0.5``);
quantities a student rounds (GB, ms, expected copies, tokens of a threshold) get
``rel_tol=0.01``; percentages are in percentage points with an absolute tolerance.
GB means 10^9 bytes.  Hardware from :mod:`tmath.hardware` (H100: 989 TFLOP/s bf16, 3.35 TB/s;
NVLink 4 at NCCL's effective 370.8 GB/s per direction, LL 0.6 us per step at
min(141 GB/s, half of it); InfiniBand NDR at NCCL's 48 GB/s per direction; NCCL v2.27.7-1).
"""

from __future__ import annotations

from tmath.exercises import answer

# --- book/parallel/pipeline-expert-context ------------------------------------------------


def _mb_for_bubble(pp: int, bubble: float) -> int:
    """Smallest n_mb with (pp - 1)/(n_mb + pp - 1) <= bubble (1F1B and GPipe alike)."""
    from fractions import Fraction

    target = Fraction(bubble).limit_denominator(1000)
    m = 1
    while Fraction(pp - 1, m + pp - 1) > target:
        m += 1
    return m


# A bubble of at most 10 %: the chapter works out 5 % (285 micro-batches) in its text.
@answer("ex-pipeline-1/mb", rel_tol=0, abs_tol=0.5, unit="个微批次")
def _pipeline_1_mb() -> float:
    """Micro-batches per pipeline for a bubble of at most 10 % with 16 stages."""
    return _mb_for_bubble(16, 0.1)


@answer("ex-pipeline-1/tokens", count=True, unit="个 token")
def _pipeline_1_tokens() -> float:
    """Global batch in tokens: that many micro-batches of one 8,192-token sequence, DP 128."""
    return _mb_for_bubble(16, 0.1) * 128 * 8192


@answer("ex-pipeline-2/1f1b", rel_tol=0, abs_tol=0.5, unit="个微批次")
def _pipeline_2_1f1b() -> float:
    """Micro-batches stage 2 of 8 holds at once under 1F1B with 32 per step (simulated)."""
    from tmath.schedule import simulate

    return simulate(8, 32, "1f1b").in_flight(2)


@answer("ex-pipeline-2/gpipe", rel_tol=0, abs_tol=0.5, unit="个微批次")
def _pipeline_2_gpipe() -> float:
    """The same under GPipe: all of them."""
    from tmath.schedule import simulate

    return simulate(8, 32, "gpipe").in_flight(2)


@answer("ex-pipeline-3", rel_tol=0.01, unit="GB")
def _pipeline_3() -> float:
    """Bytes one GPU sends in one MoE layer's forward (dispatch + combine), GB: 4,096 tokens,
    k = 8 copies of D = 7,168 bf16 elements, all-to-all over 64 GPUs, uniform routing."""
    from tmath import comm, preset

    cfg = preset("deepseek-v3")
    local = 4096 * cfg.experts_per_token * cfg.hidden_size * 2
    return 2 * float(comm.bytes_sent("all_to_all", local, 64)) / 1e9


@answer("ex-pipeline-4", rel_tol=0.01, unit="份")
def _pipeline_4() -> float:
    """Expected distinct other nodes a token's 8 experts (uniform, of 256 on 16 nodes) touch
    (the chapter's table gives 8 nodes')."""
    from math import comb

    experts, nodes, k = 256, 16, 8
    per_node = experts // nodes
    return (nodes - 1) * (1 - comb(experts - per_node, k) / comb(experts, k))


def _ring_hide_tokens() -> float:
    """Tokens per CP chunk above which one block's forward hides the K, V send:
    pi K b / (2 N W), Llama 3.1 405B on B200 over InfiniBand NDR, bf16 (the chapter's table
    gives the H100's)."""
    from tmath import get_hardware, preset
    from tmath.hardware import link

    cfg = preset("llama3.1-405b")
    return (get_hardware("B200").dense_flops * cfg.num_kv_heads * 2
            / (2 * cfg.num_heads * link("IB-NDR").bandwidth))


@answer("ex-pipeline-5/full", rel_tol=0.01, unit="个 token")
def _pipeline_5_full() -> float:
    return _ring_hide_tokens()


@answer("ex-pipeline-5/causal", rel_tol=0.01, unit="个 token")
def _pipeline_5_causal() -> float:
    """Causal, load-balanced: half a block's work on average, twice the threshold."""
    return 2 * _ring_hide_tokens()


# --- book/parallel/together ----------------------------------------------------------------


@answer("ex-together-1", rel_tol=0, abs_tol=0.05, unit="%")
def _together_1() -> float:
    """1F1B bubble of Table 4's first row (8,192 GPUs, 16M tokens a step) laid out with 8
    pipeline stages and DP 128 instead of 16 and 64: 16 micro-batches (the chapter's table
    gives the paper's layout's, 31.9 %). The 126 layers: 15 on each end stage, 16 on the six
    between."""
    from tmath import preset
    from tmath.layout import build_layout
    from tmath.plan import llama3_405b_layout

    layout = {**llama3_405b_layout(0), "pp": 8, "dp": 128, "pp_edge_layers": 15}
    return 100 * float(build_layout(preset("llama3.1-405b"), **layout).bubble_fraction)


@answer("ex-together-2", rel_tol=0.01, unit="GB")
def _together_2() -> float:
    """DP bytes one GPU of stage 0 (7 layers and the embedding) sends per step, Table 4's second
    row, ZeRO-1, bf16 grads (the chapter's plan prints stage 1's)."""
    from tmath import preset
    from tmath.layout import build_layout
    from tmath.plan import llama3_405b_layout

    lay = build_layout(preset("llama3.1-405b"), zero=1, stage=0, **llama3_405b_layout(1))
    return lay.comm_bytes_per_gpu()["dp"] / 1e9


@answer("ex-together-3", rel_tol=0.01, unit="ms")
def _together_3() -> float:
    """Decode step of Llama 3 70B, 4 x H200 (TP 4), one sequence with 4,095 cached tokens:
    HBM reads plus 160 all-reduces (alpha-beta on NVLink 4; the chapter's table gives
    8 x H100's)."""
    from tmath import preset
    from tmath.serving import decode_step

    return 1e3 * decode_step(preset("llama3-70b"), "H200", tp=4, batch=1,
                             context_len=4095).seconds


@answer("ex-together-4", rel_tol=0, abs_tol=0.5, unit="条序列")
def _together_4() -> float:
    """Smallest batch whose bf16 hidden states make one 8-GPU NVLink all-reduce's bandwidth
    term exceed its latency term under NCCL's LL protocol: B > n alpha W / (D b), W = LL's
    bus bandwidth min(llMaxBw, 0.5 x NCCL's effective NVLink bandwidth)."""
    import math

    from tmath import preset
    from tmath.comm import PROTOCOLS
    from tmath.hardware import link

    lk, d, ll = link("NVLink4"), preset("llama3-70b").hidden_size, PROTOCOLS["LL"]
    alpha, w = lk.step_latency[ll.index], ll.bus_bandwidth(lk.bandwidth, intra=lk)
    return math.floor(8 * alpha * w / (d * 2)) + 1


@answer("ex-together-5", rel_tol=0.01, unit="ms")
def _together_5() -> float:
    """Prefill (time to first token) of a 2,048-token prompt, Llama 3 70B on 4 x H200 (the
    chapter's table gives 8 x H100's)."""
    from tmath import preset
    from tmath.serving import prefill_step

    return 1e3 * prefill_step(preset("llama3-70b"), "H200", tp=4, prompt_len=2048).seconds


@answer("ex-together-6", rel_tol=0, abs_tol=0.5, unit="%")
def _together_6() -> float:
    """Kernel efficiency the paper's 38 % MFU implies for Table 4's third row (131K context)
    with the interleave the chapter infers, V = 8, and every collective hidden:
    MFU (1 + (pp - 1)/(V n_mb)) (the chapter's table gives the first two rows')."""
    from tmath.roofline import LLAMA3_405B_TABLE4

    r = LLAMA3_405B_TABLE4[2]
    n_mb = r["batch_per_dp"]
    return 100 * r["mfu"] * (1 + (r["pp"] - 1) / (8 * n_mb))


# --- book/parallel/published-runs ------------------------------------------------------------


@answer("ex-runs-1", rel_tol=0.01, unit="天")
def _runs_1() -> float:
    """Days of DeepSeek-V3's context extension, 119K H800 GPU hours (report Table 1), on the
    2,048 GPUs (the chapter works the pre-training's 2,664K)."""
    return 119e3 / 2048 / 24


def _dsv3_run(**kw):
    from tmath import preset
    from tmath.plan import build_plan

    layout = dict(gpu="H800", dp=128, pp=16, ep=64, zero=1, global_batch=15360, seq_len=4096,
                  stage_layers="3,4*14,2", recipe="deepseek-v3-fp8", recompute_norm_up=True,
                  fp8_activations=True, ep_fp8_dispatch=True, node_limit=4,
                  schedule="dualpipe")
    return build_plan(preset("deepseek-v3"), **{**layout, **kw})


@answer("ex-runs-2", rel_tol=0.01, unit="s")
def _runs_2() -> float:
    """Seconds of expert-parallel all-to-all per step in DeepSeek-V3's report layout with its
    recipe and techniques, but each token limited to 3 nodes instead of 4 (the chapter prints
    M = 4's)."""
    return _dsv3_run(node_limit=3)["comm_time_s"]["ep"]


@answer("ex-runs-3", rel_tol=0.01, unit="")
def _runs_3() -> float:
    """Narayanan et al. 2021, Table 1's 310.1B row (128 heads, hidden 16,384, 96 layers, TP 8,
    PP 16, 1,920 GPUs, batch 2,160, 155 TFLOP/s per GPU): published TFLOP/s over the model's
    with every collective hidden, both counted with the paper's equation (3),
    96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (full recomputation, full attention), so the ratio
    is the model's step time over the paper's (micro-batch 1, ZeRO-1, the paper's vocabulary
    of 51,200; the paper's interleaved schedule, V = 2), as the chapter does for three other
    rows."""
    import dataclasses

    from tmath import preset
    from tmath.plan import build_plan

    h, heads, layers = 16384, 128, 96
    model = dataclasses.replace(preset("gpt3-175b"), name="gpt-96l", hidden_size=h,
                                num_heads=heads, num_kv_heads=heads, head_dim=h // heads,
                                num_layers=layers, intermediate_size=4 * h, vocab_size=51200)
    p = build_plan(model, gpu="A100", dp=1920 // (8 * 16), tp=8, pp=16, zero=1,
                   global_batch=2160, seq_len=2048, recompute="full",
                   schedule="interleaved", virtual_stages=2)
    batch, seq, vocab = 2160, 2048, 51200
    eq3 = 96 * batch * seq * layers * h**2 * (1 + seq / (6 * h) + vocab / (16 * layers * h))
    achieved = eq3 / p["world_size"] / p["step_time_overlap_s"] / 1e12
    return 155 / achieved


@answer("ex-runs-4", rel_tol=0.01, unit="GPU·时")
def _runs_4() -> float:
    """GPU hours the model (no overlap) gives for 10^12 tokens on Llama 3 405B's Table 4
    second row (ZeRO-1, fp32 gradients, the paper's order, interleaved 1F1B with V = 2),
    i.e. plan's --tokens 1e12."""
    from tmath import preset
    from tmath.plan import build_plan, llama3_405b_layout

    p = build_plan(preset("llama3.1-405b"), zero=1, recipe="mixed-adam-fp32-grads",
                   order="llama3", schedule="interleaved", virtual_stages=2, tokens=1e12,
                   **llama3_405b_layout(1))
    return p["gpu_hours"]


@answer("ex-runs-5", rel_tol=0.01, unit="十亿个参数")
def _runs_5() -> float:
    """The scaling book's rule, the largest model pure data parallelism trains with Adam:
    HBM per device / 10 bytes, for an H800 (80 GiB), in billions of parameters."""
    from tmath.hardware import hardware

    return hardware("H800").hbm_bytes / 10 / 1e9

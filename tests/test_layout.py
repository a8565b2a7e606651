"""tmath.layout: what each GPU holds, what a step sends, and the layouts it refuses."""

from __future__ import annotations

from fractions import Fraction

import pytest

import tmath
from tmath import comm
from tmath.kvcache import kv_cache_bytes_per_token, kv_cache_bytes_per_token_per_gpu
from tmath.layout import LayoutError, build_layout, tp_layout
from tmath.memory import zero_bytes_per_param

L70 = tmath.preset("llama3-70b")
L8 = tmath.preset("llama3-8b")
L405 = tmath.preset("llama3.1-405b")
MIX = tmath.preset("mixtral-8x7b")
DSV3 = tmath.preset("deepseek-v3")


def axis_bytes(lay, axis, phase=None):
    return sum((c.total_bytes_sent for c in lay.collectives()
                if c.axis == axis and (phase is None or c.phase == phase)), 0)


# --- what each GPU holds -----------------------------------------------------------------

@pytest.mark.parametrize("name", tmath.presets())
def test_one_gpu_holds_exactly_the_model(name):
    cfg = tmath.preset(name)
    lay = build_layout(cfg, seq_len=min(512, cfg.max_position))
    assert sum(lay.params_per_gpu.values()) == tmath.count_params(cfg).total


def test_llama3_70b_on_8_gpus_by_hand():
    lay = build_layout(L70, tp=8, seq_len=4096)
    attn = (2 * 8192**2 + 2 * 8192 * 1024) // 8  # Q, O and one KV head's K, V per GPU
    mlp = 3 * 8192 * 28672 // 8
    per_layer = attn + mlp + 2 * 8192  # the two RMSNorms are whole on every GPU
    p = lay.params_per_gpu
    assert p["layers"] == 80 * per_layer == 8_557_690_880
    assert p["embedding"] == 128256 * 8192 // 8  # vocabulary-parallel
    assert p["lm_head"] == 128256 * 8192 // 8 + 8192  # and the final norm
    assert (lay.heads_per_gpu, lay.kv_heads_per_gpu) == (8, 1)
    # 8 GPUs hold the model once, plus 7 extra copies of the norms
    total = tmath.count_params(L70).total
    assert 8 * sum(p.values()) == total + 7 * (80 * 2 * 8192 + 8192)


def test_kv_heads_replicated_when_fewer_than_gpus():
    lay = tp_layout(L70, 16)  # 8 KV heads over 16 GPUs: each head on 2 GPUs
    assert (lay.heads_per_gpu, lay.kv_heads_per_gpu, lay.kv_replicas) == (4, 1, 2)
    assert [lay.kv_heads_of(r) for r in (0, 1, 2, 15)] == [range(0, 1), range(0, 1),
                                                           range(1, 2), range(7, 8)]
    assert lay.heads_of(3) == range(12, 16)
    assert kv_cache_bytes_per_token_per_gpu(L70, 16) == kv_cache_bytes_per_token(L70) / 8
    assert kv_cache_bytes_per_token_per_gpu(DSV3, 8) == kv_cache_bytes_per_token(DSV3)  # MLA
    # the replicas' projection gradients are summed over the 2 GPUs that share a head
    big = build_layout(L70, tp=16, dp=1, seq_len=1024)
    kv = [c for c in big.collectives() if "KV" in c.what]
    assert len(kv) == 1 and kv[0].group == 2
    assert kv[0].nbytes == 80 * 2 * 8192 * 128 * 2  # K and V of one head, 80 layers, bf16


def test_pipeline_stages_and_llama3_405b():
    """Llama 3 405B: 126 layers over 16 stages, one fewer on the first and the last."""
    lay = build_layout(L405, dp=128, tp=8, pp=16, zero=1, micro_batch=1, global_batch=2048,
                       seq_len=8192, pp_edge_layers=7)
    assert lay.world_size == 16_384
    assert lay.stage_layers == (7,) + (8,) * 14 + (7,)
    assert lay.stage == 1 and lay.layers == range(7, 15)
    assert lay.micro_batches == 16
    assert lay.bubble_fraction == Fraction(15, 31)
    assert lay.in_flight == 15  # stage 1 of 16 keeps 15 micro-batches under 1F1B
    assert lay.at_stage(0).in_flight == 16 and lay.at_stage(15).in_flight == 1
    p = lay.params_per_gpu
    assert p["embedding"] == p["lm_head"] == 0
    assert lay.at_stage(0).params_per_gpu["embedding"] == 128256 * 16384 // 8
    assert lay.links == {"tp": "NVLink4", "cp": "NVLink4", "ep": "NVLink4", "dp": "IB-NDR",
                         "dp_expert": "IB-NDR", "pp": "IB-NDR"}
    h = lay.holdings(8 * 128 * 3 + 8 * 5 + 2)  # stage 3, dp rank 5, tp rank 2
    assert (h["pp_rank"], h["dp_rank"], h["tp_rank"]) == (3, 5, 2)
    assert h["layers"] == range(23, 31) and h["heads"] == range(32, 48)


def test_experts_are_carved_out_of_data_parallelism():
    lay = build_layout(DSV3, dp=32, ep=32, tp=1, seq_len=4096, global_batch=32)
    assert lay.experts_per_gpu == 8 and lay.experts_of(3) == range(24, 32)
    assert lay.dp_group == 32 and lay.expert_dp_group == 1
    assert lay.dense_layers == 3 and lay.moe_layers == 58
    # the experts' gradients need no reduction (each expert lives on one GPU of the group)
    assert not any("experts" in c.what for c in lay.collectives() if c.axis == "dp")
    lay2 = build_layout(MIX, dp=8, ep=2, seq_len=4096)
    assert lay2.expert_dp_group == 4
    assert any(c.group == 4 and "experts" in c.what for c in lay2.collectives())


# --- memory per GPU (ZeRO) ----------------------------------------------------------------

@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_memory_is_the_memory_modules(zero):
    lay = build_layout(L8, dp=64, zero=zero, seq_len=4096, global_batch=64)
    p = sum(lay.params_per_gpu.values())
    want = p * zero_bytes_per_param("mixed-adam", zero, 64)
    got = sum(lay.state_bytes.values())
    assert abs(got - want) <= 64 * 16  # shards are padded to whole parameters
    if zero == 0:
        assert lay.state_bytes == {"weights": 2 * p, "grads": 2 * p, "optimizer": 12 * p}
    if zero == 3:
        assert lay.weight_bytes == 2 * -(-p // 64)


# --- what a step sends --------------------------------------------------------------------

def test_dp_zero_traffic():
    base = dict(dp=8, seq_len=2048, micro_batch=1)
    p = sum(build_layout(L8, **base).params_per_gpu.values())
    ar = comm.bytes_sent("all_reduce", 2 * p, 8)
    assert axis_bytes(build_layout(L8, zero=0, **base), "dp") == ar
    assert axis_bytes(build_layout(L8, zero=1, **base), "dp") == ar  # RS + AG
    assert axis_bytes(build_layout(L8, zero=2, **base), "dp") == ar
    assert axis_bytes(build_layout(L8, zero=3, **base), "dp") == Fraction(3, 2) * ar
    # with 4 micro-batches ZeRO-2 reduce-scatters after each, ZeRO-3 gathers twice each
    m4 = dict(base, global_batch=32)
    assert axis_bytes(build_layout(L8, zero=1, **m4), "dp") == ar
    assert axis_bytes(build_layout(L8, zero=2, **m4), "dp") == Fraction(5, 2) * ar
    assert axis_bytes(build_layout(L8, zero=3, **m4), "dp") == 6 * ar


def test_tp_traffic_megatron_and_sequence_parallel():
    b, t, d = 2, 4096, 4096
    v = b * t * d * 2
    plain = build_layout(L8, tp=8, seq_len=t, micro_batch=b, sequence_parallel=False)
    per_layer = 4 * comm.bytes_sent("all_reduce", v, 8)  # 2 forward + 2 backward
    assert axis_bytes(plain, "tp") == 32 * per_layer
    sp = build_layout(L8, tp=8, seq_len=t, micro_batch=b)  # sequence parallel by default
    assert sp.sequence_parallel
    norms = comm.bytes_sent("all_reduce", 32 * 2 * 4096 * 2, 8)  # norm grads, once a step
    # Megatron: 2 AG + 2 RS forward; backward 2 AG + 2 RS and 2 AG more, re-gathering the
    # input shard for the weight gradient: 6 AG + 4 RS, 5/4 the bytes of plain TP
    ag = comm.bytes_sent("all_gather", v, 8)
    assert ag == v * 7 // 8
    assert axis_bytes(sp, "tp") == 32 * 10 * ag + norms
    assert axis_bytes(sp, "tp") == Fraction(5, 4) * 32 * per_layer + norms
    kinds = {c.kind for c in sp.collectives() if c.axis == "tp" and c.phase == "forward"}
    assert kinds == {"all_gather", "reduce_scatter"}
    count = {(c.kind, c.phase): 0 for c in sp.collectives()}
    for c in sp.collectives():
        count[c.kind, c.phase] += c.count
    assert count["all_gather", "forward"] == count["reduce_scatter", "backward"] == 64
    assert count["all_gather", "backward"] == 128  # 2 per layer from RS's backward, 2 re-gathers
    # a stack that keeps the gathered input (PyTorch DTensor): the bytes of plain TP
    kept = build_layout(L8, tp=8, seq_len=t, micro_batch=b, sp_regather=False)
    assert axis_bytes(kept, "tp") == 32 * per_layer + norms
    # full recomputation: the recomputed forward gathers again and the backward re-gathers
    # too (8 AG + 6 RS per layer), the re-gather also without SP being meaningless
    sp_full = build_layout(L8, tp=8, seq_len=t, micro_batch=b, recompute="full")
    assert axis_bytes(sp_full, "tp") == 32 * 14 * ag + norms
    assert axis_bytes(sp_full, "tp", "recompute") == 32 * 4 * ag
    assert not build_layout(L8, tp=8, seq_len=t, sequence_parallel=False).sp_regather
    with pytest.raises(LayoutError) as e:
        build_layout(L8, tp=8, seq_len=t, sp_regather="yes")
    assert e.value.field == "sp_regather"
    full = build_layout(L8, tp=8, seq_len=t, micro_batch=b, sequence_parallel=False,
                        recompute="full")
    assert axis_bytes(full, "tp") == Fraction(3, 2) * axis_bytes(plain, "tp")
    sel = build_layout(L8, tp=8, seq_len=t, micro_batch=b, sequence_parallel=False,
                       recompute="selective")
    assert axis_bytes(sel, "tp") == axis_bytes(plain, "tp")


def test_pp_sends_split_over_tp():
    kw = dict(tp=4, pp=4, seq_len=2048, micro_batch=2, global_batch=16)
    msg = 2 * 2048 * 4096 * 2 // 4
    for stage, sends in ((0, 8), (1, 16), (2, 16), (3, 8)):
        lay = build_layout(L8, stage=stage, **kw)
        assert axis_bytes(lay, "pp") == sends * msg
    # without sequence parallelism the receiver all-gathers the 1/tp it got
    lay = build_layout(L8, stage=1, sequence_parallel=False, **kw)
    gathers = [c for c in lay.collectives() if "pipeline" in c.what]
    assert [c.count for c in gathers] == [8, 8]


def test_ep_alltoall_counts_k_copies():
    lay = build_layout(MIX, dp=8, ep=8, seq_len=4096, micro_batch=1)
    local = 4096 * 2 * 4096 * 2  # t tokens x k copies x D x bf16
    assert axis_bytes(lay, "ep") == 32 * 4 * comm.bytes_sent("all_to_all", local, 8)
    # with tp the tokens are split first (sequence parallelism is required)
    lay2 = build_layout(MIX, dp=8, ep=8, tp=2, seq_len=4096)
    assert axis_bytes(lay2, "ep") == axis_bytes(lay, "ep") / 2


def test_cp_ring_passes_kv_three_times():
    lay = build_layout(L8, cp=4, seq_len=8192, micro_batch=1)
    chunk = 2 * 2048 * 8 * 128 * 2  # K and V of 2048 positions, 8 KV heads of 128, bf16
    assert lay.kv_chunk_nbytes == chunk
    assert axis_bytes(lay, "cp", "forward") == 32 * 3 * chunk
    # backward (ring-flash-attention): K, V 3 hops again, and the dK, dV accumulated in fp32
    # (twice the bf16 chunk) 4 hops, one more: the last brings them back to their owner
    assert axis_bytes(lay, "cp", "backward") == 32 * (3 * chunk + 4 * 2 * chunk)
    assert axis_bytes(lay, "cp") == 32 * 14 * chunk
    bf16_grads = build_layout(L8, cp=4, seq_len=8192, micro_batch=1, cp_grad_bytes=2)
    assert axis_bytes(bf16_grads, "cp", "backward") == 32 * 7 * chunk
    # CP ranks hold the same weights: their gradients are reduced with the DP ranks
    assert build_layout(L8, cp=4, dp=2, seq_len=8192, global_batch=2).dp_group == 8


def test_comm_bytes_are_whole_and_collectives_serialise():
    lay = build_layout(MIX, dp=8, ep=4, tp=2, pp=4, zero=1, seq_len=4096, global_batch=64)
    b = lay.comm_bytes_per_gpu()
    assert set(b) == {"dp", "tp", "pp", "ep", "cp"} and all(isinstance(x, int) for x in b.values())
    for c in lay.collectives():
        d = c.as_dict()
        assert d["total_bytes_sent"] == comm.whole_bytes(c.count * c.bytes_sent)
        assert c.phase in ("forward", "backward", "recompute", "step")


# --- refusals -----------------------------------------------------------------------------

@pytest.mark.parametrize("cfg, kw, field, text", [
    (L70, {"tp": 3}, "tp", "tp=3 不能整除 num_heads=64.*1, 2, 4, 8, 16, 32, 64"),
    (tmath.preset("qwen2-7b"), {"tp": 7}, "tp", "不是 num_kv_heads=4 的倍数"),
    (L70, {"pp": 3}, "pp", "pp=3 不能整除 num_layers=80.*pp_edge_layers"),
    (L405, {"pp": 16}, "pp", "126"),
    (L405, {"pp": 16, "pp_edge_layers": 6}, "pp_edge_layers", "14 段"),
    (MIX, {"ep": 3, "dp": 3}, "ep", "n_routed_experts=8"),
    (MIX, {"ep": 8, "dp": 4}, "ep", "ep=8 不能整除 dp=4.*数据并行"),
    (L70, {"ep": 2, "dp": 2}, "ep", "不是 MoE"),
    (MIX, {"ep": 2, "dp": 2, "tp": 2, "sequence_parallel": False}, "sequence_parallel", "序列并行"),
    (L70, {"cp": 3}, "cp", "cp=3 不能整除 seq_len=4096"),
    (L70, {"dp": 4, "micro_batch": 2, "global_batch": 12}, "global_batch", "4×2 = 8"),
    (L70, {"zero": 4}, "zero", "ZeRO"),
    (L70, {"recompute": "some"}, "recompute", "selective"),
    (L70, {"seq_len": 9000}, "seq_len", "8,192"),
    (L70, {"pp": 4, "stage": 4}, "stage", "0 到 3"),
    (L70, {"dp": 0}, "dp", "正整数"),
    (L70, {"tp": 2.0}, "tp", "tp 必须是整数"),
    (tmath.preset("gpt3-175b"), {"tp": 96 * 2, "seq_len": 2048}, "tp", "num_heads=96"),
])
def test_impossible_layouts_are_refused_in_chinese(cfg, kw, field, text):
    args = {"seq_len": 4096, **kw}
    with pytest.raises(LayoutError, match=text) as e:
        build_layout(cfg, **args)
    assert e.value.field == field
    assert isinstance(e.value, ValueError)  # callers that catch ValueError still do


def test_f_must_split_over_tp():
    odd = L8.replace(intermediate_size=14335)
    with pytest.raises(LayoutError, match="intermediate_size=14335") as e:
        build_layout(odd, tp=2, seq_len=128)
    assert e.value.field == "tp"


def test_the_llama3_order_puts_pp_inside_dp():
    """Issue 32 item 8: the Llama 3 paper orders the mesh [TP, CP, PP, DP]; tmath's default is
    Megatron-LM's tp, cp, dp, pp.  On nodes of 8 with tp = 4, pp = 2, dp = 2 the order decides
    which of DP and PP rides NVLink."""
    kw = dict(tp=4, pp=2, dp=2, seq_len=4096)
    meg, l3 = build_layout(L8, **kw), build_layout(L8, order="llama3", **kw)
    assert meg.order == ("tp", "cp", "dp", "pp") and l3.order == ("tp", "cp", "pp", "dp")
    # rank = tp + 4·dp + 8·pp (Megatron) against rank = tp + 4·pp + 8·dp (Llama 3)
    assert meg.coords(4) == {"tp": 0, "cp": 0, "dp": 1, "pp": 0, "ep": 0}
    assert l3.coords(4) == {"tp": 0, "cp": 0, "dp": 0, "pp": 1, "ep": 0}
    assert l3.coords(13) == {"tp": 1, "cp": 0, "dp": 1, "pp": 1, "ep": 0}
    assert (meg.links["dp"], meg.links["pp"]) == ("NVLink4", "IB-NDR")
    assert (l3.links["dp"], l3.links["pp"]) == ("IB-NDR", "NVLink4")
    # the bytes are the order's business only through the links
    assert meg.comm_bytes_per_gpu() == l3.comm_bytes_per_gpu()
    # every rank has one place on the mesh under either order
    for lay in (meg, l3):
        seen = {tuple(lay.coords(r)[a] for a in ("tp", "dp", "pp")) for r in range(16)}
        assert len(seen) == 16


def test_llama3_table4_rides_the_same_links_under_either_order():
    """With TP = 8 filling a node of 8, every other group crosses nodes whatever the order:
    the together page states it, this checks it for the paper's three rows."""
    from tmath.plan import llama3_405b_layout

    cfg = tmath.preset("llama3.1-405b")
    for row in range(3):
        kw = llama3_405b_layout(row)
        kw = {k: v for k, v in kw.items() if k != "recipe"}
        meg, l3 = build_layout(cfg, **kw), build_layout(cfg, order="llama3", **kw)
        assert meg.links == l3.links and meg.comm_bytes_per_gpu() == l3.comm_bytes_per_gpu()


def test_an_unknown_order_is_refused_by_name():
    with pytest.raises(LayoutError, match="llama3") as e:
        build_layout(L8, tp=2, seq_len=4096, order="pp-first")
    assert e.value.field == "order"

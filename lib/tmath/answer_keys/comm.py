"""Answer keys of the exercises of book/parallel/ (collectives, data, tensor; see
:mod:`tmath.exercises`).

Conventions (Part V): ring algorithms, bytes **sent per GPU**; link bandwidth per direction
(:data:`tmath.hardware.LINKS`); GB = 10^9 bytes.  Byte counts that are whole are integers
(``abs_tol=0.5``); times, ratios and token counts a student rounds get ``rel_tol=0.01``.
"""

from __future__ import annotations

from fractions import Fraction

from tmath.exercises import answer
from tmath.variants import varied

# --- book/parallel/collectives -----------------------------------------------------------


@answer("ex-collectives-1", rel_tol=0, abs_tol=0.5, unit="字节")
def _collectives_1() -> float:
    """Bytes each of 8 GPUs sends in a ring all-reduce of a 10^9-byte gradient."""
    from tmath import comm

    return comm.bytes_sent("all_reduce", 10**9, 8)


@answer("ex-collectives-2", rel_tol=0.01, unit="微秒")
def _collectives_2() -> float:
    """α–β time of a 64e6-byte all-reduce over 8 H100s on NVLink 4, in microseconds
    (α = NCCL's Simple per-step latency, the link's ``alpha``)."""
    from tmath import comm, hardware

    nv = hardware.link("NVLink4")
    return 1e6 * comm.collective_time("all_reduce", 64e6, 8, bandwidth=nv.bandwidth,
                                      alpha=nv.alpha)


@answer("ex-collectives-3", rel_tol=0.01, unit="字节")
def _collectives_3() -> float:
    """Array size at which latency and bandwidth terms of an 8-GPU PCIe 5 all-reduce are equal
    (α = NCCL's Simple per-step latency on PCIe, 5.7 us)."""
    from tmath import hardware

    pcie = hardware.link("PCIe5x16")
    return 8 * pcie.alpha * pcie.bandwidth


@answer("ex-collectives-4", rel_tol=0.01, unit="倍")
def _collectives_4() -> float:
    """How much slower an all-to-all is on a 16-chip bidirectional ring than through a switch."""
    from tmath import comm

    return float(comm.link_load("all_to_all", 1, 16, "ring")
                 / comm.link_load("all_to_all", 1, 16, "switch"))


def _tp_over_ep(topology: str, n: int = 8, k: int = 4) -> float:
    from tmath import comm

    tp = 4 * comm.link_load("all_reduce", 1, n, topology)
    ep = 4 * comm.link_load("all_to_all", Fraction(k, n), n, topology)
    return float(tp / ep)


@answer("ex-collectives-5/switch", rel_tol=0.01, unit="倍")
def _collectives_5_switch() -> float:
    """TP all-reduce over EP all-to-all bytes (busiest link), 8 GPUs on a switch, gpt-oss-20b's
    k = 4 (the chapter's table gives k = 1, 2, 8: Mixtral's k = 2 among them)."""
    return _tp_over_ep("switch")


@answer("ex-collectives-5/ring", rel_tol=0.01, unit="倍")
def _collectives_5_ring() -> float:
    """The same on a bidirectional ring of 8."""
    return _tp_over_ep("ring")


# --- book/parallel/data --------------------------------------------------------------------


def _data_1_layout(p):
    """``p.model`` data parallel over ``p.nodes`` nodes of 8 GPUs (the book's: Llama 3 70B on 8)."""
    from tmath import preset
    from tmath.layout import build_layout

    return build_layout(preset(p.model), dp=8 * p.nodes, zero=1, seq_len=8192)


@varied("ex-data-1/gb", rel_tol=0.01, unit="GB")
def _data_1_gb(p) -> float:
    """GB each GPU sends per step, ZeRO-1, bf16 gradients."""
    return _data_1_layout(p).comm_bytes_per_gpu()["dp"] / 1e9


@varied("ex-data-1/s", rel_tol=0.01, unit="s")
def _data_1_s(p) -> float:
    """The same across the nodes of 8 (InfiniBand NDR, one NIC per GPU: 8 DP ranks per node
    leave through 8 NICs), NCCL's cost model, seconds."""
    from tmath import comm

    return sum(comm.nccl_time(c.kind, c.nbytes, c.group, intra="NVLink4", inter="IB-NDR",
                              per_node=8) * c.count for c in _data_1_layout(p).collectives())


# The book's 16 micro-batches a step: the chapter works out 8 (ZeRO-2 4.5 times, ZeRO-3 12 times)
# in its text.
def _zero_ratio(stage: int, n_mb: int) -> float:
    from tmath import preset
    from tmath.layout import build_layout

    cfg = preset("llama3-8b")
    vol = {z: build_layout(cfg, dp=64, zero=z, seq_len=8192, global_batch=64 * n_mb)
           .comm_bytes_per_gpu()["dp"] for z in (0, stage)}
    return vol[stage] / vol[0]


@varied("ex-data-2/zero3", rel_tol=0.01, unit="倍")
def _data_2_zero3(p) -> float:
    """ZeRO-3 bytes per step over ZeRO-0's, n micro-batches (3n/2: 24 for the book's 16)."""
    return _zero_ratio(3, p.microbatches)


@varied("ex-data-2/zero2", rel_tol=0.01, unit="倍")
def _data_2_zero2(p) -> float:
    """ZeRO-2 bytes per step over ZeRO-0's, n micro-batches ((n + 1)/2)."""
    return _zero_ratio(2, p.microbatches)


@varied("ex-data-2/fsdp2", rel_tol=0.01, unit="倍")
def _data_2_fsdp2(p) -> float:
    """FSDP2, 16 micro-batches, the first 15 with set_requires_gradient_sync(False) and
    set_reshard_after_backward(False) (reshard_after_forward left True): all-gathers in the
    first forward and before each of the 16 backwards, one reduce-scatter: (16 + 2)/2 = 9."""
    from tmath import comm, count_params, preset

    g = 2 * count_params(preset("llama3-8b")).total
    sent = ((p.microbatches + 1) * comm.bytes_sent("all_gather", g, 64)
            + comm.bytes_sent("reduce_scatter", g, 64))
    return sent / comm.bytes_sent("all_reduce", g, 64)


@answer("ex-data-3", rel_tol=0.01, unit="个 token")
def _data_3() -> float:
    """Tokens per GPU per step at which compute equals the all-reduce, B200 peak, 64 GPUs on
    8 DGX B200 nodes (NVLink 5 inside, 8 NDR NICs per node), α ignored (the chapter's table
    gives the H100's)."""
    from tmath import comm, hardware

    b200 = hardware.hardware("B200")
    w = comm.group_bandwidth(64, intra="NVLink5", inter="IB-NDR", per_node=8)
    return (64 - 1) / 64 * 2 * b200.dense_flops / (3 * w)


@varied("ex-data-4/zero2", rel_tol=0.01, unit="GB")
def _data_4_zero2(p) -> float:
    """ZeRO-2 model states per GPU, 7.5B parameters over ``p.gpus`` GPUs (the book's: 1,024)."""
    from tmath import zero_bytes_per_param

    return 7.5e9 * zero_bytes_per_param("mixed-adam", 2, p.gpus) / 1e9


@varied("ex-data-4/zero3", rel_tol=0.01, unit="GB")
def _data_4_zero3(p) -> float:
    """ZeRO-3 model states per GPU, 7.5B parameters over ``p.gpus`` GPUs."""
    from tmath import zero_bytes_per_param

    return 7.5e9 * zero_bytes_per_param("mixed-adam", 3, p.gpus) / 1e9


def _gpt3_replica_gpus() -> int:
    """Fewest 40 GB A100s per GPT-3 replica for its model states (16 bytes per parameter), in
    whole 8-GPU servers (the chapter works out the V100's: 88 cards, 1.26 s)."""
    import math

    from tmath import count_params, hardware, preset

    p = count_params(preset("gpt3-175b")).total
    return 8 * math.ceil(16 * p / hardware.hardware("A100-40GB").hbm_bytes / 8)


@answer("ex-data-5/gpus", count=True, unit="张卡")
def _data_5_gpus() -> float:
    """GPUs per GPT-3 replica: model states (16 B/param) over 40 GiB, rounded up to servers of 8."""
    return _gpt3_replica_gpus()


@answer("ex-data-5/s", rel_tol=0.01, unit="s")
def _data_5_s() -> float:
    """GPT-3 gradient sync per step with that replica size: one DP member per server, each GPU
    6.25 GB/s of its server's 400 Gb/s, fp16 gradients, α ignored."""
    from tmath import comm, count_params, preset

    p = count_params(preset("gpt3-175b")).total
    m = _gpt3_replica_gpus()
    return float(comm.bytes_sent("all_reduce", 2 * p / m, 10_000 // m)) / 6.25e9


# --- book/parallel/tensor ------------------------------------------------------------------


def _llama70_tp8_layer(recompute: str = "none", seq_len: int = 4096) -> int:
    from tmath import preset
    from tmath.layout import build_layout

    cfg = preset("llama3-70b")
    lay = build_layout(cfg, tp=8, seq_len=seq_len, micro_batch=1, sequence_parallel=False,
                       recompute=recompute)
    return int(sum(c.total_bytes_sent for c in lay.collectives()) // cfg.num_layers)


@answer("ex-tensor-1", count=True, unit="字节")
def _tensor_1() -> float:
    """Bytes per GPU per layer per micro-batch, Llama 3 70B, TP = 8, one 4,096-token sequence."""
    return _llama70_tp8_layer()


@answer("ex-tensor-2", count=True, unit="字节")
def _tensor_2() -> float:
    """The same with Megatron's sequence parallelism (an extra all-gather per column block)."""
    from tmath import comm

    m = 1 * 4096 * 8192 * 2
    return 6 * comm.bytes_sent("all_gather", m, 8) + 4 * comm.bytes_sent("reduce_scatter", m, 8)


@answer("ex-tensor-3", count=True, unit="字节")
def _tensor_3() -> float:
    """The same without SP, with full recomputation (the forward's all-reduces again), for one
    8,192-token sequence (at 4,096 it equals Llama 3 70B's MLP parameters per layer, 3DF, which
    the Llama 3 70B chapter prints)."""
    return _llama70_tp8_layer("full", seq_len=8192)


@answer("ex-tensor-4", rel_tol=0.01)
def _tensor_4() -> float:
    """Critical n_TP for Llama 3 8B on NVLink 4: 1 + 3 W (3F + 2(N+K)H) / (4 b pi)."""
    from tmath import hardware, preset

    c = preset("llama3-8b")
    width = 3 * c.intermediate_size + 2 * (c.num_heads + c.num_kv_heads) * c.head_dim
    nv, h100 = hardware.link("NVLink4"), hardware.hardware("H100")
    return 1 + 3 * nv.bandwidth * width / (4 * 2 * h100.dense_flops)


@answer("ex-tensor-5", rel_tol=0.01, unit="倍")
def _tensor_5() -> float:
    """Separate wq, wk, wv and an ungated w1, one ColwiseParallel each, over the same with
    PrepareModuleInput on attention and MLP: (2 forward + 4 backward) / (2 + 2) all-reduces."""
    return Fraction(2 + 3 + 1, 2 + 2)

"""Every volume Part V teaches, against a real gloo run: bytes sent per GPU, exactly.

One process group of 4 CPU processes runs every scenario (tmath.dist); each collective that
ran is priced by the ring convention (tmath.dist.sent_bytes) and compared, as an integer,
with tmath.comm and the collectives tmath.layout lists for the same shapes.  Where a real
run differs from the formula on purpose (DTensor on unfused projections, the token counts a
MoE dispatcher exchanges first, a learned router), the test states by how much and why.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from tmath import comm, dist
from tmath.layout import build_layout

WORLD = 4
TP = dict(d=32, heads=8, kv_heads=4, ffn=64, batch=2, seq=8)
SCENARIOS = [
    ("collectives", {"numel": 240}),
    ("tp_block", {**TP, "sp": False}),
    ("tp_block", {**TP, "sp": True}),
    ("tp_block", {**TP, "sp": False, "fused": False}),
    ("fsdp", {**TP, "layers": 2, "micro_batches": 2}),
    ("pipeline", {**TP, "micro_batches": 3}),
    ("moe", {"d": 16, "ffn": 32, "experts": 8, "k": 2, "tokens": 16, "routing": "uniform"}),
    ("moe", {"d": 16, "ffn": 32, "experts": 8, "k": 2, "tokens": 16, "routing": "learned"}),
    ("ring_attention", {"batch": 2, "heads": 4, "kv_heads": 2, "head_dim": 8, "seq": 32,
                        "causal": True}),
    # Part V chapters: DDP, FSDP2 without resharding, TP with recomputation (indices 9-14)
    ("ddp", {**TP, "layers": 2, "micro_batches": 2}),
    ("ddp", {**TP, "layers": 2, "micro_batches": 2, "bucket_cap_mb": 0.03}),
    ("fsdp", {**TP, "layers": 2, "micro_batches": 1, "reshard_after_forward": False}),
    ("tp_block", {**TP, "recompute": "full"}),
    ("tp_block", {**TP, "recompute": "full", "early_stop": False}),
    ("tp_block", {**TP, "recompute": "selective"}),
    # unfused projections under torchtitan's plan (PrepareModuleInput on attention and MLP)
    ("tp_block", {**TP, "sp": False, "fused": False, "prepare_input": True}),
    # FSDP2's accumulation without communication (index 16)
    ("fsdp", {**TP, "layers": 2, "micro_batches": 2, "accumulate_unsharded": True,
              "reshard_after_forward": False}),
    # bytes on the wire: /proc/self/io around each collective, 1 and 4 MiB, 2 and 4 ranks
    ("wire", {"numels": [262144, 1048576], "groups": [2, 4]}),
    # FSDP2 with one micro-batch, to set against DDP's step on the wire (index 18)
    ("fsdp", {**TP, "layers": 2, "micro_batches": 1}),
]


@pytest.fixture(scope="module")
def runs():
    """All scenarios in one process group (the cost is starting it: keep to one), run for
    real: the session's cache of dist.run (for the chapters) is not used here, and the
    helper is a new interpreter even if this worker has imported torch (the forked helper is
    compared with it below)."""
    mp = pytest.MonkeyPatch()
    mp.delenv(dist.CACHE_ENV, raising=False)
    mp.setattr(dist, "_forks_helper", lambda: False)
    try:
        res = dist.run(SCENARIOS, world=WORLD, timeout=120)
    finally:
        mp.undo()
    assert res["world"] == WORLD
    return res["scenarios"]


def layout_bytes(lay, axis: str, phase: str) -> int | Fraction:
    """Bytes the layout says one GPU sends on ``axis`` in ``phase`` per step."""
    return sum((c.total_bytes_sent for c in lay.collectives()
                if c.axis == axis and c.phase == phase), 0)


def test_every_collective_matches_the_ring_formula(runs):
    sc = runs[0]
    n, v = WORLD, 240 * 4  # fp32
    want = {"all_reduce": comm.bytes_sent("all_reduce", v, n),        # 2(n-1)/n V = 1440
            "all_gather": comm.bytes_sent("all_gather", v, n),        # (n-1)/n V = 720
            "reduce_scatter": comm.bytes_sent("reduce_scatter", v, n),
            "all_to_all": comm.bytes_sent("all_to_all", v, n),
            "send_recv": comm.bytes_sent("send", v, n)}
    assert want == {"all_reduce": 1440, "all_gather": 720, "reduce_scatter": 720,
                    "all_to_all": 720, "send_recv": 960}
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert got == want, rank
        assert all(sc["ranks"][rank]["ok"].values()), sc["ranks"][rank]["ok"]
    # CommDebugMode-style counts agree with the records; point-to-point is recorded too
    assert sc["ranks"][0]["comm_counts"]["c10d.allreduce_"] == 1


def tiny_tp_layout(sp: bool):
    cfg = dist.tiny_config(**{k: TP[k] for k in ("d", "heads", "kv_heads", "ffn")})
    # DTensor's SequenceParallel keeps the gathered input for backward: no Megatron re-gather
    return build_layout(cfg, tp=WORLD, seq_len=TP["seq"], micro_batch=TP["batch"],
                        sequence_parallel=sp, sp_regather=False,
                        act_bytes=4, grad_bytes=4, param_bytes=4)


@pytest.mark.parametrize("index, sp", [(1, False), (2, True)])
def test_dtensor_tp_block_matches_megatron_volumes(runs, index, sp):
    sc, lay = runs[index], tiny_tp_layout(sp)
    assert sc["params"]["sp"] is sp
    want = {p: layout_bytes(lay, "tp", p) for p in ("forward", "backward", "step")}
    # without SP: 2 all-reduces of b*T*D*4 = 2048 bytes each way; with SP: 2 all-gathers +
    # 2 reduce-scatters each way (the same bytes) and the norms' gradients once per step
    v = TP["batch"] * TP["seq"] * TP["d"] * 4
    assert want["forward"] == 2 * comm.bytes_sent("all_reduce", v, WORLD)
    assert want["step"] == (comm.bytes_sent("all_reduce", 2 * TP["d"] * 4, WORLD) if sp else 0)
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert {p: got.get(p, 0) for p in want} == want, rank
        r = sc["ranks"][rank]
        assert r["local_params"] == lay.params_per_gpu["layers"]  # weights held per GPU
        assert r["max_err_output"] < 1e-5 and r["max_err_input_grad"] < 1e-5
    counts = sc["ranks"][0]["comm_counts"]  # CommDebugMode's own count
    if sp:
        assert counts == {"c10d_functional.all_gather_into_tensor": 4,
                          "c10d_functional.reduce_scatter_tensor": 4,
                          "c10d_functional.all_reduce": 2}
    else:
        assert counts == {"c10d_functional.all_reduce": 4}


def test_unfused_projections_reduce_each_input_gradient_separately(runs):
    """DTensor's plain plan on separate wq, wk, wv (and w1, w3) all-reduces the gradient of
    the block input once per column-parallel matrix: 3 + 2 = 5 backward all-reduces, not 2.
    The extra comes from the plan, not from the unfused matrices: see the next test.
    Forward is unchanged."""
    sc, lay = runs[3], tiny_tp_layout(False)
    assert sc["params"]["fused"] is False
    per_ar = comm.bytes_sent("all_reduce", TP["batch"] * TP["seq"] * TP["d"] * 4, WORLD)
    for got in dist.bytes_by_phase(sc):
        assert got["forward"] == layout_bytes(lay, "tp", "forward")
        assert got["backward"] == Fraction(5, 2) * layout_bytes(lay, "tp", "backward")
        assert got["backward"] == 5 * per_ar
    assert sc["ranks"][0]["comm_counts"] == {"c10d_functional.all_reduce": 7}


def test_prepare_module_input_reduces_unfused_input_gradients_once(runs):
    """torchtitan's plan keeps wq, wk, wv and w1, w3 separate but hands attention and the MLP
    their input as one replicated DTensor (PrepareModuleInput): the partial input gradients
    of the column-split matrices add up locally and are all-reduced once per sub-block, so
    the unfused block sends exactly what the fused one (and the layout) does."""
    sc, lay = runs[15], tiny_tp_layout(False)
    assert sc["params"]["fused"] is False and sc["params"]["prepare_input"] is True
    want = {p: layout_bytes(lay, "tp", p) for p in ("forward", "backward")}
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert {p: got.get(p, 0) for p in want} == want, rank
        r = sc["ranks"][rank]
        assert r["max_err_output"] < 1e-5 and r["max_err_input_grad"] < 1e-5
    assert sc["ranks"][0]["comm_counts"] == {"c10d_functional.all_reduce": 4}


def test_fsdp2_is_zero3_of_one_pipeline_stage(runs):
    """FSDP2 (fully_shard per block) runs ZeRO-3's traffic: per micro-batch an all-gather
    before forward and again before backward, and a reduce-scatter of the gradients.  The
    run has no embedding, so it is compared with the DP axis of a middle pipeline stage
    holding the same 2 blocks (tmath.layout counts one flat buffer; FSDP2 one per block:
    the same bytes, twice the count)."""
    sc = runs[4]
    m, layers = sc["params"]["micro_batches"], sc["params"]["layers"]
    cfg = dist.tiny_config(**{k: TP[k] for k in ("d", "heads", "kv_heads", "ffn")},
                           layers=3 * layers)
    lay = build_layout(cfg, dp=WORLD, pp=3, zero=3, seq_len=TP["seq"], micro_batch=TP["batch"],
                       global_batch=WORLD * TP["batch"] * m, act_bytes=4, param_bytes=4,
                       grad_bytes=4)
    assert lay.stage == 1 and lay.params_per_gpu["embedding"] == 0 == lay.params_per_gpu["lm_head"]
    want = {p: layout_bytes(lay, "dp", p) for p in ("forward", "backward")}
    assert want["backward"] == 2 * want["forward"]  # all-gather again + reduce-scatter
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert got == want, rank
        r = sc["ranks"][rank]
        assert r["local_params"] * WORLD == lay.dense_params  # a quarter of the weights each
        assert r["max_err_grad"] < 1e-4
    counts = sc["ranks"][0]["comm_counts"]
    assert counts == {"c10d._allgather_base_": 2 * m * layers,
                      "c10d._reduce_scatter_base_": m * layers}


def test_1f1b_pipeline_sends_one_activation_each_way_per_micro_batch(runs):
    sc = runs[5]
    m = sc["params"]["micro_batches"]
    cfg = dist.tiny_config(**{k: TP[k] for k in ("d", "heads", "kv_heads", "ffn")}, layers=WORLD)
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        lay = build_layout(cfg, pp=WORLD, stage=rank, seq_len=TP["seq"], micro_batch=TP["batch"],
                           global_batch=TP["batch"] * m, act_bytes=4)
        want = {p: layout_bytes(lay, "pp", p) for p in ("forward", "backward")}
        assert {p: got.get(p, 0) for p in want} == want, rank
        assert sc["ranks"][rank]["max_err_grad"] < 1e-5
        # 1F1B: stage s holds the activations of min(pp - s, n_mb) micro-batches at once
        assert sc["ranks"][rank]["max_in_flight"] == lay.in_flight == min(WORLD - rank, m)
    # first stage only sends forward, last only backward, the middle ones both
    sent = [sum(g.values()) for g in dist.bytes_by_phase(sc)]
    msg = TP["batch"] * TP["seq"] * TP["d"] * 4
    assert sent == [m * msg, 2 * m * msg, 2 * m * msg, m * msg]


def moe_layout(k: int = 2, tokens: int = 16):
    cfg = dist.tiny_config(d=16, heads=4, kv_heads=4, ffn=32, experts=8, k=k)
    return build_layout(cfg, dp=WORLD, ep=WORLD, seq_len=tokens, micro_batch=1, act_bytes=4)


def test_moe_dispatch_and_combine_send_k_copies(runs):
    """Uniform routing: each rank sends (n-1)/n of its k*t*D tokens-copies in the dispatch and
    as much back in the combine, forward and backward.  Before the dispatch the ranks
    exchange how many rows each expert will get (E int64 counts): 48 bytes here, which the
    formula leaves out."""
    sc, lay = runs[6], moe_layout()
    want = {p: layout_bytes(lay, "ep", p) for p in ("forward", "backward")}
    assert want["forward"] == 2 * comm.bytes_sent("all_to_all", 16 * 2 * 16 * 4, WORLD)
    counts = comm.bytes_sent("all_to_all", 8 * 8, WORLD)  # E = 8 int64 counts
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert got == {**want, "counts": counts}, rank
        r = sc["ranks"][rank]
        assert r["in_splits"] == [8] * WORLD and r["max_err_output"] < 1e-6


def test_a_learned_router_moves_what_it_routes(runs):
    """A random router is not uniform: per rank the bytes differ from the formula, but every
    copy that leaves a rank is one the router sent there, and the combine returns exactly
    what the dispatch delivered."""
    sc, lay = runs[7], moe_layout()
    row = 16 * 4
    uniform = layout_bytes(lay, "ep", "forward")
    per_rank = [g["forward"] for g in dist.bytes_by_phase(sc)]
    for rank, r in enumerate(sc["ranks"]):
        ins, outs = r["in_splits"], r["out_splits"]
        assert sum(ins) == 16 * 2  # k copies of each token
        dispatch = (sum(ins) - ins[rank]) * row
        combine = (sum(outs) - outs[rank]) * row
        assert per_rank[rank] == dispatch + combine
        assert r["max_err_output"] < 1e-5
    # all together the ranks send the same as they receive, and differ from uniform
    assert sum(per_rank) == sum((sum(r["out_splits"]) - r["out_splits"][i]) * row * 2
                                for i, r in enumerate(sc["ranks"]))
    assert per_rank != [uniform] * WORLD


def test_ring_attention_passes_kv_chunks_and_is_exact(runs):
    sc = runs[8]
    p = sc["params"]
    cfg = dist.tiny_config(d=p["heads"] * p["head_dim"], heads=p["heads"],
                           kv_heads=p["kv_heads"], ffn=64)
    lay = build_layout(cfg, cp=WORLD, seq_len=p["seq"], micro_batch=p["batch"], act_bytes=4)
    chunk = 2 * p["batch"] * (p["seq"] // WORLD) * p["kv_heads"] * p["head_dim"] * 4
    assert lay.kv_chunk_nbytes == chunk
    want = layout_bytes(lay, "cp", "forward")
    assert want == (WORLD - 1) * chunk
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert got == {"forward": want}, rank
        assert sc["ranks"][rank]["max_err_output"] < 1e-5  # = full (causal) attention


def test_sent_bytes_refuses_what_it_cannot_price():
    with pytest.raises(ValueError, match="scatter"):
        dist.sent_bytes({"kind": "scatter", "nbytes": 8, "group": 2})
    with pytest.raises(ValueError, match="未知的场景"):
        dist.run(["nope"])
    with pytest.raises(ValueError, match="没有参数"):
        dist.run([("moe", {"colour": 1})])


def middle_stage_dp(zero: int, micro_batches: int, layers: int = 2):
    """The DP axis of a middle pipeline stage holding ``layers`` tiny blocks (no embedding)."""
    cfg = dist.tiny_config(**{k: TP[k] for k in ("d", "heads", "kv_heads", "ffn")},
                           layers=3 * layers)
    lay = build_layout(cfg, dp=WORLD, pp=3, zero=zero, seq_len=TP["seq"],
                       micro_batch=TP["batch"], global_batch=WORLD * TP["batch"] * micro_batches,
                       act_bytes=4, param_bytes=4, grad_bytes=4)
    assert lay.stage == 1 and lay.params_per_gpu["embedding"] == 0 == lay.params_per_gpu["lm_head"]
    return lay


def test_ddp_all_reduces_the_gradients_once_per_step(runs):
    """DistributedDataParallel with gradient accumulation (no_sync on all but the last
    micro-batch) all-reduces every gradient once per step: ZeRO-0 of the layout.  Its buckets
    split the all-reduce without changing its bytes, and the first bucket leaves while the
    backward still runs (the overlap)."""
    lay = middle_stage_dp(zero=0, micro_batches=2)
    want = sum(c.total_bytes_sent for c in lay.collectives() if c.axis == "dp")
    assert want == comm.bytes_sent("all_reduce", lay.dense_params * 4, WORLD)
    for index, buckets in ((9, 1), (10, 3)):
        sc = runs[index]
        for rank, got in enumerate(dist.bytes_by_phase(sc)):
            assert got == {"backward": want}, (index, rank)
            r = sc["ranks"][rank]
            assert r["local_params"] == lay.dense_params and r["max_err_grad"] < 1e-4
            assert r["comm_counts"] == {"c10d.allreduce_": buckets}
        launched = sc["ranks"][0]["launched_before_first_block"]
        assert launched == (0 if buckets == 1 else 1)  # a bucket left before block 0's backward


def test_fsdp2_without_resharding_moves_an_all_reduce_per_micro_batch(runs):
    """reshard_after_forward=False keeps the gathered weights for the backward: one all-gather
    and one reduce-scatter per micro-batch, the bytes of one all-reduce (ZeRO-2's traffic at
    one micro-batch), where ZeRO-3 pays 1.5 times that."""
    sc = runs[11]
    z2, z3 = middle_stage_dp(zero=2, micro_batches=1), middle_stage_dp(zero=3, micro_batches=1)
    total = {z: sum(c.total_bytes_sent for c in lay.collectives() if c.axis == "dp")
             for z, lay in ((2, z2), (3, z3))}
    assert total[3] == Fraction(3, 2) * total[2]
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert sum(got.values()) == total[2], rank
        assert got["backward"] == layout_bytes(z2, "dp", "backward")  # the reduce-scatter
    assert sc["ranks"][0]["comm_counts"] == {"c10d._allgather_base_": 2,
                                             "c10d._reduce_scatter_base_": 2}


def test_full_recompute_reruns_the_forward_collectives(runs):
    """torch.utils.checkpoint over the TP block: without early stop (Megatron-LM's way) the
    recomputed forward runs both all-reduces again, as the layout counts; PyTorch's default
    early stop skips the block's last all-reduce, which the backward does not need.  Selective
    recomputation (the attention core) sends nothing new."""
    cfg = dist.tiny_config(**{k: TP[k] for k in ("d", "heads", "kv_heads", "ffn")})
    full = build_layout(cfg, tp=WORLD, seq_len=TP["seq"], micro_batch=TP["batch"],
                        sequence_parallel=False, recompute="full", act_bytes=4, grad_bytes=4,
                        param_bytes=4)
    want = {p: layout_bytes(full, "tp", p) for p in ("forward", "recompute", "backward")}
    assert want["recompute"] == want["forward"]
    for index, recomputed in ((12, want["recompute"] / 2), (13, want["recompute"]), (14, 0)):
        sc = runs[index]
        for rank, got in enumerate(dist.bytes_by_phase(sc)):
            assert got.get("recompute", 0) == recomputed, (index, rank)
            assert got["forward"] == want["forward"] and got["backward"] == want["backward"]
            r = sc["ranks"][rank]
            assert r["max_err_output"] < 1e-5 and r["max_err_input_grad"] < 1e-5


def test_scenario_choices_are_checked_before_any_process_starts():
    with pytest.raises(ValueError, match="recompute"):
        dist.run([("tp_block", {"recompute": "sometimes"})])


def test_a_cached_result_is_returned_without_starting_processes(tmp_path, monkeypatch):
    """With TMATH_DIST_CACHE set, run() returns what is stored for the same scenarios and
    world (the test session sets it so that nbval and the visible-code run share one group);
    another world or other parameters have another key."""
    scenarios = dist._spec([("collectives", {"numel": 8})])
    path = dist._cache_path(str(tmp_path), 2, scenarios)
    fake = {"world": 2, "seconds": 0.0, "scenarios": [{**scenarios[0], "ranks": []}]}
    (tmp_path / path.rsplit("/", 1)[1]).write_text(__import__("json").dumps(fake))
    monkeypatch.setenv(dist.CACHE_ENV, str(tmp_path))
    got = dist.run([("collectives", {"numel": 8})], world=2)
    assert got["cached"] is True and got["scenarios"] == fake["scenarios"]
    assert path != dist._cache_path(str(tmp_path), 4, scenarios)
    assert path != dist._cache_path(str(tmp_path), 2, dist._spec([("collectives", {"numel": 16})]))


def test_fsdp2_accumulation_without_sync_or_reshard_sends_one_all_reduce_per_step(runs):
    """set_requires_gradient_sync(False) and set_reshard_after_backward(False) on the first of
    two micro-batches, reshard_after_forward=False: one all-gather (the first forward) and one
    reduce-scatter (the last backward) per layer and step, DDP's bytes for the same two
    micro-batches (ZeRO-3 by default pays three times that), and the same gradients."""
    sc = runs[16]
    ddp = [sum(got.values()) for got in dist.bytes_by_phase(runs[9])]
    z3 = middle_stage_dp(zero=3, micro_batches=2)
    z3_bytes = sum(c.total_bytes_sent for c in z3.collectives() if c.axis == "dp")
    for rank, got in enumerate(dist.bytes_by_phase(sc)):
        assert sum(got.values()) == ddp[rank] == Fraction(z3_bytes, 3), rank
        assert sc["ranks"][rank]["max_err_grad"] < 1e-4
    assert sc["ranks"][0]["comm_counts"] == {"c10d._allgather_base_": 2,
                                             "c10d._reduce_scatter_base_": 2}


def _ranks_without_timing(res: dict) -> list:
    return [[{k: v for k, v in rank.items() if k != "seconds"} for rank in sc["ranks"]]
            for sc in res["scenarios"]]


def test_a_helper_forked_from_a_torch_process_gives_what_a_new_one_gives(runs, monkeypatch):
    """A caller that has imported torch forks itself as the helper (no second torch import);
    the ranks record the same collectives and checks as under the new helper of ``runs``."""
    import torch  # noqa: F401

    assert dist._forks_helper()
    monkeypatch.delenv(dist.CACHE_ENV, raising=False)
    picked = (0, 2, 6)  # collectives, TP + SP, MoE (each scenario starts from seed 0)
    forked = dist.run([SCENARIOS[i] for i in picked], world=WORLD)
    assert _ranks_without_timing(forked) == _ranks_without_timing(
        {"scenarios": [runs[i] for i in picked]})
    assert forked["scenarios"][0]["ranks"][0]["records"], "the collectives were recorded"


def test_a_rank_failing_under_a_forked_helper_is_reported_with_its_traceback(monkeypatch):
    """The forked helper runs this process's code (a new interpreter would not see the
    patched runner): a rank that raises comes back as the run's error, traceback included."""
    import torch  # noqa: F401

    def broken(ctx, **params):
        raise ValueError("rank broke on purpose")

    monkeypatch.delenv(dist.CACHE_ENV, raising=False)
    monkeypatch.setitem(dist._RUNNERS, "collectives", broken)
    with pytest.raises(RuntimeError, match="rank broke on purpose"):
        dist.run([("collectives", {"numel": 8})], world=2)


def test_a_forked_helper_that_overruns_is_killed_with_its_ranks(monkeypatch, tmp_path):
    import json
    import subprocess
    import time

    import torch  # noqa: F401

    monkeypatch.setitem(dist._RUNNERS, "collectives", lambda ctx, **params: time.sleep(120))
    spec = {"world": 2, "timeout": 60.0, "scenarios": dist._spec([("collectives", {"numel": 8})])}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(subprocess.TimeoutExpired) as err:
        dist._fork_helper(str(tmp_path / "spec.json"), str(tmp_path), 2)
    helper = int(str(err.value.cmd).rsplit(" ", 1)[1])

    from conftest import proc_stat

    def in_its_session() -> list[int]:  # live processes of the helper's session (its ranks)
        stats = {int(p.name): proc_stat(int(p.name)) for p in Path("/proc").glob("[0-9]*")}
        return [pid for pid, f in stats.items() if f and int(f[3]) == helper and f[0] != "Z"]

    deadline = time.monotonic() + 10
    while in_its_session() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not in_its_session()


def test_gloo_wire_bytes_match_the_ring_formula_but_reduce_scatter_sends_twice(runs):
    """Each rank's wchar (/proc/self/io) around one collective: what gloo wrote to its
    sockets.  At 4 MiB all-reduce, all-gather, all-to-all and send/recv are within 0.1 % of
    the ring formula (a fixed few hundred bytes per call more: the same at 1 and 4 MiB);
    reduce-scatter sends twice the ring volume, because gloo runs it as an all-reduce of a
    copy and keeps one chunk (ProcessGroupGloo::reduce_scatter_tensor_coalesced)."""
    sc = runs[17]
    if any(r.get("io_error") for r in sc["ranks"]):
        pytest.skip(sc["ranks"][0]["io_error"])
    rows = {(r["kind"], r["group"], r["nbytes"]): r for r in dist.wire_bytes(sc)}
    assert len(rows) == 5 * 2 * 2
    big, small = 4 * 2**20, 2**20
    for n in (2, 4):
        for kind in comm.KINDS:
            row, low = rows[kind, n, big], rows[kind, n, small]
            assert row["ring"] == comm.bytes_sent(kind, big, n)
            assert len(set(row["measured"])) == 1 and len(row["measured"]) == n, row
            # the bytes each rank wrote for one more byte of formula: headers cancel out
            slope = Fraction(max(row["measured"]) - max(low["measured"]),
                             row["ring"] - low["ring"])
            want = 2 if kind == "reduce_scatter" else 1
            assert abs(row["ratio"] - want) < Fraction(1, 1000), (kind, n, row["ratio"])
            assert abs(slope - want) < Fraction(1, 1000), (kind, n, slope)
            # reduce-scatter writes what an all-reduce of the same input writes, byte for byte
            if kind == "reduce_scatter":
                assert row["measured"] == rows["all_reduce", n, big]["measured"]
    # FSDP2 (all-gather twice, reduce-scatter once) over DDP (one all-reduce) of the same
    # weights: 2.00 on gloo's wire, where the ring formula says 1.5
    for n in (2, 4):
        got = {k: max(rows[k, n, big]["measured"]) for k in comm.KINDS}
        ring = {k: rows[k, n, big]["ring"] for k in comm.KINDS}
        fsdp, ddp = ("all_gather", "all_gather", "reduce_scatter"), ("all_reduce",)
        assert Fraction(sum(ring[k] for k in fsdp), sum(ring[k] for k in ddp)) == Fraction(3, 2)
        assert round(sum(got[k] for k in fsdp) / sum(got[k] for k in ddp), 3) == 2.0


def test_fsdp2_on_gloo_writes_twice_what_ddp_writes_not_one_and_a_half(runs):
    """The same two blocks, one step: DDP all-reduces the gradients once; FSDP2 (one
    micro-batch, resharding after forward) all-gathers the weights twice and reduce-scatters
    the gradients once.  Priced by the ring formula FSDP2 sends 1.5 times DDP; what the
    ranks wrote to gloo's sockets is 2 times (within the few per cent that the per-call
    headers add at these tiny sizes), because gloo's reduce-scatter is an all-reduce."""
    fsdp, ddp = runs[18], runs[9]
    assert fsdp["params"]["micro_batches"] == 1 and fsdp["params"]["reshard_after_forward"]
    ring = [sum(f.values()) / sum(d.values())
            for f, d in zip(dist.bytes_by_phase(fsdp), dist.bytes_by_phase(ddp), strict=True)]
    assert ring == [Fraction(3, 2)] * WORLD
    wrote = [(f["wchar"], d["wchar"]) for f, d in zip(fsdp["ranks"], ddp["ranks"], strict=True)]
    if any(w is None for pair in wrote for w in pair):
        pytest.skip("/proc/self/io cannot be read here")
    for f, d in wrote:
        assert abs(f / d - 2) < 0.05, (f, d)
        assert abs(f / d - 1.5) > 0.4


def test_without_proc_self_io_the_wire_scenario_says_so(monkeypatch):
    """Where /proc/self/io cannot be read (not Linux), the ranks measure nothing and say why;
    wire_bytes raises that reason rather than a KeyError.  The forked helper runs this
    process's code, so the patched reader reaches the ranks."""
    import torch  # noqa: F401

    def unreadable() -> int:
        raise OSError("no such file")

    monkeypatch.delenv(dist.CACHE_ENV, raising=False)
    monkeypatch.setattr(dist, "_wchar", unreadable)
    res = dist.run([("wire", {"numels": [8], "groups": [2]})], world=2)
    sc = res["scenarios"][0]
    assert all(r["wire"] == [] and "/proc/self/io" in r["io_error"] for r in sc["ranks"])
    with pytest.raises(RuntimeError, match="量不了网线上的字节"):
        dist.wire_bytes(sc)


def test_wire_sizes_are_checked_before_any_process_starts():
    with pytest.raises(ValueError, match="groups"):
        dist.run([("wire", {"groups": [5]})], world=4)
    with pytest.raises(ValueError, match="整除"):
        dist.run([("wire", {"numels": [6], "groups": [4]})], world=4)

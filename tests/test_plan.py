"""`python -m tmath plan`: text, JSON and refusals; every number from tmath.layout,
tmath.comm and tmath.memory, recomputed here independently where it can be."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import tmath
from tmath import comm
from tmath.cli import main
from tmath.layout import build_layout
from tmath.memory import activation_bytes
from tmath.plan import build_plan, render_text

L405 = ["--preset", "llama3.1-405b", "--dp", "128", "--tp", "8", "--pp", "16", "--zero", "1",
        "--micro-batch", "1", "--global-batch", "2048", "--seq-len", "8192",
        "--pp-edge-layers", "7"]


def plan_json(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_fields_the_issue_names(capsys):
    p = plan_json(capsys, *L405)
    assert p["world_size"] == 16_384
    assert p["bubble_fraction"] == pytest.approx(15 / 31)
    assert set(p["comm_bytes_per_gpu"]) == {"dp", "tp", "pp", "ep", "cp"}
    assert all(type(v) is int for v in p["comm_bytes_per_gpu"].values())
    assert set(p["memory_bytes_per_gpu"]) == {"weights", "grads", "optimizer", "activations"}
    assert all(type(v) is int for v in p["memory_bytes_per_gpu"].values())
    assert isinstance(p["step_time_s"], float) and isinstance(p["feasible"], bool)
    assert p["links"]["tp"] == "NVLink4" and p["links"]["dp"] == "IB-NDR"


def test_numbers_are_the_layouts_and_the_memory_modules(capsys):
    p = plan_json(capsys, *L405)
    cfg = tmath.preset("llama3.1-405b")
    lay = build_layout(cfg, dp=128, tp=8, pp=16, zero=1, micro_batch=1, global_batch=2048,
                       seq_len=8192, pp_edge_layers=7)
    assert p["comm_bytes_per_gpu"] == lay.comm_bytes_per_gpu()
    # DP: a reduce-scatter and an all-gather of the stage's 8 layers of bf16 over 128 GPUs
    params = 8 * (2 * 16384 * 16384 // 8 + 2 * 16384 * 1024 // 8 + 3 * 16384 * 53248 // 8
                  + 2 * 16384)
    assert p["comm_bytes_per_gpu"]["dp"] == 2 * comm.bytes_sent("all_gather", 2 * params, 128)
    # PP: stage 1 sends 16 activations forward and 16 gradients back, split over tp = 8
    assert p["comm_bytes_per_gpu"]["pp"] == 32 * 8192 * 16384 * 2 // 8
    mem = p["memory_bytes_per_gpu"]
    assert mem["weights"] == 2 * params and mem["optimizer"] == -(-params // 128) * 12
    a = activation_bytes(cfg, 8192, 1, tp=8, sequence_parallel=True, attention="flash")
    assert mem["activations"] == pytest.approx(15 * 8 * a.total / 126, rel=1e-12)
    assert p["stage"]["in_flight_micro_batches"] == 15
    # 15 micro-batches of activations on stage 1, the tightest: the verdict is the sum of its
    # memory and the 5 GB workspace against 80 GiB (it fits, by a few GB)
    need = sum(mem.values()) + 5e9
    assert p["feasible"] is (need <= 80 * 2**30) is True and p["verdict_zh"].startswith("可行")
    # the step: FLOPs over 16,384 GPUs at 989 TFLOP/s, stretched by the bubble
    assert p["compute_time_s"] == pytest.approx(p["hardware_flops"] / (16384 * 989e12))
    assert p["pipeline_time_s"] == pytest.approx(p["compute_time_s"] * 31 / 16)
    assert p["step_time_s"] == pytest.approx(p["pipeline_time_s"] + sum(p["comm_time_s"].values()))


def test_full_recompute_makes_it_fit(capsys):
    p = plan_json(capsys, *L405, "--recompute", "full")
    assert p["feasible"] is True
    assert p["memory_bytes_per_gpu"]["activations"] < 5e9
    assert p["hardware_flops"] > p["model_flops"]  # one more forward pass


def test_text_is_chinese_and_states_the_conventions(capsys):
    assert main(["plan", *L405]) == 0
    out = capsys.readouterr().out
    assert out.startswith("部署：可行：最紧的是第 1 段")
    for words in ("1F1B 气泡占一步 48.4%", "第 1 段（共 16 段", "每卡显存", "流水线并行（PP）",
                  "环形算法", "只算 Transformer 层", "走 NVLink4", "MFU"):
        assert words in out, words


def test_help_states_the_conventions():
    r = subprocess.run([sys.executable, "-m", "tmath", "plan", "--help"], capture_output=True,
                       text=True, check=True)
    for words in ("环形算法", "每张卡发出的字节", "只算 Transformer 层", "流水线中间的一段",
                  "bf16", "b·T·D/(cp·tp)", "均匀路由", "ep 整除 dp", "1.5 倍", "--global-batch"):
        assert words in r.stdout, words


@pytest.mark.parametrize("argv, field, words", [
    (["--preset", "llama3-70b", "--tp", "3"], "tp", "tp=3 不能整除 num_heads=64"),
    (["--preset", "llama3-70b", "--pp", "3"], "pp", "num_layers=80"),
    (["--preset", "mixtral-8x7b", "--ep", "3", "--dp", "3"], "ep", "n_routed_experts=8"),
    (["--preset", "mixtral-8x7b", "--ep", "4", "--dp", "2"], "ep", "ep 必须整除 dp"),
    (["--preset", "llama3-8b", "--dp", "4", "--global-batch", "6"], "global_batch", "4 的倍数"),
    (["--preset", "llama3-8b", "--cp", "3"], "cp", "seq_len=2048"),
    (["--preset", "llama3-8b", "--gpu", "V100"], "gpu", "V100"),
    (["--preset", "nope"], "preset", "nope"),
    ([], "config", "--preset"),
])
def test_refusals_name_the_field(capsys, argv, field, words):
    assert main(["plan", *argv, "--json"]) == 2
    err = json.loads(capsys.readouterr().out)
    assert set(err) == {"error", "field"} and err["field"] == field and words in err["error"]
    assert main(["plan", *argv]) == 2
    text = capsys.readouterr().err
    assert text.startswith("tmath: 错误：") and words in text and len(text.strip().splitlines()) == 1


def test_moe_plan_with_expert_and_tensor_parallelism():
    p = build_plan(tmath.preset("mixtral-8x7b"), dp=8, tp=2, ep=8, zero=1, micro_batch=2,
                   global_batch=64, seq_len=4096, recompute="full")
    assert p["world_size"] == 16 and p["per_gpu"]["experts"] == 1
    assert p["comm_bytes_per_gpu"]["ep"] > 0 and p["links"]["ep"] == "IB-NDR"
    assert p["feasible"] is True
    json.dumps(p)  # JSON-serialisable as it is


def test_import_tmath_stays_light():
    code = ("import sys, tmath, tmath.plan, tmath.layout, tmath.comm, tmath.dist; "
            "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_dp_group_members_per_node_choose_the_network_bandwidth():
    # pure DP over 16 H100s: 8 DP ranks per node, so the node's 8 NICs carry the gradients;
    # with tp = 8 filling the node, each DP group has one member per node: one NIC per GPU
    cfg = tmath.preset("llama3-8b")
    wide = build_plan(cfg, dp=16, zero=1, micro_batch=1, global_batch=16, seq_len=4096, gpu="H100")
    thin = build_plan(cfg, dp=16, tp=8, zero=1, micro_batch=1, global_batch=16, seq_len=4096,
                      gpu="H100")
    for plan, per_node in ((wide, 8), (thin, 1)):
        dp = [c for c in plan["collectives"] if c["axis"] == "dp"]
        assert dp and all(c["per_node"] == per_node and c["link"] == "IB-NDR" for c in dp)
        for c in dp:
            want = comm.nccl_time(c["kind"], c["nbytes"], 16, intra="NVLink4", inter="IB-NDR",
                                  per_node=per_node)
            assert c["seconds_each"] == pytest.approx(want)
    bw = {k: comm.group_bandwidth(16, intra="NVLink4", inter="IB-NDR", per_node=g)
          for k, g in (("wide", 8), ("thin", 1))}
    # wide: 8 NICs x 48 GB/s exceed NVLink's effective 370.8 GB/s; thin: one NIC, 48 GB/s
    assert bw == {"wide": pytest.approx(370.8e9), "thin": 48e9}


def test_step_time_is_an_estimate_not_a_bound():
    # compute at peak: with no communication the plan prints MFU 100 %, so its step time is
    # no upper bound (real kernels are slower) and the text must not call it one
    cfg = tmath.preset("llama3-8b")
    solo = build_plan(cfg, dp=1, micro_batch=1, global_batch=1, seq_len=1024, gpu="H100")
    assert solo["mfu"] == pytest.approx(1.0)
    text = render_text(solo)
    assert "合计（上界）" not in text and "：上界" not in text
    assert "峰值算力，不重叠" in text and "计算按峰值" in text
    assert any("不是上界也不是下界" in c for c in solo["conventions_zh"])


def test_conventions_name_the_nccl_tag_and_the_effective_bandwidth():
    # the text is typed in plan.CONVENTIONS_ZH: it must follow the library's constants
    from tmath.hardware import link
    from tmath.plan import CONVENTIONS_ZH

    step = next(c for c in CONVENTIONS_ZH if c.startswith("步时"))
    nv = link("NVLink4")
    assert comm.NCCL_VERSION in step
    assert f"{nv.bandwidth / 1e9:g} GB/s" in step and f"线速 {nv.ceiling / 1e9:g} GB/s" in step


def test_order_flag_gives_the_llama3_mesh(capsys):
    """`--order llama3` lays ranks out as the Llama 3 paper does, [TP, CP, PP, DP]: with tp=4,
    pp=2, dp=2 on nodes of 8 the gradient all-reduce leaves the node and the pipeline's sends
    stay on NVLink; Megatron's order (the default) does the opposite."""
    args = ("--preset", "llama3-8b", "--tp", "4", "--pp", "2", "--dp", "2")
    meg, l3 = plan_json(capsys, *args), plan_json(capsys, *args, "--order", "llama3")
    assert meg["settings"]["order"] == "megatron" and l3["settings"]["order"] == "llama3"
    assert (meg["links"]["dp"], meg["links"]["pp"]) == ("NVLink4", "IB-NDR")
    assert (l3["links"]["dp"], l3["links"]["pp"]) == ("IB-NDR", "NVLink4")
    assert meg["comm_bytes_per_gpu"] == l3["comm_bytes_per_gpu"]
    assert l3["comm_time_s"]["dp"] > 5 * meg["comm_time_s"]["dp"]  # the NIC against NVLink
    assert "tp、cp、pp、dp" in l3["conventions_zh"][-1]
    assert "tp、cp、dp、pp" in meg["conventions_zh"][-1]
    assert main(["plan", *args, "--order", "dp-first"]) == 2
    assert "--order" in capsys.readouterr().err


# --- pipeline schedules (--schedule, --virtual-stages) -------------------------------------

def test_schedules_change_the_bubble_memory_and_weights(capsys):
    base = ("--preset", "llama3-70b", "--dp", "8", "--tp", "8", "--pp", "4",
            "--global-batch", "256")
    p = {s: plan_json(capsys, *base, "--schedule", s,
                      *(("--virtual-stages", "5") if s == "interleaved" else ()))
         for s in ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe")}
    m, pp = 32, 4  # n_mb = 256/8
    # bubble over ideal compute, F = 1, B = 2, W = 1, F&B = F + B (the formulas, by hand)
    want = {"gpipe": (pp - 1) * 3 / (3 * m), "1f1b": (pp - 1) * 3 / (3 * m),
            "interleaved": (pp - 1) * 3 / 5 / (3 * m), "zb-h1": (pp - 1) * 1 / (3 * m),
            "dualpipe": (pp / 2 - 1) * (3 + 2 - 3) / (3 * m)}
    for s, plan in p.items():
        assert plan["schedule"]["bubble_ratio"] == pytest.approx(want[s]), s
        assert plan["pipeline_time_s"] == pytest.approx(plan["compute_time_s"] * (1 + want[s]))
    one, dual = p["1f1b"]["memory_by_stage"], p["dualpipe"]["memory_by_stage"]
    for i in range(pp):  # DualPipe: GPU i holds stages i and pp−1−i
        assert dual[i]["weights"] == one[i]["weights"] + one[pp - 1 - i]["weights"]
    assert p["dualpipe"]["schedule"]["weight_copies"] == 2
    # DualPipe's rows are GPUs: the verdict names the GPU and its two stages
    g = p["dualpipe"]["worst_stage"]
    assert f"卡 {g}（第 {g} 段与第 {pp - 1 - g} 段）" in p["dualpipe"]["verdict_zh"]
    assert "最紧的是第" in p["1f1b"]["verdict_zh"]
    assert p["gpipe"]["stage"]["in_flight_micro_batches"] == m
    assert p["zb-h1"]["stage"]["in_flight_micro_batches"] == pp
    assert p["dualpipe"]["stage"]["in_flight_micro_batches"] == pp + 1
    # interleaved, stage 1: (2(pp − 2) + (V − 1)·pp + 1)/V = (4 + 16 + 1)/5
    assert p["interleaved"]["stage"]["in_flight_micro_batches"] == pytest.approx(21 / 5)
    assert p["interleaved"]["comm_bytes_per_gpu"]["pp"] == 5 * p["1f1b"]["comm_bytes_per_gpu"]["pp"]


@pytest.mark.parametrize("extra, field", [
    (("--schedule", "interleaved"), "virtual_stages"),
    (("--schedule", "interleaved", "--virtual-stages", "21"), "virtual_stages"),  # 20 layers/stage
    (("--schedule", "1f1b", "--virtual-stages", "2"), "virtual_stages"),
    (("--schedule", "interleaved", "--virtual-stages", "2", "--global-batch", "24"),
     "global_batch"),  # n_mb = 3 < pp = 4
    (("--schedule", "dualpipe", "--global-batch", "48"), "global_batch"),  # n_mb = 6 < 2·pp
    (("--schedule", "zb-h1", "--global-batch", "16"), "global_batch"),  # n_mb = 2 < pp
    (("--schedule", "interleaved", "--virtual-stages", "65"), "virtual_stages"),
])
def test_impossible_schedules_are_refused(capsys, extra, field):
    argv = ["plan", "--preset", "llama3-70b", "--dp", "8", "--tp", "8", "--pp", "4",
            "--global-batch", "256", *extra, "--json"]
    assert main(argv) == 2
    err = json.loads(capsys.readouterr().out)
    assert err["field"] == field and re.search(r"[\u4e00-\u9fff]", err["error"]), err


@pytest.mark.parametrize("row", range(3))
@pytest.mark.parametrize("v, chunks", [(2, ([4, 3], [4, 4])), (4, ([2, 2, 2, 1], [2, 2, 2, 2])),
                                       (7, ([1] * 7, [2] + [1] * 6))])
def test_llama3_405b_table4_plans_with_interleaved_uneven_chunks(row, v, chunks):
    # Table 4's layout: 16 stages of 7, 8 × 14, 7 layers; V does not divide 7, and
    # Megatron-Core's --pipeline-model-parallel-layout takes chunks of 4 and 3 layers
    from tmath.plan import build_plan, llama3_405b_layout

    plan = build_plan(tmath.preset("llama3.1-405b"), schedule="interleaved", virtual_stages=v,
                      **llama3_405b_layout(row))
    sc = plan["schedule"]
    assert plan["settings"]["stage_layers"] == [7] + [8] * 14 + [7]
    assert sc["chunk_layers"][0] == sc["chunk_layers"][-1] == chunks[0]
    assert sc["chunk_layers"][1] == chunks[1]
    assert sc["micro_batch_group"] == 16  # n_mb = 32 or 16: a multiple of pp = 16
    m = plan["micro_batches"]
    assert sc["bubble_ratio"] == pytest.approx(15 / v / m)
    assert any("相差 1" in c for c in plan["conventions_zh"])


def test_interleaved_takes_micro_batches_not_a_multiple_of_pp(capsys):
    # n_mb = 6 on pp = 4: Megatron-Core runs groups of N = 6 (its default N = pp refuses it)
    p = plan_json(capsys, "--preset", "llama3-70b", "--dp", "8", "--tp", "8", "--pp", "4",
                  "--global-batch", "48", "--schedule", "interleaved", "--virtual-stages", "2",
                  "--stage", "0")
    assert p["micro_batches"] == 6 and p["schedule"]["micro_batch_group"] == 6
    assert p["schedule"]["bubble_ratio"] == pytest.approx(3 / 2 / 6)
    # stage 0's warm-up 2(pp − 1) + (V − 1)·N = 12 = V·n_mb: every chunk forward in flight
    assert p["stage"]["in_flight_micro_batches"] == 6
    assert any("N = 6" in c for c in p["conventions_zh"])


def test_dualpipe_needs_an_even_pp(capsys):
    assert main(["plan", "--preset", "llama3-70b", "--pp", "5", "--global-batch", "20",
                 "--schedule", "dualpipe", "--json"]) == 2
    err = json.loads(capsys.readouterr().out)
    assert err["field"] == "pp" and "偶数" in err["error"]

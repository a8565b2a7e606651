"""`tmath plan` on the hardware the field's references use (issue 32, item 11), uneven
pipeline stages (item 6: DeepSeek-V3's 61 layers over 16 stages), TPU pods that a group
outgrows (the data-centre network), and hardware the reader gives on the command line."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

import tmath
from tmath import comm, hardware
from tmath.cli import main
from tmath.layout import LayoutError, build_layout, parse_stage_layers
from tmath.plan import build_plan
from tmath.sources import SOURCES

DSV3 = ["--preset", "deepseek-v3", "--gpu", "H800", "--dp", "128", "--pp", "16", "--ep", "64",
        "--zero", "1", "--seq-len", "4096", "--global-batch", "15360"]


def run(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- the hardware table ------------------------------------------------------------------------

@pytest.mark.parametrize("name, flops, hbm_gib, hbm_bw, node_size, intra, inter", [
    # datasheet / Cloud TPU page figures, typed here from the sources, not from tmath
    ("A100-40GB", 312e12, 40, 1555e9, 8, 300e9, 25e9),
    ("A100", 312e12, 80, 2039e9, 8, 300e9, 25e9),
    ("B200", 2.25e15, 180, 8e12, 8, 900e9, 50e9),
    ("H800", 989e12, 80, 3.35e12, 8, 400e9 / 2, 50e9),
    ("TPUv4", 275e12, 32, 1200e9, 4096, 45e9, 25e9 / 4),
    ("TPUv5p", 459e12, 95, 2765e9, 6144, 1200e9 / 6 / 2, 50e9 / 8),
    ("TPUv6e", 918e12, 32, 1638e9, 256, 800e9 / 4 / 2, 25.6e12 / 8 / 256),
    ("TPUv5e", 197e12, 16, 819e9, 256, 400e9 / 4 / 2, 6.4e12 / 8 / 256),
])
def test_each_accelerator_has_its_sources_figures_and_a_node(name, flops, hbm_gib, hbm_bw,
                                                              node_size, intra, inter):
    hw = hardware.hardware(name)
    assert (hw.dense_flops, hw.hbm_bytes, hw.hbm_bandwidth) == (flops, hbm_gib * 2**30, hbm_bw)
    nd = hardware.node(name)
    assert nd.size == node_size
    # the line rates (the ceilings): the model's bandwidths are NCCL's effective figures
    assert hardware.link(nd.intra).ceiling == pytest.approx(intra)
    assert hardware.link(nd.inter).ceiling == pytest.approx(inter)
    for key in (hw.source, nd.source, hardware.link(nd.intra).source,
                hardware.link(nd.inter).source):
        assert key in SOURCES
    # every link keeps the book's convention: per direction, half the printed both-ways sum,
    # and the model's bandwidth at most that line rate
    for lk in (hardware.link(nd.intra), hardware.link(nd.inter)):
        assert lk.bidirectional == 2 * lk.ceiling and lk.bandwidth <= lk.ceiling


def test_aliases_reach_the_new_entries():
    assert hardware.hardware("v5p").name == "TPUv5p"
    assert hardware.hardware("trillium").name == "TPUv6e"
    assert hardware.hardware("tpu-v4p").name == "TPUv4"
    assert hardware.hardware("a100-40gb").name == "A100-40GB"


def test_h800_plans_on_deepseeks_links(capsys):
    # refused before: "H800 没有节点与链路数据"
    code, out, err = run(capsys, *DSV3, "--stage-layers", "3,4*14,2", "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["hardware"]["intra_link"] == {"name": "NVLink-H800", "bandwidth": 160e9}
    # the report's IB 50 GB/s is the NDR line rate; NCCL's ring gets 48 GB/s through a NIC
    assert p["hardware"]["inter_link"] == {"name": "IB-NDR", "bandwidth": 48e9}
    # EP64 over 8 nodes: the all-to-alls leave the node, 8 members in each
    ep = [c for c in p["collectives"] if c["axis"] == "ep"]
    assert ep and all(c["link"] == "IB-NDR" and c["per_node"] == 8 for c in ep)


# --- uneven pipeline stages ----------------------------------------------------------------------

def test_deepseek_v3s_layout_is_expressible(capsys):
    code, out, err = run(capsys, *DSV3, "--stage-layers", "3,4*14,2", "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["world_size"] == 2048 and p["settings"]["stage_layers"] == [3] + [4] * 14 + [2]
    rows = p["memory_by_stage"]
    assert len(rows) == 16
    # stage 0 holds the 3 dense layers (first_k_dense_replace = 3) and the embedding
    lay0 = build_layout(tmath.preset("deepseek-v3"), dp=128, pp=16, ep=64, zero=1,
                        seq_len=4096, global_batch=15360, stage_layers=[3] + [4] * 14 + [2],
                        stage=0)
    assert (lay0.dense_layers, lay0.moe_layers, list(lay0.layers)) == (3, 0, [0, 1, 2])
    last = lay0.at_stage(15)
    assert list(last.layers) == [59, 60] and last.params_per_gpu["lm_head"] > 0
    # no even split exists: 61 is prime, and pp_edge_layers cannot make 61 − 2e a multiple of 14
    with pytest.raises(LayoutError):
        build_layout(tmath.preset("deepseek-v3"), pp=16, seq_len=4096)
    for e in range(1, 31):
        with pytest.raises(LayoutError):
            build_layout(tmath.preset("deepseek-v3"), pp=16, seq_len=4096, pp_edge_layers=e)


def test_stage_layers_parse_and_refuse():
    assert parse_stage_layers("3,4*14,2") == (3,) + (4,) * 14 + (2,)
    assert parse_stage_layers(" 7 , 8*14 ,7") == (7,) + (8,) * 14 + (7,)
    for bad in ("x", "", "0,61", "4*0", "3,,4", "1*10001", "9" * 5000, "-1,62"):
        with pytest.raises(LayoutError) as e:
            parse_stage_layers(bad)
        assert e.value.field == "stage_layers"
    cfg = tmath.preset("llama3.1-405b")
    # the same split as pp_edge_layers=7, given stage by stage
    a = build_layout(cfg, pp=16, seq_len=8192, pp_edge_layers=7)
    b = build_layout(cfg, pp=16, seq_len=8192, stage_layers="7,8*14,7")
    assert a.stage_layers == b.stage_layers
    for kw, msg in ((dict(stage_layers="8*16"), "之和"), (dict(stage_layers="126"), "段"),
                    (dict(stage_layers="7,8*14,7", pp_edge_layers=7), "只能给一个")):
        with pytest.raises(LayoutError, match=msg) as e:
            build_layout(cfg, pp=16, seq_len=8192, **kw)
        assert e.value.field == "stage_layers"


@pytest.mark.parametrize("argv, flag", [
    (["--stage-layers", "3,4*14,3"], "--stage-layers"),
    (["--stage-layers", "1*99999999999"], "--stage-layers"),
    (["--stage-layers", "3,4*14,2", "--pp-edge-layers", "3"], "--stage-layers"),
])
def test_bad_stage_layers_on_the_command_line_is_one_chinese_line(capsys, argv, flag):
    code, out, err = run(capsys, *DSV3, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("tmath: 错误：") and flag in err and "Traceback" not in err


# --- TPU pods: a group larger than a pod crosses the data-centre network ------------------------

def test_a_tpu_group_larger_than_a_pod_crosses_the_dcn(capsys):
    argv = ["--preset", "llama3-8b", "--gpu", "TPUv5e", "--dp", "1024", "--tp", "4", "--cp", "2",
            "--seq-len", "8192", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    p = json.loads(out)
    dp = next(c for c in p["collectives"] if c["axis"] == "dp")
    # 2,048 chips (dp·cp) at stride 4 over 32 pods of 256: 64 in each pod
    assert (dp["group"], dp["per_node"], dp["link"]) == (2048, 64, "DCN-v5e")
    # by hand: ICI reduce-scatter + all-gather among the 64 of a pod, then an all-reduce of a
    # 1/64 shard across 32 pods on each chip's 3.125 GB/s.  The 64 take a 16 x 4 box of the
    # 16 x 16 torus (tmath.comm.torus_shape): the array in two halves, each gathered along one
    # axis and then the other; the 4-chip side has no wraparound (a line), and its links carry
    # 3/4 of a half once the 16 side is done plus 3/4 of a half's 4/64 before it:
    # 3/4 · V/2 · (1 + 4/64) = 51/128 V at 50 GB/s; 16/2 + 4 − 1 = 11 hops of 1 µs
    v = Fraction(dp["nbytes"])
    ici = 2 * (11 * 1e-6 + float(v * Fraction(51, 128)) / 50e9)
    dcn = 2 * 31 * 10e-6 + float(2 * Fraction(31, 32) * v / 64) / 3.125e9
    assert dp["seconds_each"] == pytest.approx(ici + dcn, rel=1e-12)
    # all over ICI, as before the fix, it was faster
    flat = comm.collective_time("all_reduce", v, 2048, bandwidth=50e9, alpha=1e-6,
                                topology="ring")
    assert dp["seconds_each"] > 1.2 * flat
    # inside one pod nothing changes: tp and cp ride ICI
    assert {c["link"] for c in p["collectives"] if c["axis"] != "dp"} == {"ICI-v5e"}
    # and the text names the model it priced them with (not NCCL's, on a TPU)
    assert p["hardware"]["comm_model"] == "alpha-beta"
    code, out, _ = run(capsys, *argv[:-1])
    assert "通信（α–β 模型，不重叠）" in out and "NCCL" not in out.split("约定：")[0]


def test_a_tpu_group_inside_a_pod_stays_on_ici(capsys):
    code, out, err = run(capsys, "--preset", "llama3-8b", "--gpu", "TPUv6e", "--dp", "64",
                         "--tp", "4", "--seq-len", "4096", "--json")
    assert code == 0, err
    assert {c["link"] for c in json.loads(out)["collectives"]} == {"ICI-v6e"}


# --- hardware from the command line ---------------------------------------------------------------

def test_custom_hardware_replaces_the_gpus_figures(capsys):
    base = ["--preset", "llama3-8b", "--dp", "16", "--tp", "2", "--seq-len", "4096", "--json"]
    code, out, _ = run(capsys, *base)
    h100 = json.loads(out)
    code, out, err = run(capsys, *base, "--peak-tflops", "494.5", "--hbm-gb", "40",
                         "--intra-gbs", "225", "--inter-gbs", "25", "--gpus-per-node", "4")
    assert code == 0, err
    p = json.loads(out)
    hw = p["hardware"]
    assert hw["dense_flops"] == 494.5e12 and hw["hbm_bytes"] == 40e9 and hw["gpus_per_node"] == 4
    assert hw["intra_link"]["bandwidth"] == 225e9 and hw["inter_link"]["bandwidth"] == 25e9
    assert hw["custom"] == sorted(["peak_flops", "hbm_bytes", "gpus_per_node", "intra_bandwidth",
                                   "inter_bandwidth"])
    # half the peak: twice the compute time
    assert p["compute_time_s"] == pytest.approx(2 * h100["compute_time_s"])
    assert p["hbm_bytes_per_gpu"] == 40e9
    # dp over 16 at stride 2 with 4 GPUs a node: 2 members a node, over the 25 GB/s network
    dp = next(c for c in p["collectives"] if c["axis"] == "dp")
    assert dp["per_node"] == 2 and dp["link"].startswith("IB-NDR@25")
    assert dp["seconds_each"] == pytest.approx(comm.nccl_time(
        "all_reduce", dp["nbytes"], 16, per_node=2,
        intra=hardware.Link(**{**hardware.link("NVLink4").__dict__, "bandwidth": 225e9}),
        inter=hardware.Link(**{**hardware.link("IB-NDR").__dict__, "bandwidth": 25e9})))
    code, out, _ = run(capsys, *base[:-1], "--peak-tflops", "494.5")
    assert "16 位稠密峰值 494.5 TFLOP/s" in out


@pytest.mark.parametrize("flag, value", [
    ("--peak-tflops", "0"), ("--peak-tflops", "nan"), ("--peak-tflops", "1e30"),
    ("--hbm-gb", "-1"), ("--hbm-gb", "inf"), ("--intra-gbs", "0"), ("--inter-gbs", "1e9"),
    ("--gpus-per-node", "0"), ("--gpus-per-node", "2000000"), ("--peak-tflops", "x"),
])
def test_bad_hardware_figures_are_one_chinese_line_naming_the_flag(capsys, flag, value):
    code, out, err = run(capsys, "--preset", "llama3-8b", flag, value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("tmath: 错误：") and flag in err and "Traceback" not in err
    code, out, err = run(capsys, "--preset", "llama3-8b", flag, value, "--json")
    assert code == 2 and err == ""


def test_build_plan_refuses_a_bad_figure_by_name():
    cfg = tmath.preset("llama3-8b")
    for kw, field in ((dict(peak_flops=-1.0), "peak_flops"), (dict(gpus_per_node=True),
                      "gpus_per_node"), (dict(inter_bandwidth="fast"), "inter_bandwidth")):
        with pytest.raises(LayoutError) as e:
            build_plan(cfg, **kw)
        assert e.value.field == field


# --- any chip in the ledger too: peak FLOP/s and HBM bandwidth ----------------------------------

def ledger_json(capsys, *argv):
    code = main(["ledger", "--preset", "llama3-8b", "--seq-len", "2048", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_the_ledger_takes_a_chips_peak_and_hbm_bandwidth(capsys):
    h100 = ledger_json(capsys)
    mine = ledger_json(capsys, "--peak-tflops", "494.5", "--hbm-tbs", "1")
    assert mine["settings"]["gpu"] == "H100（自定）"
    # half the peak: twice the training step at peak
    assert mine["step_time_at_peak_s"] == pytest.approx(2 * h100["step_time_at_peak_s"])
    # decode reads the same bytes at 1 TB/s instead of 3.35
    d = mine["decode"]
    assert d["bandwidth_bytes_per_s"] == 1e12
    assert d["step_seconds"] == pytest.approx(d["bytes_per_gpu"] / 1e12)
    assert d["bytes_per_gpu"] == h100["decode"]["bytes_per_gpu"]


@pytest.mark.parametrize("flag, value", [("--peak-tflops", "0"), ("--peak-tflops", "inf"),
                                         ("--hbm-tbs", "-3"), ("--hbm-tbs", "nan"),
                                         ("--hbm-tbs", "1e9"), ("--hbm-tbs", "fast")])
def test_the_ledger_refuses_a_bad_chip_figure_by_flag(capsys, flag, value):
    code = main(["ledger", "--preset", "llama3-8b", flag, value])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("tmath: 错误：") and flag in err and "Traceback" not in err

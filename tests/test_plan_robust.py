"""`tmath plan` on absurd input (issue 32, item 10) and the `tmath` command (item 12).

Every argument of `plan` has a plausible range (:data:`tmath.ledger.SETTING_LIMITS`, the
table `ledger` uses too) and is refused, naming the flag and the range, before any work
that grows with the mesh; what the planner does per node is closed-form, so its memory and
time do not grow with the number of GPUs.  The fuzz below runs in this process under a cap
on its address space (1 GiB more than it holds when it starts), so a regression fails with
``MemoryError`` instead of taking the machine.  No test is timed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import resource
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tmath
from tmath import cli
from tmath.cli import main
from tmath.errors import has_chinese
from tmath.hardware import NODES
from tmath.layout import build_layout

CAP_EXTRA = 2**30  # bytes of address space a capped block may take beyond what it holds


@contextlib.contextmanager
def address_space_cap(extra: int = CAP_EXTRA):
    """Lower this process's soft RLIMIT_AS to its current size plus ``extra`` bytes for the
    block, and restore it after (Linux; elsewhere the block runs uncapped)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
    except OSError:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + extra
    for limit in (soft, hard):  # never raise a limit already set
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# main builds its argparse parser anew on every call (2 ms, most of a refusal's cost); the
# tests share one, which argparse allows (parse_args keeps no state between calls).
_PARSER = functools.cache(cli._parser)


def run_main(argv):
    """``tmath.cli.main(argv)`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with (mock.patch.object(cli, "_parser", _PARSER), contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


BASE = ["--preset", "llama3-8b"]


def cap_child():
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


# --- the smaller items -------------------------------------------------------------------------


def test_an_unknown_preset_is_refused_in_chinese():
    code, out, _ = run_main(["plan", "--preset", "gpt-5", "--json"])
    err = json.loads(out)
    assert code == 2 and err["field"] == "preset" and has_chinese(err["error"])
    assert "unknown" not in err["error"] and "llama3-8b" in err["error"]


def test_text_errors_name_the_flag_once():
    # the flag leads every text error, unless the message itself starts by naming it
    for argv, line in (([], "tmath: 错误：CONFIG：给出 CONFIG.json 或 --preset NAME 二者之一"),
                       ([*BASE, "--dp", "0"], "tmath: 错误：dp（--dp）必须在 1 到 1,000,000 之间，收到 0"),
                       ([*BASE, "--tp", "3"], "tmath: 错误：--tp：tp=3 不能整除 num_heads=32")):
        code, out, err = run_main(["plan", *argv])
        assert code == 2 and out == "" and err.startswith(line), err


def test_every_gpu_the_gpu_error_lists_is_one_plan_accepts():
    code, out, _ = run_main(["plan", *BASE, "--gpu", "B900", "--json"])
    err = json.loads(out)
    assert code == 2 and err["field"] == "gpu"
    from tmath.hardware import HARDWARE

    listed = [g for g in HARDWARE if g in err["error"]]
    assert listed, err
    for g in listed:
        assert run_main(["plan", *BASE, "--gpu", g, "--json"])[0] == 0, g
    code, out, _ = run_main(["plan", *BASE, "--gpu", "V100", "--json"])  # known, no node data
    err = json.loads(out)
    assert code == 2 and err["field"] == "gpu" and "V100" in err["error"]
    assert [g for g in HARDWARE if g in err["error"] and g != "V100"] == listed


def test_sequence_parallel_on_at_tp_1_is_refused_not_ignored():
    code, out, _ = run_main(["plan", *BASE, "--sequence-parallel", "on", "--json"])
    err = json.loads(out)
    assert code == 2 and err["field"] == "sequence_parallel" and "tp" in err["error"], err
    assert run_main(["plan", *BASE, "--sequence-parallel", "off", "--json"])[0] == 0
    p = json.loads(run_main(["plan", *BASE, "--tp", "2", "--sequence-parallel", "on",
                             "--json"])[1])
    assert p["settings"]["sequence_parallel"] is True


def test_mfu_of_an_infeasible_layout_says_so():
    code, out, _ = run_main(["plan", *BASE])  # 8B with Adam on one H100 does not fit
    assert code == 0 and out.startswith("部署：不可行")
    mfu = next(line for line in out.splitlines() if "MFU" in line)
    assert "放不下" in mfu, mfu
    code, out, _ = run_main(["plan", *BASE, "--dp", "8", "--zero", "3", "--recompute", "full"])
    assert code == 0 and out.startswith("部署：可行")
    assert "放不下" not in next(line for line in out.splitlines() if "MFU" in line)


@pytest.mark.parametrize("argv", [
    ["--preset", "llama3-70b", "--pp", "4", "--cp", "4", "--seq-len", "4096"],
    ["--preset", "llama3-70b", "--tp", "16"],
])
def test_each_link_label_is_the_link_its_time_is_computed_on(argv):
    # The NCCL time of a collective whose group fits on one node uses only the node's link
    # (NVLink): its label must say NVLink too, and so must the axis' line.
    p = json.loads(run_main(["plan", *argv, "--json"])[1])
    inter = "IB-NDR"
    for c in p["collectives"]:
        assert (c["link"] == inter) == (c["per_node"] < c["group"]), c
    for axis in ("tp", "pp"):
        used = {c["link"] for c in p["collectives"] if c["axis"] == axis}
        if used:
            assert set(p["links"][axis].split("+")) == used, (axis, p["links"][axis], used)


# --- the issue's three command lines -------------------------------------------------------

ISSUE_CASES = [  # argv, the field refused
    (["--dp", "1000000000"], "dp"),  # OOM-killed after 24 GB: every rank listed
    (["--dp", str(10**23), "--tp", "8"], "dp"),  # OverflowError traceback
    (["--dp", "30000000", "--tp", "8"], "dp"),  # 可行 for 240 M GPUs, after 67 s
]


def test_the_issues_meshes_are_refused_before_any_per_rank_work():
    # One child process under a 3 GB address-space cap (and a generous timeout, a safety net,
    # not a measurement) runs the three command lines in turn.
    code = ("import json, sys\nfrom tmath.cli import main\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    print(main(['plan', '--preset', 'llama3-8b', *argv, '--json']), flush=True)\n")
    r = subprocess.run([sys.executable, "-c", code, json.dumps([a for a, _ in ISSUE_CASES])],
                       capture_output=True, text=True, timeout=300, preexec_fn=cap_child)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-800:]
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * len(ISSUE_CASES), r.stdout
    for (argv, field), status, obj in zip(ISSUE_CASES, lines[1::2], lines[0::2], strict=True):
        err = json.loads(obj)
        assert status == "2" and err["field"] == field, (argv, err)
        assert "--dp" in err["error"] and "1,000,000" in err["error"], err


# --- every argument bounded, the flag and the range named ------------------------------------

@pytest.mark.parametrize("argv, field, shown", [
    (["--dp", "1000001"], "dp", "1 到 1,000,000"),
    (["--dp", "0"], "dp", "1 到 1,000,000"),
    (["--tp", str(10**12)], "tp", "1 到 100,000"),
    (["--pp", "10001"], "pp", "1 到 10,000"),
    (["--ep", "-4"], "ep", "1 到 100,000"),
    (["--cp", str(10**9)], "cp", "1 到 1,000,000"),
    (["--micro-batch", str(10**8)], "micro_batch", "1 到 10,000,000"),
    (["--global-batch", str(10**10)], "global_batch", "1 到 1,000,000,000"),
    (["--seq-len", str(10**10)], "seq_len", "1 到 1,000,000,000"),
    (["--stage", "-1"], "stage", "0 到"),
    (["--pp-edge-layers", str(10**30)], "pp_edge_layers", "1 到 10,000"),
    # each degree in range, their product not: the largest degree is the one named
    (["--dp", "1000", "--tp", "8", "--pp", "4", "--cp", "64", "--seq-len", "8192"], "dp",
     "1,000,000"),
])
def test_each_argument_has_a_plausible_range(argv, field, shown):
    for as_json in (True, False):
        code, out, err = run_main(["plan", *BASE, *argv, *(["--json"] if as_json else [])])
        assert code == 2
        if as_json:
            obj = json.loads(out)
            assert set(obj) == {"error", "field"} and obj["field"] == field, obj
            msg = obj["error"]
        else:
            assert out == "" and len(err.strip().splitlines()) == 1, err
            msg = err
            assert msg.startswith("tmath: 错误：")
        assert shown in msg and "--" + field.replace("_", "-") in msg and has_chinese(msg), msg
        assert "Traceback" not in msg


def test_the_largest_plausible_mesh_is_planned():
    # 125,000 × 8 = 10^6 GPUs, the bound itself: planned (and fits; DP leaves the memory alone)
    p = json.loads(run_main(["plan", *BASE, "--dp", "125000", "--tp", "8", "--zero", "1",
                             "--json"])[1])
    assert p["world_size"] == 10**6 and p["feasible"] is True
    dp = [c for c in p["collectives"] if c["axis"] == "dp"]
    assert dp and all(c["group"] == 125_000 and c["per_node"] == 1 for c in dp)


# --- the per-node counts are closed-form ------------------------------------------------------


def enumerated_members_per_node(lay, c):
    """The planner's count before it was closed-form: list the offsets of the group holding
    rank 0 and count those on the first node (kept here as the reference)."""
    from tmath.plan import _group_factors

    if c.link != lay.inter_link or lay.intra_link == lay.inter_link:
        return c.group
    factors = _group_factors(lay, c)
    offsets = [sum(i * st for i, (st, _) in zip(idx, factors, strict=True))
               for idx in itertools.product(*(range(size) for _, size in factors))]
    g = max(1, sum(1 for o in offsets if o < lay.gpus_per_node))
    while c.group % g:
        g -= 1
    return g


MESH_MODELS = ["llama3-70b", "mixtral-8x7b", "deepseek-v2-lite", "gpt2"]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(MESH_MODELS), dp=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24]),
       tp=st.sampled_from([1, 2, 4, 8, 16]), pp=st.sampled_from([1, 2, 3, 4]),
       ep=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2, 3, 4]),
       gpn=st.sampled_from([1, 2, 4, 6, 8, 16]))
def test_members_per_node_closed_form_equals_the_enumeration(name, dp, tp, pp, ep, cp, gpn):
    from tmath.layout import LayoutError
    from tmath.plan import _members_per_node

    try:
        lay = build_layout(tmath.preset(name), dp=dp, tp=tp, pp=pp, ep=ep, cp=cp, seq_len=768,
                           gpus_per_node=gpn)
    except LayoutError:
        return
    for c in lay.collectives():
        assert _members_per_node(lay, c) == enumerated_members_per_node(lay, c), c


def test_members_per_node_does_not_grow_with_the_mesh():
    # A mesh of 10^15 data-parallel ranks (beyond the CLI's bounds; the layout itself takes
    # it) under the address-space cap: the enumeration needed one list entry per rank.
    from tmath.plan import _members_per_node

    for kw, want in (({"tp": 8}, 1), ({"tp": 2}, 4), ({"tp": 4, "cp": 2}, 2)):
        lay = build_layout(tmath.preset("llama3-8b"), dp=10**15, seq_len=4096, **kw)
        with address_space_cap():
            counts = {c.what: _members_per_node(lay, c) for c in lay.collectives()
                      if c.axis == "dp"}
        assert counts and set(counts.values()) == {want}, counts


def test_memory_by_stage_builds_a_few_stage_layouts_not_one_per_stage(tmp_path):
    # pp = 10,000 stages of a 10,000-layer model (the config's bound): the planner derives
    # each stage's row from the layer counts; it builds a layout only per distinct stage
    # (first, middle, last), where it built one per stage and summed the layers before each.
    from tmath.layout import Layout

    base = json.loads((Path(__file__).parent / "hf_configs" / "llama3-8b.json").read_text())
    cfg = tmath.ModelConfig.from_hf({**base, "num_hidden_layers": 10_000, "hidden_size": 64,
                                     "intermediate_size": 128, "num_attention_heads": 4,
                                     "num_key_value_heads": 2, "head_dim": 16,
                                     "vocab_size": 1000})
    built = []
    at_stage = Layout.at_stage

    def counting(self, stage):
        built.append(stage)
        return at_stage(self, stage)

    from tmath.plan import build_plan

    with mock.patch.object(Layout, "at_stage", counting):
        p = build_plan(cfg, pp=10_000, dp=100, global_batch=100 * 64)
    assert len(p["memory_by_stage"]) == 10_000 and len(built) <= 10, len(built)
    rows = p["memory_by_stage"]
    assert rows[0]["activations"] == 64 * rows[9_999]["activations"]  # 64 in flight vs 1


@pytest.mark.parametrize("name, kw", [
    ("llama3.1-405b", {"dp": 2, "tp": 8, "pp": 16, "pp_edge_layers": 7, "global_batch": 64,
                       "recompute": "full"}),
    ("deepseek-v2-lite", {"pp": 3, "pp_edge_layers": 10, "global_batch": 2}),  # first layer dense
    ("deepseek-v3", {"pp": 61, "dp": 8, "ep": 8, "global_batch": 8 * 30}),  # 3 dense layers
    ("mixtral-8x7b", {"pp": 4, "dp": 2, "ep": 2, "zero": 3, "global_batch": 6}),
])
def test_memory_by_stage_equals_each_stages_own_layout(name, kw):
    from tmath.plan import _activation_per_layer, build_plan

    p = build_plan(tmath.preset(name), seq_len=4096, **kw)
    lay = build_layout(tmath.preset(name), seq_len=4096,
                       **{k: v for k, v in kw.items() if k != "recompute"},
                       recompute=kw.get("recompute", "none"), param_bytes=2, grad_bytes=2,
                       optimizer_bytes=12)
    act = _activation_per_layer(lay.cfg, lay)
    for s, row in enumerate(p["memory_by_stage"]):
        one = lay.at_stage(s)
        acts = (one.dense_layers * act["dense"] + one.moe_layers * act["moe"]) * one.in_flight
        if one.recompute == "full":
            acts += act["recomputed_layer"]
        assert {k: row[k] for k in ("weights", "grads", "optimizer")} == one.state_bytes, s
        assert row["activations"] == -(-Fraction(acts).numerator // Fraction(acts).denominator)


# --- the fuzz ------------------------------------------------------------------------------------

# Values an integer flag may get: mostly small and plausible, some at or past the bounds,
# some that are not integers at all (argparse's refusal must be Chinese too).
INT_VALUES = (
    [str(v) for v in range(-2, 21)] + ["1", "2", "4", "8"] * 4
    + ["32", "64", "128", "4096", "8192"] * 2
    + [str(v) for v in (10**5, 10**6, 10**6 + 1, 125_000, 3 * 10**7, 10**9, 2**63, 10**23,
                        10**100, -(10**9))]
    + ["1e23", "3e7", "two", "", "3.5", "0x10", " 8", "1_000", "9" * 5000, "nan"])
INT_FLAGS = ["--dp", "--tp", "--pp", "--ep", "--cp", "--micro-batch", "--global-batch",
             "--seq-len", "--stage", "--pp-edge-layers", "--gpus-per-node", "--node-limit",
             "--virtual-stages"]
# the hardware figures a reader may give (floats): plausible, at and past the bounds, and not
# numbers at all
FLOAT_FLAGS = ["--peak-tflops", "--hbm-gb", "--intra-gbs", "--inter-gbs", "--tokens"]
FLOAT_VALUES = ["1", "50", "400", "989.5", "0", "-1", "1e-9", "1e7", "1e30", "nan", "inf",
                "-inf", "x", "", "1e400", "9" * 5000]
CHOICES = {
    "--zero": ["0", "1", "2", "3", "4", "-1", "x"],
    "--recompute": ["none", "selective", "full", "some"],
    "--sequence-parallel": ["on", "off", "yes"],
    "--gpu": ["H100", "h200", "TPUv5e", "V100", "A100", "H800", "B900", "", "A100-40GB", "B200",
              "TPUv4", "v5p", "TPUv6e"],
    "--recipe": ["mixed-adam", "fp32-adam", "sgd", "deepseek-v3-fp8", "scaling-book"],
    "--schedule": ["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb"],
    "--stage-layers": ["1,1", "16*2", "8*4", "2*16", "3,4*14,2", "0,32", "x", "", "1*99999999999",
                       "4*8,", "9" * 5000, "1," * 40000],
}
# One draw per flag: every (flag, value) pair in one list, and None for a slot left empty
# (a later repeat of a flag wins, as argparse has it).
# DeepSeek-V3's switches (flags without a value: a one-element "pair")
SWITCH_FLAGS = ["--recompute-norm-up", "--fp8-activations", "--ep-fp8-dispatch"]
PAIRS = ([(f, v) for f in INT_FLAGS for v in INT_VALUES]
         + [(f, v) for f in FLOAT_FLAGS for v in FLOAT_VALUES] * 2
         + [(f, v) for f, vs in CHOICES.items() for v in vs] * 4
         + [(f,) for f in SWITCH_FLAGS] * 40)
SLOTS = [None] * (len(PAIRS) // 2) + PAIRS
PRESETS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "deepseek-v2-lite", "gpt2",
           "llama3.1-405b", "gemma-2-9b", "qwen3-30b-a3b", "nope"]
SOURCES = [[*src, *j] for src in [["--preset", p] for p in PRESETS] * 3
           + [[], ["/no/such/config.json"], ["/no/such/config.json", "--preset", "gpt2"]]
           for j in ([], ["--json"])]


def _argv(draw: tuple) -> list[str]:
    source, *slots = draw
    return ["plan", *source, *(x for pair in slots if pair is not None for x in pair)]


# six draws an example (a fixed tuple costs hypothesis less than a list)
plan_argvs = st.tuples(st.sampled_from(SOURCES), *[st.sampled_from(SLOTS)] * 5).map(_argv)


def _check_outcome(argv, code, out, err):
    as_json = "--json" in argv
    if code == 0:
        assert err == ""
        if as_json:
            p = json.loads(out)
            s = p["settings"]
            assert p["world_size"] == s["dp"] * s["tp"] * s["pp"] * s["cp"] <= 10**6
            hw = p["hardware"]
            for c in p["collectives"]:  # every label the link its time was computed on
                spans = c["per_node"] < c["group"]
                want = hw["inter_link" if spans else "intra_link"]["name"]
                if "network_bytes_sent" in c:  # node-limited: the network, then the node's link
                    want = f"{hw['inter_link']['name']}+{hw['intra_link']['name']}"
                assert c["link"] == want, c
            assert p["tokens_per_s"] > 0 and p["tokens_per_s_overlap"] >= p["tokens_per_s"]
            if s["tokens"] is not None:
                assert p["gpu_hours"] > 0 and p["days"] > 0
            node = NODES[s["gpu"]]
            for key, base in (("intra_link", node.intra), ("inter_link", node.inter)):
                assert hw[key]["name"].split("@")[0] == base, hw
        else:
            assert out.startswith("部署：")
        return "plan"
    assert code == 2, (code, err[-500:])
    if as_json:
        assert err == ""
        obj = json.loads(out)
        assert set(obj) == {"error", "field"} and isinstance(obj["field"], str) and obj["field"]
        msg = obj["error"]
    else:
        assert out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith("tmath: 错误：")
        msg = err
    assert has_chinese(msg) and "\n" not in msg.strip() and "Traceback" not in msg, msg
    return "error"


@settings(max_examples=2000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plan_argvs)
def test_fuzzed_plan_arguments_give_a_plan_or_one_clean_error(argv):
    with address_space_cap():
        code, out, err = run_main(argv)
    _check_outcome(argv, code, out, err)


def test_the_fuzz_reaches_both_outcomes():
    # The strategy is not vacuous: some argument lists give a plan, some an error.
    outcomes = set()
    for argv in (["plan", *BASE, "--json"], ["plan", *BASE, "--dp", "0", "--json"],
                 ["plan", *BASE, "--tp", "two"]):
        outcomes.add(_check_outcome(argv, *run_main(argv)))
    assert outcomes == {"plan", "error"}


# --- the `tmath` command (item 12) ----------------------------------------------------------------


def subcommands():
    from tmath.cli import _parser

    sub = next(a for a in _parser()._actions if a.dest == "cmd")
    return list(sub.choices)


def test_an_unknown_command_names_every_subcommand():
    names = subcommands()
    assert {"ledger", "plan", "presets", "hardware", "grade"} <= set(names)
    for argv in (["foo"], []):
        code, _, err = run_main(argv)
        assert code == 2 and err.startswith("tmath: 错误：") and len(err.strip().splitlines()) == 1
        assert all(n in err for n in names), (names, err)
    code, out, _ = run_main(["foo", "--json"])
    assert code == 2 and json.loads(out)["field"] == "command"
    assert all(n in json.loads(out)["error"] for n in names)


def test_the_tmath_script_is_installed_and_runs():
    script = Path(sys.executable).parent / "tmath"
    assert script.is_file(), f"{script} 不存在：lib/pyproject.toml 需要 [project.scripts]"
    r = subprocess.run([str(script), "presets"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == tmath.presets(), r.stderr[-500:]
    r = subprocess.run([str(script), "foo"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "plan" in r.stderr

"""`tmath plan`'s smaller faults (issue 32, item 10): a Chinese error for an unknown preset,
``--gpu`` listing only GPUs the planner takes, ``--sequence-parallel on`` refused at tp = 1,
the MFU of a layout that does not fit marked, and each link label the link its time is
computed on.  ``main`` runs in this process.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from unittest import mock

import pytest

from tmath import cli
from tmath.cli import main
from tmath.errors import has_chinese

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


# --- the smaller items -------------------------------------------------------------------------


def test_an_unknown_preset_is_refused_in_chinese():
    code, out, _ = run_main(["plan", "--preset", "gpt-5", "--json"])
    err = json.loads(out)
    assert code == 2 and err["field"] == "preset" and has_chinese(err["error"])
    assert "unknown" not in err["error"] and "llama3-8b" in err["error"]


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

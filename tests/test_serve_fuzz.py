"""``tmath serve`` on absurd input (issue 37): 2,000 generated argument lists, each giving a
deployment or one clean Chinese error, never a traceback, under a cap on the address space
(:func:`test_plan_robust.address_space_cap`); and ``tmath serve`` loads neither SymPy nor
NumPy (it runs in Pyodide).  No test is timed.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_import_cost import loaded_after
from test_plan_robust import _check_outcome as plan_outcome
from test_plan_robust import address_space_cap, run_main

INT_VALUES = (
    [str(v) for v in range(-2, 21)] + ["1", "2", "4", "8"] * 4
    + ["32", "64", "128", "1000", "4096", "8192", "100000"] * 2
    + [str(v) for v in (10**6, 10**6 + 1, 10**7, 10**7 + 1, 10**9, 2**63, 10**23, 10**100,
                        -(10**9))]
    + ["1e23", "two", "", "3.5", "0x10", " 8", "1_000", "9" * 5000, "nan"])
INT_FLAGS = ["--tp", "--prompt-len", "--output-len", "--batch", "--block-size", "--draft-len"]
FLOAT_VALUES = ["0", "0.5", "0.8", "1", "1.5", "-1", "2", "1e-9", "1e4", "1e5", "1e30", "nan",
                "inf", "-inf", "x", "", "1e400", "9" * 5000]
FLOAT_FLAGS = ["--acceptance", "--gpu-hour-price"]
CHOICES = {
    "--weight-dtype": ["bf16", "fp16", "fp8", "int8", "int4", "fp4", "BF16", ""],
    "--kv-dtype": ["bf16", "fp8", "fp16", "int4", ""],
    "--gpu": ["H100", "h200", "TPUv5e", "V100", "A100", "H800", "B900", "", "B200", "TPUv6e"],
    "--draft": ["llama3-8b", "gpt2", "qwen2-7b", "deepseek-v2-lite", "nope", ""],
}
PAIRS = ([(f, v) for f in INT_FLAGS for v in INT_VALUES]
         + [(f, v) for f in FLOAT_FLAGS for v in FLOAT_VALUES] * 3
         + [(f, v) for f, vs in CHOICES.items() for v in vs] * 4
         + [("--draft", "llama3-8b"), ("--draft-len", "4"), ("--acceptance", "0.7")] * 40)
SLOTS = [None] * (len(PAIRS) // 2) + PAIRS
PRESETS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "deepseek-v2-lite", "deepseek-v3", "gpt2",
           "llama3.1-405b", "gemma-2-9b", "mistral-7b", "qwen3-30b-a3b", "gpt-oss-20b", "nope"]
SPEC = [["--preset", t, "--draft", d, "--draft-len", k, "--acceptance", a]
        for t, d in (("llama3-70b", "llama3-8b"), ("llama3.1-405b", "llama3-8b"),
                     ("deepseek-v3", "deepseek-v3"), ("mixtral-8x7b", "mistral-7b"))
        for k, a in (("1", "0"), ("4", "0.7"), ("8", "1"))]
SOURCES = [[*src, *j] for src in [["--preset", p] for p in PRESETS] * 3 + SPEC
           + [[], ["/no/such/config.json"], ["/no/such/config.json", "--preset", "gpt2"]]
           for j in ([], ["--json"])]


def _argv(draw: tuple) -> list[str]:
    source, *slots = draw
    return ["serve", *source, *(x for pair in slots if pair is not None for x in pair)]


serve_argvs = st.tuples(st.sampled_from(SOURCES), *[st.sampled_from(SLOTS)] * 6).map(_argv)


def _check_outcome(argv, code, out, err):
    as_json = "--json" in argv
    if code == 0:
        assert err == ""
        if as_json:
            r = json.loads(out)
            for key in ("ttft_s", "tpot_s", "output_tokens_per_s"):
                assert math.isfinite(r[key]) and r[key] > 0, (key, r[key])
            assert isinstance(r["max_concurrent_sequences"], int)
            assert r["max_concurrent_sequences"] >= 0
            if "speculative" in r:
                assert r["tokens_per_target_step"] >= 1
        else:
            assert out.startswith("部署：") and "Traceback" not in out
            if "部署：不可行" in out:
                assert "只作对照" in out
        return "served"
    return plan_outcome(argv, code, out, err)  # one clean error: the same checks as plan's


@settings(max_examples=2000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(serve_argvs)
def test_fuzzed_serve_arguments_give_a_deployment_or_one_clean_error(argv):
    with address_space_cap():
        code, out, err = run_main(argv)
    _check_outcome(argv, code, out, err)


def test_the_fuzz_reaches_both_outcomes():
    outcomes = set()
    for argv in (["serve", "--preset", "llama3-8b", "--json"],
                 ["serve", "--preset", "llama3-8b", "--tp", "0", "--json"],
                 ["serve", "--preset", "llama3-8b", "--batch", "two"]):
        outcomes.add(_check_outcome(argv, *run_main(argv)))
    assert outcomes == {"served", "error"}


def test_the_serve_command_loads_no_heavy_dependency():
    code = ("import contextlib, io, tmath.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert tmath.cli.main(['serve', '--preset', 'deepseek-v3', '--gpu', 'H800',"
            " '--tp', '8', '--batch', '64', '--draft-len', '2', '--draft', 'deepseek-v3',"
            " '--acceptance', '0.8', '--gpu-hour-price', '2']) == 0\n"
            "from tmath import serve\n"
            "serve.simulate(serve.request_trace(50, 1), step_time=lambda p, d, kv: 1 + p)")
    assert loaded_after(code) == []

"""Benchmark: ``tmath plan`` on the layouts of published runs (target: at most 0.3 s each).

Run: ``.venv/bin/python benchmarks/bench_plan.py [--repeat N]``.
Prints timings only; nothing is asserted (timings are not tests).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import time
import timeit

from tmath.cli import main

RUNS = {
    "deepseek-v3 (report layout, its recipe and techniques)": [
        "--preset", "deepseek-v3", "--gpu", "H800", "--dp", "128", "--pp", "16", "--ep", "64",
        "--zero", "1", "--global-batch", "15360", "--seq-len", "4096", "--stage-layers",
        "3,4*14,2", "--recipe", "deepseek-v3-fp8", "--recompute-norm-up", "--fp8-activations",
        "--ep-fp8-dispatch", "--node-limit", "4", "--tokens", "14.8e12"],
    "llama3.1-405b (Table 4, row 2)": [
        "--preset", "llama3.1-405b", "--dp", "128", "--tp", "8", "--pp", "16", "--zero", "1",
        "--global-batch", "2048", "--seq-len", "8192", "--pp-edge-layers", "7", "--order",
        "llama3", "--tokens", "15.6e12"],
    # the pipeline schedules (closed forms from tmath.schedule, linear in pp)
    "llama3-70b (interleaved 1F1B, V = 5)": [
        "--preset", "llama3-70b", "--dp", "32", "--tp", "8", "--pp", "4", "--global-batch",
        "1024", "--seq-len", "8192", "--schedule", "interleaved", "--virtual-stages", "5"],
    "llama3-8b (ZB-H1, pp = 32)": [
        "--preset", "llama3-8b", "--pp", "32", "--global-batch", "64", "--schedule", "zb-h1"],
}
# DeepSeek-V3's report layout again, with its schedule
RUNS["deepseek-v3 (report layout, DualPipe)"] = [
    *RUNS["deepseek-v3 (report layout, its recipe and techniques)"], "--schedule", "dualpipe"]


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    for name, argv in RUNS.items():
        def once(argv=argv) -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                main(["plan", *argv, "--json"])
        once()  # imports
        t = timeit.timeit(once, number=args.repeat) / args.repeat
        print(f"{name}: in process {1e3 * t:8.1f} ms")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tmath", "plan", *argv], check=True,
                       capture_output=True)
        print(f"{name}: fresh process {1e3 * (time.perf_counter() - start):8.1f} ms (target 300)")


if __name__ == "__main__":
    main_()

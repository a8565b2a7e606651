"""Benchmark: what one gloo process group of tests/test_dist.py costs, and where the time goes.

Run: ``.venv/bin/python benchmarks/bench_dist.py [--world N]``.
Prints timings only; nothing is asserted (timings are not tests).  The issue's budget is
60 s for all of Part V under ``make test``; the helper's import of torch is most of it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tmath import dist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--world", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_dist import SCENARIOS  # the very scenarios the test module runs

    t0 = time.monotonic()
    res = dist.run(SCENARIOS, world=args.world)
    wall = time.monotonic() - t0
    print(f"one process group of {args.world} ranks, {len(SCENARIOS)} scenarios: "
          f"{wall:6.2f} s wall")
    print(f"  helper: import torch, DTensor, FSDP2     {res['startup_seconds']:6.2f} s")
    for sc in res["scenarios"]:
        slowest = max(r["seconds"] for r in sc["ranks"])
        print(f"  {sc['name']:<16} {str(sc['params'].get('sp', '')):<6} {slowest:6.2f} s")


if __name__ == "__main__":
    main()

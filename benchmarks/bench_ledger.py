"""Benchmark: one full ledger, and a NumPy-vectorized FLOPs sweep over sequence lengths.

Run: ``.venv/bin/python benchmarks/bench_ledger.py [--preset NAME] [--repeat N]``.
Prints timings only; nothing is asserted (timings are not tests).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import tmath
from tmath.ledger import build_ledger
from tmath.sweep import flops_vs_seq_len


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="llama3-70b")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    cfg = tmath.preset(args.preset)

    t = timeit.timeit(lambda: build_ledger(cfg, seq_len=4096, batch=1, tp=8), number=args.repeat)
    print(f"{args.preset}: one full ledger             {1e3 * t / args.repeat:9.3f} ms")

    seq = np.arange(1, 131_073)
    t = timeit.timeit(lambda: flops_vs_seq_len(cfg, seq), number=args.repeat)
    print(
        f"{args.preset}: sweep over {seq.size:,} seq lens   "
        f"{1e3 * t / args.repeat:9.3f} ms (float64, vectorized)"
    )

    few = seq[:: seq.size // 64]
    t = timeit.timeit(
        lambda: [tmath.training_flops(cfg, seq_len=int(s), batch=1).total for s in few], number=1
    )
    print(f"{args.preset}: training_flops loop, per call {1e6 * t / few.size:9.3f} us ({few.size} calls)")


if __name__ == "__main__":
    main()

"""Benchmark: peak memory (tracemalloc) and time of naive vs tiled attention.

Usage:  .venv/bin/python benchmarks/bench_attention.py [--max-t 4096] [--block 128]

Prints one row per sequence length T (T = S, one head, head dim H, float64).
Memory is what NumPy allocates during the call; it grows like T^2 for the
naive kernel (the [T, T] score and probability matrices) and like T for the
tiled one (output plus one [block, block] tile).  Times depend on the
machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse

import numpy as np

from tmath.attention import flash_attention, naive_attention, peak_memory_and_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-t", type=int, default=4096, help="largest sequence length")
    parser.add_argument("--block", type=int, default=128, help="block_q = block_k")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'T':>6} {'naive MiB':>10} {'tiled MiB':>10} {'ratio':>7} {'naive s':>9} {'tiled s':>9}")
    T = 256
    while T <= args.max_t:
        q, k, v = (rng.standard_normal((T, args.head_dim)) for _ in range(3))
        mem_n, t_n = peak_memory_and_time(naive_attention, q, k, v, causal=args.causal, repeat=3)
        mem_f, t_f = peak_memory_and_time(flash_attention, q, k, v, causal=args.causal,
                                          block_q=args.block, block_k=args.block, repeat=3)
        print(f"{T:>6} {mem_n / 2**20:>10.2f} {mem_f / 2**20:>10.2f} {mem_n / mem_f:>7.1f} "
              f"{t_n:>9.4f} {t_f:>9.4f}")
        T *= 2


if __name__ == "__main__":
    main()

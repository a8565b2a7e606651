"""Benchmark: what the practice keys' hashes cost a student who checks, and one who guesses.

Run: ``.venv/bin/python benchmarks/bench_kdf.py [--iterations N]``. The course kit and the
website store, for each practice key, a salted PBKDF2-HMAC-SHA256 of the key's grid cell
(``tmath.exercises``). This measures, on one core of this machine, with the kit's own code
(``AnswerKey.digest_of``, hashlib's PBKDF2):

- one hash; an honest check (the answer's cell, then its neighbours nearest first, as many at a
  time as there are cores, until one matches: 1 hash for an answer in the key's cell,
  ``2 × window + 1`` for a wrong one);
- the search a guesser must make, key by key: with no knowledge of the problem, trying the
  grid's cells outward from 1 (integers upward from 0 for a count), one hash per cell, until
  the key's cell; and knowing the order of magnitude (the decade that holds the key).

It prints the time to recover each kind of key and their median ("a typical practice key").
Nothing is asserted: timings are not tests.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import tmath.exercises as ex


def cells_to_search(key: ex.AnswerKey, value: float, decade_known: bool) -> float:
    """Hashes a guesser computes before reaching the key's cell (expected, scanning outward)."""
    if key.count:
        n = abs(round(value))
        if decade_known:  # half the integers of the decade that holds n
            return 9 * 10 ** int(math.log10(n)) / 2 + 1 if n >= 10 else 5
        return n + 1
    if key.abs_tol:
        width = key.abs_tol / ex.GRID_STEPS
        if decade_known and value:
            return 9 * 10 ** math.floor(math.log10(abs(value))) / width / 2 + 1
        return 2 * abs(value) / width + 1
    step = -math.log1p(-key.rel_tol) / ex.GRID_STEPS
    if decade_known:
        return math.log(10) / step / 2 + 1
    return 2 * abs(math.log(abs(value))) / step + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=ex.KDF_ITERATIONS)
    args = ap.parse_args()
    table = ex.hash_table(iterations=args.iterations)
    labels = sorted(table)
    key0 = ex.AnswerKey(labels[0], None, **table[labels[0]])
    t0 = time.perf_counter()
    for i in range(5):
        key0.digest_of(f"+{i}")
    per_hash = (time.perf_counter() - t0) / 5
    print(f"PBKDF2-HMAC-SHA256, {args.iterations:,} iterations: {per_hash * 1e3:.1f} ms a hash "
          "(one core, hashlib)")
    # an exact count (one cell) and a 1 % key (nine cells: the answer's and four on each side)
    rel = next(label for label in labels if ex._KEYS[label].rel_tol == 0.01)
    for label in (labels[0], rel):
        value = float(ex._KEYS[label].compute())
        kit = ex.AnswerKey(label, None, **table[label])
        for what, x in (("right answer", value), ("wrong answer", -value if value else 1.0)):
            t0 = time.perf_counter()
            kit.accepts(x)
            print(f"an honest check, {what} ({label}, {len(kit.candidates(x) or [])} cells, "
                  f"{os.cpu_count()} cores): {time.perf_counter() - t0:.2f} s")
    rows = []
    for label in labels:
        k = ex._KEYS[label]
        v = float(k.compute())
        kind = "count" if k.count else ("abs" if k.abs_tol else f"rel {k.rel_tol:g}")
        rows.append((label, kind, cells_to_search(k, v, False), cells_to_search(k, v, True)))
    print(f"\n{len(rows)} practice keys; time for a guesser to reach each key's cell, one core:")
    for kind in sorted({r[1] for r in rows}):
        mine = [r for r in rows if r[1] == kind]
        blind = statistics.median(r[2] for r in mine) * per_hash
        known = statistics.median(r[3] for r in mine) * per_hash
        print(f"  {kind:<10} {len(mine):>3} keys: median {blind / 3600:10.2f} h blind, "
              f"{known / 60:8.1f} min knowing the decade")
    blind = statistics.median(r[2] for r in rows) * per_hash
    known = statistics.median(r[3] for r in rows) * per_hash
    quick = sum(r[2] * per_hash < 60 for r in rows)
    print(f"a typical practice key (the median): {blind / 3600:.2f} h blind, {known / 60:.1f} min "
          f"knowing the decade (goal: at least an hour); {quick} keys fall within a minute blind "
          "(small counts: 8 GPUs, 2 heads)")


if __name__ == "__main__":
    main()

"""Benchmark: the three waits a reader or maintainer meets, each against its goal.

Run from the repository root, with the venv made (``make .venv/.requirements.stamp``)::

    .venv/bin/python benchmarks/bench_workflow.py            # all three
    .venv/bin/python benchmarks/bench_workflow.py --skip-test  # not the 4-minute one

1. ``make book`` from an empty ``_build`` (venv ready): a copy of the committed tree is
   built with this venv's ``jupyter-book``, strict, as ``make book`` does.
2. ``make test`` on a fresh clone (pip cache warm): ``git clone`` of HEAD, then
   ``make test`` in it, venv creation and installs included (timed as two steps, the venv's
   make target, then ``make test``; the sum and both steps are printed).
3. ``python -m tmath ledger --preset llama3-70b``: the median of several runs.

Each line prints the time, the goal and the ratio. Nothing is asserted: timings are not
tests (the machines are shared and noisy); read them. For the tests, the CPU time they used
and the CPU time the host took for other work meanwhile (``steal``) say how noisy the run was.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

GOALS = {"book": 60.0, "test": 240.0, "ledger": 0.3}


def _steal() -> float | None:
    """Seconds the hypervisor ran something else while this machine's CPUs wanted to run
    (``steal`` in /proc/stat, summed over CPUs), or None where there is no such count."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


#: (wall, CPU of the command's processes, steal) of the last :func:`wall` call.
LAST: dict[str, float | None] = {}


def wall(cmd: list[str], cwd: Path) -> float:
    # As the Makefile does (`unexport PYTHONDONTWRITEBYTECODE`): Python caches what it compiles.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before, steal = resource.getrusage(resource.RUSAGE_CHILDREN), _steal()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after, steal_after = resource.getrusage(resource.RUSAGE_CHILDREN), _steal()
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    LAST.update(wall=elapsed, cpu=after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                steal=None if steal is None else steal_after - steal)
    return elapsed


def clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    return dest


def report(name: str, seconds: float, what: str) -> None:
    goal = GOALS[name]
    verdict = "ok" if seconds <= goal else "OVER"
    print(f"{what:<58} {seconds:8.2f} s   goal {goal:6.1f} s   "
          f"{seconds / goal:5.2f} x goal   {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-test", action="store_true", help="skip the fresh-clone `make test`")
    ap.add_argument("--repeat", type=int, default=7, help="runs of the ledger command")
    args = ap.parse_args()

    runs = [wall([str(BIN / "python"), "-m", "tmath", "ledger", "--preset", "llama3-70b"], ROOT)
            for _ in range(args.repeat)]
    report("ledger", statistics.median(runs),
           f"python -m tmath ledger --preset llama3-70b (median of {args.repeat})")

    with tempfile.TemporaryDirectory() as tmp:
        tree = clone(Path(tmp) / "book")
        # make book's install steps, not timed: the website's runtime (npm ci) and the wheels
        # the venv's make target downloads (copied from this venv).
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=tree, check=True, capture_output=True)
        shutil.copytree(ROOT / ".venv" / "pyodide-wheels", tree / ".venv" / "pyodide-wheels")
        seconds = wall([str(BIN / "jupyter-book"), "build", ".", "-W", "-n", "--keep-going"], tree)
        report("book", seconds, "make book from an empty _build (venv ready)")

    if not args.skip_test:
        with tempfile.TemporaryDirectory() as tmp:
            tree = clone(Path(tmp) / "book")
            # The same `make test`, in two steps, to show where the time goes: the venv
            # (pip looks up every pinned package on the index, over the network) and the rest.
            venv = wall(["make", ".venv/.requirements-crosscheck.stamp"], tree)
            rest = wall(["make", "test"], tree)
            report("test", venv + rest, "make test on a fresh clone (pip cache warm)")
            print(f"  of which the venv and its installs {venv:6.1f} s, the tests {rest:6.1f} s")
            # The suite keeps both cores busy: its wall time follows the CPU time it gets. How
            # much the hypervisor gave to others meanwhile says how loaded the host was.
            steal = "" if LAST["steal"] is None else f", CPU stolen by the host {LAST['steal']:.1f} s"
            print(f"  the tests used {LAST['cpu']:.0f} s of CPU on {os.cpu_count()} cores{steal}")


if __name__ == "__main__":
    main()

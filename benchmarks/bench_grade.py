"""Benchmark: grading a class of 60 on one assignment, and what the grader no longer pays for.

Run from the repository root, once the grading environment is built (``make grading-env``)::

    .venv/bin/python benchmarks/bench_grade.py                 # 60 students, --jobs 2
    .venv/bin/python benchmarks/bench_grade.py --students 10 --jobs 1

1. **A class**: ``--students`` copies of the kit's tour notebook (``notebooks/intro/tour.ipynb``
   of ``_build/student-kit``, released as ``release/tour/``), every answer cell answered with
   the key, graded by ``python -m tmath grade`` with ``--jobs``: the total and the seconds per
   notebook (wall clock; CPU seconds of the grader and its sandboxes beside them).
2. **The kit's check while grading**: one answered notebook run by the grader's worker with the
   kit's Python outside any sandbox, with ``TMATH_GRADING=1`` (as the sandbox sets it: the answer
   cells record without checking) and without it (each answer cell hashes, PBKDF2 at 6,000,000
   iterations: what every notebook cost the grader before).
3. **Reading answers**: :func:`tmath.grade.read_answers` on a notebook of about 12 MiB whose
   answer-tagged Markdown cells ask 60,000 distinct labels (quadratic before: a 3.6 MB notebook
   of many labels took 3 min 48 s). Measured 2026-12-06 on this 2-core machine at a load of
   about 12 (other sessions' work): 0.45 s; one answered tour notebook 19.3 s with
   ``TMATH_GRADING=1`` and 83.6 s with the kit's check; the class of 60 at ``--jobs 2`` 733 s,
   12.2 s per notebook, 60/60 full marks. Again on 2026-12-07, quiet (load about 1), after
   ``make grading-env`` began byte-compiling the kit's venv: 0.08 s; 3.7 s and 12.6 s; the
   class of 60 68.9 s, 1.15 s per notebook, 60/60 full marks. (The CPU seconds printed count
   only the processes the grader's sandboxes waited for: a floor, not the total.)

Nothing is asserted: timings are not tests (the machine is shared); read them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "_build" / "student-kit" / "transformer-math-kit"
sys.path.insert(0, str(ROOT / "lib"))


def _answered(release_nb: Path) -> str:
    """The released tour notebook with every ``my_answer(label, None)`` answered by the key."""
    import tmath.exercises as ex

    text = release_nb.read_text(encoding="utf-8")

    def key(m: re.Match) -> str:
        label = m.group(1)
        value = next(k for k in ex.keys_of(label.split("/")[0]) if k.label == label).compute()
        return f'my_answer(\\"{label}\\", {value!r})'

    return re.sub(r'my_answer\(\\"([^"\\]+)\\", None\)', key, text)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_class(kit_env: Path, students: int, jobs: int, scratch: Path) -> None:
    release = scratch / "release" / "tour"
    release.mkdir(parents=True)
    source = KIT / "notebooks" / "intro" / "tour.ipynb"
    (release / "tour.ipynb").write_bytes(source.read_bytes())
    answered = _answered(source)
    for n in range(students):
        folder = scratch / "submitted" / f"s{n:03d}"
        folder.mkdir(parents=True)
        (folder / "tour.ipynb").write_text(answered, encoding="utf-8")
    out = scratch / "grades" / "grades.csv"
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tmath", "grade", str(scratch / "submitted"), "--release",
                           str(release), "--kit-env", str(kit_env), "--out", str(out), "--jobs", str(jobs)],
                          capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    rows = out.read_text(encoding="utf-8-sig").splitlines()[1:]
    full = sum(1 for r in rows if r.split(",")[1] == "已评分" and r.split(",")[2] == r.split(",")[3])
    print(f"class of {students}, --jobs {jobs}: {elapsed:.1f} s in all, "
          f"{elapsed / students:.2f} s per notebook (CPU {cpu:.0f} s); {full}/{students} rows full marks")


def bench_check(kit_env: Path, scratch: Path) -> None:
    worker = ROOT / "lib" / "tmath" / "_grade_worker.py"
    answered = _answered(KIT / "notebooks" / "intro" / "tour.ipynb").encode()
    for grading in ("1", None):
        env = {k: v for k, v in os.environ.items() if k != "TMATH_GRADING"}
        env.update(PYTHONNOUSERSITE="1", OPENBLAS_NUM_THREADS="1")
        if grading:
            env["TMATH_GRADING"] = grading
        folder = scratch / f"check-{grading}"
        folder.mkdir()
        start = time.perf_counter()
        proc = subprocess.run([str(kit_env / "bin" / "python"), str(worker), "600", "tour.ipynb"],
                              input=answered, capture_output=True, cwd=folder, env=env)
        elapsed = time.perf_counter() - start
        status = json.loads(proc.stdout.partition(b"\n")[0] or b"{}")
        how = "TMATH_GRADING=1 (recorded, not checked)" if grading else "the kit's check (hashing)"
        print(f"one answered tour notebook, {how}: {elapsed:.1f} s ({status.get('status')})")


def bench_read(scratch: Path) -> None:
    import nbformat

    from tmath.grade import read_answers

    cells = [nbformat.v4.new_markdown_cell("答", metadata={"tags": ["answer"], "tmath": {
        "answers": [f"ex-many-{i:05d}/part"]}}) for i in range(60_000)]
    nb = nbformat.v4.new_notebook(cells=cells)
    text = nbformat.writes(nb)
    nb = nbformat.reads(text, as_version=4)
    start = time.perf_counter()
    found = read_answers(nb)
    elapsed = time.perf_counter() - start
    print(f"read_answers on a {len(text) / 2**20:.1f} MiB notebook asking {len(found.asked):,} labels: "
          f"{elapsed:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--kit-env", type=Path, default=ROOT / "_build" / "grading-env")
    parser.add_argument("--skip-class", action="store_true", help="only the check and the reading")
    args = parser.parse_args()
    if not (args.kit_env / "bin" / "python").exists() or not KIT.is_dir():
        raise SystemExit(f"{args.kit_env} or {KIT} is missing: run make grading-env first")
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as scratch:
        bench_read(Path(scratch))
        bench_check(args.kit_env, Path(scratch))
        if not args.skip_class:
            bench_class(args.kit_env, args.students, args.jobs, Path(scratch))


if __name__ == "__main__":
    main()

"""The course kit (``make student-kit``) and the teacher's grader (``python -m tmath grade``).

The kit is built into a temporary folder and installed into a fresh venv with only
its wheel and its pinned requirements (``pip install --no-deps``, from pip's cache;
``pip check`` proves the pins closed);
every student notebook runs there, two at a time, except the ones that need PyTorch,
which are listed by the same rule the setup cells use (``setup_cells.needs_torch``)
and named in the kit's README: installing the CPU build of torch and transformers
into the venv would cost more than the rest of the test, and the full edition's
tests run those notebooks with torch.  Then the kit is scanned, wheel unzipped, for
any sentence of any solution and for any key value, and the same scans are shown to
find them in the full edition; the kit's ``tmath.check`` is run on every key, right
and wrong answers.  The grader turns two fake submissions (the README's worked
example) into a ``grades.csv`` written here by hand.

What mostly waits starts with the module and runs behind the tests that need none of it
(:func:`_start_the_slow_work`): the venv's install, then the grading runs, which run the
submissions in that venv (the keyless kit), each notebook in a sandbox of its own. One of them
grades a class with nine hostile submissions beside two honest ones
(``tests/hostile_notebooks.py``).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

import nbformat
import pytest

import hostile_notebooks
from conftest import ROOT
from test_student_edition import CHAPTERS, _sentences, served_text

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import student_kit  # noqa: E402  (scripts/, on the path through conftest)
from student_edition import solution_texts, strip_notebook  # noqa: E402

from setup_cells import needs_torch  # noqa: E402

FULL_NOTEBOOKS = [ROOT / f"{p}.ipynb" for p in student_kit.toc_pages() if (ROOT / f"{p}.ipynb").is_file()]


# --- building and installing the kit --------------------------------------------------------------


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    return student_kit.build_kit(tmp_path_factory.mktemp("kit"))


def _clean_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PYTHONNOUSERSITE="1", OPENBLAS_NUM_THREADS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.update(extra or {})
    return env


def _pip(python: Path) -> list[str]:
    """pip acting on the venv of ``python`` (which has no pip of its own)."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


#: Where the kit venv goes when the machine has a RAM disk that may hold programs.
RAM_DISK = Path("/dev/shm")
RAM_PREFIX = "tmath-kit-venv-"


def _venv_home(tmp_path_factory) -> tuple[Path, bool]:
    """(a new empty folder for the kit venv, whether it is on the RAM disk).

    The venv is 22,000 files, half a gigabyte. On a RAM disk pip writes them in about half
    the CPU time, and deleting them takes a third of a second; on an ext4 disk mounted with
    ``discard`` deleting them took 45 s, paid by a later pytest session when it prunes old
    temporary folders. The venv is as fresh either way: only where its files live differs.
    """
    try:
        fs = os.statvfs(RAM_DISK)
        usable = (not fs.f_flag & os.ST_NOEXEC and fs.f_bavail * fs.f_frsize > 4 * 2**30
                  and os.access(RAM_DISK, os.W_OK))
    except OSError:
        usable = False
    if not usable:
        return tmp_path_factory.mktemp("kit-venv"), False
    for stale in RAM_DISK.glob(f"{RAM_PREFIX}*-*"):  # left by a session that was killed
        pid = stale.name.removeprefix(RAM_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{RAM_PREFIX}{os.getpid()}-", dir=RAM_DISK)), True


class _VenvInstall:
    """The kit venv, its install started now in a process of its own and waited for later.

    The venv is made without pip (ensurepip would install and byte-compile a pip of its own,
    seconds of the fixture): the venv's uv installs into it as the Makefile installs the book's
    (this process's pip where there is no uv: the same files; pip took 9 s, uv takes 3), and
    this process's pip checks it; nothing but the kit's pins and wheel is in it, not even pip."""

    def __init__(self, kit: Path, tmp_path_factory):
        self.home, self.in_ram = _venv_home(tmp_path_factory)
        venv = self.home / "venv"
        self.python = venv / "bin" / "python"
        self.start = time.monotonic()
        self._lock, self._waited = threading.Lock(), False
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        files = ["-r", str(kit / "requirements.txt"), str(next(kit.glob("tmath-*.whl")))]
        uv = Path(sys.executable).with_name("uv")  # the Makefile's installer: the same files, faster
        if uv.exists():
            import uv_sources

            install = [str(uv), "pip", "install", "--quiet", "--no-deps", "--python", str(self.python),
                       "--index-strategy", "unsafe-best-match", *uv_sources.uv_flags(uv_sources.pip_config(
                           sys.executable)), *files]
        else:
            install = [*_pip(self.python), "install", "--quiet", "--no-deps", "--no-compile", *files]
        self.proc = subprocess.Popen(
            install,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_clean_env(),
            start_new_session=True,
        )

    def wait(self) -> Path:
        """The venv's Python, once installed (from any thread: the grading runs wait too)."""
        with self._lock:
            if not self._waited:
                _, self.err = self.proc.communicate(timeout=1800)
                self._waited = True
                print(f"\nkit venv installed in {time.monotonic() - self.start:.0f} s "
                      f"({self.python.parents[1]})")
        assert self.proc.returncode == 0, self.err[-5000:]
        return self.python

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()
        if self.in_ram:  # half a gigabyte of memory: give it back now
            shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture(scope="module")
def kit_install(kit, tmp_path_factory):
    install = _VenvInstall(kit, tmp_path_factory)
    yield install
    install.close()


@pytest.fixture(scope="module")
def kit_python(kit_install) -> Path:
    """A fresh venv holding only the kit's wheel and its pinned requirements."""
    return kit_install.wait()


@pytest.fixture(scope="module", autouse=True)
def _start_the_slow_work(request):
    """At the module's start, start what mostly waits, for the tests this session runs: the
    kit's build and its venv's install (the package index answering), then the grading runs
    (kernels starting, notebooks timing out), each in a thread that waits for the venv. The
    tests that need neither run meanwhile; the file puts the tests that need the installed kit
    after them, and the grading tests last."""
    here = request.module
    selected = [item for item in request.session.items if getattr(item, "module", None) is here]
    if any("kit_python" in item.fixturenames or item.name in GRADING_RUNS for item in selected):
        request.getfixturevalue("kit_install")
    if any(item.name in GRADING_RUNS for item in selected):
        request.getfixturevalue("grading")


def test_make_student_kit_writes_a_folder_and_its_zip(kit):
    assert kit.name == student_kit.KIT_NAME
    files = sorted(str(p.relative_to(kit)) for p in kit.rglob("*") if p.is_file())
    assert {"README.md", "requirements.txt"} <= set(files)
    assert len([f for f in files if f.endswith(".whl")]) == 1
    notebooks = [f for f in files if f.endswith(".ipynb")]
    assert sorted(notebooks) == sorted(f"notebooks/{p.relative_to(ROOT / 'book')}" for p in FULL_NOTEBOOKS)
    with zipfile.ZipFile(kit.parent / f"{student_kit.KIT_NAME}.zip") as z:
        assert sorted(z.namelist()) == sorted(f"{kit.name}/{f}" for f in files)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^student-kit:.*\n\t\$\(BIN\)/python scripts/student_kit.py _build/student-kit( \\)?$",
                     makefile, re.M)


# --- nothing in the kit is a solution or a key -----------------------------------------------------


def _full_labels() -> list[str]:
    from tmath.exercises import labels

    return labels()


@functools.cache
def _full_edition_texts() -> tuple[list[str], list[str]]:
    """(kept, removed) texts of the whole full edition (computed once per session: read-only).

    The kept texts include the student edition's prose as the website prints it (glue
    resolved, ``scripts/lab_notebooks.py``): a number glued with ``:.4f`` is printed as 1.0274
    while its record holds 1.02744098227, and the kit's notebooks print it as the website does."""
    import lab_notebooks

    book = lab_notebooks.Book.load()
    kept, removed = [], []
    for path in FULL_NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        k, r = solution_texts(nb)
        page = str(path.relative_to(ROOT).with_suffix(""))
        printed = lab_notebooks.convert(strip_notebook(nb), page, book, student=True)
        kept += k + [c.source for c in printed.cells if c.cell_type == "markdown"]
        removed += r
    return kept, removed


@functools.cache
def solution_sentences() -> frozenset[str]:
    """Sentences (``_sentences``, as the student site's scan) that only the solutions hold."""
    kept, removed = _full_edition_texts()
    outside = _sentences(kept)
    return frozenset(s for s in _sentences(removed) if not any(s in o for o in outside))


def kit_texts(kit: Path, scratch: Path) -> dict[str, str]:
    """Every file of the kit (folder and zip) as text, the wheel's members included."""
    texts = {}
    for path in sorted(kit.parent.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(kit.parent))
        if path.suffix not in (".whl", ".zip"):
            texts[rel] = served_text(path)
            continue
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                data = z.read(name)
                if name.endswith((".whl", ".zip")):  # the wheel inside the zip
                    inner = scratch / f"{len(texts)}-{Path(name).name}"
                    inner.write_bytes(data)
                    with zipfile.ZipFile(inner) as w:
                        texts.update({f"{rel}:{name}:{n}": w.read(n).decode("utf-8", errors="replace")
                                      for n in w.namelist()})
                elif name.endswith(".ipynb"):
                    copy = scratch / f"{len(texts)}.ipynb"
                    copy.write_bytes(data)
                    texts[f"{rel}:{name}"] = served_text(copy)
                else:
                    texts[f"{rel}:{name}"] = data.decode("utf-8", errors="replace")
    return texts


@pytest.fixture(scope="module")
def kit_text(kit, tmp_path_factory) -> dict[str, str]:
    """:func:`kit_texts` of the module's kit, read once for both scans."""
    return kit_texts(kit, tmp_path_factory.mktemp("kit-texts"))


def test_kit_holds_no_solution_text_and_the_scan_finds_it_in_the_full_edition(kit_text):
    secrets = solution_sentences()
    assert len(secrets) > 100, "expected many solution sentences in the full edition"
    served = {p.name: served_text(p) for p in FULL_NOTEBOOKS}  # each notebook read once
    found_in_full = {name for name, text in served.items() if any(s in text for s in secrets)}
    assert len(found_in_full) >= len(CHAPTERS), f"the scan sees solutions in only {found_in_full}"
    texts = kit_text
    assert sum(k.endswith(".ipynb") for k in texts) == 2 * len(FULL_NOTEBOOKS), "folder and zip"
    assert sum(k.endswith(".whl:tmath/exercises.py") for k in texts) == 2, "wheel in folder and zip"
    leaks = {name: hits[:2] for name, text in texts.items() if (hits := [s for s in secrets if s in text])}
    assert not leaks, f"solution text in the kit: {leaks}"
    markers = [n for n, t in texts.items() if re.search(r"solution-(start|end)|\{solution\}", t)]
    assert not markers, f"solution markers in the kit: {markers}"


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _significant(form: str) -> int:
    mantissa = re.split(r"e|×", form)[0]
    digits = re.sub(r"[^0-9]", "", mantissa).lstrip("0")
    return len(digits.rstrip("0")) if "." in mantissa else len(digits)


def written_forms(value: float) -> set[str]:
    """How a student would see ``value`` written: 125226240, 125,226,240, 1.252e+08, 1.25226e8,
    1.252 × 10⁸ (the book's), 32.08, ... with at least 4 significant digits (shorter numbers
    such as 8 or 108 occur everywhere in a book about sizes and say nothing)."""
    from tmath import fmt

    v = float(value)
    forms = set()
    if v.is_integer() and abs(v) < 1e16:
        forms |= {str(int(v)), f"{int(v):,}"}
    for digits in range(4, 10):
        forms.add(f"{v:.{digits}g}")
        mantissa, exponent = f"{v:.{digits - 1}e}".split("e")
        e = int(exponent)
        forms |= {f"{mantissa}e{exponent}", f"{mantissa}e{e}",
                  f"{mantissa} × 10{str(e).translate(_SUPERSCRIPT)}"}
    forms.add(fmt.num(v))
    return {f for f in forms if _significant(f) >= 4}


def _pattern(*forms: str) -> re.Pattern:
    """Any of ``forms`` standing as a number of its own (not inside 132.08 or a hex digest).

    The lookahead on the forms' first characters changes no match (every alternative starts
    with one of them); it only spares the regex engine trying thousands of alternatives at
    each of the millions of positions that hold no digit."""
    alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    first = "".join(sorted({re.escape(f[0]) for f in forms}))
    return re.compile(r"(?<![\w.,])(?=[" + first + r"])(" + alternatives + r")(?![\w]|[.,]\d)")


class _Scanner:
    """Finds the written forms of keys in texts: the regex is built once, for every text."""

    def __init__(self, forms: dict[str, set[str]]):
        self.owners: dict[str, list[str]] = {}
        for label, fs in forms.items():
            for f in fs:
                self.owners.setdefault(f, []).append(label)
        self.pattern = _pattern(*self.owners) if self.owners else None

    def __call__(self, text: str) -> dict[str, set[str]]:
        """{label: the forms of its key that ``text`` holds}, in one pass over ``text``."""
        hits: dict[str, set[str]] = {}
        if self.pattern is None:
            return hits
        for m in self.pattern.finditer(text):
            for label in self.owners[m.group(1)]:
                hits.setdefault(label, set()).add(m.group(1))
        return hits


def _found(forms: dict[str, set[str]], text: str) -> dict[str, set[str]]:
    """{label: the forms of its key that ``text`` holds}, in one pass over ``text``."""
    return _Scanner(forms)(text)


@functools.cache
def _key_forms() -> dict[str, frozenset[str]]:
    """Every key's written forms (computed once per session: keys are pure functions)."""
    import tmath.exercises as ex

    _full_labels()
    return {label: frozenset(written_forms(key.compute())) for label, key in ex._KEYS.items()}


def test_written_forms_of_a_key():
    forms = written_forms(125226240)
    assert {"125226240", "125,226,240", "1.252e+08", "1.25226e+08", "1.2523e8", "1.252 × 10⁸"} <= forms
    assert "32.08" in written_forms(32.07813314525774) and "8" not in written_forms(8.0)
    assert _pattern("32.08").search("占 32.08%") and not _pattern("32.08").search("132.08")
    assert not _pattern("125226240").search("a125226240b") and not _pattern("32.08").search("32.081")
    assert _found({"ex-a": {"32.08"}, "ex-b": {"125,226,240"}}, "共 125,226,240 个，占 32.08%") == {
        "ex-a": {"32.08"}, "ex-b": {"125,226,240"}}


def test_kit_holds_no_key_value_and_the_scan_finds_them_in_the_full_edition(kit_text):
    kept, removed = _full_edition_texts()
    forms = _key_forms()
    # A value the book prints outside any solution, in any form, is public anyway (a table, a
    # prose figure): the kit cannot leak it, and "40960" in Qwen3's preset is the same number.
    # A value with no form of 4 significant digits (8, 108, 2.0) is not searched: such short
    # numbers are everywhere. Every other key value must not be in the kit.
    shown = _found(forms, "\n".join(kept))
    secret = {label: fs for label, fs in forms.items() if fs and label not in shown}
    print(f"\n{len(secret)} key values scanned; printed outside solutions in the full edition: "
          f"{ {k: sorted(v) for k, v in sorted(shown.items())} }; "
          f"too short to scan: {sorted(k for k, fs in forms.items() if not fs)}")
    scan = _Scanner(secret)
    in_solutions = scan("\n".join(removed))
    assert len(in_solutions) >= 40, f"the scan finds only {len(in_solutions)} key values in the solutions"
    leaks = {name: sorted(f"{k}={v}" for k, vs in hits.items() for v in vs)[:3]
             for name, text in kit_text.items() if (hits := scan(text))}
    assert not leaks, f"key values in the kit: {leaks}"


# --- the kit installed: its pins, its tmath, and its check ------------------------------------------


def test_kit_pins_what_the_notebooks_need_and_nothing_for_building_the_book(kit, kit_python):
    pins = [line for line in (kit / "requirements.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    names = {line.split("==")[0] for line in pins}
    assert all("==" in line for line in pins)
    assert {"numpy", "sympy", "matplotlib", "mplfonts", "ipywidgets", "jupyterlab", "ipykernel"} <= names
    # the kit's notebooks have their glue resolved (scripts/lab_notebooks.py): no myst-nb, no Sphinx
    assert not names & {"jupyter-book", "playwright", "torch", "transformers", "pytest", "nbval", "ruff",
                        "sphinx-book-theme", "pypdf", "hypothesis", "myst-nb", "sphinx", "sqlalchemy"}
    check = subprocess.run([*_pip(kit_python), "check"], capture_output=True, text=True, env=_clean_env())
    assert check.returncode == 0, f"the pinned set is not closed:\n{check.stdout}"


def test_the_kit_tmath_is_the_wheel_without_keys(kit, kit_python):
    probe = subprocess.run(
        [str(kit_python), "-c",
         "import importlib.util, tmath, tmath.exercises as e\n"
         "print(tmath.__file__)\n"
         "print(importlib.util.find_spec('tmath.answer_keys'))\n"
         "print(e.has_keys(), len(e.labels()), {k.compute for k in e._KEYS.values()})"],
        capture_output=True, text=True, cwd=kit, env=_clean_env(),
    )
    assert probe.returncode == 0, probe.stderr
    where, spec, keys = probe.stdout.splitlines()
    assert str(kit_python.parents[1]) in where, "the kit venv imports its own tmath"
    assert spec == "None" and keys == f"False {len(_full_labels())} {{None}}"
    with zipfile.ZipFile(next(kit.glob("tmath-*.whl"))) as z:
        names = z.namelist()
    assert "tmath/_answer_hashes.py" in names and "tmath/exercises.py" in names
    assert not [n for n in names if "answer_keys" in n]
    # The full edition's library does carry the keys, one call away.
    assert (ROOT / "lib" / "tmath" / "answer_keys" / "tour.py").is_file()
    import tmath.exercises

    assert tmath.exercises._KEYS["ex-tour-1"].compute() == 85056000


def test_kit_cannot_grade(kit, kit_python, tmp_path):
    (tmp_path / "in").mkdir()
    proc = subprocess.run([str(kit_python), "-m", "tmath", "grade", str(tmp_path / "in"), "--out",
                           str(tmp_path / "g.csv"), "--release", str(kit / "notebooks"), "--kit-env",
                           str(kit_python.parents[1])], capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 2 and "课程包版" in proc.stderr and not (tmp_path / "g.csv").exists()


# --- every student notebook runs in the kit's venv -------------------------------------------------

def test_every_student_notebook_runs_in_the_kit_venv(kit, kit_python, tmp_path):
    """Every student notebook, every cell in order, with the kit venv's Python: the kit's
    wheel and pinned requirements are all it needs.  tests/warm_runner.py gives each notebook
    a fresh IPython shell (forked from one process of that Python that has imported NumPy,
    SymPy, matplotlib and tmath once), so the test pays for the notebooks, not for starting
    eighteen kernels."""
    notebooks = sorted((kit / "notebooks").rglob("*.ipynb"))
    torch = [p for p in notebooks if needs_torch(nbformat.read(p, as_version=4))]
    readme = (kit / "README.md").read_text(encoding="utf-8")
    # Excluded, and said so: these install torch and transformers on first run (README).
    assert {str(p.relative_to(kit)) for p in torch} == set(re.findall(r"`(notebooks/[^`]+\.ipynb)`", readme))
    run = [p for p in notebooks if p not in torch]
    assert len(run) == len(notebooks) - len(torch) >= 18
    env = _clean_env({"MPLBACKEND": "Agg", "PATH": f"{kit_python.parent}:{os.environ['PATH']}"})
    start = time.monotonic()
    proc = subprocess.run(
        [str(kit_python), str(ROOT / "tests" / "warm_runner.py"), "--mode", "all", "--jobs", "2",
         *map(str, run)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    print(f"\n{len(run)} student notebooks in the kit venv: {time.monotonic() - start:.0f} s wall")
    for r in results:
        print(f"  {Path(r['path']).relative_to(kit)}: {r['seconds']:.0f} s")
    assert len(results) == len(run), proc.stderr[-3000:]
    failed = {str(Path(r["path"]).relative_to(kit)): r["error"] for r in results if not r["ok"]}
    assert not failed, f"student notebooks that fail in the kit's venv: {failed}"
    # The answer cells hold the kit's recording call, and it speaks: not answered yet.
    tour = nbformat.read(kit / "notebooks" / "intro" / "tour.ipynb", as_version=4)
    answers = [c.source for c in tour.cells if "answer" in c.metadata.get("tags", [])]
    assert answers and all("my_answer(" in a for a in answers)
    said = subprocess.run(
        [str(kit_python), "-c", "from tmath.exercises import my_answer\n"
         "print(repr(my_answer('ex-tour-1', None)))"],
        capture_output=True, text=True, env=_clean_env(), cwd=tmp_path,
    )
    assert said.returncode == 0 and "尚未作答" in said.stdout, said.stderr


# --- the kit's tmath.check tells right from wrong without the keys ---------------------------------


def _answers_both_ways() -> list[tuple[str, float, bool]]:
    """(label, value, right?) for every key: the hand-calculated key and points inside the
    tolerance are right; beyond 1.25 times the tolerance, off by one, or half a count, wrong."""
    import tmath.exercises as ex

    cases = []
    for label in _full_labels():
        key = ex._KEYS[label]
        e = float(key.compute())
        cases.append((label, key.hand_value(e), True))
        if key.count:
            slack = int(key.abs_tol)
            cases += [(label, e + slack, True), (label, e - slack - 1, False), (label, e + slack + 1, False),
                      (label, e + 0.5, False)]
        else:
            span = key.abs_tol or abs(e) * key.rel_tol
            cases += [(label, e + 0.9 * span, True), (label, e - 0.9 * span, True),
                      (label, e + 1.3 * span, False), (label, e - 1.3 * span, False),
                      (label, -e or 1.0, False)]
    return cases


def test_kit_check_tells_right_from_wrong_on_every_key(kit, kit_python):
    import tmath

    cases = _answers_both_ways()
    script = ("import json, sys, tmath\n"
              "cases = json.load(sys.stdin)\n"
              "said = [tmath.check(v, label) for label, v, _ in cases]\n"
              "print(json.dumps([[s.correct, repr(s)] for s in said]))\n")
    proc = subprocess.run([str(kit_python), "-c", script], input=json.dumps(cases), capture_output=True,
                          text=True, env=_clean_env(), cwd=kit)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout)
    wrong = [(label, v, right, said) for (label, v, right), (ok, said) in zip(cases, verdicts, strict=True)
             if ok != right]
    assert not wrong, f"the kit's check misjudges: {wrong[:10]}"
    # the same verdicts as the full edition's check, word for word
    full = [repr(tmath.check(v, label)) for label, v, _ in cases]
    assert [said for _, said in verdicts] == full
    labels_checked = {label for label, _, _ in cases}
    assert len(labels_checked) >= 20 and {r for *_, r in cases} == {True, False}
    assert any("答案是个数，应为整数" in said for _, said in verdicts)


# --- grading: the README's worked example -----------------------------------------------------------

TOUR_KEYS = {"ex-tour-1": 2, "ex-tour-2": 1, "ex-tour-3": 2, "ex-tour-4": 1, "ex-tour-5": 1}


def _chapter() -> nbformat.NotebookNode:
    """A small chapter with the tour's five exercises, solutions included (as the book writes them)."""
    cells = [nbformat.v4.new_markdown_cell("# 导览：练习"), nbformat.v4.new_code_cell("import math")]
    for label in TOUR_KEYS:
        cells.append(nbformat.v4.new_markdown_cell(
            f"```{{exercise-start}}\n:label: {label}\n```\n题目 {label}。\n```{{exercise-end}}\n```\n\n"
            f"```{{solution-start}} {label}\n:class: dropdown\n```\n解答。\n```{{solution-end}}\n```"))
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "student-env", "display_name": "学生的环境", "language": "python"}
    return nb


def _submission(answers: dict[str, str], scratch: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The student notebook of :func:`_chapter`, its answer cells filled in as a student would."""
    nb = strip_notebook(_chapter())
    cells = []
    for cell in nb.cells:
        if "answer" in cell.metadata.get("tags", []):
            exercise = cell.metadata["tmath"]["exercise"]
            if scratch and exercise in scratch:
                cells.append(nbformat.v4.new_code_cell(scratch[exercise]))
            for label, value in answers.items():
                blank, filled = f'my_answer("{label}", None)', f'my_answer("{label}", {value})'
                cell.source = cell.source.replace(blank, filled)
        cells.append(cell)
    nb.cells = cells
    return nb


def _readme_answers() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """{student: (answers, scratch cells)} as the README's worked example writes them: the
    ``my_answer`` lines of its first Python block after "**Worked example**", by student
    (``# alice/tour.ipynb: ...``), and a scratch cell placed before the answer cell its comment
    names. The test grades what the README says, not a copy of it (the README's Bob, who left
    no word of ex-tour-5, scored 4/7 for a reader; the table said 3/7)."""
    readme = (ROOT / "book" / "guides" / "teachers.md").read_text(encoding="utf-8")
    block = re.search(r"\*\*完整的例子\*\*.*?```python\n(.*?)```", readme, re.S).group(1)
    found: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for line in block.splitlines():
        if head := re.fullmatch(r"# (\w+)/tour\.ipynb: .*", line):
            answers, scratch = found.setdefault(head.group(1), ({}, {}))
        elif mine := re.fullmatch(r'my_answer\("([^"]+)", (.+)\)', line):
            answers[mine.group(1)] = mine.group(2)
        else:
            code, before = re.fullmatch(r"(.+?)  # .*answer cell of (ex-[\w-]+)", line).groups()
            scratch[before] = code
    return found


README_ANSWERS = _readme_answers()
ALICE, _ = README_ANSWERS["alice"]  # partly right: ex-tour-4 is the classic 4, ex-tour-5 left blank
BOB, BOB_SCRATCH = README_ANSWERS["bob"]  # a name never defined, a scratch cell divides by zero
DAN, _ = README_ANSWERS["dan"]  # two answers, both right

EXPECTED_GRADES = """\
学生,状态,得分,满分,ex-tour-1,ex-tour-1/share,ex-tour-2,ex-tour-3/extra,ex-tour-3/share,ex-tour-4,ex-tour-5
alice,已评分,5,7,1,1,1,1,1,0,
bob,执行出错：tour.ipynb 第 4 个单元格 NameError: name 'n_params' is not defined（另有 1 个单元格出错），\
其余单元格照常运行，读到的答案照常计分,3,7,,,0,1,1,1,
chen,已评分,7,7,1,1,1,1,1,1,1
dan,已评分,2,7,,,1,,,,1
eve,执行出错：tour.ipynb 第 13 个单元格 ModuleNotFoundError: No module named 'tmath.answer_keys'，\
其余单元格照常运行，读到的答案照常计分,0,7,,,,,,,
"""


def _grade(submissions: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tmath", "grade", str(submissions), "--out", str(out), *extra],
        capture_output=True, text=True, timeout=900,
    )


def _release(folder: Path) -> Path:
    """nbgrader's ``release/<assignment>/``: the tour chapter's student notebook, as handed out."""
    release = folder / "release" / "week1"
    release.mkdir(parents=True)
    nbformat.write(strip_notebook(_chapter()), release / "tour.ipynb")
    return release


class _GradingRun:
    """``python -m tmath grade ... --kit-env KIT_VENV`` started, in a process of its own, by a
    thread that waits for the kit venv's install first; waited for later."""

    def __init__(self, folder: Path, *args: str, env: dict | None = None):
        self.folder, self.args, self.env = folder, args, env
        self.proc: subprocess.Popen | None = None
        self.started = threading.Event()

    def start(self, install: _VenvInstall) -> None:
        def run():
            try:
                venv = install.wait().parents[1]
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "tmath", "grade", *self.args, "--kit-env", str(venv)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                    env=None if self.env is None else {**os.environ, **self.env})
            finally:
                self.started.set()

        threading.Thread(target=run, daemon=True).start()

    def wait(self) -> subprocess.CompletedProcess:
        assert self.started.wait(timeout=1800) and self.proc is not None, "the kit venv was not installed"
        out, err = self.proc.communicate(timeout=900)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:  # its test did not run to the end
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


def _chen() -> nbformat.NotebookNode:
    """Every answer right, and one more answer cell of his own that asks every exercise of the
    book: without a release fixing the assignment, it made the maximum 167 for the class."""
    from tmath.exercises import labels

    nb = _submission(_right_answers())
    extra = nbformat.v4.new_code_cell('from tmath.exercises import my_answer\nmy_answer("ex-arch-2", 1)')
    extra.metadata.update(tags=["answer"], tmath={"exercise": "ex-arch-2", "answers": labels()})
    nb.cells.append(extra)
    return nb


def _eve(marker: str) -> nbformat.NotebookNode:
    """Her last answer cell imports the answer keys and answers every exercise with them; a
    cell before her first looks for the grader's folder, to copy alice's answers and blank bob's
    file."""
    find = hostile_notebooks.FIND.format(marker=marker)
    attack = find + hostile_notebooks.CLASSMATE.format(victim="alice", blanked="bob")
    nb = hostile_notebooks.place(_submission(hostile_notebooks.STOLEN), attack, in_answer_cell=False)
    return hostile_notebooks.place(nb, hostile_notebooks.KEYS, in_answer_cell=True)


def _grade_worked_example(folder: Path) -> _GradingRun:
    """Five students: alice partly right, bob's notebook crashes, chen all right with an answer
    cell of his own, dan answers two, eve attacks: the README's example."""
    marker = f"tmath-worked-example-{uuid.uuid4().hex[:12]}"
    here = folder / marker
    submitted = here / "submitted"
    students = {"alice": _submission(ALICE), "bob": _submission(BOB, BOB_SCRATCH), "chen": _chen(),
                "dan": _submission(DAN), "eve": _eve(marker)}
    for student, nb in students.items():
        (submitted / student).mkdir(parents=True)
        nbformat.write(nb, submitted / student / "tour.ipynb")
    run = _GradingRun(here, str(submitted), "--out", str(here / "grades" / "grades.csv"), "--jobs", "2",
                      "--release", str(_release(here)))
    run.bob = (submitted / "bob" / "tour.ipynb").read_bytes()
    return run


#: dave's notebook never ends: a cell that sleeps forever (sleeping, not spinning, so that the
#: seconds it waits cost no CPU: the rest of the module runs meanwhile) and ignores the interrupt
#: at the cell's time limit, so the notebook's budget runs out.
FOREVER = hostile_notebooks.STUBBORN
#: The per-cell limit of that run: ivy's infinite loop is stopped after it, and her later
#: answers count.
CELL_TIMEOUT = 5
#: The grading timeout (for the cells: the kernel's start is not counted, ``tmath.grade``'s
#: KERNEL_START_SECONDS). frank's notebook, which must finish within it, took 5.5 s from its
#: kernel's start to its last answer on a quiet machine and up to 10.5 s on a loaded one (SymPy
#: imported for ex-tour-4's key): a timeout of a few seconds would time frank out too. The run
#: goes on behind the other tests, so a generous limit costs nothing.
TIMEOUT = 30


def _grade_a_timeout_a_non_notebook_and_an_empty_folder(folder: Path) -> _GradingRun:
    submitted = folder / "submitted"
    submitted.mkdir()
    (submitted / "carol.ipynb").write_text("这不是笔记本", encoding="utf-8")
    nbformat.write(_submission({}, {"ex-tour-2": FOREVER}), submitted / "dave.ipynb")
    ivy = _submission(_right_answers(), {"ex-tour-2": hostile_notebooks.SPIN})
    nbformat.write(ivy, submitted / "ivy.ipynb")
    (submitted / "erin").mkdir()
    (submitted / "erin" / "作业.pdf").write_bytes(b"%PDF-1.4")
    with zipfile.ZipFile(submitted / "frank.zip", "w") as z:  # otter-grader's way of handing in
        z.writestr("week1/tour.ipynb", nbformat.writes(_submission(ALICE)))
    (submitted / ".DS_Store").write_bytes(b"\0")
    return _GradingRun(folder, str(submitted), "--out", str(folder / "grades.csv"), "--timeout", str(TIMEOUT),
                       "--cell-timeout", str(CELL_TIMEOUT), "--jobs", "2", "--release", str(_release(folder)))


def _right_answers() -> dict[str, str]:
    """Every tour answer, right (the keys themselves)."""
    import tmath.exercises as ex

    return {k.label: repr(k.compute()) for exercise in TOUR_KEYS for k in ex.keys_of(exercise)}


#: The hostile run's timeout: two of its notebooks (the fork bomb, the infinite loop) run until it,
#: and the honest ones' cells (1.3 s alone) must end within it on a loaded machine.
HOSTILE_TIMEOUT = 15
#: The hostile run's memory per sandbox (``--memory``): h13-hog's four processes hold 2.4 GiB
#: without it.
HOSTILE_MEMORY_GIB = 1.5
#: In the hostile run's environment (the teacher's): no notebook may read it.
TEACHER_TOKEN = "teacher-token-3c9e1f"


def _grade_a_class_with_hostile_submissions(folder: Path) -> _GradingRun:
    """grace and heidi, every answer right, and nine students whose notebooks attack
    (:func:`hostile_notebooks.cases`), aimed at this run alone (its folder's unique name):
    one grading run, two at a time, :data:`HOSTILE_TIMEOUT` seconds each."""
    marker = f"tmath-hostile-suite-{uuid.uuid4().hex[:12]}"
    here = folder / marker
    submitted = here / "submitted"
    listener = socket.socket()  # the network case dials this: nothing may reach it
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    right = _right_answers()
    for student in ("grace", "heidi"):
        (submitted / student).mkdir(parents=True)
        nbformat.write(_submission(right), submitted / student / "tour.ipynb")
    for student, (code, in_answer_cell) in hostile_notebooks.cases(marker, listener.getsockname()[1]).items():
        answers = hostile_notebooks.STOLEN if student == "h2-classmate" else {}
        nb = hostile_notebooks.place(_submission(answers), code, in_answer_cell)
        if student == "h11-pidfd":  # the error its forged notebook hid
            nb.cells.insert(1, nbformat.v4.new_code_cell("1 / 0"))
        (submitted / student).mkdir(parents=True)
        nbformat.write(nb, submitted / student / "tour.ipynb")
    # issue 39: what broke the grader's code around the sandbox, handed in as files
    for student, week in (("judy", "."), ("kim", "week1"), ("00123", "."), ("=1+1", ".")):
        (submitted / student / week).mkdir(parents=True)
        nbformat.write(_submission(right), submitted / student / week / "tour.ipynb")
    nbformat.write(_submission({}), submitted / "judy" / "tour_draft.ipynb")  # blank, handed in too
    (submitted / "kim" / "week2").mkdir()  # nbgrader's layout: next week's notebooks are not run
    nbformat.write(_submission({}, {"ex-tour-2": FOREVER}), submitted / "kim" / "week2" / "tour.ipynb")
    with zipfile.ZipFile(submitted / "mallory.zip", "w") as z:  # a member named by grace's path
        z.writestr(str(submitted / "grace" / "tour.ipynb"), nbformat.writes(_submission({})))
    run = _GradingRun(here, str(submitted), "--out", str(here / "grades" / "grades.csv"),
                      "--timeout", str(HOSTILE_TIMEOUT), "--jobs", "2", "--release", str(_release(here)),
                      "--memory", str(HOSTILE_MEMORY_GIB), env={"TMATH_TEACHER_TOKEN": TEACHER_TOKEN})
    run.marker, run.listener = marker, listener
    run.heidi = (submitted / "heidi" / "tour.ipynb").read_bytes()
    return run


#: The grading runs, by the test that checks each: they start once the kit venv is installed (a
#: run is mostly kernels starting and a timeout waiting), while the kit is scanned.
GRADING_RUNS = {
    "test_grade_worked_example": _grade_worked_example,
    "test_grade_gives_a_row_to_a_timeout_a_non_notebook_and_an_empty_folder":
        _grade_a_timeout_a_non_notebook_and_an_empty_folder,
    "test_grade_hostile_submissions_harm_nothing_but_their_own_row": _grade_a_class_with_hostile_submissions,
}


@pytest.fixture(scope="module")
def grading(request, tmp_path_factory, kit_install):
    """{test name: its :class:`_GradingRun`}, for the grading tests this session runs (started
    by :func:`_start_the_slow_work`, each once the kit venv is installed)."""
    here = request.module
    selected = {item.name for item in request.session.items if getattr(item, "module", None) is here}
    runs = {name: start(tmp_path_factory.mktemp("grade")) for name, start in GRADING_RUNS.items()
            if name in selected}
    for run in runs.values():
        run.start(kit_install)
    yield runs
    for run in runs.values():
        run.stop()


def test_grade_worked_example(grading):
    """Five students, one of them hostile: the README's example."""
    run = grading["test_grade_worked_example"]
    proc, tmp_path = run.wait(), run.folder
    assert proc.returncode == 0, proc.stderr
    raw = (tmp_path / "grades" / "grades.csv").read_bytes()
    assert raw.startswith("\ufeff".encode()), "a byte-order mark, for spreadsheet programs"
    assert raw.decode("utf-8-sig") == EXPECTED_GRADES
    rows = list(csv.reader(io.StringIO(EXPECTED_GRADES)))
    assert len(rows) == 6 and all(len(r) == 4 + sum(TOUR_KEYS.values()) for r in rows)
    assert (tmp_path / "submitted" / "bob" / "tour.ipynb").read_bytes() == run.bob, "eve could not blank it"
    # every tour exercise has a key and the release asks no written part: manual.csv is its header
    from tmath.grade import MANUAL_HEADER

    manual = (tmp_path / "grades" / "manual.csv").read_text(encoding="utf-8-sig")
    assert manual == ",".join(MANUAL_HEADER) + "\n"
    chen = (tmp_path / "grades" / "feedback" / "chen.md").read_text(encoding="utf-8")
    assert "得分：7 / 7" in chen and "不是本次作业的题目，没有计分：ex-arch-2" in chen
    # the teacher's guide shows the same table
    readme = (ROOT / "book" / "guides" / "teachers.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n(学生,.*?)```", readme, re.S)
    assert block and block.group(1) == EXPECTED_GRADES
    # feedback in Chinese: the value read, ✓ or ✗, the tolerance, never the key
    bob = (tmp_path / "grades" / "feedback" / "bob.md").read_text(encoding="utf-8")
    assert "得分：3 / 7" in bob and "ex-tour-4：读到 3.9998，✓ 正确（容差：相对误差 ≤ 0.001%" in bob
    assert "ex-tour-2：读到 107，✗ 还不对（容差：精确整数）" in bob
    assert "ex-tour-1：没有读到答案：答案单元格运行出错（NameError" in bob
    alice = (tmp_path / "grades" / "feedback" / "alice.md").read_text(encoding="utf-8")
    assert "ex-tour-4：读到 4，✗ 还不对" in alice and "ex-tour-5：未作答" in alice
    # a key shows only as a student's own right answer, never for an exercise got wrong or left out
    forms = _key_forms()
    for name, text, results in (("alice", alice, rows[1]), ("bob", bob, rows[2])):  # chen: all right
        wrong = {label for label, got in zip(rows[0][4:], results[4:], strict=True) if got != "1"}
        assert wrong and not _Scanner({k: v for k, v in forms.items() if k in wrong and v})(text), name
    assert (tmp_path / "grades" / "autograded" / "bob" / "tour.ipynb").is_file()


def test_grade_gives_a_row_to_a_timeout_a_non_notebook_and_an_empty_folder(grading):
    run = grading["test_grade_gives_a_row_to_a_timeout_a_non_notebook_and_an_empty_folder"]
    proc, tmp_path = run.wait(), run.folder
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "grades.csv").read_text(encoding="utf-8-sig")
    rows = {r[0]: r for r in csv.reader(io.StringIO(table))}
    assert set(rows) == {"学生", "carol", "dave", "erin", "frank", "ivy"}
    assert rows["carol"][1:] == [
        "不是笔记本：carol.ipynb 无法按 Jupyter 笔记本（.ipynb）读取：不是 JSON 文件", "0", "7", *[""] * 7]
    assert rows["dave"][1].startswith(f"超时：dave.ipynb 超过 {TIMEOUT} 秒没有运行完")
    # the cell is named only by the notebook's own process, which stopped it at the timeout (not
    # by the grader killing that process much later: then its row has no cell)
    assert re.search(r"（停在第 \d+ 个单元格）", rows["dave"][1]), rows["dave"][1]
    assert rows["dave"][2] == "0"
    assert rows["erin"][1] == "没有找到笔记本：交来的是 作业.pdf，没有 .ipynb 文件"
    assert rows["frank"][1:] == ["已评分", "5", "7", "1", "1", "1", "1", "1", "0", ""]
    # ivy's infinite loop, before her second answer, is stopped at the cell's limit: every answer
    # counts (the whole notebook's timeout used to cost her every answer after the loop)
    assert rows["ivy"][2:] == ["7", "7", *["1"] * 7], rows["ivy"]
    assert rows["ivy"][1].startswith("执行出错：ivy.ipynb 第 "), rows["ivy"][1]
    assert f"单元格超时: 运行超过 {CELL_TIMEOUT} 秒，已中断" in rows["ivy"][1], rows["ivy"][1]


def test_the_release_fixes_the_parts_their_points_and_so_the_maximum(tmp_path):
    """The answer cells of the release name the parts graded; ``metadata.tmath.points`` gives a
    part more than 1 point; nothing else changes the maximum (the grading runs show that no
    submission does: every row's 满分 is 7)."""
    from tmath.exercises import labels
    from tmath.grade import Assignment, Graded, GradeError

    release = _release(tmp_path)
    nb = nbformat.read(release / "tour.ipynb", as_version=4)
    first = next(c for c in nb.cells if "answer" in c.metadata.get("tags", []))
    first.metadata["tmath"]["points"] = {"ex-tour-1": 3}
    nbformat.write(nb, release / "tour.ipynb")
    known = set(labels())
    assignment = Assignment.from_release(release, known)
    assert list(assignment.points) == EXPECTED_GRADES.splitlines()[0].split(",")[4:]  # the release's order
    assert assignment.points["ex-tour-1"] == 3 and assignment.points["ex-tour-1/share"] == 1
    assert len(assignment.points) == sum(TOUR_KEYS.values()) and assignment.total == 9
    row = Graded("x", "已评分", {"ex-tour-1": True, "ex-tour-1/share": False, "ex-tour-2": True}, [],
                 assignment.points)
    assert row.score == 4
    first.metadata["tmath"]["points"] = {"ex-tour-1": -1}
    nbformat.write(nb, release / "tour.ipynb")
    with pytest.raises(GradeError, match="不是非负整数"):
        Assignment.from_release(release, known)


def test_the_sandbox_mounts_the_kit_over_its_scratch_folders_not_under_them():
    """A grading environment under /work (``make grading-env`` in a clone at /work/book) or /tmp
    must stay visible in the sandbox, whose scratch folders are tmpfs at those paths: the
    tmpfs are mounted first (the other way round, `make grading-env`'s venv in /work was hidden
    and the sandbox could not start its Python)."""
    from tmath import sandbox

    for prefix in ("/work/book/_build/grading-env", "/tmp/kit/venv"):
        kit = sandbox.KitEnv(Path(prefix) / "bin" / "python", Path(prefix), Path("/opt/python3.11"))
        cmd = sandbox.command(kit, 0, 10, "tour.ipynb", 60)
        tmpfs = {cmd[i + 1]: i for i, a in enumerate(cmd) if a == "--tmpfs"}
        bound = next(i for i, a in enumerate(cmd) if a == "--ro-bind" and cmd[i + 1] == prefix)
        assert {"/tmp", "/work"} <= set(tmpfs) and max(tmpfs.values()) < bound, cmd


def test_an_executed_copy_stays_in_the_students_autograded_folder():
    from tmath.grade import _inside

    assert _inside("frank.zip:week1/tour.ipynb") == Path("frank.zip/week1/tour.ipynb")
    assert _inside("eve.zip:../../../../etc/x.ipynb") == Path("eve.zip/etc/x.ipynb")
    assert _inside("eve.zip:/abs/x.ipynb") == Path("eve.zip/abs/x.ipynb")
    assert _inside("..") == Path("notebook.ipynb")


def _processes_with(marker: str) -> list[str]:
    """The command lines of this machine's processes that name ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and marker in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def _uid(proc: Path) -> int | None:
    try:
        status = (proc / "status").read_text()
    except OSError:
        return None
    return int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))


def test_grade_hostile_submissions_harm_nothing_but_their_own_row(grading, kit_python):
    """Thirteen hostile notebooks (``tests/hostile_notebooks.py``), a zip whose member is named
    by a classmate's path, and six honest students, graded in one run. Each of the first nine
    attacks did harm with the grader that ran the notebooks in the teacher's environment (the
    commit that added this test says what); in the sandbox none does: no classmate's grade or
    file changes, no file is left outside the sandbox's scratch folder, no process is left,
    nothing reaches the network, and the grader finishes with every row. The rest broke the
    grader's code around the sandbox (issue 39; ``tests/test_grade_hardened.py`` shows each
    failing before): a number no float holds, the kernel forging the worker's output, the
    teacher's environment, 2.4 GiB in four processes, a blank draft beside the notebook,
    next week's folder, formula and number-like student names."""
    run = grading["test_grade_hostile_submissions_harm_nothing_but_their_own_row"]
    proc, here, marker = run.wait(), run.folder, run.marker
    try:
        connected = run.listener.accept()
    except BlockingIOError:
        connected = None
    finally:
        run.listener.close()
    # no process of the run is left: not the daemon that would rewrite grades.csv after the
    # grader exits, not `sleep 90`, not the infinite loop's child, not the fork bomb's
    assert not _processes_with(marker), _processes_with(marker)
    if os.geteuid() == 0:  # as root, each sandbox ran as a user of its own: none of theirs is left
        from tmath.sandbox import sandbox_uid

        uids = {sandbox_uid(slot, run.proc.pid) for slot in range(2)}
        left = [p.name for p in Path("/proc").glob("[0-9]*") if _uid(p) in uids]
        assert not left, f"processes of the sandboxes' users left: {left}"
    # the sandboxes' cgroups (where the machine lets root make them) are removed with them
    groups = list(Path("/sys/fs/cgroup").glob(f"*/**/tmath-grade-{run.proc.pid}-*"))
    assert not groups, groups
    assert proc.returncode == 0, proc.stderr[-3000:]  # h5 sent SIGKILL to the grader: it never saw it
    table = (here / "grades" / "grades.csv").read_text(encoding="utf-8-sig")
    from test_grade_hardened import _spreadsheet_check

    rows = {r[0]: r for r in _spreadsheet_check(table)}
    hostile = hostile_notebooks.cases(marker, 0)
    honest = ["grace", "heidi", "judy", "kim", "'00123", "'=1+1"]
    assert set(rows) == {"学生", *honest, "mallory", *hostile}
    assert all(r[3] == "7" for name, r in rows.items() if name != "学生"), "the release's maximum for all"
    # the classmates: every answer right, graded, and heidi's file as she handed it in
    assert rows["grace"][1:4] == ["已评分", "7", "7"] and rows["heidi"][1:4] == ["已评分", "7", "7"], table
    # issue 39: judy's blank draft is listed, not graded; kim's week 2 is not run; mallory's zip
    # member named by grace's path is the zip's (blank), not grace's notebook; IDs stay text
    skipped = "已评分；没有评分的笔记本："
    assert rows["judy"][1:4] == [f"{skipped}tour_draft.ipynb（不是这次作业发下的笔记本）", "7", "7"]
    assert rows["kim"][1:4] == [f"{skipped}week2/tour.ipynb（不是这次作业 week1 的文件夹里的）", "7", "7"]
    assert rows["mallory"][1:3] == ["已评分", "0"], rows["mallory"]
    assert rows["'00123"][1:3] == ["已评分", "7"] and rows["'=1+1"][1:3] == ["已评分", "7"]
    feedback = here / "grades" / "feedback"
    assert {p.stem for p in feedback.glob("*.md")} == {r.strip("'") for r in rows if r != "学生"}
    huge = (feedback / "h10-huge.md").read_text(encoding="utf-8")
    assert "ex-tour-2：读到 1e+400，✗ 不是一个有效的数" in huge and "ex-tour-5：读到 7e+4000" in huge, huge
    assert "第 2 个单元格 ZeroDivisionError" in rows["h11-pidfd"][1], rows["h11-pidfd"]  # not forged away
    pidfd_run = json.dumps([c.get("outputs") for c in nbformat.read(
        here / "grades" / "autograded" / "h11-pidfd" / "tour.ipynb", as_version=4).cells])
    assert "took []" in pidfd_run and "FORGED-BY-THE-KERNEL" not in pidfd_run
    def outputs(student: str) -> str:
        nb = nbformat.read(here / "grades" / "autograded" / student / "tour.ipynb", as_version=4)
        return json.dumps([c.get("outputs") for c in nb.cells], ensure_ascii=False)

    environ_run = outputs("h12-environ")
    assert "TMATH_GRADING=1" in environ_run and TEACHER_TOKEN not in environ_run
    assert "held 2400 MiB" not in outputs("h13-hog")
    # the honest notebooks' answer cells recorded their answers without the kit's slow hashes
    grace_run = outputs("grace")
    assert "评分时不自查" in grace_run and "✓ 正确" not in grace_run
    assert (here / "submitted" / "heidi" / "tour.ipynb").read_bytes() == run.heidi
    # the attackers score nothing: no keys in the kit (h1), no classmate to copy (h2)
    assert {name: rows[name][2] for name in hostile} == dict.fromkeys(hostile, "0"), table
    assert "ModuleNotFoundError: No module named 'tmath.answer_keys'" in rows["h1-keys"][1]
    keys_run = nbformat.read(here / "grades" / "autograded" / "h1-keys" / "tour.ipynb", as_version=4)
    assert "def " not in json.dumps([c.get("outputs") for c in keys_run.cells]), "no key module's source"
    assert "MemoryError" in rows["h7-10gb"][1]
    assert rows["h8-loop"][1].startswith(f"超时：tour.ipynb 超过 {HOSTILE_TIMEOUT} 秒")
    assert "ConnectionRefusedError" in rows["h9-network"][1] and connected is None
    # nothing written outside the sandbox: no .pth in the teacher's venv or the kit's
    import site

    kit_site = list(kit_python.parents[1].glob("lib/python*/site-packages"))
    planted = [p for folder in (*site.getsitepackages(), *kit_site)
               for p in Path(folder).glob(f"zz_tmath_hostile_{marker}.pth")]
    assert kit_site and not planted, planted
    escapes = [p for p in (Path("/tmp"), Path.home(), here, here / "submitted")
               if (p / f"tmath-hostile-escape-{marker}").exists()]
    assert not escapes, escapes
    pth_run = nbformat.read(here / "grades" / "autograded" / "h3-pth" / "tour.ipynb", as_version=4)
    written = [o["text"] for c in pth_run.cells for o in c.get("outputs", [])
               if "written" in o.get("text", "")]
    assert written and "site-packages" not in written[0], written  # it ran, and reached no venv


def test_grade_refuses_bad_input_in_chinese(tmp_path):
    release = _release(tmp_path)
    env = ("--release", str(release), "--kit-env", str(tmp_path / "kit"))
    proc = _grade(tmp_path / "nowhere", tmp_path / "g.csv", *env)
    assert proc.returncode == 2 and "SUBMISSIONS_DIR" in proc.stderr and "不是一个文件夹" in proc.stderr
    (tmp_path / "in").mkdir()
    proc = _grade(tmp_path / "in", tmp_path / "g.csv", "--timeout", "0", *env)
    assert proc.returncode == 2 and "--timeout 必须大于 0" in proc.stderr
    # the release fixes the assignment: it is required, and must ask something
    proc = _grade(tmp_path / "in", tmp_path / "g.csv", "--kit-env", str(tmp_path / "kit"))
    assert proc.returncode == 2 and "--release" in proc.stderr, proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _grade(tmp_path / "in", tmp_path / "g.csv", "--release", str(tmp_path / "empty"), env[2], env[3])
    assert proc.returncode == 2 and "没有答案单元格" in proc.stderr, proc.stderr
    # the submissions never run in the teacher's environment, which holds the keys
    proc = _grade(tmp_path / "in", tmp_path / "g.csv", "--release", str(release), "--kit-env", sys.prefix)
    assert proc.returncode == 2 and "带着答案" in proc.stderr, proc.stderr
    proc = _grade(tmp_path / "in", tmp_path / "g.csv", *env)
    assert proc.returncode == 2 and "不是一个 Python 虚拟环境" in proc.stderr, proc.stderr
    assert not (tmp_path / "g.csv").exists()


def _work(nb, budget: float, folder: Path, env: dict | None = None) -> tuple[dict, nbformat.NotebookNode]:
    """The grader's worker (``tmath/_grade_worker.py``, which the grader runs in the sandbox)
    run here, outside any sandbox, on ``nb``: (its status, the executed notebook)."""
    import tmath._grade_worker as worker

    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, worker.__file__, str(budget), "tour.ipynb"],
                          input=nbformat.writes(nb).encode(), capture_output=True, timeout=900, cwd=folder,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-2000:]
    head, _, body = proc.stdout.partition(b"\n")
    return json.loads(head), nbformat.reads(body.decode(), as_version=4)


def test_grade_does_not_count_the_kernel_start_against_the_timeout(tmp_path):
    """``--timeout`` is for a notebook's cells: a kernel that is slow to start (a busy machine;
    here a kernel spec that sleeps 3 s first) must not time out a notebook whose cells take
    no time (with the budget counted from the launch, this status said timeout)."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    slow = "import time; time.sleep(3); from ipykernel import kernelapp; kernelapp.launch_new_instance()"
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", slow, "-f", "{connection_file}"],
        "display_name": "slow python", "language": "python", "env": {"TMATH_SLOW_KERNEL": "yes"}}),
        encoding="utf-8")
    cell = nbformat.v4.new_code_cell("import os\nos.environ['TMATH_SLOW_KERNEL']")
    nb = nbformat.v4.new_notebook(cells=[cell])
    status, executed = _work(nb, 2, tmp_path / "work", {"JUPYTER_PATH": str(tmp_path / "jupyter")})
    assert status == {"status": "ok"}, status
    assert executed.cells[0].outputs[0]["data"]["text/plain"] == "'yes'", "the slow kernel ran the cell"


@pytest.mark.skipif(os.name != "posix", reason="ZeroMQ has Unix sockets only on POSIX systems")
def test_grade_kernels_listen_on_unix_sockets_in_a_folder_removed_afterwards(tmp_path):
    """Over TCP, a port taken by another program between the client's pick and the kernel's
    bind leaves ipykernel hung (it does not exit when its IOPub or heartbeat bind fails): a
    notebook that failed "Kernel didn't respond in 300 seconds" in a run of this suite. The
    grader's kernels use Unix sockets in a folder of their own; the kernel reports its own."""
    probe = ("from pathlib import Path\n"
             "from ipykernel.kernelapp import IPKernelApp\n"
             "app = IPKernelApp.instance()\n"
             "print(app.transport, app.ip, sorted(p.name for p in Path(app.ip).parent.iterdir()))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)])
    status, executed = _work(nb, 60, tmp_path / "work")
    assert status == {"status": "ok"}, status
    transport, ip, files = executed.cells[0].outputs[0]["text"].split(" ", 2)
    assert transport == "ipc", executed.cells[0].outputs
    assert files.strip() == str([f"kernel-{n}" for n in range(1, 6)])
    assert not Path(ip).parent.exists(), "the sockets' folder is removed after the notebook"


def test_grade_falls_back_to_tcp_where_a_socket_path_would_be_too_long():
    from tmath.grade import kernel_manager

    assert kernel_manager("/tmp/tmath-kernel-x").transport == ("ipc" if os.name == "posix" else "tcp")
    assert kernel_manager("/tmp/" + "x" * 100).transport == "tcp"


# --- grading by hand: manual.csv and tmath grade-merge --------------------------------------------


def _manual_release(folder: Path) -> tuple[Path, nbformat.NotebookNode]:
    """A release of two answer cells: ex-crossover-2, a proof with no key (graded by hand, 1
    point by default), and ex-tour-2, a number (1 point) whose why the teacher also grades by
    hand (``metadata.tmath.manual``: 2 points)."""
    from student_edition import answer_cell_source

    release = folder / "release" / "week2"
    release.mkdir(parents=True)
    proof = nbformat.v4.new_code_cell(answer_cell_source("ex-crossover-2"), metadata={
        "tags": ["answer"], "tmath": {"exercise": "ex-crossover-2", "answers": []}})
    number = nbformat.v4.new_code_cell(answer_cell_source("ex-tour-2"), metadata={
        "tags": ["answer"], "tmath": {"exercise": "ex-tour-2", "answers": ["ex-tour-2"], "manual": 2}})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("证明 $T^*_\\text{causal} = 2T^*_\\text{full} - 1$。"), proof,
        nbformat.v4.new_markdown_cell("下一题。"), number, nbformat.v4.new_markdown_cell("本章完。")])
    nbformat.write(nb, release / "week2.ipynb")
    return release, nb


def test_manual_csv_holds_each_part_graded_by_hand_with_the_students_text(tmp_path):
    """manual.csv: one row per student and part graded by hand, the answer cell's text (turned
    into Markdown or not) and the cells the student added after it, never the release's next
    cell; 得分 empty for the teacher; a formula is written as text."""
    from tmath.exercises import labels
    from tmath.grade import MANUAL_HEADER, Assignment, Execution, Submission, manual_table

    release, handed_out = _manual_release(tmp_path)
    assignment = Assignment.from_release(release, set(labels()))
    assert assignment.points == {"ex-tour-2": 1}
    assert assignment.manual == {"ex-crossover-2": 1, "ex-tour-2": 2}

    alice = nbformat.from_dict(json.loads(nbformat.writes(handed_out)))
    proof = alice.cells[1]
    alice.cells[1] = nbformat.v4.new_markdown_cell("=2*b/a-1：全量时 $aT^2 = bT$……", metadata=proof.metadata)
    alice.cells[1]["id"] = proof["id"]  # JupyterLab keeps a cell's id and metadata when its type changes
    mine = nbformat.v4.new_code_cell("print(2 * 3 - 1)")
    mine.outputs = [nbformat.v4.new_output("stream", name="stdout", text="5\n")]
    alice.cells.insert(2, mine)
    alice.cells[4].source = 'my_answer("ex-tour-2", 108)\n# 因为 12d/(12d+13) 随 d 增大'
    runs = {"alice": [Execution("week2.ipynb", alice)], "bob": [Execution("week2.ipynb", None, "超时")]}
    table = manual_table([Submission("alice"), Submission("bob")], runs, assignment)
    rows = list(csv.reader(io.StringIO(table)))
    assert rows[0] == MANUAL_HEADER
    by = {(r[0], r[1]): r for r in rows[1:]}
    assert set(by) == {("alice", "ex-crossover-2"), ("alice", "ex-tour-2"), ("bob", "ex-crossover-2"),
                       ("bob", "ex-tour-2")}
    text = by["alice", "ex-crossover-2"][5]
    assert text.startswith("'=2*b/a-1"), "a formula stays text in the teacher's spreadsheet"
    assert "print(2 * 3 - 1)" in text and "［输出］5" in text and "下一题" not in text
    assert by["alice", "ex-crossover-2"][2:5] == ["week2.ipynb", "1", ""]
    assert "12d/(12d+13)" in by["alice", "ex-tour-2"][5] and by["alice", "ex-tour-2"][3] == "2"
    assert by["bob", "ex-tour-2"][5] == "（没有找到这道题的答案单元格）"


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return path


def test_grade_merge_adds_the_manual_points_to_the_totals(tmp_path):
    from tmath.cli import main
    from tmath.grade import HEADER, MANUAL_HEADER

    grades = _write_csv(tmp_path / "grades.csv", [
        [*HEADER, "ex-tour-2"], ["alice", "已评分", "1", "1", "1"], ["bob", "超时", "0", "1", ""]])
    filled = [MANUAL_HEADER, ["alice", "ex-crossover-2", "week2.ipynb", "1", "1", "证明"],
              ["alice", "ex-tour-2", "week2.ipynb", "2", "1.5", "因为"],
              ["bob", "ex-crossover-2", "", "1", "0", "（没有找到这道题的答案单元格）"],
              ["bob", "ex-tour-2", "", "2", "0", ""]]
    manual = _write_csv(tmp_path / "manual.csv", filled)
    out = tmp_path / "total.csv"
    assert main(["grade-merge", str(grades), str(manual), "--out", str(out)]) == 0
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    assert rows == [[*HEADER, "ex-tour-2", "ex-crossover-2（人工）", "ex-tour-2（人工）"],
                    ["alice", "已评分", "3.5", "4", "1", "1", "1.5"],
                    ["bob", "超时", "0", "4", "", "0", "0"]]


@pytest.mark.parametrize(("change", "message"), [
    ((2, 4, ""), "第 3 行（学生 alice，练习 ex-tour-2）：得分为空：请填 0 到 2 之间的数"),
    ((2, 4, "3"), "得分 3 超出范围：请填 0 到 2 之间的数"),
    ((2, 4, "两分"), "得分 '两分' 不是数"),
    ((2, 0, "carol"), "grades.csv 里没有这个学生"),
    (None, "缺少这些学生的人工评分：bob（ex-crossover-2）"),
])
def test_grade_merge_refuses_an_unfilled_or_wrong_score_in_chinese(tmp_path, capsys, change, message):
    from tmath.cli import main
    from tmath.grade import HEADER, MANUAL_HEADER

    grades = _write_csv(tmp_path / "grades.csv", [
        [*HEADER, "ex-tour-2"], ["alice", "已评分", "1", "1", "1"], ["bob", "超时", "0", "1", ""]])
    filled = [MANUAL_HEADER, ["alice", "ex-crossover-2", "a.ipynb", "1", "1", ""],
              ["alice", "ex-tour-2", "a.ipynb", "2", "2", ""], ["bob", "ex-crossover-2", "", "1", "0", ""],
              ["bob", "ex-tour-2", "", "2", "0", ""]]
    if change is None:
        del filled[3]
    else:
        row, column, value = change
        filled[row][column] = value
    manual = _write_csv(tmp_path / "manual.csv", filled)
    out = tmp_path / "total.csv"
    assert main(["grade-merge", str(grades), str(manual), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tmath grade-merge：错误：manual.csv：") and message in err, err
    assert "Traceback" not in err and not out.exists()


def test_grading_installs_nothing_and_asks_no_index(tmp_path):
    """A PyTorch chapter's setup cell runs ``%pip install torch --index-url ...`` where torch is
    missing: while grading, pip fails at once without a look at the index (here a local port
    that records any connection), and the cells after it run."""
    from tmath._grade_worker import run

    index = socket.socket()
    index.bind(("127.0.0.1", 0))
    index.listen()
    index.setblocking(False)
    port = index.getsockname()[1]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"%pip install --quiet tmath-no-such-package==1.0 "
                                  f"--index-url http://127.0.0.1:{port}/simple"),
        nbformat.v4.new_code_cell("import os\nprint('after', os.environ.get('PIP_NO_INDEX'))")])
    status = run(nb, 120, str(tmp_path), 60)
    try:
        with pytest.raises(BlockingIOError):
            index.accept()  # nothing dialled the index
    finally:
        index.close()
    assert status == {"status": "ok"}, status  # pip's failure did not stop the cells after it
    assert nb.cells[1].outputs[0]["text"] == "after 1\n"

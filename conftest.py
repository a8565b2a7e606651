"""Root conftest: nbval's waits made load-proof, and a second test for every chapter notebook.

nbval waits only 5 s for each output message of a cell once the cell has replied
(``IPyNbCell.output_timeout``, hard-coded), and 60 s for a kernel to start.  On a machine
loaded by other work (two pytest workers, a parallel build, torch in a child process) a
cell's last messages can lag behind its reply by more than that, and the cell fails with
"Timeout of 5 seconds exceeded waiting for output" although its outputs are right: a
result that depends on load, not on the code.  :func:`pytest_collection_modifyitems`
gives every nbval cell :data:`NBVAL_OUTPUT_TIMEOUT` instead; ``pytest.ini`` raises the
kernel start-up timeout.  Neither changes what is compared.


nbval (``book/**/*.ipynb``) re-executes each notebook, hidden cells included, and compares
the outputs with the saved ones.  A student sees less: the code the page shows.  The test
collected here, ``book/PATH.ipynb::visible code runs alone``, runs only that code, in order,
after the notebook's (hidden) setup cell, in a fresh IPython shell in a new process: a
visible cell that uses a name defined in a hidden cell fails with the NameError a student
copying the page would get.  The shells are forked by ``tests/warm_runner.py`` (one server
per pytest worker) from a process that has already imported NumPy, SymPy, matplotlib and
tmath, so the test pays for the notebook's computations, not for starting a kernel again.

nbval's kernels come from the same server (:class:`WarmProvisioner`): a Jupyter kernel that
is started cold spends 3-5 s importing NumPy, SymPy, matplotlib and ipykernel before its
first cell, 28 times a run. Forked from the warm server, each kernel is still a new process
with an empty namespace, started with the command, folder and environment jupyter_client
gives it, and nbval drives it over ZeroMQ and compares every output as with any kernel; the
saved outputs it compares against were made by cold kernels (``make notebooks``), so a
difference between the two would fail here. ``TMATH_COLD_KERNELS=1`` gives nbval cold
kernels again.

Visible means shown on the page, folded or not: a code cell is hidden when tagged
``remove-cell`` or ``remove-input`` (the setup cell is one).  Cells tagged
``raises-exception`` may raise; ``skip-execution`` cells are skipped, as nbval does.
Being collected under the notebook's own path, the test runs on the same pytest-xdist
worker as that notebook's nbval cells (``--dist loadfile``), so the two spread together.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
#: Seconds nbval waits for each output message of a cell after the cell's reply.
NBVAL_OUTPUT_TIMEOUT = 120

# tmath.dist.run keeps each process group's result for this session, and tmath.crosscheck
# each transformers model's parameter and FLOP counts (in a directory made for the session): a
# chapter's nbval run and its visible-code run, on the same worker, then start one group of
# gloo processes, and build each model, once instead of twice.
# The xdist workers inherit the controller's directory; the process that makes it removes it.
if "TMATH_CROSSCHECK_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="tmath-test-cache-")
    os.environ.setdefault("TMATH_DIST_CACHE", _CACHE)
    os.environ["TMATH_CROSSCHECK_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)


# Every Python the suite starts from this environment (builds, the grader's command line,
# JupyterLab, the pytest-xdist workers) imports jsonschema without building the IRI grammars
# of rfc3987_syntax, which no schema here uses (tests/no_iri_grammar/rfc3987_syntax.py says
# why): 1.1 s of CPU saved in each of them. The course kit's venv and the grading sandbox get
# an environment of their own, without PYTHONPATH, and are as a student's.
_NO_IRI = str(ROOT / "tests" / "no_iri_grammar")
if _NO_IRI not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (_NO_IRI, os.environ.get("PYTHONPATH"))))


# The course kit and the website hash each practice key with PBKDF2 at
# tmath.exercises.KDF_ITERATIONS (about 1.3 s a hash), read from the repository's store
# (lib/tmath/answer_keys/hashes.json). The suite builds its sites and kits with fewer
# iterations and so hashes anew (the count is stored with each hash, so every check still runs
# the same code, and a wrong answer is not nine slow hashes); tests/test_exercises.py checks the
# store and the real count, benchmarks/bench_kdf.py measures its cost.
os.environ.setdefault("TMATH_KDF_ITERATIONS", "1000")

_SERVER: subprocess.Popen | None = None


def _warm_runner() -> subprocess.Popen:
    """This worker's tests/warm_runner.py server, started on first use."""
    global _SERVER
    if _SERVER is None or _SERVER.poll() is not None:
        _SERVER = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "warm_runner.py"), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )
    return _SERVER


def run_visible_code(path: Path) -> None:
    """Run the visible program of ``path`` (tests/warm_runner.py, mode ``visible``): the setup
    cell, then every code cell the page shows, in a fresh IPython shell; raise on an error."""
    server = _warm_runner()
    server.stdin.write(f"visible {path}\n")
    server.stdin.flush()
    line = server.stdout.readline()
    if not line:
        raise VisibleCodeError(path, f"the runner stopped (exit status {server.wait()})")
    outcome = json.loads(line)
    if not outcome["ok"]:
        raise VisibleCodeError(path, outcome["error"])


class _ForkedKernel:
    """What jupyter_client's ``LocalProvisioner`` uses of ``subprocess.Popen``, for a kernel the
    warm runner forked (its parent is the runner, which reaps it, so ``/proc`` tells if it lives)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as fh:
                state = fh.read().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")  # a zombie has ended: the runner has not reaped it yet

    def poll(self) -> int | None:
        if self.returncode is None and not self._alive():
            self.returncode = 0  # the exit status went to the runner
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)


def _warm_provisioner_class():
    from jupyter_client.provisioning import LocalProvisioner

    class WarmProvisioner(LocalProvisioner):
        """Launch the kernel by forking it from this worker's warm runner (tests/warm_runner.py)."""

        async def launch_kernel(self, cmd, **kwargs):
            if "ipykernel_launcher" not in cmd:  # not a python kernel of this venv: launch it cold
                return await super().launch_kernel(cmd, **kwargs)
            request = {"argv": list(cmd), "cwd": str(kwargs.get("cwd") or os.getcwd()),
                       "env": dict(kwargs.get("env") or os.environ)}
            server = _warm_runner()
            server.stdin.write("kernel " + json.dumps(request) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
            if not line:
                raise RuntimeError(f"the warm runner stopped (exit status {server.wait()})")
            pid = json.loads(line)["pid"]
            self.process = _ForkedKernel(pid)
            self.pid = self.pgid = pid  # the kernel calls setsid(): its pid is its group
            self.cwd = request["cwd"]
            return self.connection_info

    return WarmProvisioner


def _kernels_on_unix_sockets():
    """nbval's KernelManager, its kernels listening on Unix sockets (``tmath.grade.unix_sockets``
    says why: over TCP, a port taken between the client's pick and the kernel's bind left the
    kernel hung and the notebook's test failed after its start-up timeout)."""
    from jupyter_client.manager import KernelManager

    from tmath.grade import unix_sockets

    class UnixSocketKernelManager(KernelManager):
        def __init__(self, **kw):
            folder = tempfile.mkdtemp(prefix="tmath-kernel-")
            atexit.register(shutil.rmtree, folder, True)
            super().__init__(**{**unix_sockets(folder), **kw})

    return UnixSocketKernelManager


def _use_kernels_in_nbval(warm: bool) -> None:
    import uuid

    import nbval.kernel

    base = _kernels_on_unix_sockets()
    if not warm:
        nbval.kernel.KernelManager = base
        return
    provisioner = _warm_provisioner_class()

    class WarmKernelManager(base):
        async def _async_pre_start_kernel(self, **kw):
            if self.provisioner is None:
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
                self.provisioner = provisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec,
                                               parent=self)
            return await super()._async_pre_start_kernel(**kw)

    nbval.kernel.KernelManager = WarmKernelManager  # what nbval.kernel.start_new_kernel builds


def pytest_configure(config):
    if config.getoption("nbval", False):
        _use_kernels_in_nbval(warm=os.environ.get("TMATH_COLD_KERNELS") != "1")


def pytest_unconfigure(config):
    if _SERVER is not None and _SERVER.poll() is None:
        _SERVER.stdin.close()
        _SERVER.wait(timeout=60)


class VisibleCodeError(Exception):
    def __init__(self, path: Path, detail: str) -> None:
        detail = re.sub(r"\x1b\[[0-9;]*m", "", detail)  # the kernel's traceback colours
        super().__init__(f"{path.relative_to(ROOT)}: the visible code alone fails\n{detail[-4000:]}")


class VisibleCodeItem(pytest.Item):
    def runtest(self) -> None:
        run_visible_code(self.path)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, VisibleCodeError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: visible code runs alone"


class VisibleCodeFile(pytest.File):
    def collect(self):
        yield VisibleCodeItem.from_parent(self, name="visible code runs alone")


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".ipynb" and (ROOT / "book") in file_path.parents:
        return VisibleCodeFile.from_parent(parent, path=file_path)
    return None


#: The longest test files (estimated seconds a run on a quiet machine), run first: with
#: ``--no-loadscope-reorder`` (the Makefile) pytest-xdist hands files to its two workers in
#: collection order, so the two longest start at once, one on each worker, and the short files
#: fill in around them instead of leaving one worker alone at the end. (Without that flag
#: xdist orders files by their number of tests: the site's 30 tests ran at 84 % of the run.)
LONGEST_FIRST = (
    # seconds: a loaded run's --durations (8 sessions on 2 cores) divided by about 4
    "tests/test_site.py",  # 160 s: three builds and Chromium
    "tests/test_student_kit.py",  # 110 s: the kit's venv, its notebooks, grading
    "book/appendix/crosscheck.ipynb",  # 30 s: builds the transformers models (cached for nbval)
    "tests/test_exercise_leaks.py",  # 28 s
    "book/flops/when-6pt-fails.ipynb",  # 25 s
    "tests/test_site_compute.py",  # 35 s: Pyodide in Chromium (the ledger, plan and serve forms)
    "tests/test_lab_notebooks.py",  # 20 s: JupyterLab in Chromium
    "book/gpt3/multihead.ipynb",  # 13 s
    "tests/test_crosscheck.py",  # 7 s
    "tests/test_exercises.py",  # 6 s
    "tests/test_hostile_configs.py",  # 5 s
    "book/flops/units.ipynb",  # 4 s
    "tests/test_dist.py",  # 4 s
    "tests/test_notebooks.py",  # 4 s
    "book/ledger/moe-deepseek.ipynb",  # 3 s
    "tests/test_calculator.py",  # 3 s
)


def _longest_first(item) -> int:
    path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ == "IPyNbCell" and hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT
    items.sort(key=_longest_first)  # stable: each file keeps its own order

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

# tmath.dist.run keeps each process group's result for this session (one directory per
# pytest process): a chapter's nbval run and its visible-code run, on the same worker, then
# start one group of gloo processes between them instead of two.
_DIST_CACHE = tempfile.mkdtemp(prefix="tmath-dist-cache-")
os.environ.setdefault("TMATH_DIST_CACHE", _DIST_CACHE)
atexit.register(shutil.rmtree, _DIST_CACHE, True)


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


#: The longest test files, run first: pytest-xdist (``--dist loadfile``) hands files to its two
#: workers in collection order, so the two longest start at once, one on each worker, and the
#: short files fill in around them instead of leaving one worker alone at the end.
LONGEST_FIRST = ("tests/test_site.py", "tests/test_student_kit.py", "book/appendix/crosscheck.ipynb")


def _longest_first(item) -> int:
    path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ == "IPyNbCell" and hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT
    items.sort(key=_longest_first)  # stable: each file keeps its own order

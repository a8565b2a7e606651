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
in a fresh kernel, after the notebook's (hidden) setup cell: a visible cell that uses a name
defined in a hidden cell fails with the NameError a student copying the page would get.

Visible means shown on the page, folded or not: a code cell is hidden when tagged
``remove-cell`` or ``remove-input`` (the setup cell is one).  Cells tagged
``raises-exception`` may raise; ``skip-execution`` cells are skipped, as nbval does.
Being collected under the notebook's own path, the test runs on the same pytest-xdist
worker as that notebook's nbval cells (``--dist loadfile``), so the two spread together.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))
from setup_cells import is_setup_cell  # noqa: E402

HIDDEN_TAGS = frozenset({"remove-cell", "remove-input"})
#: Seconds nbval waits for each output message of a cell after the cell's reply.
NBVAL_OUTPUT_TIMEOUT = 120


def visible_program(nb) -> list:
    """The setup cell, then every code cell the page shows, outputs cleared."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        if is_setup_cell(cell) or not tags & HIDDEN_TAGS:
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata={"tags": sorted(tags)}))
    return cells


def run_visible_code(path: Path) -> None:
    """Execute :func:`visible_program` of ``path`` in a fresh kernel; raise on the first error."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    program = nbformat.v4.new_notebook(cells=visible_program(nb), metadata=nb.metadata)
    client = NotebookClient(program, timeout=600, startup_timeout=300, iopub_timeout=60,
                            kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as e:
        raise VisibleCodeError(path, str(e)) from None


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


def pytest_configure(config):
    # One gloo process group per chapter and test session: the nbval run of a Part V chapter
    # and the run of its visible code (same worker, second kernel) share the result of
    # tmath.dist.run (see tmath.dist.CACHE_ENV). Each worker gets its own folder.
    import tempfile

    os.environ.setdefault("TMATH_DIST_CACHE", tempfile.mkdtemp(prefix="tmath-dist-cache-"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ == "IPyNbCell" and hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT

"""Root conftest: every chapter notebook gets a second test beside nbval's.

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

import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))
from setup_cells import is_setup_cell  # noqa: E402

HIDDEN_TAGS = frozenset({"remove-cell", "remove-input"})

# tmath.dist.run keeps each process group's result for this session (one directory per
# pytest process): a chapter's nbval run and its visible-code run, on the same worker, then
# start one group of gloo processes between them instead of two.
_DIST_CACHE = tempfile.mkdtemp(prefix="tmath-dist-cache-")
os.environ.setdefault("TMATH_DIST_CACHE", _DIST_CACHE)
atexit.register(shutil.rmtree, _DIST_CACHE, True)


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
    client = NotebookClient(program, timeout=600, kernel_name="python3", allow_errors=False,
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

"""Each notebook's hidden setup cell (scripts/setup_cells.py): current, and right in both modes.

Without a repository URL the cell must stop with an error that says how to get tmath; with one
it must pip-install tmath from that repository. Both are run here through IPython's own input
transformer, with `find_spec` patched so that the kernel seems to lack the packages.
"""

from __future__ import annotations

import importlib.util

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

import setup_cells
from conftest import EXAMPLE_REPOSITORY, ROOT


class FakeShell:
    """Records the line magics a cell runs instead of running pip."""

    def __init__(self):
        self.magics = []

    def run_line_magic(self, name, line, _stack_depth=1):
        self.magics.append((name, line))


def run_cell(source: str, missing: set[str]) -> FakeShell:
    shell = FakeShell()
    real = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name in missing else real(name, *args)

    code = TransformerManager().transform_cell(source)
    namespace = {"get_ipython": lambda: shell}
    saved, importlib.util.find_spec = importlib.util.find_spec, find_spec
    try:
        exec(compile(code, "<setup cell>", "exec"), namespace)
    finally:
        importlib.util.find_spec = saved
    return shell


def test_every_notebook_starts_with_a_current_setup_cell(capsys):
    assert setup_cells.main(["--check"]) == 0, capsys.readouterr().err


def test_check_reports_a_stale_setup_cell(tmp_path, capsys, monkeypatch):
    nb = nbformat.read(ROOT / "book/intro/tour.ipynb", as_version=4)
    i = setup_cells.first_code_cell(nb)
    nb.cells[i].source = nb.cells[i].source.replace("tmath", "tmaths")
    nbformat.write(nb, tmp_path / "tour.ipynb")
    monkeypatch.setattr(setup_cells, "ROOT", tmp_path)
    monkeypatch.setattr(setup_cells, "notebooks", lambda: [tmp_path / "tour.ipynb"])
    assert setup_cells.main(["--check"]) == 1
    assert "tour.ipynb: setup cell differs" in capsys.readouterr().err


def test_setup_cell_is_hidden_from_the_site():
    for path in setup_cells.notebooks():
        nb = nbformat.read(path, as_version=4)
        cell = nb.cells[setup_cells.first_code_cell(nb)]
        assert "remove-cell" in cell.metadata.get("tags", []), path.name
        assert cell.outputs == [], f"{path.name}: the setup cell printed something"


def test_without_a_repository_the_cell_says_how_to_get_tmath():
    source = setup_cells.setup_source("", "main", torch=False)
    with pytest.raises(ModuleNotFoundError, match=r"`pip install -e lib`"):
        run_cell(source, missing={"tmath"})
    assert run_cell(source, missing=set()).magics == []


def test_with_a_repository_the_cell_installs_tmath_from_it():
    source = setup_cells.setup_source(EXAMPLE_REPOSITORY, "main", torch=False)
    shell = run_cell(source, missing={"tmath"})
    assert shell.magics == [
        ("pip", 'install --quiet "tmath @ git+https://github.com/example-org/transformer-math@main'
                '#subdirectory=lib" myst-nb==1.4.0'),
    ]
    assert run_cell(source, missing=set()).magics == []


def test_torch_notebooks_install_the_pinned_cpu_build():
    source = setup_cells.setup_source("", "main", torch=True)
    shell = run_cell(source, missing={"torch", "transformers"})
    assert shell.magics == [
        ("pip", "install --quiet torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"),
        ("pip", "install --quiet transformers==5.18.0"),
    ]


def test_torch_notebooks_are_the_ones_that_import_it():
    torch = {p.name for p in setup_cells.notebooks() if setup_cells.needs_torch(nbformat.read(p, 4))}
    # Part V's chapters that run tmath.dist, whose process group imports torch
    assert torch == {"crosscheck.ipynb", "when-6pt-fails.ipynb", "memory.ipynb",
                     "collectives.ipynb", "data.ipynb", "tensor.ipynb",
                     "pipeline-expert-context.ipynb"}

"""Shared fixtures: repository paths and the strictly built site."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HTML = ROOT / "_build" / "html"
# The maintenance scripts (scripts/setup_cells.py) are tested too.
sys.path.insert(0, str(ROOT / "scripts"))


def jupyter_book_build(what: str, *extra: str, env: dict | None = None, strict: bool = True) -> None:
    """`jupyter-book build` of the repository, strict (-W -n) unless told; the log is shown on failure."""
    flags = ["-W", "-n", "--keep-going"] if strict else []
    proc = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(ROOT), *extra, *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    log = proc.stdout[-20000:] + "\n" + proc.stderr[-20000:]
    assert proc.returncode == 0, f"strict {what} build failed:\n{log}"


@pytest.fixture(scope="session")
def built_site() -> Path:
    """Build the book from scratch with warnings as errors; the log is printed on failure.

    The build executes nothing (``execute_notebooks: off``): it renders the outputs saved in
    the notebooks, which nbval (the ``book/`` tests) proves are what the code gives today.
    """
    shutil.rmtree(ROOT / "_build" / ".doctrees", ignore_errors=True)
    shutil.rmtree(HTML, ignore_errors=True)
    jupyter_book_build("book")
    assert (HTML / "index.html").is_file()
    return HTML


@pytest.fixture(scope="session")
def student_site(built_site) -> Path:
    """The student edition (``make book-student``), built strictly after the book."""
    out = ROOT / "_build" / "student"
    shutil.rmtree(out, ignore_errors=True)
    student = dict(os.environ, BOOK_EDITION="student")
    jupyter_book_build("student-edition", "--path-output", str(out), env=student)
    return out / "_build" / "html"


# A stand-in public repository: the book has none yet, and `_config.yml` leaves the URL empty.
EXAMPLE_REPOSITORY = "https://github.com/example-org/transformer-math"


#: The pages of the launch-button build: the root, a markdown page, and notebooks at two depths.
LAUNCH_PAGES = ("book/index", "book/notation", "book/intro/tour", "book/appendix/calculator",
                "book/appendix/bibliography")


@pytest.fixture(scope="session")
def launch_site(tmp_path_factory) -> Path:
    """A few pages of the book built as if `_config.yml` named a public GitHub repository.

    Same sources; only `repository.url` differs, and the table of contents holds
    :data:`LAUNCH_PAGES`: a launch button's links depend only on the page's path, and the
    strict build of the whole book is the ``built_site`` fixture's job.  So this build is not
    strict (the pages' links into the rest of the book dangle) and costs a few seconds, not a
    second full build.
    """
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["repository"]["url"] = EXAMPLE_REPOSITORY
    # Jupyter Book resolves local extensions against the config file's folder.
    config["sphinx"]["local_extensions"] = {
        name: str(ROOT / path) for name, path in config["sphinx"]["local_extensions"].items()
    }
    folder = tmp_path_factory.mktemp("launch")
    path = folder / "_config.yml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    root, *chapters = LAUNCH_PAGES
    toc = {"format": "jb-book", "root": root,
           "chapters": [{"file": page} for page in chapters]}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc, allow_unicode=True), encoding="utf-8")
    out = ROOT / "_build" / "launch"
    shutil.rmtree(out, ignore_errors=True)
    jupyter_book_build("launch-button", "--config", str(path), "--toc", str(folder / "_toc.yml"),
                       "--path-output", str(out), strict=False)
    return out / "_build" / "html"

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


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, session, ...),
    or None when the process is gone. A process that has exited but is not reaped yet is
    still there, in state ``Z``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


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


#: The student edition's build, started beside the full build (see :func:`built_site`).
_STUDENT_BUILD: subprocess.Popen | None = None


def _start_student_build() -> subprocess.Popen:
    """``make book-student``, strict, in a process of its own (its output is ``_build/student``;
    its log goes to a file, not a pipe nobody reads while the full build runs)."""
    import tempfile

    out = ROOT / "_build" / "student"
    shutil.rmtree(out, ignore_errors=True)
    log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    proc = subprocess.Popen(
        [str(BIN / "jupyter-book"), "build", str(ROOT), "--path-output", str(out),
         "-W", "-n", "--keep-going"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, BOOK_EDITION="student"),
    )
    proc.log = log
    return proc


def _stop_student_build() -> None:
    if _STUDENT_BUILD is not None and _STUDENT_BUILD.poll() is None:
        _STUDENT_BUILD.kill()
        _STUDENT_BUILD.wait()


@pytest.fixture(scope="session")
def built_site(request) -> Path:
    """Build the book from scratch with warnings as errors; the log is printed on failure.

    The build executes nothing (``execute_notebooks: off``): it renders the outputs saved in
    the notebooks, which nbval (the ``book/`` tests) proves are what the code gives today.
    When this session also checks the student edition, its build starts first and runs beside
    this one (the two write to different folders): the other pytest worker is often waiting
    at this point of a run (the course kit's install), so the second core does it.
    """
    global _STUDENT_BUILD
    if _STUDENT_BUILD is None and any("student_site" in getattr(item, "fixturenames", ())
                                      for item in request.session.items):
        _STUDENT_BUILD = _start_student_build()
        request.addfinalizer(_stop_student_build)  # if the full build fails, say
    shutil.rmtree(ROOT / "_build" / ".doctrees", ignore_errors=True)
    shutil.rmtree(HTML, ignore_errors=True)
    jupyter_book_build("book")
    assert (HTML / "index.html").is_file()
    return HTML


@pytest.fixture(scope="session")
def student_site(built_site) -> Path:
    """The student edition (``make book-student``), built strictly (started by ``built_site``)."""
    global _STUDENT_BUILD
    proc = _STUDENT_BUILD or _start_student_build()
    _STUDENT_BUILD = proc
    proc.wait()
    proc.log.seek(0)
    log = proc.log.read()
    assert proc.returncode == 0, f"strict student-edition build failed:\n{log[-20000:]}"
    return ROOT / "_build" / "student" / "_build" / "html"


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

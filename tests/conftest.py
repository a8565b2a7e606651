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


@pytest.fixture(scope="session")
def built_site() -> Path:
    """Build the book from an empty execution cache with warnings as errors.

    Every notebook is executed for real, so library changes cannot hide behind
    cached outputs.  The build log is printed on failure.
    """
    shutil.rmtree(ROOT / "_build" / ".jupyter_cache", ignore_errors=True)
    shutil.rmtree(HTML, ignore_errors=True)
    proc = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    log = proc.stdout[-20000:] + "\n" + proc.stderr[-20000:]
    assert proc.returncode == 0, f"strict book build failed:\n{log}"
    assert (HTML / "index.html").is_file(), log
    return HTML


@pytest.fixture(scope="session")
def student_site(built_site) -> Path:
    """The student edition (``make book-student``), built strictly after the book.

    It shares the book's execution cache, so no notebook runs twice.
    """
    out = ROOT / "_build" / "student"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, BOOK_EDITION="student")
    proc = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(ROOT), "--path-output", str(out),
         "-W", "-n", "--keep-going"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    log = proc.stdout[-20000:] + "\n" + proc.stderr[-20000:]
    assert proc.returncode == 0, f"strict student-edition build failed:\n{log}"
    return out / "_build" / "html"

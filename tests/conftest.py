"""Shared fixtures: repository paths and the strictly built site."""

from __future__ import annotations

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

"""ruff over the library, the tests and the notebooks: zero findings."""

import subprocess

from conftest import BIN, ROOT


def test_ruff_has_no_findings():
    proc = subprocess.run(
        [str(BIN / "ruff"), "check", "lib", "tests", "book", "benchmarks", "scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

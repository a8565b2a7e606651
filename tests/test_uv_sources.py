"""scripts/uv_sources.py: uv gets the package sources this machine's pip is set to use."""

from __future__ import annotations

import subprocess
import sys

import uv_sources  # scripts/, on the path through conftest

from conftest import ROOT


def test_pip_s_sources_become_uv_flags_and_missing_folders_are_left_out(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} {tmp_path / 'gone'}")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"file://{tmp_path}/gone-index")
    config = uv_sources.pip_config(sys.executable)  # pip's own reading of its variables
    assert config["index-url"] == "https://mirror.example/simple"
    flags = uv_sources.uv_flags(config)
    assert flags[:2] == ["--index-url", "https://mirror.example/simple"]
    assert ["--find-links", str(wheels)] == flags[flags.index("--find-links"):][:2]
    assert str(tmp_path / "gone") not in flags and not any("gone-index" in f for f in flags)


def test_the_script_prints_the_flags_on_one_line_and_nothing_without_configuration(tmp_path):
    """What the Makefile splits into uv's arguments (pip reads PIP_FIND_LINKS as a list split at
    whitespace, and so does the script)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    script = [sys.executable, str(ROOT / "scripts" / "uv_sources.py")]
    plain = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null"}  # no config file of pip's
    out = subprocess.run(script, capture_output=True, text=True, check=True,
                         env={**plain, "PIP_FIND_LINKS": f"{folder} {tmp_path / 'gone'}"}).stdout
    assert out == f"--find-links {folder}\n"
    assert subprocess.run(script, capture_output=True, text=True, env=plain, check=True).stdout == "\n"

"""Print, as uv flags, where this machine's pip is told to find packages.

The Makefile installs the pinned requirements with uv (``uv pip install``): about 11 s on a
new machine where pip took 40 s (downloads in parallel, no byte-compiling, no resolver run
either way: every file is installed with ``--no-deps``). uv reads no pip configuration, so a
machine whose pip is pointed somewhere (an index mirror, a folder of wheels such as a CPU
build of PyTorch) would have uv fetch something else. This reads pip's own view of its
configuration (``pip config list``: the config files and the ``PIP_*`` variables) and prints
the same sources for uv: ``--index-url``, ``--extra-index-url`` and ``--find-links``. A
local folder or ``file://`` index that does not exist is left out (pip only warns about it;
uv would stop). Prints nothing where pip is not configured.

Usage: ``python scripts/uv_sources.py [PYTHON]`` (the Python whose pip to ask; this one by
default).
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
from urllib.parse import unquote, urlparse

#: pip's option -> uv's flag; pip's later settings (environment over files) win, as in pip.
FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}


def pip_config(python: str) -> dict[str, str]:
    """``{option: value}`` of pip's configuration, as ``pip config list`` prints it."""
    proc = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          check=False)
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        option = key.rpartition(".")[2]
        if sep and option in FLAGS:
            try:
                found[option] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                found[option] = value.strip("'\"")
    return found


def exists(location: str) -> bool:
    """A URL of a server counts as there; a local folder or ``file://`` URL must be."""
    url = urlparse(location)
    if url.scheme in ("http", "https"):
        return True
    path = unquote(url.path) if url.scheme == "file" else location
    return os.path.exists(path)


def uv_flags(config: dict[str, str]) -> list[str]:
    flags = []
    for option, flag in FLAGS.items():
        for location in config.get(option, "").split():
            if exists(location):
                flags += [flag, location]
    return flags


def main() -> None:
    python = sys.argv[1] if len(sys.argv) > 1 else sys.executable
    print(shlex.join(uv_flags(pip_config(python))))


if __name__ == "__main__":
    main()

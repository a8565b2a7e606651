"""A directory of JSON results keyed by their arguments, for the test suite's second runs.

:func:`tmath.dist.run` and :mod:`tmath.crosscheck` keep their results in the directory an
environment variable names (the test suite sets it for a session; nothing sets it
elsewhere): a result is stored under the sha256 of its key, written whole, and read back by
a later call, in any process, with the same key.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any


def path(directory: str, key: dict[str, Any]) -> str:
    """Where the result for ``key`` (JSON-serialisable) is kept in ``directory``."""
    text = json.dumps(key, sort_keys=True)
    return os.path.join(directory, hashlib.sha256(text.encode()).hexdigest() + ".json")


def lookup(env: str, key: dict[str, Any]) -> tuple[str | None, Any]:
    """``(where to store the result, the stored result or None)``; ``(None, None)`` when the
    environment variable ``env`` names no directory."""
    directory = os.environ.get(env)
    if not (directory and os.path.isdir(directory)):
        return None, None
    where = path(directory, key)
    if not os.path.exists(where):
        return where, None
    with open(where, encoding="utf-8") as fh:
        return where, json.load(fh)


def store(where: str, value: Any) -> None:
    """Write ``value`` to ``where`` whole: two processes may store the same result, and a
    reader never sees half a file."""
    tmp = f"{where}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh)
    os.replace(tmp, where)

"""`import tmath` and the command line load no heavy dependency until a function needs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("sympy", "numpy", "matplotlib", "torch", "transformers", "scipy")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_tmath_loads_no_heavy_dependency():
    assert loaded_after("import tmath") == []


def test_the_ledger_command_loads_no_heavy_dependency():
    code = ("import contextlib, io, tmath.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert tmath.cli.main(['ledger', '--preset', 'llama3-70b']) == 0")
    assert loaded_after(code) == []


def test_a_derivation_still_loads_sympy():
    """The probe can fail: a name that needs SymPy does load it."""
    assert "sympy" in loaded_after("import tmath\ntmath.sym('D')")


@pytest.mark.parametrize("name", __import__("tmath").__all__)
def test_every_public_name_resolves(name):
    import types

    import tmath

    value = getattr(tmath, name)
    assert value is not None
    if name in ("presets", "preset", "check", "sym", "syms", "get_hardware"):
        assert callable(value) and not isinstance(value, types.ModuleType)


def test_presets_stays_the_function_after_its_module_is_imported():
    import importlib

    import tmath

    importlib.import_module("tmath.presets")
    assert "llama3-70b" in tmath.presets()


def test_an_unknown_name_is_an_attribute_error():
    import tmath

    with pytest.raises(AttributeError, match="no_such_thing"):
        tmath.no_such_thing  # noqa: B018

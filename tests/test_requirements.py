"""The venv holds exactly what the requirements files pin.

The Makefile installs ``requirements.txt`` and ``requirements-crosscheck.txt`` with
``pip install --no-deps`` (no resolver run) and then ``pip check``: that is only the venv
the book was tested in if the two files pin every package, dependencies included.  A
package installed here but pinned nowhere would be missing on the next machine.

``requirements-lab.txt`` (JupyterLab with all it requires) goes on top for ``make lab``,
``make notebooks``, ``make setup-cells`` and ``make test`` (``tests/test_lab_notebooks.py``
opens notebooks in JupyterLab), not for ``make book``:
a venv may or may not have it, and where it does, its packages are at its pins.  It shares
50-odd packages with ``requirements.txt``; each must have one version in both, or ``make lab``
would change the venv the book was tested in.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re

from conftest import ROOT

FILES = ("requirements.txt", "requirements-crosscheck.txt")
LAB = "requirements-lab.txt"
#: Installed but pinned elsewhere: pip and uv (the installer) by the Makefile, tmath is the
#: book's own lib/.
NOT_IN_FILES = {"pip", "uv", "tmath"}


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()  # PEP 503


def pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)==(\S+)\s*(#.*)?$", line):
            out[_name(m[1])] = m[2]
    return out


def test_the_installers_are_at_the_makefile_s_versions():
    """pip and uv are pinned in the Makefile, which installs them before the files."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    want = {"pip": re.search(r'"pip==([^"]+)"', makefile)[1],
            "uv": re.search(r"^UV_VERSION := (\S+)$", makefile, re.M)[1]}
    installed = {_name(d.metadata["Name"]): d.version for d in md.distributions()}
    assert {n: installed.get(n) for n in want} == want


def test_pins_reads_names_and_versions():
    assert pins("# c\nFoo_Bar==1.2\n-e ./lib\nbaz==3 # why\n") == {"foo-bar": "1.2", "baz": "3"}


def test_every_installed_package_is_pinned_at_its_version_and_every_pin_is_installed():
    pinned: dict[str, str] = {}
    for f in FILES:
        for name, version in pins((ROOT / f).read_text(encoding="utf-8")).items():
            assert name not in pinned, f"{name} is pinned twice"
            pinned[name] = version
    installed = {_name(d.metadata["Name"]): d.version for d in md.distributions()}
    lab = pins((ROOT / LAB).read_text(encoding="utf-8"))  # installed or not (`make lab`)
    unpinned = sorted(n for n in installed if n not in pinned and n not in lab and n not in NOT_IN_FILES)
    assert not unpinned, f"installed but not pinned in {FILES} or {LAB}: {unpinned}"
    # torch's CPU wheel is 2.13.0+cpu: the local label is not part of the pin
    wrong = {n: (installed[n], v) for n, v in {**lab, **pinned}.items()
             if n in installed and installed[n].split("+")[0] != v}
    assert not wrong, f"installed version differs from the pin (installed, pinned): {wrong}"
    missing = sorted(set(pinned) - set(installed))
    assert not missing, f"pinned but not installed: {missing}"


def test_the_lab_file_pins_jupyterlab_at_the_versions_the_book_was_tested_with():
    lab = pins((ROOT / LAB).read_text(encoding="utf-8"))
    book = {n: v for f in FILES for n, v in pins((ROOT / f).read_text(encoding="utf-8")).items()}
    assert {"jupyterlab", "jupyter-server", "nbconvert", "ipykernel"} <= set(lab)
    differ = {n: (v, book[n]) for n, v in lab.items() if n in book and book[n] != v}
    assert not differ, f"{LAB} and {FILES} pin these at different versions (lab, theirs): {differ}"
    # Not installed by `make book`: the build must not need it (`make test` adds the lab file).
    assert "jupyterlab" not in book and "nbconvert" not in book


def _unpinned_requirements(pinned: dict[str, str]) -> dict[str, list[str]]:
    """What the packages of ``pinned`` require (markers evaluated here, extras followed) and
    ``pinned`` does not pin, read from the installed packages' metadata."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    env = default_environment()

    def requires(name: str, extra: str = "") -> list[Requirement]:
        reqs = [Requirement(r) for r in md.requires(name) or []]
        return [r for r in reqs if (r.marker is None and not extra)
                or (r.marker is not None and r.marker.evaluate({**env, "extra": extra}))]

    missing: dict[str, list[str]] = {}
    for name in pinned:
        for req in requires(name):
            needed = [req.name] + [r.name for extra in req.extras for r in requires(req.name, extra)]
            missing.setdefault(name, []).extend(n for n in needed if _name(n) not in pinned)
    return {name: sorted(set(ns)) for name, ns in missing.items() if ns}


def test_make_book_s_requirements_are_closed_on_their_own():
    """`make book` installs requirements.txt alone (--no-deps) and runs `pip check`: everything its
    packages require must be pinned in it, not only in requirements-crosscheck.txt, which `make
    test` adds (sphinx-togglebutton's setuptools was pinned only there: `make book` failed on a
    fresh clone)."""
    book = pins((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    missing = _unpinned_requirements(book)
    assert not missing, f"required by packages of requirements.txt, pinned only elsewhere: {missing}"


# --- the website's runtime: npm and the wheels Pyodide unpacks ---------------------------------


def test_the_npm_lockfile_pins_pyodide_and_records_no_download_host():
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    version = package["dependencies"]["pyodide"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "pyodide pinned to one version"
    assert lock["packages"]["node_modules/pyodide"]["version"] == version
    text = (ROOT / "package-lock.json").read_text(encoding="utf-8")
    assert '"resolved"' not in text and "http" not in text, "the lockfile names no download host"
    assert all(p.get("integrity", "").startswith("sha512-") for k, p in lock["packages"].items() if k)


def test_the_pyodide_wheels_are_pinned_by_hash_at_the_book_s_versions():
    book = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M))
    lines = [ln for ln in (ROOT / "requirements-pyodide.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 2
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:[0-9a-f]{64}", line)
        assert m, line
        assert book[m.group(1)] == m.group(2), f"{m.group(1)}: the site's wheel is the book's version"

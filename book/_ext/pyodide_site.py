"""The website computes: ``tmath`` itself runs in the reader's browser (Pyodide, offline).

A Sphinx extension, loaded beside :mod:`offline_site`. It

1. copies the runtime into the site (``build-finished``): Pyodide's core files from the npm
   package (``node_modules/pyodide``, pinned by ``package-lock.json``, installed by ``npm ci``
   from ``make book``) into ``_static/pyodide/``; into ``_static/tmath/`` the page script
   ``tmath.js`` and its Web Worker, the SymPy and mpmath wheels (``requirements-pyodide.txt``,
   pinned with hashes, downloaded by ``make``) and ``tmath.zip``: the library from ``lib/``,
   **without its answer keys**, with the salted hashes of the keys in their place (the course
   kit's ``_answer_hashes.py``) and a small ``IPython.display`` for the cells the reader runs;
2. adds ``tmath.js`` and ``tmath.css`` to the pages that compute, and only to them: a page
   with a widget (``<div class="tmath-widget" data-kind="ledger|plan">`` in its markdown), an
   exercise with a numeric key (an answer box is added under its statement) or a code cell
   that can run in the page. Nothing is fetched before the reader asks for a computation;
3. marks the visible code cells that can run in the page: those that need only the standard
   library, SymPy and the parts of ``tmath`` that import no NumPy (:func:`classify`). The
   build prints how many can and how many cannot, with the reason, and each page says it.

What the page computes, it computes with this ``tmath``: the widgets call its command line
(``window.tmathRun``), the answer boxes ``tmath.check``'s rule, the cells the reader's own
code; ``tmath.js`` holds no formula. The site must be served over HTTP (``python3 -m
http.server``): a page opened from ``file://`` cannot start a Web Worker or fetch the
runtime, and says so.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ASSETS = HERE / "pyodide"
#: Pyodide's core files, as the npm package ships them (what loadPyodide fetches).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json")
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
#: The wheels of requirements-pyodide.txt, downloaded by make (pip download --require-hashes).
WHEELS_DIR = ROOT / ".venv" / "pyodide-wheels"
#: The same wheels byte-compiled by Pyodide (scripts/pyodide_pyc.mjs, run by make): the site
#: serves these, so that a reader's first ``import sympy`` loads bytecode instead of compiling.
COMPILED_WHEELS_DIR = WHEELS_DIR / "pyc"
WHEELS_REQUIREMENTS = ROOT / "requirements-pyodide.txt"

# --- which cells can run in the page ------------------------------------------------------

#: Packages the page has besides the standard library and tmath.
PAGE_PACKAGES = frozenset({"sympy", "mpmath"})
#: Standard-library modules Pyodide's core does not ship (unvendored or impossible there).
NOT_IN_PYODIDE = frozenset({"ssl", "sqlite3", "lzma", "tkinter", "curses", "readline",
                            "multiprocessing", "concurrent", "_hashlib", "venv", "ensurepip"})
#: Why a module cannot run in the page, by its top-level package (the build's count says it).
REASONS = {"numpy": "NumPy", "matplotlib": "matplotlib", "torch": "PyTorch",
           "transformers": "transformers", "myst_nb": "myst-nb", "ipywidgets": "ipywidgets",
           "scipy": "SciPy", "IPython": "IPython"}
#: IPython.display's names that the page's small IPython shim provides.
SHIM_DISPLAY = frozenset({"display", "Math", "Markdown", "Latex"})


def _top_level_imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of each import a module runs when imported (not those inside
    functions, nor under ``if TYPE_CHECKING``)."""
    found = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                found.extend((a.name, []) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
    visit(tree.body)
    return found


class ModuleTable:
    """Which modules and which of tmath's functions the page can use, and if not, why.

    A module imports in the page when every import it runs at import time does (the standard
    library but for :data:`NOT_IN_PYODIDE`, SymPy, mpmath and such tmath modules). A tmath
    function (or class, or constant) works there when, besides, every import inside it does,
    and every tmath function it refers to works there too: ``roofline.gpu_hours`` does, while
    ``roofline.measure_matmul_flops`` imports NumPy when called.
    """

    def __init__(self, lib: Path = ROOT / "lib") -> None:
        self.lib = lib
        self._modules: dict[str, str | None] = {}
        self._units: dict[tuple[str, str], str | None] = {}
        self._parsed: dict[str, tuple[dict, dict]] = {}
        self.exports = self._exports()

    def _path(self, module: str) -> Path | None:
        base = self.lib / module.replace(".", "/")
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
        return None

    def _exports(self) -> dict[str, tuple[str, str]]:
        """``tmath.NAME`` -> (module, name), from tmath/__init__.py's ``_export`` table."""
        path = self.lib / "tmath" / "__init__.py"
        table: dict[str, tuple[str, str]] = {}
        if not path.is_file():
            return table
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_export":
                module = f"tmath.{node.args[0].value}"
                for a in node.args[1:]:
                    table[a.value] = (module, a.value)
                for kw in node.keywords:
                    table[kw.arg] = (module, kw.value.value)
        return table

    def is_module(self, module: str) -> bool:
        return module.split(".")[0] != "tmath" or self._path(module) is not None

    def missing(self, module: str) -> str | None:
        """None when ``module`` imports in the page, else what it lacks."""
        if module in self._modules:
            return self._modules[module]
        self._modules[module] = None  # cycles: assume fine while we look
        top = module.split(".")[0]
        reason: str | None = None
        if top == "tmath":
            if module == "tmath.answer_keys" or module.startswith("tmath.answer_keys."):
                reason = "答案钥匙"
            elif self._path(module) is None:
                reason = module
            else:
                tree = ast.parse(self._path(module).read_text(encoding="utf-8"))
                for name, _ in _top_level_imports(tree):
                    reason = self.missing(name)
                    if reason:
                        break
        elif top == "IPython":
            reason = None if module == "IPython.display" else "IPython"
        elif top in ("subprocess", "multiprocessing"):
            reason = "子进程"
        elif top in PAGE_PACKAGES:
            reason = None
        elif top in sys.stdlib_module_names and top not in NOT_IN_PYODIDE:
            reason = None
        else:
            reason = REASONS.get(top, top)
        self._modules[module] = reason
        return reason

    def _module_scope(self, module: str) -> tuple[dict, dict]:
        """(top-level name -> what it is bound to, name -> its def/class/assign node)."""
        if module not in self._parsed:
            tree = ast.parse(self._path(module).read_text(encoding="utf-8"))
            bound: dict[str, tuple[str, str | None]] = {}
            defs: dict[str, ast.AST] = {}
            for node in tree.body:
                if isinstance(node, ast.Import):
                    bound.update(_import_refs(node))
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    bound.update(_import_refs(node))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    defs[node.name] = node
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                defs[n.id] = node
            self._parsed[module] = (bound, defs)
        return self._parsed[module]

    def unit_missing(self, module: str, name: str) -> str | None:
        """None when ``module.name`` (a tmath function, class or constant) works in the page."""
        if module.split(".")[0] != "tmath":
            return self.missing(module)
        if self._path(f"{module}.{name}") is not None:
            return self.missing(f"{module}.{name}")
        why = self.missing(module)
        if why:
            return why
        key = (module, name)
        if key in self._units:
            return self._units[key]
        self._units[key] = None  # recursion: assume fine while we look
        bound, defs = self._module_scope(module)
        reason = None
        if name in bound:
            mod, attr = bound[name]
            reason = self.unit_missing(mod, attr) if attr else self.missing(mod)
        elif module == "tmath" and name in self.exports:
            reason = self.unit_missing(*self.exports[name])
        elif name in defs:
            reason = self._node_missing(module, defs[name], bound, defs)
        self._units[key] = reason
        return reason

    def import_missing(self, node: ast.AST) -> str | None:
        """Why the import statement ``node`` cannot run in the page (None: it can, or ``node``
        imports nothing)."""
        if isinstance(node, ast.Import):
            return next((why for a in node.names if (why := self.missing(a.name))), None)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "IPython.display" and not {a.name for a in node.names} <= SHIM_DISPLAY:
                return "IPython"
            for a in node.names:
                why = self.unit_missing(node.module, a.name) if node.module.startswith("tmath") \
                    else self.missing(node.module)
                if why:
                    return why
        return None

    def _node_missing(self, module: str, node: ast.AST, bound: dict, defs: dict) -> str | None:
        for n in ast.walk(node):
            if isinstance(n, ast.Import | ast.ImportFrom):
                why = self.import_missing(n)
                if why:
                    return why
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id in defs and defs[n.id] is not node:
                    why = self.unit_missing(module, n.id)
                    if why:
                        return why
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                target = bound.get(n.value.id)
                if target and target[1] is None and target[0].startswith("tmath"):
                    why = self.unit_missing(target[0], n.attr)
                    if why:
                        return why
        return None


@dataclass
class Cell:
    index: int
    source: str
    runnable: bool = False
    reason: str = ""  # why not, in Chinese-readable words (a package name)
    prelude: list[str] = field(default_factory=list)  # statements run before it, once


def _loaded_names(node: ast.AST) -> set[str]:
    """Names ``node`` reads: loads, and the targets of ``x += …`` and ``del x``, which need
    ``x`` to exist."""
    names = {n.id for n in ast.walk(node)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load | ast.Del)}
    names |= {n.target.id for n in ast.walk(node)
              if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    return names


def _bound_names(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    for n in ast.walk(node):  # `x += 1` reads x first: not a new binding
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.discard(n.target.id)
    return names


#: Methods that change the object they are called on.
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem",
                       "remove", "clear", "add", "discard", "sort", "reverse"})


def _mutated_names(node: ast.AST) -> set[str]:
    """Names whose object ``node`` may change in place: ``x.append(…)``, ``x[k] = …``,
    ``x.attr = …``, ``x += …``. Where such a statement cannot run in the page, ``x`` would hold
    something else there than in the notebook."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in _MUTATORS and isinstance(n.func.value, ast.Name):
            names.add(n.func.value.id)
        elif isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del) \
                and isinstance(n.value, ast.Name):
            names.add(n.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


def _split_imports(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with each import of several names split into one import per name, so that
    ``from tmath import diagrams, fmt`` keeps ``fmt`` where ``diagrams`` cannot import."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.Import) and len(stmt.names) > 1:
            out.extend(ast.Import(names=[a]) for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom) and len(stmt.names) > 1:
            out.extend(ast.ImportFrom(module=stmt.module, names=[a], level=stmt.level)
                       for a in stmt.names)
        else:
            out.append(stmt)
    return out


def _import_refs(stmt: ast.stmt) -> dict[str, tuple[str, str | None]]:
    """Names an import statement binds -> (module, attribute or None for the module)."""
    refs: dict[str, tuple[str, str | None]] = {}
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            refs[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
    elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
        for a in stmt.names:
            refs[a.asname or a.name] = (stmt.module, a.name)
    return refs


def _statement_missing(stmt: ast.stmt, table: ModuleTable, unavailable: dict[str, str],
                       refs: dict[str, tuple[str, str | None]]) -> str | None:
    """Why ``stmt`` cannot run in the page (None if it can), given the names earlier statements
    left unavailable and what the cells' imports bound (``refs``)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Import | ast.ImportFrom):
            why = table.import_missing(node)
            if why:
                return why
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            ref = refs.get(node.value.id)
            if ref and ref[0].startswith("tmath"):  # tmath.f, fmt.sci: that function's needs
                module = ref[0] if ref[1] is None else f"{ref[0]}.{ref[1]}"
                if table.is_module(module):
                    why = table.unit_missing(module, node.attr)
                    if why:
                        return why
    local = _bound_names(stmt)
    for name in sorted(_loaded_names(stmt) - local):
        if name in unavailable:
            return unavailable[name]
        ref = refs.get(name)
        if ref and ref[1] is not None and ref[0].startswith("tmath"):
            why = table.unit_missing(*ref)
            if why:
                return why
    return None


#: Calls that need what the page lacks although their names import there: glue (myst-nb),
#: SymPy's lambdify into NumPy, a file beside the notebook (the page has no such file).
_NEEDS = ((re.compile(r"\bglue\("), "myst-nb"), (re.compile(r"\.widget\("), "ipywidgets"),
          (re.compile(r"\blambdify\(.*['\"]numpy['\"]", re.S), "NumPy"),
          (re.compile(r"\b(open|read_text|read_bytes)\("), "读文件"))


def classify(nb: dict, table: ModuleTable | None = None) -> list[Cell]:
    """The visible code cells of notebook ``nb`` (a dict), each marked runnable in the page or
    not (with the reason), and for the runnable ones the statements of earlier cells (hidden
    or not runnable as a whole) that they need and that can run in the page."""
    table = table or ModuleTable()
    unavailable: dict[str, str] = {}
    defined: set[str] = set()
    refs: dict[str, tuple[str, str | None]] = {}
    cells: list[Cell] = []
    pending: list[str] = []  # statements that can run, from cells that cannot as a whole
    for index, raw in enumerate(nb.get("cells", [])):
        if raw.get("cell_type") != "code":
            continue
        tags = raw.get("metadata", {}).get("tags", [])
        source = "".join(raw.get("source", ""))
        visible = not ({"remove-cell", "remove-input"} & set(tags))
        if "skip-execution" in tags or "raises-exception" in tags:
            if visible:
                cells.append(Cell(index, source, False, "交互控件"))
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            if visible:
                cells.append(Cell(index, source, False, "IPython"))
            continue
        statements = []  # (statement, its source, why it cannot run or None)
        for stmt in _split_imports(tree.body):
            why = _statement_missing(stmt, table, unavailable, refs)
            text = ast.unparse(stmt)
            why = why or next((r for pattern, r in _NEEDS if pattern.search(text)), None)
            statements.append((stmt, text, why))
            # what this statement leaves bound, for the statements after it
            if not why and visible:
                refs.update(_import_refs(stmt))
            changed = _mutated_names(stmt) if why else set()
            for name in _bound_names(stmt) | changed:
                if why and isinstance(stmt, ast.Import) and "." in stmt.names[0].name \
                        and not stmt.names[0].asname and name in defined:
                    continue  # `import tmath.plots` failing leaves the package `tmath` bound
                if why or not visible:  # hidden cells' names are not the reader's either
                    unavailable[name] = why or "隐藏单元格"
                    defined.discard(name)
                    refs.pop(name, None)
                else:
                    unavailable.pop(name, None)
                    defined.add(name)
        whole = next((why for _, _, why in statements if why), None)
        if visible and whole is None and tree.body:
            cells.append(Cell(index, source, True, "", pending))
            pending = []
        else:
            if visible:
                cells.append(Cell(index, source, False, whole or "无"))
            for _, text, why in statements:
                if why is None and visible:  # hidden cells' statements are not the reader's
                    pending = pending + [text]
    return cells


# --- the Sphinx side ------------------------------------------------------------------------


def _hash_table() -> dict:
    """The salted PBKDF2 hashes of the practice keys (every key but those of the exercises named
    in ``BOOK_GRADED``: a graded exercise gets no hash and no answer box). Kept in
    ``_build/.tmath/answer-hashes.json`` while the keys and the iteration count stay the same.
    The hashes themselves come from ``lib/tmath/answer_keys/hashes.json`` (about 1.3 s of CPU
    each, :func:`tmath.exercises.hash_table`); only a key changed since is hashed here."""
    import tmath.exercises as ex

    graded = ex.graded_exercises()
    # the keys are tmath's functions: the same sources, the same keys (computing them all is
    # what takes time, so the cache is looked up without computing any)
    fingerprint = f"{_fingerprint()}:{ex.kdf_iterations()}:{','.join(graded)}"
    cache = ROOT / "_build" / ".tmath" / "answer-hashes.json"
    try:
        saved = json.loads(cache.read_text(encoding="utf-8"))
        if saved.get("fingerprint") == fingerprint:
            return saved["table"]
    except (OSError, ValueError):
        pass
    practice = [label for label in ex.labels() if label.split("/")[0] not in graded]
    table = ex.hash_table(practice)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "table": table}), encoding="utf-8")
    os.replace(tmp, cache)
    return table


def bundle_tmath(dest: Path, table: dict) -> None:
    """``tmath.zip``: lib/tmath without its answer keys, with ``_answer_hashes.py`` (``table``)
    and the page's ``IPython.display`` shim."""
    lib = ROOT / "lib"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((lib / "tmath").rglob("*")):
            rel = path.relative_to(lib)
            if path.is_dir() or "__pycache__" in rel.parts or rel.parts[1] == "answer_keys":
                continue
            if path.suffix not in (".py", ".json", ".md", ".typed"):
                continue
            zf.write(path, rel.as_posix())
        body = "# Written by the website's build: salted hashes of the answer keys, no key.\n"
        body += f"KEYS = {json.dumps(table, ensure_ascii=False, indent=1, sort_keys=True)}\n"
        body = body.replace(": null", ": None").replace(": true", ": True").replace(": false", ": False")
        zf.writestr("tmath/_answer_hashes.py", body)
        for path in sorted((ASSETS / "shim").rglob("*.py")):
            zf.write(path, path.relative_to(ASSETS / "shim").as_posix())


def copy_runtime(outdir: Path, table: dict) -> dict[str, int]:
    """Copy Pyodide, the wheels, the page script and tmath.zip into ``outdir/_static``;
    returns the bytes of each file written (the benchmark reports their sum)."""
    static = outdir / "_static"
    (static / "pyodide").mkdir(parents=True, exist_ok=True)
    (static / "tmath").mkdir(parents=True, exist_ok=True)
    missing = [f for f in PYODIDE_FILES if not (PYODIDE_DIR / f).is_file()]
    if missing:
        raise RuntimeError(f"Pyodide is missing ({', '.join(missing)} under {PYODIDE_DIR}): "
                           "run `npm ci` in the repository (make book does)")
    wheels = sorted(WHEELS_DIR.glob("*.whl")) if WHEELS_DIR.is_dir() else []
    wanted = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", WHEELS_REQUIREMENTS.read_text(), re.M)
    names = []
    for pkg, version in wanted:
        match = [w for w in wheels if w.name.lower().startswith(f"{pkg.lower()}-{version}-")]
        if not match:
            raise RuntimeError(f"the wheel of {pkg}=={version} is missing under {WHEELS_DIR}: "
                               "run `make book`, which downloads it")
        if not (COMPILED_WHEELS_DIR / match[0].name).is_file():
            raise RuntimeError(f"the byte-compiled wheel of {pkg}=={version} is missing under "
                               f"{COMPILED_WHEELS_DIR}: run `make book`, which compiles it")
        names.append(match[0].name)
    written = {}
    for f in PYODIDE_FILES:
        shutil.copyfile(PYODIDE_DIR / f, static / "pyodide" / f)
        written[f"pyodide/{f}"] = (static / "pyodide" / f).stat().st_size
    for name in names:
        shutil.copyfile(COMPILED_WHEELS_DIR / name, static / "tmath" / name)
        written[f"tmath/{name}"] = (static / "tmath" / name).stat().st_size
    (static / "tmath" / "wheels.json").write_text(json.dumps({"wheels": names}), encoding="utf-8")
    for f in ("tmath.js", "tmath-worker.js", "tmath.css"):
        shutil.copyfile(ASSETS / f, static / "tmath" / f)
        written[f"tmath/{f}"] = (static / "tmath" / f).stat().st_size
    bundle_tmath(static / "tmath" / "tmath.zip", table)
    written["tmath/tmath.zip"] = (static / "tmath" / "tmath.zip").stat().st_size
    return written


def _notebook(app, docname: str) -> dict | None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return None
    return json.loads(path.read_text(encoding="utf-8"))


_PAGES: dict[str, dict] = {}  # docname -> what computes on it (set at doctree-resolved)
_STATE: dict = {}  # this build's hash table, module table and widget options
_COUNTS: dict[str, dict[str, int]] = {}


def _answer_box(label: str, entry: dict):
    from html import escape

    from docutils import nodes

    unit = entry.get("unit") or ""
    hint = f"（单位：{unit}）" if unit else ""
    html = (f'<div class="tmath-answer" data-label="{escape(label)}">'
            f'<label>你的答案 <code>{escape(label)}</code>{escape(hint)}'
            f'<input type="text" inputmode="decimal" autocomplete="off" spellcheck="false"></label>'
            f'<button type="button">检查</button><output aria-live="polite"></output></div>')
    return nodes.raw("", html, format="html")


def _doctree_resolved(app, doctree, docname: str) -> None:
    if app.builder.format != "html":
        return
    from docutils import nodes

    info = {"widgets": 0, "answers": 0, "cells": {}}
    for raw in doctree.findall(nodes.raw):
        if "tmath-widget" in raw.astext():
            info["widgets"] += 1
    # answer boxes under every exercise with a numeric key
    from sphinx_exercise.nodes import exercise_enumerable_node

    table = _STATE["hashes"]
    for ex in doctree.findall(exercise_enumerable_node):
        label = ex.get("label", "")
        parts = [k for k in table if k == label or k.startswith(label + "/")]
        if not parts:
            continue
        box = nodes.container(classes=["tmath-answers"])
        for part in parts:
            box += _answer_box(part, table[part])
        ex += box
        info["answers"] += len(parts)
    # cells the reader can run
    nb = _notebook(app, docname)
    if nb is not None:
        cells = classify(nb, _STATE["modules"])
        by_index = {c.index: c for c in cells}
        runnable = 0
        for container in doctree.findall(nodes.container):
            if container.get("nb_element") != "cell_code":
                continue
            cell = by_index.get(container.get("cell_index"))
            if cell is None:
                continue
            if cell.runnable:
                runnable += 1
                container["classes"].append("tmath-runnable")
                container["classes"].append(f"tmath-cell-{cell.index}")
                info["cells"][str(cell.index)] = {"prelude": cell.prelude, "source": cell.source}
        reasons: dict[str, int] = {}
        for c in cells:
            if not c.runnable:
                reasons[c.reason] = reasons.get(c.reason, 0) + 1
        _COUNTS[docname] = {"runnable": runnable, **{f"not:{k}": v for k, v in reasons.items()}}
        if cells:
            note = nodes.raw("", _cells_note(runnable, reasons), format="html")
            first = next((c for c in doctree.findall(nodes.container)
                          if c.get("nb_element") == "cell_code"), None)
            if first is not None:
                first.parent.insert(first.parent.index(first), note)
    if info["widgets"] or info["answers"] or info["cells"]:
        _PAGES[docname] = info


#: How the page says why a cell cannot run there.
REASON_TEXT = {
    "子进程": "要启动子进程（torch.distributed 的多进程）",
    "隐藏单元格": "要用网页上隐藏的单元格算出的量",
    "交互控件": "是 Jupyter 的交互控件",
    "答案钥匙": "要用答案钥匙",
}


def _cells_note(runnable: int, reasons: dict[str, int]) -> str:
    why = "，".join(f"{n} 个{REASON_TEXT.get(r, '要用 ' + r)}"
                    for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])))
    if runnable:
        text = (f"本页有 {runnable} 个代码单元格可以在浏览器里运行：按“在浏览器里运行”，改动代码再运行，"
                "用的是本书的 tmath 与 SymPy")
        if reasons:
            text += f"；其余 {sum(reasons.values())} 个不能（{why}，网页里的 Python 没有这些）"
    else:
        text = f"本页的代码单元格都不能在浏览器里运行（{why}，网页里的 Python 没有这些）"
    return f'<p class="tmath-cells-note">{text}。</p>'


def _page_context(app, pagename, templatename, context, doctree) -> None:
    info = _PAGES.get(pagename)
    if not info:
        return
    # Added in html-page-context, an asset goes to this page only (Sphinx resets the lists).
    app.add_css_file("tmath/tmath.css")
    app.add_js_file("tmath/tmath.js", defer="defer")
    data = {"page": pagename, "cells": info["cells"], "options": _STATE["options"]}
    blob = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    context["body"] = (context.get("body", "") +
                       f'<script type="application/json" id="tmath-page">{blob}</script>')


#: The command lines a page's form can stand for (``data-kind``): ``serve`` once tmath has it.
WIDGET_KINDS = ("ledger", "plan", "serve")
#: The tensor-parallel degrees the calculator's form tries for each preset.
TP_TRIED = (1, 2, 4, 8, 16)


def widget_options() -> dict:
    """What the forms offer, from tmath itself (the page has no Python before a reader asks for
    a computation, so the build writes it into the page): the presets, GPUs, data types and
    recipes; the flags of each command a form stands for (:func:`tmath.web.describe`, from the
    command line's own parser: a flag added there appears in the form); and for each preset
    the TP degrees its ledger computes with (the heads must split evenly), so the form starts
    on one that works and says which do."""
    import tmath
    from tmath.hardware import hardware_names
    from tmath.memory import RECIPES
    from tmath.serving import DTYPE_BYTES
    from tmath.web import describe, run_cli

    dtypes = [d for d in DTYPE_BYTES if not d.startswith(("float", "bfloat"))]  # not aliases
    flags = {}
    for kind in WIDGET_KINDS:
        try:
            flags[kind] = describe(kind)
        except KeyError:  # a command this tmath does not have (yet)
            pass
    tp_ok = {name: [tp for tp in TP_TRIED
                    if json.loads(run_cli(["ledger", "--preset", name, "--tp", str(tp), "--json"]))
                    ["exitCode"] == 0] for name in tmath.presets()}
    options = {"presets": tmath.presets(), "gpus": hardware_names(), "dtypes": dtypes,
               "recipes": list(RECIPES), "flags": flags, "tp_ok": tp_ok}
    if "serve" in flags:
        options["serve_tp_ok"] = {name: serve_tps(name, tp_ok[name]) for name in tmath.presets()}
    return options


def serve_tps(preset: str, tps: list[int]) -> list[int]:
    """The TP degrees (of ``tps``, those the heads split into) at which ``tmath serve``'s
    defaults (H100, bf16 weights) hold the preset's weights and a short request: the serve
    form starts a preset on the smallest of them, and says which they are."""
    from tmath.web import run_cli

    fit = []
    for tp in tps:
        r = json.loads(run_cli(["serve", "--preset", preset, "--tp", str(tp), "--prompt-len", "1",
                                "--output-len", "1", "--json"]))
        if r["exitCode"] == 0 and json.loads(r["stdout"])["feasibility"]["feasible"]:
            fit.append(tp)
    return fit


def _builder_inited(app) -> None:
    if app.builder.format != "html":
        return
    _STATE["modules"] = ModuleTable()
    _STATE["hashes"] = _hash_table()
    _STATE["options"] = widget_options()


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    copy_runtime(Path(app.outdir), _STATE["hashes"])
    total = sum(v.get("runnable", 0) for v in _COUNTS.values())
    reasons: dict[str, int] = {}
    for counts in _COUNTS.values():
        for k, v in counts.items():
            if k.startswith("not:"):
                reasons[k[4:]] = reasons.get(k[4:], 0) + v
    logging.getLogger(__name__).info(
        "tmath in the browser: %d pages compute; %d visible code cells run in the page, %d do not "
        "(%s)", len(_PAGES), total, sum(reasons.values()),
        ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=lambda x: -x[1])))


def _fingerprint() -> str:
    """Of what decides the pages' boxes and runnable cells: lib/tmath and this extension."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted([*(ROOT / "lib" / "tmath").rglob("*.py"), Path(__file__)]):
        h.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _outdated(app, env, added, changed, removed) -> list[str]:
    """Every page again when lib/tmath or this extension changed since the last build."""
    print_ = _fingerprint()
    if getattr(env, "tmath_fingerprint", None) != print_:
        env.tmath_fingerprint = print_
        return sorted(env.found_docs)
    return []


def setup(app):
    app.connect("env-get-outdated", _outdated)
    app.connect("builder-inited", _builder_inited)
    app.connect("doctree-resolved", _doctree_resolved)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": False}

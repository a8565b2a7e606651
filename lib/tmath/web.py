"""The book's website runs ``tmath`` in the reader's browser (Pyodide, in a Web Worker).

This module is the small Python side of that: the page's script (``tmath.js``, copied into
the site by ``book/_ext/pyodide_site.py``) only moves strings and draws the page, and every
number it shows comes from here, that is from the same ``tmath`` the book, the command line
and the tests use.

- :func:`run_cli` runs ``tmath``'s command line with the argv a terminal would take, after
  writing the reader's files (an uploaded ``config.json``) into a fresh folder: what it
  returns is what ``python -m tmath ARGV`` prints, byte for byte, and its exit status.
- :func:`run_cell` runs a cell the reader edited on the page and returns what a notebook
  would show of it (what it prints, and the value of its last expression as text and, for a
  SymPy object, as LaTeX).
- :func:`check_answer` checks an answer against the site's hashed keys, as ``tmath.check``
  does; it never sees a key.

All three return plain JSON text, so the worker hands them to the page unchanged. Nothing
here runs code that came from a URL: the page passes argv strings and file contents (data),
and a cell's source only when the reader has typed or run it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
from typing import Any

__all__ = ["run_cli", "run_cell", "run_prelude", "check_answer", "reset_cells", "display", "shown",
           "describe"]

#: Where the reader's files are written: a new folder for each run, removed afterwards.
_WORK_ROOT = os.path.join(tempfile.gettempdir(), "tmath-web")
#: The folder the reader's files are written to (fresh each run, inside a new temporary one):
#: a config.json without ``_name_or_path`` takes its folder's name, as in a terminal, so the
#: page prints this name, not a random one.
WORK_NAME = "你的模型"
#: The largest file the page may pass (the command line reads a config.json whole).
MAX_FILE_BYTES = 64 * 2**20


def _safe_name(name: str) -> str:
    """A file name the reader gave (``config.json``, ``Qwen3-8B/config.json``), kept inside
    the run's folder: no absolute path, no ``..``."""
    text = str(name).replace("\\", "/")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or text.startswith("/") or any(p == ".." for p in parts):
        raise ValueError(f"文件名 {name!r} 不可用：请给出相对路径，不含 ..")
    return os.path.join(*parts)


def run_cli(argv: list[str] | str, files: dict[str, str] | None = None) -> str:
    """Run ``python -m tmath *argv`` here; return ``{"stdout", "stderr", "exitCode"}`` as JSON.

    ``argv`` is a list of strings (or its JSON text); ``files`` maps relative file names to
    their text, written into a new folder that is the current directory while the command
    runs.  The output is what the terminal shows: the command line's own text and errors, its
    exit status (0, or 2 for an error it explains), and for a failure it does not explain,
    Python's traceback and status 1, as ``python -m`` would give.
    """
    from tmath.cli import main

    if isinstance(argv, str):
        argv = json.loads(argv)
    if isinstance(files, str):
        files = json.loads(files)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a list of strings")
    os.makedirs(_WORK_ROOT, exist_ok=True)
    top = tempfile.mkdtemp(dir=_WORK_ROOT)
    work = os.path.join(top, WORK_NAME)
    os.makedirs(work)
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        for name, text in (files or {}).items():
            path = os.path.join(work, _safe_name(name))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = str(text).encode("utf-8")
            if len(data) > MAX_FILE_BYTES:
                raise ValueError(f"文件 {name} 太大：{len(data):,} 字节，上限 {MAX_FILE_BYTES:,} 字节")
            with open(path, "wb") as fh:
                fh.write(data)
        os.chdir(work)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(argv))
            except SystemExit as e:  # argparse's --help, or a sub-command that exits
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if e.code is not None and not isinstance(e.code, int):
                    print(e.code, file=sys.stderr)
            except BaseException:  # what `python -m tmath` would print: a traceback, status 1
                traceback.print_exc()
                status = 1
    except ValueError as e:
        err.write(f"tmath: 错误：{e}\n")
        status = 2
    finally:
        os.chdir(here)
        shutil.rmtree(top, ignore_errors=True)
    return json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue(),
                       "exitCode": int(status or 0)}, ensure_ascii=False)


#: Lists the command line checks only when it runs (no ``choices`` in its parser): the form
#: offers them as a list, from tmath itself.
def _known_values(command: str, dest: str) -> list[str] | None:
    if dest == "gpu":
        from tmath.hardware import NODES, hardware_names

        return list(NODES) if command == "plan" else list(hardware_names())
    if dest == "recipe":
        from tmath.memory import RECIPES

        return list(RECIPES)
    if dest == "dtype":
        from tmath.serving import DTYPE_BYTES

        return [d for d in DTYPE_BYTES if not d.startswith(("float", "bfloat"))]  # not aliases
    return None


def _short_label(help_text: str) -> str:
    """The words of a flag's help before its first clause, with their unit in brackets
    (``每卡显存（GB，10⁹ 字节）``); a long bracket (a list of names) is left to the help."""
    depth, end = 0, len(help_text)
    for i, ch in enumerate(help_text):
        depth += ch in "（("
        depth -= ch in "）)"
        if depth == 0 and ch in "，；：,;":
            end = i
            break
    label = re.sub(r"（默认[^）]*）", "", help_text[:end]).strip()
    if len(label) > 24:
        label = label.split("（")[0].split("(")[0].strip()
    return label


def describe(command: str) -> list[dict[str, Any]]:
    """The flags of ``tmath COMMAND`` as its own argparse parser declares them, for the page's
    form (one source of truth: a flag added to the command line appears in the form).

    Each flag is ``{"flag", "label", "help", "type", "choices", "default"}``: ``type`` is
    ``int``, ``float``, ``str`` or ``switch`` (a flag without a value); ``choices`` the values
    the parser accepts (or the list it checks them against when it runs: GPUs, recipes, data
    types), else None; ``default`` the parser's default as text (``""`` for none).  ``--help``,
    ``--json``, ``--preset`` and the positional CONFIG are the form's own business and left out.
    Raises ``KeyError`` for a command the command line does not have.
    """
    import argparse

    from tmath.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    flags = []
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or longs[0] in ("--help", "--json", "--preset"):
            continue
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
            kind = "switch"
        elif action.type is int:
            kind = "int"
        elif action.type is float:
            kind = "float"
        else:
            kind = "str"
        choices = action.choices if action.choices is not None else _known_values(command, action.dest)
        default = "" if action.default is None or kind == "switch" else str(action.default)
        help_text = " ".join(str(action.help or "").split())
        flags.append({"flag": longs[0], "label": _short_label(help_text) or longs[0],
                      "help": help_text, "type": kind,
                      "choices": None if choices is None else [str(c) for c in choices],
                      "default": default})
    return flags


# --- cells the reader runs on the page -----------------------------------------------------

_CELL_NAMESPACES: dict[str, dict[str, Any]] = {}
#: The outputs of the cell that is running (what ``display`` and ``print`` add to).
_OUTPUTS: list[dict[str, str]] = []


def reset_cells(page: str) -> None:
    """Forget what the cells of ``page`` defined (the page's "重新开始")."""
    _CELL_NAMESPACES.pop(page, None)


class _Stream(io.TextIOBase):
    """``sys.stdout`` while a cell runs: text goes to the cell's outputs, in order with what
    it displays (consecutive writes make one output, as a notebook shows them)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if _OUTPUTS and _OUTPUTS[-1].get("stream") == self.name:
            _OUTPUTS[-1]["text"] += text
        else:
            _OUTPUTS.append({"stream": self.name, "text": text})
        return len(text)


def shown(value: Any) -> dict[str, str]:
    """What a notebook shows of ``value``: its text and, where it has them, its LaTeX and
    Markdown (``_repr_latex_``, ``_repr_markdown_``)."""
    if isinstance(value, dict | list | tuple | set | frozenset):  # as IPython pretty-prints
        import pprint

        data = {"text/plain": pprint.pformat(value, width=79, sort_dicts=False)}
    else:
        data = {"text/plain": repr(value)}
    for mime, method in (("text/latex", "_repr_latex_"), ("text/markdown", "_repr_markdown_")):
        fn = getattr(value, method, None)
        if callable(fn):
            with contextlib.suppress(Exception):
                text = fn()
                if isinstance(text, str):
                    data[mime] = text
    return data


def display(*values: Any) -> None:
    """``IPython.display.display`` in the page: each value becomes one output of the cell."""
    for value in values:
        if value is not None:
            _OUTPUTS.append({"data": shown(value)})


def run_prelude(page: str, statements: list[str] | str) -> str:
    """Run, one by one, the statements of earlier cells that a cell needs (those of a cell the
    page cannot run as a whole that can run here: its imports of SymPy and tmath, say);
    returns JSON ``{"errors": [...]}``, one line per statement that raised."""
    if isinstance(statements, str):
        statements = json.loads(statements)
    errors = []
    for source in statements:
        result = json.loads(run_cell(page, source))
        if result["error"]:
            errors.append(result["error"])
    return json.dumps({"errors": errors}, ensure_ascii=False)


def run_cell(page: str, source: str) -> str:
    """Run one cell's ``source`` in ``page``'s namespace, as a notebook would.

    Returns JSON ``{"outputs": [...], "error": ...}``: the outputs in the order the cell made
    them, each ``{"stream": "stdout", "text": …}`` or ``{"data": {"text/plain": …,
    "text/latex": …}}`` (what it displayed, then the value of its last expression unless
    that is None), and, when it raised, the error as Python's last line of a traceback
    (``error``) and its whole traceback from the cell's frames on (``traceback``).
    ``input()`` raises an OSError that says, in Chinese, that the page has no keyboard input.
    """
    import builtins
    import linecache

    ns = _CELL_NAMESPACES.setdefault(page, {"__name__": "__main__"})
    _OUTPUTS.clear()
    error = tb_text = None
    # the cell's lines, for its traceback (as IPython shows them)
    linecache.cache[CELL_FILE] = (len(source), None, source.splitlines(True), CELL_FILE)
    own_input = builtins.input
    builtins.input = _no_input
    try:
        tree = ast.parse(source, filename=CELL_FILE, mode="exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        with contextlib.redirect_stdout(_Stream("stdout")), \
                contextlib.redirect_stderr(_Stream("stderr")):
            exec(compile(tree, CELL_FILE, "exec"), ns)  # noqa: S102 - the reader's own cell
            if last is not None:
                display(eval(compile(last, CELL_FILE, "eval"), ns))  # noqa: S307
    except BaseException as e:  # the reader's code: report it, never stop the worker
        error = "".join(traceback.format_exception_only(type(e), e)).strip()
        tb_text = _cell_traceback(e)
    finally:
        builtins.input = own_input
    outputs = list(_OUTPUTS)
    _OUTPUTS.clear()
    return json.dumps({"outputs": outputs, "error": error, "traceback": tb_text}, ensure_ascii=False)


#: The file name a cell's code runs under (its traceback names it, with its lines).
CELL_FILE = "<单元格>"
#: What ``input()`` says in the page: there is no keyboard for Python in a Web Worker.
NO_INPUT = ("网页里的 Python 不能读取键盘输入（input()）：请把值直接写进代码，例如 n = 8；"
            "要交互地运行，请在 JupyterLab 里打开这个笔记本")


def _no_input(prompt: Any = "") -> str:
    raise OSError(NO_INPUT)


def _cell_traceback(e: BaseException) -> str:
    """Python's traceback of ``e`` from the cell's own frames on (not this module's), with
    the cell's lines, as a notebook shows it."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CELL_FILE:
        tb = tb.tb_next
    if isinstance(e, SyntaxError):
        tb = None  # a cell that does not parse: the caret under the line says it all
    frames = [f for f in traceback.extract_tb(tb) if f.name != _no_input.__name__ or
              f.filename != __file__]  # input()'s own frame is the page's, not the reader's
    head = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    return "".join(head + traceback.format_exception_only(type(e), e)).rstrip()


# --- answer boxes ------------------------------------------------------------------------


#: What an answer box says where the browser offers no Web Crypto (a page served over plain
#: HTTP from another machine): the hashes are too costly for Python in the page.
NO_WEB_CRYPTO = ("这个页面不在浏览器的安全上下文里（既不是 https，也不是本机的 localhost），浏览器不提供"
                 "核对答案要用的 Web Crypto：请用 https 打开本书，或在本机用 http://localhost 打开")
#: Below this many PBKDF2 iterations (the test suite's sites), Python in the page may hash.
PYTHON_HASH_LIMIT = 100_000


class _NoWebCrypto(Exception):
    pass


async def _digests(key: Any, cells: list[str]) -> list[str]:
    """The key's hashes of ``cells``: in the browser through Web Crypto's PBKDF2 (Pyodide's
    hashlib has no ``pbkdf2_hmac``), all at once (the browser hashes them on its own threads);
    elsewhere with hashlib."""
    try:
        import js  # Pyodide
        from pyodide.ffi import to_js
    except ImportError:
        return [key.digest_of(cell) for cell in cells]
    subtle = getattr(getattr(js, "crypto", None), "subtle", None)
    if subtle is None:
        if key.iterations > PYTHON_HASH_LIMIT:
            raise _NoWebCrypto
        return [key.digest_of(cell) for cell in cells]  # the pure-Python PBKDF2: the same bytes

    async def one(cell: str) -> str:
        password, salt = key.hash_input(cell)
        base = await subtle.importKey("raw", to_js(password), "PBKDF2", False, to_js(["deriveBits"]))
        params = to_js({"name": "PBKDF2", "hash": "SHA-256", "salt": to_js(salt),
                        "iterations": key.iterations}, dict_converter=js.Object.fromEntries)
        bits = await subtle.deriveBits(params, base, 256)
        return bytes(js.Uint8Array.new(bits).to_py()).hex()

    import asyncio

    return list(await asyncio.gather(*(one(cell) for cell in cells)))


def _read_number(text: str) -> float | int:
    raw = str(text).strip().replace(",", "").replace("，", "").replace("_", "")
    if raw.endswith("%"):
        raw = raw[:-1].strip()
    return int(raw) if raw.lstrip("+-").isdigit() else float(raw)


async def check_answer(label: str, text: str) -> str:
    """Check the answer ``text`` (what the reader typed) to exercise ``label``.

    Returns JSON ``{"correct": bool, "message": …}``: the verdict ``tmath.check`` prints
    (✓ 正确 / ✗ 还不对 with the tolerance), never the key, by the same grid rule against the
    same salted PBKDF2 hashes as the course kit.  ``text`` is read as a number (``1.5e9``,
    ``1,234``; ``12.5%`` is read as 12.5); anything else is refused in Chinese.
    """
    from tmath.exercises import key_and_value, verdict

    try:
        value = _read_number(text)
    except ValueError:
        return json.dumps({"correct": False, "message": f"“{str(text)[:40]}”不是一个数：请只填数字，"
                           "例如 1.5e9 或 12.5"}, ensure_ascii=False)
    try:
        key, x = key_and_value(value, label)
    except (TypeError, ValueError) as e:
        return json.dumps({"correct": False, "message": str(e)}, ensure_ascii=False)
    if key.compute is not None:  # the full edition's keys (not the website's bundle)
        ok = key.accepts(x)
    else:
        cells = key.candidates(x)
        ok = None if cells is None and key.count else False
        try:
            # the answer's own cell first (a right answer mostly ends there), then the rest at once
            for wave in (cells[:1], cells[1:]) if cells else ():
                if key.digest in await _digests(key, wave):
                    ok = True
                    break
        except _NoWebCrypto:
            return json.dumps({"correct": False, "message": NO_WEB_CRYPTO}, ensure_ascii=False)
    result = verdict(key, ok)
    return json.dumps({"correct": bool(result), "message": repr(result)}, ensure_ascii=False)

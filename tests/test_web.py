"""tmath.web (what the website's Web Worker calls) and the build's choice of runnable cells,
in CPython: the same functions tests/test_site_compute.py runs in Pyodide in Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import pyodide_site  # noqa: E402
from derivation_cells import derivation_cells  # noqa: E402

import tmath.exercises as ex  # noqa: E402
from tmath import web  # noqa: E402

# --- run_cli: the command line, byte for byte -----------------------------------------------

ARGVS = [
    ["ledger", "--preset", "llama3-70b", "--tp", "8"],
    ["ledger", "--preset", "gpt2", "--json"],
    ["plan", "--preset", "llama3-70b", "--dp", "8", "--tp", "8", "--pp", "4"],
    ["ledger", "--preset", "llama3-70b", "--tp", "7"],
    ["ledger", "--preset", "llama3-70b", "--tp", "7", "--json"],
    ["plan", "--help"],
    ["presets"],
    ["nonsense"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a)[:40])
def test_run_cli_prints_what_python_m_tmath_prints(argv, tmp_path):
    real = subprocess.run([sys.executable, "-m", "tmath", *argv], capture_output=True, text=True,
                          cwd=tmp_path, env=dict(os.environ, COLUMNS="80"))
    got = json.loads(web.run_cli(argv))
    assert got == {"stdout": real.stdout, "stderr": real.stderr, "exitCode": real.returncode}
    # the tests of the page compare with this in-process run: it is the same text too
    from test_site_compute import cli

    assert cli(argv) == got


def test_run_cli_writes_the_reader_s_files_in_a_folder_of_their_own(tmp_path):
    here = os.getcwd()
    config = (ROOT / "tests" / "hf_configs" / "qwen3-8b.json").read_text(encoding="utf-8")
    got = json.loads(web.run_cli(json.dumps(["ledger", "Qwen3-8B", "--json"]),
                                 json.dumps({"Qwen3-8B/config.json": config})))
    assert got["exitCode"] == 0 and json.loads(got["stdout"])["model"]["model_type"] == "qwen3"
    assert os.getcwd() == here
    for bad in ("../escape.json", "/etc/passwd"):
        got = json.loads(web.run_cli(["ledger", bad], {bad: "{}"}))
        assert got["exitCode"] == 2 and "不可用" in got["stderr"] and not got["stdout"]
    assert not (ROOT.parent / "escape.json").exists()


# --- run_cell: what a notebook shows -----------------------------------------------------------

def test_run_cell_shows_prints_displays_and_the_last_value_in_order():
    web.reset_cells("t")
    r = json.loads(web.run_cell("t", "x = 2\nprint('a')\nprint('b')\n{'k': 1, 'j': [1] * 40}"))
    assert r["error"] is None
    assert r["outputs"][0] == {"stream": "stdout", "text": "a\nb\n"}
    assert r["outputs"][1]["data"]["text/plain"].startswith("{'k': 1,\n 'j': [1,")  # IPython's pretty
    r = json.loads(web.run_cell("t", "x + 1"))
    assert r["outputs"] == [{"data": {"text/plain": "3"}}]
    assert json.loads(web.run_cell("other", "x"))["error"] == "NameError: name 'x' is not defined"
    web.reset_cells("t")
    assert json.loads(web.run_cell("t", "x"))["error"].startswith("NameError")
    assert json.loads(web.run_cell("t", "x = 1\nx = None"))["outputs"] == []


def test_run_cell_shows_sympy_as_latex_and_display_in_order():
    r = json.loads(web.run_cell("s", "import sympy as sp\nfrom tmath.web import display\n"
                                "d = sp.Symbol('d')\ndisplay(d**2)\nprint('then')\n12 * d**2"))
    kinds = [("stream" in o, o.get("data", {}).get("text/latex")) for o in r["outputs"]]
    assert kinds == [(False, "$\\displaystyle d^{2}$"), (True, None), (False, "$\\displaystyle 12 d^{2}$")]


def test_run_prelude_runs_each_statement_and_reports_the_ones_that_fail():
    r = json.loads(web.run_prelude("p", json.dumps(["a = 1", "b = nope", "c = a + 1"])))
    assert r == {"errors": ["NameError: name 'nope' is not defined"]}
    assert json.loads(web.run_cell("p", "c"))["outputs"] == [{"data": {"text/plain": "2"}}]



def test_run_cell_gives_the_cell_s_traceback_and_says_input_cannot_read():
    r = json.loads(web.run_cell("tb", "def f(n):\n    return 1 / n\n\ny = f(0)"))
    assert r["error"] == "ZeroDivisionError: division by zero"
    lines = r["traceback"].splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1] == r["error"]
    assert 'File "<单元格>", line 4, in <module>' in r["traceback"] and "return 1 / n" in r["traceback"]
    assert "web.py" not in r["traceback"]  # the page's own frames are not the reader's
    r = json.loads(web.run_cell("tb", "n = int(input('层数？'))"))
    assert r["error"].startswith("OSError: 网页里的 Python 不能读取键盘输入（input()）")
    assert "web.py" not in r["traceback"] and "input('层数？')" in r["traceback"]
    import builtins

    assert builtins.input is not web._no_input  # input() is the page's only while a cell runs
    assert json.loads(web.run_cell("tb", "x = 1"))["traceback"] is None


# --- describe: the form's fields are the command line's flags -------------------------------

def test_describe_gives_every_flag_of_the_parser_with_its_type_choices_and_default():
    import argparse

    from tmath.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("ledger", "plan"):
        flags = {f["flag"]: f for f in web.describe(command)}
        declared = {a.option_strings[-1] for a in sub.choices[command]._actions
                    if a.option_strings and a.option_strings[-1].startswith("--")}
        assert set(flags) == declared - {"--help", "--json", "--preset"}
        for f in flags.values():  # every label and help is the reader's language
            assert any("\u4e00" <= ch <= "\u9fff" for ch in f["label"] + f["help"]), f
    plan = {f["flag"]: f for f in web.describe("plan")}
    assert {"--stage-layers", "--sequence-parallel", "--order", "--stage", "--hbm-gb",
            "--intra-gbs", "--inter-gbs", "--gpus-per-node", "--recipe"} <= set(plan)
    assert plan["--zero"] == {**plan["--zero"], "type": "int", "choices": ["0", "1", "2", "3"],
                              "default": "0"}
    assert plan["--sequence-parallel"]["choices"] == ["on", "off"]
    assert plan["--sequence-parallel"]["default"] == ""
    assert plan["--hbm-gb"]["type"] == "float" and plan["--stage-layers"]["type"] == "str"
    from tmath.hardware import NODES
    from tmath.memory import RECIPES

    assert plan["--gpu"]["choices"] == list(NODES) and plan["--recipe"]["choices"] == list(RECIPES)
    assert plan["--seq-len"]["label"] == "序列长度 T"
    assert plan["--hbm-gb"]["label"] == "每卡显存（GB，10⁹ 字节）"
    ledger = {f["flag"]: f for f in web.describe("ledger")}
    assert ledger["--seq-len"]["default"] == "" and ledger["--tp"]["default"] == "1"
    assert ledger["--batch"]["label"] == "每步的序列数 B"  # "（默认 1）" is the help's, not the label's
    with pytest.raises(KeyError):
        web.describe("no-such-command")


def test_the_build_tells_the_calculator_which_tp_each_preset_computes_with():
    import tmath

    options = pyodide_site.widget_options()
    assert set(options["tp_ok"]) == set(tmath.presets())
    for name, ok in options["tp_ok"].items():
        cfg = tmath.preset(name)
        assert 1 in ok and all(cfg.num_heads % tp == 0 for tp in ok), name
    assert options["tp_ok"]["gpt2"] == [1, 2, 4]  # 12 heads: TP 8 cannot split them
    assert options["tp_ok"]["qwen2-7b"] == [1, 2, 4]  # 28 heads, 4 KV heads
    assert 8 in options["tp_ok"]["llama3-70b"]
    assert {"ledger", "plan"} <= set(options["flags"])


def test_the_build_tells_the_serve_form_which_tp_holds_each_preset():
    """serve_tp_ok: the TP degrees whose H100s (80 GiB; 5 GB of workspace) hold the preset's
    bf16 weights, among those its heads split into; by the weights' arithmetic, not the code's."""
    import tmath

    options = pyodide_site.widget_options()
    fit = options["serve_tp_ok"]
    assert set(fit) == set(tmath.presets())
    hbm = tmath.get_hardware("H100").hbm_bytes
    for name, tps in fit.items():
        assert set(tps) <= set(options["tp_ok"][name]), name
        weights = 2 * tmath.count_params(tmath.preset(name)).total
        for tp in tps:  # a TP offered holds a share of the weights and the workspace
            assert weights / tp + 5e9 < hbm, (name, tp)
    assert fit["llama3-70b"] == [2, 4, 8]  # 141 GB: not on one 85.9 GB H100, on two
    assert fit["gpt2-xl"] == [1]  # 25 heads
    assert fit["deepseek-v3"] == [] and fit["llama3.1-405b"] == []  # 1.3 TB, 811 GB in bf16
    assert "serve" in options["flags"]


@pytest.mark.parametrize("layers,pp", [(61, 16), (126, 16), (30, 4), (7, 2)])
def test_an_uneven_pipeline_error_suggests_a_split_that_works(layers, pp):
    """The error for pp not dividing the layers names --stage-layers with a list that adds up,
    and pp_edge_layers only where some edge works (never for 61 layers over 16 stages)."""
    import re

    import tmath
    from tmath.layout import LayoutError, _stage_layers, parse_stage_layers

    cfg = replace(tmath.preset("llama3-8b"), num_layers=layers)
    with pytest.raises(LayoutError) as e:
        _stage_layers(cfg, pp, None)
    message = str(e.value)
    listed = re.search(r"--stage-layers）逐段给出层数，例如 ([0-9*,]+)", message).group(1)
    assert _stage_layers(cfg, pp, None, listed) == parse_stage_layers(listed)  # it works
    edge = re.search(r"让首末两段各放 (\d+) 层", message)
    works = [e for e in range(1, layers // 2 + 1) if (pp == 2 and layers == 2 * e) or
             (pp > 2 and layers - 2 * e >= pp - 2 and (layers - 2 * e) % (pp - 2) == 0)]
    assert bool(edge) == bool(works), message
    if edge:
        assert len(_stage_layers(cfg, pp, int(edge.group(1)))) == pp
    if (layers, pp) == (61, 16):
        assert "pp_edge_layers" not in message and "4*13,3*3" in message


# --- check_answer: the kit's hashes, the kit's words ---------------------------------------

def _hashed(label: str):
    key = ex._KEYS[label]
    salted = replace(key, salt="00112233445566778899aabbccddeeff", iterations=3)
    return replace(salted, compute=None, digest=salted.key_digest())


def test_check_answer_right_wrong_and_not_a_number(monkeypatch):
    ex.labels()
    values = {label: float(ex._KEYS[label].compute()) for label in ("ex-tour-1", "ex-tour-1/share")}
    monkeypatch.setattr(ex, "_KEYS", {**ex._KEYS, **{label: _hashed(label) for label in values}})

    def ask(label, text):
        return json.loads(asyncio.run(web.check_answer(label, text)))

    n = int(values["ex-tour-1"])
    assert ask("ex-tour-1", f"{n:,}") == {"correct": True,
                                          "message": "ex-tour-1：✓ 正确（容差：精确整数（个参数））"}
    assert ask("ex-tour-1", str(n + 1))["correct"] is False
    assert "应为整数" in ask("ex-tour-1", str(n + 0.5))["message"]
    share = values["ex-tour-1/share"]
    assert ask("ex-tour-1/share", f"{share:.4g}%")["correct"] is True
    assert ask("ex-tour-1/share", f"{share / 100:.4g}")["correct"] is False  # 0.32, not 32 %
    assert "不是一个数" in ask("ex-tour-1", "abc")["message"]
    assert "没有练习" in ask("ex-nope-1", "1")["message"]
    assert "有限" in ask("ex-tour-1", "1e400")["message"]


def test_check_answer_without_web_crypto_says_why(monkeypatch):
    """A page outside a secure context has no crypto.subtle: with the book's slow hashes the
    box says so (Python in the page would take minutes a hash); with the suite's cheap ones it
    hashes in Python, to the same verdicts."""
    import sys
    import types

    ex.labels()
    value = float(ex._KEYS["ex-tour-1"].compute())
    fake_js = types.SimpleNamespace(crypto=types.SimpleNamespace())  # no .subtle
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = types.ModuleType("pyodide.ffi")
    pyodide.ffi.to_js = lambda x, **_: x
    monkeypatch.setitem(sys.modules, "js", fake_js)
    monkeypatch.setitem(sys.modules, "pyodide", pyodide)
    monkeypatch.setitem(sys.modules, "pyodide.ffi", pyodide.ffi)
    cheap = _hashed("ex-tour-1")
    monkeypatch.setattr(ex, "_KEYS", {**ex._KEYS, "ex-tour-1": cheap})
    assert json.loads(asyncio.run(web.check_answer("ex-tour-1", str(int(value)))))["correct"] is True
    monkeypatch.setitem(ex._KEYS, "ex-tour-1", replace(cheap, iterations=ex.KDF_ITERATIONS))
    r = json.loads(asyncio.run(web.check_answer("ex-tour-1", str(int(value)))))
    assert r == {"correct": False, "message": web.NO_WEB_CRYPTO} and "https" in r["message"]


# --- which cells run in the page -----------------------------------------------------------

def _nb(*cells: tuple[str, list[str]]) -> dict:
    return {"cells": [{"cell_type": "code", "source": src, "metadata": {"tags": tags}, "outputs": []}
                      for src, tags in cells]}


def test_classify_keeps_what_runs_in_the_page_and_says_why_not():
    nb = _nb(
        ("import numpy as np\nimport sympy as sp\nfrom tmath import diagrams, fmt\nimport tmath", []),
        ("x = sp.Symbol('x')\nfmt.sci(3.2e23)", []),                 # runs: sympy, fmt
        ("a = np.zeros(3)\nrows = []\nrows.append(np.ones(2))", []),  # NumPy
        ("a", []),                                                    # a came from NumPy
        ("rows", []),                                                 # mutated by a NumPy line
        ("y = 1", ["remove-cell"]),                                   # hidden
        ("y", []),                                                    # needs the hidden cell
        ("tmath.naive_attention", []),                                # imports NumPy when used
        ("tmath.count_params", []),                                   # does not
        ("from tmath.dist import run", []),                           # gloo processes
    )
    cells = {c.index: c for c in pyodide_site.classify(nb)}
    assert [i for i, c in cells.items() if c.runnable] == [1, 8]
    assert {i: c.reason for i, c in cells.items() if not c.runnable} == {
        0: "NumPy", 2: "NumPy", 3: "NumPy", 4: "NumPy", 6: "隐藏单元格", 7: "NumPy", 9: "子进程"}
    assert cells[1].prelude == ["import sympy as sp", "from tmath import fmt", "import tmath"]


def test_the_derivations_the_issue_names_run_in_the_page():
    wanted = derivation_cells()
    for page, indices in wanted.items():
        nb = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
        runnable = {c.index for c in pyodide_site.classify(nb) if c.runnable}
        assert indices <= runnable, (page, indices - runnable)


def test_a_graded_exercise_gets_no_hash_and_so_no_answer_box(monkeypatch, tmp_path):
    monkeypatch.setattr(pyodide_site, "ROOT", tmp_path)  # the cache of hashes goes there
    monkeypatch.setenv("BOOK_GRADED", "ex-tour-1, ex-moe-2")
    table = pyodide_site._hash_table()
    assert not [k for k in table if k.split("/")[0] in ("ex-tour-1", "ex-moe-2")]
    assert "ex-tour-2" in table and [k for k in table if k.startswith("ex-moe-1/")]
    monkeypatch.delenv("BOOK_GRADED")
    assert "ex-tour-1" in pyodide_site._hash_table() and "ex-tour-1/share" in pyodide_site._hash_table()


def test_the_kit_holds_no_hash_of_a_graded_exercise_and_records_its_answer(monkeypatch, tmp_path):
    import zipfile

    import student_kit

    monkeypatch.setenv("BOOK_GRADED", "ex-tour-1")
    wheel = student_kit.build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read("tmath/_answer_hashes.py").decode("utf-8")
    namespace: dict = {}
    exec(text, namespace)  # the kit's own module: data only
    assert not [k for k in namespace["KEYS"] if k.split("/")[0] == "ex-tour-1"]
    assert "ex-tour-2" in namespace["KEYS"]
    assert namespace["GRADED"] == ["ex-tour-1", "ex-tour-1/share"]
    # in the kit, an answer to a graded part is recorded for the grader and not checked
    monkeypatch.setattr(ex, "_GRADED", set(namespace["GRADED"]))
    message, record = ex.answer_record("ex-tour-1", 125)
    assert "由老师评分" in message and "✓" not in message and "✗" not in message
    assert record == {"label": "ex-tour-1", "value": 125}

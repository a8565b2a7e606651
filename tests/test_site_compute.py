"""The website computes (issue 30): the book's own tmath in Pyodide, in Chromium, offline.

These tests serve what ``book/_ext/pyodide_site.py`` puts into the site (Pyodide from npm,
the SymPy and mpmath wheels, tmath.zip, tmath.js and its worker) with one page made from the
same extension's pieces, and open it in Debian's Chromium, which resolves no host but
localhost. One Web Worker answers every check of the module, so Pyodide loads once:

- parity: ``window.tmathRun(argv, files)`` prints what the command line prints, byte for byte,
  with its exit status: every preset with three settings, 120 generated configs, 24 meshes of
  ``plan`` and a dozen hostile configs; ``serve`` likewise (the last section), its form too;
- every cell the site lets a reader run gives the output its notebook saved;
- the answer boxes say right and wrong with the kit's hashed keys (no key in the bundle);
- strings from a config or from the URL are shown as text, never as HTML.

The pages of the built site (that nothing loads before a reader asks, that the calculator
computes in its real page) are checked in ``tests/test_site.py``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import random
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlparse

import nbformat
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import pyodide_site  # noqa: E402
from derivation_cells import derivation_cells  # noqa: E402

from test_site import CHROMIUM, CHROMIUM_ARGS, LOCAL_HOSTS, OFFLINE_ARGS  # noqa: E402

HF_CONFIGS = ROOT / "tests" / "hf_configs"
#: Exercises whose answer boxes the page carries (parts included): more than 20.
BOX_EXERCISES = ("ex-tour-1", "ex-tour-2", "ex-tour-4", "ex-arch-1", "ex-sixpt-1", "ex-sixpt-2",
                 "ex-units-1", "ex-crossover-1", "ex-full-ledger-1", "ex-llama3-70b-1",
                 "ex-llama3-70b-2", "ex-moe-1", "ex-mem-1", "ex-flash-naive-1", "ex-flash-online-1",
                 "ex-energy-1", "ex-energy-2", "ex-collectives-1", "ex-data-1", "ex-tensor-1",
                 "ex-pipeline-1", "ex-together-1", "ex-fails-1", "ex-cheat-3", "ex-mh-1", "ex-fwd-1")


def cli(argv: list[str], files: dict[str, str] | None = None) -> dict:
    """What ``python -m tmath *argv`` prints (stdout, stderr, status), run in this process in a
    fresh folder holding ``files`` (tests/test_web.py shows it equal to a real process)."""
    from tmath.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    from tmath.web import WORK_NAME

    with tempfile.TemporaryDirectory() as top:
        work = Path(top, WORK_NAME)  # the folder's name is the model's when the config has none
        work.mkdir()
        for name, text in (files or {}).items():
            Path(work, name).write_text(text, encoding="utf-8")
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main(list(argv))
                except SystemExit as e:
                    status = e.code
        finally:
            os.chdir(here)
    return {"stdout": out.getvalue(), "stderr": err.getvalue(), "exitCode": int(status or 0)}


#: A script where the link gives the GPU: shown as text in the command line's error.
PAYLOAD = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
#: The link the test page is opened with: T = 4096, TP emptied, the GPU a payload.
PERMALINK = f"tmath=ledger&preset=llama3-70b&seq-len=4096&tp=&gpu={quote(PAYLOAD)}"


def box_labels() -> list[str]:
    import tmath.exercises as ex

    labels = ex.labels()
    chosen = [label for label in labels if label.split("/")[0] in BOX_EXERCISES]
    return chosen


@pytest.fixture(scope="module")
def compute_site(tmp_path_factory) -> Path:
    """The runtime as the build copies it, and one page with a ledger, a plan and a serve form,
    answer boxes and every runnable cell of the book (by page)."""
    from tmath.exercises import hash_table

    out = tmp_path_factory.mktemp("compute-site")
    labels = box_labels()
    table = hash_table(labels)
    pyodide_site.copy_runtime(out, table)
    boxes = "".join(pyodide_site._answer_box(label, table[label]).astext() for label in labels)
    options = pyodide_site.widget_options()
    page = {"page": "test", "cells": {}, "options": options}
    body = (
        '<div class="tmath-widget" data-kind="ledger" id="ledger"></div>'
        '<div class="tmath-widget" data-kind="plan" id="plan"></div>'
        '<div class="tmath-widget" data-kind="serve" id="serve"></div>' + boxes
    )
    (out / "index.html").write_text(
        '<!doctype html><html><head><meta charset="utf-8">'
        '<script defer src="_static/tmath/tmath.js"></script></head><body>'
        f"{body}<script type=\"application/json\" id=\"tmath-page\">{json.dumps(page)}</script>"
        "</body></html>", encoding="utf-8")
    (out / "cells.json").write_text(json.dumps(runnable_cells()), encoding="utf-8")
    return out


def runnable_cells() -> dict[str, dict]:
    """Every notebook's runnable cells, as the build marks them: {page: {index: cell}}."""
    table = pyodide_site.ModuleTable()
    pages = {}
    for path in sorted((ROOT / "book").rglob("*.ipynb")):
        cells = pyodide_site.classify(json.loads(path.read_text(encoding="utf-8")), table)
        runnable = {c.index: {"prelude": c.prelude, "source": c.source} for c in cells if c.runnable}
        if runnable:
            pages[path.relative_to(ROOT).with_suffix("").as_posix()] = runnable
    return pages


@pytest.fixture(scope="module")
def server(compute_site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(compute_site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    """One tab on the test page; every request it makes is recorded in ``page.requests``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            args=CHROMIUM_ARGS + OFFLINE_ARGS, headless=True)
        tab = context.new_page()
        tab.requests = []
        tab.errors = []
        tab.dialogs = []
        tab.on("request", lambda r: tab.requests.append(r.url))
        tab.on("pageerror", lambda e: tab.errors.append(str(e)))
        tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
        tab.set_default_timeout(120_000)
        # The tab opens a permalink, as a student opens the link a teacher sent: the page's
        # first computation is the link's (one Pyodide load for the whole module; that nothing
        # loads before a reader asks is checked on every page of the site, tests/test_site.py).
        tab.goto(f"{server}/index.html?{PERMALINK}", wait_until="load")
        yield tab
        context.close()


class Big(str):
    """A file's text that the page builds itself (``head`` + ``fill`` × ``n`` + ``tail``), so
    that 50 MB do not cross the test's connection to the browser."""

    def __new__(cls, head: str, fill: str, n: int, tail: str):
        text = super().__new__(cls, head + fill * n + tail)
        text.parts = [head, fill, n, tail]
        return text


def wait_status(page, form: str, word: str) -> None:
    """Wait until the status line of ``form`` says ``word`` (用时: done; 出错: an error)."""
    page.wait_for_function(
        "([form, word]) => document.querySelector(form + ' .tmath-status').textContent.includes(word)",
        arg=[form, word])


def run_many(page, jobs: list[tuple[list[str], dict[str, str]]]) -> list[dict]:
    """``tmathRun`` on each (argv, files), in order, in one round trip."""
    wire = [[a, {k: (["big", *v.parts] if isinstance(v, Big) else ["text", v]) for k, v in f.items()}]
            for a, f in jobs]
    return page.evaluate(
        """async jobs => {
          const out = [];
          for (const [argv, files] of jobs) {
            const made = {};
            for (const [name, [kind, ...v]] of Object.entries(files))
              made[name] = kind === "big" ? v[0] + v[1].repeat(v[2]) + v[3] : v[0];
            out.push(await tmathRun(argv, made));
          }
          return out;
        }""", wire)



def test_a_permalink_fills_the_form_and_its_strings_stay_text(page):
    """The link the fixture opened: an emptied field (TP) stays empty, and a value no list
    offers (the GPU, a script) goes to the command line as text, which names the field."""
    wait_status(page, "#ledger", "出错")
    form = page.locator("#ledger")
    assert form.locator("input[name='--tp']").input_value() == ""
    assert form.locator("select[name='--gpu']").input_value() == PAYLOAD
    want = cli(["ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--batch", "1", "--dtype",
                "bf16", "--gpu", PAYLOAD])
    assert want["exitCode"] == 2 and form.locator("pre.tmath-output").text_content() == want["stderr"]
    assert page.locator("img").count() == 0 and not page.dialogs and not page.errors
    # the form's own link carries every field, the emptied ones too
    form.locator("select[name='--gpu']").select_option("H100")
    link = page.evaluate("document.querySelector('#ledger').tmath.permalink()")
    query = dict(parse_qsl(urlparse(link).query, keep_blank_values=True))
    from tmath.web import describe

    flags = {f["flag"][2:]: f["default"] for f in describe("ledger")}
    assert set(query) == {"tmath", "preset"} | set(flags)  # every flag of the command line
    assert query == {**flags, "tmath": "ledger", "preset": "llama3-70b", "seq-len": "4096",
                     "batch": "1", "dtype": "bf16", "tp": "", "gpu": "H100"}
    assert page.evaluate("document.querySelector('#ledger').tmath.argv(false)") == [
        "ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--batch", "1", "--dtype", "bf16",
        "--gpu", "H100"]


# --- parity with the command line ----------------------------------------------------------

def preset_jobs() -> list[tuple[list[str], dict]]:
    import tmath

    jobs = []
    for name in tmath.presets():
        for extra in ([], ["--seq-len", "512", "--batch", "4", "--tp", "2", "--json"],
                      ["--dtype", "fp8", "--gpu", "H200", "--attention", "flash"]):
            jobs.append((["ledger", "--preset", name, *extra], {}))
    return jobs


def generated_configs(n: int = 120, seed: int = 30) -> list[tuple[list[str], dict]]:
    """Valid configs made from the real ones of tests/hf_configs: other depths, widths of the
    MLP, vocabularies, contexts and tying, with settings drawn for each."""
    rng = random.Random(seed)
    bases = sorted(p for p in HF_CONFIGS.glob("*.json"))
    jobs = []
    for i in range(n):
        cfg = json.loads(bases[i % len(bases)].read_text(encoding="utf-8"))
        text_cfg = cfg.get("text_config", cfg)
        if "num_hidden_layers" in text_cfg:
            text_cfg["num_hidden_layers"] = rng.randint(1, 2 * text_cfg["num_hidden_layers"])
            for key in ("layer_types", "sliding_window_pattern"):
                if isinstance(text_cfg.get(key), list):
                    text_cfg.pop(key)
        if "intermediate_size" in text_cfg and isinstance(text_cfg["intermediate_size"], int):
            text_cfg["intermediate_size"] = rng.randint(1, 4 * text_cfg["intermediate_size"])
        if "vocab_size" in text_cfg:
            text_cfg["vocab_size"] = rng.randint(1000, 300_000)
        if "tie_word_embeddings" in text_cfg:
            text_cfg["tie_word_embeddings"] = rng.random() < 0.5
        argv = ["ledger", "config.json", "--seq-len", str(rng.choice([1, 128, 1000, 2048, 4096])),
                "--batch", str(rng.randint(1, 64)), "--tp", str(rng.choice([1, 2, 4, 8])),
                "--dtype", rng.choice(["bf16", "fp8", "fp32", "int4"]),
                "--gpu", rng.choice(["H100", "H200", "A100", "TPUv5e"])]
        if rng.random() < 0.5:
            argv.append("--json")
        jobs.append((argv, {"config.json": json.dumps(cfg, indent=rng.choice([None, 2]))}))
    return jobs


def plan_jobs() -> list[tuple[list[str], dict]]:
    meshes = [(8, 8, 4, 1, 1), (128, 8, 16, 1, 1), (64, 8, 16, 1, 3), (16, 8, 8, 2, 1),
              (1, 1, 1, 1, 0), (2, 2, 2, 1, 2), (4, 8, 2, 1, 3), (32, 4, 4, 1, 1), (8, 2, 1, 4, 0),
              (16, 1, 4, 1, 2), (256, 8, 16, 1, 1), (8, 8, 8, 1, 0), (3, 8, 4, 1, 1), (8, 5, 4, 1, 1),
              (8, 8, 3, 1, 1)]  # dp, tp, pp, cp, zero: some cannot exist (the CLI says why)
    jobs = []
    for dp, tp, pp, cp, zero in meshes:
        jobs.append((["plan", "--preset", "llama3-70b", "--dp", str(dp), "--tp", str(tp), "--pp",
                      str(pp), "--cp", str(cp), "--zero", str(zero), "--seq-len", "8192"], {}))
    for dp, ep, tp, pp in [(64, 64, 1, 16), (32, 8, 8, 1), (16, 16, 1, 4), (8, 4, 2, 2), (8, 3, 1, 1)]:
        jobs.append((["plan", "--preset", "deepseek-v3", "--dp", str(dp), "--ep", str(ep), "--tp",
                      str(tp), "--pp", str(pp), "--zero", "1", "--seq-len", "4096", "--json"], {}))
    jobs.append((["plan", "--preset", "llama3.1-405b", "--dp", "128", "--tp", "8", "--pp", "16",
                  "--zero", "1", "--global-batch", "2048", "--seq-len", "8192",
                  "--pp-edge-layers", "7", "--recipe", "mixed-adam-fp32-grads"], {}))
    jobs.append((["plan", "--preset", "gpt2", "--dp", "4", "--recompute", "full", "--seq-len",
                  "1024", "--micro-batch", "2", "--global-batch", "64", "--json"], {}))
    jobs.append((["plan", "--help"], {}))
    jobs.append((["plan", "--preset", "llama3-70b", "--dp", "0"], {}))
    return jobs


def hostile_jobs() -> list[tuple[list[str], dict]]:
    good = json.loads((HF_CONFIGS / "llama3-8b.json").read_text(encoding="utf-8"))
    cases = {
        "not JSON": "{model_type: llama",
        "a list": "[1, 2, 3]",
        "deep nesting": "[" * 100_000 + "]" * 100_000,
        "10^30 layers": json.dumps({**good, "num_hidden_layers": 10**30}),
        "wrong type": json.dumps({**good, "num_hidden_layers": "80"}),
        "negative heads": json.dumps({**good, "num_attention_heads": -8}),
        "NaN": json.dumps({**good, "hidden_size": float("nan")}),
        "unknown model": json.dumps({**good, "model_type": "llama_xyz"}),
        "missing field": json.dumps({k: v for k, v in good.items() if k != "hidden_size"}),
        "xss model_type": json.dumps({**good, "model_type": "<img src=x onerror=alert(1)>"}),
        "50 MB": Big(json.dumps(good)[:-1] + ', "padding": "', "x", 50_000_000, '"}'),
        "NUL bytes": "\u0000" * 10,
    }
    jobs = []
    for text in cases.values():
        jobs.append((["ledger", "config.json", "--json"], {"config.json": text}))
        jobs.append((["ledger", "config.json"], {"config.json": text}))
    jobs.append((["ledger", "--preset", "no-such-model"], {}))
    jobs.append((["ledger", "--preset", "llama3-70b", "--tp", "1e23"], {}))
    jobs.append((["nonsense"], {}))
    return jobs


@pytest.mark.parametrize("jobs", ["presets", "generated", "plan", "hostile"])
def test_the_page_prints_what_the_command_line_prints(page, jobs):
    made = {"presets": preset_jobs, "generated": generated_configs, "plan": plan_jobs,
            "hostile": hostile_jobs}[jobs]()
    minimum = {"presets": 3 * 20, "generated": 100, "plan": 20, "hostile": 20}[jobs]
    assert len(made) >= minimum
    got = run_many(page, made)
    differ = [(argv, g, cli(argv, files)) for (argv, files), g in zip(made, got, strict=True)
              if g != cli(argv, files)]
    assert not differ, "\n".join(f"{a}:\n page {g}\n cli  {w}"[:2000] for a, g, w in differ[:3])
    if jobs == "generated":  # at least 100 of them are valid deployments, computed in full
        assert sum(g["exitCode"] == 0 for g in got) >= 100
    if jobs == "hostile":  # every hostile input is refused with the CLI's error, not a traceback
        accepted = [a for (a, _), g in zip(made, got, strict=True)
                    if g["exitCode"] != 2 or "Traceback" in g["stderr"]]
        assert not accepted, accepted
    assert not page.errors


# --- the forms, the URL and what a config holds are text -------------------------------------

def test_the_ledger_form_computes_what_the_command_line_prints(page):
    form = page.locator("#ledger")
    form.locator("select[name='preset']").select_option("qwen2-7b")
    form.locator("input[name='--tp']").fill("4")
    form.locator("input[name='--seq-len']").fill("4096")
    form.locator("button.tmath-run").click()
    wait_status(page, "#ledger", "用时")
    want = cli(["ledger", "--preset", "qwen2-7b", "--seq-len", "4096", "--batch", "1", "--dtype",
                "bf16", "--tp", "4", "--gpu", "H100"])
    assert form.locator("pre.tmath-output").text_content() == want["stdout"]
    assert form.locator("code.tmath-command").text_content() == (
        "python -m tmath ledger --preset qwen2-7b --seq-len 4096 --batch 1 --dtype bf16 --tp 4 --gpu H100")


def test_a_config_without_a_name_takes_the_folder_s_as_in_a_terminal(page):
    good = json.loads((HF_CONFIGS / "qwen2-0.5b.json").read_text(encoding="utf-8"))
    good.pop("_name_or_path", None)
    files = {"config.json": json.dumps(good)}
    got = run_many(page, [(["ledger", "config.json"], files)])[0]
    assert got == cli(["ledger", "config.json"], files) and "模型 你的模型（qwen2）" in got["stdout"]


def test_a_config_s_strings_are_shown_as_text(page):
    payload = "<img src=x onerror=alert(1)>"
    good = json.loads((HF_CONFIGS / "llama3-8b.json").read_text(encoding="utf-8"))
    form = page.locator("#ledger")
    form.locator("textarea").fill(json.dumps({**good, "model_type": payload}))
    form.locator("button.tmath-run").click()
    wait_status(page, "#ledger", "出错")
    shown = form.locator("pre.tmath-output")
    assert payload in shown.text_content()
    assert shown.locator("img").count() == 0 and page.locator("img").count() == 0
    assert not page.dialogs and not page.errors
    form.locator("textarea").fill("")


# --- answer boxes --------------------------------------------------------------------------

def test_the_answer_boxes_say_right_and_wrong(page):
    import tmath.exercises as ex

    labels = box_labels()
    exercises = {label.split("/")[0] for label in labels}
    assert len(exercises) >= 20
    tried = []
    for label in labels:
        key = ex._KEYS[label]
        value = float(key.compute())
        right = key.hand_value(value)
        wrong = value + key.abs_tol + 1 if key.count else (
            value + 3 * key.abs_tol if key.abs_tol else value * (1 + 3 * key.rel_tol))
        for answer, want in ((right, True), (wrong, False)):
            text = str(int(answer)) if key.count else repr(float(answer))
            tried.append((label, text, want))
    got = page.evaluate(
        "async tries => { const out = []; for (const [label, text] of tries)"
        " out.push(JSON.parse(await tmathCall('check', {label, text}))); return out; }",
        [[label, text] for label, text, _ in tried])
    wrong = [(t, g) for t, g in zip(tried, got, strict=True) if g["correct"] != t[2]]
    assert not wrong, wrong[:5]
    for (label, _, want), g in zip(tried, got, strict=True):  # the kit's words, no key in them
        assert g["message"] == repr(ex.verdict(ex._KEYS[label], want)), g


def test_an_answer_box_checks_in_the_page(page):
    import tmath.exercises as ex

    box = page.locator(".tmath-answer[data-label='ex-tour-2']")
    key = ex._KEYS["ex-tour-2"]
    n = int(key.compute())
    for text, verdict in ((str(n + 1), "tmath-wrong"), (str(n), "tmath-right")):
        box.locator("input").fill(text)
        box.locator("button").click()
        page.wait_for_function(f"() => document.querySelector(\".tmath-answer[data-label='ex-tour-2']\")"
                               f".classList.contains('{verdict}')")
    assert "✓ 正确" in box.locator("output").text_content()


def test_the_bundle_holds_no_key(compute_site):
    import tmath.exercises as ex

    with zipfile.ZipFile(compute_site / "_static" / "tmath" / "tmath.zip") as zf:
        names = zf.namelist()
        assert not [n for n in names if "answer_keys" in n]
        text = "\n".join(zf.read(n).decode("utf-8") for n in names if n.endswith(".py"))
    assert "tmath/_answer_hashes.py" in names
    keys = {label: repr(float(ex._KEYS[label].compute())) for label in box_labels()}
    long_keys = {k: v for k, v in keys.items() if len(v.replace(".", "").rstrip("0")) >= 6}
    assert len(long_keys) >= 10
    leaked = {k: v for k, v in long_keys.items() if v in text or v.removesuffix(".0") in text}
    assert not leaked, leaked


def _outside_tests(name: str) -> bool:
    return "/tests/" not in f"/{name}"


def test_the_sympy_and_mpmath_wheels_are_served_as_bytecode(compute_site):
    """Each wheel the site serves is its PyPI wheel (by hash, make) byte-compiled by Pyodide
    (scripts/pyodide_pyc.mjs): every module outside the test suites as a ``.pyc`` of the kind
    that checks no file time (flags 1, hash-based and unchecked), no ``.py`` left, every other
    file as it was. That Pyodide imports them is the next test's."""
    served = json.loads((compute_site / "_static" / "tmath" / "wheels.json").read_text())["wheels"]
    assert sorted(n.split("-")[0] for n in served) == ["mpmath", "sympy"]
    for name in served:
        with zipfile.ZipFile(pyodide_site.WHEELS_DIR / name) as pypi, \
                zipfile.ZipFile(compute_site / "_static" / "tmath" / name) as site_wheel:
            before = {n: pypi.read(n) for n in pypi.namelist() if _outside_tests(n) and not n.endswith("/")}
            after = {n: site_wheel.read(n) for n in site_wheel.namelist()}
        modules = {n for n in before if n.endswith(".py")}
        assert len(modules) > 50 and not [n for n in after if n.endswith(".py")], name
        assert set(after) == {m + "c" for m in modules} | (set(before) - modules), name
        assert all(after[n] == before[n] for n in set(before) - modules), name
        headers = {after[m + "c"][4:8] for m in modules}
        assert headers == {(1).to_bytes(4, "little")}, (name, headers)


def test_sympy_imports_from_its_bytecode_in_the_page(page):
    r = json.loads(page.evaluate("tmathCall('cell', {page: 'pyc', source: "
                                 "'import mpmath, sympy\\nprint(sympy.__file__, mpmath.__file__)'})"))
    assert r["error"] is None, r
    files = r["outputs"][0]["text"].split()
    assert [f.rsplit("/", 2)[-2:] for f in files] == [["sympy", "__init__.pyc"], ["mpmath", "__init__.pyc"]]


# --- the cells a reader runs -----------------------------------------------------------------

def saved_outputs(nb, index: int) -> list[tuple[str, str]]:
    shown = []
    for out in nb.cells[index].get("outputs", []):
        if out.output_type == "stream":
            if shown and shown[-1][0] == out.name:
                shown[-1] = (out.name, shown[-1][1] + out.text)
            else:
                shown.append((out.name, out.text))
        elif "data" in out:
            data = out.data
            shown.append(("data", data.get("text/latex") or data.get("text/markdown") or data["text/plain"]))
    return shown


def test_every_runnable_cell_gives_its_saved_output_in_the_page(page, compute_site):
    pages = json.loads((compute_site / "cells.json").read_text(encoding="utf-8"))
    total = sum(len(cells) for cells in pages.values())
    assert total >= 150, total
    wanted = derivation_cells()
    for name, cells in wanted.items():  # the derivations the issue names
        assert cells <= {int(i) for i in pages[name]}, name
    results = page.evaluate(
        """async pages => {
          const out = {};
          for (const [name, cells] of Object.entries(pages)) {
            out[name] = {};
            const order = Object.keys(cells).map(Number).sort((a, b) => a - b);
            for (const i of order) {
              const c = cells[i];
              const pre = c.prelude.length
                ? JSON.parse(await tmathCall('prelude', {page: name, statements: c.prelude})) : {errors: []};
              const r = JSON.parse(await tmathCall('cell', {page: name, source: c.source}));
              out[name][i] = {pre: pre.errors, outputs: r.outputs, error: r.error};
            }
          }
          return out;
        }""", pages)
    bad = []
    for name, cells in results.items():
        nb = nbformat.read(ROOT / f"{name}.ipynb", as_version=4)
        for index, r in cells.items():
            got = [(o["stream"], o["text"]) if "stream" in o else
                   ("data", o["data"].get("text/latex") or o["data"].get("text/markdown")
                    or o["data"]["text/plain"]) for o in r["outputs"]]
            if r["pre"] or r["error"] or got != saved_outputs(nb, int(index)):
                bad.append((name, index, r["pre"], r["error"], got[:1], saved_outputs(nb, int(index))[:1]))
    assert not bad, "\n".join(str(b)[:600] for b in bad[:5])


def test_a_cell_the_reader_edits_runs_what_they_typed(page):
    r = json.loads(page.evaluate(
        "tmathCall('cell', {page: 'scratch', source: 'import sympy as sp\\nd = sp.Symbol(\"d\")\\n"
        "print(\"hi\")\\nsp.expand((d + 1)**2)'})"))
    assert r["error"] is None
    assert r["outputs"][0] == {"stream": "stdout", "text": "hi\n"}
    assert r["outputs"][1]["data"]["text/latex"] == "$\\displaystyle d^{2} + 2 d + 1$"
    r = json.loads(page.evaluate("tmathCall('cell', {page: 'scratch', source: 'import numpy'})"))
    assert r["error"].startswith("ModuleNotFoundError") and "numpy" in r["error"]


def test_a_cell_that_never_ends_can_be_stopped(page):
    """A reader's endless loop holds the worker; 停止 ends it, and the next computation runs."""
    page.evaluate("() => { window.loop = tmathCall('cell', {page: 'loop', source: 'while True: pass'})"
                  ".catch(e => String(e.message)); }")  # not awaited: it never ends
    page.wait_for_timeout(300)
    page.evaluate("tmathCells.stop()")
    assert page.evaluate("window.loop") == "已停止"
    r = page.evaluate("tmathRun(['presets'])")
    assert r["exitCode"] == 0 and "llama3-70b" in r["stdout"]


def test_a_markdown_output_is_drawn_as_a_table_of_text(page):
    html = page.evaluate(
        "tmathCells.markdown('| 轴 | 时间 |\\n|---|---:|\\n| TP | $T$ <b>x</b> |\\n\\n合计').outerHTML")
    assert html.count("<tr>") == 2 and "<th>轴</th>" in html and "<td>TP</td>" in html
    assert "\\(T\\) &lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html and "<p>合计</p>" in html


def test_the_forms_offer_every_flag_of_their_command_and_label_each(page):
    """The plan, ledger and serve forms are the command line's own flags (tmath.web.describe), each
    with a label a screen reader reads, and the page's argv carries a flag set away from its
    default (the reader's --stage-layers, say) as the terminal would take it."""
    from tmath.web import describe

    for kind in ("ledger", "plan", "serve"):
        names = page.evaluate(f"Array.from(document.querySelectorAll('#{kind} [name^=\"--\"]'))"
                              ".map(e => e.name)")
        assert sorted(names) == sorted(f["flag"] for f in describe(kind))
    unlabelled = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.tmath-widget input:not([type=file]), .tmath-widget select, .tmath-widget textarea'))
      .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.name)""")
    assert not unlabelled
    form = page.locator("#plan")
    form.locator("select[name='preset']").select_option("deepseek-v3")
    form.locator("details.tmath-more summary").click()  # the flags beyond the first sixteen
    for name, value in (("--dp", "128"), ("--ep", "64"), ("--tp", "1"), ("--pp", "16"),
                        ("--stage-layers", "3,4*14,2"), ("--hbm-gb", "80"), ("--gpu", "H800")):
        field = form.locator(f"[name='{name}']")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    got = page.evaluate("document.querySelector('#plan').tmath.argv(false)")
    assert got[got.index("--stage-layers") + 1] == "3,4*14,2"
    assert got[got.index("--hbm-gb") + 1] == "80"
    want = cli(got)
    r = run_many(page, [(got, {})])[0]
    assert r == want and r["stdout"].startswith("部署：")


def test_a_cell_s_error_shows_its_traceback_and_input_says_it_cannot_read(page):
    r = json.loads(page.evaluate(
        "tmathCall('cell', {page: 'tb', source: 'def f(n):\\n    return 1 / n\\nf(0)'})"))
    assert r["error"] == "ZeroDivisionError: division by zero"
    assert 'File "<单元格>", line 3, in <module>' in r["traceback"] and "return 1 / n" in r["traceback"]
    r = json.loads(page.evaluate("tmathCall('cell', {page: 'tb', source: 'n = input(\"层数？\")'})"))
    assert r["error"].startswith("OSError: 网页里的 Python 不能读取键盘输入")
    assert "web.py" not in r["traceback"]


def test_the_command_line_s_text_is_drawn_in_rows_and_kept_byte_for_byte(page):
    """On a phone a "label   value" line puts its value under its label; the text is stdout."""
    form = page.locator("#ledger")
    form.locator("select[name='preset']").select_option("gpt2")
    form.locator("select[name='--gpu']").select_option("H100")  # not the link's payload
    form.locator("input[name='--tp']").fill("")
    form.locator("input[name='--seq-len']").fill("")
    page.evaluate("document.querySelector('#ledger').tmath.run()")
    argv = page.evaluate("document.querySelector('#ledger').tmath.argv(false)")
    pre = form.locator("pre.tmath-output")
    assert pre.text_content() == cli(argv)["stdout"]
    assert pre.locator(".tmath-row").count() >= 20 and pre.locator(".tmath-verdict").count() == 1


# --- `tmath serve` in the page (issue 37): the page prints what ``python -m tmath serve`` prints,
# byte for byte, with its exit status: several presets and settings (dense, GQA, MLA, MoE;
# quantized; speculative; priced), infeasible deployments and bad input. In this module, so that
# the same Pyodide load answers them. -------------------------------------------------------
SERVE_JOBS = [
    ["--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--prompt-len", "1000",
     "--output-len", "500", "--batch", "16"],
    ["--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--batch", "4", "--draft",
     "llama3-8b", "--draft-len", "4", "--acceptance", "0.8", "--gpu-hour-price", "2", "--json"],
    ["--preset", "deepseek-v3", "--gpu", "H800", "--tp", "8", "--weight-dtype", "fp8"],
    ["--preset", "deepseek-v2-lite", "--gpu", "A100", "--kv-dtype", "fp8", "--batch", "32"],
    ["--preset", "mixtral-8x7b", "--gpu", "H200", "--tp", "2", "--weight-dtype", "int4",
     "--block-size", "32", "--gpu-hour-price", "3.5"],
    ["--preset", "mistral-7b", "--prompt-len", "8000", "--output-len", "2000", "--json"],
    ["--preset", "gpt2", "--gpu", "TPUv5e", "--prompt-len", "10", "--output-len", "1"],
    ["--preset", "qwen3-30b-a3b", "--gpu", "B200", "--batch", "256", "--json"],
    ["--preset", "llama3-8b", "--batch", "100000"],  # does not fit: said so
    # bad input: every one refused in Chinese, naming the flag
    ["--preset", "llama3-70b", "--tp", "3"],
    ["--preset", "llama3-70b", "--prompt-len", "9000", "--json"],
    ["--preset", "llama3-70b", "--weight-dtype", "fp4"],
    ["--preset", "llama3-70b", "--draft", "gpt2", "--draft-len", "2", "--acceptance", "0.5"],
    ["--preset", "llama3-70b", "--acceptance", "nan", "--json"],
    ["--preset", "llama3-70b", "--gpu-hour-price", "-3"],
    ["--preset", "llama3-70b", "--batch", "9" * 400],
    ["--preset", "no-such-model", "--json"],
    ["--gpu", "H100"],
]


def test_the_page_serves_what_the_command_line_serves(page):
    jobs = [(["serve", *argv], {}) for argv in SERVE_JOBS]
    got = run_many(page, jobs)
    want = [cli(argv, files) for argv, files in jobs]
    differ = [(a, g, w) for (a, _), g, w in zip(jobs, got, want, strict=True) if g != w]
    assert not differ, "\n".join(f"{a}:\n page {g}\n cli  {w}"[:2000] for a, g, w in differ[:3])
    codes = [g["exitCode"] for g in got]
    assert codes.count(0) >= 9 and codes.count(2) >= 8, codes
    assert all("Traceback" not in g["stderr"] for g in got)
    assert any(g["stdout"].startswith("部署：不可行") for g in got)


def test_a_config_file_serves_in_the_page(page):
    text = (HF_CONFIGS / "llama3-8b.json").read_text(encoding="utf-8")
    jobs = [(["serve", "config.json", "--batch", "8", "--gpu-hour-price", "2"], {"config.json": text}),
            (["serve", "config.json", "--json"], {"config.json": "{not json"})]
    got = run_many(page, jobs)
    assert got == [cli(a, f) for a, f in jobs]
    assert got[0]["exitCode"] == 0 and got[1]["exitCode"] == 2


def test_the_serve_form_computes_what_the_command_line_prints(page):
    """A reader fills the serve form (its fields are the command line's flags): Mixtral 8x7B on
    two H200s, int4 weights, 32 requests, a price; then a draft model under 更多设置. The page
    prints what ``python -m tmath serve`` prints for that argv, byte for byte, and shows it."""
    form = page.locator("#serve")
    form.locator("select[name='preset']").select_option("mixtral-8x7b")
    form.locator("select[name='--gpu']").select_option("H200")
    form.locator("input[name='--tp']").fill("2")
    form.locator("input[name='--batch']").fill("32")
    form.locator("select[name='--weight-dtype']").select_option("int4")
    form.locator("input[name='--gpu-hour-price']").fill("3.5")
    form.locator("button.tmath-run").click()
    wait_status(page, "#serve", "用时")
    argv = ["serve", "--preset", "mixtral-8x7b", "--gpu", "H200", "--tp", "2", "--prompt-len",
            "1024", "--output-len", "256", "--batch", "32", "--weight-dtype", "int4", "--kv-dtype",
            "bf16", "--gpu-hour-price", "3.5"]
    want = cli(argv)
    assert want["exitCode"] == 0 and "每百万" in want["stdout"]
    assert form.locator(".tmath-status").text_content().startswith("算完")
    assert form.locator("pre.tmath-output").text_content() == want["stdout"]
    assert form.locator("code.tmath-command").text_content() == "python -m tmath " + " ".join(argv)
    # speculative decoding, from the flags beyond the first eight
    form.locator("select[name='preset']").select_option("llama3-70b")
    form.locator("select[name='--gpu']").select_option("H100")
    form.locator("input[name='--tp']").fill("8")
    form.locator("select[name='--weight-dtype']").select_option("bf16")
    form.locator("details.tmath-more summary").click()
    for name, value in (("--draft", "llama3-8b"), ("--draft-len", "4"), ("--acceptance", "0.8"),
                        ("--block-size", "32")):
        form.locator(f"input[name='{name}']").fill(value)
    page.evaluate("document.querySelector('#serve').tmath.run()")
    got = page.evaluate("document.querySelector('#serve').tmath.argv(false)")
    assert got == ["serve", "--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--prompt-len",
                   "1024", "--output-len", "256", "--batch", "32", "--weight-dtype", "bf16",
                   "--kv-dtype", "bf16", "--block-size", "32", "--draft", "llama3-8b",
                   "--draft-len", "4", "--acceptance", "0.8", "--gpu-hour-price", "3.5"]
    want = cli(got)
    assert want["exitCode"] == 0 and "草稿" in want["stdout"]
    assert form.locator("pre.tmath-output").text_content() == want["stdout"]
    assert not page.errors


def test_no_request_left_the_site(page):
    """Last in the module: every request of every test above, none outside localhost."""
    outside = [u for u in page.requests
               if not u.startswith(("data:", "blob:")) and urlparse(u).hostname not in LOCAL_HOSTS]
    assert not outside
    assert any(u.endswith("/_static/pyodide/pyodide.asm.wasm") for u in page.requests)

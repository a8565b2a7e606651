"""Hygiene of the saved notebooks: they are the book's regression tests and its static pages."""

from __future__ import annotations

import re

import nbformat
import pytest

from conftest import ROOT
from test_site import toc_notebooks

NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))
NOT_RUN = {"skip-execution"}


def ids(path):
    return str(path.relative_to(ROOT / "book"))


def test_every_notebook_is_in_the_toc():
    assert set(NOTEBOOKS) == set(toc_notebooks())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_saved_executed_and_static(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    # Saved widget state makes the page load require.js and the widget manager from CDNs.
    assert "widgets" not in nb.metadata, "strip metadata.widgets (saved widget state)"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            # A glue role inside $...$ is parsed as math and never pasted: use {glue:md} instead.
            spans = re.findall(r"\$\$.*?\$\$|\$[^$]+\$", cell.source, re.S)
            assert not any("{glue" in m for m in spans), f"cell {i}: glue inside $...$"
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        if not tags & NOT_RUN:
            assert cell.execution_count is not None, f"cell {i} is not executed: nbval would not compare it"
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            assert "application/vnd.jupyter.widget-view+json" not in data, f"cell {i}: widget output saved"
            for text in (data.get("application/papermill.record/text/plain"), data.get("text/plain")):
                assert not (text and "np.float64(" in text), f"cell {i}: glue a float, not a NumPy scalar"
            if "image/png" in data and "remove-output" not in tags:
                meta = cell.metadata.get("mystnb", {})
                assert meta.get("figure", {}).get("caption"), f"cell {i}: figure without a caption"
                assert meta.get("image", {}).get("alt"), f"cell {i}: figure without alt text"


# A float written out in a saved output: 0.1234, 1.5e-09, 3.229e+23 (integers and versions are not).
FLOAT = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
MAX_DIGITS = 12  # tmath.nb.SIG_DIGITS: far more than any page shows, fewer than BLAS kernels agree on
COMPARED = ("text/plain", "text/html", "text/markdown", "text/latex")


def significant_digits(token: str) -> int:
    mantissa = re.split(r"[eE]", token.lstrip("+-"))[0].replace(".", "")
    return len(mantissa.strip("0")) or 1  # trailing zeros carry no rounding noise


def long_floats(text: str) -> list[str]:
    return [t for t in FLOAT.findall(text) if significant_digits(t) > MAX_DIGITS]


def test_long_float_detector():
    assert long_floats("x = 0.48908890289692475 and 3.229120290816e+23") == [
        "0.48908890289692475", "3.229120290816e+23"]
    assert long_floats("0.489088902897 1.5e-09 2.13.0 v1.2 70553706496 0.000000000001") == []
    assert significant_digits("0.0012") == 2 and significant_digits("-1.5001e+03") == 5
    assert significant_digits("416666666667.0") == 12 and significant_digits("1.000000000000") == 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_saved_outputs_hold_no_float_beyond_twelve_digits(path):
    """A float's last bits depend on the BLAS kernel and thread count: round it before saving.

    Every output nbval compares is scanned: glue records, text/plain, HTML, markdown and
    LaTeX, and printed text.  Glue through ``tmath.nb.glue`` (it rounds) and print
    ``tmath.nb.stable(x)`` or a formatted string.
    """
    nb = nbformat.read(path, as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] + [
                v for k, v in out.get("data", {}).items()
                if isinstance(v, str)
                and (k in COMPARED or k.startswith("application/papermill.record/text/"))
            ]
            found += [(i, t) for text in texts for t in long_floats(text)]
    assert not found, f"floats with more than {MAX_DIGITS} significant digits (cell, value): {found[:5]}"


CODE_OR_MATH = re.compile(r"(`+).*?\1|\$\$.*?\$\$|\$[^$\n]*\$")


def prose_lines(markdown: str):
    """Lines of running text: no code blocks (a directive's body and title are prose), options, HTML."""
    stack = []  # (kind, fence length)
    for line in markdown.splitlines():
        st = line.strip()
        fence = re.match(r"(`{3,}|~{3,})(.*)", st)
        if fence:
            ticks, rest = len(fence.group(1)), fence.group(2).strip()
            if not rest and stack and ticks >= stack[-1][1]:
                stack.pop()
            elif rest.startswith("{"):
                stack.append(("directive", ticks))
                yield CODE_OR_MATH.sub("", rest.partition("}")[2])  # the title
            else:
                stack.append(("code", ticks))
            continue
        if (stack and stack[-1][0] == "code") or st.startswith("<") or re.match(r":[\w-]+:", st):
            continue
        yield CODE_OR_MATH.sub("", line)


PROSE_PAGES = NOTEBOOKS + sorted((ROOT / "book").rglob("*.md"))


@pytest.mark.parametrize("path", PROSE_PAGES, ids=ids)
def test_chinese_prose_uses_chinese_quotes(path):
    """Sphinx's smart quotes turn an ASCII "…" after a Chinese character into ”…”: write “…”."""
    if path.suffix == ".ipynb":
        texts = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    else:
        texts = [path.read_text(encoding="utf-8")]
    bad = [line.strip() for text in texts for line in prose_lines(text) if '"' in line]
    assert not bad, f"ASCII double quotes in prose (use “…”): {bad[:3]}"


def test_quote_check_sees_prose_and_skips_code():
    text = ('正文"引号"\n`code "x"`\n```python\nprint("x")\n```\n```{admonition} 标题"一"\n框里"也算"\n```\n'
            '````{admonition} 外\n```python\ny = "z"\n```\n后"面"\n````\n$a"b$')
    found = [line.strip() for line in prose_lines(text) if '"' in line]
    assert found == ['正文"引号"', '标题"一"', '框里"也算"', '后"面"']


EXERCISE = re.compile(r"```\{exercise-start\}[^\n]*\n:label: (\S+)\n```\n(.*?)```\{exercise-end\}", re.S)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_check_ids_are_the_exercise_labels_the_page_shows(path):
    """The page prints each exercise's label after its number (book/_ext): a self-check id
    named in an exercise must be that label, or the label followed by ``/part``."""
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    wrong, named = [], 0
    for label, body in EXERCISE.findall(text):
        for key in re.findall(r"""tmath\.check\([^`]*?["'](ex-[^"'/]+)(?:/[^"']*)?["']""", body):
            named += 1
            if key != label:
                wrong.append(f"{label}: {key}")
    assert named or "{exercise-start}" not in text, "no self-check id found in this chapter's exercises"
    assert not wrong, f"self-check ids that are not their exercise's label: {wrong}"


MAX_VISIBLE_GLUE_LINES = 2
HIDDEN = {"remove-cell", "remove-input"}


def visible_glue_lines(nb) -> list[str]:
    """Lines of code a reader sees that only record a number for the prose (``glue(``)."""
    return [line.strip() for cell in nb.cells
            if cell.cell_type == "code" and not set(cell.metadata.get("tags", [])) & HIDDEN
            for line in cell.source.splitlines() if re.search(r"\bglue\(", line)]


def test_visible_glue_lines_counts_only_shown_code():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1\nglue('x', x)"),
        nbformat.v4.new_code_cell("glue('y', 2)", metadata={"tags": ["remove-cell"]}),
        nbformat.v4.new_markdown_cell("glue('z', 3)"),
    ])
    assert visible_glue_lines(nb) == ["glue('x', x)"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_pages_show_at_most_two_lines_of_glue(path):
    """Bookkeeping stays out of sight (issue 20): glue calls live in hidden cells or in tmath."""
    lines = visible_glue_lines(nbformat.read(path, as_version=4))
    assert len(lines) <= MAX_VISIBLE_GLUE_LINES, f"{len(lines)} visible glue lines: {lines[:4]}"


def test_nbval_waits_long_enough_on_a_loaded_machine():
    """nbval's own 5-second wait for each output of a cell is raised by the root conftest, and
    the kernel start-up timeout by pytest.ini: a slow machine must not fail a right output."""
    import subprocess
    import sys

    probe = (
        "import pytest\n"
        "class P:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        cells = [i for i in session.items if type(i).__name__ == 'IPyNbCell']\n"
        "        print('TIMEOUTS', sorted({i.output_timeout for i in cells}), len(cells))\n"
        "        print('STARTUP', session.config.option.nbval_kernel_startup_timeout)\n"
        "pytest.main(['--collect-only', '-q', 'book/intro/tour.ipynb'], plugins=[P()])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    timeouts = re.search(r"TIMEOUTS \[(\d+)\] (\d+)", out)
    assert timeouts and int(timeouts[1]) >= 60 and int(timeouts[2]) > 5, out[-2000:]
    assert int(re.search(r"STARTUP (\d+)", out)[1]) >= 300


def test_nbval_kernels_are_forked_warm_and_behave_like_cold_ones(tmp_path):
    """The root conftest gives nbval kernels forked from the warm runner: each must still be a
    new process in the folder and environment jupyter_client asks for, without the runner's
    folder on sys.path, with the inline backend (else figures vanish), and gone after shutdown."""
    import json
    import os
    import time

    import nbval.kernel

    warm = os.environ.get("TMATH_COLD_KERNELS") != "1"
    assert (nbval.kernel.KernelManager.__name__ == "WarmKernelManager") == warm
    km, kc = nbval.kernel.start_new_kernel(kernel_name=nbval.kernel.CURRENT_ENV_KERNEL_NAME,
                                           cwd=str(tmp_path), env={**os.environ, "TMATH_PROBE": "42"})
    # Unix sockets, not TCP ports that another program could take first (the root conftest)
    assert km.transport == ("ipc" if os.name == "posix" else "tcp")
    printed = []
    try:
        kc.execute_interactive(
            "import json, os, sys, matplotlib\n"
            "print(json.dumps([os.getpid(), os.getcwd(), os.environ.get('TMATH_PROBE'),"
            " matplotlib.get_backend(), [p for p in sys.path if p.endswith('tests')],"
            " 'torch' in sys.modules]))",
            output_hook=lambda m: m["msg_type"] == "stream" and printed.append(m["content"]["text"]),
            timeout=120)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    pid, cwd, probe, backend, tests_on_path, torch_loaded = json.loads(printed[0])
    assert pid != os.getpid() and cwd == str(tmp_path) and probe == "42"
    assert backend == "module://matplotlib_inline.backend_inline" and not tests_on_path
    assert torch_loaded == warm  # imported before the fork, never by this cell
    from conftest import proc_stat

    for _ in range(100):  # the runner reaps it at once; a zombie counts as gone
        stat = proc_stat(pid)
        if stat is None or stat[0] in "ZX":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"kernel {pid} still runs after shutdown")

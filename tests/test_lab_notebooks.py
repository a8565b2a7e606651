"""The notebooks outside the website (`make lab`, the course kit): numbers, not MyST markup.

``scripts/lab_notebooks.py`` converts the book's notebooks for plain JupyterLab; the course
kit (``scripts/student_kit.py``) hands out the student edition converted the same way. Here:
every converted page of both editions is scanned for markup left; every exercise statement is
checked for the numbers it cites (formatted by myst-nb's own function, not the converter's);
the hidden cells are checked collapsed, and without asserts in the student's copy; and two
converted notebooks are opened in a real JupyterLab in Chromium.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import lab_notebooks  # noqa: E402  (scripts/, on the path through conftest)
import student_kit  # noqa: E402

#: Markup that plain JupyterLab shows as typed.
MARKUP = re.compile(r"\{glue|\{doc\}|\{ref\}|\{numref\}|\{cite|\{eq\}|\{prf:|:label:"
                    r"|^\s*(`{3,}|~{3,}|:{3,})\{|^\(\S+\)=\s*$", re.M)
#: An exercise's statement: (fence, label, statement).
_EX_START = re.compile(
    r"(`{3,})\{exercise-start\}[^\n]*\n:label:\s*(\S+)\n(?:[^\n]*\n)*?\1\n(.*?)(`{3,})\{exercise-end\}", re.S
)


@pytest.fixture(scope="module")
def book():
    return lab_notebooks.Book.load()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The full edition converted, as `make lab` writes it."""
    out = tmp_path_factory.mktemp("lab")
    written, kept = lab_notebooks.write_lab(out)
    assert written and not kept
    return out


@pytest.fixture(scope="module")
def lab_pages(lab):
    return _lab_pages(lab)


@pytest.fixture(scope="module")
def kit(book):
    """{path under notebooks/: notebook or Markdown text}: what the course kit writes there."""
    pages = {str(rel): nb for rel, nb in student_kit.student_notebooks(book)}
    pages.update({str(rel): text for rel, text in student_kit.student_pages(book)})
    return pages


def _markdown(page) -> list[str]:
    """The Markdown a reader sees: a page's text, or a notebook's cells and Markdown outputs."""
    if isinstance(page, str):
        return [page]
    texts = [c.source for c in page.cells if c.cell_type == "markdown"]
    for cell in page.cells:
        for output in cell.get("outputs", []):
            md = output.get("data", {}).get("text/markdown")
            if md:
                texts.append("".join(md))
    return texts


def _lab_pages(lab: Path) -> dict:
    pages = {}
    for path in sorted(lab.rglob("*")):
        if path.suffix == ".ipynb":
            pages[str(path.relative_to(lab))] = nbformat.read(path, as_version=4)
        elif path.suffix == ".md":
            pages[str(path.relative_to(lab))] = path.read_text(encoding="utf-8")
    return pages


def _sources() -> dict[str, Path]:
    return {str(p.relative_to(ROOT / "book")): p for page in lab_notebooks.toc_pages()
            for p in [lab_notebooks._page_path(ROOT, page)] if p}


def test_no_converted_page_shows_myst_markup(lab_pages, kit):
    sources = _sources()
    for name, pages in (("make lab", lab_pages), ("kit", kit)):
        assert sorted(pages) == sorted(sources), name
        left = {rel: [m.group(0) for t in _markdown(page) for m in MARKUP.finditer(t)][:3]
                for rel, page in pages.items()}
        left = {rel: hits for rel, hits in left.items() if hits}
        assert not left, f"{name}: markup left in {left}"
    # the scan finds the markup in the sources it was run on
    raw = [rel for rel, path in sources.items() if MARKUP.search(path.read_text(encoding="utf-8"))]
    assert len(raw) == len(sources), set(sources) - set(raw)


def _glue_records(nb) -> dict[str, dict]:
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                n = len(meta.get("mime_prefix", ""))
                found[meta["name"]] = {k[n:]: v for k, v in output["data"].items()}
    return found


def test_every_exercise_statement_shows_its_numbers(lab_pages, kit):
    """Each number an exercise cites through glue is in its converted statement, as myst-nb
    formats it for the website (``myst_nb.core.variables.format_plain_text``)."""
    from myst_nb.core.variables import format_plain_text

    checked = 0
    for rel, path in _sources().items():
        if path.suffix != ".ipynb":
            continue
        nb = nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))
        records = _glue_records(nb)
        text = "\n".join("".join(c.source) for c in nb.cells if c.cell_type == "markdown")
        shown = {edition: "\n".join(_markdown(pages[rel]))
                 for edition, pages in (("make lab", lab_pages), ("kit", kit))}
        for m in _EX_START.finditer(text):
            numbers = []
            for role in re.finditer(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`", m.group(3)):
                key, spec = role.group(1), role.group(2) or ""
                plain = records[key]["text/plain"]
                numbers.append(format_plain_text("".join(plain) if isinstance(plain, list) else plain, spec))
            for edition, page_text in shown.items():
                missing = [n for n in numbers if n not in page_text]
                assert not missing, f"{edition} {rel} {m.group(2)}: {missing} not shown"
            checked += len(numbers)
    assert checked >= 11, checked
    # the example, by hand: ex-sixpt-2 asks about the H100 hours of a run
    statement = next(t for t in _markdown(kit["flops/six-pt.ipynb"]) if "H100 卡时" in t)
    assert "{glue" not in statement
    assert re.search(r"\d{1,3}(,\d{3})+ H100 卡时", statement), statement


def test_references_print_what_the_website_prints(kit, lab_pages):
    """numfig without section numbers: one counter per kind for the whole book (the website
    prints 图 1 for the first figure, 练习 1 for the tour's first exercise, 命题 1 for its
    proposition); citations in the website's author–year style, linked to the source."""
    tour = "\n".join(_markdown(kit["intro/tour.ipynb"]))
    assert "图 1 里的占比" in tour and "**练习 1**" in tour and "**命题 1**（每层参数量）" in tour
    assert "[[Brown *et al.*, 2020](https://arxiv.org/abs/2005.14165)]" in tour
    assert "（模型宽度记作 $D$，见 [记号](../notation.md)）" in tour
    full = "\n".join(_markdown(lab_pages["intro/tour.ipynb"]))
    assert "[6 × 参数 × token](../flops/six-pt.ipynb) 推导这个估算" in full
    assert "**练习 1 的解答**" in full and "的解答**" not in tour, "solutions only in the full edition"


def _asserts(source: str) -> int:
    try:
        return sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(source)))
    except SyntaxError:
        return 0


def test_hidden_cells_are_collapsed_and_lose_their_asserts_in_the_students_copy(lab_pages, kit):
    lab_tour, kit_tour = lab_pages["intro/tour.ipynb"], kit["intro/tour.ipynb"]
    bound = "assert 0.32 < emb_share[0] < 0.321"  # bounds ex-tour-1/share's answer
    assert any(bound in c.source for c in lab_tour.cells)
    assert not any(bound in c.source for c in kit_tour.cells)
    for name, pages in (("make lab", lab_pages), ("kit", kit)):
        hidden = 0
        for rel, nb in pages.items():
            if isinstance(nb, str):
                continue
            for cell in nb.cells:
                tags = cell.metadata.get("tags", [])
                if "remove-cell" in tags:
                    hidden += 1
                    assert cell.source.startswith(lab_notebooks.HIDDEN_NOTE + "\n"), (name, rel, cell.source)
                    assert cell.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
                    if name == "kit":
                        assert not _asserts(cell.source), (rel, cell.source)
                elif "remove-input" in tags or "hide-input" in tags:
                    assert cell.metadata["jupyter"]["source_hidden"] is True
                for output in cell.get("outputs", []):
                    assert not output.get("metadata", {}).get("scrapbook", {}).get("mime_prefix"), \
                        "a glue record: JupyterLab has no renderer for it"
        assert hidden > 150, (name, hidden)


def test_drop_asserts_keeps_the_rest_of_a_cell():
    source = ('glue("x", 1)\nassert a < b, (\n    "why"\n)\nfor i in r:\n    assert i\n'
              'y = 2  # assert in a comment\n')
    assert lab_notebooks.drop_asserts(source) == ('glue("x", 1)\nfor i in r:\n    pass\n'
                                                  'y = 2  # assert in a comment')
    assert lab_notebooks.drop_asserts("%time x = 1\nassert x") == "%time x = 1\nassert x"
    assert lab_notebooks.drop_asserts("assert x; y = 1\nassert z  # why") == "assert x; y = 1"


def test_glue_text_is_formatted_and_pasted_as_text(book):
    page = lab_notebooks.Page(book, "book/intro/tour", {
        "n": {"text/plain": "1234567.891"}, "s": {"text/plain": "'[96, 2,048, 128]'"},
        "m": {"text/markdown": "**粗体** 与 {cite}`brown2020gpt3`"}})
    convert = lab_notebooks.convert_markdown
    assert convert("共 {glue:text}`n:,.0f` 个", page) == "共 1,234,568 个"
    assert convert("{glue:text}`n:.3e`", page) == "1.235e+06"
    assert convert("形状 {glue:text}`s`", page) == "形状 &#91;96, 2,048, 128&#93;"
    assert convert("```{glue:md} m\n:format: myst\n```", page) == (
        "**粗体** 与 [[Brown *et al.*, 2020](https://arxiv.org/abs/2005.14165)]")
    assert convert("`{doc}` 写在代码里", page) == "`{doc}` 写在代码里"
    with pytest.raises(lab_notebooks.GlueError, match="没有保存的值"):
        convert("{glue:text}`missing`", page)


def test_make_lab_keeps_what_the_reader_changed(tmp_path, capsys):
    assert lab_notebooks.main([str(tmp_path)]) == 0
    tour = tmp_path / "intro" / "tour.ipynb"
    tour.write_text(tour.read_text(encoding="utf-8").replace("导览", "我的笔记"), encoding="utf-8")
    (tmp_path / "gpt3" / "forward.ipynb").unlink()
    assert lab_notebooks.main([str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "更新了 1 个文件" in out.out and "保留了你改过的 intro/tour.ipynb" in out.err
    assert "我的笔记" in tour.read_text(encoding="utf-8") and (tmp_path / "gpt3" / "forward.ipynb").is_file()
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab: .*\n\t\$\(BIN\)/python scripts/lab_notebooks.py _build/lab\n"
                     r"\t\$\(BIN\)/jupyter lab _build/lab$", makefile, re.M)


def test_tmath_glue_writes_myst_nbs_record_without_myst_nb(monkeypatch):
    """The kit has no myst-nb; its notebooks' hidden cells still call tmath.nb.glue."""
    import IPython.display
    import myst_nb.ext.glue as myst_glue

    import tmath.nb

    calls = []
    monkeypatch.setattr(myst_glue, "ipy_display", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append((a, k)))
    tmath.nb.glue("x", 1 / 3, display=False)
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # import myst_nb now fails
    tmath.nb.glue("x", 1 / 3, display=False)
    assert len(calls) == 2 and calls[0] == calls[1], calls
    assert calls[0][0][0] == {"application/papermill.record/text/plain": "0.333333333333"}


# --- a real JupyterLab in Chromium ------------------------------------------------------------------


class _Url(str):
    root: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path, lab, kit):
    """A JupyterLab (the book venv's, requirements-lab.txt) serving a folder holding the full
    edition's tour (``make lab``) and the kit's six-pt, with every cell rendered (windowingMode
    none: PITFALLS.md)."""
    jupyter = Path(sys.executable).parent / "jupyter-lab"
    if not jupyter.exists():
        pytest.fail(f"{jupyter} is missing: `make test` installs JupyterLab (requirements-lab.txt)")
    root = tmp_path / "root"
    (root / "intro").mkdir(parents=True)
    (root / "flops").mkdir()
    shutil.copy(lab / "intro" / "tour.ipynb", root / "intro" / "tour.ipynb")
    nbformat.write(kit["flops/six-pt.ipynb"], root / "flops" / "six-pt.ipynb")
    settings = tmp_path / "settings"
    for plugin, values in (("notebook-extension/tracker", {"windowingMode": "none"}),
                           ("apputils-extension/notification", {"fetchNews": "false",
                                                                "checkForUpdates": False})):
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port, log = _free_port(), tmp_path / "jupyterlab.log"
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [str(jupyter), "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.news_url=", "--LabServerApp.open_browser=False",
         "--LabApp.extension_manager=readonly", "--allow-root"],
        cwd=root, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = _Url(f"http://127.0.0.1:{port}")
    url.root = root
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"JupyterLab did not start:\n{log.read_text()[-3000:]}") from exc
                time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_jupyterlab_renders_numbers_not_markup(jupyterlab, tmp_path):
    """The tour as `make lab` writes it, then, through its link, six-pt as the kit hands it out:
    numbers where the website has them, no markup, the hidden cells collapsed."""
    from playwright.sync_api import sync_playwright

    from book_pdf import ARGS

    root, chromium = Path(jupyterlab.root), shutil.which("chromium") or "/usr/bin/chromium"
    shots = Path(os.environ.get("TMATH_LAB_SCREENSHOTS", tmp_path))
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on screen (the other tab is hidden)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{jupyterlab}/lab/tree/intro/tour.ipynb?reset", wait_until="domcontentloaded")
            for rel, numbers in (("intro/tour.ipynb", ["174,604,259,328", "32.1%", "125,226,240"]),
                                 ("flops/six-pt.ipynb", ["H100 卡时"])):
                if rel == "flops/six-pt.ipynb":  # a link of the tour's text opens the next notebook
                    page.locator(f'{panel} .jp-RenderedMarkdown a[href*="flops/six-pt.ipynb"]').first.click()
                    page.locator(".lm-TabBar-tab.lm-mod-current", has_text="six-pt.ipynb").wait_for()
                nb = nbformat.read(root / rel, as_version=4)
                n_md = sum(c.cell_type == "markdown" for c in nb.cells)
                try:
                    page.wait_for_function(
                        "([sel, n]) => document.querySelectorAll(sel).length === 1 && Array.from("
                        "document.querySelectorAll(sel + ' .jp-MarkdownCell .jp-RenderedMarkdown'))"
                        ".filter(e => e.textContent.trim()).length >= n",
                        arg=[panel, n_md], timeout=60_000)  # every Markdown cell rendered
                finally:
                    page.screenshot(path=str(shots / f"{Path(rel).stem}.png"))
                text = page.locator(f"{panel} .jp-Notebook").inner_text()
                rendered = "\n".join(page.locator(f"{panel} .jp-MarkdownCell .jp-RenderedMarkdown")
                                     .all_inner_texts())
                for n in numbers:
                    assert n in rendered, (rel, n)
                left = [m.group(0) for m in MARKUP.finditer(rendered)]
                assert not left and ":label:" not in text, (rel, left[:5])
                # the hidden cells are collapsed: JupyterLab shows their first line, the note,
                # not the code under it
                collapsed = page.locator(f"{panel} .jp-Cell .jp-InputPlaceholder").count()
                hidden = sum(bool(c.metadata.get("jupyter", {}).get("source_hidden")) for c in nb.cells)
                assert collapsed == hidden > 2, (rel, collapsed, hidden)
                assert "记账单元格（网站上隐藏）" in text and "glue(" not in text, text[:3000]
            assert re.search(r"\d{1,3}(,\d{3})+ H100 卡时", rendered), rendered[:2000]
            page.locator(f"{panel} .jp-MarkdownCell", has_text="H100 卡时").first.screenshot(
                path=str(shots / "six-pt-exercise.png"))
        finally:
            browser.close()

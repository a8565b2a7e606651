"""The built website: strict build, every toc page present, offline, glue, student edition, Chromium.

The browser checks load every page from a localhost server in a Chromium that resolves no
host but localhost (a request that leaves the machine fails at once), and fail on such a
request, on any console error or
uncaught exception, on a page whose math MathJax did not render or whose display
equation or code cell is wider than the column, on raw glue or ``$$`` left in the text,
and on an image without alt text.  They also search the site for a Chinese and an English term
and open a solution dropdown.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import importlib.metadata
import json
import re
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlparse

import nbformat
import pytest
from myst_nb.core.variables import format_plain_text

from book_pdf import ARGS, toc_pages
from conftest import EXAMPLE_REPOSITORY, LAUNCH_PAGES, ROOT
from test_voice import CHECKS as VOICE_CHECKS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The book's page order and Chromium's flags are the PDF script's (scripts/book_pdf.py): one place each.
CHROMIUM_ARGS = ARGS


def toc_notebooks() -> list[Path]:
    return [ROOT / f"{p}.ipynb" for p in toc_pages() if (ROOT / f"{p}.ipynb").is_file()]


def site_pages(html: Path) -> list[Path]:
    return [html / f"{page}.html" for page in toc_pages()] + [html / "search.html"]


def test_every_toc_page_is_built(built_site):
    missing = [str(p) for p in site_pages(built_site) if not p.is_file()]
    assert not missing, f"pages missing from the build: {missing}"


# Tags and attributes through which a page loads something (links in <a> are not loads).
LOAD_ATTR = re.compile(
    r"<(script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc\s*=\s*[\"']([^\"']+)[\"']"
    r"|<link\b[^>]*\bhref\s*=\s*[\"']([^\"']+)[\"']"
    r"|@import\s+(?:url\()?[\"']?([^\"')\s]+)"
    r"|url\(\s*[\"']?(https?:[^\"')\s]+)",
    re.IGNORECASE,
)


def external_loads(text: str) -> list[str]:
    found = []
    for match in LOAD_ATTR.finditer(text):
        url = next(g for g in match.groups()[1:] if g)
        if url.startswith("//") or re.match(r"https?://", url):
            host = urlparse(url if not url.startswith("//") else "http:" + url).hostname
            if host not in {"localhost", "127.0.0.1"}:
                found.append(url)
    return found


def test_html_loads_nothing_from_outside(built_site):
    offenders = {}
    for path in list(built_site.rglob("*.html")) + list(built_site.rglob("*.css")):
        urls = external_loads(path.read_text(encoding="utf-8", errors="replace"))
        if urls:
            offenders[str(path.relative_to(built_site))] = sorted(set(urls))
    assert not offenders, f"pages that load from outside the site: {offenders}"


def test_external_loads_detector_catches_a_cdn():
    """The detector above must be able to fail."""
    page = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
    assert external_loads(page) == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"]
    assert external_loads('<a href="https://arxiv.org/abs/2005.14165">paper</a>') == []
    assert external_loads('<link rel="stylesheet" href="_static/x.css">') == []


def test_search_index_holds_chinese_words(built_site):
    text = (built_site / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    for word in ["参数", "注意力", "显存"]:
        assert word in index["terms"], f"Chinese word {word!r} not in the search index (is jieba installed?)"


def test_mathjax_is_served_locally(built_site):
    assert list((built_site / "_static").rglob("tex-chtml*.js")), "no local MathJax bundle under _static"


# --- glue: every {glue:text} reference shows the notebook's saved value --------------------------

GLUE_ROLE = re.compile(r"\{glue(?::text)?\}`([^`]+)`")


class _Pasted(HTMLParser):
    """Collect the text of <span class="pasted-text"> elements."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if self._depth:
            self._depth += 1
        elif tag == "span" and "pasted-text" in (dict(attrs).get("class") or "").split():
            self._depth = 1
            self.texts.append("")

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.texts[-1] += data


def saved_glue(nb) -> dict[str, str]:
    """text/plain of every glued value whose cell output nbval compares (so it is reproducible)."""
    values = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            text = out.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                values[name] = text
    return values


def expected_pastes(path: Path) -> list[tuple[str, str]]:
    nb = nbformat.read(path, as_version=4)
    values = saved_glue(nb)
    expected = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for ref in GLUE_ROLE.findall(cell.source):
            key, _, spec = ref.partition(":")
            if "::" in ref or key not in values:
                continue
            expected.append((key, format_plain_text(values[key], spec)))
    return expected


def test_every_glued_number_appears_on_its_page(built_site):
    missing = {}
    checked = 0
    for nb_path in toc_notebooks():
        page = built_site / nb_path.relative_to(ROOT).with_suffix(".html")
        parser = _Pasted()
        parser.feed(page.read_text(encoding="utf-8"))
        shown = set(parser.texts)
        for key, text in expected_pastes(nb_path):
            checked += 1
            if text not in shown:
                missing.setdefault(nb_path.stem, []).append((key, text))
    assert checked > 50, "expected many glued numbers across the book"
    assert not missing, f"glued values not shown as saved: {missing}"


@pytest.fixture(scope="module")
def voice_findings(built_site) -> dict[str, dict[str, list[str]]]:
    """``{check: {page: findings}}`` of every check of ``test_voice.py`` on every page, each
    page read and parsed once."""
    findings: dict[str, dict[str, list[str]]] = {check: {} for check in VOICE_CHECKS}
    for page in toc_pages():
        path = built_site / f"{page}.html"
        assert path.is_file(), f"{page}.html missing from the build"
        html = path.read_text(encoding="utf-8")
        for check, fn in VOICE_CHECKS.items():
            found = fn(html)
            if found:
                findings[check][page] = found
    return findings


@pytest.mark.parametrize("check", sorted(VOICE_CHECKS))
def test_every_page_speaks_with_one_voice(voice_findings, check):
    """Issue 14 on every page: the checks of ``test_voice.py`` (each listed page by page)."""
    findings = voice_findings[check]
    report = "\n".join(
        f"{page}: {len(found)}\n    " + "\n    ".join(found[:20]) for page, found in findings.items()
    )
    total = sum(len(f) for f in findings.values())
    assert not findings, f"{check}: {total} findings on {len(findings)} pages\n{report}"


# --- the student edition --------------------------------------------------------------------------


def exercise_counts(html: Path) -> dict[str, tuple[int, int]]:
    """(exercises, solutions) on each chapter page (the appendices and the guides have none)."""
    counts = {}
    for page in toc_pages():
        if page.startswith(("book/appendix/", "book/guides/")) or page in ("book/index", "book/notation"):
            continue
        text = (html / f"{page}.html").read_text(encoding="utf-8")
        classes = [c.split() for c in re.findall(r'<div class="([^"]*)"', text)]
        counts[page] = (sum("exercise" in c for c in classes), sum("solution" in c for c in classes))
    return counts


def test_every_chapter_has_five_exercises_with_solutions(built_site):
    counts = exercise_counts(built_site)
    assert len(counts) >= 15
    short = {page: c for page, c in counts.items() if c[0] < 5 or c[1] != c[0]}
    assert not short, f"chapters with fewer than 5 exercises or a missing solution: {short}"


def test_every_exercise_title_shows_its_self_check_label(built_site):
    shown = 0
    for page in toc_pages():
        text = (built_site / f"{page}.html").read_text(encoding="utf-8")
        pattern = r'<div class="exercise[^"]*" id="([^"]+)">\s*<p class="admonition-title">(.*?)</p>'
        for label, title in re.findall(pattern, text, re.S):
            shown += 1
            assert f'<span class="pre">{label}</span>' in title, f"{page}: exercise {label} title {title!r}"
    assert shown >= 90, f"expected every exercise of the book, found {shown}"


def test_student_edition_keeps_exercises_and_drops_solutions(built_site, student_site):
    book, student = exercise_counts(built_site), exercise_counts(student_site)
    assert {p: c[0] for p, c in student.items()} == {p: c[0] for p, c in book.items()}
    left = {p: c[1] for p, c in student.items() if c[1]}
    assert not left, f"solutions left in the student edition: {left}"


def test_solution_scan_finds_a_sentence_on_the_full_site(built_site, tmp_path):
    from test_student_edition import served_text, solution_sentences

    secrets = solution_sentences(built_site)
    assert len(secrets) > 100, "expected many solution sentences in the full edition"
    page = next(iter(sorted(built_site.rglob("book/ledger/*.html"))))
    copy = tmp_path / page.name
    copy.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    assert any(s in served_text(copy) for s in secrets), "the scan must see solutions on a full page"
def shipped_hashes() -> frozenset[str]:
    """The sha256 of every file an installed distribution ships, as its RECORD writes it."""
    return frozenset(f.hash.value for dist in importlib.metadata.distributions() for f in dist.files or ()
                     if f.hash and f.hash.mode == "sha256")


def record_hash(path: Path) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


def test_student_edition_serves_no_solution_in_any_file(built_site, student_site):
    from test_student_edition import CHAPTERS, served_text, solution_sentences

    secrets = solution_sentences(built_site)
    files = [p for p in student_site.rglob("*") if p.is_file()]
    sources = [p for p in files if "_sources" in p.parts and p.suffix == ".ipynb"]
    assert len(sources) >= len(CHAPTERS), "the student edition serves every chapter's notebook"
    # A file that is, byte for byte, one an installed package ships (MathJax, the theme's
    # scripts and fonts) holds none of the book's text: not scanned (two thirds of the bytes).
    shipped = shipped_hashes()
    vendored = {p for p in files if record_hash(p) in shipped}
    assert len([p for p in vendored if "mathjax" in p.parts]) >= 100, "MathJax's files are recognised"
    files = [p for p in files if p not in vendored]
    leaks = {}
    for path in files:
        text = served_text(path)
        found = [s for s in secrets if s in text]
        if found:
            leaks[str(path.relative_to(student_site))] = found[:2]
    assert not leaks, f"solutions served by the student edition: {leaks}"
    markers = [str(p.relative_to(student_site)) for p in files
               if re.search(rb"solution-(start|end)|\{solution\}", p.read_bytes())]
    assert not markers, f"solution markers left in: {markers}"


def test_student_edition_notebooks_have_an_answer_cell_per_exercise(student_site):
    from test_student_edition import CHAPTERS

    for path in CHAPTERS:
        served = student_site / "_sources" / path.relative_to(ROOT)
        nb = nbformat.read(served, as_version=4)
        answers = sum("answer" in c.metadata.get("tags", []) for c in nb.cells)
        exercises = sum(c.source.count("{exercise-start}") for c in nb.cells if c.cell_type == "markdown")
        assert answers == exercises >= 5, served


# --- launch buttons -------------------------------------------------------------------------------

BINDER, COLAB = "https://mybinder.org", "https://colab.research.google.com"


def launch_links(page: Path) -> list[str]:
    hrefs = re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8"))
    return sorted(h.replace("&amp;", "&") for h in hrefs if h.startswith((BINDER, COLAB)))


def test_no_launch_buttons_without_a_repository(built_site):
    """`_config.yml` names no repository yet: no launch button, and none into Jupyter Book's own repo."""
    for page in site_pages(built_site):
        text = page.read_text(encoding="utf-8")
        assert not launch_links(page), f"{page.name}: launch buttons without a repository"
        assert "executablebooks/jupyter-book" not in text, f"{page.name}: links to Jupyter Book's repository"


def test_launch_buttons_open_each_notebook_on_binder_and_colab(launch_site):
    org_repo = EXAMPLE_REPOSITORY.removeprefix("https://github.com/")
    notebooks = {p.relative_to(ROOT).with_suffix("").as_posix() for p in toc_notebooks()}
    assert set(LAUNCH_PAGES) <= set(toc_pages()) and set(LAUNCH_PAGES) & notebooks
    for page in LAUNCH_PAGES:
        links = launch_links(launch_site / f"{page}.html")
        if page not in notebooks:
            assert links == [], f"{page}: a markdown page has nothing to launch"
            continue
        assert (ROOT / f"{page}.ipynb").is_file()
        assert links == sorted([
            f"{BINDER}/v2/gh/{org_repo}/main?urlpath=lab/tree/{page}.ipynb",
            f"{COLAB}/github/{org_repo}/blob/main/{page}.ipynb",
        ]), page
    # The buttons' icons come with the theme, from the site itself.
    assert not external_loads((launch_site / "book/intro/tour.html").read_text(encoding="utf-8"))


# --- in Chromium ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(built_site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
#: What the page fetches to compute (book/_ext/pyodide_site.py): only once a reader asks.
RUNTIME = re.compile(r"/_static/pyodide/|/_static/tmath/(tmath-worker\.js|tmath\.zip|.*\.whl|wheels\.json)$")
#: Chromium resolves no other host, so a page's request to the internet fails at once and the
#: machine stays offline; :class:`Tab` records the request, and the test fails on it.
OFFLINE_ARGS = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        profile = tmp_path_factory.mktemp("chromium-profile")
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS + OFFLINE_ARGS, headless=True
        )
        yield context
        context.close()


class Tab:
    """One browser tab that records, for the page it last opened, every request that leaves
    localhost, console errors and uncaught exceptions.  Listening costs nothing per request
    (routing each request through Playwright made the page checks twice as slow)."""

    def __init__(self, context) -> None:
        self.page = context.new_page()
        self.report: dict[str, list[str]] = {}
        self.page.on("request", self._request)
        self.page.on("console", lambda m: m.type == "error" and self.report["console_errors"].append(m.text))
        self.page.on("pageerror", lambda e: self.report["page_errors"].append(str(e)))

    def _request(self, request) -> None:
        url = request.url
        if not url.startswith(("data:", "blob:")) and urlparse(url).hostname not in LOCAL_HOSTS:
            self.report["outside"].append(url)
        elif RUNTIME.search(urlparse(url).path):
            self.report["runtime"].append(url)

    def open(self, url: str):
        """Open ``url`` here; returns ``(page, report)``, the report fresh for this page."""
        self.report = {"outside": [], "console_errors": [], "page_errors": [], "runtime": []}
        self.page.goto(url, wait_until="load")
        return self.page, self.report


@pytest.fixture(scope="module")
def tab(browser) -> Tab:
    """One tab for every page the tests open: a new tab costs a second each."""
    return Tab(browser)


VISIBLE_TEXT = """() => {
  const main = document.querySelector('main') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, .highlight').forEach(e => e.remove());
  return copy.innerText;
}"""


WIDE_MATH = """() => Array.from(document.querySelectorAll('mjx-container[display="true"]')).filter(c => {
  const m = c.querySelector('mjx-math');
  return m && m.getBoundingClientRect().width > c.parentElement.clientWidth + 2;
}).map(c => c.textContent.slice(0, 60))"""


WIDE_OUTPUT = """() => Array.from(document.querySelectorAll(
    'main div.cell_output pre, main div.cell_output div.output, main div.cell_output .text_html'))
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim().slice(0, 60))"""

WIDE_TABLE = """() => Array.from(document.querySelectorAll('main table')).filter(t => {
  const box = t.closest('.pst-scrollable-table-container, div.output, div.cell_output') || t.parentElement;
  return t.getBoundingClientRect().width > box.clientWidth + 1
      || (box.scrollWidth > box.clientWidth + 1);
}).map(t => t.innerText.trim().slice(0, 60))"""


@functools.cache
def bib_keys() -> frozenset[str]:
    """Citation keys of book/references.bib: printed raw, a key is a bug (print the citation)."""
    text = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    return frozenset(re.findall(r"@\w+\{([^,\s]+),", text))


#: Everything :func:`load_page` reads off a page, in one call (one round trip to the browser:
#: a dozen separate calls cost seconds over the book's pages).
PAGE_FACTS = f"""() => {{
  const texts = sel => Array.from(document.querySelectorAll(sel));
  return {{
    mjx: texts('mjx-container').length,
    mjx_errors: texts('mjx-merror, .MathJax_Error').map(e => e.textContent),
    raw_math: texts('.math').filter(e => !e.querySelector('mjx-container'))
      .map(e => e.textContent.slice(0, 80)),
    wide_math: ({WIDE_MATH})(),
    wide_code: texts('div.cell_input pre').filter(p => p.scrollWidth > p.clientWidth + 1)
      .map(p => p.textContent.slice(0, 60)),
    wide_output: ({WIDE_OUTPUT})(),
    wide_table: ({WIDE_TABLE})(),
    outputs: texts('main div.cell_output').map(e => e.innerText).join('\\n'),
    visible_text: ({VISIBLE_TEXT})(),
    images_without_alt: texts('main img').filter(i => !(i.alt || '').trim()).map(i => i.src),
  }};
}}"""


def load_page(tab: Tab, url: str) -> dict:
    """Load one page in ``tab`` and report what went wrong."""
    page, report = tab.open(url)
    report["math_nodes"] = page.evaluate("document.querySelectorAll('.math').length")
    if report["math_nodes"]:
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("MathJax.startup.promise")
    # A display equation wider than the page column (Playwright's 1280-pixel window) is cut off;
    # a code cell wider than it scrolls sideways (_static/book.css sizes code for 88 columns).
    # The same for what a cell prints (text, HTML tables) and for the page's own tables: a
    # reader should not have to scroll sideways to see the end of a line or a column.
    facts = page.evaluate(PAGE_FACTS)
    outputs, text = facts.pop("outputs"), facts.pop("visible_text")
    report.update(facts)
    report["raw_cite_keys"] = sorted(k for k in bib_keys() if re.search(rf"\b{re.escape(k)}\b", outputs))
    report["raw_markup"] = [m for m in ("{glue", "$$", "{cite}", "{numref}") if m in text]
    return report


def test_pages_in_chromium(built_site, server, tab):
    problems = {}
    math_pages = 0
    for path in site_pages(built_site):
        rel = path.relative_to(built_site).as_posix()
        r = load_page(tab, f"{server}/{rel}")
        math_pages += bool(r["mjx"])
        checks = ("outside", "runtime", "console_errors", "page_errors", "mjx_errors", "raw_math",
                  "raw_markup", "images_without_alt", "wide_math", "wide_code", "wide_output", "wide_table",
                  "raw_cite_keys")
        bad = {k: r[k] for k in checks if r[k]}
        if r["math_nodes"] and not r["mjx"]:
            bad["math"] = f"{r['math_nodes']} math nodes, no MathJax output"
        if bad:
            problems[rel] = bad
    assert not problems, f"browser problems: {problems}"
    assert math_pages >= len(toc_pages()) - 2, "expected MathJax output on (nearly) every page"


def test_pages_that_compute_load_its_script_and_reading_pages_do_not(built_site):
    """tmath.js only where a page computes (a form, an answer box or a cell that runs there)."""
    computing = {p for p in toc_pages() if "_static/tmath/tmath.js" in (built_site / f"{p}.html").read_text(
        encoding="utf-8")}
    assert {"book/appendix/calculator", "book/parallel/together", "book/intro/tour",
            "book/flops/six-pt", "book/serving/prefill-decode"} <= computing
    assert not computing & {"book/index", "book/notation", "book/appendix/bibliography",
                            "book/appendix/errata"}


def test_the_student_site_s_python_holds_no_key_and_no_solution(built_site, student_site, tmp_path):
    """The student site's tmath.zip: no answer_keys, no key value a solution alone prints, no
    solution sentence; its answer boxes check against hashes."""
    import zipfile

    from test_student_kit import _found, _full_edition_texts, _key_forms, _Scanner

    from test_student_edition import solution_sentences

    with zipfile.ZipFile(student_site / "_static" / "tmath" / "tmath.zip") as zf:
        names = zf.namelist()
        texts = {n: zf.read(n).decode("utf-8") for n in names}
    assert "tmath/_answer_hashes.py" in names and not [n for n in names if "answer_keys" in n]
    for f in ("tmath.js", "tmath-worker.js", "wheels.json"):
        texts[f] = (student_site / "_static" / "tmath" / f).read_text(encoding="utf-8")
    kept, _ = _full_edition_texts()
    forms = _key_forms()
    shown = _found(forms, "\n".join(kept))
    scan = _Scanner({label: fs for label, fs in forms.items() if fs and label not in shown})
    leaks = {name: sorted(hits)[:3] for name, text in texts.items() if (hits := scan(text))}
    assert not leaks, f"key values in the student site's Python: {leaks}"
    secrets = solution_sentences(built_site)
    leaks = {name: [s for s in secrets if s in text][:2] for name, text in texts.items()
             if any(s in text for s in secrets)}
    assert not leaks, f"solution text in the student site's Python: {leaks}"
    boxes = sum((student_site / f"{p}.html").read_text(encoding="utf-8").count('class="tmath-answer"')
                for p in toc_pages())
    assert boxes >= 150


@pytest.mark.parametrize("term", ["注意力", "显存", "FlashAttention", "MoE"])
def test_search_finds_chinese_and_english_terms(server, tab, term):
    page, report = tab.open(f"{server}/search.html?q={quote(term)}")
    page.wait_for_selector("#search-results ul.search li", timeout=20000)
    hits = page.locator("#search-results ul.search li").count()
    assert hits >= 1 and not report["outside"] and not report["page_errors"]


def test_a_request_to_the_internet_is_reported_and_fails(server, tab):
    """The page checks fail on a request that leaves localhost: the tab must see one, and the
    browser must not reach the host (it resolves only localhost)."""
    page, report = tab.open(f"{server}/book/notation.html")
    outcome = page.evaluate("fetch('https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js')"
                            ".then(() => 'reached', e => 'failed')")
    assert outcome == "failed" and report["outside"] == [
        "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"]


def test_solution_dropdown_opens(server, tab):
    page, _ = tab.open(f"{server}/book/intro/tour.html")
    solution = page.locator("div.solution").first
    body = solution.locator("section#solution-content")
    assert not body.is_visible(), "solutions start folded"
    solution.locator("button.toggle-button").click()
    body.wait_for(state="visible", timeout=5000)
    assert "GPT-3 Small" in body.inner_text()


# --- the reader's website: every preset, every screen, both themes, accessible (issue 38) ------

#: axe-core, pinned in package-lock.json (npm ci), injected into the page under test.
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
THEMES = ("light", "dark")

#: Inside each form: an element wider than its box (a line cut, or a sideways scroll), by id.
WIDE_IN_WIDGETS = """() => {
  const bad = [];
  for (const w of document.querySelectorAll('.tmath-widget')) {
    const box = w.getBoundingClientRect();
    if (w.scrollWidth > w.clientWidth + 1) bad.push('widget ' + w.id);
    for (const e of w.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      if (!r.width) continue;  // not shown
      if (r.right > box.right + 1 || r.left < box.left - 1 || e.scrollWidth > e.clientWidth + 1
          && getComputedStyle(e).overflowX !== 'visible')
        bad.push(e.tagName + '.' + e.className + ': ' + e.textContent.slice(0, 40));
    }
  }
  return bad;
}"""


def axe_serious(page, within: str | None = None) -> list:
    """axe-core's critical and serious violations on the page as it is now (in the element
    ``within`` selects, when given: a widget's own check)."""
    page.evaluate("src => { if (!window.axe) (0, eval)(src); }", AXE.read_text(encoding="utf-8"))
    return page.evaluate(
        "sel => axe.run(sel ? document.querySelector(sel) : document, {resultTypes: ['violations']})"
        ".then(r => r.violations.filter(v => ['critical', 'serious'].includes(v.impact))"
        ".map(v => [v.id, v.impact, v.nodes.slice(0, 4).map(n => n.target.join(' '))]))", within)


def in_both_themes(page, check) -> dict:
    """``check(page)`` in the theme's light and dark mode; what it found, by theme."""
    found = {}
    for theme in THEMES:
        page.evaluate("t => document.documentElement.dataset.theme = t", theme)
        # The theme fades colours in over 0.15 s (CSS transitions): a check in between sees
        # neither theme's colours (on a loaded machine, 50 ms was not enough). Wait them out.
        page.evaluate("""() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))
          .then(() => Promise.all(document.getAnimations().map(a => a.finished)))""")
        if got := check(page):
            found[theme] = got
    page.evaluate("() => document.documentElement.dataset.theme = 'light'")
    return found


def fits(page) -> dict:
    """Elements wider than their box in the page's forms, at a phone's and a desktop's width."""
    found = {}
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(50)
        if got := page.evaluate(WIDE_IN_WIDGETS):
            found[width] = got[:5]
    page.set_viewport_size({"width": 1280, "height": 720})
    return found


def test_the_home_page_is_accessible_in_both_themes(server, tab):
    page, report = tab.open(f"{server}/book/index.html")
    assert not in_both_themes(page, axe_serious) and not report["page_errors"]


def open_form(tab: Tab, url: str, selector: str):
    """Open the page at ``url`` and read its form ``selector`` as it opens, before any click
    (nothing of the runtime fetched yet): ``(page, report, form, its presets, its argv)``."""
    page, report = tab.open(url)
    assert not report["runtime"], "the runtime must wait for the reader"
    form = page.locator(selector)
    presets = form.locator("select[name='preset'] option").evaluate_all("os => os.map(o => o.value)")
    assert len(presets) >= 20
    opening = page.evaluate("sel => document.querySelector(sel).tmath.argv(false)", selector)
    return page, report, form, presets, opening


def test_every_preset_computes_on_the_calculator_as_it_opens(built_site, server, tab):
    """The calculator as it opens (T empty, TP one the heads split into) computes with the run
    button, the runtime fetched only then, what the command line prints; and every preset:
    算完, the command line's text; it fits a phone and a desktop; axe finds nothing serious in
    either theme, with a result and with an error shown (whose colour must hold 4.5:1)."""
    from test_site_compute import cli

    page, report, form, presets, opening = open_form(tab, f"{server}/book/appendix/calculator.html",
                                                     "#ledger-widget")
    assert opening == ["ledger", "--preset", "llama3-70b", "--batch", "1", "--dtype", "bf16",
                       "--tp", "8", "--gpu", "H100"]  # T empty as in the CLI, TP 8 splits 64 heads
    # as a reader asks: types in a field (T, then empties it again: the same argv), then clicks
    # 计算 at once; the click that leaves the field must still count (a hint that vanished on
    # blur moved the button away under it). The runtime loads now.
    form.locator("input[name='--seq-len']").click()
    page.keyboard.type("8192")
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    form.locator("button.tmath-run").click()
    assert form.locator(".tmath-status").text_content(), "the click after typing was lost"
    page.wait_for_function("() => document.querySelector('.tmath-widget .tmath-status')"
                           ".textContent.includes('用时')", timeout=120_000)
    assert form.locator("pre.tmath-output").text_content() == cli(opening)["stdout"]
    assert report["runtime"] and not report["outside"] and not report["page_errors"]
    results = every_preset_as_picked(page, ".tmath-widget[data-kind='ledger']", presets)
    by_name = {r["name"]: r["argv"] for r in results}
    assert by_name["gpt2"][by_name["gpt2"].index("--tp") + 1] == "4"  # 12 heads: not 8
    assert "TP = 1、2、4" in form.locator("#ledger-widget-tp-hint").text_content()
    assert not fits(page)
    assert not in_both_themes(page, axe_serious)
    form.locator("input[name='--tp']").fill("7")
    form.locator("input[name='--tp']").dispatch_event("change")
    page.evaluate("document.querySelector('#ledger-widget').tmath.done()")
    assert "出错" in form.locator(".tmath-status").text_content()
    assert form.locator("pre.tmath-output.tmath-error").is_visible() and not fits(page)
    assert not in_both_themes(page, axe_serious)  # the error's colour (color-contrast) too
    # every control is reached with the keyboard, the upload button included
    reached = page.evaluate("""() => {
      const root = document.querySelector('#ledger-widget');
      return Array.from(root.querySelectorAll('button, input, select, textarea, summary'))
        .filter(e => e.getClientRects().length && e.tabIndex < 0).map(e => e.outerHTML.slice(0, 80));
    }""")
    assert not reached and form.get_by_role("button", name="上传 config.json…").count() == 1
    assert not report["page_errors"] and not report["outside"]


def every_preset_as_picked(page, selector: str, presets: list[str]) -> list[dict]:
    """Pick each preset on the form ``selector`` as a reader does and compute: every one says
    算完 and shows what the command line prints for the form's own argv. Returns the runs."""
    from test_site_compute import cli

    results = page.evaluate(
        """async ([selector, names]) => {
          const root = document.querySelector(selector);
          const select = root.querySelector("select[name='preset']");
          const out = [];
          for (const name of names) {
            select.value = name;
            select.dispatchEvent(new Event("change"));  // as a reader picks it
            await root.tmath.run();
            out.push({name, argv: root.tmath.argv(false),
                      status: root.querySelector(".tmath-status").textContent,
                      text: root.querySelector("pre.tmath-output").textContent});
          }
          return out;
        }""", [selector, presets])
    failed = [(r["name"], r["status"], r["text"][:200]) for r in results
              if not r["status"].startswith("算完")]
    assert not failed, failed
    for r in results:  # the page shows what the command line prints, for the form's own argv
        assert r["text"] == cli(r["argv"])["stdout"], r["argv"]
    return results


def test_every_preset_computes_on_the_serve_form_as_it_opens(built_site, server, tab):
    """Part VI's serve form (issue 37: the page is the command line): it opens on Llama 3 70B, 8
    H100s, 16 requests; every preset computes from it (算完, the command line's text byte for
    byte for the form's own argv). A TP that cannot hold a preset changes to the smallest that
    can (the build tried them); a model that no TP of H100s holds in bf16 keeps its TP and the
    result says 不可行 and why. It fits a phone and a desktop, axe-clean in both themes."""
    page, report, form, presets, opening = open_form(tab, f"{server}/book/serving/prefill-decode.html",
                                                     "#serve-widget")
    assert opening == ["serve", "--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--prompt-len",
                       "512", "--output-len", "256", "--batch", "16", "--weight-dtype", "bf16",
                       "--kv-dtype", "bf16"]
    results = every_preset_as_picked(page, "#serve-widget", presets)
    by_name = {r["name"]: r for r in results}
    tp = {name: r["argv"][r["argv"].index("--tp") + 1] for name, r in by_name.items()}
    assert tp["gpt2-xl"] == "1"  # 25 heads: only TP 1 splits them
    assert tp["llama3-70b"] in {"2", "4", "8"}  # 141 GB of bf16 weights: not on one H100
    for name in ("deepseek-v3", "llama3.1-405b"):  # no TP of H100s holds their bf16 weights
        assert by_name[name]["text"].startswith("部署：不可行"), by_name[name]["text"][:100]
    assert sum(r["text"].startswith("部署：可行") for r in results) >= len(results) - 2
    assert not fits(page)
    assert not in_both_themes(page, lambda p: axe_serious(p, "#serve-widget"))
    assert not report["page_errors"] and not report["outside"]


DEEPSEEK_LINK = ("tmath=plan&preset=deepseek-v3&dp=128&ep=64&tp=1&pp=16&zero=1&seq-len=4096"
                 "&global-batch=15360&stage-layers=3,4*14,2&gpu=H800")


def test_the_planner_computes_deepseek_v3_s_layout_from_a_permalink(server, tab):
    """61 layers over 16 stages (3, 4 × 14, 2), EP 64, no TP, from a link: the planner computes
    it and shows its verdict whole, on a phone and a desktop, in both themes, axe-clean."""
    from test_site_compute import cli

    from tmath.web import describe

    page, report = tab.open(f"{server}/book/parallel/together.html?{DEEPSEEK_LINK}#plan-widget")
    form = page.locator("#plan-widget")
    page.wait_for_function("() => /用时/.test(document.querySelector('#plan-widget .tmath-status')"
                           ".textContent)", timeout=180_000)
    argv = page.evaluate("document.querySelector('#plan-widget').tmath.argv(false)")
    assert argv[argv.index("--stage-layers") + 1] == "3,4*14,2" and "--pp-edge-layers" not in argv
    want = cli(argv)
    assert want["exitCode"] == 0 and form.locator(".tmath-status").text_content().startswith("算完")
    shown = form.locator("pre.tmath-output").text_content()
    assert shown == want["stdout"] and shown.startswith("部署：")
    assert form.locator(".tmath-verdict").first.is_visible()
    link = page.evaluate("document.querySelector('#plan-widget').tmath.permalink()")
    keys = set(dict(parse_qsl(urlparse(link).query, keep_blank_values=True)))
    assert keys == {"tmath", "preset"} | {f["flag"][2:] for f in describe("plan")}
    assert not fits(page)
    assert not in_both_themes(page, axe_serious)
    assert not report["page_errors"] and not report["outside"]


def test_a_cell_crash_restarts_python_and_the_next_run_replays_the_earlier_cells(server, tab):
    """A chapter with a cell editor open is axe-clean in both themes; a cell that crashes
    Python (recursion past the stack) says so, the worker starts afresh, and an unedited cell
    that needs an earlier one then runs again with its saved output, no NameError."""
    nb = json.loads((ROOT / "book/flops/six-pt.ipynb").read_text(encoding="utf-8"))
    starts = ["".join(c["source"]).split("\n", 1)[0] for c in nb["cells"]]
    i7, i10 = starts.index("small = {"), starts.index('d_1, d_2, d_3 = syms("d_1 d_2 d_3")')
    page, report = tab.open(f"{server}/book/flops/six-pt.html")
    cell7, cell10 = page.locator(f".tmath-cell-{i7}"), page.locator(f".tmath-cell-{i10}")
    done = "i => document.querySelector('.tmath-cell-' + i).dataset.tmathRan"
    cell7.locator(".tmath-cell-bar button").first.click()  # opens the editor; runs the matrix cell first
    page.wait_for_function(f"() => ({done})({i7}) === 'ok'", timeout=180_000)
    first = cell7.locator(".tmath-cell-output").inner_text()  # it assigns: no output, no error
    assert "Error" not in first and cell7.locator("pre.tmath-error").count() == 0
    box = page.locator(".tmath-answer").first  # a wrong answer's colour, in both themes
    page.evaluate("""() => { const b = document.querySelector('.tmath-answer');
      b.classList.add('tmath-wrong'); b.querySelector('output').textContent = '✗ 还不对'; }""")
    assert box.locator("output").is_visible()
    assert not in_both_themes(page, axe_serious)
    cell10.locator(".tmath-cell-bar button").first.click()
    page.wait_for_function(f"() => ['ok', 'error'].includes(({done})({i10}))", timeout=180_000)
    # Each call passes through C (map): the browser's stack overflows within 0.2 s. A plain
    # ``return deep(n + 1)`` crashes too, but Python 3.14 keeps its frames off the C stack, so
    # it first fills memory: 5 to 38 s of CPU.
    cell10.locator("textarea.tmath-editor").fill(
        "import sys\nsys.setrecursionlimit(10**8)\n"
        "def deep(n):\n    return list(map(deep, [n + 1]))\ndeep(0)")
    cell10.locator(".tmath-cell-bar button").first.click()
    page.wait_for_function(f"() => ({done})({i10}) === 'crash'", timeout=180_000)
    assert "崩溃" in cell10.locator(".tmath-cell-output").inner_text()
    cell7.locator(".tmath-cell-bar button").first.click()  # unedited; it needs the matrix cell's C
    page.wait_for_function(f"() => ['ok', 'error'].includes(({done})({i7}))", timeout=180_000)
    again = cell7.locator(".tmath-cell-output").inner_text()
    assert page.evaluate(f"({done})({i7})") == "ok" and again == first and "NameError" not in again
    assert cell7.locator("pre.tmath-error").count() == 0  # a NameError would be shown here
    assert not report["outside"]

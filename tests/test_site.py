"""The built website: strict build, every toc page present, offline, and checked in Chromium.

The browser checks load every page from a localhost server with every request that
leaves localhost blocked, and fail on such a request, on any console error or
uncaught exception, and on a page whose math MathJax did not render.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def toc_pages() -> list[str]:
    """Document names (without suffix) listed in _toc.yml, root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [re.sub(r"\.(md|ipynb)$", "", p) for p in pages]


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
            if urlparse(url if not url.startswith("//") else "http:" + url).hostname not in {
                "localhost",
                "127.0.0.1",
            }:
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
    index = (built_site / "searchindex.js").read_text(encoding="utf-8")
    for word in ["参数", "注意力"]:
        assert f'"{word}"' in index, f"Chinese word {word!r} not in the search index (is jieba installed?)"


def test_mathjax_is_served_locally(built_site):
    assert list((built_site / "_static").rglob("tex-chtml*.js")) or list(
        (built_site / "_static").rglob("tex-mml-chtml*.js")
    ), "no local MathJax bundle under _static"


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


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        profile = tmp_path_factory.mktemp("chromium-profile")
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield context
        context.close()


def load_page(context, url: str) -> dict:
    """Load one page with all non-localhost traffic blocked; report what went wrong."""
    page = context.new_page()
    report = {"blocked": [], "console_errors": [], "page_errors": []}

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in {"127.0.0.1", "localhost"}:
            r.continue_()
        else:
            report["blocked"].append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and report["console_errors"].append(m.text))
    page.on("pageerror", lambda e: report["page_errors"].append(str(e)))
    page.goto(url, wait_until="load")
    report["math_nodes"] = page.evaluate("document.querySelectorAll('.math').length")
    if report["math_nodes"]:
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("MathJax.startup.promise")
    report["mjx"] = page.evaluate("document.querySelectorAll('mjx-container').length")
    report["mjx_errors"] = page.evaluate(
        "Array.from(document.querySelectorAll('mjx-merror, .MathJax_Error')).map(e => e.textContent)"
    )
    report["raw_math"] = page.evaluate(
        "Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container'))"
        ".map(e => e.textContent.slice(0, 80))"
    )
    page.close()
    return report


def test_pages_in_chromium(built_site, server, browser):
    problems = {}
    math_pages = 0
    for path in site_pages(built_site):
        rel = path.relative_to(built_site).as_posix()
        r = load_page(browser, f"{server}/{rel}")
        math_pages += bool(r["mjx"])
        checks = ("blocked", "console_errors", "page_errors", "mjx_errors", "raw_math")
        bad = {k: r[k] for k in checks if r[k]}
        if r["math_nodes"] and not r["mjx"]:
            bad["math"] = f"{r['math_nodes']} math nodes, no MathJax output"
        if bad:
            problems[rel] = bad
    assert not problems, f"browser problems: {problems}"
    assert math_pages >= 2, "expected MathJax output on the notation page and the tour at least"

"""Print the built book to one PDF with headless Chromium.

Usage: python scripts/book_pdf.py [_build/html] [_build/pdf/book.pdf]

Serves the built site on localhost (nothing else is reachable: every other
request is aborted), opens each page of ``_toc.yml`` in order, waits for
MathJax to finish, prints it with the theme's print stylesheet (no sidebars),
and concatenates the pages with pypdf. The theme's print style unfolds the
solutions; print the student edition's site to leave them out.
Chinese text needs a CJK font (Debian's fonts-noto-cjk, installed by `make browser`).
"""

from __future__ import annotations

import functools
import http.server
import io
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import yaml
from playwright.sync_api import sync_playwright
from pypdf import PdfWriter

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                pages.append(e["file"])
            walk(e.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [re.sub(r"\.(md|ipynb)$", "", p) for p in pages]


def main(html: Path, out: Path) -> None:
    if not (html / "index.html").is_file():
        sys.exit(f"no built site at {html}: run `make book` first")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    writer = PdfWriter()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS)

        def local_only(route):
            host = urlparse(route.request.url).hostname
            route.continue_() if host in {"127.0.0.1", "localhost", None} else route.abort()

        for page_name in toc_pages():
            page = ctx.new_page()
            page.route("**/*", local_only)
            page.goto(f"{base}/{page_name}.html", wait_until="load")
            if page.evaluate("document.querySelectorAll('.math').length"):
                page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
                page.evaluate("MathJax.startup.promise")
            pdf = page.pdf(format="A4", print_background=True,
                           margin={"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"})
            writer.append(io.BytesIO(pdf), outline_item=page.title())
            page.close()
            print(f"printed {page_name}")
        ctx.close()
    httpd.shutdown()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as fh:
        writer.write(fh)
    print(f"wrote {out} ({len(writer.pages)} pages)")


if __name__ == "__main__":
    html = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "html"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "_build" / "pdf" / "book.pdf"
    main(html, out)

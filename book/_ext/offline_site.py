"""Local Sphinx extension: keep the site self-contained and its browser console clean.

Jupyter Book 1 always loads sphinx-thebe, even with thebe disabled. sphinx-thebe
inlines its configuration script (which names a CDN URL) twice per page, so every
page logs ``Identifier 'THEBE_JS_URL' has already been declared``.  The book does
not use thebe (cells run in Jupyter, not in the browser), so its assets are dropped
from every page here.
"""

from __future__ import annotations


def _is_thebe(asset) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "") or ""
    return "thebe" in str(filename).lower() or "THEBE_JS_URL" in body


def _drop_thebe(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if not _is_thebe(a)]


def setup(app):
    # Run after the theme and the extensions have added their assets.
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

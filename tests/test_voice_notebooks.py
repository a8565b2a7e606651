"""Issue 14 on the saved notebooks: one notation, sharp figures.

Every SymPy symbol a chapter creates is in ``tmath.notation`` (the registry that
``book/notation.md`` shows), and every PNG a chapter saves is at least 150 dpi.
The checks on the built pages (e-notation, code width, typed references, alt
text, table headers, page titles) are in ``test_site.py``, with every test that
needs a built site.
"""

from __future__ import annotations

import pytest

from conftest import ROOT
from tmath.notation import undeclared_symbols

NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_notebook_symbols_are_in_the_notation(notebook):
    names = undeclared_symbols(notebook)
    assert not names, (
        f"{notebook.relative_to(ROOT)} creates SymPy symbols that book/notation.md does not list "
        f"(or uses a chapter-local one outside its chapter): {', '.join(names)}. "
        "Use tmath.notation.sym(...) / syms(...), or add the symbol to tmath.notation and the page."
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_saved_figures_are_at_least_150_dpi(notebook):
    """Issue 14, item 6: every PNG a chapter saves is sharp on a HiDPI screen (import tmath.plots)."""
    import base64
    import json

    from test_plots import png_dpi

    low = []
    for i, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {}).get("image/png")
            if data:
                dpi = png_dpi(base64.b64decode("".join(data) if isinstance(data, list) else data))
                if dpi < 149.5:
                    low.append(f"cell {i}: {dpi:.0f} dpi")
    assert not low, f"{notebook.relative_to(ROOT)}: figures below 150 dpi: {low}"

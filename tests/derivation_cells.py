"""The derivations issue 31 named as cells that must run in the page, found by their first line
(not by index: a hidden cell added above one must not move the check onto another cell)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DERIVATIONS: dict[str, tuple[str, ...]] = {
    "book/flops/six-pt": ("n_, p_, m_ = 2, 3, 2", "small = {", 'd_1, d_2, d_3 = syms("d_1 d_2 d_3")'),
    "book/gpt3/multihead": ("import re", 'Z_heads = symbolic.head_blocks("Z", 3,'),
    "book/flash/online-softmax": ('j, S = syms("j S")', 's = sp.symbols("s1:6", real=True)'),
    "book/intro/tour": ("d, F = symbolic.d, symbolic.f", "total = symbolic.gpt_model_params()"),
}


def derivation_cells() -> dict[str, set[int]]:
    """Page -> the indices of its named derivation cells; each first line must match one code cell."""
    out = {}
    for page, firsts in DERIVATIONS.items():
        cells = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))["cells"]
        heads = {i: "".join(c["source"]).split("\n")[0]
                 for i, c in enumerate(cells) if c["cell_type"] == "code"}
        found = set()
        for first in firsts:
            hits = [i for i, head in heads.items() if head.startswith(first)]
            assert len(hits) == 1, (page, first, hits)
            found.add(hits[0])
        out[page] = found
    return out

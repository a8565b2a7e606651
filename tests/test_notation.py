"""tmath.notation: the registry, the notation page that must agree with it, and the
checker that finds SymPy symbols a notebook creates outside the registry."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import sympy as sp

import tmath
from tmath import notation, symbolic
from tmath.notation import MATRICES, SCOPE_BOOK, SCOPE_PATHS, SYMBOLS, sym, syms

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "notation.md"


# --- the page and the registry agree row by row ------------------------------------------

def page_tables(text: str) -> dict[str, list[list[str]]]:
    """``{section title: rows}`` of the first table under each ``## `` heading (header dropped)."""
    tables: dict[str, list[list[str]]] = {}
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("|") and section is not None:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows = tables.setdefault(section, [])
            rows.append(cells)
    # drop each table's header and |---| separator
    return {k: [r for r in v[2:]] for k, v in tables.items()}


def code(text: str | None) -> str:
    return f"`{text}`" if text else "—"


def expected_tables() -> dict[str, list[list[str]]]:
    entries = list(SYMBOLS.values())
    return {
        "形状与规模": [
            [f"${e.latex}$", e.meaning, code(e.config_field), e.hf_keys or "—"]
            for e in entries if e.size
        ],
        "计数、字节与速率": [
            [f"${e.latex}$", e.meaning] for e in entries if e.scope == SCOPE_BOOK and not e.size
        ],
        "各章局部记号": [
            [f"${e.latex}$", e.meaning, e.scope] for e in entries if e.scope != SCOPE_BOOK
        ],
        "矩阵": [[f"${m.latex}$", m.meaning, m.scope] for m in MATRICES.values()],
    }


@pytest.mark.parametrize("section", list(expected_tables()))
def test_page_table_matches_registry_row_by_row(section):
    rows = page_tables(PAGE.read_text(encoding="utf-8"))
    assert section in rows, f"book/notation.md has no table under '## {section}'"
    want = expected_tables()[section]
    got = rows[section]
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        assert g == w, f"{section}, row {i + 1}: page {g} != registry {w}"
    assert len(got) == len(want), f"{section}: page has {len(got)} rows, registry {len(want)}"


def test_page_table_parser_sees_a_drifted_row():
    """The comparison above can fail: one changed meaning is a mismatch."""
    text = PAGE.read_text(encoding="utf-8").replace("| query 头数 |", "| 注意力头数 |", 1)
    assert page_tables(text)["形状与规模"] != expected_tables()["形状与规模"]


def test_every_page_symbol_row_is_in_a_checked_table():
    """No fifth table of symbols can hide on the page unchecked."""
    headers = [line for line in PAGE.read_text(encoding="utf-8").splitlines()
               if line.startswith("| 记号 |")]
    assert len(headers) == len(expected_tables())


# --- one letter, one meaning ----------------------------------------------------------------

def test_names_and_latex_are_unique():
    names = [e.sympy_name for e in SYMBOLS.values()]
    assert len(names) == len(set(names))
    latex = [e.latex for e in SYMBOLS.values()] + [m.latex for m in MATRICES.values()]
    assert len(latex) == len(set(latex))


def test_scopes_are_the_book_or_known_chapters():
    for e in list(SYMBOLS.values()) + list(MATRICES.values()):
        assert e.scope == SCOPE_BOOK or e.scope in SCOPE_PATHS, (e.key, e.scope)
    for scope, paths in SCOPE_PATHS.items():
        for p in paths:
            target = ROOT / "book" / p
            assert target.is_dir() if p.endswith("/") else target.with_suffix(".ipynb").is_file(), (
                scope, p)


def test_meanings_are_chinese():
    for e in list(SYMBOLS.values()) + list(MATRICES.values()):
        assert re.search(r"[\u4e00-\u9fff]", e.meaning), e.key


def test_config_fields_exist_on_modelconfig():
    cfg = tmath.preset("deepseek-v3")
    fields = {f.name for f in dataclasses.fields(cfg)}
    for e in SYMBOLS.values():
        if e.config_field:
            assert e.config_field in fields or hasattr(cfg, e.config_field), e.config_field


def test_the_collisions_of_issue_14_are_resolved():
    # each of these meanings has its own symbol, distinct from the book-wide letter
    assert sym("N_gpu") != sym("N") and sym("P_chip") != sym("P")
    assert sym("T_train") != sym("T") and sym("E_shared") != sym("S")
    assert sym("W_link") != sym("W") and sym("delta") != sym("D")
    assert sym("E_J") != sym("E")
    for local in ("d_1", "d_2", "d_3"):  # matmul dimensions are not N, P, M
        assert SYMBOLS[local].scope != SCOPE_BOOK
    assert "M" not in SYMBOLS and "Q" not in SYMBOLS  # the source's matmul M, PaLM's Q
    assert "h" in SYMBOLS and "头数" in SYMBOLS["h"].meaning  # h: heads only


# --- sym / syms ---------------------------------------------------------------------------

def test_sym_is_the_same_object_with_its_assumptions():
    d = sym("D")
    assert d is sym("D")
    assert d == sp.Symbol("D", positive=True, integer=True)
    assert d.is_integer and d.is_positive
    assert sym("eta").is_positive and sym("eta").is_integer is None
    assert sym("PUE").name == r"\mathrm{PUE}"


def test_syms_splits_on_spaces_and_commas():
    assert syms("D L V") == (sym("D"), sym("L"), sym("V"))
    assert syms("N_gpu, P_chip") == (sym("N_gpu"), sym("P_chip"))


def test_unknown_keys_and_bad_types():
    with pytest.raises(KeyError, match="'Q' is not in the book's notation"):
        sym("Q")
    with pytest.raises(TypeError, match="key must be a str"):
        sym(3)
    with pytest.raises(TypeError, match="keys must be a str"):
        syms(["D"])


def test_latex_uses_the_registry_spelling():
    assert notation.latex(sym("N_gpu") * sym("P_chip")) == r"N_{\text{gpu}} P_{\text{chip}}"
    assert notation.latex(6 * sym("P") * sym("T_train")) == r"6 P T_{\text{train}}"


def test_symbolic_takes_its_symbols_from_the_registry():
    for attr, key in [("B", "B"), ("T", "T"), ("D", "D"), ("F", "F"), ("L", "L"), ("N", "N"),
                      ("K", "K"), ("H", "H"), ("V", "V"), ("d", "d"), ("f", "F"),
                      ("n_layers", "L"), ("vocab", "V"), ("n_ctx", "n_ctx"), ("n_tok", "n"),
                      ("d_head", "d_head"), ("d_out", "d_out")]:
        assert getattr(symbolic, attr) is sym(key), attr


# --- undeclared_symbols ------------------------------------------------------------------

def write_notebook(tmp_path: Path, *cells: tuple[str, str], name: str = "nb.ipynb") -> Path:
    nb = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True),
             **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for kind, src in cells
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_undeclared_symbols_on_a_synthetic_notebook(tmp_path):
    path = write_notebook(
        tmp_path,
        ("markdown", 'sp.Symbol("zzz") in prose is not code'),
        ("code", "%matplotlib inline\nimport sympy as sp\nfrom sympy import symbols as mk"),
        ("code", 'D, L, V = sp.symbols("D L V", positive=True, integer=True)\n'
                 'x = sp.Symbol("sigma^2")\n'
                 's = sp.symbols("s1:4", real=True)  # entries of S\n'
                 'mk("Q R")'),
        ("code", 'import sympy\nU = sympy.Symbol("U")\nA = sp.Matrix(2, 2, lambda i, j: '
                 'sp.Symbol(f"a_{i}{j}"))\nname = "w"\nsp.Symbol(name)\nsp.Symbol("sigma^2")'),
        ("code", 'X = sp.MatrixSymbol("X", 3, 4)\nY2 = sp.MatrixSymbol("Ux", 3, 4)\n'
                 'm = sp.symbols("m1 m2 m", real=True)'),
    )
    assert notation.undeclared_symbols(path) == ["sigma^2", "Q", "U", "<name>", "Ux"]


def test_chapter_local_symbols_count_only_in_their_chapter(tmp_path):
    path = write_notebook(tmp_path, ("code", 'import sympy as sp\ng = sp.Symbol("g")\n'
                                              'n = sp.Symbol("N_gpu")'))
    assert notation.undeclared_symbols(path, chapter="energy/energy") == []
    assert notation.undeclared_symbols(path, chapter="ledger/moe-deepseek") == ["g"]
    assert notation.undeclared_symbols(path) == []  # outside book/: any scope


def test_chapter_of_a_book_path():
    assert notation.chapter_of(ROOT / "book" / "gpt3" / "forward.ipynb") == "gpt3/forward"
    assert notation.chapter_of("/tmp/x.ipynb") is None
    assert notation.in_scope(SYMBOLS["d"].scope, "intro/tour")
    assert not notation.in_scope(SYMBOLS["d"].scope, "ledger/memory")


def test_a_notebook_that_uses_the_registry_is_clean(tmp_path):
    path = write_notebook(
        tmp_path,
        ("code", "from tmath.notation import sym, syms\nD, L = syms('D L')\nP = sym('P')"),
        name="clean.ipynb",
    )
    assert notation.undeclared_symbols(path) == []


# --- the capacity convention the page states ------------------------------------------------

def test_capacity_convention_on_the_page_matches_the_hardware_table():
    """The notation page types the H100's capacity figures: they must be tmath.hardware's."""
    from tmath import fmt
    from tmath.hardware import hardware
    from tmath.serving import WORKSPACE_BYTES_PER_GPU

    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## 显存容量", 1)[1].split("\n## ", 1)[0]
    h100 = hardware("H100")
    runtime = h100.runtime_total_bytes
    for figure in (
        fmt.num(h100.hbm_bytes),                            # 85,899,345,920 bytes
        f"{h100.hbm_bytes / 1e9:.1f}",                      # 85.9
        f"{h100.hbm_bytes / 2**30:.0f} GiB",                # 80 GiB
        f"{runtime / 2**20:,.0f} MiB",                      # nvidia-smi's 81,559 MiB
        f"{runtime / 1e9:.2f}",                             # 85.52
        f"{runtime / 2**30:.1f} GiB",                       # 79.6 GiB
        f"{WORKSPACE_BYTES_PER_GPU / 1e9:.0f} GB",          # the 5 GB workspace
        f"{100 * (1 - 80e9 / h100.hbm_bytes):.0f}%",        # 80e9 understates by 7 %
        f"{(h100.hbm_bytes - runtime) / 1e9:.1f} GB",       # the driver keeps < 0.4 GB
    ):
        assert figure in section, f"the notation page's capacity section lacks {figure!r}"
    for name in ("A100", "H200", "V100"):
        assert f"{hardware(name).hbm_bytes / 2**30:.0f} GiB" in section, name

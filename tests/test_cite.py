"""tmath.sources.cite: how a printed output names a source (never the raw BibTeX key)."""

from __future__ import annotations

import re

import pytest

from tmath.sources import CITATIONS, SOURCES, cite


@pytest.mark.parametrize("key", sorted(SOURCES))
def test_every_source_prints_as_a_citation_not_a_key(key):
    text = cite(key)
    assert key not in text, f"{key}: the citation prints the raw key"
    assert not any(re.search(rf"\b{re.escape(k)}\b", text) for k in SOURCES), text
    assert re.search(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", text), f"{key}: not a Chinese citation"
    assert len(text) <= 70, f"{key}: too long to print beside a figure ({len(text)} characters)"


def test_the_table_names_only_registered_sources():
    assert set(CITATIONS) <= set(SOURCES), sorted(set(CITATIONS) - set(SOURCES))


def test_examples():
    assert cite("nvidia-h100-datasheet") == "NVIDIA《H100 Tensor Core GPU 数据手册》"
    assert cite("brown2020gpt3").startswith("Brown 等（2020）")


def test_unknown_key_and_missing_citation_name_the_fix(monkeypatch):
    with pytest.raises(ValueError, match="unknown source key 'nope'"):
        cite("nope")
    monkeypatch.delitem(CITATIONS, "brown2020gpt3")
    with pytest.raises(ValueError, match="add it to tmath.sources.CITATIONS"):
        cite("brown2020gpt3")


@pytest.mark.parametrize("key", sorted(SOURCES))
def test_the_short_form_is_the_author_and_year(key):
    short = cite(key, short=True)
    assert short and cite(key).startswith(short) and key not in short
    assert "《" not in short, short


def test_short_examples():
    assert cite("brown2020gpt3", short=True) == "Brown 等（2020）"
    assert cite("nvidia-h100-datasheet", short=True) == "NVIDIA"

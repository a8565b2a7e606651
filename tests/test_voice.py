"""One voice for a Chinese reader (issue 14): checks of a built page, as pure functions.

Each check takes a page's HTML as a string and returns what is wrong with it (an
empty list when the page is fine).  The unit tests below run them on small HTML
snippets; ``tests/test_voice_site.py`` runs the same functions on every page of
the strictly built site (the ``built_site`` fixture).

- :func:`e_notation`: computer float notation (``3.229e+23``, ``1e-6``) in text
  outside code and math; tables, captions and glued values included.
- :func:`wide_code_lines`: shown code (``div.cell_input pre``) wider than
  :data:`CODE_WIDTH` characters.
- :func:`typed_references`: a hand-typed ``练习 12``, ``命题 3``, ``图 4``, ``表 2``
  or ``式 (8)`` in prose whose number is not inside a link made by
  ``{ref}``/``{numref}``/``{prf:ref}`` (``<a class="reference internal">``).
  Decisions: the source's own equation numbers (8.10-8.15 and their primed
  forms) are names quoted from the source, not cross-references, so ``式 (8.10′)``
  is allowed; a table or figure of a paper or report (``论文的表 2.1``,
  ``技术报告表 1``, ``原文图 3``) is a citation of that document, not of the book;
  the numbers sphinx writes itself (``<span class="caption-number">``, the title
  of an exercise, solution or proposition box) are not references.
- :func:`doubled_reference_words`: ``按命题 命题 3``: the word typed before a
  reference role that already prints it.
- :func:`alt_without_chinese`: ``<img>`` whose alt text has no Chinese.
- :func:`english_headers`: a table header cell (``th``) that has no Chinese and
  is not pure math, symbols, units or names (``$T$``, ``GB``, ``FLOPs/token``,
  ``H100``, ``Llama``).
- :func:`tex_in_title`: raw TeX in the page ``<title>`` (the browser tab and
  the PDF header show it verbatim).
"""

from __future__ import annotations

import functools
import re

import pytest
from bs4 import BeautifulSoup, NavigableString, Tag

CODE_WIDTH = 88
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# Elements whose text is code or math, not prose.
CODE_OR_MATH = (
    "pre", "code", "kbd", "samp", "script", "style", "head",
    ".highlight", ".cell_input", ".math", "mjx-container", ".MathJax",
)


@functools.lru_cache(maxsize=4)
def _soup(html: str) -> BeautifulSoup:
    """The parsed page, shared by the checks (none of them changes the tree)."""
    return BeautifulSoup(html, "html.parser")


def _inside(node: NavigableString | Tag, selectors: tuple[str, ...]) -> bool:
    """Whether ``node`` or one of its ancestors matches one of the simple selectors."""
    el = node if isinstance(node, Tag) else node.parent
    while isinstance(el, Tag):
        for sel in selectors:
            if sel.startswith("."):
                if sel[1:] in (el.get("class") or []):
                    return True
            elif el.name == sel:
                return True
        el = el.parent
    return False


def _matches(el: Tag, selectors: tuple[str, ...]) -> bool:
    """Whether ``el`` itself matches one of the simple selectors (a tag name or ``.class``)."""
    classes = el.get("class") or ()
    return any(sel[1:] in classes if sel.startswith(".") else el.name == sel for sel in selectors)


def _strings_outside(html: str, skip: tuple[str, ...],
                     marks: tuple[tuple[str, ...], ...] = ()) -> list[tuple[NavigableString, frozenset]]:
    """The page body's non-blank text nodes that are not inside an element matching ``skip``,
    in document order, each with the indices of the ``marks`` (selector groups) it is inside.

    One walk of the tree (asking :func:`_inside` of every text node walks its ancestors again,
    for every check: a few seconds a site)."""
    soup = _soup(html)
    found: list[tuple[NavigableString, frozenset]] = []

    def walk(el: Tag, inside: frozenset) -> None:
        for child in el.children:
            if isinstance(child, Tag):
                if not _matches(child, skip):
                    walk(child, inside | {i for i, m in enumerate(marks) if _matches(child, m)})
            elif type(child) is NavigableString and child.strip():
                found.append((child, inside))

    root = soup.body or soup
    walk(root, frozenset(i for i, m in enumerate(marks) if isinstance(root, Tag) and _matches(root, m)))
    return found


@functools.lru_cache(maxsize=16)
def _prose_strings(html: str, skip: tuple[str, ...] = CODE_OR_MATH) -> list[NavigableString]:
    """Text nodes of the body outside ``skip`` (code and math by default); shared, do not change."""
    return [s for s, _ in _strings_outside(html, skip)]


def _context(text: str, start: int, end: int, width: int = 20) -> str:
    return text[max(0, start - width):end + width].strip()


# --- (a) e-notation --------------------------------------------------------------------

# a decimal mantissa, e or E, a signed exponent; not part of an identifier or a hex number
E_NOTATION = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d*)?[eE][+\-]?\d+(?![0-9A-Za-z_])")


def e_notation(html: str) -> list[str]:
    """Every ``3.229e+23`` in the page's text outside code and math, with some context."""
    found = []
    for s in _prose_strings(html):
        text = str(s)
        for m in E_NOTATION.finditer(text):
            found.append(f"{m.group(0)!r} in “{_context(text, m.start(), m.end())}”")
    return found


# --- (b) wide code ------------------------------------------------------------------------

def wide_code_lines(html: str, width: int = CODE_WIDTH) -> list[str]:
    """Lines of shown code (``div.cell_input pre``) longer than ``width`` characters."""
    found = []
    for block in _soup(html).select("div.cell_input pre"):
        for line in block.get_text().splitlines():
            if len(line) > width:
                found.append(f"{len(line)} 字符：{line[:60]}…")
    return found


# --- (c) hand-typed references -----------------------------------------------------------------

# The source's own equation numbers: 8.10-8.15, primed or not.
SOURCE_EQUATIONS = frozenset(
    f"8.{n}{prime}" for n in range(10, 16) for prime in ("", "′", "'")
)
# Words before 表/图 that make them part of another word (代表 2 个, 试图 3 次).
_NOT_A_REFERENCE_BEFORE = set("代列发制时价仪外手电地试意视构绘插版蓝草略谱总")
# A table, figure or theorem of another document, named earlier in the same sentence:
# 论文的表 2.1, 技术报告表 1, 原文图 3, Patterson 等人表 4, or a citation link before it.
_CITED_DOCUMENT = re.compile(r"论文|原文|报告|手册|模型卡|文献|数据表|等人|\bpaper\b|\breport\b|〔引文〕",
                             re.IGNORECASE)
_SENTENCE_END = re.compile(r"[。！？；!?;\n]")
_BLOCKS = ("p", "li", "td", "th", "dd", "dt", "figcaption", "caption", "h1", "h2", "h3", "h4")


def _sentence_before(s: NavigableString, offset: int) -> str:
    """The text of ``s``'s sentence before ``offset``, citation links marked 〔引文〕."""
    block = s.parent
    while isinstance(block, Tag) and block.name not in _BLOCKS and block.parent is not None:
        block = block.parent
    parts = []
    for node in block.descendants if isinstance(block, Tag) else []:
        if node is s:
            parts.append(str(s)[:offset])
            break
        if isinstance(node, Tag) and node.name == "a" and "bibliography" in (node.get("href") or ""):
            parts.append("〔引文〕")
        elif type(node) is NavigableString:
            parts.append(str(node))
    else:
        parts = [str(s)[:offset]]
    text = "".join(parts)
    return _SENTENCE_END.split(text)[-1]
_REFERENCE = re.compile(
    r"(?P<word>练习|命题|定理|引理|定义|推论|图|表)\s*(?P<num>\d+(?:[.\-–]\d+)*)"
    r"|(?P<eq>式)\s*[（(]\s*(?P<eqnum>[\d.]+[′']?)\s*[)）]"
)
# The boxes whose title sphinx numbers itself.
_NUMBERED_BOXES = (".exercise", ".solution", ".proof")


def _is_box_title(s: NavigableString) -> bool:
    el = s.parent
    while isinstance(el, Tag):
        if "admonition-title" in (el.get("class") or []):
            return _inside(el, _NUMBERED_BOXES)
        el = el.parent
    return False


def _in_internal_link(s: NavigableString) -> bool:
    el = s.parent
    while isinstance(el, Tag):
        if el.name == "a" and {"reference", "internal"} <= set(el.get("class") or []):
            return True
        el = el.parent
    return False


def typed_references(html: str) -> list[str]:
    """Hand-typed ``练习 N``/``命题 N``/``图 N``/``表 N``/``式 (N)`` in prose that are not links."""
    found = []
    for s in _prose_strings(html, CODE_OR_MATH + (".caption-number",)):
        if _in_internal_link(s) or _is_box_title(s):
            continue
        text = str(s)
        for m in _REFERENCE.finditer(text):
            before = text[:m.start()]
            if m.group("eq"):
                if m.group("eqnum") in SOURCE_EQUATIONS:
                    continue
            else:
                word = m.group("word")
                if word in "图表" and before and before[-1] in _NOT_A_REFERENCE_BEFORE:
                    continue
                if _CITED_DOCUMENT.search(_sentence_before(s, m.start())):
                    continue
            found.append(f"“{m.group(0)}” in “{_context(text, m.start(), m.end())}”")
    return found


_REF_WORD_AT_END = re.compile(r"(练习|命题|定理|引理|定义|推论|图|表|式)\s*$")


def doubled_reference_words(html: str) -> list[str]:
    """``按命题 <a>命题 3</a>``: a reference word typed right before a link that prints it."""
    found = []
    for a in _soup(html).select("a.reference.internal"):
        prev = a.previous_sibling
        if not isinstance(prev, NavigableString):
            continue
        m = _REF_WORD_AT_END.search(str(prev))
        if m and a.get_text().strip().startswith(m.group(1)):
            found.append(f"“{m.group(1)} {a.get_text().strip()}”")
    return found


# --- (d) alt text ---------------------------------------------------------------------------

def alt_without_chinese(html: str) -> list[str]:
    """``<img>`` elements whose alt text has no Chinese (or no alt at all)."""
    return [
        f"<img src={img.get('src')!r} alt={img.get('alt')!r}>"
        for img in _soup(html).find_all("img")
        if not CJK.search(img.get("alt") or "")
    ]


# --- (e) table headers --------------------------------------------------------------------------

# Words a header may hold without Chinese: units, number formats and names that are not translated.
HEADER_WORDS = frozenset("""
    B kB MB GB TB PB KiB MiB GiB TiB bytes
    s ms us ns h
    FLOP FLOPs GFLOP TFLOP PFLOP token tokens
    J kJ MJ W kW MW kWh MWh GWh kg t CO e L
    bf16 fp32 fp16 fp8 int8 int4 dtype
    GPT Llama DeepSeek Mixtral Mistral Qwen Gemma Phi OLMo Chinchilla PaLM Megatron
    FlashAttention PyTorch NumPy SymPy transformers tmath
    Korthikanti Patterson Dao Kaplan Hoffmann Rajbhandari Narayanan Chowdhery
""".split())
_WORD = re.compile(r"[A-Za-z]+[A-Za-z0-9]*")


def _header_is_symbolic(text: str) -> bool:
    """No Chinese needed: every word is a unit, an acronym (GQA, KV, H100), a name or one letter."""
    for word in _WORD.findall(text):
        if len(word) == 1 or word in HEADER_WORDS or word.rstrip("0123456789") in HEADER_WORDS:
            continue  # a name with its generation (Qwen3) is a name
        if word.isupper() or re.fullmatch(r"[A-Z]+\d+[A-Za-z0-9]*", word):  # GQA, H100, V3
            continue
        if re.fullmatch(r"[A-Z][a-z]?\d+", word):  # v5e-like, Gb2
            continue
        return False
    return True


def english_headers(html: str) -> list[str]:
    """Table header cells with no Chinese that hold English words."""
    found = []
    for th in _soup(html).find_all("th"):
        full = th.get_text(" ", strip=True)
        if not full or CJK.search(full):
            continue
        # math and code inside the cell are symbols by construction
        clone = BeautifulSoup(str(th), "html.parser")  # a copy: the shared tree stays whole
        for el in clone.select(".math, code, mjx-container, script"):
            el.decompose()
        if not _header_is_symbolic(clone.get_text(" ", strip=True)):
            found.append(f"<th>{full}</th>")
    return found


# --- (f) titles ----------------------------------------------------------------------------------

_TEX_IN_TITLE = re.compile(r"\\\(|\\\)|\$|\^\{|\\[A-Za-z]+")


def tex_in_title(html: str) -> list[str]:
    """The page ``<title>`` if it shows raw TeX (``\\(12d^2\\)``, ``$``, ``^{``, ``\\text``)."""
    title = _soup(html).title
    if title is None:
        return []
    text = title.get_text()
    return [text] if _TEX_IN_TITLE.search(text) else []


# --- (h) negative zero and Python notation in what a reader sees --------------------------

# What a reader sees as a result: prose, tables and cell outputs (which myst-nb renders in a
# ``.highlight`` box inside ``.cell_output``); not the code typed in a cell (``.cell_input``),
# a code block of the prose, a Python listing an output shows (``.highlight-python``: the
# errata appendix prints the code that settles each erratum), nor inline code.
_SHOWN_SKIP = ("script", "style", "head", "code", ".cell_input", ".highlight-python")
_NEG_ZERO = re.compile(r"(?<![\w.])[−-]0(?:\.0*)?(?![\d.])")
_PY_OPERATOR = re.compile(r"[\w)\]]\s?\*\*?\s?[\w(]")


@functools.lru_cache(maxsize=4)
def _shown_strings(html: str) -> list[NavigableString]:
    """Text nodes a reader sees as a result (above): a ``.highlight`` box counts only inside a
    cell's output.  Shared, do not change."""
    return [s for s, inside in _strings_outside(html, _SHOWN_SKIP, ((".cell_output",), (".highlight",)))
            if 0 in inside or 1 not in inside]


def negative_zero(html: str) -> list[str]:
    """``−0``, ``-0.0``, ``−0.00%``: a rounded negative that prints as a signed zero."""
    return [_context(str(s), m.start(), m.end()) for s in _shown_strings(html)
            for m in _NEG_ZERO.finditer(str(s))]


def python_notation(html: str) -> list[str]:
    """``34*H/5`` or ``2**30`` shown as a result (a table, an output, prose): write × and powers."""
    return [_context(str(s), m.start(), m.end()) for s in _shown_strings(html)
            for m in _PY_OPERATOR.finditer(str(s))]


CHECKS = {
    "e_notation": e_notation,
    "wide_code_lines": wide_code_lines,
    "typed_references": typed_references,
    "doubled_reference_words": doubled_reference_words,
    "alt_without_chinese": alt_without_chinese,
    "english_headers": english_headers,
    "tex_in_title": tex_in_title,
    "negative_zero": negative_zero,
    "python_notation": python_notation,
}


# =============================== unit tests on small HTML =====================================

def page(body: str, title: str = "记号 — Transformer 的数学") -> str:
    return f"<html><head><title>{title}</title></head><body>{body}</body></html>"


@pytest.mark.parametrize(
    "body",
    [
        "<p>GPT-3 的训练量约 3.229e+23 FLOPs。</p>",
        "<table><tr><td>5.8e+15</td></tr></table>",
        "<figure><figcaption>误差小于 1e-6</figcaption></figure>",
        '<p>约<span class="pasted-text">4.17E+11</span>FLOP/J</p>',
        "<p>乘积为2.5e5次</p>",
    ],
)
def test_e_notation_is_found_in_prose_tables_captions(body):
    assert e_notation(page(body))


@pytest.mark.parametrize(
    "body",
    [
        "<p>GPT-3 的训练量约 3.229 × 10²³ FLOPs。</p>",
        "<pre>print(3.229e+23)</pre>",
        '<div class="cell_input"><div class="highlight"><pre>x = 1e-6</pre></div></div>',
        "<p>代码里写作 <code>1e-6</code>。</p>",
        '<p><span class="math notranslate nohighlight">\\(10^{-6}\\) 即 1e-6</span></p>',
        "<p>fp8 的 E4M3 与 E5M2 格式；哈希 0x1e5；型号 a1e5；版本 v2e3。</p>",
        '<div class="highlight-ipython3"><div class="highlight"><pre>5.8e+15</pre></div></div>',
    ],
)
def test_e_notation_ignores_code_math_and_look_alikes(body):
    assert e_notation(page(body)) == []


def test_wide_code_lines():
    ok = "x" * CODE_WIDTH
    wide = "y" * (CODE_WIDTH + 1)
    html = page(
        f'<div class="cell_input docutils container"><div class="highlight"><pre>{ok}\n{wide}\n'
        f'short</pre></div></div><div class="cell_output"><pre>{wide}</pre></div>'
    )
    found = wide_code_lines(html)
    assert len(found) == 1 and found[0].startswith(f"{CODE_WIDTH + 1} 字符")


@pytest.mark.parametrize(
    "body",
    [
        "<p>练习 1 说明 8 张 80 GB 的卡放不下 fp8 权重。</p>",
        "<p>（见练习 2）</p>",
        "<p>由命题3 可知</p>",
        "<p>如图 4 所示</p>",
        "<p>见表 2。</p>",
        "<p>代入式 (7) 得</p>",
        "<p>由式（8.16）得</p>",
        "<p>论文很长。见表 2。</p>",  # the document was named in an earlier sentence only
        '<p><a class="reference internal" href="#sec">上一节</a>的图 3</p>',  # not a citation
    ],
)
def test_typed_references_are_found(body):
    assert typed_references(page(body))


@pytest.mark.parametrize(
    "body",
    [
        '<p>见<a class="reference internal" href="#ex-moe-2"><span>练习 52</span></a>。</p>',
        '<p>按<a class="reference internal" href="#p"><span class="std">命题 3</span></a>恰好</p>',
        '<p>如<a class="reference internal" href="#fig"><span class="std std-numref">图 4</span></a></p>',
        "<p>原文的式 (8.10) 与式 (8.15′) 是原文自己的编号。</p>",
        "<p>GPT-3 论文的表 2.1 给出架构；技术报告表 1 给出卡时。</p>",
        "<p>论文自身的不一致：表 2.1 的两行不同。Patterson 等人（2021）表 4 的输入。</p>",
        '<p><a class="reference internal" href="../appendix/bibliography.html#id3">Dao 2022</a>'
        "的图 2（左）测的正是这个形状</p>",
        "<p>论文的定理 2（Theorem 2）说</p>",
        "<p>每个数代表 2 个字节；列表 3 项。</p>",
        '<figure><figcaption><span class="caption-number">图 4 </span>注意力</figcaption></figure>',
        '<div class="exercise admonition" id="ex-1"><p class="admonition-title">'
        "<span>练习 12</span></p><p>题干</p></div>",
        '<div class="proof proposition admonition"><p class="admonition-title">'
        '<span class="caption-number">命题 3 </span>（矩阵乘）</p></div>',
        "<pre>练习 3</pre>",
    ],
)
def test_links_source_names_and_sphinx_numbers_are_not_typed_references(body):
    assert typed_references(page(body)) == []


def test_doubled_reference_words():
    doubled = page('<p>按命题 <a class="reference internal" href="#p"><span>命题 3</span></a>恰好</p>')
    single = page('<p>按<a class="reference internal" href="#p"><span>命题 3</span></a>恰好</p>')
    assert doubled_reference_words(doubled) == ["“命题 命题 3”"]
    assert doubled_reference_words(single) == []


def test_alt_text_must_have_chinese():
    html = page(
        '<img src="a.png" alt="注意力热图：三个 token 的权重">'
        '<img src="b.png" alt="_images/b.png"><img src="c.png">'
        '<img src="d.png" alt="attention heatmap">'
    )
    assert [f.split("'")[1] for f in alt_without_chinese(html)] == ["b.png", "c.png", "d.png"]


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("部件", True),
        ("训练 FLOPs/token（G）", True),
        ('<span class="math notranslate nohighlight">\\(T\\)</span>', True),
        ("GB", True),
        ("FLOPs/token", True),
        ("H100", True),
        ("Llama 3 70B", True),
        ("GQA", True),
        ("<code>hidden_size</code>", True),
        ("%", True),
        ("Korthikanti（TB）", True),
        ("train FLOPs/token (G)", False),
        ("exact training FLOPs / token", False),
        ("component", False),
        ("seed alpha", False),
        ("black / cat / sleeps (self)", False),
    ],
)
def test_english_headers(header, ok):
    html = page(f"<table><thead><tr><th>{header}</th></tr></thead><tr><td>1</td></tr></table>")
    assert (english_headers(html) == []) is ok


@pytest.mark.parametrize(
    ("title", "ok"),
    [
        ("导览：GPT-3 每层的 12d² 个参数 — Transformer 的数学", True),
        ("导览：GPT-3 每层的 \\(12d^2\\) 个参数 — Transformer 的数学", False),
        ("$6PT$ 何时不准", False),
        ("注意力 O(T^{2})", False),
        ("速查 \\text{FLOPs}", False),
    ],
)
def test_tex_in_title(title, ok):
    assert (tex_in_title(page("<p>正文</p>", title=title)) == []) is ok


@pytest.mark.parametrize("text,found", [
    ("<td>−0.0%</td>", True), ("<pre>差 -0</pre>", True), ("<p>−0.03</p>", False),
    ("<p>10−0</p>", False), ("<p>−0.5</p>", False), ("<td>0.0</td>", False),
])
def test_negative_zero(text, found):
    assert bool(negative_zero(page(text))) == found


@pytest.mark.parametrize("text,found", [
    ("<td>34*H/5</td>", True), ("<pre>2**30 字节</pre>", True), ("<p>34 × H / 5</p>", False),
    ("<p><code>2**30</code></p>", False), ("<div class='cell_input'><pre>a*b</pre></div>", False),
    ("<p>注*</p>", False), ("<div class='highlight'><pre>a*b</pre></div>", False),
    ("<div class='cell_output'><div class='highlight'><pre>T* = 34*H/5</pre></div></div>", True),
    ("<div class='cell_output'><div class='highlight-python'><div class='highlight'><pre>a*b</pre>"
     "</div></div></div>", False),
])
def test_python_notation(text, found):
    assert bool(python_notation(page(text))) == found


def test_a_clean_page_passes_every_check():
    html = page(
        "<h1>注意力的账本</h1><p>训练量约 3.229 × 10²³ FLOPs，见"
        '<a class="reference internal" href="#ex-1"><span>练习 6</span></a>。</p>'
        '<img src="f.png" alt="FLOPs 随序列长度的变化">'
        "<table><thead><tr><th>部件</th><th>GB</th></tr></thead><tr><td>1</td><td>2</td></tr></table>"
        '<div class="cell_input"><div class="highlight"><pre>x = 1e-6\n</pre></div></div>'
    )
    assert {name: check(html) for name, check in CHECKS.items()} == {name: [] for name in CHECKS}

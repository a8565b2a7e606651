"""The book's notebooks as plain JupyterLab shows them: numbers, not MyST markup.

The website renders the notebooks' MyST: ``{glue:text}`` pastes a number computed in a hidden
cell, ``{numref}`` prints 图 3, ``{cite}`` prints [Brown *et al.*, 2020], directives draw boxes,
and the cells tagged ``remove-cell`` are not there at all. JupyterLab renders none of this: it
shows the roles and directives as typed, and the hidden cells as ordinary code. This module
writes a copy of each notebook that reads right in plain JupyterLab:

- glue resolved: ``{glue:text}`key:,.0f``` becomes the text the website shows, from the
  value saved in the notebook's outputs, formatted as myst-nb formats it; ``{glue:md}`` pastes
  its Markdown. The glue records themselves are dropped from the outputs (JupyterLab has no
  renderer for them).
- cross-references: ``{doc}``, ``{ref}``, ``{numref}``, ``{prf:ref}`` and ``{eq}`` become
  Markdown links to the sibling notebook (the book has no public website address yet:
  ``_config.yml``), with the text the website prints (图 27, 练习 94, 命题 3, a section's
  title), numbered as Sphinx numbers them (``numfig`` without section numbers: one counter
  per kind for the whole book, in the order of ``_toc.yml``).
- ``{cite}``: author–year, as the website's ``bibtex_reference_style: author_year`` prints it
  ([Brown *et al.*, 2020]; two authors: [Dao and Ermon, 2022]), linked to the entry's URL.
- directives into plain Markdown: an admonition (or note, warning, ...) into a blockquote
  with a bold title; ``{prf:proposition}`` into a blockquote titled 命题 N; ``{math}`` into
  ``$$ … $$``; ``{figure}`` into an image and its caption; ``{exercise-start}`` into a bold
  练习 N; a solution (full edition only: the student edition has none) into a bold heading;
  ``{only}`` kept or dropped by the edition; ``(label)=`` lines and ``:label:`` options dropped.
- hidden cells marked and collapsed: a cell tagged ``remove-cell`` (bookkeeping: glue, the
  book's own asserts) gets a first line ``# 记账单元格（网站上隐藏）`` and its input and outputs
  collapsed (``metadata.jupyter.source_hidden`` / ``outputs_hidden``); ``remove-input`` /
  ``hide-input`` collapse the input only, ``remove-output`` the outputs.
- the student edition (:func:`convert` with ``student=True``, for the course kit) drops every
  ``assert`` statement of the ``remove-cell`` cells: the website never shows them, and some
  bound an exercise's answer (``assert 0.32 < emb_share[0] < 0.321`` before ``ex-tour-1``).
  The visible cells keep theirs: the website shows those to students anyway.

    python scripts/lab_notebooks.py [OUT]     (default OUT: _build/lab; what `make lab` opens)

writes the full edition's pages (notebooks, and the ``.md`` pages converted the same way)
under OUT with the book's folder layout. A notebook already there that the reader changed since
it was written is kept, and named in the output (delete it to get the book's version again).
"""

from __future__ import annotations

import ast
import codecs
import copy
import hashlib
import json
import posixpath
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from book_pdf import toc_pages  # the book's pages in _toc.yml's order, as the PDF reads them

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

__all__ = ["Book", "convert", "convert_markdown", "main", "HIDDEN_NOTE", "OUTPUT_NOTE"]

#: The first line of a bookkeeping cell (tagged remove-cell) in a converted notebook.
HIDDEN_NOTE = "# 记账单元格（网站上隐藏）"
#: The first line of a cell whose code the website hides and whose output it shows.
OUTPUT_NOTE = "# 网站上只显示这个单元格的输出"
GLUE_PREFIX = "application/papermill.record/"
MANIFEST = ".converted.json"

# Sphinx's numfig_format for zh_CN, sphinx-exercise's and sphinx-proof's names.
KIND_NAMES = {"figure": "图", "table": "表", "code-block": "列表", "exercise": "练习", "equation": "式"}
PROOF_NAMES = {
    "proposition": "命题", "theorem": "定理", "lemma": "引理", "corollary": "推论", "definition": "定义",
    "remark": "注", "conjecture": "猜想", "example": "例", "property": "性质", "observation": "观察",
    "algorithm": "算法", "criterion": "准则", "assumption": "假设", "axiom": "公理", "proof": "证明",
}
ADMONITION_TITLES = {
    "note": "注", "warning": "警告", "tip": "提示", "hint": "提示", "important": "重要", "caution": "小心",
    "danger": "危险", "error": "错误", "attention": "注意", "seealso": "参见",
}


# --- the book's labels and their numbers -------------------------------------------------------------


@dataclass
class Target:
    page: str  # "book/intro/tour" (a toc entry)
    kind: str  # section, figure, exercise, proof:<type>, equation, other
    text: str  # what {ref} prints: a section's title, 图 3, 练习 1, 命题 2 (title)
    number: str = ""  # what {numref} puts for %s
    anchor: str = ""  # a heading's id in JupyterLab


@dataclass
class Book:
    """What the conversion needs to know about the whole book: pages, titles, labels, glue."""

    pages: list[str]
    titles: dict[str, str] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    bib: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # key -> (author–year, url, title)

    @classmethod
    def load(cls, root: Path = ROOT) -> Book:
        book = cls(pages=toc_pages())
        counters: dict[str, int] = {}

        def number(kind: str) -> str:
            counters[kind] = counters.get(kind, 0) + 1
            return str(counters[kind])

        for page in book.pages:
            path = _page_path(root, page)
            if path is None:
                continue
            for cell in _cells(path):
                if cell["cell_type"] == "markdown":
                    book._scan_markdown(page, cell["source"], number)
                elif cell["cell_type"] == "code":
                    fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
                    if fig.get("name") and fig.get("caption"):
                        n = number("figure")
                        book.targets[fig["name"]] = Target(page, "figure", f"图 {n}", n)
                    for output in cell.get("outputs", []):  # Markdown outputs are MyST too
                        md = output.get("data", {}).get("text/markdown")
                        if md and "scrapbook" not in output.get("metadata", {}):
                            book._scan_markdown(page, "".join(md), number)
        book.bib = _bibliography(root / "book" / "references.bib")
        return book

    def _scan_markdown(self, page: str, text: str, number) -> None:
        pending: list[str] = []
        for line, directive in _walk(text):
            if directive is None:
                m = re.match(r"^\((\S+)\)=\s*$", line)
                if m:
                    pending.append(m.group(1))
                    continue
                heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if heading:
                    title = heading.group(2)
                    if page not in self.titles:
                        self.titles[page] = _plain(title)
                    for label in pending:
                        self.targets[label] = Target(page, "section", _plain(title), anchor=_anchor(title))
                    pending = []
                elif line.strip():
                    for label in pending:  # a label before a box or a paragraph: the page
                        self.targets.setdefault(label, Target(page, "other", self.titles.get(page, page)))
                    pending = []
                continue
            name, arg, options, body = directive
            label = options.get("label") or options.get("name")
            if name == "exercise-start" or name == "exercise":
                if "nonumber" in options:
                    continue
                n = number("exercise")
                if label:
                    self.targets[label] = Target(page, "exercise", f"练习 {n}", n)
            elif name.startswith("prf:") and name != "prf:proof":
                kind = name[4:]
                n = number(f"proof:{kind}")
                if label:
                    title = PROOF_NAMES.get(kind, kind)
                    self.targets[label] = Target(page, f"proof:{kind}", f"{title} {n}", n)
            elif name in ("figure", "glue:figure") and label and body.strip():
                n = number("figure")
                self.targets[label] = Target(page, "figure", f"图 {n}", n)
            elif name == "table" and label:
                n = number("table")
                self.targets[label] = Target(page, "table", f"表 {n}", n)
            elif name in ("math",) and label:
                n = number("equation")
                self.targets[label] = Target(page, "equation", f"({n})", n)
            elif label:
                self.targets[label] = Target(page, "other", arg or self.titles.get(page, page))
            if body:
                self._scan_markdown(page, body, number)
        for m in re.finditer(r"\$\$\s*\((\S+)\)\s*$", text, re.M):  # dollarmath: $$ … $$ (label)
            n = number("equation")
            self.targets[m.group(1)] = Target(page, "equation", f"({n})", n)


def _page_path(root: Path, page: str) -> Path | None:
    for suffix in (".ipynb", ".md"):
        if (root / f"{page}{suffix}").is_file():
            return root / f"{page}{suffix}"
    return None


def _cells(path: Path) -> list[dict]:
    if path.suffix == ".md":
        return [{"cell_type": "markdown", "source": path.read_text(encoding="utf-8")}]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [{**c, "source": "".join(c["source"]) if isinstance(c["source"], list) else c["source"]}
            for c in nb["cells"]]


def _plain(title: str) -> str:
    """A heading's text without Markdown emphasis or code marks (math stays)."""
    return re.sub(r"\*\*|__|`", "", title).strip()


def _anchor(title: str) -> str:
    """JupyterLab's id for a rendered heading: its text with spaces as hyphens."""
    return _plain(title).replace(" ", "-")


def _bibliography(path: Path) -> dict[str, tuple[str, str, str]]:
    """{key: (author–year label as the website prints it, url or "", title)}.

    sphinxcontrib-bibtex's ``author_year`` style: one author's last name, two joined by
    "and" (Wang and others), three or more the first's followed by *et al.*; then the year.
    """
    out = {}
    for key, fields in _bib_entries(path.read_text(encoding="utf-8")).items():
        names = [_last_name(n) for n in _split_top(fields.get("author") or fields.get("editor", ""), " and ")]
        names = [n for n in names if n]
        if len(names) >= 3:
            who = f"{names[0]} *et al.*"
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = names[0] if names else key
        out[key] = (f"{who}, {_latex(fields.get('year', 'n.d.'))}", fields.get("url", "").strip("{}"),
                    _latex(fields.get("title", key)))
    return out


def _bib_entries(text: str) -> dict[str, dict[str, str]]:
    """``@type{key, field = {value} or "value" or number, ...}`` entries (braces nested)."""
    entries = {}
    for m in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        if m.group(1).lower() in ("comment", "string", "preamble"):
            continue
        pos, fields = m.end(), {}
        while True:
            f = re.compile(r"\s*(\w+)\s*=\s*").match(text, pos)
            if not f:
                break
            pos = f.end()
            if text[pos] in "{\"":
                close = {"{": "}", "\"": "\""}[text[pos]]
                depth, end = 0, pos
                while True:
                    ch = text[end]
                    if ch == "{" and close == "}":
                        depth += 1
                    elif ch == close and (close == "\"" and end > pos or depth == 1):
                        break
                    elif ch == "}":
                        depth -= 1
                    end += 1
                value, pos = text[pos + 1:end], end + 1
            else:
                v = re.compile(r"[^,}\s]+").match(text, pos)
                value, pos = v.group(0), v.end()
            fields[f.group(1).lower()] = " ".join(value.split())
            c = re.compile(r"\s*,").match(text, pos)
            if not c:
                break
            pos = c.end()
        entries[m.group(2)] = fields
    return entries


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside braces."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _last_name(name: str) -> str:
    if name.startswith("{") and name.endswith("}") and len(_split_top(name, ",")) == 1 \
            and name.count("{") == 1:  # {DeepSeek-AI}: a name to keep whole
        return _latex(name[1:-1])
    if "," in "".join(re.split(r"\{[^{}]*\}", name)):
        return _latex(_split_top(name, ",")[0])
    words = _split_top(name, " ")
    return _latex(words[-1]) if words else ""


def _latex(text: str) -> str:
    """BibTeX's LaTeX as text: R{\\'e} is Ré, {\\L}ukasz Łukasz, {FlashAttention} FlashAttention."""
    try:
        import latexcodec  # noqa: F401  (registers the "ulatex" codec)

        text = codecs.decode(text, "ulatex")
    except (ImportError, ValueError, TypeError):
        pass
    return re.sub(r"[{}]", "", text)


# --- MyST blocks ---------------------------------------------------------------------------------

_OPEN = re.compile(
    r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[\w:.-]+)\}[ \t]*(?P<arg>.*?)\s*$"
)
_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})")


def _walk(text: str):
    """Yield (line, None) for a line outside directives and (line, (name, arg, options, body))
    for each top-level directive (its opening line). Plain code fences pass through whole."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _OPEN.match(line)
        if m:
            fence = m.group("fence")
            j = i + 1
            while j < len(lines) and not re.match(
                    rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[j]):
                j += 1
            inner = lines[i + 1:j]
            options: dict[str, str] = {}
            while inner and re.match(r"^:[\w-]+:", inner[0]):
                key, _, value = inner.pop(0)[1:].partition(":")
                options[key] = value.strip()
            yield line, (m.group("name"), m.group("arg"), options, "\n".join(inner))
            i = j + 1
            continue
        plain = _FENCE.match(line)
        if plain:  # a code block: its lines are code, never markup
            fence = plain.group("fence")
            j = i + 1
            while j < len(lines) and not re.match(
                    rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[j]):
                j += 1
            yield "\n".join(lines[i:j + 1]), None
            i = j + 1
            continue
        yield line, None
        i += 1


# --- converting Markdown -------------------------------------------------------------------------


class GlueError(ValueError):
    pass


@dataclass
class Page:
    """One page being converted: where it is, its glue, its edition."""

    book: Book
    page: str
    glue: dict[str, dict] = field(default_factory=dict)  # key -> data bundle (prefix removed)
    student: bool = False

    def link(self, page: str, anchor: str = "") -> str:
        here = posixpath.dirname(self.page)
        path = _page_path(ROOT, page)
        suffix = path.suffix if path else ".ipynb"
        rel = posixpath.relpath(page, here) + suffix if page != self.page else ""
        return rel + (f"#{anchor}" if anchor else "")


def convert_markdown(text: str, page: Page) -> str:
    """MyST Markdown as plain (Jupyter) Markdown: see the module's docstring."""
    out: list[str] = []
    for line, directive in _walk(text):
        if directive is None:
            if re.match(r"^\(\S+\)=\s*$", line):
                continue
            line = re.sub(r"^(\s*\$\$)\s*\(\S+\)\s*$", r"\1", line)  # $$ (label): the label goes
            out.append(line if line.lstrip().startswith(("```", "~~~")) else _roles(line, page))
            continue
        out.extend(_directive(*directive, page).split("\n"))
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text)


def _quote(text: str) -> str:
    text = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", text.strip("\n"))
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def _only(expression: str, student: bool) -> bool:
    words = {"student": student, "html": True, "latex": False}
    tokens = re.findall(r"\w+|[()]", expression)
    python = " ".join(t if t in ("and", "or", "not", "(", ")") else str(words.get(t, False)) for t in tokens)
    return bool(eval(python, {"__builtins__": {}}))  # only True/False/and/or/not/parentheses


def _directive(name: str, arg: str, options: dict, body: str, page: Page) -> str:
    book = page.book
    inner = convert_markdown(body, page) if body.strip() else ""
    label = options.get("label") or options.get("name")
    if name == "only":
        return inner if _only(arg, page.student) else ""
    if name in ("exercise-start", "exercise"):
        target = book.targets.get(label or "")
        title = f"**{target.text if target else '练习'}**" + (f"（{_roles(arg, page)}）" if arg else "")
        return title + "\n" + ("\n" + inner if inner else "")
    if name in ("exercise-end", "solution-end"):
        return ""
    if name in ("solution-start", "solution"):
        target = book.targets.get(arg.strip())
        head = f"**{target.text if target else arg} 的解答**" if arg else "**解答**"
        return head + "\n" + ("\n" + inner if inner else "")
    if name.startswith("prf:"):
        kind = name[4:]
        target = book.targets.get(label or "")
        head = target.text if target else PROOF_NAMES.get(kind, kind)
        title = f"**{head}**" + (f"（{_roles(arg, page)}）" if arg else "")
        return _quote(title + ("\n\n" + inner if inner else ""))
    if name == "math":
        return f"$$\n{body.strip()}\n$$"
    if name == "table":
        target = book.targets.get(label or "")
        caption = _roles(arg, page)
        head = f"{target.text}：{caption}" if target and caption else (target.text if target else caption)
        return (f"**{head}**\n\n" if head else "") + inner
    if name in ("figure", "image"):
        alt = options.get("alt", "")
        target = book.targets.get(label or "")
        caption = f"{target.text}：{inner}" if target and inner else inner
        return f"![{alt}]({arg})" + (f"\n\n*{caption}*" if caption else "")
    if name in ("glue:md", "glue:markdown"):
        return convert_markdown(_glue_value(page, arg.strip(), "text/markdown"), page)
    if name in ("glue", "glue:any", "glue:text"):
        return _escape(_glue_text(page, arg.strip()))
    if name == "bibliography":
        entries = sorted(book.bib.items(), key=lambda kv: kv[1][0].lower())
        return "\n".join(f"- {label}：[{title}]({url})" if url else f"- {label}：{title}"
                         for key, (label, url, title) in entries)
    if name in ("code-cell", "code-block", "code", "sourcecode"):
        return f"```{arg}\n{body}\n```"
    if name in ("toctree", "tableofcontents", "margin", "sidebar", "raw", "glossary") and not inner:
        return ""
    # an admonition, a note, a warning, ... (and any other box): a blockquote with a bold title
    title = _roles(arg, page) if name == "admonition" else (
        ADMONITION_TITLES.get(name, name) + (f"：{_roles(arg, page)}" if arg else ""))
    return _quote((f"**{title}**\n\n" if title else "") + inner)


_ROLE = re.compile(
    r"(?P<role>\{(?P<name>[\w:.-]+)\}`(?P<content>[^`]*)`)|(?P<code>(?P<ticks>`+)(?:(?!(?P=ticks)).)+(?P=ticks))"
)


def _roles(text: str, page: Page) -> str:
    """Every inline role of ``text`` replaced; inline code spans are code, left as they are."""
    return _ROLE.sub(lambda m: m.group("code") or _role(m.group("name"), m.group("content"), page), text)


def _explicit(content: str) -> tuple[str | None, str]:
    m = re.match(r"^(.*?)\s*<([^<>]+)>$", content.strip(), re.S)
    return (m.group(1), m.group(2).strip()) if m else (None, content.strip())


def _role(name: str, content: str, page: Page) -> str:
    book = page.book
    if name in ("glue", "glue:", "glue:any", "glue:text"):
        return _escape(_glue_text(page, content))
    if name == "glue:md":
        key = content.rsplit(":", 1)[0] if content.count(":") else content
        return convert_markdown(_glue_value(page, key, "text/markdown"), page).strip()
    if name == "doc":
        text, target = _explicit(content)
        doc = posixpath.normpath(target.lstrip("/") if target.startswith("/")
                                 else posixpath.join(posixpath.dirname(page.page), target))
        title = text or book.titles.get(doc)
        if title is None:
            raise GlueError(f"{page.page}：{{doc}}`{content}` 指向的页面 {doc} 不在 _toc.yml 里")
        return f"[{title}]({page.link(doc)})"
    if name in ("ref", "numref", "prf:ref", "eq", "any", "std:ref"):
        text, label = _explicit(content)
        target = book.targets.get(label)
        if target is None:
            raise GlueError(f"{page.page}：{{{name}}}`{content}` 的标签 {label} 在全书里找不到")
        if name == "numref" and text and "%s" in text:
            shown = text.replace("%s", target.number)
        elif name == "numref" and text and "{number}" in text:
            shown = text.replace("{number}", target.number)
        else:
            shown = text or target.text
        if target.page == page.page and not target.anchor:
            return shown
        return f"[{shown}]({page.link(target.page, target.anchor)})"
    if name in ("cite", "cite:p", "cite:t", "cite:ps", "cite:ts", "footcite"):
        keys = [k.strip() for k in content.split(",") if k.strip()]
        cites = []
        for key in keys:
            if key not in book.bib:
                raise GlueError(f"{page.page}：{{cite}}`{key}` 不在 book/references.bib 里")
            label, url, _ = book.bib[key]
            cites.append(f"[{label}]({url})" if url else label)
        if name.startswith("cite:t"):
            return "、".join(cites)
        return "[" + ", ".join(cites) + "]"
    if name == "math":
        return f"${content}$"
    if name in ("sub", "subscript"):
        return f"<sub>{content}</sub>"
    if name in ("sup", "superscript"):
        return f"<sup>{content}</sup>"
    if name in ("abbr", "term", "guilabel", "kbd", "file", "command", "program", "samp", "dfn"):
        return _explicit(content)[0] or content
    return f"`{content}`"  # a role this book does not use: its content as code, never the markup


_SPECIAL = re.compile(r"[\\`*_\[\]<>$|&]")


def _escape(text: str) -> str:
    """Glued text is pasted as text on the website: the same characters, not Markdown.

    Written as HTML character references, not backslash escapes: ``\\[`` would open display
    math for JupyterLab's MathJax ([96, 2,048, 128] is a tensor's shape, pasted as text)."""
    return _SPECIAL.sub(lambda m: f"&#{ord(m.group(0))};", text)


def _glue_value(page: Page, key: str, mime: str) -> str:
    if key not in page.glue:
        raise GlueError(f"{page.page}：glue 的键 {key!r} 没有保存的值："
                        "先重新执行这个笔记本（make notebooks NB=…）")
    data = page.glue[key]
    if mime not in data:
        raise GlueError(f"{page.page}：glue 的键 {key!r} 没有 {mime} 形式的值")
    value = data[mime]
    return "".join(value) if isinstance(value, list) else value


def _glue_text(page: Page, content: str) -> str:
    """``{glue:text}`key:fmt``` as myst-nb formats it (myst_nb.core.variables.format_plain_text)."""
    key, fmt = (content.rsplit(":", 1) if ":" in content else (content, ""))
    if "::" in key:
        raise GlueError(f"{page.page}：glue 的键 {content!r} 指向另一个页面：本书不这样用")
    raw = _glue_value(page, key, "text/plain")
    try:
        value = ast.literal_eval(raw)
    except (SyntaxError, ValueError):
        value = raw
    if fmt == "":
        return str(value)
    kind = fmt[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt)


# --- converting a notebook ------------------------------------------------------------------------


def _glue_records(nb) -> dict[str, dict]:
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                n = len(meta.get("mime_prefix", ""))
                found[meta["name"]] = {k[n:]: v for k, v in output.get("data", {}).items()}
    return found


def _is_record(output) -> bool:
    meta = output.get("metadata", {}).get("scrapbook")
    return bool(meta and meta.get("mime_prefix"))


def drop_asserts(source: str) -> str:
    """``source`` without its assert statements (a nested one becomes ``pass``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: leave such a cell as it is
        return source
    lines = source.split("\n")
    cut = sorted(((node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
                  for node in ast.walk(tree) if isinstance(node, ast.Assert)), reverse=True)
    for start, end, col, end_col in cut:
        before, after = lines[start - 1][:col], lines[end - 1][end_col:].strip()
        if before.strip() or (after and not after.startswith("#")):  # shares a line: leave it
            continue
        lines[start - 1:end] = [before + "pass"] if col else []
    text = "\n".join(lines).strip("\n")
    try:
        ast.parse(text)
    except SyntaxError:
        return "pass"
    return text


def convert(nb, page: str, book: Book, student: bool = False):
    """A copy of notebook ``nb`` (the page ``page`` of ``book``, e.g. "book/intro/tour")
    that reads right in plain JupyterLab. ``student``: the course kit's edition (``nb`` already
    stripped by ``student_edition.strip_notebook``), whose hidden cells lose their asserts."""
    nb = nbformat.from_dict(copy.deepcopy(nb))
    here = Page(book, page, _glue_records(nb), student)
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = convert_markdown(cell.source, here).strip("\n")
            if cell.source.strip():
                cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        tags = cell.metadata.get("tags", [])
        if "outputs" in cell:
            cell.outputs = [o for o in cell.outputs if not _is_record(o)]
            for output in cell.outputs:  # a Markdown output is MyST on the website
                data = output.get("data", {})
                if "text/markdown" in data:
                    text = data["text/markdown"]
                    text = "".join(text) if isinstance(text, list) else text
                    data["text/markdown"] = convert_markdown(text, here)
        jupyter = {}
        if "remove-cell" in tags:
            source = drop_asserts(cell.source) if student else cell.source
            if student and source.strip() in ("", "pass") and cell.source.strip():
                continue  # only asserts: nothing for the student to run
            cell.source = f"{HIDDEN_NOTE}\n{source}"
            jupyter = {"source_hidden": True, "outputs_hidden": True}
        elif "remove-input" in tags or "hide-input" in tags:
            cell.source = f"{OUTPUT_NOTE}\n{cell.source}"
            jupyter = {"source_hidden": True}
        if "remove-output" in tags:
            jupyter["outputs_hidden"] = True
        if jupyter:
            cell.metadata["jupyter"] = {**cell.metadata.get("jupyter", {}), **jupyter}
        cells.append(cell)
    nb.cells = cells
    nb.metadata["tmath"] = {**nb.metadata.get("tmath", {}),
                            "converted": "student" if student else "full",
                            "source": f"{page}.ipynb"}
    return nb


def convert_md_page(page: str, book: Book, student: bool = False) -> str:
    """A ``.md`` page (the preface, the notation, the bibliography) as plain Markdown."""
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    text = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.S)  # front matter
    return convert_markdown(text, Page(book, page, {}, student)).strip("\n") + "\n"


# --- make lab ------------------------------------------------------------------------------------


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: Files a page reads or shows beside it (a benchmark's saved JSON, its figure): copied as they are.
DATA_SUFFIXES = (".json", ".csv", ".png", ".svg")


def data_files() -> list[Path]:
    """The data files beside the pages under book/ (not the site's own _ext/_static)."""
    return sorted(p for p in BOOK.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES
                  and not any(part.startswith(("_", ".")) for part in p.relative_to(BOOK).parts))


def write_lab(out: Path) -> tuple[list[Path], list[Path]]:
    """The full edition converted into ``out``: (written, kept because the reader changed them)."""
    book = Book.load()
    manifest_path = out / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    written, kept = [], []
    sources = [(page, _page_path(ROOT, page)) for page in book.pages]
    for page, source in [*sources, *((None, f) for f in data_files())]:
        if source is None:
            continue
        rel = str(source.relative_to(BOOK))
        if page is None:
            data = source.read_bytes()
        elif source.suffix == ".ipynb":
            nb = convert(nbformat.read(source, as_version=4), page, book)
            data = (nbformat.writes(nb) + "\n").encode("utf-8")
        else:
            data = convert_md_page(page, book).encode("utf-8")
        target = out / rel
        if target.exists():
            now = _digest(target.read_bytes())
            if manifest.get(rel) not in (None, now) and now != _digest(data):
                kept.append(target)
                continue
            if now == _digest(data):
                manifest[rel] = now
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        manifest[rel] = _digest(data)
        written.append(target)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return written, kept


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "_build" / "lab"
    try:
        written, kept = write_lab(out.resolve())
    except GlueError as exc:
        print(f"转换失败：{exc}", file=sys.stderr)
        return 1
    print(f"JupyterLab 版笔记本：{out}（更新了 {len(written)} 个文件）")
    for path in kept:
        print(f"保留了你改过的 {path.relative_to(out.resolve())}：删除它即可重新生成本书的版本",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

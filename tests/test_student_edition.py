"""The student edition keeps its solutions secret, everywhere under its HTML folder.

The pages lose their solutions in a Sphinx transform; the downloadable sources
(``_sources/``) are rewritten by ``book/_ext/student_edition.py``.  These tests
check the rewriting on small cases and check that every stripped chapter is a
notebook a student can work in (an empty answer cell per exercise, no glue key
or name that only a solution defined).  The scan of every file the built student
edition serves, for any sentence of any solution of the full edition, is in
``test_site.py`` (with every test that needs a built site: they run on one worker).
"""

from __future__ import annotations

import ast
import functools
import html
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from test_site import toc_notebooks

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from student_edition import (  # noqa: E402
    answer_cell_source,
    solution_texts,
    strip_markdown,
    strip_notebook,
    student_setup_source,
)

EXERCISE = "```{{exercise-start}}\n:label: {label}\n```\n{text}\n```{{exercise-end}}\n```\n"
SOLUTION_START = "```{{solution-start}} {label}\n:class: dropdown\n```\n"
SOLUTION_END = "```{solution-end}\n```\n"


def _nb(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c[1:]) if c.startswith("!") else nbformat.v4.new_markdown_cell(c)
                for c in cells]
    return nb


def test_strip_removes_a_solution_that_spans_cells_and_adds_an_answer_cell():
    nb = _nb(
        "## 练习\n\n" + EXERCISE.format(label="ex-a", text="求 x。") + "\n"
        + SOLUTION_START.format(label="ex-a"),
        "!x = 42  # the key",
        "答案是 42。\n" + SOLUTION_END + "\n" + EXERCISE.format(label="ex-b", text="证明 y。")
        + SOLUTION_START.format(label="ex-b"),
        "证明：显然。\n" + SOLUTION_END + "\n结语。",
        "!print('after')",
    )
    out = strip_notebook(nb, answer_source=lambda label: "")
    kinds = [(c.cell_type, c.source) for c in out.cells]
    assert kinds[0][0] == "markdown" and "求 x。" in kinds[0][1] and "solution" not in kinds[0][1]
    assert kinds[1] == ("code", "")
    assert kinds[2][0] == "markdown" and "证明 y。" in kinds[2][1]
    assert kinds[3] == ("code", "")
    assert kinds[4] == ("markdown", "结语。")
    assert kinds[5] == ("code", "print('after')")
    text = json.dumps(out)
    for secret in ("x = 42", "the key", "答案是", "显然", "solution"):
        assert secret not in text
    assert nb.cells[1].source == "x = 42  # the key", "the input notebook is not modified"


def test_strip_keeps_an_exercise_without_solution_and_refuses_an_unclosed_one():
    nb = _nb(EXERCISE.format(label="ex-c", text="想一想。"), "!y = 1")
    out = strip_notebook(nb, answer_source=lambda label: "")
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "code"]
    with pytest.raises(ValueError, match="solution-end"):
        strip_notebook(_nb(SOLUTION_START.format(label="ex-d"), "!z = 2"))


def test_strip_markdown_removes_gated_and_plain_solutions():
    text = ("前言\n" + EXERCISE.format(label="ex-e", text="题") + SOLUTION_START.format(label="ex-e")
            + "秘密一\n" + SOLUTION_END + "```{solution} ex-f\n秘密二\n```\n后记\n")
    out = strip_markdown(text)
    assert "前言" in out and "题" in out and "后记" in out
    assert "秘密" not in out and "solution" not in out


def test_strip_markdown_removes_full_edition_only_blocks():
    # The teacher's worked example (right answers) sits in a full-edition-only block: the student
    # site's downloadable source loses it, the student block stays.
    text = ("甲\n````{only} not student\n答案 32.08\n```python\nx = 1\n```\n````\n"
            "```{only} student\n学生看的\n```\n:::{only} not student\n秘密\n:::\n乙\n")
    out = strip_markdown(text)
    assert "32.08" not in out and "x = 1" not in out and "秘密" not in out
    assert "甲" in out and "学生看的" in out and "乙" in out
    teachers = (ROOT / "book" / "guides" / "teachers.md").read_text(encoding="utf-8")
    assert "32.08" in teachers and "32.08" not in strip_markdown(teachers)


def test_answer_cell_is_prefilled_with_one_line_per_key():
    source = answer_cell_source("ex-tour-1")
    assert "from tmath.exercises import my_answer" in source
    assert 'my_answer("ex-tour-1", None)  # 整数，单位：个参数' in source
    assert 'my_answer("ex-tour-1/share", None)  # 单位：%' in source
    namespace: dict = {}
    exec(source.replace("None", "1"), namespace)  # runs as it stands once None is replaced
    keyless = answer_cell_source("ex-fwd-2")
    assert "my_answer" not in keyless and "老师批阅" in keyless
    nb = _nb(EXERCISE.format(label="ex-tour-2", text="求 d。"), "!y = 1")
    cell = strip_notebook(nb).cells[1]
    assert cell.metadata == {"tags": ["answer"], "tmath": {"exercise": "ex-tour-2", "answers": ["ex-tour-2"]}}


def test_student_setup_cell_points_to_the_course_kit():
    full = (
        "# Setup (hidden on the website): make sure this kernel has what the chapter imports.\n"
        "import importlib.util\n\n"
        'if importlib.util.find_spec("tmath") is None:\n'
        '    %pip install --quiet "tmath @ git+https://github.com/example/book@main#subdirectory=lib"\n'
        'if importlib.util.find_spec("torch") is None:\n'
        "    %pip install --quiet torch==2.13.0\n"
    )
    student = student_setup_source(full)
    assert "git+" not in student and "课程包 README" in student
    assert 'if importlib.util.find_spec("torch") is None:\n    %pip install --quiet torch==2.13.0' in student
    assert student_setup_source("x = 1") == "x = 1"


def test_solution_texts_split_what_the_student_edition_keeps_and_removes():
    nb = _nb(
        "## 练习\n\n" + EXERCISE.format(label="ex-a", text="求 x。") + "\n"
        + SOLUTION_START.format(label="ex-a"),
        "!x = 42  # the key",
        "答案是 42。\n" + SOLUTION_END + "\n结语。",
        "!print('after')",
    )
    kept, removed = solution_texts(nb)
    assert any("求 x。" in t for t in kept) and any("结语" in t for t in kept)
    assert any("x = 42" in t for t in removed) and any("答案是 42" in t for t in removed)
    assert not any("答案是" in t or "x = 42" in t for t in kept)
    assert not any("求 x。" in t for t in removed)


# --- every chapter, stripped, is a notebook a student can work in -----------------------------------

CHAPTERS = [p for p in toc_notebooks() if "{exercise-start}" in p.read_text(encoding="utf-8")]


def keys_of(label):
    from tmath.exercises import keys_of

    return keys_of(label)
GLUE_REF = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)")
GLUE_SET = re.compile(r"""\bglue\(\s*f?(?:"([^"]+)"|'([^']+)')""")
VARIANT_GLUE = re.compile(r"""\bglue_parameters\(\s*["']([^"']+)["']""")


def _names(source: str) -> tuple[set[str], set[str]]:
    """Names a cell binds and names it reads (IPython magics dropped)."""
    code = "\n".join(re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in source.splitlines())
    tree = ast.parse(code)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else read).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_stripped_chapter_is_a_working_exercise_notebook(path):
    nb = nbformat.read(path, as_version=4)
    out = strip_notebook(nb)
    exercises = sum(c.source.count("{exercise-start}") for c in nb.cells if c.cell_type == "markdown")
    answers = [i for i, c in enumerate(out.cells) if "answer" in c.metadata.get("tags", [])]
    assert exercises >= 5 and len(answers) == exercises
    for i in answers:
        cell = out.cells[i]
        assert cell.cell_type == "code", f"answer cell {i} is not a code cell"
        assert "{exercise-end}" in out.cells[i - 1].source, f"answer cell {i} does not follow an exercise"
        label = cell.metadata["tmath"]["exercise"]
        before = "\n".join(c.source for c in out.cells[:i] if c.cell_type == "markdown")
        assert re.findall(r"\{exercise-start\}[^\n]*\n:label: (\S+)", before)[-1] == label
        keys = [k.label for k in keys_of(label)]
        assert cell.metadata["tmath"]["answers"] == keys, label
        assert re.findall(r'^my_answer\("([^"]+)", None\)', cell.source, re.M) == keys, cell.source
        compile(cell.source, "answer", "exec")  # valid Python as it stands
        assert all(len(line) <= 88 for line in cell.source.splitlines()), cell.source
    # every key of the chapter's exercises is asked in an answer cell
    asked = [a for i in answers for a in out.cells[i].metadata["tmath"]["answers"]]
    assert len(asked) == len(set(asked))
    # the setup cell points to the course kit, not to the repository with its solutions
    setup = next(c for c in out.cells if c.cell_type == "code")
    assert "课程包" in setup.source and "make lab" not in setup.source and "git+" not in setup.source
    text = "\n".join(c.source for c in out.cells)
    assert "solution-start" not in text and "solution-end" not in text
    # Every glue key the kept prose shows is still glued by a kept cell.
    code = "\n".join(c.source for c in out.cells if c.cell_type == "code")
    shown = {k for c in out.cells if c.cell_type == "markdown" for k in GLUE_REF.findall(c.source)}
    # A key glued in a loop (f"mh-alpha-{i}") is a pattern.
    keys = map("".join, GLUE_SET.findall(code))
    glued = [re.compile(re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(k)) + "$") for k in keys]
    # variants.glue_parameters("ex-x-1") glues the exercise's parameter texts, var-ex-x-1-<name>.
    glued += [re.compile(f"var-{re.escape(e)}-[a-z0-9_]+$") for e in VARIANT_GLUE.findall(code)]
    unset = {k for k in shown if not any(g.match(k) for g in glued)}
    assert not unset, f"glue keys shown but only glued by a removed solution: {sorted(unset)}"
    # No kept cell reads a name that only a removed (solution) cell binds.
    kept_code = {c.source for c in out.cells if c.cell_type == "code"}
    bound_by_kept: set[str] = set(dir(__builtins__)) | {"display", "get_ipython"}
    removed_bound: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        bound, read = _names(cell.source)
        if cell.source in kept_code:
            dangling = (read & removed_bound) - bound_by_kept - bound
            assert not dangling, f"a kept cell reads {sorted(dangling)}, defined only in a solution"
            bound_by_kept |= bound
        else:
            removed_bound |= bound


# --- nothing the student edition serves holds a solution ---------------------------------------------


class _SolutionText(HTMLParser):
    """Text inside and outside the solution blocks of a page of the full edition."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self._stack: list[bool] = []
        self.inside: list[str] = []
        self.outside: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr"):
            return
        classes = (dict(attrs).get("class") or "").split()
        self._stack.append(bool(self._stack and self._stack[-1]) or "solution" in classes)

    def handle_endtag(self, tag):
        if tag not in ("br", "img", "hr", "meta", "link", "input", "wbr") and self._stack:
            self._stack.pop()

    def handle_data(self, data):
        (self.inside if self._stack and self._stack[-1] else self.outside).append(data)


def _sentences(texts) -> set[str]:
    joined = re.sub(r"\s+", " ", " ".join(texts))
    return {s.strip() for s in re.split(r"[。；！？\n]|(?<=[.!?]) ", joined) if len(s.strip()) >= 12}


@functools.lru_cache(maxsize=4)
def solution_sentences(site: Path) -> frozenset[str]:
    """Sentences of at least 12 characters that the full edition shows only inside solutions
    (read once per site and session: the built site does not change)."""
    inside, outside = set(), set()
    for page in site.rglob("*.html"):
        parser = _SolutionText()
        parser.feed(page.read_text(encoding="utf-8"))
        inside |= _sentences(parser.inside)
        outside |= _sentences(parser.outside)
    return frozenset(s for s in inside if not any(s in o for o in outside))


def served_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""  # images, fonts
    if path.suffix == ".ipynb":
        nb = nbformat.reads(text, as_version=4)
        parts = [c.source for c in nb.cells]
        for c in nb.cells:
            for o in c.get("outputs", []):
                parts.append(o.get("text", ""))
                parts.extend(v for v in o.get("data", {}).values() if isinstance(v, str))
        text = "\n".join(parts)
    if path.suffix in (".html", ".ipynb"):
        parser = _SolutionText()
        parser.feed(text)
        text = " ".join(parser.outside + parser.inside)
    return re.sub(r"\s+", " ", html.unescape(text))


def test_student_edition_shows_no_launch_button_even_with_a_repository():
    """Binder and Colab open the repository's notebooks, solutions included."""
    from types import SimpleNamespace

    from offline_site import _launch_buttons_need_a_repository

    def launch(student: bool) -> dict:
        options = {
            "repository_url": "https://github.com/example-org/transformer-math",
            "launch_buttons": {"binderhub_url": "https://mybinder.org", "colab_url": "https://colab"},
        }
        _launch_buttons_need_a_repository(None, SimpleNamespace(html_theme_options=options,
                                                                student_edition=student))
        return options["launch_buttons"]

    assert set(launch(student=False)) == {"binderhub_url", "colab_url"}
    assert launch(student=True) == {}


# --- the preface speaks to the edition it is in -------------------------------------------------------

_ONLY = re.compile(r"^(?P<fence>`{3,})\{only\} (?P<expr>[^\n]+)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.M | re.S)


def preface_as_built(student: bool) -> str:
    """book/index.md as Sphinx renders it for one edition: ``{only}`` blocks kept or dropped by the
    ``student`` tag (which ``offline_site.setup`` adds under ``BOOK_EDITION=student``)."""
    text = (ROOT / "book" / "index.md").read_text(encoding="utf-8")

    def keep(m: re.Match) -> str:
        expr = m.group("expr").strip()
        assert expr in ("student", "not student"), f"unexpected only-expression {expr!r}"
        return m.group("body") if (expr == "student") == student else ""

    return _ONLY.sub(keep, text)


def test_student_preface_neither_folds_solutions_nor_sends_readers_to_the_repository():
    student, full = preface_as_built(student=True), preface_as_built(student=False)
    for stale in ("可折叠", "折叠框", "make book", "make test", "make lab", "jupyter lab book/",
                  "仓库根目录"):
        assert stale not in student, f"the student edition's preface says {stale!r}"
    assert "学生版" in student and "课程包" in student and "my_answer" in student
    assert "make book" in full and "可折叠的“解答”" in full and "make student-kit" in full


def test_offline_site_tags_the_student_build(monkeypatch):
    from types import SimpleNamespace

    import offline_site

    class App(SimpleNamespace):
        def __getattr__(self, name):  # every other Sphinx registration call is a no-op here
            return lambda *args, **kwargs: None

    for edition, tagged in (("student", True), ("", False)):
        monkeypatch.setenv("BOOK_EDITION", edition)
        app = App(tags=set())
        offline_site.setup(app)
        assert ("student" in app.tags) is tagged


def test_chinese_search_index_keeps_its_words_in_a_set():
    """book/_ext/offline_site.py: Sphinx 7.4 looks every word up in a list of all the English
    words seen so far (a quadratic build); the extension makes it a set, same index."""
    import warnings
    from types import SimpleNamespace

    import offline_site

    with warnings.catch_warnings():  # jieba 0.42's regexes have invalid escapes (its problem)
        warnings.simplefilter("ignore", DeprecationWarning)
        from sphinx.search import zh
    original = zh.SearchChinese.latin_terms
    try:
        zh.SearchChinese.latin_terms = []
        offline_site._index_chinese_in_linear_time(SimpleNamespace(config=SimpleNamespace(
            html_search_language="en")))
        assert isinstance(zh.SearchChinese.latin_terms, list), "only a Chinese index is touched"
        offline_site._index_chinese_in_linear_time(SimpleNamespace(config=SimpleNamespace(
            html_search_language="zh")))
        assert isinstance(zh.SearchChinese.latin_terms, set)
        search = zh.SearchChinese({})
        words = search.split("注意力 uses KV caches and MoE layers")
        assert {"KV", "MoE", "caches"} <= set(words) and "MoE" in search.latin_terms
        assert [search.stem(w) for w in ("caches", "MoE", "layers")] == ["cach", "moe", "layer"]
    finally:
        zh.SearchChinese.latin_terms = original


def test_numref_unpickles_each_doctree_once_per_write_phase(monkeypatch):
    """book/_ext/offline_site.py: Sphinx 7.4 unpickles the target page's whole doctree for
    every {numref}; while one is resolved, the extension hands out each doctree read once."""
    import offline_site
    from sphinx.domains.std import StandardDomain

    def resolve(self, env, target):  # stands for Sphinx's method: two lookups per numref
        return env.get_doctree(target), env.get_doctree(target)

    class Env:
        def __init__(self):
            self.reads = []

        def get_doctree(self, docname):
            self.reads.append(docname)
            return {"doc": docname, "read": len(self.reads)}

    monkeypatch.setattr(StandardDomain, "_resolve_numref_xref", resolve)
    monkeypatch.setattr(offline_site, "_NUMREF_DOCTREES", {})
    offline_site._numref_reads_each_doctree_once(None)
    offline_site._numref_reads_each_doctree_once(None)  # a second app does not wrap it twice
    env = Env()
    domain = object.__new__(StandardDomain)
    first = [StandardDomain._resolve_numref_xref(domain, env, t) for t in ("a", "b", "a", "a")]
    assert env.reads == ["a", "b"] and first[0][0] is first[2][1]
    assert "get_doctree" not in vars(env), "the cached reader must not stay on env (it is pickled)"
    offline_site._forget_numref_doctrees(None, env)  # env-updated: the pages may be read again
    StandardDomain._resolve_numref_xref(domain, env, "a")
    assert env.reads == ["a", "b", "a"]

"""Local Sphinx extension for the book.

1. Keep the site self-contained and its browser console clean. Jupyter Book 1
   always loads sphinx-thebe, even with thebe disabled. sphinx-thebe inlines its
   configuration script (which names a CDN URL) twice per page, so every page logs
   ``Identifier 'THEBE_JS_URL' has already been declared``. The book does not use
   thebe (cells run in Jupyter, not in the browser), so its assets are dropped.

2. MathJax on every page: navigation titles can contain math.

3. sphinx-proof writes a hard-coded "Proof." before each proof: here it says 证明.

4. The student edition. With ``BOOK_EDITION=student`` in the environment (what
   ``make book-student`` sets) every exercise solution is removed from the pages.
   sphinx-exercise's own ``hide_solutions`` drops only the ``solution-start``
   marker of a gated solution and leaves the cells between the markers on the
   page, so the removal happens here, after the gated solutions are merged.
   The downloadable sources in ``_sources/`` lose their solutions too, and each
   exercise gets an empty answer cell (:mod:`student_edition`).

5. Each exercise's title shows its label, ``练习 12 (ex-crossover-3)``: the id a
   student passes to ``tmath.check`` is the one printed on the page, whatever
   number Sphinx gives the exercise.

6. Launch buttons (Binder, Colab) only with a repository. They are built from
   ``repository.url`` in ``_config.yml``. While it is empty the theme would crash
   on every notebook page (sphinx-book-theme unpacks a missing repository), and
   Jupyter Book's default would point them at its own repository, so the launch
   providers are switched off and the build says why (at info level).  The
   student edition never shows them: they open the repository's notebooks,
   solutions included.

7. Chinese search indexing in linear time. Sphinx 7.4's ``SearchChinese`` keeps every
   Latin word it has seen in one list, shared by all pages, and its ``stem`` looks each
   word up in that list: quadratic in the book's English words (``jupyter-book build``
   spent about a third of its time there). The list is only ever used for ``in``, so a
   set with the list's ``extend`` gives the same index (``searchindex.js`` byte for byte)
   in linear time. Sphinx 8 keeps these words in a set itself.

8. Each page's doctree unpickled once for ``{numref}``. Sphinx 7.4's ``StandardDomain``
   resolves every ``{numref}`` by unpickling the whole doctree of the page it points to,
   only to look the target node up: 51 times for the book's 29 pages, an eighth of the
   build. While a numref is resolved, ``env.get_doctree`` here returns the page's doctree
   unpickled once per write phase (the lookup reads it and changes nothing); the HTML is
   the same byte for byte.

9. pybtex's plugins looked up once. sphinxcontrib-bibtex asks pybtex for its style plugins
   at every ``{cite}`` it resolves, and pybtex scans every installed package's entry points
   each time (``importlib.metadata.entry_points``): about a tenth of the build. The plugins
   cannot change while Sphinx runs, so each (group, name) lookup is kept.
"""

from __future__ import annotations

import os

from sphinx.transforms import SphinxTransform


def _is_thebe(asset) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "") or ""
    return "thebe" in str(filename).lower() or "THEBE_JS_URL" in body


class _LatinTerms(set):
    """What ``SearchChinese.latin_terms`` is used for (``extend``, ``in``), as a set."""

    def extend(self, words) -> None:
        self.update(words)


def _index_chinese_in_linear_time(app) -> None:
    if not str(app.config.html_search_language or "").startswith("zh"):
        return
    from sphinx.search import zh  # imports jieba: only in a build that indexes Chinese

    terms = getattr(zh.SearchChinese, "latin_terms", None)
    if isinstance(terms, list):  # Sphinx 7.x; leave a newer Sphinx's own container alone
        zh.SearchChinese.latin_terms = _LatinTerms(terms)


#: Doctrees :func:`_resolve_numref_xref` has read in this write phase, by page name.
_NUMREF_DOCTREES: dict = {}


def _forget_numref_doctrees(app, *args) -> None:
    _NUMREF_DOCTREES.clear()  # the pages may have been read again since


def _pybtex_plugins_looked_up_once(app) -> None:
    import functools

    import pybtex.plugin

    original = pybtex.plugin._load_entry_point
    if getattr(original, "cache_info", None) is None:  # not already wrapped (a second app)
        pybtex.plugin._load_entry_point = functools.cache(original)


def _numref_reads_each_doctree_once(app) -> None:
    from sphinx.domains.std import StandardDomain

    original = StandardDomain._resolve_numref_xref
    if getattr(original, "_reads_each_doctree_once", False):
        return  # a second app in this process (Sphinx's own tests do that)

    def _resolve_numref_xref(self, env, *args, **kwargs):
        read = env.get_doctree

        def get_doctree(docname):
            if docname not in _NUMREF_DOCTREES:
                _NUMREF_DOCTREES[docname] = read(docname)
            return _NUMREF_DOCTREES[docname]

        env.get_doctree = get_doctree  # for this call only: never pickled with env
        try:
            return original(self, env, *args, **kwargs)
        finally:
            del env.get_doctree

    _resolve_numref_xref._reads_each_doctree_once = True
    StandardDomain._resolve_numref_xref = _resolve_numref_xref


def _drop_thebe(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if not _is_thebe(a)]


class RemoveSolutions(SphinxTransform):
    """Student edition: remove every solution (plain or gated) from the doctree."""

    default_priority = 50  # after sphinx-exercise merges gated solutions (priority 10)

    def apply(self) -> None:
        if not self.config.student_edition:
            return
        from sphinx_exercise.nodes import solution_end_node, solution_node, solution_start_node

        kinds = (solution_node, solution_start_node, solution_end_node)
        for node in list(self.document.findall(lambda n: isinstance(n, kinds))):
            node.parent.remove(node)


class ExerciseLabelInTitle(SphinxTransform):
    """Show each numbered exercise's label after its number: the id ``tmath.check`` takes."""

    default_priority = 15

    def apply(self) -> None:
        from docutils import nodes
        from sphinx_exercise.nodes import exercise_enumerable_node, exercise_subtitle, exercise_title

        for node in self.document.findall(exercise_enumerable_node):
            label = node.get("label", "")
            title = node.children[0] if node.children else None
            if not label or not isinstance(title, exercise_title) or len(title.children) > 1:
                continue
            subtitle = exercise_subtitle()
            subtitle += nodes.literal(label, label)
            title += subtitle


class ChineseProofLabel(SphinxTransform):
    """sphinx-proof prefixes every proof with the hard-coded English "Proof. "; say 证明 instead."""

    default_priority = 500

    def apply(self) -> None:
        from docutils import nodes

        for adm in self.document.findall(nodes.admonition):
            if "proof" not in adm["classes"] or not adm.children:
                continue
            para = adm.children[0]
            if isinstance(para, nodes.paragraph) and para.children and isinstance(para[0], nodes.Text):
                text = str(para[0])
                if text.startswith("Proof. "):
                    para.replace(para[0], nodes.Text("证明　" + text[len("Proof. "):]))


# What Jupyter Book fills in when `_config.yml` names no repository.
JUPYTER_BOOK_DEFAULT_REPOSITORY = "https://github.com/executablebooks/jupyter-book"
LAUNCH_PROVIDERS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url", "jupyterlite_url")


def _launch_buttons_need_a_repository(app, config):
    options = config.html_theme_options
    launch = options.get("launch_buttons") or {}
    url = (options.get("repository_url") or "").strip().rstrip("/")
    student = bool(getattr(config, "student_edition", False))
    if url and url != JUPYTER_BOOK_DEFAULT_REPOSITORY and not student:
        return
    on = [key for key in LAUNCH_PROVIDERS if launch.get(key)]
    if on:
        from sphinx.util import logging

        why = (
            "the student edition links to no notebook with its solutions (Binder and Colab open "
            "the repository's notebooks)"
            if student
            else "set repository.url in _config.yml to the book's public repository to show them"
        )
        logging.getLogger(__name__).info("launch buttons (%s) are off: %s", ", ".join(on), why)
        options["launch_buttons"] = {k: v for k, v in launch.items() if k not in LAUNCH_PROVIDERS}


def _strip_student_sources(app, exception):
    if exception is not None or not app.config.student_edition or app.builder.format != "html":
        return
    from pathlib import Path

    from student_edition import strip_sources

    sources = Path(app.outdir) / "_sources"
    if sources.is_dir():
        strip_sources(sources)


def setup(app):
    # Chapter titles with math appear in the navigation of every page, so every page
    # needs MathJax (Sphinx otherwise loads it only on pages whose body has math).
    app.set_html_assets_policy("always")
    app.connect("builder-inited", _index_chinese_in_linear_time)
    app.connect("builder-inited", _numref_reads_each_doctree_once)
    app.connect("builder-inited", _pybtex_plugins_looked_up_once)
    app.connect("env-updated", _forget_numref_doctrees)
    app.connect("build-finished", _forget_numref_doctrees)
    # Run after the theme and the extensions have added their assets.
    app.connect("html-page-context", _drop_thebe, priority=900)
    app.add_config_value("student_edition", os.environ.get("BOOK_EDITION") == "student", "env")
    if os.environ.get("BOOK_EDITION") == "student":
        app.tags.add("student")  # ```{only} student``` blocks (the preface, book/index.md)
    app.add_transform(RemoveSolutions)
    app.connect("build-finished", _strip_student_sources)
    app.add_transform(ChineseProofLabel)
    app.add_transform(ExerciseLabelInTitle)
    app.connect("config-inited", _launch_buttons_need_a_repository)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

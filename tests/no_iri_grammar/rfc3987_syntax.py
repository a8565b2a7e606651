"""Stands in for the ``rfc3987_syntax`` package in the processes the test suite starts.

jsonschema imports ``rfc3987_syntax`` if it can (``jsonschema._format``), for the ``iri`` and
``iri-reference`` formats, and that import builds Lark grammars: 1.1 s of CPU on a quiet
machine (5-6 s on a loaded one) in every process that imports jsonschema, which nbformat,
Jupyter Book, nbconvert and JupyterLab do, a few dozen processes a run. No schema the book,
its builds or its notebooks use has those formats (JupyterLab's dependency jupyter-events
brings the package in: requirements-lab.txt). The root ``conftest.py`` puts this folder first
on ``PYTHONPATH``; jsonschema meets this ``ImportError`` and goes without the two formats, as
``tests/warm_runner.py`` and ``tmath._grade_worker`` already do in their processes.
"""

raise ImportError("rfc3987_syntax is left out of the test suite's processes (tests/no_iri_grammar)")

"""``display``, ``Math``, ``Latex`` and ``Markdown`` as IPython defines what they show
(``IPython.core.display``): the same text, LaTeX and Markdown, so the page's outputs can be
compared with the notebook's saved ones."""

from tmath.web import display

__all__ = ["display", "Math", "Latex", "Markdown"]


class _Data:
    def __init__(self, data=None):
        self.data = data

    def __repr__(self):
        return f"<IPython.core.display.{type(self).__name__} object>"


class Math(_Data):
    def _repr_latex_(self):
        return "$\\displaystyle " + self.data.strip("$") + "$"


class Latex(_Data):
    def _repr_latex_(self):
        return self.data


class Markdown(_Data):
    def _repr_markdown_(self):
        return self.data

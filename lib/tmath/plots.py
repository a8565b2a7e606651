"""The book's figure settings: a CJK font for Chinese figure text, and sharp figures.

Importing this module calls :func:`setup` (it is idempotent, so calling it again
is harmless).  :func:`setup`

- registers Noto Sans CJK SC, shipped by the pinned PyPI package ``mplfonts``
  (``mplfonts/fonts/NotoSansCJKsc-Regular.otf``), with matplotlib's font
  manager, so a fresh machine needs no system font;
- pins both families of the fallback list **by file**: every other font that declares
  the same family name is dropped from the font manager.  Debian's ``fonts-noto-cjk``
  (which Chromium's install brings in) also declares "Noto Sans CJK SC", in
  ``NotoSansCJK-Regular.ttc``, and would otherwise win the lookup; a system copy of
  DejaVu Sans would likewise replace matplotlib's own.  So figures are drawn with the
  same files on every machine, whatever fonts it has;
- sets ``font.family`` to ``["DejaVu Sans", "Noto Sans CJK SC"]``: matplotlib
  (>= 3.6) falls back glyph by glyph, so Latin, digits, Greek, sub- and
  superscripts and symbols such as × ≈ ≤ → − come from DejaVu Sans and Chinese
  from Noto Sans CJK SC, with no missing-glyph warning;
- sets ``figure.dpi`` and ``savefig.dpi`` to :data:`DPI` (150).  The notebook's
  inline backend renders a PNG at ``fig.dpi`` (IPython's ``print_figure``), and
  its ``InlineBackend.rc`` is empty, so figures in the saved notebooks and on the
  site come out at 150 dpi: sharp on a HiDPI screen.

``axes.unicode_minus`` stays ``True`` (matplotlib's default): DejaVu Sans has
U+2212 MINUS SIGN, so tick labels get a proper minus, the same sign that
:mod:`tmath.fmt` writes in the prose.

Usage in a chapter::

    import matplotlib.pyplot as plt
    import tmath.plots  # noqa: F401  (Chinese font, 150 dpi)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib
from matplotlib import font_manager

__all__ = ["CJK_FONT", "DPI", "FONT_FAMILY", "cjk_font_path", "dejavu_font_path", "setup"]

#: The family name of the CJK font, as its file declares it.
CJK_FONT = "Noto Sans CJK SC"
#: Font fallback list: Latin, Greek and symbols first, then Chinese.
FONT_FAMILY: list[str] = ["DejaVu Sans", CJK_FONT]
#: Resolution of figures shown in notebooks and saved to files.
DPI = 150
_FONT_FILE = "NotoSansCJKsc-Regular.otf"
_registered: Path | None = None


def dejavu_font_path() -> Path:
    """Path of DejaVu Sans (regular) as shipped inside matplotlib (``mpl-data/fonts/ttf``)."""
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"


def _pin_family(family: str, folder: Path, *, only: Path | None = None) -> None:
    """Keep, of every font that declares ``family``, only the files in ``folder``
    (or only the file ``only``): DejaVu Sans keeps matplotlib's regular, bold and
    oblique faces, Noto Sans CJK SC the one mplfonts file."""
    fm = font_manager.fontManager

    def keep(f: font_manager.FontEntry) -> bool:
        path = Path(f.fname)
        return f.name != family or (path == only if only else path.parent == folder)

    fm.ttflist = [f for f in fm.ttflist if keep(f)]
    fm._findfont_cached.cache_clear()  # lookups made before the pin are stale


def cjk_font_path() -> Path:
    """Path of Noto Sans CJK SC inside the installed ``mplfonts`` package.

    Found without importing ``mplfonts`` (its ``__init__`` pulls in a CLI).
    Raises :class:`RuntimeError` naming the fix when the package is missing.
    """
    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the CJK font package is missing: install the pinned requirements "
            "(pip install -r requirements.txt, which pins mplfonts==0.0.11)"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "fonts" / _FONT_FILE
        if path.is_file():
            return path
    raise RuntimeError(f"mplfonts is installed but has no fonts/{_FONT_FILE}; reinstall it")


def setup() -> Path:
    """Register the CJK font and set the book's rcParams; returns the font file's path.

    Idempotent: the font is added to the font manager once; the rcParams are
    (re)set on every call, so calling it after ``plt.rcdefaults()`` restores them.
    """
    global _registered
    if _registered is None:
        path = cjk_font_path()
        font_manager.fontManager.addfont(str(path))
        _pin_family(CJK_FONT, path.parent, only=path)
        _pin_family("DejaVu Sans", dejavu_font_path().parent)
        _registered = path
    matplotlib.rcParams["font.family"] = list(FONT_FAMILY)
    matplotlib.rcParams["axes.unicode_minus"] = True
    matplotlib.rcParams["figure.dpi"] = DPI
    matplotlib.rcParams["savefig.dpi"] = DPI
    return _registered


setup()

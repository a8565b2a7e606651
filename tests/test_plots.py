"""tmath.plots: Chinese figure text in Noto Sans CJK SC, no missing glyphs, 150 dpi."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from PIL import Image  # noqa: E402

import tmath.plots  # noqa: E402

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"
# Everything a figure of the book writes: Chinese, Latin, Greek, sub/superscripts, symbols.
SAMPLE = "每 token 的训练 FLOPs：6PT ≈ 3.14 × 10²³，T ≤ 8D → αβγ Δσ x₁ h² −1 μs（秒）"


def png_dpi(data: bytes) -> float:
    """The resolution a PNG declares (its pHYs chunk), as the smaller of x and y; 0 if none."""
    dpi = Image.open(io.BytesIO(data)).info.get("dpi")
    return float(min(dpi)) if dpi else 0.0


def render_png(text: str, family: list[str] | None = None) -> bytes:
    """A small figure with ``text`` in title, axis label, legend and annotation, as PNG."""
    with matplotlib.rc_context({"font.family": family} if family else {}):
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([-1, 0, 1], [1, -1, 2], label=text)
        ax.set_title(text)
        ax.set_xlabel(text)
        ax.annotate(text, (0, 0))
        ax.legend()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
    return buf.getvalue()


def test_import_sets_the_book_rcparams():
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", "Noto Sans CJK SC"]
    assert matplotlib.rcParams["figure.dpi"] == 150
    assert matplotlib.rcParams["savefig.dpi"] == 150


def test_setup_is_idempotent_and_restores_after_rcdefaults():
    n_fonts = len(font_manager.fontManager.ttflist)
    first = tmath.plots.setup()
    plt.rcdefaults()
    assert tmath.plots.setup() == first
    assert len(font_manager.fontManager.ttflist) == n_fonts  # registered once
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", "Noto Sans CJK SC"]
    assert matplotlib.rcParams["figure.dpi"] == 150


def test_chinese_resolves_to_the_noto_cjk_file_from_mplfonts():
    path = font_manager.findfont(
        font_manager.FontProperties(family="Noto Sans CJK SC"), fallback_to_default=False
    )
    assert Path(path).name == "NotoSansCJKsc-Regular.otf"
    assert "mplfonts" in Path(path).parts
    assert Path(path) == tmath.plots.cjk_font_path()
    # the font really has the Chinese glyphs of the book
    font = matplotlib.ft2font.FT2Font(path)
    assert all(font.get_char_index(ord(c)) for c in "训练参数量注意力序列长度")


def test_the_font_list_falls_back_to_noto_for_chinese():
    """The fonts matplotlib uses for a text, in order: DejaVu Sans first, Noto Sans CJK SC after."""
    props = font_manager.FontProperties(family=matplotlib.rcParams["font.family"])
    paths = [Path(p).name for p in font_manager.fontManager._find_fonts_by_props(props)]
    assert paths[:2] == ["DejaVuSans.ttf", "NotoSansCJKsc-Regular.otf"]


def test_figure_text_renders_with_no_missing_glyph_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = render_png(SAMPLE)
    assert png.startswith(b"\x89PNG")


def test_without_the_cjk_font_the_same_text_warns():
    """The check above can fail: DejaVu Sans alone has no Chinese glyphs."""
    with pytest.warns(UserWarning, match="missing from font"):
        render_png(SAMPLE, family=["DejaVu Sans"])


def test_saved_png_is_150_dpi():
    png = render_png("分辨率")
    assert round(png_dpi(png)) == 150
    image = Image.open(io.BytesIO(png))
    # a 4 x 3 inch figure at 150 dpi is 600 x 450 pixels
    assert image.size == (600, 450)


def test_inline_backend_renders_at_figure_dpi():
    """Notebook figures: IPython's print_figure uses ``fig.dpi``, which setup() makes 150."""
    from IPython.core.pylabtools import print_figure
    from matplotlib_inline.config import InlineBackend

    assert "figure.dpi" not in InlineBackend().rc  # the inline backend keeps our dpi
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    png = print_figure(fig, "png", bbox_inches=None)
    plt.close(fig)
    assert Image.open(io.BytesIO(png)).size == (300, 300)
    assert round(png_dpi(png)) == 150


def test_png_dpi_reads_a_low_resolution_png():
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG", dpi=(72, 72))
    assert round(png_dpi(buf.getvalue())) == 72
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG")
    assert png_dpi(buf.getvalue()) == 0.0


def test_mplfonts_is_pinned():
    lines = REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    assert "mplfonts==0.0.11" in lines


# A machine may have fonts that declare the same family names as the pinned files: Debian's
# fonts-noto-cjk ("Noto Sans CJK SC" in NotoSansCJK-Regular.ttc), which `make test` installs
# with Chromium, and fonts-dejavu-core. Registered before tmath.plots runs, such a font wins
# matplotlib's lookup unless the pin drops it. The child process below stands in for that
# machine by registering copies of both files under other names first.
PIN_PROBE = r"""
import shutil, sys
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
from matplotlib import font_manager
import mplfonts, os
tmp = Path(sys.argv[1])
cjk = Path(os.path.dirname(mplfonts.__file__)) / "fonts" / "NotoSansCJKsc-Regular.otf"
dejavu = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
for src, name in ((cjk, "NotoSansCJK-Regular.otf"), (dejavu, "DejaVuSans-System.ttf")):
    shutil.copy(src, tmp / name)
    font_manager.fontManager.addfont(str(tmp / name))
    # first in the list, so it wins a tie with matplotlib's own file
    font_manager.fontManager.ttflist.insert(0, font_manager.fontManager.ttflist.pop())
font_manager.fontManager._findfont_cached.cache_clear()
# Before the pin, the system-like copies are what the lookup finds.
before = font_manager.findfont(font_manager.FontProperties(family="Noto Sans CJK SC"))
import tmath.plots
props = font_manager.FontProperties(family=matplotlib.rcParams["font.family"])
found = [p for p in font_manager.fontManager._find_fonts_by_props(props)]
print(Path(before).name)
print(*found[:2], sep="\n")
"""


def test_a_system_font_of_the_same_name_does_not_take_over(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", PIN_PROBE, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    # Before the pin another file held the name (the stand-in, or Debian's .ttc where installed).
    assert out[0] in {"NotoSansCJK-Regular.otf", "NotoSansCJK-Regular.ttc"}
    assert Path(out[1]) == tmath.plots.dejavu_font_path()
    assert Path(out[2]) == tmath.plots.cjk_font_path()


def test_a_real_system_noto_cjk_if_present_is_not_used():
    """Where Debian's fonts-noto-cjk is installed (make test installs it), it is dropped."""
    names = {Path(f.fname).name for f in font_manager.fontManager.ttflist
             if f.name == "Noto Sans CJK SC"}
    assert names == {"NotoSansCJKsc-Regular.otf"}

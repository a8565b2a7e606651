"""Diagrams the book draws itself: boxes and arrows in matplotlib, Chinese labels.

One public function per diagram (it returns the :class:`matplotlib.figure.Figure`);
the box, circle and arrow helpers at the top are shared by all of them, so every
diagram has the same look.  Coordinates are in data units of an axes with the
frame switched off (``ax.set_axis_off()``), x to the right, y upwards.

Diagrams:

- :func:`gpt_block`: the pre-LN GPT block of GPT-2/GPT-3 (the source's own flow
  chart): LN -> Q, K, V -> heads -> concat -> W^O -> (+) -> LN -> W_1 -> GELU ->
  W_2 -> (+), with both residual connections.
- :func:`multihead_attention`: multi-head attention as the engineering form computes
  it: X -> one big X W^Q, X W^K, X W^V -> split into h heads -> attend per head ->
  concat -> W^O.
- :func:`flash_tiling`: the tiling of online softmax and FlashAttention: query
  blocks x key/value blocks, the running max m, sum ℓ and output O per row block.

Usage in a chapter::

    import tmath.plots  # noqa: F401  (Chinese font, 150 dpi)
    from tmath import diagrams

    fig = diagrams.gpt_block(tmath.preset("gpt3-175b"))
"""

from __future__ import annotations

import re
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

import tmath.plots  # noqa: F401  (Chinese font, 150 dpi)

__all__ = ["COLORS", "collectives", "flash_tiling", "gpt_block", "multihead_attention"]

#: Fill colours by role, shared by every diagram.
COLORS: dict[str, str] = {
    "io": "#eeeeee",  # inputs and outputs of a block
    "norm": "#fde2c4",  # LayerNorm / RMSNorm
    "matmul": "#cfe2f3",  # a product with a weight matrix
    "attention": "#d9ead3",  # the attention core (scores, softmax, weighted sum)
    "elementwise": "#ead1dc",  # GELU, concat and other shape-only or element-wise steps
    "residual": "#ffffff",
}
_EDGE = "#333333"
_RESIDUAL_LINE = "#c0504d"


# --- shared helpers ------------------------------------------------------------------


def _box(
    ax: Any,
    x: float,
    y: float,
    w: float,
    h: float,
    text: str,
    role: str = "matmul",
    fontsize: float = 9,
) -> tuple[float, float, float, float]:
    """A rounded box centred at (x, y) of size w x h with ``text``; returns its bounds."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=COLORS[role],
            edgecolor=_EDGE,
            linewidth=1.0,
        )
    )
    _lines(ax, x, y, text, ha="center", fontsize=fontsize)
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def _lines(
    ax: Any, x: float, y: float, text: str, ha: str = "left", fontsize: float = 8,
    color: str = "black", **kwargs: Any,
) -> None:
    """Multi-line text centred vertically at (x, y), one ``ax.annotate`` per line.

    Each line is set on its own, so a line with mathtext (``$W^O$``) and a line with
    Chinese can share a label: matplotlib parses a whole string as mathtext once it
    holds a ``$``, and mathtext has no fallback to the CJK font.
    """
    lines = text.split("\n")
    step = 1.3 * fontsize  # points between baselines
    for i, line in enumerate(lines):
        if "$" in line and re.search(r"[\u3000-\u9fff\uff00-\uffef]", line):
            raise ValueError(f"a diagram line mixes mathtext and Chinese: {line!r}")
        dy = ((len(lines) - 1) / 2 - i) * step
        ax.annotate(line, (x, y), xytext=(0, dy), textcoords="offset points", ha=ha,
                    va="center", fontsize=fontsize, color=color, **kwargs)


def _plus(ax: Any, x: float, y: float, r: float = 0.17) -> None:
    """The residual addition: a circle with a plus sign, centred at (x, y)."""
    ax.add_patch(Circle((x, y), r, facecolor=COLORS["residual"], edgecolor=_EDGE, lw=1.0))
    ax.plot([x - 0.6 * r, x + 0.6 * r], [y, y], color=_EDGE, lw=1.0)
    ax.plot([x, x], [y - 0.6 * r, y + 0.6 * r], color=_EDGE, lw=1.0)


def _arrow(
    ax: Any,
    start: tuple[float, float],
    end: tuple[float, float],
    color: str = _EDGE,
    lw: float = 1.0,
) -> None:
    """A straight arrow from ``start`` to ``end``."""
    ax.add_patch(
        FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, lw=lw,
                        shrinkA=0, shrinkB=0)
    )


def _polyline_arrow(
    ax: Any, points: list[tuple[float, float]], color: str = _EDGE, lw: float = 1.0
) -> None:
    """Straight segments through ``points``, with an arrow head on the last one."""
    for a, b in zip(points[:-2], points[1:-1], strict=True):
        ax.plot([a[0], b[0]], [a[1], b[1]], color=color, lw=lw, solid_capstyle="butt")
    _arrow(ax, points[-2], points[-1], color=color, lw=lw)


def _note(ax: Any, x: float, y: float, text: str, fontsize: float = 8) -> None:
    """A grey annotation, left-aligned at (x, y) (tensor shapes, parameter counts)."""
    _lines(ax, x, y, text, ha="left", fontsize=fontsize, color="#555555")


def _canvas(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return fig, ax


# --- diagrams --------------------------------------------------------------------------


def _shape(*dims: int | str) -> str:
    """``[1, 12,288]``: a tensor shape as the diagrams print it."""
    return "[" + ", ".join(f"{x:,}" if isinstance(x, int) else x for x in dims) + "]"


def gpt_block(cfg: Any = None, seq: str = "1") -> Any:
    """The pre-LN GPT block (GPT-2/GPT-3), drawn bottom to top, with both residuals.

    ``cfg`` (a :class:`tmath.ModelConfig` of the GPT-2 layout; default: GPT-3 175B)
    sets the shapes written beside each step: ``[seq, d]`` with ``seq`` the number of
    tokens (``"1"`` for one token, as the source traces it).  Returns the figure.
    """
    if cfg is None:
        from tmath import preset

        cfg = preset("gpt3-175b")
    d, h, dh, f = cfg.hidden_size, cfg.num_heads, cfg.head_dim, cfg.intermediate_size
    if h * dh != d:
        raise ValueError(
            f"gpt_block draws the GPT layout with num_heads x head_dim = hidden_size; "
            f"got {h} x {dh} != {d}"
        )

    fig, ax = _canvas(6.6, 9.6, (-1.9, 6.9), (-0.55, 12.8))
    cx, bw, bh = 2.0, 2.6, 0.5  # main column: centre x, box width, box height
    note_x = 4.05  # shapes and parameter counts, right of the column
    res_x = -0.75  # residual path, left of the column

    # bottom to top
    y_in, y_ln1, y_qkv, y_att, y_cat, y_o, y_add1 = 0.0, 1.15, 2.35, 3.75, 5.05, 6.05, 7.05
    y_ln2, y_w1, y_gelu, y_w2, y_add2, y_out = 7.95, 8.95, 9.85, 10.75, 11.55, 12.1

    _box(ax, cx, y_in, bw, bh, "输入 x（来自上一层）", role="io")
    _note(ax, note_x, y_in, _shape(seq, d))
    _arrow(ax, (cx, y_in + bh / 2), (cx, y_ln1 - bh / 2))

    _box(ax, cx, y_ln1, bw, bh, "LayerNorm", role="norm")
    _note(ax, note_x, y_ln1, _shape(seq, d) + "，参数 γ, β")

    # Q, K, V: three boxes side by side
    qkv_w = 0.95
    for dx, name in ((-1.0, "Q"), (0.0, "K"), (1.0, "V")):
        _arrow(ax, (cx, y_ln1 + bh / 2), (cx + dx, y_qkv - bh / 2))
        _box(ax, cx + dx, y_qkv, qkv_w, bh, f"× $\\mathbf{{W}}^{name}$", role="matmul")
        _arrow(ax, (cx + dx, y_qkv + bh / 2), (cx + dx, y_att - 0.45))
    _note(ax, note_x, y_qkv, f"各 {_shape(seq, d)}\n拆成 {h} 个头，每头 {_shape(seq, dh)}")

    # the attention core of h heads
    _box(
        ax, cx, y_att, bw + 0.3, 0.9,
        f"{h} 个头并行：\nsoftmax(q·kᵀ / √{dh}) · v", role="attention",
    )
    _note(ax, note_x, y_att, f"每头 {_shape(seq, dh)}\n（因果：只看已有的 token）")
    _arrow(ax, (cx, y_att + 0.45), (cx, y_cat - bh / 2))

    _box(ax, cx, y_cat, bw, bh, "拼接（concat）", role="elementwise")
    _note(ax, note_x, y_cat, f"{h} × {dh} = {d:,}\n→ {_shape(seq, d)}")
    _arrow(ax, (cx, y_cat + bh / 2), (cx, y_o - bh / 2))

    _box(ax, cx, y_o, bw, bh, "× $\\mathbf{W}^O$", role="matmul")
    _note(ax, note_x, y_o, f"$\\mathbf{{W}}^O$: {_shape(d, d)}")
    _arrow(ax, (cx, y_o + bh / 2), (cx, y_add1 - 0.17))
    _plus(ax, cx, y_add1)
    _note(ax, note_x, y_add1, "残差连接：x + 注意力输出")

    _arrow(ax, (cx, y_add1 + 0.17), (cx, y_ln2 - bh / 2))
    _box(ax, cx, y_ln2, bw, bh, "LayerNorm", role="norm")
    _note(ax, note_x, y_ln2, _shape(seq, d) + "，参数 γ, β")
    _arrow(ax, (cx, y_ln2 + bh / 2), (cx, y_w1 - bh / 2))

    _box(ax, cx, y_w1, bw, bh, "× $\\mathbf{W}_1$", role="matmul")
    _note(ax, note_x, y_w1, f"$\\mathbf{{W}}_1$: {_shape(d, f)}\n升维 → {_shape(seq, f)}")
    _arrow(ax, (cx, y_w1 + bh / 2), (cx, y_gelu - bh / 2))

    _box(ax, cx, y_gelu, bw, bh, "GELU（逐元素）", role="elementwise")
    _note(ax, note_x, y_gelu, f"形状不变 {_shape(seq, f)}")
    _arrow(ax, (cx, y_gelu + bh / 2), (cx, y_w2 - bh / 2))

    _box(ax, cx, y_w2, bw, bh, "× $\\mathbf{W}_2$", role="matmul")
    _note(ax, note_x, y_w2, f"$\\mathbf{{W}}_2$: {_shape(f, d)}\n降维 → {_shape(seq, d)}")
    _arrow(ax, (cx, y_w2 + bh / 2), (cx, y_add2 - 0.17))
    _plus(ax, cx, y_add2)
    _note(ax, note_x, y_add2, "残差连接：+ 前馈网络输出")
    _arrow(ax, (cx, y_add2 + 0.17), (cx, y_out + 0.2))
    ax.text(cx, y_out + 0.25, "输出（送往下一层）", ha="center", va="bottom", fontsize=9)

    # residual paths: branch off below each LayerNorm, rejoin at the (+)
    y_branch1 = (y_in + y_ln1) / 2 - 0.05
    ax.plot([cx], [y_branch1], "o", color=_RESIDUAL_LINE, ms=3)
    _polyline_arrow(
        ax, [(cx, y_branch1), (res_x, y_branch1), (res_x, y_add1), (cx - 0.17, y_add1)],
        color=_RESIDUAL_LINE, lw=1.4,
    )
    y_branch2 = (y_add1 + y_ln2) / 2 - 0.05
    ax.plot([cx], [y_branch2], "o", color=_RESIDUAL_LINE, ms=3)
    _polyline_arrow(
        ax, [(cx, y_branch2), (res_x, y_branch2), (res_x, y_add2), (cx - 0.17, y_add2)],
        color=_RESIDUAL_LINE, lw=1.4,
    )
    ax.text(res_x - 0.1, (y_branch1 + y_add1) / 2, "残差\n（原样\n绕过）", ha="right",
            va="center", fontsize=8, color=_RESIDUAL_LINE)
    ax.text(res_x - 0.1, (y_branch2 + y_add2) / 2, "残差\n（原样\n绕过）", ha="right",
            va="center", fontsize=8, color=_RESIDUAL_LINE)

    # the two sub-layers, bracketed on the far right
    for y0, y1, text in ((y_ln1 - 0.3, y_add1 + 0.2, "注意力子层"),
                         (y_ln2 - 0.3, y_add2 + 0.2, "前馈子层（FFN）")):
        ax.plot([6.55, 6.65, 6.65, 6.55], [y0, y0, y1, y1], color="#888888", lw=1.0)
        ax.text(6.75, (y0 + y1) / 2, text, rotation=90, ha="left", va="center", fontsize=9,
                color="#555555")
    ax.set_title(
        f"GPT 的一层（前置 LayerNorm；{cfg.name} 共 {cfg.num_layers} 层）", fontsize=11
    )
    fig.tight_layout()
    return fig


def multihead_attention(cfg: Any = None, seq: str = "T") -> Any:
    """Multi-head attention as the engineering form computes it, drawn bottom to top.

    One big product each for Q, K, V -> split the columns into ``h`` heads -> each head
    attends on its own ``d_head`` columns -> concat the heads -> ``W^O``.  ``cfg`` (default:
    GPT-3 175B) sets the numbers written beside each step; ``seq`` names the number of
    tokens (``"T"``, or ``"1"`` for one token).  Returns the figure.
    """
    if cfg is None:
        from tmath import preset

        cfg = preset("gpt3-175b")
    d, h, dh = cfg.hidden_size, cfg.num_heads, cfg.head_dim
    if h * dh != d:
        raise ValueError(
            f"multihead_attention draws num_heads x head_dim = hidden_size; "
            f"got {h} x {dh} != {d}"
        )

    fig, ax = _canvas(6.8, 7.6, (-0.2, 9.4), (-0.5, 9.6))
    cx, bh = 3.0, 0.5
    note_x = 6.2
    y_in, y_proj, y_split, y_head, y_cat, y_o, y_out = 0.0, 1.4, 2.8, 4.6, 6.4, 7.6, 8.75

    _box(ax, cx, y_in, 3.0, bh, "输入 X（LayerNorm 之后）", role="io")
    _note(ax, note_x, y_in, _shape(seq, d))

    proj_x = (1.3, 3.0, 4.7)
    for x, name in zip(proj_x, ("Q", "K", "V"), strict=True):
        _arrow(ax, (cx, y_in + bh / 2), (x, y_proj - bh / 2))
        _box(ax, x, y_proj, 1.25, bh, f"× $\\mathbf{{W}}^{name}$", role="matmul")
        _arrow(ax, (x, y_proj + bh / 2), (x, y_split - bh / 2))
    weights = r"$\mathbf{W}^Q, \mathbf{W}^K, \mathbf{W}^V$"
    _note(ax, note_x, y_proj, f"一次大乘法：\n{weights}: {_shape(d, d)}\n结果各 {_shape(seq, d)}")

    _box(ax, cx, y_split, 4.6, bh, "按列切成 h 段（拆分头）", role="elementwise")
    _note(ax, note_x, y_split, f"{_shape(seq, d)} → {_shape(h, seq, dh)}\n第 c 段就是第 c 个头")

    head_x = (0.75, 2.15, 3.85, 5.25)
    labels = ("头 1", "头 2", "…", f"头 {h}")
    maths = (r"$\mathbf{P}^{(1)}\mathbf{V}^{(1)}$", r"$\mathbf{P}^{(2)}\mathbf{V}^{(2)}$", "",
             f"$\\mathbf{{P}}^{{({h})}}\\mathbf{{V}}^{{({h})}}$")
    for x, lab, m in zip(head_x, labels, maths, strict=True):
        if lab == "…":
            ax.text(x, y_head, "…", ha="center", va="center", fontsize=14)
            continue
        _arrow(ax, (cx, y_split + bh / 2), (x, y_head - 0.45))
        _box(ax, x, y_head, 1.25, 0.9, f"{lab}\n{m}", role="attention")
        _arrow(ax, (x, y_head + 0.45), (cx, y_cat - bh / 2))
    _note(
        ax, note_x, y_head,
        "每个头各算一次：\n"
        r"$\mathbf{P} = \mathrm{softmax}(\mathbf{Q}\mathbf{K}^\top/\sqrt{"
        f"{dh}" r"} + \mathbf{M})$" "\n"
        f"输出各 {_shape(seq, dh)}\n{h} 个头互不相干",
    )

    _box(ax, cx, y_cat, 3.0, bh, "拼接（Concat）", role="elementwise")
    _note(ax, note_x, y_cat, f"{h} × {dh} = {d:,}\n→ {_shape(seq, d)}")
    _arrow(ax, (cx, y_cat + bh / 2), (cx, y_o - bh / 2))

    _box(ax, cx, y_o, 3.0, bh, r"× $\mathbf{W}^O$", role="matmul")
    _note(ax, note_x, y_o, r"$\mathbf{W}^O$: " + f"{_shape(d, d)}\n把各头的结果混合起来")
    _arrow(ax, (cx, y_o + bh / 2), (cx, y_out - bh / 2))
    _box(ax, cx, y_out, 3.0, bh, "多头注意力的输出", role="io")
    _note(ax, note_x, y_out, _shape(seq, d))

    ax.set_title(f"多头注意力：拆分 → 各头注意力 → 拼接 → 输出投影（{cfg.name}）", fontsize=11)
    fig.tight_layout()
    return fig


def flash_tiling(
    n_q: int = 4, n_k: int = 4, causal: bool = False, row: int = 2, step: int | None = None
) -> Any:
    """The tiling of online softmax / FlashAttention: query blocks x key/value blocks.

    The score matrix ``S = QKᵀ`` is drawn as an ``n_q x n_k`` grid of ``B_q x B_k``
    tiles, never held whole: the query blocks ``Q_i`` run down the left (the outer
    loop, FlashAttention-2 order), the key/value blocks ``K_j, V_j`` across the top
    (the inner loop).  Each query block keeps three running states per row, ``m``
    (running max), ``ℓ`` (running sum of exponentials) and ``O`` (the unnormalised
    output), drawn to the right of its row.  Query block ``row`` (1-based) is shown
    mid-sweep: the tiles it has merged are numbered in the order they are read,
    ``step`` (default: all of them) being the one in SRAM now.  ``causal=True`` greys
    out the tiles above the diagonal, which a causal kernel skips whole.  Returns the
    figure.
    """
    for name, v in (("n_q", n_q), ("n_k", n_k), ("row", row)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"flash_tiling: {name} must be a positive integer, got {v!r}")
    if row > n_q:
        raise ValueError(f"flash_tiling: row={row} is beyond the {n_q} query blocks")
    def skipped(i: int, j: int) -> bool:
        # a whole tile lies in the future when its first key is after the last query
        return causal and (j - 1) * n_q >= i * n_k

    visible = [j for j in range(1, n_k + 1) if not skipped(row, j)]
    if step is None:
        step = len(visible)
    if not 1 <= step <= len(visible):
        raise ValueError(f"flash_tiling: step must be in 1..{len(visible)}, got {step!r}")

    fig, ax = _canvas(8.6, 5.6, (-2.3, n_k + 5.6), (-2.1, n_q + 2.0))
    top = n_q  # grid rows go downwards from y = n_q
    # key/value blocks across the top
    for j in range(1, n_k + 1):
        _box(ax, j - 0.5, top + 0.75, 0.86, 0.62, f"K{_sub(j)}, V{_sub(j)}", role="io",
             fontsize=8)
    _lines(ax, n_k / 2, top + 1.45, "键/值块（内层循环）", ha="center", fontsize=9)
    ax.annotate("$B_k$", (0.5, top + 0.22), ha="center", va="center", fontsize=8)
    # query blocks down the left
    for i in range(1, n_q + 1):
        _box(ax, -0.85, top - i + 0.5, 0.8, 0.8, f"Q{_sub(i)}", role="io", fontsize=9)
    _lines(ax, -1.75, top / 2, "查询块\n（外层\n循环）", ha="center", fontsize=8)
    ax.annotate("$B_q$", (-0.22, top - 0.5), ha="center", va="center", fontsize=8)
    # the tiles
    for i in range(1, n_q + 1):
        for j in range(1, n_k + 1):
            x0, y0 = j - 1, top - i
            if skipped(i, j):
                face, hatch = "#f2f2f2", "///"
            elif i == row and visible.index(j) < step:
                face, hatch = COLORS["attention"], None
            else:
                face, hatch = "#ffffff", None
            ax.add_patch(FancyBboxPatch((x0 + 0.04, y0 + 0.04), 0.92, 0.92,
                                        boxstyle="square,pad=0", facecolor=face,
                                        edgecolor="#999999" if hatch else _EDGE,
                                        hatch=hatch, linewidth=0.8))
            if i == row and j in visible and visible.index(j) < step:
                k = visible.index(j) + 1
                label = f"第 {k} 块\nSRAM 中" if k == step else f"第 {k} 块\n已合并"
                _lines(ax, x0 + 0.5, y0 + 0.5, label, ha="center", fontsize=7)
    # the tile in SRAM: a thick frame, and the sweep arrow along the row
    j_now = visible[step - 1]
    ax.add_patch(FancyBboxPatch((j_now - 1 + 0.02, top - row + 0.02), 0.96, 0.96,
                                boxstyle="square,pad=0", facecolor="none",
                                edgecolor=COLORS_EDGE_HIGHLIGHT, linewidth=2.2))
    if len(visible) > 1:
        _arrow(ax, (0.15, top - row + 0.1), (visible[-1] - 0.15, top - row + 0.1),
               color=COLORS_EDGE_HIGHLIGHT, lw=1.4)
    # running states to the right of every row
    xs = n_k + 0.55
    for i in range(1, n_q + 1):
        y = top - i + 0.5
        for k, name in enumerate(("m", "ℓ", "O")):
            _box(ax, xs + 0.45 + 0.95 * k, y, 0.8 if name != "O" else 0.9, 0.62,
                 f"{name}{_sub(i)}", role="norm" if name != "O" else "matmul", fontsize=8)
    _lines(ax, xs + 1.4, top + 0.75, "每行的运行状态\n（片上，随块更新）", ha="center", fontsize=8)
    _lines(ax, xs + 3.05, top - row + 0.5, "← 本图\n正在处理", ha="left", fontsize=7,
           color=COLORS_EDGE_HIGHLIGHT)
    # the update rule and the legend, below the grid
    rule = (
        "读入一块分数 s 和值块 V 时：m新 = max(m, max s)，α = exp(m − m新)，\n"
        "ℓ ← α·ℓ + Σ exp(s − m新)，O ← α·O + exp(s − m新)·V；扫完一行：输出 = O / ℓ"
    )
    _lines(ax, -2.2, -0.75, rule, ha="left", fontsize=8)
    legend = "白色：尚未读入；绿色：已并入运行状态；粗框：此刻在 SRAM 中的一块分数（大小见左上）"
    if causal:
        legend += "；\n斜线：因果掩码下完全落在“未来”的块，整块跳过"
    _lines(ax, -2.2, -1.6, legend, ha="left", fontsize=8, color="#555555")
    return fig


COLORS_EDGE_HIGHLIGHT = "#c0504d"
_SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    """``n`` as Unicode subscript digits (no mathtext, so it can sit next to Chinese)."""
    return str(n).translate(_SUBSCRIPT)


#: One colour per GPU (its own data), and the colour of a finished sum.
_GPU_COLORS = ("#cfe2f3", "#fde2c4", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3", "#f4cccc",
               "#d9d2e9")
_SUM_COLOR = "#bdbdbd"
_FRAC = r"$(N_{\mathrm{gpu}}-1)\,M_{\mathrm{arr}}/N_{\mathrm{gpu}}$"
_COLLECTIVE_ROWS = (
    ("all_gather", "all-gather（全收集）", f"每卡发出\n{_FRAC}\n数组取收集后的输出"),
    ("reduce_scatter", "reduce-scatter（归约散发）", f"每卡发出\n{_FRAC}\n数组取每卡的输入"),
    ("all_reduce", "all-reduce（全归约）",
     "每卡发出\n" + _FRAC.replace("$(", "$2(") + "\n= reduce-scatter + all-gather"),
    ("all_to_all", "all-to-all（全交换）", f"每卡发出\n{_FRAC}\n数组取每卡的输入"),
    ("send", "send/recv（点对点）", "每卡发出\n$M_{\\mathrm{arr}}$\n这里沿环发给下一张卡"),
)


def collectives(n: int = 4) -> Any:
    """What each collective does to an array held by ``n`` GPUs (2 to 8), before and after.

    One row per collective: all-gather, reduce-scatter, all-reduce, all-to-all and a ring of
    send/recv.  Each GPU's array is drawn as a column of ``n`` chunks; a chunk's colour is
    the GPU whose data it holds (grey: the finished sum over all GPUs), its text the chunk
    index (``i→j``: the piece GPU i holds for GPU j in an all-to-all; ``Σj``: chunk j summed).
    An empty chunk is a dashed outline.  Returns the figure.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= len(_GPU_COLORS):
        raise ValueError(f"n={n!r}：卡数取 2 到 {len(_GPU_COLORS)} 的整数")
    cw, ch = 0.8, 0.42  # chunk width and height
    gap = 0.2  # between GPU columns
    label_w = 3.7
    panel_w = n * (cw + gap)
    x_before = label_w
    x_after = x_before + panel_w + 1.0
    row_h = n * ch + 0.75
    rows = len(_COLLECTIVE_ROWS)
    width = x_after + panel_w
    height = rows * row_h + 0.5
    fig, ax = _canvas(7.2, 7.2 * height / width, (0, width), (0, height))

    def chunk(x: float, y: float, color: str | None, text: str = "") -> None:
        if color is None:
            ax.add_patch(FancyBboxPatch((x, y), cw, ch, boxstyle="square,pad=0",
                                        facecolor="white", edgecolor="#aaaaaa", lw=0.7, ls="--"))
            return
        ax.add_patch(FancyBboxPatch((x, y), cw, ch, boxstyle="square,pad=0", facecolor=color,
                                    edgecolor=_EDGE, lw=0.7))
        if text:
            ax.annotate(text, (x + cw / 2, y + ch / 2), ha="center", va="center", fontsize=8)

    def panel(x0: float, top: float, cell: Any) -> None:
        """Draw n GPU columns; ``cell(g, c)`` gives (colour or None, text) of chunk c on GPU g."""
        for g in range(n):
            x = x0 + g * (cw + gap)
            for c in range(n):
                color, text = cell(g, c)
                chunk(x, top - (c + 1) * ch, color, text)

    def before_after(kind: str) -> tuple[Any, Any]:
        own = _GPU_COLORS
        if kind == "all_gather":
            return (lambda g, c: (own[g], f"{c}") if c == g else (None, ""),
                    lambda g, c: (own[c], f"{c}"))
        if kind == "reduce_scatter":
            return (lambda g, c: (own[g], f"{c}"),
                    lambda g, c: (_SUM_COLOR, f"Σ{c}") if c == g else (None, ""))
        if kind == "all_reduce":
            return (lambda g, c: (own[g], f"{c}"), lambda g, c: (_SUM_COLOR, f"Σ{c}"))
        if kind == "all_to_all":
            return (lambda g, c: (own[g], f"{g}→{c}"), lambda g, c: (own[c], f"{c}→{g}"))
        return (lambda g, c: (own[g], f"{c}"), lambda g, c: (own[(g - 1) % n], f"{c}"))

    for i, (kind, name, note) in enumerate(_COLLECTIVE_ROWS):
        top = height - 0.5 - i * row_h - 0.15
        _lines(ax, 0.05, top - n * ch / 2 + 0.46, name, fontsize=9.5)
        _note(ax, 0.05, top - n * ch / 2 - 0.36, note, fontsize=8.5)
        before, after = before_after(kind)
        panel(x_before, top, before)
        panel(x_after, top, after)
        mid = top - n * ch / 2
        _arrow(ax, (x_before + panel_w - gap + 0.15, mid), (x_after - 0.15, mid))
        for g in range(n):
            for x0 in (x_before, x_after):
                ax.annotate(f"GPU {g}", (x0 + g * (cw + gap) + cw / 2, top - n * ch - 0.12),
                            ha="center", va="center", fontsize=7, color="#555555")
    for x0, title in ((x_before, "之前"), (x_after, "之后")):
        ax.annotate(title, (x0 + (panel_w - gap) / 2, height - 0.22), ha="center",
                    va="center", fontsize=9)
    fig.tight_layout()
    return fig

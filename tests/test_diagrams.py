"""The book's own diagrams (tmath.diagrams): they draw, in Chinese, from the config."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import tmath  # noqa: E402
from tmath import diagrams  # noqa: E402


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [fig.axes[0].get_title()]


def test_gpt_block_labels_every_step_in_order_with_the_configs_shapes():
    fig = diagrams.gpt_block(tmath.preset("gpt3-175b"))
    texts = _texts(fig)
    plt.close(fig)
    steps = ["LayerNorm", "× $\\mathbf{W}^Q$", "96 个头并行：", "拼接（concat）",
             "× $\\mathbf{W}^O$", "LayerNorm", "× $\\mathbf{W}_1$", "GELU（逐元素）",
             "× $\\mathbf{W}_2$"]
    pos = -1
    for step in steps:  # the source's flow chart, bottom to top
        pos = texts.index(step, pos + 1)
    assert "[1, 12,288]" in texts and "$\\mathbf{W}_1$: [12,288, 49,152]" in texts
    assert sum("残差连接" in t for t in texts) == 2  # both residual additions


def test_gpt_block_follows_the_config():
    fig = diagrams.gpt_block(tmath.preset("gpt3-125m"), seq="T")
    texts = _texts(fig)
    plt.close(fig)
    assert "12 个头并行：" in texts and "[T, 768]" in texts


def test_gpt_block_refuses_a_layout_it_cannot_draw_and_mixed_mathtext():
    from types import SimpleNamespace

    cfg = SimpleNamespace(hidden_size=12288, num_heads=96, head_dim=64,
                          intermediate_size=49152, name="x", num_layers=1)
    with pytest.raises(ValueError, match="96 x 64 != 12288"):
        diagrams.gpt_block(cfg)
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="mixes mathtext and Chinese"):
        diagrams._lines(ax, 0, 0, "$W_1$：升维")
    plt.close(fig)


def test_flash_tiling_draws_the_blocks_the_states_and_the_causal_skips():
    fig = diagrams.flash_tiling(n_q=4, n_k=4, causal=True, row=3)
    texts = _texts(fig)
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    plt.close(fig)
    for label in ("Q₁", "Q₄", "K₁, V₁", "K₄, V₄", "m₃", "ℓ₃", "O₃", "$B_q$", "$B_k$"):
        assert label in texts, label
    assert "第 3 块\nSRAM 中" not in texts  # one annotation per line
    assert "SRAM 中" in texts and texts.count("已合并") == 2  # row 3 reads 3 of 4 tiles
    assert len(hatched) == 6  # the strictly-upper tiles of a 4 x 4 causal grid
    fig = diagrams.flash_tiling(n_q=4, n_k=4)
    assert not [p for p in fig.axes[0].patches if p.get_hatch()]
    plt.close(fig)
    with pytest.raises(ValueError, match="row=5"):
        diagrams.flash_tiling(row=5)


def test_collectives_draws_each_collective_before_and_after():
    n = 4
    fig = diagrams.collectives(n)
    texts = _texts(fig)
    patches = fig.axes[0].patches
    plt.close(fig)
    names = ["all-gather（全收集）", "reduce-scatter（归约散发）", "all-reduce（全归约）",
             "all-to-all（全交换）", "send/recv（点对点）"]
    assert [t for t in texts if t in names] == names  # one row each, in this order
    assert texts.count("之前") == texts.count("之后") == 1
    # reduce-scatter leaves one summed chunk per GPU, all-reduce n: Σj appears n + n·n times
    assert sum(texts.count(f"Σ{j}") for j in range(n)) == n + n * n
    # all-to-all: every piece i→j appears once before (on GPU i) and once after (on GPU j)
    assert all(texts.count(f"{i}→{j}") == 2 for i in range(n) for j in range(n))
    xs = {}
    for t in fig.axes[0].texts:
        if "→" in t.get_text():
            xs.setdefault(t.get_text(), []).append(t.xy[0])
    before = {k: min(v) for k, v in xs.items()}
    after = {k: max(v) for k, v in xs.items()}
    for i in range(n):  # before: GPU i's column holds i→0 ... i→n-1; after: GPU j's holds ·→j
        assert len({before[f"{i}→{j}"] for j in range(n)}) == 1
        assert len({after[f"{j}→{i}"] for j in range(n)}) == 1
        assert len({after[f"{i}→{j}"] for j in range(n)}) == n
    # 5 rows × 2 panels × n GPUs × n chunks, plus the 5 arrows
    assert len(patches) == 5 * 2 * n * n + 5
    with pytest.raises(ValueError, match="卡数"):
        diagrams.collectives(1)

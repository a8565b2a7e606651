"""tmath.diagrams.multihead_attention: split -> attend -> concat -> W^O, from the config."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import tmath  # noqa: E402
from tmath import diagrams  # noqa: E402


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [fig.axes[0].get_title()]


def test_multihead_draws_the_four_stages_in_order_with_the_configs_numbers():
    fig = diagrams.multihead_attention(tmath.preset("gpt3-175b"))
    texts = _texts(fig)
    plt.close(fig)
    pos = -1
    for step in [r"× $\mathbf{W}^Q$", "按列切成 h 段（拆分头）", "头 1", "头 96",
                 "拼接（Concat）", r"× $\mathbf{W}^O$"]:
        pos = texts.index(step, pos + 1)
    assert "[T, 12,288] → [96, T, 128]" in texts and "96 × 128 = 12,288" in texts


def test_multihead_follows_the_config_and_refuses_other_layouts():
    fig = diagrams.multihead_attention(tmath.preset("gpt3-125m"), seq="1")
    texts = _texts(fig)
    plt.close(fig)
    assert "头 12" in texts and "[1, 768]" in texts
    with pytest.raises(ValueError, match="num_heads x head_dim"):
        diagrams.multihead_attention(
            SimpleNamespace(hidden_size=2048, num_heads=24, head_dim=128, name="x")
        )

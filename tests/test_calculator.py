"""The calculator: static tables and figures, and the Jupyter widget built outside a kernel."""

from __future__ import annotations

import re

import matplotlib
import pytest

from tmath import calculator

matplotlib.use("Agg")


def test_summary_row_of_llama3_70b_by_hand():
    (row,) = calculator.summary_rows(["llama3-70b"], seq_len=4096, tp=8)
    name, t, params_b, active_b, _, _, kv_kib, kv_seq_gb, decode_ms, verdict = row
    assert (name, t) == ("llama3-70b", 4096)
    assert params_b == pytest.approx(70.553706496)  # the checkpoint's parameter count
    assert active_b == params_b
    assert kv_kib == 2 * 80 * 8 * 128 * 2 / 1024  # 2 (K, V) x L x K x H x bf16 bytes
    assert kv_seq_gb == pytest.approx(327_680 * 4096 / 1e9)
    # bf16 weights (less the 128,256 x 8192 input embedding, only looked up) split over 8 GPUs,
    # plus the sequence's KV cache, over 3.35 TB/s of HBM.
    hand = ((70_553_706_496 - 128_256 * 8192) * 2 / 8 + 327_680 * 4096 / 8) / 3.35e12 * 1e3
    assert decode_ms == pytest.approx(hand, rel=1e-3)
    # 70,553,706,496 x 2 / 8 bytes of weights + the sequence's KV / 8 + 5 GB of workspace
    need = (70_553_706_496 * 2 / 8 + 327_680 * 4096 / 8 + 5e9) / 1e9
    assert verdict == f"可行（{need:,.1f} GB）"


def test_infeasible_rows_and_bad_tp_are_flagged():
    rows = {r[0]: r for r in calculator.summary_rows(["deepseek-v3", "gpt2"], seq_len=4096, tp=8)}
    assert rows["deepseek-v3"][-1].startswith("不可行")  # 167.8 GB of weights per GPU
    assert rows["gpt2"][-1] == "TP=8 不能整除 12 个查询头" and rows["gpt2"][8] is None
    # the model's own figures stay: GPT-2's training FLOPs per token do not depend on TP
    (gpt2_tp1,) = calculator.summary_rows(["gpt2"], tp=1)
    assert rows["gpt2"][4] == gpt2_tp1[4] and rows["gpt2"][5] == gpt2_tp1[5]
    table = calculator.summary_markdown(["deepseek-v3", "gpt2"], tp=8)
    assert "**不可行" in table and "| — |" in table


def test_figure_greys_out_what_does_not_fit():
    # GPT-3 175B on 8 H100s at its 2048 positions: at batch 256 the KV cache alone is 2.5 TB.
    fig = calculator.ledger_figure("gpt3-175b", seq_len=4096, tp=8)
    decode = fig.axes[2]
    labels = [line.get_label() for line in decode.get_lines()]
    assert calculator.INFEASIBLE_LABEL in labels
    grey = decode.get_lines()[labels.index(calculator.INFEASIBLE_LABEL)]
    assert 256 in grey.get_xdata() and 1 not in grey.get_xdata()
    assert max(fig.axes[1].get_lines()[0].get_xdata()) <= 2048  # nothing beyond the context


def test_widget_reads_a_users_config(tmp_path):
    import json

    from conftest import ROOT

    path = ROOT / "tests" / "hf_configs" / "llama3-8b.json"
    cfg = calculator._read_config(str(path))
    assert cfg.num_layers == 32
    upload = [{"name": "mine.json", "content": memoryview(path.read_bytes())}]
    assert calculator._read_config("", upload).name == "mine"
    (tmp_path / "bad.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises((ValueError, KeyError)):
        calculator._read_config(str(tmp_path / "bad.json"))


def test_short_context_models_are_evaluated_at_their_own_context():
    (row,) = calculator.summary_rows(["gpt2"], seq_len=4096)
    assert row[1] == 1024


def test_markdown_table_has_a_row_per_model():
    table = calculator.summary_markdown(["gpt2", "llama3-8b"])
    assert table.count("\n") == 3 and "| llama3-8b |" in table and "部署（每卡）" in table


def test_figure_has_three_panels():
    fig = calculator.ledger_figure("mixtral-8x7b")
    assert len(fig.axes) == 3


def test_ledger_text_names_the_model_and_settings():
    text = calculator.ledger_text("qwen2-7b", seq_len=2048, tp=2)
    assert "qwen2-7b" in text and "T=2048" in text and "TP=2" in text and text.startswith("部署：可行")


def test_widget_builds_and_redraws(capsys):
    calculator.widget()
    assert "llama3-70b" in capsys.readouterr().out


def test_bad_model_is_refused():
    with pytest.raises(TypeError, match="预设名.*tmath.ModelConfig"):
        calculator.ledger(70e9)
    with pytest.raises(ValueError, match="未知的预设模型 'llama-9000'"):
        calculator.ledger("llama-9000")


def test_every_preset_works_at_the_default_settings():
    # The default T is the smaller of 2,048 and the model's context (GPT-2: 1,024); it used to
    # be 4,096, which GPT-2 and GPT-3 refused.
    import tmath

    for name in tmath.presets():
        led = calculator.ledger(name)
        assert led["settings"]["seq_len"] == min(2048, tmath.preset(name).max_position), name
        assert led["settings"]["seq_len_source"] == "default"
    assert "默认 T" in calculator.ledger_text("gpt3-175b")
    # the figure's defaults too: T = 1,024 and TP = 4 (12 heads; 8 does not divide them)
    assert calculator.default_tp("gpt2") == 4 and calculator.default_tp("gpt2-xl") == 1
    assert calculator.default_tp("llama3-70b") == 8
    fig = calculator.ledger_figure("gpt2")
    assert any(line.get_label() == "所选 T = 1024" for line in fig.axes[0].get_lines())
    assert fig.axes[2].get_title() == "解码下界，T=1024，TP=4"
    for name in tmath.presets():
        calculator.default_tp(name)  # never refuses
        tmath.serving.tp_layout(tmath.preset(name), calculator.default_tp(name))


def test_widget_defaults_to_the_default_t(capsys):
    import ipywidgets  # noqa: F401  (the widget needs it; so does this test)

    calculator.widget()
    out = capsys.readouterr().out
    assert "默认 T：取 2,048 与模型位置数 8,192 中较小者" in out  # llama3-70b: T = 2,048
    assert "默认 TP：取 1、2、4、8 中能均分注意力头的最大者，TP=8" in out


def test_widget_works_for_every_preset_at_its_defaults(capsys, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    import tmath

    # Laying out the figure's text (tight_layout) is most of each redraw's 0.6 s and depends
    # on nothing the preset chooses; the figure is built, its axes filled and shown as before.
    monkeypatch.setattr(Figure, "tight_layout", lambda self, *a, **k: None)
    parts = calculator._widget_box()
    for name in tmath.presets():
        capsys.readouterr()
        parts["model"].value = name  # redraws with the default T and TP
        plt.close("all")
        out = capsys.readouterr().out
        assert "无法计算" not in out and f"模型 {name}" in out, out[:300]


def test_widget_reads_a_model_folder_and_refuses_cleanly(tmp_path):
    from conftest import ROOT

    (tmp_path / "config.json").write_bytes(
        (ROOT / "tests" / "hf_configs" / "multimodal" / "gemma-3-4b-it.json").read_bytes())
    cfg = calculator._read_config(str(tmp_path))
    assert cfg.wrapper == "gemma3" and cfg.name == tmp_path.name
    with pytest.raises(ValueError, match="嵌套太深"):
        calculator._read_config("", [{"name": "deep.json", "content": b"[" * 10**5}])


def test_ledger_text_wraps_its_sentences_to_a_page_column():
    from tmath.ledger import _width

    full = calculator.ledger_text("llama3-70b", seq_len=4096, tp=8)
    assert max(_width(line) for line in full.splitlines()) > 80  # the command line's lines
    text = calculator.ledger_text("llama3-70b", seq_len=4096, tp=8, width=76)
    assert max(_width(line) for line in text.splitlines()) <= 76
    assert text.startswith("部署：可行：") and text.splitlines()[1].startswith("  ")
    # the same words, only broken: without the whitespace the two texts are equal
    assert re.sub(r"\s+", "", text) == re.sub(r"\s+", "", full)

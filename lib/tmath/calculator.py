"""The book's live calculator: the whole ledger of a model, as text, a table and figures.

In Jupyter, :func:`widget` gives controls (preset or a reader's own config.json, by
path or upload; sequence length, batch, dtype, tensor-parallel degree, GPU) that
redraw the ledger and its figures.  On the
static website the same functions produce precomputed tables and figures, so the
page is complete without a kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")


def _cfg(model: Any):
    from tmath import ModelConfig, preset, presets
    from tmath.errors import InputError, InputTypeError, show

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        if model not in presets():
            raise InputError(f"未知的预设模型 {show(model)}：请用 {'、'.join(presets())} 之一",
                             "model")
        return preset(model)
    raise InputTypeError(
        f"model 必须是预设名（tmath.presets()）或 tmath.ModelConfig，收到 {type(model).__name__}",
        "model")


def ledger(model: Any, *, seq_len: int | None = None, batch: int = 1, dtype: str = "bf16",
           tp: int = 1, gpu: str = "H100", hbm_bytes: float | None = None) -> dict[str, Any]:
    """The ledger of ``model`` (a preset name or a ModelConfig) as a dict; see ``python -m tmath ledger``.

    ``seq_len`` None: the smaller of 2,048 and the model's context
    (:func:`tmath.ledger.default_seq_len`), so every preset works with the defaults.
    """
    from tmath.ledger import build_ledger

    return build_ledger(_cfg(model), seq_len=seq_len, batch=batch, dtype=dtype, tp=tp, gpu=gpu,
                        hbm_bytes=hbm_bytes)


def ledger_text(model: Any, *, width: int | None = None, **settings: Any) -> str:
    """The ledger as the aligned text table the command line prints.

    ``width`` (columns, a CJK character counting two) wraps the sentences around the
    table, the deployment verdict and the notes, at Chinese punctuation (，；：、), so
    that a page column shows them whole; ``None`` leaves every line as the command line
    prints it.
    """
    from tmath.ledger import render_text

    text = render_text(ledger(model, **settings))
    if width is None:
        return text
    return "\n".join(wrapped for line in text.split("\n") for wrapped in _wrap_zh(line, width))


def _wrap_zh(line: str, width: int) -> list[str]:
    """``line`` broken after a Chinese comma, semicolon, colon or 、 into pieces of at most ``width``
    columns (continuations indented by two spaces); a line with no such break stays whole."""
    from tmath.ledger import _width

    out: list[str] = []
    while _width(line) > width:
        cut = max((i for i, ch in enumerate(line) if ch in "，；：、" and _width(line[:i + 1]) <= width),
                  default=None)
        if cut is None:
            break
        out.append(line[:cut + 1])
        line = "  " + line[cut + 1:].lstrip()
    out.append(line)
    return out


SUMMARY_COLUMNS = (
    "模型", "T", "参数（十亿）", "激活参数（十亿）", "每 token 训练 FLOPs（G）", "6P 误差",
    "每 token KV（KiB）", "每序列 KV（GB）", "解码一步（ms）", "部署（每卡）",
)


def summary_rows(models, *, seq_len: int = 4096, batch: int = 1, dtype: str = "bf16", tp: int = 8,
                 gpu: str = "H100") -> list[tuple]:
    """One row per model at the same settings (the columns are :data:`SUMMARY_COLUMNS`).

    A model whose context is shorter than ``seq_len`` is evaluated at its own context length.
    The last column is the feasibility verdict: ``"可行（x GB）"``, ``"不可行（x GB > 85.9 GB）"`` (an
    H100: 80 GiB), or,
    when ``tp`` cannot split the model's heads, why (the numeric columns are then ``None``).
    """
    from tmath import count_params, kv_cache_bytes_per_token, training_flops
    from tmath.serving import kv_sequence_bytes, tp_layout

    rows = []
    for m in models:
        cfg = _cfg(m)
        t = min(seq_len, cfg.max_position)
        try:
            tp_layout(cfg, tp)
        except ValueError:  # TP cannot split the heads: no deployment, but the model's own figures
            p = count_params(cfg)
            f = training_flops(cfg, seq_len=t, batch=batch)
            n6 = p.active if cfg.is_moe else p.total
            kv_tok = kv_cache_bytes_per_token(cfg, dtype=dtype)
            rows.append((cfg.name, t, p.total / 1e9, p.active / 1e9, f.total / (t * batch) / 1e9,
                         (6 * n6 * t * batch - f.total) / f.total, kv_tok / 1024,
                         kv_sequence_bytes(cfg, t, dtype) / 1e9, None,
                         f"TP={tp} 不能整除 {cfg.num_heads} 个查询头"))
            continue
        led = ledger(cfg, seq_len=t, batch=batch, dtype=dtype, tp=tp, gpu=gpu)
        f, p, kv, feas = led["training_flops"], led["params"], led["kv_cache"], led["feasibility"]
        need, cap = feas["needed_bytes_per_gpu"] / 1e9, feas["hbm_bytes_per_gpu"] / 1e9
        verdict = (f"可行（{need:,.1f} GB）" if feas["feasible"]
                   else f"不可行（{need:,.1f} GB > {cap:,.1f} GB）")
        rows.append((
            led["model"]["name"],
            t,
            p["total"] / 1e9,
            p["active"] / 1e9,
            f["total"] / f["tokens"] / 1e9,
            f["six_n_t_rel_error"],
            kv["bytes_per_token"] / 1024,
            kv["bytes_per_sequence"] / 1e9,
            led["decode"]["step_seconds"] * 1e3,
            verdict,
        ))
    return rows


def summary_markdown(models, **settings: Any) -> str:
    """:func:`summary_rows` as a Markdown table (an infeasible row's verdict in bold)."""
    from tmath.fmt import pct

    fmt = ("{}", "{:,}", "{:,.2f}", "{:,.2f}", "{:,.1f}", pct, "{:,.0f}", "{:,.2f}", "{:.2f}", "{}")
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    for row in summary_rows(models, **settings):
        cells = ["—" if v is None else (f(v) if callable(f) else f.format(v))
                 for f, v in zip(fmt, row, strict=True)]
        if not row[-1].startswith("可行"):
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: Legend text of points that do not fit in memory.
INFEASIBLE_LABEL = "超出显存（无法部署）"


def default_tp(model: Any) -> int:
    """The largest of 1, 2, 4, 8 GPUs that can split ``model``'s attention heads.

    The default TP of the widget and of :func:`ledger_figure`: every preset has one
    (GPT-2's 12 heads: 4; GPT-2 XL's 25: 1), where a fixed 8 would refuse some of them.
    """
    from tmath.serving import tp_layout

    cfg = _cfg(model)
    for tp in (8, 4, 2):
        try:
            tp_layout(cfg, tp)
        except ValueError:
            continue
        return tp
    return 1


def ledger_figure(model: Any, *, seq_len: int | None = None, batch: int = 1, dtype: str = "bf16",
                  tp: int | None = None, gpu: str = "H100", hbm_bytes: float | None = None):
    """Three panels for one model: training FLOPs per token against T (exact and 6P), the KV cache of
    one sequence against T (with the memory left for it), and the decode-step bound against batch size.

    Nothing beyond the model's context (``max_position``) is drawn, and ``seq_len`` is capped
    there (None: :func:`tmath.ledger.default_seq_len`; ``tp`` None: :func:`default_tp`).
    A deployment that does not fit
    (weights/tp + KV cache + workspace > memory per GPU, as in
    :func:`tmath.ledger.build_ledger`) is drawn hollow and grey, labelled 超出显存.
    """
    import matplotlib.pyplot as plt

    import tmath.plots  # noqa: F401  (the Chinese font, 150 dpi)
    from tmath import count_params
    from tmath.hardware import hardware
    from tmath.ledger import default_seq_len
    from tmath.serving import (
        WORKSPACE_BYTES_PER_GPU,
        decode_bound,
        dtype_bytes,
        kv_sequence_bytes,
        tp_layout,
    )
    from tmath.sweep import flops_vs_seq_len

    cfg, hw = _cfg(model), hardware(gpu)
    tp = default_tp(cfg) if tp is None else tp
    tp_layout(cfg, tp)
    cap = hw.hbm_bytes if hbm_bytes is None else float(hbm_bytes)
    seq_len = default_seq_len(cfg) if seq_len is None else min(seq_len, cfg.max_position)
    ts = np.unique(np.logspace(7, 20, 60, base=2).astype(np.int64))
    ts = ts[ts <= cfg.max_position]
    flops = flops_vs_seq_len(cfg, ts, batch=1) / ts
    p = count_params(cfg)
    six_n = 6 * (p.active if cfg.is_moe else p.total)
    kv_seq = np.array([kv_sequence_bytes(cfg, int(t), dtype) for t in ts], dtype=float)
    weights_gpu = p.total * dtype_bytes(dtype) / tp
    batches = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    bounds = [decode_bound(cfg, hw, tp=tp, batch=int(b), context_len=seq_len, weight_dtype=dtype,
                           kv_dtype=dtype) for b in batches]
    steps = np.array([d.seconds * 1e3 for d in bounds])
    fits = np.array([weights_gpu + d.kv_bytes_per_gpu + WORKSPACE_BYTES_PER_GPU <= cap for d in bounds])
    kv_room = max(cap - weights_gpu - WORKSPACE_BYTES_PER_GPU, 0.0)  # per GPU
    kv_frac = bounds[0].kv_bytes_per_gpu / bounds[0].kv_bytes if bounds[0].kv_bytes else 1 / tp

    fig, axes = plt.subplots(3, 1, figsize=(6.4, 9.6))  # stacked: readable in the page column
    ax = axes[0]
    ax.loglog(ts, flops, label="精确值")
    ax.axhline(six_n, color="C1", ls="--", label="6P")
    ax.axvline(seq_len, color="gray", lw=0.8, label=f"所选 T = {seq_len}")
    ax.set(xlabel="序列长度 T（token）", ylabel="每 token 训练 FLOPs",
           title=f"{cfg.name}：每 token 训练 FLOPs")
    ax.legend()
    ax = axes[1]
    room = kv_room / kv_frac  # one sequence's whole cache that fits beside the weights
    ok = kv_seq <= room
    ax.loglog(ts[ok], kv_seq[ok] / 1e9, color="C0", label=f"一条序列的 KV cache（{dtype}）")
    if (~ok).any():
        ax.loglog(ts[~ok], kv_seq[~ok] / 1e9, ls=":", color="0.6", label=INFEASIBLE_LABEL)
    if room > 0:
        ax.axhline(room / 1e9, color="C3", ls="--", label=f"{tp} 张 {hw.name} 放下权重后余量")
    ax.axvline(seq_len, color="gray", lw=0.8, label=f"所选 T = {seq_len}")
    ax.set(xlabel="序列长度 T（token）", ylabel="每条序列的 KV cache（GB）", title="一条序列的 KV cache")
    ax.legend(fontsize=8)
    ax = axes[2]
    if fits.any():
        ax.semilogx(batches[fits], steps[fits], "o-", base=2, color="C0", label="可部署")
    if (~fits).any():
        ax.semilogx(batches[~fits], steps[~fits], "o--", base=2, color="0.6", mfc="none",
                    label=INFEASIBLE_LABEL)
    ax.set(xlabel="批大小（序列数）", ylabel="解码一步的下界（ms）",
           title=f"解码下界，T={seq_len}，TP={tp}")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    for a in axes[:2]:
        a.set_xscale("log", base=2)
    for a in axes:
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def _read_config(path: str = "", upload: Any = None):
    """A ModelConfig from an uploaded file (ipywidgets FileUpload value) or a path to a config.json
    or a model folder."""
    from tmath import ModelConfig
    from tmath.config import parse_config_json

    if upload:
        item = upload[0] if isinstance(upload, (list, tuple)) else next(iter(upload.values()))
        name = str(item.get("name", "uploaded"))
        data = parse_config_json(bytes(item["content"]), name)
        return ModelConfig.from_hf(data, name=name.removesuffix(".json"))
    return ModelConfig.from_hf(path)


def widget():
    """Interactive controls (Jupyter only): pick a preset or give your own config.json, see the
    ledger and its figures."""
    from IPython.display import display

    display(_widget_box()["box"])


def _widget_box() -> dict[str, Any]:
    """The widget's controls, output area and layout, drawn once with the defaults."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from tmath import presets
    from tmath.hardware import hardware_names

    controls = dict(
        model=w.Dropdown(options=presets(), value="llama3-70b", description="预设模型"),
        seq_len=w.Dropdown(options=[("默认：min(2048, 位置数)", None)]
                           + [(str(2**k), 2**k) for k in range(9, 18)],
                           value=None, description="T"),
        batch=w.Dropdown(options=[2**k for k in range(0, 9)], value=1, description="批大小"),
        dtype=w.Dropdown(options=list(DTYPES), value="bf16", description="数据类型"),
        tp=w.Dropdown(options=[("默认：1/2/4/8 中最大可行者", None), 1, 2, 4, 8, 16], value=None,
                      description="TP"),
        gpu=w.Dropdown(options=hardware_names(), value="H100", description="GPU"),
    )
    path = w.Text(value="", placeholder="例如 path/to/config.json", description="配置路径")
    upload = w.FileUpload(accept=".json", multiple=False, description="上传 config.json")
    out = w.Output()

    def redraw(_=None):
        settings = {k: c.value for k, c in controls.items()}
        model = settings.pop("model")
        with out:
            out.clear_output(wait=True)
            try:
                if upload.value or path.value.strip():
                    model = _read_config(path.value.strip(), upload.value)
                if settings["tp"] is None:
                    settings["tp"] = default_tp(model)
                    print(f"默认 TP：取 1、2、4、8 中能均分注意力头的最大者，TP={settings['tp']}"
                          "（在 TP 菜单里选别的）")
                print(ledger_text(model, **settings))
                ledger_figure(model, **settings)
                plt.show()
            except (OSError, ValueError, TypeError, KeyError) as e:
                print(f"无法计算：{e}")

    for c in (*controls.values(), path, upload):
        c.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox(list(controls.values())[:3]), w.HBox(list(controls.values())[3:]),
                  w.HBox([path, upload]), out])
    return dict(controls, path=path, upload=upload, out=out, box=box)

"""The book's live calculator: the whole ledger of a model, as text, a table and figures.

In Jupyter, :func:`widget` gives controls (preset, sequence length, batch, dtype,
tensor-parallel degree, GPU) that redraw the ledger and its figures.  On the
static website the same functions produce precomputed tables and figures, so the
page is complete without a kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")


def _cfg(model: Any):
    from tmath import ModelConfig, preset

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        return preset(model)
    raise TypeError(f"model must be a preset name or a tmath.ModelConfig, got {type(model).__name__}")


def ledger(model: Any, *, seq_len: int = 4096, batch: int = 1, dtype: str = "bf16", tp: int = 1,
           gpu: str = "H100") -> dict[str, Any]:
    """The ledger of ``model`` (a preset name or a ModelConfig) as a dict; see ``python -m tmath ledger``."""
    from tmath.cli import build_ledger

    return build_ledger(_cfg(model), seq_len=seq_len, batch=batch, dtype=dtype, tp=tp, gpu=gpu)


def ledger_text(model: Any, **settings: Any) -> str:
    """The ledger as the aligned text table the command line prints."""
    from tmath.cli import _render

    return _render(ledger(model, **settings))


SUMMARY_COLUMNS = (
    "model", "T", "params (B)", "active (B)", "train FLOPs/token (G)", "6P error",
    "KV/token (KiB)", "KV/seq (GB)", "decode step (ms)",
)


def summary_rows(models, *, seq_len: int = 4096, batch: int = 1, dtype: str = "bf16", tp: int = 8,
                 gpu: str = "H100") -> list[tuple]:
    """One row per model at the same settings (the columns are :data:`SUMMARY_COLUMNS`).

    A model whose context is shorter than ``seq_len`` is evaluated at its own context length.
    """
    rows = []
    for m in models:
        cfg = _cfg(m)
        t = min(seq_len, cfg.max_position)
        led = ledger(cfg, seq_len=t, batch=batch, dtype=dtype, tp=tp, gpu=gpu)
        f, p, kv = led["training_flops"], led["params"], led["kv_cache"]
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
        ))
    return rows


def summary_markdown(models, **settings: Any) -> str:
    """:func:`summary_rows` as a Markdown table."""
    fmt = ("{}", "{:,}", "{:,.2f}", "{:,.2f}", "{:,.1f}", "{:+.1%}", "{:,.0f}", "{:,.2f}", "{:.2f}")
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    for row in summary_rows(models, **settings):
        lines.append("| " + " | ".join(f.format(v) for f, v in zip(fmt, row, strict=True)) + " |")
    return "\n".join(lines)


def ledger_figure(model: Any, *, seq_len: int = 4096, batch: int = 1, dtype: str = "bf16", tp: int = 8,
                  gpu: str = "H100"):
    """Three panels for one model: training FLOPs per token against T (exact and 6P), the KV cache of
    one sequence against T (with the HBM left for it), and the decode-step bound against batch size."""
    import matplotlib.pyplot as plt

    from tmath import count_params, kv_cache_bytes_per_token
    from tmath.hardware import hardware
    from tmath.serving import decode_bound
    from tmath.sweep import flops_vs_seq_len

    cfg, hw = _cfg(model), hardware(gpu)
    ts = np.unique(np.logspace(7, 20, 60, base=2).astype(np.int64))
    flops = flops_vs_seq_len(cfg, ts, batch=1) / ts
    p = count_params(cfg)
    six_n = 6 * (p.active if cfg.is_moe else p.total)
    kv_seq = kv_cache_bytes_per_token(cfg, dtype=dtype) * ts
    batches = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    steps = [decode_bound(cfg, hw, tp=tp, batch=int(b), context_len=seq_len, weight_dtype=dtype,
                          kv_dtype=dtype).seconds * 1e3 for b in batches]

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    ax = axes[0]
    ax.loglog(ts, flops, label="exact")
    ax.axhline(six_n, color="C1", ls="--", label="6P")
    ax.axvline(seq_len, color="gray", lw=0.8)
    ax.set(xlabel="sequence length T", ylabel="training FLOPs per token", title=cfg.name)
    ax.legend()
    ax = axes[1]
    ax.loglog(ts, kv_seq / 1e9, label=f"KV cache ({dtype})")
    ax.axhline(hw.hbm_bytes * tp / 1e9, color="C3", ls="--", label=f"HBM of {tp} x {hw.name}")
    ax.axvline(seq_len, color="gray", lw=0.8)
    ax.set(xlabel="sequence length T", ylabel="GB per sequence", title="KV cache of one sequence")
    ax.legend()
    ax = axes[2]
    ax.semilogx(batches, steps, "o-", base=2)
    ax.set(xlabel="batch (sequences)", ylabel="ms per decode step",
           title=f"decode bound, T={seq_len}, tp={tp}")
    ax.set_ylim(bottom=0)
    for a in axes:
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def widget():
    """Interactive controls (Jupyter only): pick a preset and settings, see the ledger and its figures."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from tmath import presets
    from tmath.hardware import hardware_names

    controls = dict(
        model=w.Dropdown(options=presets(), value="llama3-70b", description="model"),
        seq_len=w.Dropdown(options=[2**k for k in range(9, 18)], value=4096, description="T"),
        batch=w.Dropdown(options=[2**k for k in range(0, 9)], value=1, description="batch"),
        dtype=w.Dropdown(options=list(DTYPES), value="bf16", description="dtype"),
        tp=w.Dropdown(options=[1, 2, 4, 8, 16], value=8, description="TP"),
        gpu=w.Dropdown(options=hardware_names(), value="H100", description="GPU"),
    )
    out = w.Output()

    def redraw(_=None):
        settings = {k: c.value for k, c in controls.items()}
        model = settings.pop("model")
        with out:
            out.clear_output(wait=True)
            print(ledger_text(model, **settings))
            ledger_figure(model, **settings)
            plt.show()

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    display(w.VBox([w.HBox(list(controls.values())[:3]), w.HBox(list(controls.values())[3:]), out]))

"""Command line: ``python -m tmath ledger CONFIG.json | --preset NAME``, ``presets``, ``hardware``.

Bad input prints one line ``tmath: error: ...`` naming the flag or field and
exits with status 2 (no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["main", "build_ledger"]


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise _UsageError(message)


def _fmt_int(n: float) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.3f} {unit}"
    return f"{n:,.0f} B"


def _fmt_sci(x: float) -> str:
    return f"{x:.4e}"


def build_ledger(
    cfg: Any,
    *,
    seq_len: int,
    batch: int,
    dtype: str = "bf16",
    tp: int = 1,
    gpu: str = "H100",
    recipe: str = "mixed-adam",
) -> dict[str, Any]:
    """The whole ledger of ``cfg`` as a JSON-serialisable dict (plain numbers, bytes, seconds)."""
    import tmath
    from tmath.hardware import hardware
    from tmath.memory import activation_memory, training_bytes_per_param
    from tmath.serving import decode_bound, dtype_bytes

    for name, v in (("--seq-len", seq_len), ("--batch", batch), ("--tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    dtype_bytes(dtype)  # validates
    hw = hardware(gpu)
    p = tmath.count_params(cfg)
    f = tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=False)
    fc = tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=True)
    tokens = seq_len * batch
    n6 = p.active if cfg.is_moe else p.total
    six_nt = 6 * n6 * tokens
    kv_tok = tmath.kv_cache_bytes_per_token(cfg, dtype=dtype)
    rb = training_bytes_per_param(recipe)
    dec = decode_bound(cfg, hw, tp=tp, batch=batch, context_len=seq_len, weight_dtype=dtype, kv_dtype=dtype)
    acts = {
        r: activation_memory(cfg, seq_len, batch, recompute=r, tp=tp, sequence_parallel=tp > 1)
        for r in ("none", "selective", "full")
    }
    step_s = f.total / (hw.dense_flops * tp)
    return {
        "model": {
            "name": cfg.name,
            "model_type": cfg.model_type,
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_layers": cfg.num_layers,
            "num_heads": cfg.num_heads,
            "num_kv_heads": cfg.num_kv_heads,
            "head_dim": cfg.head_dim,
            "vocab_size": cfg.vocab_size,
            "mlp": cfg.mlp,
            "moe": bool(cfg.is_moe),
            "mla": bool(cfg.is_mla),
        },
        "settings": {
            "seq_len": seq_len,
            "batch": batch,
            "dtype": dtype,
            "tp": tp,
            "gpu": hw.name,
            "recipe": recipe,
        },
        "params": {"total": p.total, "active": p.active, "breakdown": dict(p.breakdown)},
        "training_flops": {
            "tokens": tokens,
            "total": f.total,
            "total_causal": fc.total,
            "breakdown": dict(f.breakdown),
            "six_n_t": six_nt,
            "six_n_t_uses": "active" if cfg.is_moe else "total",
            "six_n_t_rel_error": (six_nt - f.total) / f.total,
        },
        "kv_cache": {
            "bytes_per_token": kv_tok,
            "bytes_per_sequence": kv_tok * seq_len,
            "bytes_batch": kv_tok * seq_len * batch,
        },
        "training_memory": {
            "bytes_per_param": rb.total,
            "bytes_per_param_breakdown": rb.breakdown,
            "states_bytes": p.total * rb.total,
            "activation_bytes_per_gpu": acts,
            "activation_convention": "Korthikanti et al. 2022 (GPT layout), per GPU, "
            + ("tensor+sequence parallel" if tp > 1 else "no parallelism"),
        },
        "decode": {
            "gpu": hw.name,
            "tp": tp,
            "bandwidth_bytes_per_s": hw.hbm_bandwidth,
            "weight_bytes": dec.weight_bytes,
            "kv_bytes": dec.kv_bytes,
            "bytes_per_gpu": dec.bytes_per_gpu,
            "step_seconds": dec.seconds,
            "tokens_per_s_per_seq": dec.tokens_per_s_per_seq,
            "tokens_per_s": dec.tokens_per_s,
        },
        "step_time_at_peak_s": step_s,
        "step_energy_at_peak_j": f.total / hw.flops_per_watt if hw.tdp_watts else None,
    }


def _table(rows: list[tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in rows)
    vw = max(len(v) for _, v in rows)
    out = []
    for k, v in rows:
        if v == "" and not k.startswith(" "):
            out.append(f"\n{k}")
        else:
            out.append(f"  {k:<{w}}  {v:>{vw}}")
    return "\n".join(out).lstrip("\n")


def _render(led: dict[str, Any]) -> str:
    m, s, p, f = led["model"], led["settings"], led["params"], led["training_flops"]
    kv, tm, d = led["kv_cache"], led["training_memory"], led["decode"]
    rows: list[tuple[str, str]] = [
        (f"Model {m['name']} ({m['model_type']})", ""),
        ("D / F / L", f"{m['hidden_size']} / {m['intermediate_size']} / {m['num_layers']}"),
        ("N / K / H / V", f"{m['num_heads']} / {m['num_kv_heads']} / {m['head_dim']} / {m['vocab_size']}"),
        ("settings", f"T={s['seq_len']} B={s['batch']} {s['dtype']} tp={s['tp']} {s['gpu']}"),
        ("Parameters", ""),
        ("total", _fmt_int(p["total"])),
        ("active per token", _fmt_int(p["active"])),
    ]
    rows += [(f"  {k}", _fmt_int(v)) for k, v in p["breakdown"].items()]
    rows += [
        ("Training FLOPs per step (fwd+bwd)", ""),
        ("total (full attention)", _fmt_sci(f["total"])),
        ("total (causal)", _fmt_sci(f["total_causal"])),
    ]
    rows += [(f"  {k}", _fmt_sci(v)) for k, v in f["breakdown"].items()]
    rows += [
        (f"6·P·tokens (P = {f['six_n_t_uses']})", _fmt_sci(f["six_n_t"])),
        ("6PT relative error", f"{100 * f['six_n_t_rel_error']:+.3f} %"),
        ("KV cache", ""),
        ("per token", _fmt_bytes(kv["bytes_per_token"])),
        (f"per sequence (T={s['seq_len']})", _fmt_bytes(kv["bytes_per_sequence"])),
        ("Training memory", ""),
        (f"states ({s['recipe']}, {tm['bytes_per_param']} B/param)", _fmt_bytes(tm["states_bytes"])),
    ]
    rows += [
        (f"activations, recompute={k}", _fmt_bytes(v)) for k, v in tm["activation_bytes_per_gpu"].items()
    ]
    rows += [
        ("Decode step lower bound", ""),
        ("bytes read per GPU", _fmt_bytes(d["bytes_per_gpu"])),
        ("step time", f"{1e3 * d['step_seconds']:.3f} ms"),
        ("tokens/s per sequence", f"{d['tokens_per_s_per_seq']:,.1f}"),
        ("tokens/s (batch)", f"{d['tokens_per_s']:,.1f}"),
        ("Training step at 100% of peak", ""),
        (f"time on {s['tp']}x{s['gpu']}", f"{led['step_time_at_peak_s']:.4g} s"),
    ]
    if led["step_energy_at_peak_j"] is not None:
        rows.append(("energy (TDP, PUE 1)", f"{led['step_energy_at_peak_j']:.4g} J"))
    return _table(rows)


def _check_flags(args: argparse.Namespace) -> None:
    """Validate the numeric/named flags before any config is loaded."""
    from tmath.hardware import hardware
    from tmath.memory import training_bytes_per_param
    from tmath.serving import dtype_bytes

    for flag, v in (("--seq-len", args.seq_len), ("--batch", args.batch), ("--tp", args.tp)):
        if v < 1:
            raise _UsageError(f"{flag} must be a positive integer, got {v}")
    for flag, check, v in (
        ("--dtype", dtype_bytes, args.dtype),
        ("--gpu", hardware, args.gpu),
        ("--recipe", training_bytes_per_param, args.recipe),
    ):
        try:
            check(v)
        except ValueError as e:
            raise _UsageError(f"{flag}: {e}") from None


def _load_cfg(args: argparse.Namespace) -> Any:
    import tmath

    if (args.config is None) == (args.preset is None):
        raise _UsageError("give exactly one of CONFIG.json or --preset NAME")
    if args.preset is not None:
        return tmath.preset(args.preset)
    try:
        with open(args.config, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise _UsageError(f"CONFIG: no such file: {args.config}") from None
    except json.JSONDecodeError as e:
        raise _UsageError(f"CONFIG: {args.config} is not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise _UsageError(f"CONFIG: {args.config} must hold a JSON object")
    return tmath.ModelConfig.from_hf(data)


def _parser() -> _Parser:
    ap = _Parser(prog="tmath", description="Exact transformer arithmetic: the ledger of a model config.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    led = sub.add_parser("ledger", help="print the whole ledger of a config")
    led.add_argument("config", nargs="?", help="a Hugging Face config.json")
    led.add_argument("--preset", help="a preset name (see `tmath presets`)")
    led.add_argument("--seq-len", type=int, default=2048, help="sequence length T (default 2048)")
    led.add_argument("--batch", type=int, default=1, help="sequences per step B (default 1)")
    led.add_argument("--dtype", default="bf16", help="weights/KV dtype: fp32 bf16 fp16 fp8 int8 int4")
    led.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    led.add_argument("--gpu", default="H100", help="hardware name (see `tmath hardware`)")
    led.add_argument("--recipe", default="mixed-adam", help="training recipe (default mixed-adam)")
    led.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.add_parser("presets", help="list preset names")
    sub.add_parser("hardware", help="list the hardware table")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.cmd == "presets":
            import tmath

            print("\n".join(tmath.presets()))
            return 0
        if args.cmd == "hardware":
            from tmath.hardware import HARDWARE

            for h in HARDWARE.values():
                tdp = f"{h.tdp_watts:g} W" if h.tdp_watts else "n/a"
                print(
                    f"{h.name:<7} {h.dense_flops / 1e12:7.1f} TFLOP/s {h.precision}  "
                    f"{h.hbm_bytes / 1e9:5.0f} GB  {h.hbm_bandwidth / 1e12:5.3f} TB/s  {tdp:>6}  [{h.source}]"
                )
            return 0
        _check_flags(args)
        cfg = _load_cfg(args)
        led = build_ledger(
            cfg,
            seq_len=args.seq_len,
            batch=args.batch,
            dtype=args.dtype,
            tp=args.tp,
            gpu=args.gpu,
            recipe=args.recipe,
        )
        _emit(json.dumps(led, indent=2) if args.json else _render(led))
        return 0
    except (_UsageError, ValueError, TypeError) as e:
        msg = " ".join(str(e).split())
        print(f"tmath: error: {msg}", file=sys.stderr)
        return 2


def _emit(text: str) -> None:
    """Print, and stop quietly if the reader closed the pipe (``python -m tmath ledger ... | head``)."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

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

from tmath.ledger import build_ledger, render_text

__all__ = ["main", "build_ledger"]  # build_ledger lives in tmath.ledger; re-exported


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise _UsageError(message)


def _check_flags(args: argparse.Namespace) -> None:
    """Validate the numeric/named flags before any config is loaded."""
    from tmath.hardware import hardware
    from tmath.memory import training_bytes_per_param
    from tmath.serving import dtype_bytes

    for flag, v in (("--seq-len", args.seq_len), ("--batch", args.batch), ("--tp", args.tp)):
        if v < 1:
            raise _UsageError(f"{flag} must be a positive integer, got {v}")
    if args.hbm_gb is not None and not args.hbm_gb > 0:
        raise _UsageError(f"--hbm-gb must be a positive number of GB, got {args.hbm_gb}")
    if args.workspace_gb is not None and not args.workspace_gb >= 0:
        raise _UsageError(f"--workspace-gb must be a non-negative number of GB, got {args.workspace_gb}")
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
    led.add_argument("--hbm-gb", type=float, default=None,
                     help="usable memory per GPU in GB (1e9 bytes); default: the datasheet "
                     "capacity (H100: 80)")
    led.add_argument("--workspace-gb", type=float, default=None,
                     help="memory reserved per GPU beyond weights and KV cache, GB (default 5)")
    led.add_argument("--attention", default="eager", choices=("eager", "flash"),
                     help="training-FLOP convention: eager (probabilities saved) or flash (the "
                     "backward recomputes QK^T, 14 instead of 12 B*T^2*N*H per layer)")
    led.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.add_parser("presets", help="list preset names")
    sub.add_parser("hardware", help="list the hardware table")
    from tmath.grade import add_grade_parser

    add_grade_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if hasattr(args, "func"):  # sub-commands that live in their own module (tmath grade)
            return args.func(args)
        if args.cmd == "presets":
            import tmath

            print("\n".join(tmath.presets()))
            return 0
        if args.cmd == "hardware":
            from tmath.hardware import HARDWARE

            for h in HARDWARE.values():
                tdp = f"{h.tdp_watts:g} W" if h.tdp_watts else "n/a"
                smi = (f"  (nvidia-smi: {h.runtime_total_bytes / 2**20:,.0f} MiB)"
                       if h.runtime_total_bytes else "")
                print(
                    f"{h.name:<7} {h.dense_flops / 1e12:7.1f} TFLOP/s {h.precision}  "
                    f"{h.hbm_bytes / 1e9:5.0f} GB  {h.hbm_bandwidth / 1e12:5.3f} TB/s  {tdp:>6}  [{h.source}]"
                    + smi
                )
            print("GB = 1e9 bytes (datasheet capacity, what feasibility compares against; "
                  "`ledger --hbm-gb` overrides it)")
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
            hbm_bytes=None if args.hbm_gb is None else args.hbm_gb * 1e9,
            workspace_bytes=None if args.workspace_gb is None else args.workspace_gb * 1e9,
            attention=args.attention,
        )
        _emit(json.dumps(led, indent=2) if args.json else render_text(led))
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

"""Command line: ``tmath ledger CONFIG | --preset NAME``, ``plan``, ``serve``, ``presets``, ``hardware``,
``grade`` (``python -m tmath ...`` is the same; ``tmath`` is the console script that
``lib/pyproject.toml`` installs, which exits with :func:`main`'s status).

``CONFIG`` is a Hugging Face ``config.json`` or a downloaded model folder holding one.
Every message is Chinese.  Bad input prints one line ``tmath: 错误：...`` on stderr,
naming the flag or config field and the fix, and exits with status 2 (no traceback).
With ``--json`` an error prints exactly one JSON object on stdout instead,
``{"error": "...", "field": "..."}``, and exits with status 2: ``field`` is the flag
(``--tp``), the config.json key (``num_hidden_layers``, ``text_config.model_type``) or
``CONFIG`` (the file itself).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tmath.ledger import build_ledger, render_text

__all__ = ["main", "build_ledger"]  # build_ledger lives in tmath.ledger; re-exported

#: Every subcommand, as the errors for an unknown or a missing one list them (a test checks
#: this against the parser).
COMMANDS = ("ledger", "plan", "serve", "presets", "hardware", "grade", "grade-merge", "grade-keys")


class _UsageError(Exception):
    """A CLI error: a Chinese message and the flag or field it is about."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def _q(s: str) -> str:
    return s.strip().strip("'\"")


# argparse words its own errors in English: say them in Chinese (Python 3.11-3.13 wordings).
_ARGPARSE = [
    (r"argument (?P<a>cmd|\{[^}]*\}): invalid choice: (?P<v>.*?) \(choose from .*\)",
     lambda m: (f"未知命令 {_q(m['v'])}：请用 {'、'.join(COMMANDS)} 之一", "command")),
    (r"argument (?P<a>\S+): invalid choice: (?P<v>.*?) \(choose from (?P<c>.*)\)",
     lambda m: (f"{m['a']} 不能取 {_q(m['v'])}：请用 "
                f"{'、'.join(_q(c) for c in m['c'].split(','))} 之一", m["a"])),
    (r"argument (?P<a>\S+): invalid int value: (?P<v>.*)",
     lambda m: (f"{m['a']} 必须是整数，收到 {_q(m['v'])}", m["a"])),
    (r"argument (?P<a>\S+): invalid float value: (?P<v>.*)",
     lambda m: (f"{m['a']} 必须是数，收到 {_q(m['v'])}", m["a"])),
    (r"argument (?P<a>\S+): expected one argument",
     lambda m: (f"{m['a']} 后面缺少取值", m["a"])),
    (r"unrecognized arguments: (?P<v>.*)",
     lambda m: (f"无法识别的参数：{m['v']}（用 -h 查看可用的选项）",
                m["v"].split()[0])),
    (r"the following arguments are required: (?P<v>.*)",
     lambda m: (f"缺少命令：请用 {'、'.join(COMMANDS)} 之一", "command") if m["v"] == "cmd"
     else (f"缺少必需的参数：{m['v'].replace(', ', '、')}", m["v"].split(",")[0])),
    (r"ambiguous option: (?P<a>\S+) could match (?P<v>.*)",
     lambda m: (f"选项 {m['a']} 有歧义，可能是 {m['v']}：请写全", m["a"])),
]


class _Formatter(argparse.HelpFormatter):
    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any) -> str:
        return super()._format_usage(usage, actions, groups, "用法：" if prefix is None else prefix)


class _Parser(argparse.ArgumentParser):
    """argparse in Chinese: headings, ``-h``, and every error (see :meth:`error`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs["add_help"] = False
        super().__init__(*args, **kwargs)
        self._positionals.title = "位置参数"
        self._optionals.title = "选项"
        self.add_argument("-h", "--help", action="help", help="显示这段帮助并退出")

    def error(self, message: str) -> NoReturn:  # one line, exit 2
        for pattern, say in _ARGPARSE:
            m = re.fullmatch(pattern, message.strip(), flags=re.S)
            if m:
                raise _UsageError(*say(m))
        raise _UsageError(f"参数错误：{message}", "argv")


def _flag_int(flag: str, v: int | None, lo: int, hi: int) -> None:
    if v is not None and not lo <= v <= hi:
        raise _UsageError(f"{flag} 必须在 {lo:,} 到 {hi:,} 之间，收到 {v:,}", flag)


def _flag_gb(flag: str, v: float | None, allow_zero: bool) -> None:
    if v is None:
        return
    ok = math.isfinite(v) and (v >= 0 if allow_zero else v > 0) and v <= 1e6
    if not ok:
        what = "非负" if allow_zero else "正"
        raise _UsageError(f"{flag} 必须是不超过 1,000,000 的{what}数（单位 GB = 10⁹ 字节），收到 {v:g}",
                          flag)


def _flag_pos(flag: str, v: float | None, hi: float, unit: str) -> None:
    """A hardware figure from the command line: a finite positive number up to ``hi``."""
    if v is not None and not (math.isfinite(v) and 0 < v <= hi):
        raise _UsageError(f"{flag} 必须是不超过 {hi:,.0f} 的正数（单位 {unit}），收到 {v:g}", flag)


def _check_flags(args: argparse.Namespace) -> None:
    """Validate the numeric/named flags before any config is loaded."""
    from tmath.errors import InputError
    from tmath.hardware import hardware
    from tmath.ledger import SETTING_LIMITS
    from tmath.memory import training_bytes_per_param
    from tmath.serving import DTYPE_BYTES

    for flag, key in (("--seq-len", "seq_len"), ("--batch", "batch"), ("--tp", "tp")):
        lo, hi = SETTING_LIMITS[key]
        _flag_int(flag, getattr(args, key), int(lo), int(hi))
    _flag_gb("--hbm-gb", args.hbm_gb, allow_zero=False)
    _flag_gb("--workspace-gb", args.workspace_gb, allow_zero=True)
    _flag_pos("--peak-tflops", args.peak_tflops, 1e7, "TFLOP/s")  # tmath.plan.HARDWARE_LIMITS
    _flag_pos("--hbm-tbs", args.hbm_tbs, 1e4, "TB/s")
    if args.dtype.lower() not in DTYPE_BYTES:
        raise _UsageError(f"--dtype {args.dtype} 未知：请用 fp32、bf16、fp16、fp8、int8、int4 之一",
                          "--dtype")
    for flag, check, v in (("--gpu", hardware, args.gpu),
                           ("--recipe", training_bytes_per_param, args.recipe)):
        try:
            check(v)
        except InputError as e:
            raise _UsageError(f"{flag}：{e}", flag) from None


def _load_cfg(args: argparse.Namespace) -> Any:
    import tmath
    from tmath.errors import InputError

    if (args.config is None) == (args.preset is None):
        raise _UsageError("请给出 CONFIG（config.json 或模型文件夹）或 --preset NAME，二者选一",
                          "CONFIG")
    if args.preset is not None:
        if args.preset not in tmath.presets():
            raise _UsageError(f"--preset {args.preset} 未知：请用 {'、'.join(tmath.presets())} 之一"
                              "（python -m tmath presets 列出全部）", "--preset")
        return tmath.preset(args.preset)
    try:
        return tmath.ModelConfig.from_hf(args.config)
    except InputError as e:
        raise _UsageError(str(e), "CONFIG" if e.field == "config" else e.field) from None


def _parser() -> _Parser:
    ap = _Parser(prog="tmath", description="Transformer 的精确算术：一个模型配置的整本账。")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    led = sub.add_parser("ledger", help="打印一个配置的整本账")
    led.add_argument("config", nargs="?", metavar="CONFIG",
                     help="Hugging Face 的 config.json，或含 config.json 的模型文件夹")
    led.add_argument("--preset", help="预设模型名（见 `python -m tmath presets`）")
    led.add_argument("--seq-len", type=int, default=None,
                     help="序列长度 T（默认：2048 与模型位置数中较小者）")
    led.add_argument("--batch", type=int, default=1, help="每步的序列数 B（默认 1）")
    led.add_argument("--dtype", default="bf16",
                     help="权重与 KV cache 的数据类型：fp32 bf16 fp16 fp8 int8 int4")
    led.add_argument("--tp", type=int, default=1, help="张量并行度（默认 1）")
    led.add_argument("--gpu", default="H100", help="硬件名（见 `python -m tmath hardware`）")
    led.add_argument("--recipe", default="mixed-adam", help="训练配方（默认 mixed-adam）")
    led.add_argument("--hbm-gb", type=float, default=None,
                     help="每卡可用显存，GB（10⁹ 字节）；默认取显卡容量，数据手册的 GB 按 GiB 读"
                     "（H100：80 GiB = 85.9 GB）")
    led.add_argument("--peak-tflops", type=float, default=None,
                     help="每卡 16 位稠密峰值算力（TFLOP/s），替换 --gpu 的数字")
    led.add_argument("--hbm-tbs", type=float, default=None,
                     help="每卡 HBM 带宽（TB/s，10¹² 字节/秒），替换 --gpu 的数字")
    led.add_argument("--workspace-gb", type=float, default=None,
                     help="每卡在权重与 KV cache 之外预留的显存，GB（默认 5）")
    led.add_argument("--attention", default="eager", choices=("eager", "flash"),
                     help="训练 FLOPs 的约定：eager（保存注意力概率）或 flash（反向重算 QKᵀ，"
                     "每层 14 而非 12 个 B·T²·N·H）")
    led.add_argument("--json", action="store_true", help="输出 JSON 而不是表格")
    from tmath.plan import add_plan_parser

    add_plan_parser(sub)  # `tmath plan` (tmath.plan)
    from tmath.serve_cli import add_serve_parser

    add_serve_parser(sub)  # `tmath serve` (tmath.serve_cli, tmath.serve; issue 37)
    sub.add_parser("presets", help="列出预设模型名")
    sub.add_parser("hardware", help="列出硬件表")
    from tmath.grade import add_grade_parser, add_merge_parser

    add_grade_parser(sub)  # `tmath grade` (tmath.grade)
    add_merge_parser(sub)  # `tmath grade-merge`: the filled manual.csv into the totals
    from tmath.variants import add_keys_parser

    add_keys_parser(sub)  # `tmath grade-keys`: every student's keys of the varied exercises
    return ap


def _wants_json(argv: Sequence[str]) -> bool:
    """``--json`` (or an abbreviation argparse would accept) among the arguments."""
    return any(a.startswith("--j") and "--json".startswith(a) for a in argv)


def _ledger(args: argparse.Namespace) -> str:
    from tmath.errors import InputError
    from tmath.ledger import _FLAGS

    _check_flags(args)
    cfg = _load_cfg(args)
    gpu: Any = args.gpu
    if args.peak_tflops is not None or args.hbm_tbs is not None:  # any chip: the given figures
        from dataclasses import replace

        from tmath.hardware import hardware

        hw = hardware(gpu)
        gpu = replace(hw, name=f"{hw.name}（自定）",
                      dense_flops=hw.dense_flops if args.peak_tflops is None
                      else args.peak_tflops * 1e12,
                      hbm_bandwidth=hw.hbm_bandwidth if args.hbm_tbs is None
                      else args.hbm_tbs * 1e12)
    try:
        led = build_ledger(
            cfg,
            seq_len=args.seq_len,
            batch=args.batch,
            dtype=args.dtype,
            tp=args.tp,
            gpu=gpu,
            recipe=args.recipe,
            hbm_bytes=None if args.hbm_gb is None else args.hbm_gb * 1e9,
            workspace_bytes=None if args.workspace_gb is None else args.workspace_gb * 1e9,
            attention=args.attention,
        )
    except InputError as e:
        raise _UsageError(str(e), _FLAGS.get(e.field, e.field)) from None
    return json.dumps(led, indent=2) if args.json else render_text(led)


def _serve(args: argparse.Namespace) -> str:
    """``tmath serve`` (issue 37): the config as ``ledger`` loads it, then tmath.serve_cli."""
    from tmath.errors import InputError
    from tmath.serve_cli import run_serve

    cfg = _load_cfg(args)
    try:
        return run_serve(args, cfg)
    except InputError as e:
        raise _UsageError(str(e), e.field) from None


def _hardware_table() -> str:
    from tmath.hardware import HARDWARE

    lines, width = [], max(len(name) for name in HARDWARE)
    for h in HARDWARE.values():
        tdp = f"{h.tdp_watts:g} W" if h.tdp_watts else "未公布"
        smi = (f"  （nvidia-smi：{h.runtime_total_bytes / 2**20:,.0f} MiB）"
               if h.runtime_total_bytes else "")
        lines.append(
            f"{h.name:<{width}} {h.dense_flops / 1e12:7.1f} TFLOP/s {h.precision}  "
            f"{h.hbm_bytes / 2**30:5.0f} GiB  {h.hbm_bandwidth / 1e12:5.3f} TB/s  {tdp:>6}  "
            f"[{h.source}]" + smi
        )
    lines.append("容量：数据手册的 GB 按 GiB（2³⁰ 字节）读，可行性判断以它为准（`ledger --hbm-gb` 可改，"
                 "单位 GB = 10⁹ 字节）；nvidia-smi 显示的总量略小")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    try:
        try:
            args = _parser().parse_args(argv)
            if args.cmd == "plan":
                from tmath.plan import run_plan

                return run_plan(args)  # prints its own result or error (text or --json)
            if hasattr(args, "func"):  # sub-commands that live in their own module (tmath grade)
                return args.func(args)
            if args.cmd == "presets":
                import tmath

                out = "\n".join(tmath.presets())
            elif args.cmd == "hardware":
                out = _hardware_table()
            elif args.cmd == "serve":
                out = _serve(args)
            else:
                out = _ledger(args)
        except (ValueError, TypeError) as e:  # a library check without a field of its own
            raise _UsageError(" ".join(str(e).split()), getattr(e, "field", "") or "argv") from None
    except _UsageError as e:
        msg = " ".join(str(e).split())
        if as_json:
            _emit(json.dumps({"error": msg, "field": e.field}, ensure_ascii=False))
        else:
            print(f"tmath: 错误：{msg}", file=sys.stderr)
        return 2
    _emit(out)
    return 0


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

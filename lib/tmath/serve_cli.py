"""``tmath serve``: one serving deployment on the command line (and in the page, through
``tmathRun``).  :func:`add_serve_parser` registers the subcommand on :mod:`tmath.cli`'s
parser; :func:`run_serve` computes (:func:`tmath.serve.serve`) and returns the text or the
JSON.  Bad input raises :class:`tmath.errors.InputError` whose ``field`` is the flag
(``--tp``); :mod:`tmath.cli` prints it as one Chinese line (or a JSON error) and exits 2.

Imports neither SymPy nor NumPy: the page runs it in Pyodide.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

__all__ = ["add_serve_parser", "run_serve", "render_text"]

_EPILOG = (
    "约定：TP 组内每卡一份账；读 HBM 按峰值带宽、计算按稠密峰值算力，取大者，再加 TP 的 all-reduce；"
    "TTFT 是整批提示一起预填充的一步（不含排队）；TPOT 是解码步在 O−1 步上的平均；"
    "KV 分页按块大小取整；成本按卡时价格、卡一直满载计。"
)


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``serve`` on the command line's subparsers (:mod:`tmath.cli` calls this)."""
    from tmath.serve import KV_DTYPES, LIMITS, WEIGHT_DTYPES

    p = subparsers.add_parser(
        "serve", help="一个推理部署的账：TTFT、TPOT、吞吐、KV 容量、投机解码、成本",
        description="一个模型在 TP 组上服务一批请求：首 token 时间、每个输出 token 的时间、吞吐、"
                    "分页 KV cache 能容纳的序列数、投机解码的加速、每百万 token 的成本与可行性。",
        epilog=_EPILOG)
    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help="Hugging Face 的 config.json，或含 config.json 的模型文件夹")
    p.add_argument("--preset", help="预设模型名（见 `python -m tmath presets`）")
    p.add_argument("--gpu", default="H100", help="硬件名（见 `python -m tmath hardware`），默认 H100")
    p.add_argument("--tp", type=int, default=1,
                   help=f"张量并行卡数（1 到 {int(LIMITS['tp'][1]):,}），默认 1")
    p.add_argument("--prompt-len", type=int, default=1024, help="每条请求的提示 token 数，默认 1024")
    p.add_argument("--output-len", type=int, default=256, help="每条请求的输出 token 数 O，默认 256")
    p.add_argument("--batch", type=int, default=1, help="一起服务的请求数 B，默认 1")
    p.add_argument("--weight-dtype", default="bf16", choices=WEIGHT_DTYPES,
                   help="权重格式，默认 bf16（int8/int4 只量化权重，按 bf16 计算）")
    p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES, help="KV cache 格式，默认 bf16")
    p.add_argument("--block-size", type=int, default=16, help="分页 KV 的块大小（token），默认 16")
    p.add_argument("--draft", default=None, metavar="NAME",
                   help="投机解码的草稿模型（预设名，与目标模型同词表）")
    p.add_argument("--draft-len", type=int, default=None,
                   help=f"每次起草的 token 数 k（1 到 {int(LIMITS['draft_len'][1])}）")
    p.add_argument("--acceptance", type=float, default=None,
                   help="每个草稿 token 被接受的概率 α（0 到 1）")
    p.add_argument("--gpu-hour-price", type=float, default=None, metavar="USD",
                   help="每卡每小时的价格（美元），给出时算每百万 token 的成本")
    p.add_argument("--json", action="store_true", help="输出 JSON 而不是表格")
    return p


_FLAG = {"tp": "--tp", "prompt_len": "--prompt-len", "output_len": "--output-len",
         "batch": "--batch", "block_size": "--block-size", "draft_len": "--draft-len",
         "acceptance": "--acceptance", "gpu_hour_price": "--gpu-hour-price",
         "weight_dtype": "--weight-dtype", "kv_dtype": "--kv-dtype", "draft": "--draft",
         "gpu": "--gpu", "hardware": "--gpu", "cfg": "CONFIG", "config": "CONFIG"}


def _bad(msg: str, flag: str) -> Exception:
    from tmath.errors import InputError

    return InputError(msg, flag)


def _check_flags(args: argparse.Namespace) -> None:
    """Every numeric flag within :data:`tmath.serve.LIMITS`, before anything is computed."""
    from tmath.serve import LIMITS

    for key in ("tp", "prompt_len", "output_len", "batch", "block_size", "draft_len"):
        v = getattr(args, key)
        lo, hi = LIMITS[key]
        if v is not None and not lo <= v <= hi:
            raise _bad(f"{_FLAG[key]} 必须在 {int(lo):,} 到 {int(hi):,} 之间，收到 {v:,}", _FLAG[key])
    if args.acceptance is not None and not (math.isfinite(args.acceptance)
                                            and 0 <= args.acceptance <= 1):
        raise _bad(f"--acceptance 必须在 0 到 1 之间（每个草稿 token 被接受的概率），收到 "
                   f"{args.acceptance:g}", "--acceptance")
    price = args.gpu_hour_price
    if price is not None and not (math.isfinite(price) and 0 < price <= LIMITS["gpu_hour_price"][1]):
        raise _bad(f"--gpu-hour-price 必须是不超过 {LIMITS['gpu_hour_price'][1]:,.0f} 的正数（美元每卡时），"
                   f"收到 {price:g}", "--gpu-hour-price")
    spec = {"--draft": args.draft, "--draft-len": args.draft_len, "--acceptance": args.acceptance}
    given = [k for k, v in spec.items() if v is not None]
    if given and len(given) < 3:
        missing = [k for k, v in spec.items() if v is None]
        raise _bad(f"投机解码要同时给出 --draft、--draft-len 与 --acceptance：缺少 {'、'.join(missing)}",
                   missing[0])
    from tmath.errors import InputError
    from tmath.hardware import hardware

    try:
        hardware(args.gpu)
    except (InputError, ValueError, TypeError) as e:
        raise _bad(f"--gpu：{e}", "--gpu") from None


def run_serve(args: argparse.Namespace, cfg: Any) -> str:
    """Compute ``tmath serve`` for the parsed ``args`` and the loaded ``cfg``; the text or JSON."""
    import tmath
    from tmath.errors import InputError, has_chinese, show
    from tmath.hardware import hardware
    from tmath.serve import serve

    _check_flags(args)
    hw = hardware(args.gpu)
    draft = None
    if args.draft is not None:
        if args.draft not in tmath.presets():
            raise _bad(f"--draft {show(args.draft)} 未知：请用预设名 {'、'.join(tmath.presets())} 之一",
                       "--draft")
        draft = tmath.preset(args.draft)
    try:
        res = serve(cfg, hw, tp=args.tp, prompt_len=args.prompt_len, output_len=args.output_len,
                    batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                    block_size=args.block_size, draft=draft, draft_len=args.draft_len,
                    acceptance=args.acceptance, gpu_hour_price=args.gpu_hour_price)
    except InputError as e:
        flag = _FLAG.get(e.field, e.field)
        msg = str(e)
        if e.field == "output_len":
            flag = "--output-len"
            msg = msg.replace("prompt_len + output_len", "--prompt-len + --output-len")
        named = flag in msg or flag == "CONFIG"
        raise _bad(msg if named and has_chinese(msg) else f"{flag}：{msg}", flag) from None
    if args.json:
        return json.dumps(res, indent=2, ensure_ascii=False)
    return render_text(res)


def _ms(s: float) -> str:
    return f"{1e3 * s:,.3f} ms"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def _usd(x: float) -> str:
    return f"{x:,.4f} 美元" if x < 1 else f"{x:,.2f} 美元"


def render_text(r: dict[str, Any]) -> str:
    """The result of :func:`tmath.serve.serve` as the aligned Chinese table ``tmath serve`` prints.

    The verdict comes first; numbers for a deployment that does not fit are said to be only
    for comparison.  The last decode step's rows are ``tmath ledger``'s own
    (:func:`tmath.ledger._decode_step_rows`) when weights and KV share one dtype.
    """
    from tmath.ledger import _decode_step_rows, _fmt_bytes, _table

    s, f = r["settings"], r["feasibility"]
    draft_w = (f" + 草稿权重 {_gb(f['draft_weight_bytes_per_gpu'])}"
               if f.get("draft_weight_bytes_per_gpu") else "")
    parts = (f"权重 {_gb(f['weight_bytes_per_gpu'])}{draft_w} + KV cache {_gb(f['kv_bytes_per_gpu'])}"
             f" + 工作区 {_gb(f['workspace_bytes_per_gpu'])}")
    if f["feasible"]:
        spare = f["hbm_bytes_per_gpu"] - f["needed_bytes_per_gpu"]
        head = [f"部署：可行：每卡需要 {_gb(f['needed_bytes_per_gpu'])}（{parts}），{f['gpu']} 每卡 "
                f"{_gb(f['hbm_bytes_per_gpu'])}，余 {_gb(spare)}"]
    else:
        why = ("权重加 5 GB 工作区已放不下" if not f["weights_fit"]
               else f"这一批 {s['batch']:,} 条序列的 KV cache 放不下")
        head = [f"部署：不可行（{why}）：每卡需要 {_gb(f['needed_bytes_per_gpu'])}（{parts}），超过 "
                f"{f['gpu']} 的 {_gb(f['hbm_bytes_per_gpu'])}",
                "下面的数字假设这一部署存在，只作对照。"]
    pre, last = r["prefill"], r["decode_last"]
    rows: list[tuple[str, str]] = [
        (f"模型 {r['model']}，{s['tp']}×{r['gpu']}（TP={s['tp']}）", ""),
        ("请求", f"提示 {s['prompt_len']:,} / 输出 {s['output_len']:,} token，批 {s['batch']:,}"),
        ("权重 / KV cache / 计算", f"{s['weight_dtype']} / {s['kv_dtype']} / {s['compute_dtype']}"),
        ("首 token 时间（TTFT：整批提示一起预填充）", ""),
        ("读 HBM（权重 + 写 KV）", _ms(pre["memory_seconds"])),
        ("计算", _ms(pre["compute_seconds"])),
        ("all-reduce", _ms(pre["comm_seconds"]) if s["tp"] > 1 else "无（TP=1）"),
        ("TTFT", f"{_ms(r['ttft_s'])}（{pre['bound']}受限）"),
        ("每个输出 token 的时间（TPOT）", ""),
        ("TPOT（O−1 个解码步的平均）", _ms(r.get("tpot_plain_s", r["tpot_s"]))),
    ]
    ds = r.get("decode_last_ledger")
    rows.append((f"最后一个解码步（缓存 {last['context']:,} 个 token）", ""))
    if ds is not None:
        led_rows = _decode_step_rows(ds, {"tp": s["tp"], "gpu": r["gpu"]})[1:]
        rows += [(f"  {k}", v) for k, v in led_rows]
    else:
        comm = _ms(last["comm_seconds"]) if s["tp"] > 1 else "无（TP=1）"
        rows += [("  读 HBM", _ms(last["memory_seconds"])), ("  计算", _ms(last["compute_seconds"])),
                 ("  all-reduce", comm), ("  一步时间", _ms(last["seconds"]))]
    rows += [
        ("  每卡读取：权重 / KV", f"{_fmt_bytes(last['weight_bytes'])} / {_fmt_bytes(last['kv_bytes'])}"),
        ("  受限于", last["bound"]),
    ]
    if r.get("moe_experts_read_per_layer") is not None:
        rows.append(("  每个 MoE 层读到的路由专家（均匀路由的期望）",
                     f"{r['moe_experts_read_per_layer']:,.2f}"))
    sp = r.get("speculative")
    if sp is not None:
        rows += [
            (f"投机解码（草稿 {sp['draft']}，k={sp['k']}，α={sp['alpha']:g}）", ""),
            ("每次目标步的期望 token 数 (1−α^(k+1))/(1−α)", f"{sp['tokens_per_target_step']:,.3f}"),
            ("草稿一步 / 目标一步（成本比 c）",
             f"{_ms(sp['draft_step_s'])} / {_ms(sp['plain_step_s'])}（c={sp['draft_cost_ratio']:.3f}）"),
            (f"校验一步（{sp['k'] + 1} 个位置）", f"{_ms(sp['verify_step_s'])}（{sp['verify_bound']}受限）"),
            (f"加速比（屋顶线，批 {s['batch']:,}）", f"{sp['speedup']:,.3f}×"),
            ("加速比（Leviathan 公式：校验一步 = 解码一步）", f"{sp['leviathan_speedup']:,.3f}×"),
            ("TPOT（投机解码）", _ms(r["tpot_s"])),
        ]
    rows += [
        ("吞吐", ""),
        ("输出 token/s（整批）", f"{r['output_tokens_per_s']:,.1f}"),
        ("每卡输出 token/s", f"{r['output_tokens_per_s_per_gpu']:,.1f}"),
        ("预填充的输入 token/s", f"{r['input_tokens_per_s']:,.1f}"),
        ("一条请求的总时间 TTFT + (O−1)·TPOT", f"{r['request_latency_s']:,.3f} s"),
        ("KV cache 与并发", ""),
        ("每 token 每卡" + ("（目标 + 草稿）" if r.get("draft_kv_bytes_per_token_per_gpu") else ""),
         _fmt_bytes(r["kv_bytes_per_token_per_gpu"])
         + (f"（草稿 {_fmt_bytes(r['draft_kv_bytes_per_token_per_gpu'])}）"
            if r.get("draft_kv_bytes_per_token_per_gpu") else "")),
        (f"每条序列的块数（块大小 {s['block_size']}）", f"{r['kv_blocks_per_sequence']:,}"),
        (f"分页：每卡 {_gb(max(r['kv_budget_bytes_per_gpu'], 0))} 容纳的序列（每条 "
         f"{s['prompt_len'] + s['output_len']:,} token）", f"{r['max_concurrent_sequences']:,}"),
        (f"连续预留：每条按模型上下文 {r['contiguous_reserve_len']:,} token 预留",
         f"{r['max_concurrent_sequences_contiguous']:,}"),
    ]
    if "cost_per_million_output_tokens" in r:
        rows += [
            (f"成本（每卡每小时 {r['gpu_hour_price']:g} 美元，{s['tp']} 张卡满载）", ""),
            ("每百万输出 token", _usd(r["cost_per_million_output_tokens"])),
            ("每百万输入 token", _usd(r["cost_per_million_input_tokens"])),
        ]
    notes = [
        "约定：TP 组内每卡一份账；读 HBM 按峰值带宽、计算按稠密峰值算力，取大者，再加每层 2 次 all-reduce"
        "（不与计算重叠）：完美内核下的模型估计，不是实测。",
        ("TTFT 是整批提示一起预填充的一步，不含排队；TPOT 是 O−1 个解码步的平均"
         "（O 为输出长度；上下文从提示长度起，到提示长度 + O − 2）。"),
        "KV 容量：每卡显存减权重（全部专家）与 5 GB 工作区；分页按块取整，连续预留按模型的上下文长度。",
    ]
    if r.get("speculative") is not None:
        notes.append("投机解码：草稿模型与目标模型在同一组卡上，"
                     "它的权重与每条序列的 KV cache 也计入显存。")
    if ds is not None:
        notes.append(f"最后一个解码步与 tmath ledger --seq-len {r['ledger_seq_len']} --batch {s['batch']} "
                     f"--tp {s['tp']} --dtype {s['weight_dtype']} --gpu {r['gpu']} 的“解码一步的估计”"
                     "相同（同一个函数 tmath.serving.decode_step）。")
    if s["weight_dtype"] in ("int8", "int4") or s["kv_dtype"] == "fp8":
        notes.append("量化只计字节与时间；精度的代价不在模型之内（见正文引用的评测）。")
    if "cost_per_million_output_tokens" in r:
        notes.append("成本：解码的卡时记在输出 token 上，预填充的卡时记在输入 token 上。")
    return "\n".join(head) + "\n\n" + _table(rows) + "\n\n" + "\n".join(notes)

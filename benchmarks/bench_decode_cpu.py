"""Benchmark: decode tokens/s of a GPT-2-shaped model on this machine's CPU, against batch size.

Usage:  .venv/bin/python benchmarks/bench_decode_cpu.py [--steps 8] [--prompt 128]
                [--batches 1,2,4,8,16,32,64] [--threads 1] [--out book/serving]

The model is Hugging Face transformers' ``GPT2LMHeadModel`` with the shape of
``tmath.preset("gpt2")`` (12 layers, D = 768, 124M parameters, tied LM head) and random
weights: a decode step reads every weight and does the same FLOPs whatever their values, so
its speed does not depend on them.  fp32 weights and KV cache, ``torch.inference_mode``.

For each batch size B: B random prompts of ``--prompt`` tokens are prefilled (not timed),
then ``--steps`` decode steps are timed one by one (one new token per sequence per step,
the KV cache growing from ``prompt`` to ``prompt + steps``).  The page reports the median
step and the fastest.

Beside it, the roofline of this machine: its float32 matmul FLOP/s and its memory-copy
bandwidth, measured with :func:`tmath.roofline.probe_cpu` on the same number of threads,
put into a :class:`tmath.hardware.Hardware` and handed to :func:`tmath.serving.decode_step`
(the same function that prices a decode step on an H100): the step time is the slower of
reading weights + KV cache at the measured bandwidth and doing the FLOPs at the measured
matmul rate.

Writes ``decode_cpu.json`` (results, the machine, the load average) and ``decode_cpu.png``
(Chinese labels, 150 dpi) into ``--out``.  Times depend on the machine and on what else runs
on it; they are printed and saved, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed decode steps per batch")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads")
    parser.add_argument("--out", default="book/serving")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw decode_cpu.png from the saved decode_cpu.json (no measuring)")
    args = parser.parse_args()
    if args.plot_only:
        out_dir = Path(args.out)
        plot(json.loads((out_dir / "decode_cpu.json").read_text(encoding="utf-8")),
             out_dir / "decode_cpu.png")
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))

    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import tmath
    from tmath.hardware import Hardware
    from tmath.roofline import probe_cpu
    from tmath.serving import decode_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    load_before = os.getloadavg()
    cfg = tmath.preset("gpt2")
    hf = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.max_position,
                    n_embd=cfg.hidden_size, n_layer=cfg.num_layers, n_head=cfg.num_heads)
    model = GPT2LMHeadModel(hf).eval()
    n_params = sum(p.numel() for p in model.parameters())

    # the machine's own roofline, on the same threads (best of 3 each)
    probe = probe_cpu(matmul_n=1024, copy_bytes=256 * 2**20, repeats=3)
    cpu = Hardware("本机 CPU", probe.peak_flops, None, 64 * 2**30, probe.bandwidth, None, None,
                   2026, "fp32", "measured")

    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    gen = torch.Generator().manual_seed(0)
    for b in batches:
        ids = torch.randint(0, cfg.vocab_size, (b, args.prompt), generator=gen)
        with torch.inference_mode():
            out = model(ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                times.append(time.perf_counter() - t0)
        ctx = args.prompt + args.steps // 2  # the middle of the timed steps
        model_step = decode_step(cfg, cpu, tp=1, batch=b, context_len=ctx,
                                 weight_dtype="fp32", kv_dtype="fp32")
        med, best = statistics.median(times), min(times)
        rows.append({
            "batch": b,
            "median_step_s": med,
            "best_step_s": best,
            "tokens_per_s_median": b / med,
            "tokens_per_s_best": b / best,
            "roofline_step_s": model_step.seconds,
            "roofline_tokens_per_s": model_step.tokens_per_s,
            "roofline_memory_s": model_step.memory_seconds,
            "roofline_compute_s": model_step.compute_seconds,
            "bytes_read": model_step.bytes_per_gpu,
            "flops": model_step.flops_per_gpu,
        })
        print(f"B={b:>3}  median {med * 1e3:8.1f} ms  best {best * 1e3:8.1f} ms  "
              f"{b / med:8.1f} tok/s  roofline {model_step.seconds * 1e3:8.1f} ms "
              f"({model_step.tokens_per_s:8.1f} tok/s)", flush=True)

    result = {
        "model": "GPT-2 (124M) 形状，随机权重，fp32",
        "preset": "gpt2",
        "parameters": n_params,
        "prompt_len": args.prompt,
        "timed_steps": args.steps,
        "threads": args.threads,
        "machine": {
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "measured_matmul_flops": probe.peak_flops,
        "measured_copy_bandwidth": probe.bandwidth,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "rows": rows,
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "decode_cpu.json").write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    plot(result, out_dir / "decode_cpu.png")
    print(f"wrote {out_dir / 'decode_cpu.json'} and {out_dir / 'decode_cpu.png'}")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import tmath.plots  # noqa: F401  (Chinese font, 150 dpi)

    rows = result["rows"]
    b = np.array([r["batch"] for r in rows])
    fig, ax = plt.subplots(figsize=(6.8, 4.0))
    ax.plot(b, [r["roofline_tokens_per_s"] for r in rows], "-", color="k",
            label="屋顶线（本机实测带宽与矩阵乘速率）")
    ax.plot(b, [r["batch"] / r["roofline_memory_s"] for r in rows], ":", color="C0",
            label="只受带宽限制（读权重与 KV cache）")
    ax.plot(b, [r["batch"] / r["roofline_compute_s"] for r in rows], ":", color="C3",
            label="只受算力限制")
    ax.plot(b, [r["tokens_per_s_median"] for r in rows], "o-", color="C1", label="实测（中位数）")
    ax.plot(b, [r["tokens_per_s_best"] for r in rows], "^", color="C1", mfc="none",
            label="实测（最快一步）")
    ax.set_xscale("log", base=2)
    ax.set_xticks(b, [str(v) for v in b])
    ax.set_yscale("log")
    ax.set_xlabel("批大小（并发序列数）")
    ax.set_ylabel("解码吞吐（token/s，整批合计）")
    m = result["machine"]
    ax.set_title(f"GPT-2 形状（124M，fp32），{result['threads']} 个线程；{m['cpu']}", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")  # upper left hid the compute roof
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    main()

"""How long ``tmath plan`` takes per pipeline schedule (goal: ≤ 0.3 s a plan, after import).

Run: ``.venv/bin/python benchmarks/bench_plan.py``.  Each schedule is planned on DeepSeek-V3's
report layout (2,048 H800, PP 16, EP 64) Llama 3 70B interleaved, and a 1,000-stage pipeline;
the bubble and in-flight counts are closed forms, linear in pp (the simulator is for tests).
"""

from __future__ import annotations

import time

import tmath
from tmath.plan import build_plan, render_text

DSV3 = dict(gpu="H800", dp=128, pp=16, ep=64, zero=1, seq_len=4096, global_batch=15360,
            stage_layers="3,4*14,2")
L70 = dict(dp=32, tp=8, pp=4, seq_len=8192, global_batch=1024)
CASES = [  # label, preset, settings, schedule, virtual stages
    *[("deepseek-v3", "deepseek-v3", DSV3, s, 1) for s in ("gpipe", "1f1b", "zb-h1", "dualpipe")],
    ("llama3-70b", "llama3-70b", L70, "interleaved", 5),
    ("pp=1000", "llama3-8b", dict(pp=1000, dp=1, global_batch=2000), "zb-h1", 1),
    ("pp=1000", "llama3-8b", dict(pp=1000, dp=1, global_batch=2000), "dualpipe", 1),
]


def main() -> None:
    build_plan(tmath.preset("llama3-8b"))  # warm the imports
    worst = 0.0
    for label, preset, kw, sched, v in CASES:
        cfg = tmath.preset(preset)
        if preset == "llama3-8b":  # 1,000 stages need 1,000 layers
            cfg = tmath.ModelConfig.from_hf({**_hf("llama3-8b"), "num_hidden_layers": 1000})
        t0 = time.perf_counter()
        render_text(build_plan(cfg, schedule=sched, virtual_stages=v, **kw))
        dt = time.perf_counter() - t0
        worst = max(worst, dt)
        print(f"{label:12s} {sched:12s} {dt * 1e3:8.1f} ms")
    print(f"slowest {worst * 1e3:.1f} ms (goal ≤ 300 ms): {'ok' if worst <= 0.3 else 'SLOW'}")


def _hf(name: str) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent.parent / "tests" / "hf_configs" / f"{name}.json")
                      .read_text())


if __name__ == "__main__":
    main()

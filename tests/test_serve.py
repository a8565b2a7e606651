"""tmath.serve and ``tmath serve`` (issue 37): the serving library of Part VI.

- ``serve`` at batch 1 prints the decode step ``ledger`` prints (one code path);
- the TPOT's exact sum equals the step-by-step sum;
- the speculative-decoding formula against a Monte Carlo of accept/reject (and of
  speculative sampling itself, whose output must keep the target's distribution);
- paged-KV block counts against an enumeration of a block allocator;
- the event simulation on a trace small enough to work by hand (the working in comments);
- the command line's errors.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_plan_robust import run_main  # noqa: E402  (tests/ is on sys.path: conftest)

import tmath
from tmath import serve
from tmath.ledger import build_ledger

# --- one code path with the ledger ---------------------------------------------------------

LEDGER_CASES = [  # preset, gpu, tp, prompt, output, dtype
    ("llama3-70b", "H100", 8, 1000, 500, "bf16"),
    ("llama3-8b", "H100", 1, 2047, 2, "bf16"),
    ("llama3-70b", "H200", 4, 100, 28, "fp8"),
    ("mixtral-8x7b", "A100", 8, 4000, 97, "bf16"),
    ("deepseek-v3", "H800", 8, 4096, 512, "fp8"),
    ("gpt2", "H100", 4, 10, 1, "bf16"),
    ("mistral-7b", "B200", 2, 6000, 300, "fp8"),
    ("gpt-oss-20b", "TPUv5e", 8, 500, 200, "fp16"),
]


@pytest.mark.parametrize("name,gpu,tp,P,n_out,dtype", LEDGER_CASES)
def test_serve_at_batch_1_is_the_ledgers_decode_step(name, gpu, tp, P, n_out, dtype):
    cfg = tmath.preset(name)
    r = serve.serve(cfg, gpu, tp=tp, prompt_len=P, output_len=n_out, batch=1, weight_dtype=dtype,
                    kv_dtype=dtype)
    seq = r["ledger_seq_len"]
    assert seq == P + max(n_out - 1, 1)  # the ledger's T: T − 1 cached tokens
    led = build_ledger(cfg, seq_len=seq, batch=1, dtype=dtype, tp=tp, gpu=gpu)["decode_step"]
    assert r["decode_last_ledger"] == led  # every field, exactly
    last = r["decode_last"]
    for mine, theirs in (("memory_seconds", "memory_seconds"), ("compute_seconds", "compute_seconds"),
                         ("context", "context_len")):
        assert last[mine] == led[theirs]
    assert last["seconds"] == led["step_seconds"]
    assert last["comm_seconds"] == (led["comm_seconds"] or 0.0)


def _ledger_rows(text: str) -> list[list[str]]:
    block = text.split("解码一步的估计（含 TP 的 all-reduce）\n", 1)[1].split("\n\n", 1)[0]
    return [line.split() for line in block.splitlines()]


@pytest.mark.parametrize("name,gpu,tp,P,n_out", [("llama3-70b", "H100", 8, 1000, 500),
                                             ("deepseek-v2-lite", "H100", 1, 300, 40),
                                             ("qwen3-30b-a3b", "H200", 4, 64, 64)])
def test_the_printed_decode_step_is_the_ledgers(name, gpu, tp, P, n_out):
    code, out, err = run_main(["serve", "--preset", name, "--gpu", gpu, "--tp", str(tp),
                               "--prompt-len", str(P), "--output-len", str(n_out)])
    assert code == 0, err
    seq = P + n_out - 1
    code, led, err = run_main(["ledger", "--preset", name, "--gpu", gpu, "--tp", str(tp),
                               "--seq-len", str(seq)])
    assert code == 0, err
    rows = _ledger_rows(led)
    assert len(rows) >= 4
    mine = [line.split() for line in out.splitlines()]
    for row in rows:  # the same label and the same number, whatever the column widths
        assert row in mine, (row, out)
    assert f"tmath ledger --seq-len {seq} --batch 1 --tp {tp} --dtype bf16 --gpu {gpu} 的" in out


def test_the_decode_step_is_serving_decode_step():
    from tmath.serving import decode_step as base

    cfg = tmath.preset("llama3-70b")
    s = serve.decode_step(cfg, "H100", tp=8, batch=32, context=4000)
    b = base(cfg, "H100", tp=8, batch=32, context_len=4000)
    assert (s.seconds, s.flops, s.bytes_read) == (b.seconds, b.flops_per_gpu, b.bytes_per_gpu)
    assert s.bound == "显存带宽"
    big = serve.decode_step(cfg, "H100", tp=8, batch=4096, context=10)
    assert big.bound == "算力" and big.compute_seconds > big.memory_seconds


@pytest.mark.parametrize("name,tp,P,n_out,B", [("mistral-7b", 1, 4000, 200, 8),  # crosses its window
                                           ("llama3-8b", 8, 10, 50, 300),  # crosses the ridge
                                           ("deepseek-v3", 8, 100, 30, 64),
                                           ("gpt2", 1, 5, 1, 1)])
def test_the_tpot_sum_is_the_sum_of_the_steps(name, tp, P, n_out, B):
    cfg = tmath.preset(name)
    got = serve.tpot(cfg, "H100", tp=tp, batch=B, prompt_len=P, output_len=n_out)
    ctxs = range(P, P + n_out - 1) if n_out > 1 else [P]
    want = sum(serve.decode_step(cfg, "H100", tp=tp, batch=B, context=c).seconds
               for c in ctxs) / len(ctxs)
    assert got == pytest.approx(want, rel=1e-12)


def test_mla_moe_and_gqa_read_what_they_hold():
    v3 = tmath.preset("deepseek-v3")
    one = serve.decode_step(v3, "H800", tp=8, batch=1, context=1000)
    many = serve.decode_step(v3, "H800", tp=8, batch=256, context=1000)
    # MLA: (512 + 64) latent values per layer and token, 61 layers, bf16; every GPU all of it
    assert one.kv_bytes == 1000 * 61 * 576 * 2
    # MoE: one token reads 8 routed experts per layer; 256 tokens read most of the 256
    assert one.experts_read == 8
    assert many.experts_read == pytest.approx(256 * (1 - (1 - 8 / 256) ** 256))
    assert many.weight_bytes > 5 * one.weight_bytes
    # GQA over TP 8: Llama 3 70B's 8 KV heads, one per GPU: 2·80·128·2 bytes a token a GPU
    st = serve.decode_step(tmath.preset("llama3-70b"), "H100", tp=8, batch=3, context=100)
    assert st.kv_bytes == 3 * 100 * 2 * 80 * 128 * 2


def test_quantization_changes_bytes_time_and_capacity():
    cfg = tmath.preset("llama3-70b")
    r = {w: serve.serve(cfg, "H100", tp=4, prompt_len=2000, output_len=200, batch=8,
                        weight_dtype=w) for w in ("bf16", "fp8", "int4")}
    assert r["fp8"]["decode_last"]["weight_bytes"] == r["bf16"]["decode_last"]["weight_bytes"] / 2
    assert r["int4"]["decode_last"]["weight_bytes"] == r["bf16"]["decode_last"]["weight_bytes"] / 4
    assert r["int4"]["tpot_s"] < r["fp8"]["tpot_s"] < r["bf16"]["tpot_s"]
    assert (r["int4"]["max_concurrent_sequences"] > r["fp8"]["max_concurrent_sequences"]
            > r["bf16"]["max_concurrent_sequences"])
    kv8 = serve.serve(cfg, "H100", tp=4, prompt_len=2000, output_len=200, batch=8, kv_dtype="fp8")
    assert kv8["kv_bytes_per_token_per_gpu"] * 2 == r["bf16"]["kv_bytes_per_token_per_gpu"]
    assert kv8["decode_last"]["kv_bytes"] * 2 == r["bf16"]["decode_last"]["kv_bytes"]


def test_cost_per_million_tokens_by_hand():
    # 10 GPUs at $3.60 an hour = $36 an hour = $0.01 a second; 4,000 tokens a second:
    # one million tokens take 250 s, which cost $2.50.
    assert serve.cost_per_million(3.6, 10, 4000) == pytest.approx(2.5)
    cfg = tmath.preset("llama3-8b")
    r = serve.serve(cfg, "H100", tp=1, prompt_len=512, output_len=128, batch=16,
                    gpu_hour_price=3.0)
    assert r["cost_per_million_output_tokens"] == pytest.approx(
        3.0 / 3600 / r["output_tokens_per_s"] * 1e6)
    assert r["cost_per_million_input_tokens"] == pytest.approx(
        3.0 / 3600 / (16 * 512 / r["ttft_s"]) * 1e6)


def test_an_infeasible_deployment_is_flagged_not_hidden():
    v3 = tmath.preset("deepseek-v3")
    r = serve.serve(v3, "H800", tp=8, prompt_len=1000, output_len=100, batch=1,
                    weight_dtype="fp8")
    # 671 × 10⁹ parameters in fp8 over 8 GPUs: 84 GB each, more than 85.9 GB less 5 GB
    assert not r["feasibility"]["feasible"] and not r["feasibility"]["weights_fit"]
    assert r["max_concurrent_sequences"] == 0
    code, out, err = run_main(["serve", "--preset", "deepseek-v3", "--gpu", "H800", "--tp", "8",
                               "--weight-dtype", "fp8"])
    assert code == 0 and out.startswith("部署：不可行") and "只作对照" in out.splitlines()[1]


# --- speculative decoding ------------------------------------------------------------------


@pytest.mark.parametrize("alpha,k", [(0.8, 4), (0.5, 1), (0.9, 7), (0.3, 3), (1.0, 5), (0.0, 4)])
def test_tokens_per_target_step_against_a_monte_carlo(alpha, k):
    rng = random.Random(1234 + k)
    n = 40_000
    total = 0
    for _ in range(n):
        j = 0
        while j < k and rng.random() < alpha:  # drafts accepted in order until the first miss
            j += 1
        total += j + 1  # the target's own token after them (a correction, or a bonus)
    mc = total / n
    want = serve.speculative_tokens_per_step(alpha, k)
    var = sum(((j + 1) - want) ** 2 * (alpha ** j * (1 - alpha) if j < k else alpha ** k)
              for j in range(k + 1))
    assert abs(mc - want) <= 5 * math.sqrt(var / n) + 1e-12
    if alpha < 1:
        assert want == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha))


def test_speculative_sampling_keeps_the_target_distribution_and_its_alpha():
    """Leviathan's algorithm on a 4-token vocabulary: accept x ~ q with probability
    min(1, p(x)/q(x)), else resample from norm(max(0, p − q)).  α = Σ min(p, q); the tokens
    it emits are distributed as p; a step gives (1 − α^(k+1))/(1 − α) tokens on average."""
    p = [0.5, 0.2, 0.2, 0.1]
    q = [0.25, 0.25, 0.25, 0.25]
    alpha = sum(min(a, b) for a, b in zip(p, q, strict=True))  # 0.25 + 0.2 + 0.2 + 0.1 = 0.75
    resid = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    resid = [r / sum(resid) for r in resid]
    rng = random.Random(7)
    k, steps, counts, emitted = 3, 30_000, [0] * 4, 0

    def draw(dist):
        return rng.choices(range(4), weights=dist)[0]

    for _ in range(steps):
        for _i in range(k):
            x = draw(q)
            if rng.random() < min(1.0, p[x] / q[x]):
                counts[x] += 1
                emitted += 1
            else:
                counts[draw(resid)] += 1
                emitted += 1
                break
        else:
            counts[draw(p)] += 1  # all k accepted: the target's bonus token
            emitted += 1
    assert emitted / steps == pytest.approx(serve.speculative_tokens_per_step(alpha, k), abs=0.03)
    for c, want in zip(counts, p, strict=True):
        assert c / emitted == pytest.approx(want, abs=0.01)


def test_speculative_speedup_by_hand_and_where_it_stops_paying():
    # α = 0.8, k = 4: 1 + .8 + .64 + .512 + .4096 = 3.3616 tokens; c = 0.05: 3.3616 / 1.2
    assert serve.speculative_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    cfg, draft = tmath.preset("llama3-70b"), tmath.preset("llama3-8b")
    small = serve.speculative_at_batch(cfg, draft, "H100", tp=8, batch=1, context=1000, k=4,
                                       alpha=0.8)
    large = serve.speculative_at_batch(cfg, draft, "H100", tp=8, batch=1024, context=1000, k=4,
                                       alpha=0.8)
    assert small["speedup"] > 1.5 and small["verify_bound"] == "显存带宽"
    assert large["speedup"] < 1 and large["verify_bound"] == "算力"
    r = serve.serve(cfg, "H100", tp=8, prompt_len=1000, output_len=200, batch=4, draft=draft,
                    draft_len=4, acceptance=0.8)
    assert r["tokens_per_target_step"] == pytest.approx(3.3616)
    assert r["tpot_s"] == pytest.approx(r["tpot_plain_s"] / r["speculative"]["speedup"])


# --- paged KV ------------------------------------------------------------------------------


def enumerate_blocks(lengths, b, s):
    """Allocate KV blocks token by token, as a paged allocator with prefix caching does: a
    sequence starts a new block when its last one is full; a full block whose whole token
    history equals one already stored is shared (only full blocks are shared).  Sequence i
    is the shared prefix (tokens 0..s−1) then tokens of its own."""
    stored_full = set()
    partial = 0
    for i, L in enumerate(lengths):
        toks = [("p", t) for t in range(s)] + [(i, t) for t in range(L - s)]
        for start in range(0, L, b):
            blk = tuple(toks[: start + b])
            if start + b <= L:
                stored_full.add(blk)  # a set: the same history is stored once
            else:
                partial += 1
    return len(stored_full) + partial


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(1, 90), min_size=1, max_size=6), st.integers(1, 20),
       st.integers(0, 90))
def test_paged_block_counts_match_an_enumeration(lengths, b, s):
    s = min(s, min(lengths))
    got = serve.paged_kv(lengths, b, 10.0, prefix_shared=s)
    assert got.blocks == enumerate_blocks(lengths, b, s)
    assert got.bytes == got.blocks * b * 10.0
    assert 0 <= got.waste < (len(lengths) + 1) * b * 10.0
    if s == 0:
        assert got.blocks == sum(-(-L // b) for L in lengths)
        assert got.waste == (got.blocks * b - sum(lengths)) * 10.0


def test_paged_against_contiguous_capacity():
    cfg = tmath.preset("llama3-8b")
    paged = serve.kv_capacity(cfg, "H100", tp=1, max_len=1000, block_size=16)
    cont = serve.kv_capacity(cfg, "H100", tp=1, max_len=8192, mode="contiguous")
    # budget: 85.9e9 − 8.03e9·2 − 5e9; a token 128 KiB (32 layers · 8 heads · 128 · 2 · 2 B)
    budget = 80 * 2**30 - tmath.count_params(cfg).total * 2 - 5e9
    assert paged.sequences == int(budget // (63 * 16 * 131072))  # ⌈1000/16⌉ = 63 blocks
    assert cont.sequences == int(budget // (8192 * 131072))
    some = serve.kv_capacity(cfg, "H100", tp=1, max_len=8192, lengths=[8000] * 50 + [10] * 9)
    assert some.sequences == min(59, int(budget // (500 * 16 * 131072)))


def test_the_drafts_weights_and_kv_come_off_the_capacity():
    # Llama 3 70B + Llama 3 8B as its draft, TP=8 on H100, sequences of 1,024 + 256 tokens.
    # Published parameter counts (Hugging Face): 70,553,706,496 and 8,030,261,248, bf16.
    # KV per token and GPU: layers · 8 KV heads · 128 · (K and V) · 2 B / 8 GPUs.
    w70, w8 = 70_553_706_496 * 2 / 8, 8_030_261_248 * 2 / 8
    kv70, kv8 = 80 * 8 * 128 * 2 * 2 / 8, 32 * 8 * 128 * 2 * 2 / 8  # 40,960 and 16,384 B
    budget = 80 * 2**30 - w70 - w8 - 5e9
    want = int(budget // ((kv70 + kv8) * 1280))  # 1,280 = 80 blocks of 16: no rounding loss
    assert want == 834
    cfg, draft = tmath.preset("llama3-70b"), tmath.preset("llama3-8b")
    r = serve.serve(cfg, "H100", tp=8, prompt_len=1024, output_len=256, batch=64, draft=draft,
                    draft_len=4, acceptance=0.8)
    assert r["max_concurrent_sequences"] == want
    assert r["max_concurrent_sequences_contiguous"] == int(budget // ((kv70 + kv8) * 8192))
    f = r["feasibility"]
    assert f["draft_weight_bytes_per_gpu"] == pytest.approx(w8)
    assert f["needed_bytes_per_gpu"] == pytest.approx(w70 + w8 + 64 * 1280 * (kv70 + kv8) + 5e9)
    # 1,000 sequences fit without the draft (1,206) and not with it
    big = serve.serve(cfg, "H100", tp=8, prompt_len=1024, output_len=256, batch=1000)
    assert big["feasibility"]["feasible"] and big["max_concurrent_sequences"] == int(
        (80 * 2**30 - w70 - 5e9) // (kv70 * 1280)) == 1206
    big = serve.serve(cfg, "H100", tp=8, prompt_len=1024, output_len=256, batch=1000,
                      draft=draft, draft_len=4, acceptance=0.8)
    assert not big["feasibility"]["feasible"]
    code, out, _ = run_main(["serve", "--preset", "llama3-70b", "--tp", "8", "--batch", "64",
                             "--draft", "llama3-8b", "--draft-len", "4", "--acceptance", "0.8",
                             "--prompt-len", "1024", "--output-len", "256"])
    assert code == 0 and "草稿权重 2.0 GB" in out and "提示 1,024 / 输出 256" in out


# --- the event simulation ------------------------------------------------------------------

TRACE = [serve.Request(0, 0.0, 10, 3), serve.Request(1, 0.5, 20, 2)]


def step_time(p, d, kv):
    """1 s an iteration plus 0.1 s a prompt token (decode tokens and KV reads free)."""
    return 1 + p / 10


def test_static_batching_by_hand():
    r = serve.simulate(TRACE, "static", max_batch=2, step_time=step_time)
    # t=0: only R0 has arrived; batch [R0]. Prefill 10 tokens: 1 + 1 = 2 s -> t=2, first token.
    # Two decode steps of 1 s: t=3, t=4 -> R0 done at 4 (TTFT 2, TPOT (4−2)/2 = 1).
    # t=4: R1 (arrived 0.5) alone. Prefill 20: 1 + 2 = 3 s -> t=7 (TTFT 6.5); one decode -> 8.
    assert r.ttft == pytest.approx({0: 2.0, 1: 6.5})
    assert r.tpot == pytest.approx({0: 1.0, 1: 1.0})
    assert r.finish == pytest.approx({0: 4.0, 1: 8.0})
    assert (r.steps, r.makespan, r.output_tokens) == (5, pytest.approx(8.0), 5)


def test_continuous_batching_by_hand():
    r = serve.simulate(TRACE, "continuous", max_batch=2, step_time=step_time)
    # t=0: R0 joins; its prefill (10): t=2, first token.  t=2: R1 joins: R0 decodes one
    # token while R1's 20-token prompt is prefilled: 1 + 2 = 3 s -> t=5 (R1's first token,
    # TTFT 4.5; R0 has 2 tokens).  One more iteration, both decode: t=6; R0 has 3 (done),
    # R1 has 2 (done).  TPOT: R0 (6−2)/2 = 2; R1 (6−5)/1 = 1.
    assert r.ttft == pytest.approx({0: 2.0, 1: 4.5})
    assert r.tpot == pytest.approx({0: 2.0, 1: 1.0})
    assert (r.steps, r.makespan) == (3, pytest.approx(6.0))
    # the second iteration read R0's 10 prompt + 1 generated tokens
    assert [(p, d, kv) for _, p, d, kv in r.log] == [(10, 0, 0), (20, 1, 11), (0, 2, 33)]


def test_chunked_prefill_by_hand():
    r = serve.simulate(TRACE, "continuous", chunk=12, max_batch=2, step_time=step_time)
    # t=0: R0's 10 prompt tokens fit the 12-token budget: t=2, first token.
    # t=2: R0 decodes (1 of the 12), R1 gets 11 of its 20: 1 + 1.1 -> t=4.1.
    # t=4.1: R0 decodes, R1's last 9: 1 + 0.9 -> t=6.0; R0 done (3 tokens), R1's first token.
    # t=6: R1 decodes: t=7, done.  TTFT: 2 and 6 − 0.5 = 5.5; TPOT: (6−2)/2 = 2 and 1.
    assert r.ttft == pytest.approx({0: 2.0, 1: 5.5})
    assert r.tpot == pytest.approx({0: 2.0, 1: 1.0})
    assert (r.steps, r.makespan) == (4, pytest.approx(7.0))
    assert [p for _, p, _, _ in r.log] == [10, 11, 9, 0]


def test_a_seeded_trace_is_reproducible_and_continuous_batching_wins():
    a = serve.request_trace(200, seed=3, rate=20, prompt_median=300, output_median=100)
    assert a == serve.request_trace(200, seed=3, rate=20, prompt_median=300, output_median=100)
    assert a != serve.request_trace(200, seed=4, rate=20, prompt_median=300, output_median=100)
    assert all(r.prompt_len >= 1 and r.output_len >= 1 for r in a)
    lens = sorted(r.prompt_len for r in a)
    assert 150 < lens[100] < 600  # the median near the stated 300
    f = serve.roofline_step_time(tmath.preset("llama3-8b"), "H100")
    stat = serve.simulate(a, "static", max_batch=32, step_time=f)
    cont = serve.simulate(a, "continuous", max_batch=32, step_time=f)
    assert cont.output_tokens == stat.output_tokens == sum(r.output_len for r in a)
    assert len(cont.finish) == len(stat.finish) == 200
    assert cont.throughput > stat.throughput and cont.mean_ttft < stat.mean_ttft


def test_disaggregation_sizes_the_pools_and_meets_a_tighter_slo():
    cfg = tmath.preset("llama3-70b")
    d = serve.disaggregated(cfg, "H100", prompt_len=2000, output_len=200, prefill_tp=8,
                            decode_tp=8, decode_batch=64, tpot_slo=0.03)
    # decode instance: 64 requests every 199 TPOTs; prefill instance: 1 per TTFT
    assert d["decode_requests_per_s_per_instance"] == pytest.approx(64 / (199 * d["tpot_s"]))
    assert d["prefill_instances_per_decode_instance"] == pytest.approx(
        d["decode_requests_per_s_per_instance"] * d["ttft_s"])
    assert d["colocated_tpot_s"] > d["tpot_s"]
    assert d["decode_batch_at_slo"] > d["colocated_batch_at_slo"] > 0
    # goodput under the SLO: the decode pool runs the larger batch
    assert d["output_tokens_per_s_per_gpu_at_slo"] > d["colocated_output_tokens_per_s_per_gpu_at_slo"]
    # the neighbours of the SLO batches: b meets 30 ms, b + 1 does not
    kw = dict(tp=8, prompt_len=2000, output_len=200)
    b = d["decode_batch_at_slo"]
    assert serve.tpot(cfg, "H100", batch=b, **kw) <= 0.03 < serve.tpot(cfg, "H100", batch=b + 1, **kw)
    c = d["colocated_batch_at_slo"]

    def co(n):
        return serve.tpot(cfg, "H100", batch=n, **kw) + n * d["colocated_ttft_s"] / 199

    assert co(c) <= 0.03 < co(c + 1)
    # the prompt's KV: 2,000 tokens × 80 layers × 8 heads × 128 × 2 (K, V) × 2 bytes, over
    # 8 network ports of 48 GB/s
    assert d["kv_transfer_bytes"] == 655_360_000
    assert d["kv_transfer_seconds"] == pytest.approx(655_360_000 / (8 * 48e9))


# --- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize("argv,flag", [
    (["--tp", "3"], "--tp"), (["--tp", "0"], "--tp"), (["--batch", "0"], "--batch"),
    (["--prompt-len", "8000", "--output-len", "500"], "--output-len"),
    (["--weight-dtype", "fp4"], "--weight-dtype"), (["--kv-dtype", "int4"], "--kv-dtype"),
    (["--block-size", "5000"], "--block-size"), (["--gpu", "H900"], "--gpu"),
    (["--draft", "llama3-8b"], "--draft-len"),
    (["--draft", "gpt2", "--draft-len", "4", "--acceptance", "0.7"], "--draft"),
    (["--draft", "nope", "--draft-len", "4", "--acceptance", "0.7"], "--draft"),
    (["--draft", "llama3-8b", "--draft-len", "4", "--acceptance", "nan"], "--acceptance"),
    (["--gpu-hour-price", "-1"], "--gpu-hour-price"), (["--gpu-hour-price", "inf"], "--gpu-hour-price"),
    (["--gpu", "V100", "--tp", "8"], "--tp"), (["--prompt-len", "two"], "--prompt-len"),
    (["--tp", "16"], "--tp"),  # beyond one 8-GPU node: TP's all-reduces would cross IB
])
def test_bad_flags_are_named_in_chinese(argv, flag):
    code, out, err = run_main(["serve", "--preset", "llama3-70b", *argv])
    assert code == 2 and out == "" and err.startswith("tmath: 错误：")
    assert flag in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    code, out, err = run_main(["serve", "--preset", "llama3-70b", *argv, "--json"])
    obj = json.loads(out)
    assert code == 2 and obj["field"] == flag, obj


def test_json_has_the_agreed_keys():
    code, out, err = run_main(["serve", "--preset", "llama3-70b", "--gpu", "H100", "--tp", "8",
                               "--prompt-len", "1000", "--output-len", "200", "--batch", "8",
                               "--draft", "llama3-8b", "--draft-len", "4", "--acceptance", "0.7",
                               "--gpu-hour-price", "2.5", "--json"])
    assert code == 0, err
    r = json.loads(out)
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s", "max_concurrent_sequences",
                "tokens_per_target_step", "cost_per_million_output_tokens",
                "cost_per_million_input_tokens"):
        assert isinstance(r[key], (int, float)) and r[key] > 0, key


# --- DeepSeek-V3's published deployment and the EP model -----------------------------------


def test_deepseeks_published_units_add_up():
    d = serve.DEEPSEEK_V3_SERVING
    from tmath.sources import SOURCES

    for unit in d.values():
        assert unit["source"] in SOURCES and unit["quote"]
    v3 = tmath.preset("deepseek-v3")
    assert d["report_prefill"]["gpus"] == 4 * 8 == d["report_prefill"]["moe_ep"]
    assert d["report_decode"]["gpus"] == 40 * 8 == d["report_decode"]["moe_ep"]
    # prefill: 8 original experts + 1 redundant a GPU; 32 × 9 = 256 routed + 32 redundant
    assert 32 * d["report_prefill"]["routed_experts_per_gpu"] == v3.n_routed_experts + 32
    # decode: one expert a GPU; 256 routed, and 64 GPUs for redundant and shared experts
    assert d["report_decode"]["gpus"] - v3.n_routed_experts == 64
    # the online decode unit: 18 nodes, 144 GPUs × 2 routed = 256 + 32 redundant
    assert d["online_decode"]["gpus"] == 18 * 8 and 144 * 2 == v3.n_routed_experts + 32
    s = d["online_statistics"]
    assert s["mean_nodes"] * 8 * s["gpu_hour_price_usd"] * 24 == s["daily_cost_usd"]
    hit = 100 * s["cache_hit_input_tokens_per_day"] / s["input_tokens_per_day"]  # 56.25
    assert 56.25 <= hit < 56.35  # printed "56.3%": 56.25 rounded half up
    # revenue at R1's prices from the day's tokens (each count rounded to a billion: ±0.5B)
    price = s["r1_price_usd_per_million"]
    miss = s["input_tokens_per_day"] - s["cache_hit_input_tokens_per_day"]
    revenue = (s["cache_hit_input_tokens_per_day"] * price["input_cache_hit"] + miss
               * price["input_cache_miss"] + s["output_tokens_per_day"] * price["output"]) / 1e6
    assert revenue == pytest.approx(562_100)
    assert abs(revenue - s["theoretical_daily_revenue_usd"]) < 0.5e9 * (0.14 + 0.55 + 2.19) / 1e6
    margin = 100 * (s["theoretical_daily_revenue_usd"] - s["daily_cost_usd"]) / s["daily_cost_usd"]
    assert round(margin) == s["cost_profit_margin_percent"]  # 545.47


def test_the_ep_decode_step_by_hand():
    v3 = tmath.preset("deepseek-v3")
    r = serve.ep_decode_step(v3, "H800", ep=320, attention_tp=4, batch_per_gpu=32, context=0,
                             routed_experts_per_gpu=1, shared_experts_per_gpu=0)
    # 320 GPUs × 32 sequences = 10,240 tokens a step, 8 experts each over 256: 320 an expert
    assert (r["tokens_per_step"], r["tokens_per_expert"]) == (10_240, 320)
    # one expert: 3 matrices of 7168 × 2048 = 44,040,192 parameters; 58 MoE layers (61 − 3);
    # fp8: 1 byte each.  Non-expert: 671,026,404,352 − 653,908,770,816 routed − 2,554,331,136
    # shared − 926,679,040 embedding = 13,636,623,360, over TP 4.
    assert r["weight_bytes_per_gpu"] == pytest.approx(13_636_623_360 / 4 + 44_040_192 * 58)
    # all-to-all: 32 tokens × 8 experts × 7168 values × (1 + 2) bytes × 58 layers over 48 GB/s
    assert r["all_to_all_bytes_per_gpu"] == 32 * 8 * 7168 * 3 * 58
    assert r["all_to_all_seconds"] == pytest.approx(32 * 8 * 7168 * 3 * 58 / 48e9)
    long = serve.ep_decode_step(v3, "H800", ep=144, batch_per_gpu=64, context=4989)
    # MLA: 4,989 tokens × 61 layers × 576 values × 2 bytes for each of 64 sequences
    assert long["kv_bytes_per_gpu"] == 64 * 4989 * 61 * 576 * 2
    assert long["routed_experts_per_gpu"] == 2 and long["shared_experts_per_gpu"] == 1
    assert long["output_tokens_per_s_per_node"] == pytest.approx(8 * 64 / long["step_seconds"])
    assert long["fits"] and not serve.ep_decode_step(
        v3, "H800", ep=144, batch_per_gpu=256, context=4989)["fits"]


def test_the_longest_gap_between_tokens_by_hand():
    # continuous (see test_continuous_batching_by_hand): R0's tokens at 2, 5, 6: gaps 3 and 1,
    # the 3 s one while R1's prompt was prefilled; R1's at 5 and 6.
    r = serve.simulate(TRACE, "continuous", max_batch=2, step_time=step_time)
    assert r.max_itl == pytest.approx({0: 3.0, 1: 1.0})
    # chunked: R0's tokens at 2, 4.1, 6.0: the stall is split (2.1 and 1.9); R1's at 6 and 7.
    r = serve.simulate(TRACE, "continuous", chunk=12, max_batch=2, step_time=step_time)
    assert r.max_itl == pytest.approx({0: 2.1, 1: 1.0})
    # static: R0's at 2, 3, 4; R1's at 7, 8.
    r = serve.simulate(TRACE, "static", max_batch=2, step_time=step_time)
    assert r.max_itl == pytest.approx({0: 1.0, 1: 1.0})


def test_chunked_prefill_trades_ttft_for_smoother_decoding():
    trace = serve.request_trace(120, seed=11, rate=8, prompt_median=3000, prompt_sigma=0.8,
                                output_median=150, max_prompt=7000)
    f = serve.roofline_step_time(tmath.preset("llama3-8b"), "H100")
    whole = serve.simulate(trace, "continuous", max_batch=64, step_time=f)
    chunked = serve.simulate(trace, "continuous", chunk=512, max_batch=64, step_time=f)
    assert chunked.percentile("max_itl", 0.99) < whole.percentile("max_itl", 0.99)
    # the price: a prompt in chunks reads the weights once a chunk; chunks of 128 tokens are
    # below H100's ridge (~295 tokens), so a lone 4,096-token prompt waits longer for its first
    # token: 32 weight-bound iterations instead of one compute-bound one
    lone = [serve.Request(0, 0.0, 4096, 2)]
    t_whole = serve.simulate(lone, "continuous", step_time=f).ttft[0]
    t_chunk = serve.simulate(lone, "continuous", chunk=128, step_time=f).ttft[0]
    w = tmath.count_params(tmath.preset("llama3-8b")).total * 2 / 3.35e12  # one weight read
    assert t_chunk > t_whole and t_chunk >= 32 * w


def test_the_batch_where_speculation_stops_paying():
    cfg, draft = tmath.preset("llama3-70b"), tmath.preset("llama3-8b")
    kw = dict(tp=8, context=1000, k=4, alpha=0.8)
    b = serve.speculative_breakeven_batch(cfg, draft, "H100", **kw)
    assert b is not None and b > 1
    assert serve.speculative_at_batch(cfg, draft, "H100", batch=b, **kw)["speedup"] < 1
    assert serve.speculative_at_batch(cfg, draft, "H100", batch=b - 1, **kw)["speedup"] >= 1
    # a better draft (α = 0.95) keeps paying to a larger batch
    assert serve.speculative_breakeven_batch(cfg, draft, "H100", **{**kw, "alpha": 0.95}) > b


def test_feasibility_counts_the_batchs_blocks_and_windows():
    m = tmath.preset("mistral-7b")  # 32 layers, 8 KV heads of 128, window 4,096
    r = serve.serve(m, "H100", prompt_len=9000, output_len=1000, batch=3, block_size=16)
    # each sequence keeps 4,096 positions a layer: 256 blocks of 16; 2·32·8·128·2 bytes a token
    assert r["feasibility"]["kv_bytes_per_gpu"] == 3 * 4096 * 2 * 32 * 8 * 128 * 2
    r = serve.serve(m, "H100", prompt_len=1000, output_len=10, batch=2, block_size=16)
    assert r["feasibility"]["kv_bytes_per_gpu"] == 2 * 64 * 16 * 131072  # ⌈1010/16⌉ = 64 blocks


def test_the_simulation_refuses_requests_it_could_not_finish():
    for bad in ([serve.Request(0, 0.0, 0, 3)], [serve.Request(0, 0.0, 5, 0)],
                [serve.Request(0, float("nan"), 5, 3)],
                [serve.Request(0, 0.0, 5, 3), serve.Request(0, 1.0, 5, 3)]):
        with pytest.raises(ValueError):
            serve.simulate(bad, "continuous", step_time=step_time)
    with pytest.raises(ValueError):
        serve.simulate(TRACE, "continuous", chunk=2, max_batch=2, step_time=step_time)
    for kw in ({"rate": 0}, {"prompt_median": -1}, {"output_sigma": float("inf")}):
        with pytest.raises(ValueError):
            serve.request_trace(5, 0, **kw)


def test_the_latency_throughput_curve_bends_where_decode_turns_compute_bound():
    cfg = tmath.preset("llama3-8b")
    rows = serve.latency_throughput(cfg, "H100", tp=1, context=0, batches=[1, 64, 256, 1024, 4096])
    tpots = [r["tpot_s"] for r in rows]
    rates = [r["output_tokens_per_s"] for r in rows]
    assert tpots == sorted(tpots) and rates == sorted(rates)
    assert [r["bound"] for r in rows] == ["显存带宽"] * 3 + ["算力"] * 2
    # weight-bound: 64 sequences cost almost what one does; compute-bound: 4× the batch, 4× time
    assert tpots[1] < 1.1 * tpots[0]
    assert tpots[4] == pytest.approx(4 * tpots[3], rel=0.01)
    # at long context the KV reads take over: 256 sequences of 8,000 tokens read more KV than
    # weights (256 · 8,000 · 128 KiB = 268 GB against 16 GB)
    long = serve.decode_step(cfg, "H100", batch=256, context=8000)
    assert long.kv_bytes > 10 * long.weight_bytes and long.bound == "显存带宽"

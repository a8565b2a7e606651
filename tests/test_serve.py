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

import tmath
from tmath import serve
from tmath.ledger import build_ledger
from test_plan_robust import run_main  # noqa: E402  (tests/ is on sys.path: conftest)

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


@pytest.mark.parametrize("name,gpu,tp,P,O,dtype", LEDGER_CASES)
def test_serve_at_batch_1_is_the_ledgers_decode_step(name, gpu, tp, P, O, dtype):
    cfg = tmath.preset(name)
    r = serve.serve(cfg, gpu, tp=tp, prompt_len=P, output_len=O, batch=1, weight_dtype=dtype,
                    kv_dtype=dtype)
    seq = r["ledger_seq_len"]
    assert seq == P + max(O - 1, 1)  # the last decode step makes token P + O − 1 ... of the ledger's T
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


@pytest.mark.parametrize("name,gpu,tp,P,O", [("llama3-70b", "H100", 8, 1000, 500),
                                             ("deepseek-v2-lite", "H100", 1, 300, 40),
                                             ("qwen3-30b-a3b", "H200", 4, 64, 64)])
def test_the_printed_decode_step_is_the_ledgers(name, gpu, tp, P, O):
    code, out, err = run_main(["serve", "--preset", name, "--gpu", gpu, "--tp", str(tp),
                               "--prompt-len", str(P), "--output-len", str(O)])
    assert code == 0, err
    seq = P + O - 1
    code, led, err = run_main(["ledger", "--preset", name, "--gpu", gpu, "--tp", str(tp),
                               "--seq-len", str(seq)])
    assert code == 0, err
    rows = _ledger_rows(led)
    assert len(rows) >= 4
    mine = [line.split() for line in out.splitlines()]
    for row in rows:  # the same label and the same number, whatever the column widths
        assert row in mine, (row, out)
    assert f"同 ledger --seq-len {seq:,}" in out


def test_the_decode_step_is_serving_decode_step():
    from tmath.serving import decode_step as base

    cfg = tmath.preset("llama3-70b")
    s = serve.decode_step(cfg, "H100", tp=8, batch=32, context=4000)
    b = base(cfg, "H100", tp=8, batch=32, context_len=4000)
    assert (s.seconds, s.flops, s.bytes_read) == (b.seconds, b.flops_per_gpu, b.bytes_per_gpu)
    assert s.bound == "显存带宽"
    big = serve.decode_step(cfg, "H100", tp=8, batch=4096, context=10)
    assert big.bound == "算力" and big.compute_seconds > big.memory_seconds


@pytest.mark.parametrize("name,tp,P,O,B", [("mistral-7b", 1, 4000, 200, 8),  # crosses its window
                                           ("llama3-8b", 8, 10, 50, 300),  # crosses the ridge
                                           ("deepseek-v3", 8, 100, 30, 64),
                                           ("gpt2", 1, 5, 1, 1)])
def test_the_tpot_sum_is_the_sum_of_the_steps(name, tp, P, O, B):
    cfg = tmath.preset(name)
    got = serve.tpot(cfg, "H100", tp=tp, batch=B, prompt_len=P, output_len=O)
    ctxs = range(P, P + O - 1) if O > 1 else [P]
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
    alpha = sum(min(a, b) for a, b in zip(p, q))  # 0.25 + 0.2 + 0.2 + 0.1 = 0.75
    resid = [max(0.0, a - b) for a, b in zip(p, q)]
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
    for c, want in zip(counts, p):
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
    assert d["decode_batch_at_slo"] > d["colocated_batch_at_slo"] >= 0


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

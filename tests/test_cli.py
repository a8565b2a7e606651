"""Tests of `python -m tmath` (subprocess) and of the NumPy sweep."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tmath.errors import has_chinese


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tmath", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


TINY_LLAMA = {  # a config the library has never seen
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "hidden_act": "silu",
    "rope_theta": 10000.0,
}
# by hand: per layer q 64*64 + k,v 2*64*32 + o 64*64 + MLP 3*64*128 + 2 norms 64;
# embed + head 2*100*64; final norm 64
TINY_PARAMS = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 2 * 100 * 64 + 64


@pytest.mark.parametrize(
    "args,flag",
    [
        (["ledger", "--preset", "gpt2", "--tp", "0"], "--tp"),
        (["ledger", "--preset", "gpt2", "--seq-len", "-3"], "--seq-len"),
        (["ledger", "--preset", "gpt2", "--dtype", "fp7"], "--dtype"),
        (["ledger", "--preset", "gpt2", "--gpu", "B900"], "--gpu"),
        (["ledger", "--preset", "gpt2", "--batch", "two"], "--batch"),
        (["ledger", "/no/such/config.json"], "/no/such/config.json"),
        (["ledger"], "CONFIG"),
        (["frobnicate"], "未知命令 frobnicate"),
    ],
)
def test_bad_flags_one_line_exit_2(args, flag):
    r = run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith("tmath: 错误：") and flag in lines[0]
    assert has_chinese(lines[0]) and r.stdout == ""


def test_bad_config_field_is_one_line(tmp_path):
    bad = dict(TINY_LLAMA, num_attention_heads=5)  # 64 not divisible by 5 / 5 not divisible by 2
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    r = run("ledger", str(p))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    p.write_text("{not json")
    r = run("ledger", str(p))
    assert r.returncode == 2 and "不是合法的 JSON" in r.stderr


def test_unseen_config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY_LLAMA))
    r = run("ledger", str(p), "--seq-len", "32", "--batch", "2", "--json")
    assert r.returncode == 0, r.stderr
    led = json.loads(r.stdout)
    assert led["params"]["total"] == TINY_PARAMS
    assert sum(led["params"]["breakdown"].values()) == TINY_PARAMS
    assert led["kv_cache"]["bytes_per_token"] == 2 * 2 * 2 * 16 * 2  # K,V x L x K heads x H x bf16
    assert led["training_flops"]["tokens"] == 64
    r2 = run("ledger", str(p), "--seq-len", "32")
    assert r2.returncode == 0 and f"{TINY_PARAMS:,}" in r2.stdout
    assert "KV cache" in r2.stdout and "参数量" in r2.stdout


def test_preset_table_and_presets_list():
    r = run("presets")
    assert r.returncode == 0 and "llama3-70b" in r.stdout.split()
    r = run("ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--tp", "8", "--gpu", "H100")
    assert r.returncode == 0, r.stderr
    assert "70,553,706,496" in r.stdout
    assert "解码一步的下界" in r.stdout


def test_hardware_listing():
    r = run("hardware")
    assert r.returncode == 0 and "H100" in r.stdout and "989.0" in r.stdout
    assert "81,559 MiB" in r.stdout and "   80 GiB" in r.stdout  # capacity (GiB) and what the runtime shows


def test_sweep_equals_training_flops():
    import tmath
    from tmath.sweep import flops_vs_seq_len

    for name in ("llama3-8b", "gpt2", "mixtral-8x7b", "deepseek-v3"):
        cfg = tmath.preset(name)
        ts = np.array([1, 7, 512, 4096, 131072])
        for causal in (False, True):
            exact = flops_vs_seq_len(cfg, ts, batch=3, causal=causal, exact=True)
            approx = flops_vs_seq_len(cfg, ts, batch=3, causal=causal)
            for t, e, a in zip(ts.tolist(), exact, approx, strict=True):
                ref = tmath.training_flops(cfg, seq_len=t, batch=3, causal=causal).total
                assert e == ref
                assert a == pytest.approx(ref, rel=1e-12)


def test_sweep_bad_input():
    import tmath
    from tmath.sweep import flops_vs_seq_len

    cfg = tmath.preset("gpt2")
    with pytest.raises(ValueError, match="seq_lens"):
        flops_vs_seq_len(cfg, [0, 5])
    with pytest.raises(ValueError, match="seq_lens"):
        flops_vs_seq_len(cfg, [1.5])


def test_closed_pipe_is_not_a_traceback():
    # `python -m tmath ledger ... | head`: the reader has gone away before the ledger is printed.
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tmath", "ledger", "--preset", "llama3-70b"],
        stdout=write_end,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err, err


# --- the deployment must exist: TP, sequence length, memory ------------------------------


def test_infeasible_deployments_are_flagged():
    import tmath
    from tmath.ledger import build_ledger

    cases = [  # preset, tp, bf16 weights per GPU by hand
        ("deepseek-v3", 8, 671_026_404_352 * 2 / 8),  # 167.8 GB
        ("llama3.1-405b", 8, 405_853_388_800 * 2 / 8),  # 101.5 GB
        ("llama3-70b", 1, 70_553_706_496 * 2),  # 141.1 GB
    ]
    for name, tp, weights in cases:
        led = build_ledger(tmath.preset(name), seq_len=2048, batch=1, tp=tp)
        feas = led["feasibility"]
        assert feas["weight_bytes_per_gpu"] == pytest.approx(weights)
        assert feas["hbm_bytes_per_gpu"] == 80 * 2**30
        assert feas["needed_bytes_per_gpu"] == pytest.approx(weights + feas["kv_bytes_per_gpu"] + 5e9)
        assert feas["feasible"] is False and feas["verdict_zh"].startswith("不可行")
    ok = build_ledger(tmath.preset("llama3-70b"), seq_len=4096, batch=1, tp=8)["feasibility"]
    # 17.6 GB of weights + 4096 x 320 KiB / 8 of KV + 5 GB
    assert ok["needed_bytes_per_gpu"] == pytest.approx(70_553_706_496 * 2 / 8 + 327_680 * 4096 / 8 + 5e9)
    assert ok["feasible"] is True and ok["verdict_zh"].startswith("可行")
    # GPT-3 at its 2048 positions, batch 256: 2 x 96 x 96 x 128 x 2 bytes x 2048 x 256 of KV
    gpt3 = build_ledger(tmath.preset("gpt3-175b"), seq_len=2048, batch=256, tp=8)["feasibility"]
    assert gpt3["kv_bytes_per_gpu"] == 2 * 96 * 96 * 128 * 2 * 2048 * 256 / 8
    assert gpt3["feasible"] is False
    # the usable capacity is a parameter
    big = build_ledger(tmath.preset("deepseek-v3"), seq_len=2048, batch=1, tp=8, hbm_bytes=200e9)
    assert big["feasibility"]["feasible"] is True
    with pytest.raises(ValueError, match="hbm_bytes"):
        build_ledger(tmath.preset("gpt2"), seq_len=8, batch=1, hbm_bytes=0)


def test_cli_prints_the_verdict_and_json_field():
    r = run("ledger", "--preset", "deepseek-v3", "--tp", "8")
    assert r.returncode == 0, r.stderr
    assert "不可行：每卡需要" in r.stdout and "超过 H100 的 85.9 GB" in r.stdout
    assert "每卡、微批次 1、TP=8、序列并行开" in r.stdout and "未与实测核对" in r.stdout  # MoE + MLA
    r = run("ledger", "--preset", "deepseek-v3", "--tp", "8", "--json", "--hbm-gb", "200")
    led = json.loads(r.stdout)
    assert led["feasibility"]["feasible"] is True and led["feasibility"]["hbm_bytes_per_gpu"] == 200e9
    assert led["decode"]["experts_read_per_moe_layer"] == 8  # batch 1 touches k = 8 experts


@pytest.mark.parametrize(
    "args,numbers",
    [
        (["--preset", "llama3-70b", "--tp", "3"], ("tp=3", "num_heads=64")),
        (["--preset", "gpt2", "--seq-len", "8192"], ("8,192", "1,024")),
        (["--preset", "gpt2", "--hbm-gb", "-1"], ("--hbm-gb",)),
    ],
)
def test_impossible_settings_are_refused(args, numbers):
    r = run("ledger", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert all(n in r.stderr for n in numbers), r.stderr


def test_qwen2_config_with_tp8_is_refused():
    from conftest import ROOT

    r = run("ledger", str(ROOT / "tests" / "hf_configs" / "qwen2-7b-instruct.json"), "--tp", "8")
    assert r.returncode == 2 and "tp=8" in r.stderr and "num_heads=28" in r.stderr


def test_replicated_kv_heads_are_reported():
    import tmath
    from tmath.ledger import build_ledger, render_text

    led = build_ledger(tmath.preset("llama3-70b"), seq_len=1024, batch=1, tp=16)
    assert led["tp_layout"]["kv_replicas"] == 2 and led["tp_layout"]["kv_heads_per_gpu"] == 1
    assert "KV 头复制" in render_text(led)
    led8 = build_ledger(tmath.preset("llama3-70b"), seq_len=1024, batch=1, tp=8)
    assert not led8["tp_layout"]["kv_replicated"] and "KV 头复制" not in render_text(led8)


def test_ledger_attention_flash_adds_the_recomputed_scores():
    # FlashAttention's backward recomputes QK^T once per layer: 2·B·T²·N·H·L more FLOPs
    # (Llama 3 70B: N = 64, H = 128, L = 80) at T = 4096, B = 1.
    eager = json.loads(run("ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--tp", "8",
                           "--json").stdout)
    flash = json.loads(run("ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--tp", "8",
                           "--attention", "flash", "--json").stdout)
    assert flash["settings"]["attention"] == "flash"
    extra = flash["training_flops"]["total"] - eager["training_flops"]["total"]
    assert extra == 2 * 4096 * 4096 * 64 * 128 * 80
    text = run("ledger", "--preset", "llama3-70b", "--seq-len", "4096", "--tp", "8",
               "--attention", "flash").stdout
    assert "反向重算 QKᵀ" in text and "反向重算" in text


# --- issue 19, section 3: what practitioners really pass --------------------------------

HF = Path(__file__).parent / "hf_configs"
GEMMA3_IT = HF / "multimodal" / "gemma-3-4b-it.json"
LLAMA4_SCOUT = HF / "multimodal" / "llama-4-scout-17b-16e-instruct.json"


def cli(*args):
    """``python -m tmath`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from tmath.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_a_model_folder_reads_its_config_json(tmp_path):
    folder = tmp_path / "TinyLlama-2L"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    code, out, err = cli("ledger", f"{folder}/", "--seq-len", "32", "--json")
    assert code == 0, err
    led = json.loads(out)
    assert led["params"]["total"] == TINY_PARAMS and led["model"]["name"] == "TinyLlama-2L"
    r = run("ledger", str(folder))  # the command line, end to end
    assert r.returncode == 0 and f"{TINY_PARAMS:,}" in r.stdout, r.stderr


def test_a_folder_without_config_json_is_one_clear_error(tmp_path):
    (tmp_path / "model.safetensors").write_text("")
    code, out, err = cli("ledger", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert str(tmp_path) in err and "没有 config.json" in err and "模型文件夹" in err
    code, out, _ = cli("ledger", str(tmp_path), "--json")
    assert code == 2 and json.loads(out)["field"] == "CONFIG"


def test_gemma3_wrapper_counts_the_language_model_and_says_so():
    code, out, err = cli("ledger", str(GEMMA3_IT), "--json")
    assert code == 0, err
    led = json.loads(out)
    # google/gemma-3-4b-it's language model: 3,880,263,168 parameters in transformers'
    # Gemma3ForConditionalGeneration without its vision tower and projector
    # (tests/test_multimodal.py), the same as its text_config read on its own.
    import tmath

    text = tmath.ModelConfig.from_hf(HF / "gemma-3-4b-text.json")
    assert led["params"]["total"] == tmath.count_params(text).total == 3_880_263_168
    assert led["model"]["wrapper"] == "gemma3" and led["model"]["model_type"] == "gemma3_text"
    assert "视觉塔" in led["model"]["not_counted_zh"]
    code, out, _ = cli("ledger", str(GEMMA3_IT))
    assert code == 0 and "只计语言模型" in out and "视觉塔" in out and "3,880,263,168" in out
    plain = cli("ledger", str(HF / "gemma-3-4b-text.json"))[1]
    assert "只计语言模型" not in plain  # a text-only config says nothing of a vision tower


def test_llama4_wrapper_is_refused_naming_the_nested_type():
    code, out, err = cli("ledger", str(LLAMA4_SCOUT))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "llama4_text" in err and "llama4" in err and has_chinese(err)
    code, out, _ = cli("ledger", str(LLAMA4_SCOUT), "--json")
    assert code == 2 and json.loads(out) == {
        "error": json.loads(out)["error"], "field": "text_config.model_type"}


@pytest.mark.parametrize("mutation,field,shown", [
    ({"num_hidden_layers": 10**12}, "num_hidden_layers", "1 到 10,000"),
    ({"hidden_size": 10**30}, "hidden_size", "1 到 1,000,000"),
])
def test_absurd_numbers_are_refused_before_any_work(tmp_path, mutation, field, shown):
    # Under a 3 GB address-space cap: the old code built a 10^12-entry list (MemoryError
    # after 8 GB) or priced a 10^30-wide model; now the field is refused on reading.
    import resource

    base = json.loads((HF / "llama3-8b.json").read_text())
    p = tmath_config(tmp_path, {**base, **mutation})

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    r = subprocess.run([sys.executable, "-m", "tmath", "ledger", str(p), "--json"],
                       capture_output=True, text=True, timeout=120, preexec_fn=cap)
    assert r.returncode == 2 and r.stderr == "", r.stderr[-500:]
    err = json.loads(r.stdout)
    assert err["field"] == field and shown in err["error"] and has_chinese(err["error"])


def tmath_config(tmp_path, d):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    return p


def test_deeply_nested_json_is_one_clean_error(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "rope_scaling": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, out, err = cli("ledger", str(p))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "嵌套太深" in err
    code, out, _ = cli("ledger", str(p), "--json")
    assert json.loads(out)["field"] == "CONFIG"


ERROR_CASES = [  # argv, field: every kind of error the command line can meet
    (["ledger", "--preset", "gpt2", "--tp", "0"], "--tp"),
    (["ledger", "--preset", "llama3-70b", "--tp", "3"], "--tp"),
    (["ledger", "--preset", "gpt2", "--seq-len", "8192"], "--seq-len"),
    (["ledger", "--preset", "gpt2", "--batch", "two"], "--batch"),
    (["ledger", "--preset", "gpt2", "--dtype", "fp7"], "--dtype"),
    (["ledger", "--preset", "gpt2", "--gpu", "B900"], "--gpu"),
    (["ledger", "--preset", "gpt2", "--recipe", "sgd9"], "--recipe"),
    (["ledger", "--preset", "gpt2", "--hbm-gb", "-1"], "--hbm-gb"),
    (["ledger", "--preset", "gpt2", "--hbm-gb", "inf"], "--hbm-gb"),
    (["ledger", "--preset", "gpt2", "--workspace-gb", "nan"], "--workspace-gb"),
    (["ledger", "--preset", "gpt2", "--attention", "sdpa"], "--attention"),
    (["ledger", "--preset", "gpt-5"], "--preset"),
    (["ledger", "--preset", "gpt2", "--frobnicate"], "--frobnicate"),
    (["ledger"], "CONFIG"),
    (["ledger", "/no/such/config.json"], "CONFIG"),
    (["frobnicate"], "command"),
]


@pytest.mark.parametrize("argv,field", ERROR_CASES, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_json_errors_are_one_object_and_every_error_is_chinese(argv, field):
    code, out, err = cli(*argv, "--json")
    assert code == 2 and err == ""
    obj = json.loads(out)  # exactly one JSON document on stdout
    assert set(obj) == {"error", "field"} and obj["field"] == field
    assert has_chinese(obj["error"]) and "\n" not in obj["error"]
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and err.startswith("tmath: 错误：") and has_chinese(err)
    assert len(err.strip().splitlines()) == 1


def test_json_error_end_to_end():
    r = run("ledger", "--preset", "gpt2", "--tp", "0", "--json")
    assert r.returncode == 2 and r.stderr == ""
    assert json.loads(r.stdout) == {"error": "--tp 必须在 1 到 100,000 之间，收到 0", "field": "--tp"}


def test_every_preset_works_with_the_default_flags():
    import tmath

    for name in tmath.presets():
        code, out, err = cli("ledger", "--preset", name, "--json")
        assert code == 0, (name, err)
        s = json.loads(out)["settings"]
        t = min(2048, tmath.preset(name).max_position)
        assert s["seq_len"] == t and s["seq_len_source"] == "default", name
        assert f"T={t:,}" in s["seq_len_note_zh"] and "2,048" in s["seq_len_note_zh"]
    r = run("ledger", "--preset", "gpt2")  # the command line: 2,048 > 1,024 positions
    assert r.returncode == 0, r.stderr
    assert "T=1024" in r.stdout and "默认 T：取 2,048 与模型位置数 1,024 中较小者" in r.stdout
    given = json.loads(cli("ledger", "--preset", "gpt2", "--seq-len", "512", "--json")[1])
    assert given["settings"]["seq_len"] == 512 and given["settings"]["seq_len_source"] == "given"
    assert "默认 T" not in cli("ledger", "--preset", "gpt2", "--seq-len", "512")[1]


def test_readme_lists_exactly_the_supported_model_types():
    import re

    import tmath
    from conftest import ROOT
    from tmath.config import CHECKED_WRAPPERS

    readme = (ROOT / "book" / "guides" / "local.md").read_text(encoding="utf-8")
    para = next(p for p in readme.split("\n\n") if "python -m tmath ledger" in p)
    listed = set(re.findall(r"`([a-z0-9_]+)`", para)) - {"text_config"}
    assert listed == set(tmath.SUPPORTED_MODEL_TYPES) | set(CHECKED_WRAPPERS), (
        listed ^ (set(tmath.SUPPORTED_MODEL_TYPES) | set(CHECKED_WRAPPERS)))
    assert "text_config" in para


def test_help_is_chinese(capsys):
    from tmath.cli import main

    with pytest.raises(SystemExit) as e:
        main(["ledger", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("用法：tmath ledger")
    assert "显示这段帮助并退出" in out and "含 config.json 的模型文件夹" in out
    assert "show this help" not in out and "options:" not in out


def test_ledger_decode_counts_the_tp_all_reduces():
    """Issue 32 item 9: `ledger --tp 8` priced a Llama 3 70B decode step at the HBM bound alone
    and left out the 2L = 160 all-reduces the together page counts.  The ledger now also
    prints the step of tmath.serving.decode_step, the function that page calls."""
    from tmath import comm, preset
    from tmath.hardware import link
    from tmath.serving import NCCL_BASE_LATENCY, decode_step

    r = run("ledger", "--preset", "llama3-70b", "--tp", "8", "--seq-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    led = json.loads(r.stdout)
    ds = led["decode_step"]
    # the step producing the 8,192nd token: 8,191 cached, 2 all-reduces per layer of one
    # token's bf16 hidden state (D = 8192) over 8 GPUs on NVLink
    assert (ds["context_len"], ds["all_reduces"], ds["all_reduce_bytes"]) == (8191, 160, 8192 * 2)
    assert ds["link"] == "NVLink4" and ds["nccl"] is True
    one = comm.nccl_time("all_reduce", 8192 * 2, 8, intra=link("NVLink4"), base=False)
    assert ds["all_reduce_seconds"] == pytest.approx(one, rel=1e-12)
    # HBM by hand: every weight but the looked-up embedding, and 8,191 tokens of KV
    # (80 layers x 8 KV heads x 128 x K and V x 2 bytes), an eighth each, at 3.35 TB/s
    cfg = preset("llama3-70b")
    weights = (70_553_706_496 - 128_256 * 8192) * 2
    kv = 8191 * 80 * 8 * 128 * 2 * 2
    assert ds["memory_seconds"] == pytest.approx((weights + kv) / 8 / 3.35e12, rel=1e-9)
    assert ds["step_seconds"] == pytest.approx(ds["memory_seconds"] + 160 * one, rel=1e-12)
    assert ds["step_seconds_nccl_base"] - ds["step_seconds"] == pytest.approx(
        160 * NCCL_BASE_LATENCY, rel=1e-9)
    # one path: the together page's function gives the same step
    page = decode_step(cfg, "H100", tp=8, batch=1, context_len=8191)
    assert ds["step_seconds"] == page.seconds
    # the HBM-only bound is still there, and named as such
    assert ds["step_seconds"] > led["decode"]["step_seconds"] + 159 * one
    text = run("ledger", "--preset", "llama3-70b", "--tp", "8", "--seq-len", "8192").stdout
    assert "解码一步的下界（只计 HBM 读取）" in text and "160 次 all-reduce（NVLink4）" in text
    assert f"{ds['step_seconds'] * 1e3:.3f} ms" in text
    assert "不与计算重叠" in text and "不是下界" in text  # the convention, stated


@pytest.mark.parametrize("args, shown", [
    (["--preset", "gpt2"], "无（TP=1）"),  # T = max_position: the step of the last token
    (["--preset", "llama3-8b", "--tp", "4", "--gpu", "TPUv5e"], "64 次 all-reduce（ICI-v5e）"),
])
def test_ledger_decode_step_one_gpu_and_other_links(args, shown):
    r = run("ledger", *args)
    assert r.returncode == 0, r.stderr
    assert shown in r.stdout
    assert "NCCL 基础延迟" not in r.stdout  # NCCL's constant belongs to NVIDIA's links only


def test_ledger_decode_without_link_data_says_what_it_left_out():
    from tmath.hardware import NODES, hardware_names

    bare = next((g for g in hardware_names() if g not in NODES), None)
    if bare is None:
        pytest.skip("every GPU has node data")
    r = run("ledger", "--preset", "llama3-8b", "--tp", "2", "--gpu", bare, "--json")
    assert r.returncode == 0, r.stderr
    ds = json.loads(r.stdout)["decode_step"]
    assert ds["priced"] is False and ds["comm_seconds"] is None and ds["all_reduces"] == 64
    text = run("ledger", "--preset", "llama3-8b", "--tp", "2", "--gpu", bare).stdout
    assert "未计（无链路数据）" in text and "这些 all-reduce 未计" in text

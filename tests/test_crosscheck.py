"""Cross-checks of tmath's ledger against Hugging Face transformers (an independent implementation).

* Parameter counts: models built on the meta device (no memory, no download)
  from hand-copied official config.json files in ``tests/hf_configs`` and from
  the presets; ``count_params(cfg).total`` must equal
  ``sum(p.numel() for p in model.parameters())`` exactly.
* The first six families and the eight of issue 15 (qwen3, qwen3_moe, gemma2,
  gemma3_text, phi3, olmo2, gpt_oss, deepseek_v2), each with at least one
  config file of a public model.
* FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` around one forward and
  one forward+backward pass of small real models (float32, CPU) with
  ``attn_implementation="eager"`` pinned: on CPU the "sdpa" path dispatches to
  ``_scaled_dot_product_flash_attention_for_cpu``, which FlopCounterMode does
  not count at all, so only eager attention gives a meaningful count. MoE models
  also pin ``experts_implementation="eager"`` (a loop of per-expert matmuls); the
  default grouped-mm experts kernel is invisible to FlopCounterMode.
* Sliding windows: the FLOPs measured are the full masked matrix that eager
  attention computes (``window=False``); the useful count (``window=True``) is
  checked against the (query, key) pairs that get a nonzero attention
  probability in transformers' eager attention. The KV cache is checked against
  the tensors transformers' caches hold after a forward pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

import tmath
from tmath import crosscheck
from tmath.crosscheck import (
    CACHE_ENV,
    FLOP_CONFIGS,
    SMALL_VARIANTS,
    hf_param_count,
    measured_flops,
    preset_to_hf,
)

HF_DIR = Path(__file__).parent / "hf_configs"
HF_FILES = sorted(HF_DIR.glob("*.json"))

transformers.logging.set_verbosity_error()


@pytest.fixture(autouse=True)
def _build_every_model_here(monkeypatch):
    """These tests build each model themselves: the session's cache (conftest.py) is for the
    chapters' second run, not for the cross-checks."""
    monkeypatch.delenv(CACHE_ENV, raising=False)


def test_a_cached_result_is_returned_without_building_the_model(tmp_path, monkeypatch):
    """With TMATH_CROSSCHECK_CACHE set, a second call with the same arguments returns what the
    first one measured (through JSON, unchanged); other arguments are measured anew."""
    d = FLOP_CONFIGS["gpt2-tiny"]
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    measured, params = crosscheck.measure(d, 1, 5), hf_param_count(d)
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert measured == crosscheck._measure(d, 1, 5) and params == crosscheck._param_count(d)

    def build(*args):
        raise AssertionError("built a model")

    monkeypatch.setattr(crosscheck, "_build", build)
    monkeypatch.setattr(crosscheck, "_param_count", build)
    assert crosscheck.measure(dict(d), 1, 5) == measured and hf_param_count(dict(d)) == params
    with pytest.raises(AssertionError, match="built a model"):
        crosscheck.measure(d, 1, 6)
    with pytest.raises(AssertionError, match="built a model"):
        hf_param_count({**d, "n_layer": 3})


def test_config_files_cover_all_model_types():
    types = {json.loads(f.read_text())["model_type"] for f in HF_FILES}
    assert types == set(tmath.SUPPORTED_MODEL_TYPES)
    assert len(HF_FILES) >= 19
    flop_types = {d["model_type"] for d in FLOP_CONFIGS.values()}
    assert flop_types == set(tmath.SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("path", HF_FILES, ids=lambda p: p.stem)
def test_params_equal_transformers_for_official_configs(path):
    d = json.loads(path.read_text())
    cfg = tmath.ModelConfig.from_hf(path)
    assert tmath.count_params(cfg).total == hf_param_count(d)


@pytest.mark.parametrize("name", tmath.presets())
def test_params_equal_transformers_for_presets(name):
    cfg = tmath.preset(name)
    assert tmath.count_params(cfg).total == hf_param_count(preset_to_hf(cfg))


@pytest.mark.parametrize(
    "file,name",
    [("gpt2", "gpt2"), ("gpt2-medium", "gpt2-medium"), ("llama3-8b", "llama3-8b"),
     ("llama3-70b", "llama3-70b"), ("mistral-7b", "mistral-7b"),
     ("qwen2-7b-instruct", "qwen2-7b"), ("mixtral-8x7b", "mixtral-8x7b"),
     ("deepseek-v3", "deepseek-v3"), ("qwen3-30b-a3b", "qwen3-30b-a3b"),
     ("gpt-oss-20b", "gpt-oss-20b"), ("deepseek-v2-lite", "deepseek-v2-lite"),
     ("gemma-2-27b", "gemma-2-27b"), ("gemma-2-9b", "gemma-2-9b")],
)
def test_presets_match_official_config_files(file, name):
    from_file = tmath.ModelConfig.from_hf(HF_DIR / f"{file}.json")
    p = tmath.preset(name)
    assert from_file.replace(name=p.name, source=p.source) == p


# Small MoE/MLA variants, also checked on the meta device (bias switches included).


@pytest.mark.parametrize("name", SMALL_VARIANTS)
def test_params_equal_transformers_for_small_variants(name):
    d = SMALL_VARIANTS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    assert tmath.count_params(cfg).total == hf_param_count(d)


# ------------------------------------------------------------------ FLOPs


@pytest.mark.parametrize("name", FLOP_CONFIGS)
@pytest.mark.parametrize("batch,seq_len", [(1, 5), (2, 8)])
def test_flops_equal_flop_counter_mode(name, batch, seq_len):
    d = FLOP_CONFIGS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    fwd, train = measured_flops(d, batch, seq_len)
    assert tmath.forward_flops(cfg, seq_len=seq_len, batch=batch).total == fwd
    assert tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=False).total == train


def test_flop_counter_mode_convention_is_three_times_forward_plus_rope():
    # Independent of tmath: the measured training count is 3x the forward count, except
    # for the rotary table matmul (rope_dim/2 inverse frequencies x T positions, x2).
    d = FLOP_CONFIGS["llama-tiny-gqa"]
    T = 8
    fwd, train = measured_flops(d, 2, T)
    rope = 2 * (32 // 4 // 2) * T
    assert train == 3 * (fwd - rope) + rope
    g_fwd, g_train = measured_flops(FLOP_CONFIGS["gpt2-tiny"], 2, T)
    assert g_train == 3 * g_fwd  # learned positions: no rope table


# ------------------------------------------------------------------ sliding windows
WINDOW_CONFIGS = [n for n in FLOP_CONFIGS
                  if tmath.ModelConfig.from_hf(FLOP_CONFIGS[n]).num_sliding_layers]


def test_window_configs_have_windows_shorter_than_the_measured_length():
    # So that the eager count above really is the full masked matrix, not the window.
    assert {tmath.ModelConfig.from_hf(FLOP_CONFIGS[n]).model_type for n in WINDOW_CONFIGS} >= {
        "qwen3", "gemma2", "gemma3_text", "phi3", "gpt_oss"}
    for n in WINDOW_CONFIGS:
        cfg = tmath.ModelConfig.from_hf(FLOP_CONFIGS[n])
        if cfg.model_type != "mistral":
            assert cfg.sliding_window < 5, n
            f = tmath.forward_flops(cfg, 8, 2)
            assert tmath.forward_flops(cfg, 8, 2, causal=True, window=True).total < f.total


def _eager_attention_probs(d, batch, seq_len):
    import torch

    from tmath.crosscheck import _build, _ids

    model = _build(d)
    with torch.no_grad():
        out = model(_ids(d, batch, seq_len), output_attentions=True)
    return out.attentions  # one (B, N, T, T) tensor per layer


@pytest.mark.parametrize("name", WINDOW_CONFIGS)
def test_useful_window_flops_equal_the_pairs_eager_attention_uses(name):
    # Independent of tmath: the (query, key) pairs with a nonzero attention probability in
    # transformers' eager attention (masked entries get exactly 0 after the softmax).
    d = FLOP_CONFIGS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    B, T = 2, 8
    pairs = sum(int((p != 0).sum()) for p in _eager_attention_probs(d, B, T))
    f = tmath.forward_flops(cfg, T, B, causal=True, window=True).breakdown
    assert f["attention_scores"] == 2 * pairs * cfg.qk_head_dim
    assert f["attention_values"] == 2 * pairs * cfg.value_head_dim
    full = tmath.forward_flops(cfg, T, B).breakdown
    assert full["attention_scores"] == 2 * B * cfg.num_heads * cfg.num_layers * T * T * cfg.qk_head_dim


def _cache_bytes(d, seq_len, kind):
    import torch
    from transformers import DynamicCache, StaticCache

    from tmath.crosscheck import _build, _ids

    model = _build(d)
    cache = (StaticCache(config=model.config, max_cache_len=seq_len) if kind == "static"
             else DynamicCache(config=model.config))
    with torch.no_grad():
        model(_ids(d, 1, seq_len), past_key_values=cache, use_cache=True)
    return sum(t.numel() * t.element_size() for layer in cache.layers
               for t in (layer.keys, layer.values))


@pytest.mark.parametrize("name", FLOP_CONFIGS)
def test_kv_cache_equals_transformers_static_cache(name):
    # fp32 model; a window-W layer of the static cache holds min(T, W) positions.
    d = FLOP_CONFIGS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    assert _cache_bytes(d, 8, "static") == tmath.kv_cache_bytes_sequence(cfg, 8, dtype="fp32")


@pytest.mark.parametrize("name", WINDOW_CONFIGS)
def test_dynamic_cache_keeps_one_position_fewer_per_window_layer(name):
    # The documented difference: DynamicSlidingWindowLayer stores W - 1 positions between steps.
    d = FLOP_CONFIGS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    T = 8
    per_position = tmath.kv_cache_bytes_sequence(cfg.replace(num_layers=1, layer_types=None,
                                                             sliding_window=None,
                                                             first_k_dense=0), 1, dtype="fp32")
    shorter = sum(1 for w in cfg.layer_windows if w is not None and T >= w)
    assert _cache_bytes(d, T, "dynamic") == (tmath.kv_cache_bytes_sequence(cfg, T, dtype="fp32")
                                             - shorter * per_position)


# ------------------------------------------------------------------ refusals


def test_config_edited_to_another_model_type_is_refused():
    qwen3 = json.loads((HF_DIR / "qwen3-8b.json").read_text())
    with pytest.raises(ValueError, match="architectures"):
        tmath.ModelConfig.from_hf({**qwen3, "model_type": "llama"})
    gemma = json.loads((HF_DIR / "gemma-2-9b.json").read_text())
    del gemma["architectures"]
    with pytest.raises(ValueError, match="hidden_act|query_pre_attn_scalar"):
        tmath.ModelConfig.from_hf({**gemma, "model_type": "llama"})
    # What the refusal prevents: transformers' llama built from the Qwen3 config lacks the
    # q/k norms (36 layers x 2 x 128 weights) that the qwen3 model has.
    as_llama = {k: v for k, v in qwen3.items() if k != "architectures"}
    as_llama["model_type"] = "llama"
    assert hf_param_count(qwen3) - hf_param_count(as_llama) == 36 * 2 * 128

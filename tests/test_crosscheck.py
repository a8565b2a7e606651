"""Cross-checks of tmath's ledger against Hugging Face transformers (an independent implementation).

* Parameter counts: models built on the meta device (no memory, no download)
  from hand-copied official config.json files in ``tests/hf_configs`` and from
  the presets; ``count_params(cfg).total`` must equal
  ``sum(p.numel() for p in model.parameters())`` exactly.
* FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` around one forward and
  one forward+backward pass of small real models (float32, CPU) with
  ``attn_implementation="eager"`` pinned: on CPU the "sdpa" path dispatches to
  ``_scaled_dot_product_flash_attention_for_cpu``, which FlopCounterMode does
  not count at all, so only eager attention gives a meaningful count. MoE models
  also pin ``experts_implementation="eager"`` (a loop of per-expert matmuls); the
  default grouped-mm experts kernel is invisible to FlopCounterMode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

import tmath
from tmath.crosscheck import (
    FLOP_CONFIGS,
    SMALL_VARIANTS,
    hf_param_count,
    measured_flops,
    preset_to_hf,
)

HF_DIR = Path(__file__).parent / "hf_configs"
HF_FILES = sorted(HF_DIR.glob("*.json"))

transformers.logging.set_verbosity_error()


def test_config_files_cover_all_model_types():
    types = {json.loads(f.read_text())["model_type"] for f in HF_FILES}
    assert types == set(tmath.SUPPORTED_MODEL_TYPES)
    assert len(HF_FILES) >= 8


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
     ("deepseek-v3", "deepseek-v3")],
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

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
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM

import tmath

HF_DIR = Path(__file__).parent / "hf_configs"
HF_FILES = sorted(HF_DIR.glob("*.json"))

transformers.logging.set_verbosity_error()


def hf_config(d: dict) -> transformers.PretrainedConfig:
    d = dict(d)
    mt = d.pop("model_type")
    return AutoConfig.for_model(mt, **d)


def hf_param_count(d: dict) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(d))
    return sum(p.numel() for p in model.parameters())


def preset_to_hf(cfg: tmath.ModelConfig) -> dict:
    """The test's own mapping of a preset back to a transformers config dict."""
    if cfg.model_type == "gpt2":
        return dict(model_type="gpt2", n_embd=cfg.hidden_size, n_layer=cfg.num_layers,
                    n_head=cfg.num_heads, n_positions=cfg.max_position, n_inner=cfg.intermediate_size,
                    vocab_size=cfg.vocab_size, tie_word_embeddings=cfg.tie_embeddings)
    d = dict(model_type=cfg.model_type, hidden_size=cfg.hidden_size,
             intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.num_layers,
             num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
             vocab_size=cfg.vocab_size, max_position_embeddings=cfg.max_position,
             tie_word_embeddings=cfg.tie_embeddings)
    if cfg.model_type in ("llama", "mistral", "mixtral", "qwen2"):
        d["head_dim"] = cfg.head_dim
    if cfg.model_type == "llama":
        d.update(attention_bias=cfg.qkv_bias, mlp_bias=cfg.mlp_bias)
    if cfg.model_type == "mixtral":
        d.update(num_local_experts=cfg.n_routed_experts, num_experts_per_tok=cfg.experts_per_token)
    if cfg.model_type == "deepseek_v3":
        d.update(n_routed_experts=cfg.n_routed_experts, n_shared_experts=cfg.n_shared_experts,
                 num_experts_per_tok=cfg.experts_per_token, first_k_dense_replace=cfg.first_k_dense,
                 moe_intermediate_size=cfg.moe_intermediate_size, q_lora_rank=cfg.q_lora_rank,
                 kv_lora_rank=cfg.kv_lora_rank, qk_rope_head_dim=cfg.qk_rope_head_dim,
                 qk_nope_head_dim=cfg.qk_nope_head_dim, v_head_dim=cfg.v_head_dim,
                 attention_bias=cfg.qkv_bias, n_group=1, topk_group=1)
    return d


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
SMALL_VARIANTS = {
    "llama-biases": dict(model_type="llama", hidden_size=64, intermediate_size=96,
                         num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                         vocab_size=101, attention_bias=True, mlp_bias=True),
    "llama-explicit-head-dim-mqa": dict(model_type="llama", hidden_size=64, intermediate_size=96,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=1, head_dim=24, vocab_size=99,
                                        tie_word_embeddings=True),
    "gpt2-n-inner-untied": dict(model_type="gpt2", n_embd=48, n_layer=2, n_head=6, n_inner=100,
                                n_positions=40, vocab_size=77, tie_word_embeddings=False),
    "deepseek-q-lora-null": dict(model_type="deepseek_v3", hidden_size=64, intermediate_size=96,
                                 moe_intermediate_size=32, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=4, vocab_size=97,
                                 n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2,
                                 first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=16,
                                 qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12,
                                 n_group=2, topk_group=1, attention_bias=True),
    "mixtral-small": dict(model_type="mixtral", hidden_size=64, intermediate_size=80,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          num_local_experts=4, num_experts_per_tok=2, vocab_size=90),
}


@pytest.mark.parametrize("name", SMALL_VARIANTS)
def test_params_equal_transformers_for_small_variants(name):
    d = SMALL_VARIANTS[name]
    cfg = tmath.ModelConfig.from_hf(d)
    assert tmath.count_params(cfg).total == hf_param_count(d)


# ------------------------------------------------------------------ FLOPs
FLOP_CONFIGS = {
    "gpt2-tiny": dict(model_type="gpt2", n_embd=32, n_layer=2, n_head=4, n_positions=64,
                      vocab_size=50, bos_token_id=0, eos_token_id=0),
    "llama-tiny-gqa": dict(model_type="llama", hidden_size=32, intermediate_size=48,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           vocab_size=60, bos_token_id=0, eos_token_id=0),
    "qwen2-tiny": dict(model_type="qwen2", hidden_size=32, intermediate_size=40,
                       num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                       vocab_size=70, bos_token_id=0, eos_token_id=0),
    "mistral-tiny-head-dim": dict(model_type="mistral", hidden_size=32, intermediate_size=40,
                                  num_hidden_layers=1, num_attention_heads=4,
                                  num_key_value_heads=1, head_dim=16, vocab_size=50,
                                  bos_token_id=0, eos_token_id=0),
    # MoE and MLA, with transformers' per-expert loop (experts_implementation="eager"):
    # the default grouped-mm kernel is not seen by FlopCounterMode.
    "mixtral-tiny": dict(model_type="mixtral", hidden_size=32, intermediate_size=40,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         num_local_experts=4, num_experts_per_tok=2, vocab_size=50,
                         bos_token_id=0, eos_token_id=0),
    "deepseek-v3-tiny": dict(model_type="deepseek_v3", hidden_size=32, intermediate_size=48,
                             moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                             num_key_value_heads=4, vocab_size=50, n_routed_experts=8,
                             n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
                             q_lora_rank=12, kv_lora_rank=16, qk_rope_head_dim=8,
                             qk_nope_head_dim=16, v_head_dim=12, n_group=2, topk_group=1,
                             bos_token_id=0, eos_token_id=0),
}


def measured_flops(d: dict, batch: int, seq_len: int) -> tuple[int, int]:
    torch.manual_seed(0)
    d = dict(d)
    if d["model_type"] in ("mixtral", "deepseek_v3"):
        d["experts_implementation"] = "eager"
    model = AutoModelForCausalLM.from_config(hf_config(d), attn_implementation="eager")
    vocab = d["vocab_size"]
    ids = torch.randint(0, vocab, (batch, seq_len))
    with FlopCounterMode(display=False) as fwd:
        model(ids)
    model.zero_grad()
    with FlopCounterMode(display=False) as train:
        out = model(ids)
        out.logits.sum().backward()
    return fwd.get_total_flops(), train.get_total_flops()


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

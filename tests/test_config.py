"""ModelConfig validation, the Hugging Face loader and the presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmath
from tmath.config import ModelConfig
from tmath.presets import GPT3_TABLE_2_1

LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=8, num_key_value_heads=2, vocab_size=100)


def test_gpt2_loader_maps_gpt2_names_and_defaults():
    cfg = ModelConfig.from_hf(dict(model_type="gpt2", n_embd=768, n_layer=12, n_head=12,
                                   n_positions=1024, vocab_size=50257))
    assert (cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads) == (768, 12, 12, 12)
    assert cfg.intermediate_size == 4 * 768  # n_inner None -> 4 D
    assert cfg.max_position == 1024 and cfg.learned_positions
    assert cfg.tie_embeddings  # gpt2 default
    assert cfg.head_dim == 64 and cfg.mlp == "gelu" and cfg.norm == "layernorm"
    assert ModelConfig.from_hf(dict(model_type="gpt2", n_embd=32, n_layer=1, n_head=4,
                                    n_positions=8, vocab_size=9, n_inner=50)).intermediate_size == 50


def test_llama_loader_defaults_and_explicit_head_dim():
    cfg = ModelConfig.from_hf(LLAMA)
    assert cfg.head_dim == 8 and not cfg.tie_embeddings and not cfg.qkv_bias
    assert cfg.num_groups == 4 and not cfg.is_moe and not cfg.is_mla
    cfg2 = ModelConfig.from_hf({**LLAMA, "head_dim": 32, "attention_bias": True, "mlp_bias": True})
    assert cfg2.head_dim == 32 and cfg2.qkv_bias and cfg2.out_bias and cfg2.mlp_bias
    no_kv = dict(LLAMA)
    del no_kv["num_key_value_heads"]
    assert ModelConfig.from_hf(no_kv).num_kv_heads == 8  # missing -> MHA, as transformers


def test_qwen2_has_qkv_bias_only_and_mistral_none():
    q = ModelConfig.from_hf({**LLAMA, "model_type": "qwen2"})
    assert (q.qkv_bias, q.out_bias, q.mlp_bias) == (True, False, False)
    m = ModelConfig.from_hf({**LLAMA, "model_type": "mistral", "head_dim": None})
    assert (m.qkv_bias, m.out_bias, m.mlp_bias, m.head_dim) == (False, False, False, 8)


def test_deepseek_loader_q_lora_null_and_mla():
    d = json.loads((Path(__file__).parent / "hf_configs" / "deepseek-v3.json").read_text())
    cfg = ModelConfig.from_hf({**d, "q_lora_rank": None})
    assert cfg.q_lora_rank is None and cfg.is_mla and cfg.is_moe
    assert cfg.num_kv_heads == cfg.num_heads and cfg.router_bias
    assert cfg.num_moe_layers == 58 and cfg.num_dense_layers == 3
    assert cfg.qk_head_dim == 192 and cfg.value_head_dim == 128 and cfg.rope_dim == 64


def test_from_hf_reads_path_and_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    assert ModelConfig.from_hf(tmp_path) == ModelConfig.from_hf(tmp_path / "config.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ModelConfig.from_hf(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="not found"):
        ModelConfig.from_hf(tmp_path / "missing.json")


def test_unsupported_type_lists_supported():
    with pytest.raises(ValueError) as e:
        ModelConfig.from_hf({**LLAMA, "model_type": "bert"})
    for t in ("gpt2", "llama", "mistral", "mixtral", "qwen2", "deepseek_v3"):
        assert t in str(e.value)


@pytest.mark.parametrize("field", ["hidden_size", "intermediate_size", "num_hidden_layers",
                                   "num_attention_heads", "vocab_size"])
def test_missing_field_is_named(field):
    d = dict(LLAMA)
    del d[field]
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_hf(d)


def test_contradictions_are_named():
    with pytest.raises(ValueError, match="num_kv_heads"):
        ModelConfig.from_hf({**LLAMA, "num_key_value_heads": 3})
    with pytest.raises(ValueError, match="hidden_act"):
        ModelConfig.from_hf({**LLAMA, "hidden_act": "gelu"})
    base = ModelConfig.from_hf(LLAMA)
    with pytest.raises(ValueError, match="experts_per_token"):
        base.replace(model_type="mixtral", n_routed_experts=4, experts_per_token=5,
                     moe_intermediate_size=8)
    with pytest.raises(ValueError, match="hidden_size"):
        base.replace(hidden_size=-1)
    with pytest.raises(TypeError, match="hidden_size"):
        base.replace(hidden_size=64.0)
    with pytest.raises(TypeError, match="qkv_bias"):
        base.replace(qkv_bias=1)
    with pytest.raises(ValueError, match="mlp"):
        base.replace(mlp="relu")
    with pytest.raises(ValueError, match="q_lora_rank"):
        base.replace(q_lora_rank=8)
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        base.replace(d_model=3)
    g = tmath.preset("gpt2")
    with pytest.raises(ValueError, match="head_dim"):
        g.replace(head_dim=32)


def test_replace_rederives_head_dim():
    base = ModelConfig.from_hf(LLAMA)
    assert base.replace(hidden_size=128).head_dim == 16
    assert base.replace(hidden_size=128, head_dim=8).head_dim == 8


REQUIRED_PRESETS = ["gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b",
                    "gpt3-13b", "gpt3-175b", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",
                    "llama3-8b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b", "deepseek-v3"]


def test_presets_exist_and_cite_registered_sources():
    names = tmath.presets()
    assert set(REQUIRED_PRESETS) <= set(names)
    for n in names:
        cfg = tmath.preset(n)
        assert cfg.name == n
        assert tmath.source(cfg.source).where.startswith("https://")
    with pytest.raises(ValueError, match="gpt3-175b"):
        tmath.preset("gpt-5")


def test_gpt3_presets_follow_table_2_1():
    for name, (_, L, D, N, H) in GPT3_TABLE_2_1.items():
        cfg = tmath.preset(name)
        assert cfg.vocab_size == 50257 and cfg.max_position == 2048 and cfg.tie_embeddings
        assert cfg.num_layers == L and cfg.head_dim == H
        assert cfg.intermediate_size == 4 * cfg.hidden_size
        if N * H == D:
            assert (cfg.hidden_size, cfg.num_heads) == (D, N)


def test_gpt3_table_inconsistent_rows_are_exactly_the_known_errata():
    bad = {n for n, (_, _, D, N, H) in GPT3_TABLE_2_1.items() if N * H != D}
    assert bad == {"gpt3-1.3b", "gpt3-13b"}
    assert (tmath.preset("gpt3-1.3b").num_heads, tmath.preset("gpt3-13b").hidden_size) == (16, 5120)


# ---------------------------------------------------------------- property tests
_any = st.one_of(st.none(), st.booleans(), st.integers(-3, 70), st.floats(allow_nan=True),
                 st.text(max_size=5), st.lists(st.integers(), max_size=2))
_FIELDS = ["name", "model_type", "hidden_size", "intermediate_size", "num_layers", "num_heads",
           "num_kv_heads", "vocab_size", "max_position", "mlp", "norm", "qkv_bias", "out_bias",
           "mlp_bias", "tie_embeddings", "learned_positions", "head_dim", "n_routed_experts",
           "experts_per_token", "moe_intermediate_size", "q_lora_rank", "kv_lora_rank"]


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={f: _any for f in _FIELDS}))
def test_random_bad_modelconfig_raises_only_value_or_type_error(changes):
    base = ModelConfig.from_hf(LLAMA)
    try:
        cfg = base.replace(**changes)
    except (ValueError, TypeError):
        return
    tmath.count_params(cfg)  # a config that validates must be countable


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"model_type": st.sampled_from(
    ["gpt2", "llama", "mistral", "mixtral", "qwen2", "deepseek_v3", "bert", None])},
    optional={k: _any for k in ["n_embd", "n_layer", "n_head", "n_positions", "n_inner",
                                "vocab_size", "hidden_size", "intermediate_size",
                                "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                "head_dim", "num_local_experts", "num_experts_per_tok",
                                "tie_word_embeddings", "kv_lora_rank", "q_lora_rank",
                                "hidden_act", "max_position_embeddings"]}))
def test_random_hf_dicts_raise_only_value_or_type_error(d):
    try:
        ModelConfig.from_hf(d)
    except (ValueError, TypeError):
        pass

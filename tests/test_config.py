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
    with pytest.raises(ValueError, match="不是合法的 JSON"):
        ModelConfig.from_hf(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="找不到"):
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
    with pytest.raises(ValueError, match="没有字段 d_model"):
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


# ---------------------------------------------------------------- the families of issue 15
HF = Path(__file__).parent / "hf_configs"


def _hf(name):
    return json.loads((HF / f"{name}.json").read_text())


def test_every_family_has_a_reader_and_a_rule_row():
    from tmath.config import _READERS, FAMILIES

    assert tuple(_READERS) == tuple(FAMILIES) == tmath.SUPPORTED_MODEL_TYPES
    for t in ("qwen3", "qwen3_moe", "gemma2", "gemma3_text", "phi3", "olmo2", "gpt_oss",
              "deepseek_v2"):
        assert t in tmath.SUPPORTED_MODEL_TYPES


def test_qwen3_defaults_head_dim_128_and_per_head_qk_norm():
    d = {**LLAMA, "model_type": "qwen3"}  # D/N = 8, but Qwen3Config.head_dim defaults to 128
    cfg = ModelConfig.from_hf(d)
    assert cfg.head_dim == 128 and cfg.qk_norm == "per_head" and cfg.sliding_window is None
    w = ModelConfig.from_hf({**d, "use_sliding_window": True, "sliding_window": 16,
                             "max_window_layers": 1})
    assert w.layer_types == ("full_attention", "sliding_attention") and w.layer_windows == (None, 16)
    # sliding_window without use_sliding_window is ignored, as transformers does
    assert ModelConfig.from_hf({**d, "sliding_window": 16}).sliding_window is None


def test_qwen3_moe_dense_first_layers_and_refusals():
    cfg = ModelConfig.from_hf(_hf("qwen3-30b-a3b"))
    assert (cfg.n_routed_experts, cfg.experts_per_token, cfg.first_k_dense) == (128, 8, 0)
    d = {**_hf("qwen3-30b-a3b"), "mlp_only_layers": [0, 1]}
    assert ModelConfig.from_hf(d).first_k_dense == 2
    with pytest.raises(ValueError, match="mlp_only_layers"):
        ModelConfig.from_hf({**d, "mlp_only_layers": [3]})
    with pytest.raises(ValueError, match="decoder_sparse_step"):
        ModelConfig.from_hf({**d, "decoder_sparse_step": 2})
    with pytest.raises(ValueError, match="layer_types"):
        ModelConfig.from_hf({**d, "layer_types": ["full_attention"] * 48})


def test_gemma_readers():
    g2 = ModelConfig.from_hf(_hf("gemma-2-9b"))
    assert g2.tie_embeddings and g2.head_dim == 256 != g2.hidden_size // g2.num_heads
    assert g2.norms_per_layer == 4 and g2.scaled_embeddings and g2.gate_act == "gelu_pytorch_tanh"
    assert (g2.attn_logit_softcap, g2.final_logit_softcap) == (50.0, 30.0)
    assert g2.layer_windows[:4] == (4096, None, 4096, None) and g2.num_sliding_layers == 21
    g3 = ModelConfig.from_hf(_hf("gemma-3-4b-text"))
    assert g3.qk_norm == "per_head" and g3.final_logit_softcap is None
    assert g3.layer_windows[:6] == (1024,) * 5 + (None,)  # 5 local layers to 1 global
    assert g3.num_sliding_layers == 34 - 34 // 6 and g3.rope_tables == 2
    with pytest.raises(ValueError, match="hidden_activation"):
        ModelConfig.from_hf({**_hf("gemma-2-9b"), "hidden_activation": "relu"})
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        ModelConfig.from_hf({**_hf("gemma-3-1b-it"), "use_bidirectional_attention": True})


def test_phi3_olmo2_gpt_oss_deepseek_v2_readers():
    phi = ModelConfig.from_hf(_hf("phi-3-mini-4k-instruct"))
    assert phi.fused_qkv and phi.fused_gate_up and phi.sliding_window == 2047
    assert phi.layer_types is None and phi.num_sliding_layers == 32
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        ModelConfig.from_hf({**_hf("phi-3-mini-4k-instruct"), "partial_rotary_factor": 0.75})
    olmo = ModelConfig.from_hf(_hf("olmo-2-1124-7b"))
    assert olmo.qk_norm == "full_width" and olmo.sliding_window is None
    oss = ModelConfig.from_hf(_hf("gpt-oss-20b"))
    assert oss.attention_sinks and oss.expert_bias and oss.router_linear_bias and oss.qkv_bias
    assert oss.layer_windows[:2] == (128, None) and oss.moe_intermediate_size == 2880
    ds = ModelConfig.from_hf(_hf("deepseek-v2-lite"))
    assert ds.q_lora_rank is None and ds.is_mla and not ds.router_bias
    assert (ds.first_k_dense, ds.n_shared_experts, ds.head_dim) == (1, 2, 192)


def test_deepseek_defaults_follow_transformers_config_classes():
    v3 = {k: v for k, v in _hf("deepseek-v3").items()
          if k not in ("q_lora_rank", "first_k_dense_replace")}
    cfg = ModelConfig.from_hf(v3)  # DeepseekV3Config: q_lora_rank 1536, first_k_dense_replace 3
    assert (cfg.q_lora_rank, cfg.first_k_dense) == (1536, 3)
    v2 = {k: v for k, v in _hf("deepseek-v2-lite").items()
          if k not in ("q_lora_rank", "first_k_dense_replace")}
    cfg = ModelConfig.from_hf(v2)  # DeepseekV2Config: q_lora_rank 1536, first_k_dense_replace 0
    assert (cfg.q_lora_rank, cfg.first_k_dense) == (1536, 0)


def test_mistral_window_default_follows_transformers():
    assert ModelConfig.from_hf({**LLAMA, "model_type": "mistral"}).sliding_window == 4096
    assert ModelConfig.from_hf({**LLAMA, "model_type": "mistral",
                                "sliding_window": None}).sliding_window is None
    assert ModelConfig.from_hf(HF / "mistral-7b.json").sliding_window == 4096
    assert tmath.preset("mistral-7b").sliding_window == 4096
    assert ModelConfig.from_hf(HF / "mixtral-8x7b.json").sliding_window is None


def test_new_field_validation_names_the_field():
    base = ModelConfig.from_hf(LLAMA)
    with pytest.raises(ValueError, match="attention_sinks"):
        base.replace(attention_sinks=True)
    with pytest.raises(ValueError, match="qk_norm"):
        base.replace(qk_norm="per_head")
    with pytest.raises(ValueError, match="qk_norm"):
        base.replace(qk_norm="rms")
    with pytest.raises(ValueError, match="norms_per_layer"):
        base.replace(norms_per_layer=3)
    with pytest.raises(ValueError, match="sliding"):
        base.replace(sliding_window=8)  # llama has no windows
    m = base.replace(model_type="mistral", sliding_window=8)
    assert m.layer_windows == (8, 8)
    with pytest.raises(ValueError, match="sliding_window"):
        m.replace(sliding_window=0)
    with pytest.raises(TypeError, match="sliding_window"):
        m.replace(sliding_window=8.0)
    with pytest.raises(ValueError, match="layer_types"):
        m.replace(layer_types=("full_attention", "sliding_attention"))  # mistral: all alike
    g = ModelConfig.from_hf(_hf("gemma-2-9b"))
    with pytest.raises(ValueError, match="layer_types 有 2 项"):
        g.replace(layer_types=("full_attention",) * 2)
    with pytest.raises(ValueError, match="layer_types 含有"):
        g.replace(layer_types=("local",) * 42)
    with pytest.raises(ValueError, match="sliding_window 为 None"):
        g.replace(sliding_window=None)
    with pytest.raises(ValueError, match="norms_per_layer"):
        g.replace(norms_per_layer=2)
    with pytest.raises(ValueError, match="attn_logit_softcap"):
        g.replace(attn_logit_softcap=-1.0)
    with pytest.raises(ValueError, match="gate_act"):
        g.replace(gate_act="relu")
    oss = ModelConfig.from_hf(_hf("gpt-oss-20b"))
    with pytest.raises(ValueError, match="expert_bias"):
        oss.replace(expert_bias=False)
    with pytest.raises(ValueError, match="router_linear_bias"):
        ModelConfig.from_hf(_hf("qwen3-30b-a3b")).replace(router_linear_bias=True)
    with pytest.raises(ValueError, match="qkv_bias=out_bias"):
        oss.replace(out_bias=False)
    ds = ModelConfig.from_hf(_hf("deepseek-v2-lite"))
    with pytest.raises(ValueError, match="n_shared_experts"):
        ds.replace(n_shared_experts=0)
    with pytest.raises(ValueError, match="shared experts"):
        ModelConfig.from_hf(_hf("qwen3-30b-a3b")).replace(n_shared_experts=1)


def test_architectures_must_match_model_type():
    d = _hf("qwen3-8b")
    with pytest.raises(ValueError, match="Qwen3ForCausalLM"):
        ModelConfig.from_hf({**d, "model_type": "qwen2"})
    with pytest.raises(ValueError, match="architectures"):
        ModelConfig.from_hf({**_hf("qwen3-30b-a3b"), "model_type": "qwen3"})
    assert ModelConfig.from_hf(d).model_type == "qwen3"


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"model_type": st.sampled_from(
    ["qwen3", "qwen3_moe", "gemma2", "gemma3_text", "phi3", "olmo2", "gpt_oss", "deepseek_v2"])},
    optional={k: _any for k in ["hidden_size", "intermediate_size", "num_hidden_layers",
                                "num_attention_heads", "num_key_value_heads", "head_dim",
                                "vocab_size", "num_experts", "num_local_experts",
                                "num_experts_per_tok", "moe_intermediate_size", "sliding_window",
                                "use_sliding_window", "layer_types", "sliding_window_pattern",
                                "mlp_only_layers", "max_window_layers", "attention_bias",
                                "q_lora_rank", "kv_lora_rank", "n_routed_experts",
                                "n_shared_experts", "qk_rope_head_dim", "qk_nope_head_dim",
                                "v_head_dim", "architectures", "partial_rotary_factor",
                                "attn_logit_softcapping"]}))
def test_random_new_family_dicts_raise_only_value_or_type_error(d):
    try:
        cfg = ModelConfig.from_hf(d)
    except (ValueError, TypeError):
        return
    tmath.count_params(cfg)
    tmath.kv_cache_bytes_sequence(cfg, 7)

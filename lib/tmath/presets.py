"""Named model configurations, each citing its source (a key of :mod:`tmath.sources`).

GPT-3 (Brown et al. 2020, Table 2.1) uses the GPT-2 architecture: learned
positions, LayerNorm with bias, biases everywhere, a 2-matrix GELU MLP with
F = 4·D, context 2048, the GPT-2 vocabulary of 50257 tokens, tied embeddings.
Two rows of the printed table are not self-consistent (n_heads·d_head ≠
d_model); :data:`GPT3_TABLE_2_1` keeps the printed values and the presets
resolve them as documented there.
"""

from __future__ import annotations

from tmath.config import ModelConfig

# Printed rows of GPT-3 Table 2.1: name -> (n_params as printed, n_layers, d_model, n_heads, d_head)
GPT3_TABLE_2_1: dict[str, tuple[str, int, int, int, int]] = {
    "gpt3-125m": ("125M", 12, 768, 12, 64),
    "gpt3-350m": ("350M", 24, 1024, 16, 64),
    "gpt3-760m": ("760M", 24, 1536, 16, 96),
    "gpt3-1.3b": ("1.3B", 24, 2048, 24, 128),
    "gpt3-2.7b": ("2.7B", 32, 2560, 32, 80),
    "gpt3-6.7b": ("6.7B", 32, 4096, 32, 128),
    "gpt3-13b": ("13.0B", 40, 5140, 40, 128),
    "gpt3-175b": ("175.0B", 96, 12288, 96, 128),
}
# How the presets resolve the inconsistent rows (GPT-2 attention needs n_heads·d_head = d_model):
#   gpt3-1.3b: 24 heads × 128 = 3072 ≠ 2048; keep d_model = 2048 and d_head = 128 → 16 heads.
#   gpt3-13b:  40 heads × 128 = 5120 ≠ 5140; keep n_heads = 40 and d_head = 128 → d_model = 5120.
GPT3_RESOLVED: dict[str, tuple[int, int, int]] = {  # name -> (n_layers, d_model, n_heads)
    "gpt3-125m": (12, 768, 12),
    "gpt3-350m": (24, 1024, 16),
    "gpt3-760m": (24, 1536, 16),
    "gpt3-1.3b": (24, 2048, 16),
    "gpt3-2.7b": (32, 2560, 32),
    "gpt3-6.7b": (32, 4096, 32),
    "gpt3-13b": (40, 5120, 40),
    "gpt3-175b": (96, 12288, 96),
}
GPT2_VOCAB = 50257  # GPT-2 BPE vocabulary, also GPT-3's (source: radford2019gpt2)


def _gpt2_arch(name: str, L: int, D: int, N: int, ctx: int, source: str) -> ModelConfig:
    return ModelConfig(
        name=name, model_type="gpt2", hidden_size=D, intermediate_size=4 * D, num_layers=L,
        num_heads=N, num_kv_heads=N, vocab_size=GPT2_VOCAB, max_position=ctx, mlp="gelu",
        norm="layernorm", qkv_bias=True, out_bias=True, mlp_bias=True, tie_embeddings=True,
        learned_positions=True, source=source,
    )


def _llama(name: str, D: int, F: int, L: int, N: int, K: int, V: int, ctx: int,
           source: str, model_type: str = "llama", **kw: object) -> ModelConfig:
    return ModelConfig(
        name=name, model_type=model_type, hidden_size=D, intermediate_size=F, num_layers=L,
        num_heads=N, num_kv_heads=K, vocab_size=V, max_position=ctx, mlp="gated",
        norm="rmsnorm", qkv_bias=model_type == "qwen2", out_bias=False, mlp_bias=False,
        tie_embeddings=False, learned_positions=False, source=source, **kw,  # type: ignore[arg-type]
    )


def _build() -> dict[str, ModelConfig]:
    p: dict[str, ModelConfig] = {}
    for name, (L, D, N) in GPT3_RESOLVED.items():
        p[name] = _gpt2_arch(name, L, D, N, 2048, "brown2020gpt3")
    # Hugging Face configs of the GPT-2 checkpoints (n_positions 1024).
    for name, L, D, N in (("gpt2", 12, 768, 12), ("gpt2-medium", 24, 1024, 16),
                          ("gpt2-large", 36, 1280, 20), ("gpt2-xl", 48, 1600, 25)):
        p[name] = _gpt2_arch(name, L, D, N, 1024, "radford2019gpt2")
    p["llama3-8b"] = _llama("llama3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, "meta2024llama3_8b")
    p["llama3-70b"] = _llama("llama3-70b", 8192, 28672, 80, 64, 8, 128256, 8192,
                             "meta2024llama3_70b")
    p["llama3.1-405b"] = _llama("llama3.1-405b", 16384, 53248, 126, 128, 8, 128256, 131072,
                                "meta2024llama31_405b")
    p["mistral-7b"] = _llama("mistral-7b", 4096, 14336, 32, 32, 8, 32000, 32768,
                             "mistral2023mistral7b", model_type="mistral",
                             sliding_window=4096)
    p["qwen2-7b"] = _llama("qwen2-7b", 3584, 18944, 28, 28, 4, 152064, 32768,
                           "qwen2024qwen2_7b", model_type="qwen2")
    p["mixtral-8x7b"] = _llama("mixtral-8x7b", 4096, 14336, 32, 32, 8, 32000, 32768,
                               "mistral2024mixtral", model_type="mixtral", n_routed_experts=8,
                               experts_per_token=2, moe_intermediate_size=14336)
    p["deepseek-v3"] = ModelConfig(
        name="deepseek-v3", model_type="deepseek_v3", hidden_size=7168, intermediate_size=18432,
        num_layers=61, num_heads=128, num_kv_heads=128, head_dim=192, vocab_size=129280,
        max_position=163840, mlp="gated", norm="rmsnorm", qkv_bias=False, out_bias=False,
        mlp_bias=False, tie_embeddings=False, learned_positions=False,
        n_routed_experts=256, n_shared_experts=1, experts_per_token=8, first_k_dense=3,
        moe_intermediate_size=2048, router_bias=True, q_lora_rank=1536, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, num_nextn_predict_layers=1,
        source="deepseek2024v3",
    )
    # Three MoE families of issue 15, from their official config.json files.
    p["qwen3-30b-a3b"] = ModelConfig(
        name="qwen3-30b-a3b", model_type="qwen3_moe", hidden_size=2048, intermediate_size=6144,
        num_layers=48, num_heads=32, num_kv_heads=4, head_dim=128, vocab_size=151936,
        max_position=40960, mlp="gated", norm="rmsnorm", qkv_bias=False, out_bias=False,
        mlp_bias=False, tie_embeddings=False, learned_positions=False, qk_norm="per_head",
        n_routed_experts=128, experts_per_token=8, moe_intermediate_size=768,
        source="qwen2025qwen3_30b_a3b",
    )
    p["gpt-oss-20b"] = ModelConfig(
        name="gpt-oss-20b", model_type="gpt_oss", hidden_size=2880, intermediate_size=2880,
        num_layers=24, num_heads=64, num_kv_heads=8, head_dim=64, vocab_size=201088,
        max_position=131072, mlp="gated", norm="rmsnorm", qkv_bias=True, out_bias=True,
        mlp_bias=False, tie_embeddings=False, learned_positions=False, gate_act="swiglu_clamp",
        attention_sinks=True, n_routed_experts=32, experts_per_token=4,
        moe_intermediate_size=2880, expert_bias=True, router_linear_bias=True,
        sliding_window=128, layer_types=("sliding_attention", "full_attention") * 12,
        source="openai2025gptoss20b",
    )
    # Gemma 2 27B (google/gemma-2-27b config.json): the crossover chapter checks the seed's
    # "Gemma-27B: 37k" against it. Windows of 4096 on every other layer (first one local),
    # tied and scaled embeddings, four RMSNorms a layer, logit soft-capping.
    p["gemma-2-27b"] = ModelConfig(
        name="gemma-2-27b", model_type="gemma2", hidden_size=4608, intermediate_size=36864,
        num_layers=46, num_heads=32, num_kv_heads=16, head_dim=128, vocab_size=256000,
        max_position=8192, mlp="gated", norm="rmsnorm", qkv_bias=False, out_bias=False,
        mlp_bias=False, tie_embeddings=True, learned_positions=False, norms_per_layer=4,
        sliding_window=4096, layer_types=("sliding_attention", "full_attention") * 23,
        gate_act="gelu_pytorch_tanh", scaled_embeddings=True, attn_logit_softcap=50.0,
        final_logit_softcap=30.0, source="google2024gemma2_27b",
    )
    # Gemma 2 9B (google/gemma-2-9b config.json, tests/hf_configs/gemma-2-9b.json): the same
    # family at a smaller width, for the crossover chapter's windowed models.
    p["gemma-2-9b"] = ModelConfig(
        name="gemma-2-9b", model_type="gemma2", hidden_size=3584, intermediate_size=14336,
        num_layers=42, num_heads=16, num_kv_heads=8, head_dim=256, vocab_size=256000,
        max_position=8192, mlp="gated", norm="rmsnorm", qkv_bias=False, out_bias=False,
        mlp_bias=False, tie_embeddings=True, learned_positions=False, norms_per_layer=4,
        sliding_window=4096, layer_types=("sliding_attention", "full_attention") * 21,
        gate_act="gelu_pytorch_tanh", scaled_embeddings=True, attn_logit_softcap=50.0,
        final_logit_softcap=30.0, source="google2024gemma2",
    )
    p["deepseek-v2-lite"] = ModelConfig(
        name="deepseek-v2-lite", model_type="deepseek_v2", hidden_size=2048,
        intermediate_size=10944, num_layers=27, num_heads=16, num_kv_heads=16, head_dim=192,
        vocab_size=102400, max_position=163840, mlp="gated", norm="rmsnorm", qkv_bias=False,
        out_bias=False, mlp_bias=False, tie_embeddings=False, learned_positions=False,
        n_routed_experts=64, n_shared_experts=2, experts_per_token=6, first_k_dense=1,
        moe_intermediate_size=1408, q_lora_rank=None, kv_lora_rank=512, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128, source="deepseek2024v2lite",
    )
    return p


_PRESETS = _build()


def presets() -> list[str]:
    """Names accepted by :func:`preset`."""
    return list(_PRESETS)


def preset(name: str) -> ModelConfig:
    """A named configuration (see :func:`presets`); its ``source`` names the citation."""
    try:
        return _PRESETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(_PRESETS)}") from None

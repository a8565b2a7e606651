"""Hypothesis strategies for valid ModelConfigs (shared by the ledger tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from tmath.config import ModelConfig


@st.composite
def dense_configs(draw, model_type=None):
    mt = draw(st.sampled_from(["gpt2", "llama", "mistral", "qwen2"])) if model_type is None \
        else model_type
    K = draw(st.integers(1, 4))
    N = K * draw(st.integers(1, 4))
    H = 2 * draw(st.integers(1, 8))
    gpt2 = mt == "gpt2"
    if gpt2:
        K = N
    D = N * H if gpt2 or draw(st.booleans()) else draw(st.integers(1, 64))
    bias = draw(st.booleans()) if mt == "llama" else False
    return ModelConfig(
        name="rand", model_type=mt, hidden_size=D, intermediate_size=draw(st.integers(1, 128)),
        num_layers=draw(st.integers(1, 4)), num_heads=N, num_kv_heads=K, head_dim=H,
        vocab_size=draw(st.integers(1, 1000)), max_position=draw(st.integers(1, 256)),
        mlp="gelu" if gpt2 else "gated", norm="layernorm" if gpt2 else "rmsnorm",
        qkv_bias=gpt2 or mt == "qwen2" or bias, out_bias=gpt2 or bias,
        mlp_bias=gpt2 or (bias and draw(st.booleans())),
        tie_embeddings=draw(st.booleans()), learned_positions=gpt2,
    )


@st.composite
def moe_configs(draw):
    base = draw(dense_configs(model_type="llama"))
    E = draw(st.integers(1, 8))
    mla = draw(st.booleans())
    changes = dict(n_routed_experts=E, experts_per_token=draw(st.integers(1, E)),
                   moe_intermediate_size=draw(st.integers(1, 64)), qkv_bias=False,
                   out_bias=False, mlp_bias=False)
    if mla:
        changes.update(model_type="deepseek_v3", num_kv_heads=base.num_heads,
                       n_shared_experts=draw(st.integers(0, 2)),
                       first_k_dense=draw(st.integers(0, base.num_layers - 1)),
                       q_lora_rank=draw(st.one_of(st.none(), st.integers(1, 32))),
                       kv_lora_rank=draw(st.integers(1, 32)),
                       qk_rope_head_dim=2 * draw(st.integers(1, 8)),
                       qk_nope_head_dim=draw(st.integers(1, 16)),
                       v_head_dim=draw(st.integers(1, 16)), router_bias=True)
        changes["head_dim"] = changes["qk_rope_head_dim"] + changes["qk_nope_head_dim"]
    else:
        changes.update(model_type="mixtral")
    return base.replace(**changes)


any_configs = st.one_of(dense_configs(), moe_configs())

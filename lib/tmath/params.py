"""Exact parameter counts, matching the Hugging Face transformers implementations.

Convention: ``count_params(cfg).total`` equals
``sum(p.numel() for p in model.parameters())`` of
``AutoModelForCausalLM.from_config(...)`` in transformers (tied weights once).
Buffers (rotary tables, DeepSeek's ``e_score_correction_bias``) are not
parameters. Breakdown keys (fixed):

``embedding``       token embedding V·D
``positions``       learned position embedding (GPT-2) max_position·D
``attention``       Q/K/V/O projections with their biases (MLA: all its projections; gpt-oss's
                    attention sinks, N per layer)
``mlp``             dense MLPs (all layers of a dense model, the first_k_dense layers of a MoE)
``routed_experts``  the routed experts of the MoE layers (with their biases, gpt-oss)
``shared_experts``  the shared experts of the MoE layers
``router``          the router (gate) matrices E·D (+ E with a router bias, gpt-oss)
``norms``           every normalisation weight (and LayerNorm bias), incl. MLA's latent norms,
                    q/k norms (Qwen3, Gemma 3: H each; OLMo 2: N·H and K·H) and Gemma's
                    four norms per layer
``lm_head``         the output projection D·V (0 when tied to the embedding)

``active`` counts what one token touches: everything except the routed experts,
of which only ``experts_per_token`` per MoE layer are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tmath.config import ModelConfig

BREAKDOWN_KEYS: tuple[str, ...] = (
    "embedding",
    "positions",
    "attention",
    "mlp",
    "routed_experts",
    "shared_experts",
    "router",
    "norms",
    "lm_head",
)


@dataclass(frozen=True)
class ParamCount:
    """Result of :func:`count_params`: ``total``, ``active`` (per token) and ``breakdown``."""

    total: int
    active: int
    breakdown: dict[str, int] = field(default_factory=dict)
    active_breakdown: dict[str, int] = field(default_factory=dict)


def _norm_params(cfg: ModelConfig, width: int) -> int:
    return 2 * width if cfg.norm == "layernorm" else width


def attention_params_per_layer(cfg: ModelConfig) -> int:
    """Projection weights and biases of one attention block, and its sinks (no norms).

    Phi-3's fused ``qkv_proj`` is the Q, K and V matrices concatenated: the same count.
    """
    D, N = cfg.hidden_size, cfg.num_heads
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        b = cfg.qkv_bias  # transformers' attention_bias: q_a_proj, kv_a_proj and o_proj
        if cfg.q_lora_rank is None:
            q = D * N * qk  # q_proj has no bias
        else:
            r = cfg.q_lora_rank
            q = D * r + (r if b else 0) + r * N * qk
        kv_a = D * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
        kv_a += (cfg.kv_lora_rank + cfg.qk_rope_head_dim) if b else 0
        kv_b = cfg.kv_lora_rank * N * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        o = N * cfg.v_head_dim * D + (D if cfg.out_bias else 0)
        return q + kv_a + kv_b + o
    H, K = cfg.head_dim, cfg.num_kv_heads
    qkv = D * (N + 2 * K) * H + ((N + 2 * K) * H if cfg.qkv_bias else 0)
    o = N * H * D + (D if cfg.out_bias else 0)
    return qkv + o + (N if cfg.attention_sinks else 0)


def mlp_params(cfg: ModelConfig, width: int, bias: bool | None = None) -> int:
    """One MLP of inner width ``width`` (2-matrix GELU or 3-matrix gated)."""
    D = cfg.hidden_size
    bias = cfg.mlp_bias if bias is None else bias
    if cfg.mlp == "gelu":
        return 2 * D * width + ((width + D) if bias else 0)
    return 3 * D * width + ((2 * width + D) if bias else 0)


def qk_norm_params_per_layer(cfg: ModelConfig) -> int:
    """Weights of one layer's query and key RMSNorms (0 without q/k norms)."""
    if cfg.qk_norm == "per_head":
        return 2 * cfg.head_dim
    if cfg.qk_norm == "full_width":
        return (cfg.num_heads + cfg.num_kv_heads) * cfg.head_dim
    return 0


def norm_params_per_layer(cfg: ModelConfig) -> int:
    """The norms of a block (2, or Gemma's 4), plus MLA's latent norms and q/k norms."""
    n = cfg.norms_per_layer * _norm_params(cfg, cfg.hidden_size)
    if cfg.is_mla:
        n += cfg.kv_lora_rank + (cfg.q_lora_rank or 0)
    return n + qk_norm_params_per_layer(cfg)


def expert_params(cfg: ModelConfig) -> int:
    """One routed expert: a gated MLP of width ``moe_intermediate_size`` (biases with expert_bias)."""
    return mlp_params(cfg, cfg.moe_intermediate_size, bias=cfg.expert_bias)


def moe_layer_params(cfg: ModelConfig) -> dict[str, int]:
    """Routed experts, shared experts and router of one MoE layer.

    Shared experts carry ``mlp_bias`` like the dense MLP (DeepSeek V2's
    ``mlp_bias``; False for every other family).
    """
    E, Fm = cfg.n_routed_experts, cfg.moe_intermediate_size
    return {
        "routed_experts": E * expert_params(cfg),
        "shared_experts": mlp_params(cfg, cfg.n_shared_experts * Fm)
        if cfg.n_shared_experts
        else 0,
        "router": E * cfg.hidden_size + (E if cfg.router_linear_bias else 0),
    }


def count_params(cfg: ModelConfig) -> ParamCount:
    """Exact parameter count of ``cfg`` with its breakdown; see the module docstring."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    D, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_layers
    b = dict.fromkeys(BREAKDOWN_KEYS, 0)
    b["embedding"] = V * D
    b["positions"] = cfg.max_position * D if cfg.learned_positions else 0
    b["attention"] = L * attention_params_per_layer(cfg)
    b["mlp"] = cfg.num_dense_layers * mlp_params(cfg, cfg.intermediate_size)
    b["norms"] = L * norm_params_per_layer(cfg) + _norm_params(cfg, D)
    b["lm_head"] = 0 if cfg.tie_embeddings else V * D
    if cfg.is_moe:
        for k, v in moe_layer_params(cfg).items():
            b[k] = cfg.num_moe_layers * v
    total = sum(b.values())
    active_b = dict(b)
    if cfg.is_moe:
        active_b["routed_experts"] = cfg.num_moe_layers * cfg.experts_per_token * expert_params(cfg)
    return ParamCount(total=total, active=sum(active_b.values()), breakdown=b,
                      active_breakdown=active_b)


def mtp_params(cfg: ModelConfig) -> int:
    """Parameters of DeepSeek V3's multi-token-prediction (MTP) modules, not shared.

    Each MTP module (DeepSeek-V3 report, sec. 2.2) has two RMSNorms (``enorm``,
    ``hnorm``, D each), a projection ``eh_proj`` (2D → D, no bias), one more
    decoder layer (a MoE layer here, since its index is >= first_k_dense) and
    the ``shared_head`` norm (D); its embedding and output head are shared with
    the main model, so they are not counted. transformers does not build these
    modules, so they are not in :func:`count_params`.
    """
    if cfg.num_nextn_predict_layers == 0:
        return 0
    D = cfg.hidden_size
    layer = attention_params_per_layer(cfg) + norm_params_per_layer(cfg)
    if cfg.is_moe:
        layer += sum(moe_layer_params(cfg).values())
    else:
        layer += mlp_params(cfg, cfg.intermediate_size)
    per_module = 2 * D + 2 * D * D + layer + D
    return cfg.num_nextn_predict_layers * per_module

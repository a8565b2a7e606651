"""Model configurations: :class:`ModelConfig` and the Hugging Face ``config.json`` loader.

Notation used across the ledger modules (and the book):

====  ==========================================================
D     ``hidden_size`` (d_model)
F     ``intermediate_size`` (dense FFN width)
L     ``num_layers``
N     ``num_heads`` (query heads)
K     ``num_kv_heads`` (K = N: MHA, 1 < K < N: GQA, K = 1: MQA)
H     ``head_dim``
V     ``vocab_size``
W     ``sliding_window`` (keys a query of a sliding-window layer sees, itself included)
====  ==========================================================

The architectural switches (``mlp``, ``norm``, biases, tied embeddings, learned
positions, MoE, MLA, q/k norms, sliding windows, sinks, ...) are exactly the
ones that change a parameter, FLOP or KV-cache count in the Hugging Face
transformers implementations of the supported ``model_type`` values, plus a
few that change no count but are recorded so that a config is described
faithfully (softcapping, scaled embeddings, the gate activation, fused
projections). Each family's ``config.json`` reader is one small entry of
:data:`_READERS`, and each family's constraints one entry of :data:`FAMILIES`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SUPPORTED_MODEL_TYPES: tuple[str, ...] = (
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "deepseek_v3",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
    "gpt_oss",
    "deepseek_v2",
)
MLP_KINDS = ("gelu", "gated")
NORM_KINDS = ("layernorm", "rmsnorm")
QK_NORM_KINDS = ("none", "per_head", "full_width")
GATE_ACTS = ("silu", "gelu_pytorch_tanh", "swiglu_clamp")
LAYER_TYPES = ("full_attention", "sliding_attention")

_INT_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "vocab_size",
    "max_position",
)
_NONNEG_INT_FIELDS = (
    "n_routed_experts",
    "n_shared_experts",
    "experts_per_token",
    "first_k_dense",
    "moe_intermediate_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "num_nextn_predict_layers",
)
_BOOL_FIELDS = (
    "qkv_bias",
    "out_bias",
    "mlp_bias",
    "tie_embeddings",
    "learned_positions",
    "router_bias",
    "attention_sinks",
    "expert_bias",
    "router_linear_bias",
    "scaled_embeddings",
    "fused_qkv",
    "fused_gate_up",
)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class Family:
    """What one ``model_type`` allows: one row of :data:`FAMILIES`.

    ``fixed``: fields whose value the family dictates. ``biases``: ``"all"``
    (GPT-2), ``"free"`` (Llama: any), ``"none"``, ``"qkv"`` (Qwen2: q/k/v only),
    ``"attn"`` (one ``attention_bias`` for q/k/v/o, no MLP bias) or
    ``"attn+mlp"`` (``attention_bias`` for q/k/v/o, ``mlp_bias`` free).
    ``moe`` / ``mla``: ``"required"``, ``"never"`` (or ``"optional"``).
    ``allowed``: the optional fields (default off) this family may switch on.
    ``windows``: ``"none"``, ``"all"`` (one window for every layer, no
    ``layer_types``) or ``"per_layer"`` (``layer_types`` may mix).
    """

    fixed: Mapping[str, Any]
    biases: str
    moe: str = "never"
    mla: str = "never"
    allowed: frozenset[str] = frozenset()
    windows: str = "none"


# Optional fields and their "off" value; a family may switch on only those in its ``allowed``.
_OPTIONAL_DEFAULTS: dict[str, Any] = {
    "qk_norm": "none",
    "norms_per_layer": 2,
    "attention_sinks": False,
    "expert_bias": False,
    "router_linear_bias": False,
    "router_bias": False,
    "scaled_embeddings": False,
    "attn_logit_softcap": None,
    "final_logit_softcap": None,
    "fused_qkv": False,
    "fused_gate_up": False,
    "num_nextn_predict_layers": 0,
}

_GPT2 = dict(mlp="gelu", norm="layernorm", learned_positions=True)
_ROPE = dict(mlp="gated", norm="rmsnorm", learned_positions=False, gate_act="silu")
_GEMMA = dict(mlp="gated", norm="rmsnorm", learned_positions=False, norms_per_layer=4,
              scaled_embeddings=True, gate_act="gelu_pytorch_tanh")
_SOFTCAPS = frozenset({"attn_logit_softcap", "final_logit_softcap"})

FAMILIES: dict[str, Family] = {
    "gpt2": Family(_GPT2, "all"),
    "llama": Family(_ROPE, "free"),
    "mistral": Family(_ROPE, "none", windows="all"),
    "mixtral": Family(_ROPE, "none", moe="required", windows="all"),
    "qwen2": Family(_ROPE, "qkv", windows="per_layer"),
    "deepseek_v3": Family(_ROPE, "attn", moe="required", mla="required",
                          allowed=frozenset({"router_bias", "num_nextn_predict_layers"})),
    "qwen3": Family({**_ROPE, "qk_norm": "per_head"}, "attn", windows="per_layer"),
    "qwen3_moe": Family({**_ROPE, "qk_norm": "per_head"}, "attn", moe="required", windows="all"),
    "gemma2": Family(_GEMMA, "attn", allowed=_SOFTCAPS, windows="per_layer"),
    "gemma3_text": Family({**_GEMMA, "qk_norm": "per_head"}, "attn", allowed=_SOFTCAPS,
                          windows="per_layer"),
    "phi3": Family({**_ROPE, "fused_qkv": True, "fused_gate_up": True}, "none", windows="all"),
    "olmo2": Family({**_ROPE, "qk_norm": "full_width"}, "attn"),
    "gpt_oss": Family({**_ROPE, "gate_act": "swiglu_clamp", "attention_sinks": True,
                       "expert_bias": True, "router_linear_bias": True}, "attn", moe="required",
                      windows="per_layer"),
    "deepseek_v2": Family(_ROPE, "attn+mlp", moe="required", mla="required"),
}
# Families whose MoE layers may have shared experts and dense first layers.
_SHARED_EXPERTS = ("deepseek_v3", "deepseek_v2")
_DENSE_FIRST = ("deepseek_v3", "deepseek_v2", "qwen3_moe")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer, enough to count it exactly.

    ``head_dim`` may be given explicitly (``None`` → ``hidden_size // num_heads``).
    MoE (``n_routed_experts > 0``): layers ``first_k_dense ..`` use a router over
    ``n_routed_experts`` gated experts of width ``moe_intermediate_size``, of which
    ``experts_per_token`` are active per token, plus ``n_shared_experts`` always-on
    experts (one gated MLP of width ``n_shared_experts * moe_intermediate_size``);
    the first ``first_k_dense`` layers use a dense MLP of width ``intermediate_size``.
    MLA (``kv_lora_rank > 0``, DeepSeek V2/V3): queries go through an optional
    low-rank ``q_lora_rank`` bottleneck, keys and values through a
    ``kv_lora_rank`` latent plus a shared ``qk_rope_head_dim`` rotary key.
    ``router_bias`` records DeepSeek V3's ``e_score_correction_bias``; it is a
    buffer adjusted outside back-propagation, so it is not a parameter (as in
    transformers). ``num_nextn_predict_layers`` records DeepSeek V3's
    multi-token-prediction (MTP) modules, which transformers does not build:
    they are counted by :func:`tmath.mtp_params`, never in ``count_params``.
    ``source`` is a key of :mod:`tmath.sources` (``""`` for ad-hoc configs).

    Fields that change a count:

    * ``qk_norm``: RMSNorm of queries and keys before attention: ``"per_head"``
      (Qwen3, Gemma 3: one weight of H for q and one for k per layer) or
      ``"full_width"`` (OLMo 2: N·H for q and K·H for k per layer).
    * ``norms_per_layer``: 2 (pre- or post-norms) or 4 (Gemma 2/3: pre and post
      around both attention and MLP).
    * ``sliding_window`` W and ``layer_types`` (per layer ``"full_attention"``
      or ``"sliding_attention"``; ``None`` means every layer is windowed when
      ``sliding_window`` is set, as transformers' cache assumes). A query of a
      window layer sees the W most recent positions, itself included. Eager
      attention still computes the whole masked T×T matrix, so FLOPs are
      unchanged by default; the KV cache keeps min(T, W) positions per window
      layer (see :mod:`tmath.kvcache`).
    * ``attention_sinks``: gpt-oss's learned per-head sink logit, N per layer.
    * ``expert_bias``: biases of the routed experts (gpt-oss: 2·F_e + D each).
    * ``router_linear_bias``: a learned bias of the router's linear layer, E per
      MoE layer, a parameter (gpt-oss); unlike ``router_bias`` above.

    Fields recorded that change no count (element-wise or layout only):
    ``attn_logit_softcap`` / ``final_logit_softcap`` (Gemma 2's tanh softcapping
    of the attention scores and of the logits), ``scaled_embeddings`` (Gemma's
    embedding output × √D), ``gate_act`` (the gated MLP's activation: SiLU,
    Gemma's tanh-GELU, gpt-oss's clamped SwiGLU), ``fused_qkv`` /
    ``fused_gate_up`` (Phi-3's one ``qkv_proj`` and one ``gate_up_proj`` matrix:
    the same products, concatenated).
    """

    name: str
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    max_position: int
    mlp: str
    norm: str
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    tie_embeddings: bool
    learned_positions: bool
    head_dim: int | None = None
    # MoE
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    experts_per_token: int = 0
    first_k_dense: int = 0
    moe_intermediate_size: int = 0
    router_bias: bool = False
    # MLA
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    num_nextn_predict_layers: int = 0
    source: str = ""
    # attention variants and norms
    qk_norm: str = "none"
    norms_per_layer: int = 2
    sliding_window: int | None = None
    layer_types: tuple[str, ...] | None = None
    attention_sinks: bool = False
    # MoE variants
    expert_bias: bool = False
    router_linear_bias: bool = False
    # recorded, count-neutral
    gate_act: str = "silu"
    scaled_embeddings: bool = False
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    fused_qkv: bool = False
    fused_gate_up: bool = False

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        if not isinstance(self.source, str):
            raise TypeError(f"source must be a str (a tmath.sources key), got {self.source!r}")
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type={self.model_type!r} is not supported; use one of "
                f"{', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        if self.mlp not in MLP_KINDS:
            raise ValueError(f"mlp={self.mlp!r}: use 'gelu' (2-matrix) or 'gated' (SiLU, 3-matrix)")
        if self.norm not in NORM_KINDS:
            raise ValueError(f"norm={self.norm!r}: use 'layernorm' (with bias) or 'rmsnorm'")
        if self.qk_norm not in QK_NORM_KINDS:
            raise ValueError(f"qk_norm={self.qk_norm!r}: use one of {', '.join(QK_NORM_KINDS)}")
        if self.gate_act not in GATE_ACTS:
            raise ValueError(f"gate_act={self.gate_act!r}: use one of {', '.join(GATE_ACTS)}")
        for f in _BOOL_FIELDS:
            v = getattr(self, f)
            if not isinstance(v, bool):
                raise TypeError(f"{f} must be a bool (True/False), got {v!r}")
        if self.head_dim is None:
            if _is_int(self.hidden_size) and _is_int(self.num_heads) and self.num_heads > 0:
                object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        for f in _INT_FIELDS:
            v = getattr(self, f)
            if not _is_int(v):
                raise TypeError(f"{f} must be an int, got {v!r}")
            if v <= 0:
                raise ValueError(f"{f} must be a positive integer, got {v}")
        for f in _NONNEG_INT_FIELDS:
            v = getattr(self, f)
            if not _is_int(v):
                raise TypeError(f"{f} must be an int, got {v!r}")
            if v < 0:
                raise ValueError(f"{f} must be >= 0, got {v}")
        if not _is_int(self.norms_per_layer) or self.norms_per_layer not in (2, 4):
            raise ValueError(
                f"norms_per_layer={self.norms_per_layer!r}: use 2 (pre- or post-norms) or 4 "
                "(Gemma's pre and post norms around attention and MLP)"
            )
        for f in ("attn_logit_softcap", "final_logit_softcap"):
            v = getattr(self, f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not v > 0):
                raise ValueError(f"{f} must be None or a positive number, got {v!r}")
        if self.q_lora_rank is not None:
            if not _is_int(self.q_lora_rank):
                raise TypeError(f"q_lora_rank must be an int or None, got {self.q_lora_rank!r}")
            if self.q_lora_rank <= 0:
                raise ValueError(
                    f"q_lora_rank must be positive, or None for a full-rank query "
                    f"projection; got {self.q_lora_rank}"
                )
        if self.num_kv_heads > self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads="
                f"{self.num_kv_heads}; choose num_kv_heads dividing num_heads"
            )
        self._check_windows()
        self._check_family()
        self._check_moe()
        self._check_mla()

    def _check_windows(self) -> None:
        W, lt = self.sliding_window, self.layer_types
        if W is not None:
            if not _is_int(W):
                raise TypeError(f"sliding_window must be an int or None, got {W!r}")
            if W <= 0:
                raise ValueError(f"sliding_window must be positive (or None), got {W}")
        if lt is None:
            return
        if isinstance(lt, str) or not isinstance(lt, tuple | list):
            raise TypeError(f"layer_types must be a tuple of str or None, got {lt!r}")
        lt = tuple(lt)
        object.__setattr__(self, "layer_types", lt)
        bad = sorted({t for t in lt if t not in LAYER_TYPES}, key=str)
        if bad:
            raise ValueError(
                f"layer_types has {bad!r}: each entry must be one of {', '.join(LAYER_TYPES)}"
            )
        if len(lt) != self.num_layers:
            raise ValueError(
                f"layer_types has {len(lt)} entries but num_layers={self.num_layers}; give one "
                "per layer (or None)"
            )
        if "sliding_attention" in lt and W is None:
            raise ValueError(
                "layer_types has sliding_attention layers but sliding_window is None: set "
                "sliding_window"
            )

    def _check_family(self) -> None:
        mt = self.model_type
        fam = FAMILIES[mt]
        for f, v in fam.fixed.items():
            if getattr(self, f) != v:
                raise ValueError(
                    f"{f}={getattr(self, f)!r} is not what model_type={mt!r} uses; set {f}={v!r}"
                )
        for f, off in _OPTIONAL_DEFAULTS.items():
            if f not in fam.fixed and f not in fam.allowed and getattr(self, f) != off:
                raise ValueError(
                    f"model_type={mt!r} has no {f} (got {getattr(self, f)!r}): set {f}={off!r}"
                )
        if mt == "gpt2":
            if self.num_kv_heads != self.num_heads:
                raise ValueError(
                    "num_kv_heads must equal num_heads for model_type='gpt2' (GPT-2 has MHA only)"
                )
            if self.head_dim * self.num_heads != self.hidden_size:
                raise ValueError(
                    f"head_dim={self.head_dim} * num_heads={self.num_heads} must equal "
                    f"hidden_size={self.hidden_size} for model_type='gpt2'; fix head_dim or num_heads"
                )
        self._check_biases(mt, fam.biases)
        if fam.windows == "none" and (self.sliding_window is not None or self.layer_types):
            raise ValueError(
                f"model_type={mt!r} has no sliding-window attention: set sliding_window=None "
                "and layer_types=None"
            )
        if fam.windows == "all" and self.layer_types is not None:
            raise ValueError(
                f"model_type={mt!r} windows every layer alike (transformers has no per-layer "
                "pattern for it): set layer_types=None"
            )
        if fam.mla == "required" and self.kv_lora_rank == 0:
            raise ValueError(f"model_type={mt!r} uses MLA: set kv_lora_rank > 0")
        if fam.mla == "never" and (self.kv_lora_rank or self.q_lora_rank is not None):
            raise ValueError(
                f"MLA (kv_lora_rank/q_lora_rank) is only supported for deepseek_v2 and "
                f"deepseek_v3, not {mt!r}; set kv_lora_rank=0 and q_lora_rank=None"
            )
        moe_types = [t for t, f in FAMILIES.items() if f.moe != "never"]
        if fam.moe == "required" and self.n_routed_experts == 0:
            raise ValueError(f"model_type={mt!r} is a MoE: set n_routed_experts > 0")
        if fam.moe == "never" and self.n_routed_experts:
            raise ValueError(
                f"model_type={mt!r} has no experts: set n_routed_experts=0 (MoE needs one of "
                f"{', '.join(moe_types)})"
            )
        if self.n_shared_experts and mt not in _SHARED_EXPERTS:
            raise ValueError(f"model_type={mt!r} has no shared experts: set n_shared_experts=0")
        if self.first_k_dense and mt not in _DENSE_FIRST:
            raise ValueError(f"model_type={mt!r} has no dense first layers: set first_k_dense=0")
        if mt == "deepseek_v2" and self.n_shared_experts == 0:
            raise ValueError(
                "deepseek_v2 always builds its shared-expert MLP: set n_shared_experts > 0"
            )
        if mt == "mixtral" and self.router_bias:
            raise ValueError("mixtral has no router bias: set router_bias=False")

    def _check_biases(self, mt: str, rule: str) -> None:
        b = (self.qkv_bias, self.out_bias, self.mlp_bias)
        if rule == "all" and b != (True, True, True):
            raise ValueError(f"{mt} has biases everywhere: set qkv_bias, out_bias, mlp_bias True")
        if rule == "none" and any(b):
            raise ValueError(
                f"model_type={mt!r} has no such biases: set qkv_bias, out_bias and mlp_bias False"
            )
        if rule == "qkv" and b != (True, False, False):
            raise ValueError(
                f"{mt} has q/k/v biases only: set qkv_bias=True, out_bias=False, mlp_bias=False"
            )
        if rule in ("attn", "attn+mlp") and self.qkv_bias != self.out_bias:
            raise ValueError(
                f"model_type={mt!r} has one attention_bias for q/k/v and o: set "
                "qkv_bias=out_bias"
            )
        if rule == "attn" and self.mlp_bias:
            raise ValueError(
                f"model_type={mt!r} has no MLP bias: set mlp_bias=False (attention_bias sets "
                "qkv_bias=out_bias)"
            )

    def _check_moe(self) -> None:
        moe_fields = (
            self.n_shared_experts,
            self.experts_per_token,
            self.first_k_dense,
            self.moe_intermediate_size,
        )
        if self.n_routed_experts == 0:
            if any(moe_fields) or self.router_bias or self.expert_bias or self.router_linear_bias:
                raise ValueError(
                    "n_routed_experts=0 (dense model) but MoE fields are set: set "
                    "n_shared_experts, experts_per_token, first_k_dense, "
                    "moe_intermediate_size to 0 and router_bias, expert_bias, "
                    "router_linear_bias False, or set n_routed_experts"
                )
            return
        if not 1 <= self.experts_per_token <= self.n_routed_experts:
            raise ValueError(
                f"experts_per_token={self.experts_per_token} must be between 1 and "
                f"n_routed_experts={self.n_routed_experts}"
            )
        if self.moe_intermediate_size <= 0:
            raise ValueError("moe_intermediate_size must be positive for a MoE model")
        if self.first_k_dense >= self.num_layers:
            raise ValueError(
                f"first_k_dense={self.first_k_dense} must be < num_layers={self.num_layers} "
                "(otherwise the model is dense: set n_routed_experts=0)"
            )
        if self.mlp != "gated":
            raise ValueError("MoE experts are gated SiLU MLPs: set mlp='gated'")

    def _check_mla(self) -> None:
        mla = (self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim)
        if self.kv_lora_rank == 0:
            if any(mla) or self.q_lora_rank is not None:
                raise ValueError(
                    "kv_lora_rank=0 (no MLA) but MLA fields are set: set q_lora_rank=None and "
                    "qk_rope_head_dim, qk_nope_head_dim, v_head_dim to 0, or set kv_lora_rank"
                )
            return
        for f in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{f} must be positive for MLA (kv_lora_rank > 0)")
        if self.num_kv_heads != self.num_heads:
            raise ValueError(
                "MLA expands the latent to every query head: set num_kv_heads = num_heads"
            )
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim={self.qk_rope_head_dim} must be even (rotary pairs)")

    # -------------------------------------------------------------- properties
    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_groups(self) -> int:
        """Query heads per KV head, G = N // K."""
        return self.num_heads // self.num_kv_heads

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_k_dense if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def qk_head_dim(self) -> int:
        """Per-head width of queries and keys (MLA: nope + rope)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def rope_dim(self) -> int:
        """Rotary dimensions per head (0 with learned positions)."""
        if self.learned_positions:
            return 0
        return self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def rope_tables(self) -> int:
        """Rotary cos/sin tables built per forward pass (Gemma 3: one per layer type)."""
        if self.learned_positions:
            return 0
        if self.model_type == "gemma3_text":
            return len(set(self.resolved_layer_types))
        return 1

    @property
    def resolved_layer_types(self) -> tuple[str, ...]:
        """``layer_types`` with ``None`` resolved: every layer windowed iff ``sliding_window``."""
        if self.layer_types is not None:
            return self.layer_types
        kind = "full_attention" if self.sliding_window is None else "sliding_attention"
        return (kind,) * self.num_layers

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Per layer: the window W of a sliding-window layer, ``None`` for full attention."""
        return tuple(self.sliding_window if t == "sliding_attention" else None
                     for t in self.resolved_layer_types)

    @property
    def num_sliding_layers(self) -> int:
        return sum(w is not None for w in self.layer_windows)

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with ``changes`` applied and validated again.

        A derived ``head_dim`` is re-derived when ``hidden_size`` or
        ``num_heads`` changes and ``head_dim`` is not given.
        """
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s): {', '.join(sorted(unknown))}")
        if "head_dim" not in changes and ({"hidden_size", "num_heads"} & set(changes)):
            if self.head_dim == self.hidden_size // self.num_heads:
                changes["head_dim"] = None
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------ HF loading
    @classmethod
    def from_hf(cls, path_or_dict: str | os.PathLike | Mapping[str, Any], name: str | None = None,
                source: str = "") -> ModelConfig:
        """Read a Hugging Face ``config.json`` (a path, a directory holding one, or a dict).

        Supported ``model_type``: see :data:`SUPPORTED_MODEL_TYPES`; each has a small
        reader in :data:`_READERS`. Defaults follow transformers' own config classes
        (e.g. ``tie_word_embeddings`` is True for gpt2 and Gemma and False for the
        others; gpt2's ``n_inner`` None means 4·D; Qwen3's ``head_dim`` defaults to
        128, Gemma's to 256; Mistral's ``sliding_window`` to 4096). Keys that would
        change the architecture in a way the ledger does not model are refused.
        """
        if isinstance(path_or_dict, Mapping):
            d = dict(path_or_dict)
            default_name = str(d.get("_name_or_path") or d.get("model_type") or "hf-config")
        else:
            p = os.fspath(path_or_dict)
            if os.path.isdir(p):
                p = os.path.join(p, "config.json")
            try:
                with open(p, encoding="utf-8") as fh:
                    d = json.load(fh)
            except FileNotFoundError:
                raise ValueError(f"config file {p!r} not found: pass a config.json path") from None
            except json.JSONDecodeError as e:
                raise ValueError(f"config file {p!r} is not valid JSON: {e}") from None
            if not isinstance(d, dict):
                raise ValueError(f"config file {p!r} must hold a JSON object")
            default_name = str(d.get("_name_or_path") or os.path.basename(os.path.dirname(
                os.path.abspath(p))) or "hf-config")
        return _from_hf_dict(d, name or default_name, source)


# ---------------------------------------------------------------- the readers
def _req(d: Mapping[str, Any], key: str, mt: str) -> Any:
    if key not in d or d[key] is None:
        raise ValueError(f"config.json (model_type={mt!r}) is missing required field {key!r}")
    return d[key]


def _get(d: Mapping[str, Any], key: str, default: Any) -> Any:
    """``d[key]``, or ``default`` when it is absent or null."""
    v = d.get(key)
    return default if v is None else v


def _refuse(d: Mapping[str, Any], mt: str, key: str, ok: Callable[[Any], bool], why: str) -> None:
    if key in d and not ok(d[key]):
        raise ValueError(f"config.json (model_type={mt!r}) has {key}={d[key]!r}: {why}")


def _silu(d: Mapping[str, Any], mt: str) -> None:
    if d.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act={d.get('hidden_act')!r}: only 'silu' gated MLPs are supported "
                         f"for model_type={mt!r}")


def _no_qk_norm_keys(d: Mapping[str, Any], mt: str) -> None:
    # A config edited to another model_type may still carry q/k-norm or sandwich-norm keys:
    # reading it as that type would silently drop parameters. Refuse.
    for key in ("qk_norm", "use_qk_norm", "query_pre_attn_scalar", "attn_logit_softcapping",
                "final_logit_softcapping", "q_lora_rank", "kv_lora_rank", "num_local_experts",
                "num_experts", "n_routed_experts"):
        if key in d and d[key] not in (None, False, 0):
            raise ValueError(
                f"config.json has {key}={d[key]!r}, which model_type={mt!r} does not build; "
                "set model_type to the family the checkpoint was trained as"
            )


def _rope_base(d: Mapping[str, Any], mt: str, *, max_pos: int, head_dim: int | None = None,
               tie: bool = False) -> dict[str, Any]:
    """Fields every RoPE family reads the same way."""
    D = _req(d, "hidden_size", mt)
    N = _req(d, "num_attention_heads", mt)
    return dict(
        model_type=mt, hidden_size=D, intermediate_size=_req(d, "intermediate_size", mt),
        num_layers=_req(d, "num_hidden_layers", mt), num_heads=N,
        num_kv_heads=_get(d, "num_key_value_heads", N), vocab_size=_req(d, "vocab_size", mt),
        max_position=_get(d, "max_position_embeddings", max_pos), mlp="gated", norm="rmsnorm",
        learned_positions=False, tie_embeddings=bool(_get(d, "tie_word_embeddings", tie)),
        head_dim=_get(d, "head_dim", head_dim),
    )


def _attn_bias(d: Mapping[str, Any], default: bool = False) -> dict[str, bool]:
    ab = bool(_get(d, "attention_bias", default))
    return dict(qkv_bias=ab, out_bias=ab, mlp_bias=False)


def _window_all(d: Mapping[str, Any], mt: str, default: int | None) -> dict[str, Any]:
    """One window for every layer (Mistral, Mixtral, Phi-3, Qwen3-MoE): no layer_types."""
    if d.get("layer_types") is not None:
        raise ValueError(
            f"config.json (model_type={mt!r}) has layer_types, but transformers windows every "
            f"layer of {mt} alike (its cache would follow layer_types, its attention would "
            "not): remove layer_types"
        )
    return dict(sliding_window=d.get("sliding_window", default))


def _window_qwen(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    """Qwen2/Qwen3: a window only with use_sliding_window, on layers >= max_window_layers."""
    if not d.get("use_sliding_window", False) or d.get("sliding_window") is None:
        return dict(sliding_window=None, layer_types=None)
    W = d["sliding_window"]
    lt = d.get("layer_types")
    if lt is None:
        L = _req(d, "num_hidden_layers", mt)
        mwl = _get(d, "max_window_layers", 28)
        lt = ["sliding_attention" if i >= mwl else "full_attention" for i in range(L)]
    return dict(sliding_window=W, layer_types=tuple(lt))


def _window_pattern(d: Mapping[str, Any], mt: str, default_w: int, pattern: int) -> dict[str, Any]:
    """Gemma 2/3, gpt-oss: layer_types, or every ``pattern``-th layer global."""
    W = d.get("sliding_window", default_w)
    lt = d.get("layer_types")
    if lt is None:
        L = _req(d, "num_hidden_layers", mt)
        lt = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(L)]
    if W is None and "sliding_attention" in lt:
        raise ValueError(f"config.json (model_type={mt!r}) has sliding layers but "
                         "sliding_window null: set sliding_window")
    return dict(sliding_window=W, layer_types=tuple(lt))


def _moe_common(d: Mapping[str, Any], mt: str, experts_key: str) -> dict[str, Any]:
    return dict(n_routed_experts=_req(d, experts_key, mt),
                experts_per_token=_req(d, "num_experts_per_tok", mt))


def _read_gpt2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    if d.get("add_cross_attention"):
        raise ValueError("add_cross_attention=True (encoder-decoder GPT-2) is not supported")
    D = _req(d, "n_embd", mt)
    n_inner = d.get("n_inner")
    return dict(
        model_type=mt, hidden_size=D, intermediate_size=4 * D if n_inner is None else n_inner,
        num_layers=_req(d, "n_layer", mt), num_heads=_req(d, "n_head", mt),
        num_kv_heads=_req(d, "n_head", mt), vocab_size=_req(d, "vocab_size", mt),
        max_position=_req(d, "n_positions", mt), mlp="gelu", norm="layernorm",
        qkv_bias=True, out_bias=True, mlp_bias=True,
        tie_embeddings=bool(d.get("tie_word_embeddings", True)), learned_positions=True,
    )


def _read_llama(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    _no_qk_norm_keys(d, mt)
    ab = bool(d.get("attention_bias", False))
    return dict(**_rope_base(d, mt, max_pos=2048), qkv_bias=ab, out_bias=ab,
                mlp_bias=bool(d.get("mlp_bias", False)))


def _read_mistral(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    _no_qk_norm_keys(d, mt)
    return dict(**_rope_base(d, mt, max_pos=4096 * 32), qkv_bias=False, out_bias=False,
                mlp_bias=False, **_window_all(d, mt, 4096))


def _read_mixtral(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    base = _rope_base(d, mt, max_pos=4096 * 32)
    return dict(**base, qkv_bias=False, out_bias=False, mlp_bias=False,
                **_moe_common(d, mt, "num_local_experts"),
                moe_intermediate_size=base["intermediate_size"], **_window_all(d, mt, None))


def _read_qwen2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    _no_qk_norm_keys(d, mt)
    return dict(**_rope_base(d, mt, max_pos=32768), qkv_bias=True, out_bias=False,
                mlp_bias=False, **_window_qwen(d, mt))


def _read_qwen3(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    return dict(**_rope_base(d, mt, max_pos=32768, head_dim=128), **_attn_bias(d),
                qk_norm="per_head", **_window_qwen(d, mt))


def _read_qwen3_moe(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    _refuse(d, mt, "decoder_sparse_step", lambda v: v in (None, 1),
            "only every layer sparse (decoder_sparse_step=1) is supported")
    dense = list(d.get("mlp_only_layers") or [])
    if dense != list(range(len(dense))):
        raise ValueError(
            f"config.json (model_type={mt!r}) has mlp_only_layers={dense!r}: only dense first "
            "layers [0, 1, ..., k-1] are supported"
        )
    W = d.get("sliding_window", 4096) if d.get("use_sliding_window", False) else None
    if d.get("layer_types") is not None:
        _window_all(d, mt, None)  # raises
    num_experts = d.get("num_experts", d.get("num_local_experts"))
    if num_experts is None:
        raise ValueError(f"config.json (model_type={mt!r}) is missing required field "
                         "'num_experts'")
    return dict(**_rope_base(d, mt, max_pos=32768), **_attn_bias(d), qk_norm="per_head",
                n_routed_experts=num_experts, experts_per_token=_req(d, "num_experts_per_tok", mt),
                moe_intermediate_size=_req(d, "moe_intermediate_size", mt),
                first_k_dense=len(dense), sliding_window=W)


def _gemma_common(d: Mapping[str, Any], mt: str, max_pos: int) -> dict[str, Any]:
    act = d.get("hidden_activation") or d.get("hidden_act") or "gelu_pytorch_tanh"
    if act not in ("gelu_pytorch_tanh",):
        raise ValueError(f"hidden_activation={act!r}: Gemma's gated MLP is 'gelu_pytorch_tanh'")
    _refuse(d, mt, "use_bidirectional_attention", lambda v: not v,
            "bidirectional (encoder) attention is not supported; set it false")
    return dict(**_rope_base(d, mt, max_pos=max_pos, head_dim=256, tie=True), **_attn_bias(d),
                norms_per_layer=4, scaled_embeddings=True, gate_act="gelu_pytorch_tanh")


def _read_gemma2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    return dict(**_gemma_common(d, mt, 8192), **_window_pattern(d, mt, 4096, 2),
                attn_logit_softcap=d.get("attn_logit_softcapping", 50.0),
                final_logit_softcap=d.get("final_logit_softcapping", 30.0))


def _read_gemma3_text(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    pattern = _get(d, "sliding_window_pattern", 6)
    return dict(**_gemma_common(d, mt, 131072), qk_norm="per_head",
                **_window_pattern(d, mt, 4096, pattern),
                attn_logit_softcap=d.get("attn_logit_softcapping"),
                final_logit_softcap=d.get("final_logit_softcapping"))


def _read_phi3(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    rope = d.get("rope_scaling") or d.get("rope_parameters") or {}
    factor = d.get("partial_rotary_factor")
    if factor is None and isinstance(rope, Mapping):
        factor = rope.get("partial_rotary_factor")
    if factor not in (None, 1, 1.0):
        raise ValueError(f"config.json (model_type={mt!r}) has partial_rotary_factor={factor!r}: "
                         "only full rotary embeddings (1.0) are supported")
    return dict(**_rope_base(d, mt, max_pos=4096), qkv_bias=False, out_bias=False,
                mlp_bias=False, fused_qkv=True, fused_gate_up=True, **_window_all(d, mt, None))


def _read_olmo2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    return dict(**_rope_base(d, mt, max_pos=2048), **_attn_bias(d), qk_norm="full_width")


def _read_gpt_oss(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    base = _rope_base(d, mt, max_pos=131072, head_dim=64)
    return dict(**base, **_attn_bias(d, default=True), gate_act="swiglu_clamp",
                attention_sinks=True, expert_bias=True, router_linear_bias=True,
                **_moe_common(d, mt, "num_local_experts"),
                moe_intermediate_size=base["intermediate_size"],
                **_window_pattern(d, mt, 128, 2))


def _mla_common(d: Mapping[str, Any], mt: str, max_pos: int, first_k_dense: int) -> dict[str, Any]:
    nope = _req(d, "qk_nope_head_dim", mt)
    rope = _req(d, "qk_rope_head_dim", mt)
    base = _rope_base(d, mt, max_pos=max_pos)
    # head_dim in a DeepSeek config is the rope dim: derive ours.
    base.update(head_dim=nope + rope, num_kv_heads=base["num_heads"])
    return dict(
        **base, n_routed_experts=_req(d, "n_routed_experts", mt),
        n_shared_experts=_req(d, "n_shared_experts", mt),
        experts_per_token=_req(d, "num_experts_per_tok", mt),
        first_k_dense=_get(d, "first_k_dense_replace", first_k_dense),
        moe_intermediate_size=_req(d, "moe_intermediate_size", mt),
        q_lora_rank=d["q_lora_rank"] if "q_lora_rank" in d else 1536,
        kv_lora_rank=_req(d, "kv_lora_rank", mt), qk_rope_head_dim=rope, qk_nope_head_dim=nope,
        v_head_dim=_req(d, "v_head_dim", mt),
    )


def _read_deepseek_v3(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    return dict(**_mla_common(d, mt, 4096, 3), **_attn_bias(d), router_bias=True,
                num_nextn_predict_layers=d.get("num_nextn_predict_layers") or 0)


def _read_deepseek_v2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    ab = bool(d.get("attention_bias", False))
    return dict(**_mla_common(d, mt, 2048, 0), qkv_bias=ab, out_bias=ab,
                mlp_bias=bool(d.get("mlp_bias", False)))


_READERS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "gpt2": _read_gpt2,
    "llama": _read_llama,
    "mistral": _read_mistral,
    "mixtral": _read_mixtral,
    "qwen2": _read_qwen2,
    "deepseek_v3": _read_deepseek_v3,
    "qwen3": _read_qwen3,
    "qwen3_moe": _read_qwen3_moe,
    "gemma2": _read_gemma2,
    "gemma3_text": _read_gemma3_text,
    "phi3": _read_phi3,
    "olmo2": _read_olmo2,
    "gpt_oss": _read_gpt_oss,
    "deepseek_v2": _read_deepseek_v2,
}
assert tuple(_READERS) == SUPPORTED_MODEL_TYPES == tuple(FAMILIES)


# The class-name prefix of each family's transformers classes (``architectures`` in config.json).
_ARCH_PREFIX = {
    "gpt2": "GPT2", "llama": "Llama", "mistral": "Mistral", "mixtral": "Mixtral",
    "qwen2": "Qwen2", "deepseek_v3": "DeepseekV3", "qwen3": "Qwen3", "qwen3_moe": "Qwen3Moe",
    "gemma2": "Gemma2", "gemma3_text": "Gemma3", "phi3": "Phi3", "olmo2": "Olmo2",
    "gpt_oss": "GptOss", "deepseek_v2": "DeepseekV2",
}


def _check_architectures(d: Mapping[str, Any], mt: str) -> None:
    """Refuse a config whose ``architectures`` name another family than its ``model_type``.

    E.g. a Qwen3 config edited to ``model_type='llama'`` would be read without its q/k
    norms, and a Gemma 2 one with its tied embeddings and four norms per layer miscounted.
    """
    archs = d.get("architectures")
    if not isinstance(archs, list | tuple):
        return
    prefix = _ARCH_PREFIX[mt]
    for a in archs:
        rest = a[len(prefix):] if isinstance(a, str) and a.startswith(prefix) else None
        if rest is None or not rest.startswith(("For", "LMHead", "Model")):
            raise ValueError(
                f"config.json has architectures={list(archs)!r}, which is not a {mt!r} model: "
                f"keep the checkpoint's own model_type (a {prefix}... class)"
            )


def _from_hf_dict(d: Mapping[str, Any], name: str, source: str) -> ModelConfig:
    mt = d.get("model_type")
    if not isinstance(mt, str) or mt not in _READERS:
        raise ValueError(
            f"model_type={mt!r} is not supported; supported model types: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    _check_architectures(d, mt)
    return ModelConfig(name=name, source=source, **_READERS[mt](d, mt))

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

Multimodal wrappers (``gemma3``, ``llama4``, ``llava``, ...: a ``config.json`` with a
``text_config``) are read through their language model: when the nested
``text_config.model_type`` is a supported family, that model is counted and
``ModelConfig.wrapper`` records the wrapper (its vision tower and projector are not
counted); otherwise the config is refused naming the nested type.

Bad input raises :class:`tmath.errors.InputError` (a ``ValueError``) or
:class:`tmath.errors.InputTypeError` (also a ``TypeError``), with a Chinese message
that names the field and the fix. Every numeric field has a plausible range, all in
one table, :data:`LIMITS`: far wider than any published model, so that no real
config is refused, and narrow enough that a slip (a run of extra zeros, a sign, a
float) is caught by name, and that every count stays a quick sum over at most
10,000 layers (no input makes the library allocate or loop without bound).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tmath.errors import InputError, InputTypeError, show

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

#: Plausible range (inclusive) of every numeric field: ModelConfig's, and the two numeric
#: config.json keys only the readers see (``max_window_layers``, ``sliding_window_pattern``).
#: For scale, the largest published values: D 18,432 and F 73,728 (PaLM 540B), L 126
#: (Llama 3.1 405B), N 128 (DeepSeek V3), H 256 (Gemma), V 262,208 (Gemma 3), context
#: 10,485,760 positions (Llama 4 Scout), 384 routed experts (Kimi K2).
LIMITS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 10**6),
    "intermediate_size": (1, 10**7),
    "num_layers": (1, 10_000),
    "num_heads": (1, 10_000),
    "num_kv_heads": (1, 10_000),
    "head_dim": (1, 100_000),
    "vocab_size": (1, 10**8),
    "max_position": (1, 10**9),
    "sliding_window": (1, 10**9),
    "n_routed_experts": (0, 100_000),
    "n_shared_experts": (0, 1_000),
    "experts_per_token": (0, 100_000),
    "first_k_dense": (0, 10_000),
    "moe_intermediate_size": (0, 10**7),
    "q_lora_rank": (1, 10**6),
    "kv_lora_rank": (0, 10**6),
    "qk_rope_head_dim": (0, 100_000),
    "qk_nope_head_dim": (0, 100_000),
    "v_head_dim": (0, 100_000),
    "num_nextn_predict_layers": (0, 100),
    "max_window_layers": (0, 10_000),
    "sliding_window_pattern": (1, 10_000),
}
#: Plausible range of the float fields: low exclusive, high inclusive (Gemma 2: 50 and 30).
FLOAT_LIMITS: dict[str, tuple[float, float]] = {
    "attn_logit_softcap": (0.0, 1e6),
    "final_logit_softcap": (0.0, 1e6),
}

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


def _n(v: Any) -> str:
    """A value for a message: an integer with thousands separators, anything else short."""
    return f"{v:,}" if _is_int(v) and abs(v) < 10**15 else show(v)


def _range(key: str) -> str:
    lo, hi = LIMITS[key]
    return f"{lo:,} 到 {hi:,}"


def check_int(name: str, v: Any, limit: str | None = None, field: str | None = None) -> int:
    """``v`` if it is an integer within ``LIMITS[limit or name]``; else a clear error.

    The message names ``name`` and the plausible range; the error's ``field`` is
    ``field`` (default ``name``).
    """
    key = limit or name
    lo, hi = LIMITS[key]
    if not _is_int(v):
        raise InputTypeError(f"{name} 必须是整数，收到 {show(v)}（合理范围 {_range(key)}）",
                             field or name)
    if not lo <= v <= hi:
        raise InputError(f"{name}={_n(v)} 不在合理范围 {_range(key)} 之内：请检查这个字段",
                         field or name)
    return v


def check_float(name: str, v: Any, limit: str | None = None, field: str | None = None) -> float:
    """``v`` if it is a finite number within ``FLOAT_LIMITS[limit or name]``; else a clear error."""
    lo, hi = FLOAT_LIMITS[limit or name]
    ok = isinstance(v, int | float) and not isinstance(v, bool)
    if not ok or not ((isinstance(v, int) or math.isfinite(v)) and lo < v <= hi):
        err = InputError if ok else InputTypeError
        raise err(f"{name} 必须是大于 {lo:g}、不超过 {hi:g} 的数（或 null 表示不用），收到 "
                  f"{show(v)}", field or name)
    return float(v)

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
    ``wrapper`` is the ``model_type`` of the multimodal wrapper this language model
    was read from (``"gemma3"``: the ``text_config`` of a Gemma 3 ``config.json``),
    ``""`` for a text-only config; only the language model is counted, never the
    vision tower or the multimodal projector.

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
    # the multimodal wrapper this language model was read from ("" = text-only)
    wrapper: str = ""

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InputTypeError(f"name 必须是字符串，收到 {type(self.name).__name__}", "name")
        if not isinstance(self.source, str):
            raise InputTypeError(
                f"source 必须是字符串（tmath.sources 的键），收到 {show(self.source)}", "source")
        if not isinstance(self.wrapper, str):
            raise InputTypeError(
                f"wrapper 必须是字符串（多模态封装的 model_type，或空串），收到 {show(self.wrapper)}",
                "wrapper")
        if not isinstance(self.model_type, str) or self.model_type not in SUPPORTED_MODEL_TYPES:
            raise InputError(
                f"model_type={show(self.model_type)} 不受支持：请用 "
                f"{'、'.join(SUPPORTED_MODEL_TYPES)} 之一", "model_type")
        if self.mlp not in MLP_KINDS:
            raise InputError(
                f"mlp={show(self.mlp)}：请用 'gelu'（两个矩阵）或 'gated'（门控，三个矩阵）", "mlp")
        if self.norm not in NORM_KINDS:
            raise InputError(
                f"norm={show(self.norm)}：请用 'layernorm'（带偏置）或 'rmsnorm'", "norm")
        if self.qk_norm not in QK_NORM_KINDS:
            raise InputError(
                f"qk_norm={show(self.qk_norm)}：请用 {'、'.join(QK_NORM_KINDS)} 之一", "qk_norm")
        if self.gate_act not in GATE_ACTS:
            raise InputError(
                f"gate_act={show(self.gate_act)}：请用 {'、'.join(GATE_ACTS)} 之一", "gate_act")
        for f in _BOOL_FIELDS:
            v = getattr(self, f)
            if not isinstance(v, bool):
                raise InputTypeError(f"{f} 必须是布尔值（True/False），收到 {show(v)}", f)
        if self.head_dim is None:
            if _is_int(self.hidden_size) and _is_int(self.num_heads) and self.num_heads > 0:
                if 0 < self.hidden_size < self.num_heads <= LIMITS["num_heads"][1]:
                    raise InputError(
                        f"num_heads={self.num_heads:,} 大于 hidden_size={self.hidden_size:,}："
                        "推出的 head_dim = hidden_size // num_heads 为 0；请给出 head_dim，或检查这两个字段",
                        "num_heads")
                object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        for f in _INT_FIELDS + _NONNEG_INT_FIELDS:
            check_int(f, getattr(self, f))
        if not _is_int(self.norms_per_layer) or self.norms_per_layer not in (2, 4):
            raise InputError(
                f"norms_per_layer={show(self.norms_per_layer)}：请用 2（前置或后置归一化）或 4"
                "（Gemma：注意力和 MLP 前后各一个）", "norms_per_layer")
        for f in ("attn_logit_softcap", "final_logit_softcap"):
            if getattr(self, f) is not None:
                check_float(f, getattr(self, f))
        if self.q_lora_rank is not None:
            check_int("q_lora_rank", self.q_lora_rank)
        if self.num_kv_heads > self.num_heads or self.num_heads % self.num_kv_heads:
            raise InputError(
                f"num_heads={self.num_heads:,} 必须是 num_kv_heads={self.num_kv_heads:,} 的整数倍："
                "请让 num_kv_heads 整除 num_heads", "num_kv_heads")
        self._check_windows()
        self._check_family()
        self._check_moe()
        self._check_mla()

    def _check_windows(self) -> None:
        W, lt = self.sliding_window, self.layer_types
        if W is not None:
            check_int("sliding_window", W)
        if lt is None:
            return
        if isinstance(lt, str) or not isinstance(lt, tuple | list):
            raise InputTypeError(
                f"layer_types 必须是字符串元组（每层一个）或 None，收到 {show(lt)}", "layer_types")
        if len(lt) != self.num_layers:
            raise InputError(
                f"layer_types 有 {len(lt):,} 项，但 num_layers={self.num_layers:,}：请每层给一项"
                "（或设为 None）", "layer_types")
        lt = tuple(lt)
        bad = [t for t in lt if t not in LAYER_TYPES]
        if bad:
            raise InputError(
                f"layer_types 含有 {show(bad[0])}：每一项必须是 {'、'.join(LAYER_TYPES)} 之一",
                "layer_types")
        object.__setattr__(self, "layer_types", lt)
        if "sliding_attention" in lt and W is None:
            raise InputError(
                "layer_types 有 sliding_attention 层，但 sliding_window 为 None：请设置 "
                "sliding_window", "sliding_window")

    def _check_family(self) -> None:
        mt = self.model_type
        fam = FAMILIES[mt]
        for f, v in fam.fixed.items():
            if getattr(self, f) != v:
                raise InputError(
                    f"{f}={show(getattr(self, f))} 不是 model_type={mt!r} 的取值：请设 {f}={v!r}", f)
        for f, off in _OPTIONAL_DEFAULTS.items():
            if f not in fam.fixed and f not in fam.allowed and getattr(self, f) != off:
                raise InputError(
                    f"model_type={mt!r} 没有 {f}（收到 {show(getattr(self, f))}）：请设 {f}={off!r}", f)
        if mt == "gpt2":
            if self.num_kv_heads != self.num_heads:
                raise InputError(
                    "model_type='gpt2' 只有多头注意力（MHA）：num_kv_heads 必须等于 num_heads",
                    "num_kv_heads")
            if self.head_dim * self.num_heads != self.hidden_size:
                raise InputError(
                    f"model_type='gpt2' 要求 head_dim={self.head_dim:,} × num_heads={self.num_heads:,}"
                    f" 等于 hidden_size={self.hidden_size:,}：请修改 head_dim 或 num_heads",
                    "head_dim")
        self._check_biases(mt, fam.biases)
        if fam.windows == "none" and (self.sliding_window is not None or self.layer_types):
            raise InputError(
                f"model_type={mt!r} 没有滑动窗口注意力：请设 sliding_window=None、layer_types=None",
                "sliding_window")
        if fam.windows == "all" and self.layer_types is not None:
            raise InputError(
                f"model_type={mt!r} 的每一层窗口都相同（transformers 没有它的逐层模式）："
                "请设 layer_types=None", "layer_types")
        if fam.mla == "required" and self.kv_lora_rank == 0:
            raise InputError(f"model_type={mt!r} 使用 MLA：请设 kv_lora_rank > 0", "kv_lora_rank")
        if fam.mla == "never" and (self.kv_lora_rank or self.q_lora_rank is not None):
            raise InputError(
                f"MLA（kv_lora_rank/q_lora_rank）只有 deepseek_v2 和 deepseek_v3 才有，{mt!r} 没有："
                "请设 kv_lora_rank=0、q_lora_rank=None",
                "kv_lora_rank" if self.kv_lora_rank else "q_lora_rank")
        moe_types = [t for t, f in FAMILIES.items() if f.moe != "never"]
        if fam.moe == "required" and self.n_routed_experts == 0:
            raise InputError(f"model_type={mt!r} 是 MoE：请设 n_routed_experts > 0",
                             "n_routed_experts")
        if fam.moe == "never" and self.n_routed_experts:
            raise InputError(
                f"model_type={mt!r} 没有专家：请设 n_routed_experts=0（MoE 要用 "
                f"{'、'.join(moe_types)} 之一）", "n_routed_experts")
        if self.n_shared_experts and mt not in _SHARED_EXPERTS:
            raise InputError(f"model_type={mt!r} 没有共享专家（shared experts）：请设 n_shared_experts=0",
                             "n_shared_experts")
        if self.first_k_dense and mt not in _DENSE_FIRST:
            raise InputError(f"model_type={mt!r} 没有前置稠密层：请设 first_k_dense=0",
                             "first_k_dense")
        if mt == "deepseek_v2" and self.n_shared_experts == 0:
            raise InputError(
                "deepseek_v2 总会构建共享专家 MLP（shared experts）：请设 n_shared_experts > 0",
                "n_shared_experts")
        if mt == "mixtral" and self.router_bias:
            raise InputError("mixtral 的路由器没有偏置：请设 router_bias=False", "router_bias")

    def _check_biases(self, mt: str, rule: str) -> None:
        b = (self.qkv_bias, self.out_bias, self.mlp_bias)
        if rule == "all" and b != (True, True, True):
            raise InputError(
                f"{mt} 处处有偏置：请把 qkv_bias、out_bias、mlp_bias 都设为 True",
                ("qkv_bias", "out_bias", "mlp_bias")[b.index(False)])
        if rule == "none" and any(b):
            raise InputError(
                f"model_type={mt!r} 没有这些偏置：请把 qkv_bias、out_bias、mlp_bias 都设为 False",
                ("qkv_bias", "out_bias", "mlp_bias")[b.index(True)])
        if rule == "qkv" and b != (True, False, False):
            raise InputError(
                f"{mt} 只有 q/k/v 偏置：请设 qkv_bias=True、out_bias=False、mlp_bias=False",
                "qkv_bias" if not b[0] else ("out_bias" if b[1] else "mlp_bias"))
        if rule in ("attn", "attn+mlp") and self.qkv_bias != self.out_bias:
            raise InputError(
                f"model_type={mt!r} 的 q/k/v 与 o 共用一个 attention_bias：请设 qkv_bias=out_bias",
                "out_bias")
        if rule == "attn" and self.mlp_bias:
            raise InputError(
                f"model_type={mt!r} 的 MLP 没有偏置：请设 mlp_bias=False（attention_bias 决定 "
                "qkv_bias=out_bias）", "mlp_bias")

    def _check_moe(self) -> None:
        moe_fields = {
            "n_shared_experts": self.n_shared_experts,
            "experts_per_token": self.experts_per_token,
            "first_k_dense": self.first_k_dense,
            "moe_intermediate_size": self.moe_intermediate_size,
            "router_bias": self.router_bias,
            "expert_bias": self.expert_bias,
            "router_linear_bias": self.router_linear_bias,
        }
        if self.n_routed_experts == 0:
            set_ = [k for k, v in moe_fields.items() if v]
            if set_:
                raise InputError(
                    f"n_routed_experts=0（稠密模型），但设置了 MoE 字段 {set_[0]}：请把 "
                    "n_shared_experts、experts_per_token、first_k_dense、moe_intermediate_size 设为 0，"
                    "router_bias、expert_bias、router_linear_bias 设为 False；或者设置 n_routed_experts",
                    set_[0])
            return
        if not 1 <= self.experts_per_token <= self.n_routed_experts:
            raise InputError(
                f"experts_per_token={self.experts_per_token:,} 必须在 1 到 "
                f"n_routed_experts={self.n_routed_experts:,} 之间", "experts_per_token")
        if self.moe_intermediate_size <= 0:
            raise InputError("MoE 模型的 moe_intermediate_size 必须是正整数",
                             "moe_intermediate_size")
        if self.first_k_dense >= self.num_layers:
            raise InputError(
                f"first_k_dense={self.first_k_dense:,} 必须小于 num_layers={self.num_layers:,}"
                "（否则模型是稠密的：请设 n_routed_experts=0）", "first_k_dense")
        if self.mlp != "gated":
            raise InputError("MoE 的专家是门控 SiLU MLP：请设 mlp='gated'", "mlp")

    def _check_mla(self) -> None:
        mla = {"qk_rope_head_dim": self.qk_rope_head_dim, "qk_nope_head_dim": self.qk_nope_head_dim,
               "v_head_dim": self.v_head_dim}
        if self.kv_lora_rank == 0:
            set_ = [k for k, v in mla.items() if v]
            if set_ or self.q_lora_rank is not None:
                raise InputError(
                    "kv_lora_rank=0（没有 MLA），但设置了 MLA 字段：请设 q_lora_rank=None，"
                    "qk_rope_head_dim、qk_nope_head_dim、v_head_dim 为 0；或者设置 kv_lora_rank",
                    set_[0] if set_ else "q_lora_rank")
            return
        for f, v in mla.items():
            if v <= 0:
                raise InputError(f"MLA（kv_lora_rank > 0）要求 {f} 为正整数，收到 {v}", f)
        if self.num_kv_heads != self.num_heads:
            raise InputError("MLA 把潜向量展开到每一个查询头：请设 num_kv_heads = num_heads",
                             "num_kv_heads")
        if self.qk_rope_head_dim % 2:
            raise InputError(
                f"qk_rope_head_dim={self.qk_rope_head_dim:,} 必须是偶数（旋转位置编码成对旋转）",
                "qk_rope_head_dim")


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
            first = sorted(unknown)[0]
            raise InputError(
                f"ModelConfig 没有字段 {', '.join(sorted(unknown))}："
                "请用 dataclasses.fields(ModelConfig) 里的名字", first)
        if "head_dim" not in changes and ({"hidden_size", "num_heads"} & set(changes)):
            if self.head_dim == self.hidden_size // self.num_heads:
                changes["head_dim"] = None
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------ HF loading
    @classmethod
    def from_hf(cls, path_or_dict: str | os.PathLike | Mapping[str, Any], name: str | None = None,
                source: str = "") -> ModelConfig:
        """Read a Hugging Face ``config.json`` (a path, a model folder holding one, or a dict).

        Supported ``model_type``: see :data:`SUPPORTED_MODEL_TYPES`; each has a small
        reader in :data:`_READERS`. Defaults follow transformers' own config classes
        (e.g. ``tie_word_embeddings`` is True for gpt2 and Gemma and False for the
        others; gpt2's ``n_inner`` None means 4·D; Qwen3's ``head_dim`` defaults to
        128, Gemma's to 256; Mistral's ``sliding_window`` to 4096). Keys that would
        change the architecture in a way the ledger does not model are refused.
        A multimodal wrapper (a ``text_config``) gives its language model, see the
        module docstring.
        """
        if isinstance(path_or_dict, Mapping):
            d = dict(path_or_dict)
            default_name = _name_in(d) or (d["model_type"] if isinstance(d.get("model_type"), str)
                                           and len(d["model_type"]) <= 100 else "hf-config")
        else:
            d, default_name = load_config_json(path_or_dict)
        if name is not None and not isinstance(name, str):
            raise InputTypeError(f"name 必须是字符串，收到 {show(name)}", "name")
        return _from_hf_dict(d, name or default_name, source)


# ---------------------------------------------------------------- reading the file
#: A config.json is a few KB; anything above this is not one (and would be slow to parse).
MAX_CONFIG_BYTES = 16 * 2**20


def _name_in(d: Mapping[str, Any]) -> str | None:
    """``_name_or_path`` when it is a usable name (a non-empty string of at most 200 characters)."""
    v = d.get("_name_or_path")
    return v if isinstance(v, str) and 0 < len(v) <= 200 else None


def config_json_path(path: str | os.PathLike) -> str:
    """The config.json a path names: the file itself, or ``config.json`` in a model folder."""
    if not isinstance(path, str | os.PathLike):
        raise InputTypeError(f"config 路径必须是字符串或路径，收到 {show(path)}", "config")
    p = os.fspath(path)
    if os.path.isdir(p):
        f = os.path.join(p, "config.json")
        if not os.path.isfile(f):
            raise InputError(
                f"文件夹 {p} 里没有 config.json：请给出模型文件夹（含 config.json）或 config.json "
                "文件本身的路径", "config")
        return f
    return p


#: Deepest nesting of arrays and objects a config.json may have (real ones have three or four
#: levels). Checked before parsing: Python's parser recurses once per level, and where its
#: stack is small (Pyodide in the browser) a deep file overflows it before RecursionError.
MAX_JSON_DEPTH = 64
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` nests arrays and objects deeper than ``limit`` (brackets inside
    strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _JSON_TOKENS.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def parse_config_json(text: str | bytes, where: str = "config.json") -> dict[str, Any]:
    """Parse the text of a config.json into a dict; every failure is one clear Chinese error.

    Guards against what a hostile or broken file holds: invalid JSON, non-UTF-8 bytes,
    nesting too deep for the parser (``RecursionError``), integers of thousands of
    digits, a top level that is not an object.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(f"{where} 不是 UTF-8 文本：config.json 应是 UTF-8 编码的 JSON",
                             "config") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise InputError(
            f"{where} 有 {len(text) / 2**20:,.0f} MiB，不像 config.json（通常只有几 KB）："
            "请检查路径", "config")
    deep = InputError(f"{where} 的 JSON 嵌套太深，无法解析：config.json 只有几层嵌套，请检查文件",
                      "config")
    if json_depth_exceeds(text):
        raise deep
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where} 不是合法的 JSON：第 {e.lineno} 行第 {e.colno} "
                         "列有语法错误", "config") from None
    except RecursionError:
        raise deep from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"{where} 含有位数过多的整数（超过 4,300 位）：请检查文件",
                         "config") from None
    if not isinstance(d, dict):
        raise InputError(f"{where} 的顶层必须是 JSON 对象（{{...}}），收到 {type(d).__name__}",
                         "config")
    return d


def load_config_json(path: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """Read a config.json (or a model folder's): ``(dict, default name)``.

    The default name is the file's ``_name_or_path``, else the folder's name.
    """
    p = config_json_path(path)
    try:
        size = os.path.getsize(p)
        if size > MAX_CONFIG_BYTES:
            raise InputError(
                f"{p} 有 {size / 2**20:,.0f} MiB，不像 config.json（通常只有几 KB）：请检查路径",
                "config")
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"找不到 {p}：请给出 config.json 的路径或模型文件夹",
                         "config") from None
    except PermissionError:
        raise InputError(f"没有读取 {p} 的权限：请检查文件权限", "config") from None
    except OSError as e:
        raise InputError(f"无法读取 {p}（{type(e).__name__}）：请给出 config.json 的路径或模型文件夹",
                         "config") from None
    d = parse_config_json(raw, p)
    base = os.path.basename(p)
    stem = (os.path.basename(os.path.dirname(os.path.abspath(p))) if base == "config.json"
            else os.path.splitext(base)[0])
    return d, _name_in(d) or stem or "hf-config"


# ---------------------------------------------------------------- the readers
_ABSENT = object()


def _missing(key: str, mt: str, limit: str | None = None) -> InputError:
    hint = f"（合理范围 {_range(limit or key)}）" if (limit or key) in LIMITS else ""
    return InputError(f"config.json（model_type={mt!r}）缺少必填字段 {key}：请补上{hint}", key)


def _int(d: Mapping[str, Any], key: str, mt: str, limit: str | None = None,
         default: Any = _ABSENT) -> Any:
    """``d[key]``, an integer in its plausible range (``LIMITS[limit or key]``).

    Absent or null: ``default``; without one the key is required.
    """
    v = d.get(key)
    if v is None:
        if default is _ABSENT:
            raise _missing(key, mt, limit)
        return default
    return check_int(key, v, limit or key)


def _opt_int(d: Mapping[str, Any], key: str, mt: str, limit: str | None, absent: Any) -> Any:
    """Like :func:`_int`, but null means None (no value) and only an absent key means ``absent``."""
    if key not in d:
        return absent
    return None if d[key] is None else check_int(key, d[key], limit or key)


def _opt_float(d: Mapping[str, Any], key: str, limit: str, absent: float | None) -> float | None:
    """A float field: an absent key means ``absent``, null means None (switched off)."""
    if key not in d:
        return absent
    return None if d[key] is None else check_float(key, d[key], limit)


def _flag(d: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean key; absent or null means ``default``. ``"false"`` or ``1`` is refused."""
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputTypeError(f"{key} 必须是 true 或 false，收到 {show(v)}", key)
    return v


def _list(d: Mapping[str, Any], key: str, what: str) -> list[Any] | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, list | tuple):
        raise InputTypeError(f"{key} 必须是列表（{what}），收到 {show(v)}", key)
    return list(v)


def _refuse(d: Mapping[str, Any], mt: str, key: str, ok: Callable[[Any], bool], why: str) -> None:
    if key in d and not ok(d[key]):
        raise InputError(f"config.json（model_type={mt!r}）有 {key}={show(d[key])}：{why}", key)


def _silu(d: Mapping[str, Any], mt: str) -> None:
    if "hidden_act" in d and d["hidden_act"] != "silu":
        raise InputError(
            f"hidden_act={show(d['hidden_act'])}：model_type={mt!r} 只支持 'silu' 门控 MLP；"
            "请设 hidden_act='silu'", "hidden_act")


def _no_qk_norm_keys(d: Mapping[str, Any], mt: str) -> None:
    # A config edited to another model_type may still carry q/k-norm or sandwich-norm keys:
    # reading it as that type would silently drop parameters. Refuse.
    for key in ("qk_norm", "use_qk_norm", "query_pre_attn_scalar", "attn_logit_softcapping",
                "final_logit_softcapping", "q_lora_rank", "kv_lora_rank", "num_local_experts",
                "num_experts", "n_routed_experts"):
        if key in d and d[key] not in (None, False, 0):
            raise InputError(
                f"config.json 有 {key}={show(d[key])}，而 model_type={mt!r} 不会构建它："
                "请把 model_type 设为检查点训练时的模型族", key)


def _rope_base(d: Mapping[str, Any], mt: str, *, max_pos: int, head_dim: int | None = None,
               tie: bool = False) -> dict[str, Any]:
    """Fields every RoPE family reads the same way."""
    D = _int(d, "hidden_size", mt)
    F = _int(d, "intermediate_size", mt)
    L = _int(d, "num_hidden_layers", mt, "num_layers")
    N = _int(d, "num_attention_heads", mt, "num_heads")
    return dict(
        model_type=mt, hidden_size=D, intermediate_size=F, num_layers=L, num_heads=N,
        num_kv_heads=_int(d, "num_key_value_heads", mt, "num_kv_heads", default=N),
        vocab_size=_int(d, "vocab_size", mt),
        max_position=_int(d, "max_position_embeddings", mt, "max_position", default=max_pos),
        mlp="gated", norm="rmsnorm", learned_positions=False,
        tie_embeddings=_flag(d, "tie_word_embeddings", tie),
        head_dim=_int(d, "head_dim", mt, default=head_dim),
    )


def _attn_bias(d: Mapping[str, Any], default: bool = False) -> dict[str, bool]:
    ab = _flag(d, "attention_bias", default)
    return dict(qkv_bias=ab, out_bias=ab, mlp_bias=False)


def _window_all(d: Mapping[str, Any], mt: str, default: int | None) -> dict[str, Any]:
    """One window for every layer (Mistral, Mixtral, Phi-3, Qwen3-MoE): no layer_types."""
    if d.get("layer_types") is not None:
        raise InputError(
            f"config.json（model_type={mt!r}）有 layer_types，但 transformers 对 {mt} 的每一层"
            "都用同样的窗口（它的缓存会按 layer_types，注意力却不会）：请删去 layer_types",
            "layer_types")
    return dict(sliding_window=_opt_int(d, "sliding_window", mt, None, default))


def _layer_types(d: Mapping[str, Any]) -> tuple[Any, ...] | None:
    lt = _list(d, "layer_types", "每层一个 full_attention 或 sliding_attention")
    return None if lt is None else tuple(lt)


def _window_qwen(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    """Qwen2/Qwen3: a window only with use_sliding_window, on layers >= max_window_layers."""
    if not _flag(d, "use_sliding_window", False) or d.get("sliding_window") is None:
        return dict(sliding_window=None, layer_types=None)
    W = _int(d, "sliding_window", mt)
    lt = _layer_types(d)
    if lt is None:
        L = _int(d, "num_hidden_layers", mt, "num_layers")
        mwl = _int(d, "max_window_layers", mt, default=28)
        lt = tuple("sliding_attention" if i >= mwl else "full_attention" for i in range(L))
    return dict(sliding_window=W, layer_types=lt)


def _window_pattern(d: Mapping[str, Any], mt: str, default_w: int, pattern: int) -> dict[str, Any]:
    """Gemma 2/3, gpt-oss: layer_types, or every ``pattern``-th layer global."""
    W = _opt_int(d, "sliding_window", mt, None, default_w)
    lt = _layer_types(d)
    if lt is None:
        L = _int(d, "num_hidden_layers", mt, "num_layers")
        lt = tuple("sliding_attention" if (i + 1) % pattern else "full_attention"
                   for i in range(L))
    if W is None and "sliding_attention" in lt:
        raise InputError(f"config.json（model_type={mt!r}）有滑动窗口层，但 sliding_window 为 null："
                         "请设置 sliding_window", "sliding_window")
    return dict(sliding_window=W, layer_types=lt)


def _moe_common(d: Mapping[str, Any], mt: str, experts_key: str) -> dict[str, Any]:
    return dict(n_routed_experts=_int(d, experts_key, mt, "n_routed_experts"),
                experts_per_token=_int(d, "num_experts_per_tok", mt, "experts_per_token"))


def _read_gpt2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    if _flag(d, "add_cross_attention", False):
        raise InputError("add_cross_attention=true（编码器-解码器 GPT-2）不受支持：请设为 false",
                         "add_cross_attention")
    D = _int(d, "n_embd", mt, "hidden_size")
    L = _int(d, "n_layer", mt, "num_layers")
    N = _int(d, "n_head", mt, "num_heads")
    return dict(
        model_type=mt, hidden_size=D,
        intermediate_size=_int(d, "n_inner", mt, "intermediate_size", default=4 * D),
        num_layers=L, num_heads=N, num_kv_heads=N, vocab_size=_int(d, "vocab_size", mt),
        max_position=_int(d, "n_positions", mt, "max_position"), mlp="gelu", norm="layernorm",
        qkv_bias=True, out_bias=True, mlp_bias=True,
        tie_embeddings=_flag(d, "tie_word_embeddings", True), learned_positions=True,
    )


def _read_llama(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    _no_qk_norm_keys(d, mt)
    ab = _flag(d, "attention_bias", False)
    return dict(**_rope_base(d, mt, max_pos=2048), qkv_bias=ab, out_bias=ab,
                mlp_bias=_flag(d, "mlp_bias", False))


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
            "只支持每一层都是稀疏层（decoder_sparse_step=1）")
    dense = _list(d, "mlp_only_layers", "稠密层的下标") or []
    if dense != list(range(len(dense))):
        raise InputError(
            f"config.json（model_type={mt!r}）有 mlp_only_layers={show(dense)}：只支持前 k 层稠密，"
            "即 [0, 1, ..., k-1]", "mlp_only_layers")
    W = _opt_int(d, "sliding_window", mt, None, 4096) if _flag(
        d, "use_sliding_window", False) else None
    if d.get("layer_types") is not None:
        _window_all(d, mt, None)  # raises
    key = "num_local_experts" if "num_experts" not in d and "num_local_experts" in d else "num_experts"
    return dict(**_rope_base(d, mt, max_pos=32768), **_attn_bias(d), qk_norm="per_head",
                n_routed_experts=_int(d, key, mt, "n_routed_experts"),
                experts_per_token=_int(d, "num_experts_per_tok", mt, "experts_per_token"),
                moe_intermediate_size=_int(d, "moe_intermediate_size", mt),
                first_k_dense=len(dense), sliding_window=W)


def _gemma_common(d: Mapping[str, Any], mt: str, max_pos: int) -> dict[str, Any]:
    act = d.get("hidden_activation") or d.get("hidden_act") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise InputError(f"hidden_activation={show(act)}：Gemma 的门控 MLP 用 'gelu_pytorch_tanh'，"
                         "请改回", "hidden_activation")
    _refuse(d, mt, "use_bidirectional_attention", lambda v: not v,
            "不支持双向（编码器）注意力：请设为 false")
    return dict(**_rope_base(d, mt, max_pos=max_pos, head_dim=256, tie=True), **_attn_bias(d),
                norms_per_layer=4, scaled_embeddings=True, gate_act="gelu_pytorch_tanh")


def _read_gemma2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    return dict(**_gemma_common(d, mt, 8192), **_window_pattern(d, mt, 4096, 2),
                attn_logit_softcap=_opt_float(d, "attn_logit_softcapping", "attn_logit_softcap",
                                              50.0),
                final_logit_softcap=_opt_float(d, "final_logit_softcapping",
                                               "final_logit_softcap", 30.0))


def _read_gemma3_text(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    pattern = _int(d, "sliding_window_pattern", mt, default=6)
    return dict(**_gemma_common(d, mt, 131072), qk_norm="per_head",
                **_window_pattern(d, mt, 4096, pattern),
                attn_logit_softcap=_opt_float(d, "attn_logit_softcapping", "attn_logit_softcap",
                                              None),
                final_logit_softcap=_opt_float(d, "final_logit_softcapping",
                                               "final_logit_softcap", None))


def _read_phi3(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    rope = d.get("rope_scaling") or d.get("rope_parameters") or {}
    factor = d.get("partial_rotary_factor")
    if factor is None and isinstance(rope, Mapping):
        factor = rope.get("partial_rotary_factor")
    if factor not in (None, 1, 1.0):
        raise InputError(f"config.json（model_type={mt!r}）有 partial_rotary_factor={show(factor)}："
                         "只支持完整的旋转位置编码（1.0）", "partial_rotary_factor")
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
    nope = _int(d, "qk_nope_head_dim", mt)
    rope = _int(d, "qk_rope_head_dim", mt)
    base = _rope_base(d, mt, max_pos=max_pos)
    # head_dim in a DeepSeek config is the rope dim: derive ours.
    base.update(head_dim=nope + rope, num_kv_heads=base["num_heads"])
    return dict(
        **base, n_routed_experts=_int(d, "n_routed_experts", mt),
        n_shared_experts=_int(d, "n_shared_experts", mt),
        experts_per_token=_int(d, "num_experts_per_tok", mt, "experts_per_token"),
        first_k_dense=_int(d, "first_k_dense_replace", mt, "first_k_dense", default=first_k_dense),
        moe_intermediate_size=_int(d, "moe_intermediate_size", mt),
        q_lora_rank=_opt_int(d, "q_lora_rank", mt, None, 1536),
        kv_lora_rank=_int(d, "kv_lora_rank", mt), qk_rope_head_dim=rope, qk_nope_head_dim=nope,
        v_head_dim=_int(d, "v_head_dim", mt),
    )


def _read_deepseek_v3(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    return dict(**_mla_common(d, mt, 4096, 3), **_attn_bias(d), router_bias=True,
                num_nextn_predict_layers=_int(d, "num_nextn_predict_layers", mt, default=0))


def _read_deepseek_v2(d: Mapping[str, Any], mt: str) -> dict[str, Any]:
    _silu(d, mt)
    ab = _flag(d, "attention_bias", False)
    return dict(**_mla_common(d, mt, 2048, 0), qkv_bias=ab, out_bias=ab,
                mlp_bias=_flag(d, "mlp_bias", False))


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
            raise InputError(
                f"config.json 的 architectures={show(list(archs))} 不是 {mt!r} 模型：请保留检查点"
                f"自己的 model_type（{prefix}... 类）", "architectures")


# The config.json key each family writes for a ModelConfig field, to name it in an error.
_HF_KEYS = {
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads", "max_position": "max_position_embeddings",
    "experts_per_token": "num_experts_per_tok", "first_k_dense": "first_k_dense_replace",
}
_HF_KEYS_BY_TYPE = {
    "gpt2": {"hidden_size": "n_embd", "num_layers": "n_layer", "num_heads": "n_head",
             "num_kv_heads": "n_head", "max_position": "n_positions",
             "intermediate_size": "n_inner"},
    "mixtral": {"n_routed_experts": "num_local_experts"},
    "gpt_oss": {"n_routed_experts": "num_local_experts"},
    "qwen3_moe": {"n_routed_experts": "num_experts", "first_k_dense": "mlp_only_layers"},
}


def _read(d: Mapping[str, Any], mt: str, name: str, source: str, wrapper: str = "") -> ModelConfig:
    """One family's reader, then ModelConfig's checks; an error names the config.json key."""
    _check_architectures(d, mt)
    fields = _READERS[mt](d, mt)
    try:
        return ModelConfig(name=name, source=source, wrapper=wrapper, **fields)
    except InputError as e:
        key = {**_HF_KEYS, **_HF_KEYS_BY_TYPE.get(mt, {})}.get(e.field, e.field)
        if key != e.field and key in d:
            raise type(e)(f"{e}（config.json 里的 {key}）", key) from None
        raise


#: Defaults of transformers' config classes for the fields the readers otherwise
#: require, used for a multimodal wrapper's ``text_config`` only: transformers saves a
#: nested config as its difference from these defaults (google/gemma-3-4b-it's
#: text_config names six keys). ``tests/test_multimodal.py`` checks them against
#: transformers.
NESTED_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216,
                        num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=256, max_position_embeddings=131_072),
    "llama": dict(vocab_size=32_000, hidden_size=4096, intermediate_size=11_008,
                  num_hidden_layers=32, num_attention_heads=32, max_position_embeddings=2048),
    "mistral": dict(vocab_size=32_000, hidden_size=4096, intermediate_size=14_336,
                    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                    max_position_embeddings=4096 * 32),
    "qwen2": dict(vocab_size=151_936, hidden_size=4096, intermediate_size=22_016,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                  max_position_embeddings=32_768),
}
#: Whether a wrapper ties its LM head to the input embedding when its config.json says
#: nothing (transformers' wrapper config class default; the wrapper's own
#: ``tie_word_embeddings`` decides, not the nested one). Checked against transformers for
#: every wrapper listed.
WRAPPER_TIE_DEFAULTS: dict[str, bool] = {"gemma3": True}
#: Wrappers whose real config.json is in ``tests/hf_configs/multimodal`` and whose
#: language model's count is checked against transformers: wrapper -> nested model_type.
CHECKED_WRAPPERS: dict[str, str] = {"gemma3": "gemma3_text"}


def _read_wrapper(d: Mapping[str, Any], mt: Any, name: str, source: str) -> ModelConfig:
    """A multimodal wrapper: its language model (``text_config``), or a refusal naming it."""
    text = d["text_config"]
    if not isinstance(mt, str) or not mt or len(mt) > 100:
        raise InputError(f"model_type={show(mt)} 不受支持：请给出字符串 model_type", "model_type")
    if not isinstance(text, Mapping):
        raise InputTypeError(f"多模态封装 {mt!r} 的 text_config 必须是 JSON 对象，收到 {show(text)}",
                             "text_config")
    tmt = text.get("model_type")
    if not isinstance(tmt, str) or tmt not in _READERS:
        raise InputError(
            f"config.json 是多模态封装 model_type={mt!r}，其语言模型 text_config.model_type="
            f"{show(tmt)} 不受支持：tmath 能计算的语言模型是 {'、'.join(SUPPORTED_MODEL_TYPES)}",
            "text_config.model_type")
    t = {**NESTED_DEFAULTS.get(tmt, {}), **text}
    if d.get("tie_word_embeddings") is not None:  # the wrapper's own flag decides
        t["tie_word_embeddings"] = _flag(d, "tie_word_embeddings", False)
    elif t.get("tie_word_embeddings") is None:
        if mt not in WRAPPER_TIE_DEFAULTS:
            raise InputError(
                f"多模态封装 {mt!r} 的 config.json 没有写 tie_word_embeddings：不知道输出层是否与"
                "词嵌入共享；请在顶层补上 tie_word_embeddings（true 或 false）",
                "tie_word_embeddings")
        t["tie_word_embeddings"] = WRAPPER_TIE_DEFAULTS[mt]
    try:
        return _read(t, tmt, name, source, wrapper=mt)
    except InputError as e:
        raise type(e)(f"多模态封装 {mt!r} 的 text_config：{e}", f"text_config.{e.field}") from None


def _from_hf_dict(d: Mapping[str, Any], name: str, source: str) -> ModelConfig:
    mt = d.get("model_type")
    if isinstance(mt, str) and mt in _READERS:
        return _read(d, mt, name, source)
    if d.get("text_config") is not None:
        return _read_wrapper(d, mt, name, source)
    raise InputError(
        f"model_type={show(mt)} 不受支持：支持的 model_type 有 "
        f"{'、'.join(SUPPORTED_MODEL_TYPES)}，以及带 text_config 的多模态封装（只计语言模型）",
        "model_type")

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
====  ==========================================================

The architectural switches (``mlp``, ``norm``, biases, tied embeddings, learned
positions, MoE, MLA) are exactly the ones that change a parameter or FLOP count
in the Hugging Face transformers implementations of the six supported
``model_type`` values.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SUPPORTED_MODEL_TYPES: tuple[str, ...] = (
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "deepseek_v3",
)
MLP_KINDS = ("gelu", "gated")
NORM_KINDS = ("layernorm", "rmsnorm")

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
)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


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
    ``router_bias`` records DeepSeek's ``e_score_correction_bias``; it is a
    buffer adjusted outside back-propagation, so it is not a parameter (as in
    transformers). ``num_nextn_predict_layers`` records DeepSeek V3's
    multi-token-prediction (MTP) modules, which transformers does not build:
    they are counted by :func:`tmath.mtp_params`, never in ``count_params``.
    ``source`` is a key of :mod:`tmath.sources` (``""`` for ad-hoc configs).
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
        self._check_family()
        self._check_moe()
        self._check_mla()

    def _check_family(self) -> None:
        mt = self.model_type
        gpt2_like = dict(mlp="gelu", norm="layernorm", learned_positions=True)
        rope_like = dict(mlp="gated", norm="rmsnorm", learned_positions=False)
        want = gpt2_like if mt == "gpt2" else rope_like
        for f, v in want.items():
            if getattr(self, f) != v:
                raise ValueError(
                    f"{f}={getattr(self, f)!r} is not what model_type={mt!r} uses; set {f}={v!r}"
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
            if not (self.qkv_bias and self.out_bias and self.mlp_bias):
                raise ValueError("gpt2 has biases everywhere: set qkv_bias, out_bias, mlp_bias True")
        if mt in ("mistral", "mixtral", "deepseek_v3") and (
            self.qkv_bias or self.out_bias or self.mlp_bias
        ):
            if not (mt == "deepseek_v3" and self.qkv_bias == self.out_bias and not self.mlp_bias):
                raise ValueError(
                    f"model_type={mt!r} has no such biases: set qkv_bias, out_bias and "
                    "mlp_bias False (deepseek_v3: attention_bias sets qkv_bias=out_bias)"
                )
        if mt == "qwen2" and (not self.qkv_bias or self.out_bias or self.mlp_bias):
            raise ValueError(
                "qwen2 has q/k/v biases only: set qkv_bias=True, out_bias=False, mlp_bias=False"
            )
        if mt == "deepseek_v3" and self.kv_lora_rank == 0:
            raise ValueError("model_type='deepseek_v3' uses MLA: set kv_lora_rank > 0")
        if mt != "deepseek_v3" and (self.kv_lora_rank or self.q_lora_rank is not None):
            raise ValueError(
                f"MLA (kv_lora_rank/q_lora_rank) is only supported for deepseek_v3, not {mt!r}; "
                "set kv_lora_rank=0 and q_lora_rank=None"
            )
        if mt in ("mixtral", "deepseek_v3") and self.n_routed_experts == 0:
            raise ValueError(f"model_type={mt!r} is a MoE: set n_routed_experts > 0")
        if mt not in ("mixtral", "deepseek_v3") and self.n_routed_experts:
            raise ValueError(
                f"model_type={mt!r} has no experts: set n_routed_experts=0 (MoE needs mixtral "
                "or deepseek_v3)"
            )
        if mt == "mixtral" and (self.n_shared_experts or self.first_k_dense or self.router_bias):
            raise ValueError(
                "mixtral has no shared experts, dense layers or router bias: set "
                "n_shared_experts=0, first_k_dense=0, router_bias=False"
            )
        if self.router_bias and mt != "deepseek_v3":
            raise ValueError("router_bias is DeepSeek's e_score_correction_bias: set it False")
        if self.num_nextn_predict_layers and mt != "deepseek_v3":
            raise ValueError("num_nextn_predict_layers (MTP) is deepseek_v3 only: set it to 0")

    def _check_moe(self) -> None:
        moe_fields = (
            self.n_shared_experts,
            self.experts_per_token,
            self.first_k_dense,
            self.moe_intermediate_size,
        )
        if self.n_routed_experts == 0:
            if any(moe_fields) or self.router_bias:
                raise ValueError(
                    "n_routed_experts=0 (dense model) but MoE fields are set: set "
                    "n_shared_experts, experts_per_token, first_k_dense, "
                    "moe_intermediate_size to 0 and router_bias False, or set n_routed_experts"
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

        Supported ``model_type``: gpt2, llama, mistral, mixtral, qwen2, deepseek_v3.
        Defaults follow transformers' own config classes (e.g. ``tie_word_embeddings``
        is True for gpt2 and False for the others; gpt2's ``n_inner`` None means 4·D).
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


def _req(d: Mapping[str, Any], key: str, mt: str) -> Any:
    if key not in d or d[key] is None:
        raise ValueError(f"config.json (model_type={mt!r}) is missing required field {key!r}")
    return d[key]


def _from_hf_dict(d: Mapping[str, Any], name: str, source: str) -> ModelConfig:
    mt = d.get("model_type")
    if mt not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"model_type={mt!r} is not supported; supported model types: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    if mt == "gpt2":
        if d.get("add_cross_attention"):
            raise ValueError("add_cross_attention=True (encoder-decoder GPT-2) is not supported")
        D = _req(d, "n_embd", mt)
        n_inner = d.get("n_inner")
        return ModelConfig(
            name=name, model_type=mt, hidden_size=D,
            intermediate_size=4 * D if n_inner is None else n_inner,
            num_layers=_req(d, "n_layer", mt), num_heads=_req(d, "n_head", mt),
            num_kv_heads=_req(d, "n_head", mt), vocab_size=_req(d, "vocab_size", mt),
            max_position=_req(d, "n_positions", mt), mlp="gelu", norm="layernorm",
            qkv_bias=True, out_bias=True, mlp_bias=True,
            tie_embeddings=bool(d.get("tie_word_embeddings", True)),
            learned_positions=True, source=source,
        )
    D = _req(d, "hidden_size", mt)
    N = _req(d, "num_attention_heads", mt)
    K = d.get("num_key_value_heads")
    K = N if K is None else K
    head_dim = d.get("head_dim")
    max_pos_default = {"llama": 2048, "deepseek_v3": 4096, "qwen2": 32768}.get(mt, 4096 * 32)
    common: dict[str, Any] = dict(
        name=name, model_type=mt, hidden_size=D,
        intermediate_size=_req(d, "intermediate_size", mt),
        num_layers=_req(d, "num_hidden_layers", mt), num_heads=N, num_kv_heads=K,
        vocab_size=_req(d, "vocab_size", mt),
        max_position=d.get("max_position_embeddings") or max_pos_default,
        mlp="gated", norm="rmsnorm", learned_positions=False,
        tie_embeddings=bool(d.get("tie_word_embeddings", False)), source=source,
        head_dim=head_dim,
    )
    if d.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act={d.get('hidden_act')!r}: only 'silu' gated MLPs are supported")
    if mt == "llama":
        ab = bool(d.get("attention_bias", False))
        return ModelConfig(**common, qkv_bias=ab, out_bias=ab, mlp_bias=bool(d.get("mlp_bias", False)))
    if mt == "mistral":
        return ModelConfig(**common, qkv_bias=False, out_bias=False, mlp_bias=False)
    if mt == "qwen2":
        return ModelConfig(**common, qkv_bias=True, out_bias=False, mlp_bias=False)
    if mt == "mixtral":
        F = common["intermediate_size"]
        return ModelConfig(
            **common, qkv_bias=False, out_bias=False, mlp_bias=False,
            n_routed_experts=_req(d, "num_local_experts", mt),
            experts_per_token=_req(d, "num_experts_per_tok", mt), moe_intermediate_size=F,
        )
    # deepseek_v3 (MLA + MoE). head_dim in its config is the rope dim: derive ours.
    ab = bool(d.get("attention_bias", False))
    nope = _req(d, "qk_nope_head_dim", mt)
    rope = _req(d, "qk_rope_head_dim", mt)
    common.update(head_dim=nope + rope, num_kv_heads=N)
    return ModelConfig(
        **common, qkv_bias=ab, out_bias=ab, mlp_bias=False,
        n_routed_experts=_req(d, "n_routed_experts", mt),
        n_shared_experts=_req(d, "n_shared_experts", mt),
        experts_per_token=_req(d, "num_experts_per_tok", mt),
        first_k_dense=_req(d, "first_k_dense_replace", mt),
        moe_intermediate_size=_req(d, "moe_intermediate_size", mt), router_bias=True,
        q_lora_rank=d.get("q_lora_rank"), kv_lora_rank=_req(d, "kv_lora_rank", mt),
        qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=_req(d, "v_head_dim", mt),
        num_nextn_predict_layers=d.get("num_nextn_predict_layers") or 0,
    )

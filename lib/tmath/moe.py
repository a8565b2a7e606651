"""Mixture-of-experts (MoE) and MLA arithmetic: the seed's shortcuts beside the exact counts.

Conventions (read before using a number):

* Parameter counts come from :func:`tmath.count_params` (exact, Hugging Face
  layout); this module adds the source document's shortcut formulas so the
  book can show how far they are from the exact count.
* KV cache sizes are bytes per token over all layers.  The "MHA equivalent" of
  an MLA model caches, per layer, a key of ``qk_nope + qk_rope`` and a value of
  ``v_head_dim`` for every one of the N heads -- what the same attention would
  cache without the latent compression.  A "GQA equivalent" caches the same
  shapes for ``groups`` KV heads.
* Critical batch: the weights-only roofline of :func:`tmath.serving.critical_batch`
  (every expert's weights read once per step, ``k B >= E``).
* Communication: the source document's ring model (JAX scaling book): with V
  bytes per array and W the link bandwidth, an all-reduce costs ``2V/W``, an
  all-gather ``V/W`` and an all-to-all on a bidirectional ring ``V/(4W)``.
  :func:`ring_comm_units` (now in :mod:`tmath.comm`, re-exported here) returns costs in
  units of ``V/W``.

Dependencies run one way: this module imports :mod:`tmath.serving` (the roofline,
:func:`~tmath.serving.expected_experts_touched`), never the reverse.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from typing import TYPE_CHECKING, Any

from tmath._checks import int_arg
from tmath.comm import RingComm, ring_comm_units  # moved to tmath.comm; re-exported
from tmath.config import ModelConfig
from tmath.notation import sym
from tmath.serving import expected_experts_touched  # moved to tmath.serving; re-exported

if TYPE_CHECKING:  # SymPy is imported by the functions that build expressions
    import sympy as sp

__all__ = [
    "SYMBOLS",  # noqa: F822  (built on first use by __getattr__)
    "moe_param_exprs",
    "moe_subs",
    "critical_batch_expr",
    "expert_params",
    "seed_moe_params",
    "kv_equivalents",
    "mla_gqa_equivalent_groups",
    "moe_critical_batch",
    "expected_experts_touched",
    "RingComm",
    "ring_comm_units",
]


def _moe_cfg(cfg: Any) -> ModelConfig:
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if not cfg.is_moe:
        raise ValueError(
            f"cfg {cfg.name!r} is not a MoE model (n_routed_experts = 0); pass a MoE config "
            "such as tmath.preset('deepseek-v3') or tmath.preset('mixtral-8x7b')"
        )
    return cfg


def expert_params(cfg: ModelConfig) -> int:
    """Parameters of one routed expert: a gated MLP of width ``moe_intermediate_size``
    (3·D·F_e; 2·D·F_e for a 2-matrix MLP), no biases."""
    cfg = _moe_cfg(cfg)
    n_mat = 3 if cfg.mlp == "gated" else 2
    return n_mat * cfg.hidden_size * cfg.moe_intermediate_size


def seed_moe_params(cfg: ModelConfig) -> dict[str, int]:
    """The source document's shortcut (sec. 6.1): ``total = E × expert × L`` and
    ``active = k × expert × L``, with L = all ``num_layers`` and nothing else counted
    (no attention, shared experts, dense layers, router, embeddings)."""
    cfg = _moe_cfg(cfg)
    e = expert_params(cfg)
    return {
        "total": cfg.n_routed_experts * e * cfg.num_layers,
        "active": cfg.experts_per_token * e * cfg.num_layers,
    }


def kv_equivalents(cfg: ModelConfig, dtype: str = "bf16", groups: int = 8) -> dict[str, int]:
    """KV-cache bytes per token of an MLA model and of its MHA / GQA equivalents.

    Keys: ``"mla"`` (:func:`tmath.kv_cache_bytes_per_token`, the latent cache),
    ``"mha"`` (N heads of key ``qk_nope + qk_rope`` and value ``v_head_dim``),
    ``"gqa"`` (the same shapes for ``groups`` KV heads).
    """
    from tmath.kvcache import dtype_bytes, kv_cache_bytes_per_token

    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if not cfg.is_mla:
        raise ValueError(
            f"cfg {cfg.name!r} has no MLA (kv_lora_rank = 0); pass an MLA config such as "
            "tmath.preset('deepseek-v3')"
        )
    groups = int_arg("groups", groups)
    if groups > cfg.num_heads:
        raise ValueError(f"groups ({groups}) must be <= num_heads ({cfg.num_heads})")
    per_head = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim
    b = dtype_bytes(dtype)
    return {
        "mla": kv_cache_bytes_per_token(cfg, dtype),
        "mha": int(cfg.num_layers * cfg.num_heads * per_head * b),
        "gqa": int(cfg.num_layers * groups * per_head * b),
    }


def mla_gqa_equivalent_groups(cfg: ModelConfig) -> Fraction:
    """Number of GQA groups whose cache equals MLA's, DeepSeek-V2's convention.

    A GQA group caches a key and a value of ``d_h`` = ``qk_nope_head_dim`` each
    (2·d_h per layer); MLA caches ``kv_lora_rank + qk_rope_head_dim``, so
    groups = (d_c + d_R) / (2 d_h) (DeepSeek-V2, Table 1: 2.25 for 512 + 64 and d_h = 128).
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if not cfg.is_mla:
        raise ValueError(f"cfg {cfg.name!r} has no MLA (kv_lora_rank = 0)")
    return Fraction(cfg.kv_lora_rank + cfg.qk_rope_head_dim, 2 * cfg.qk_nope_head_dim)


def moe_critical_batch(cfg: ModelConfig, gpu: Any = "H100", weight_dtype: str = "bf16") -> float:
    """Tokens per step above which the routed-expert matmuls become compute-bound.

    ``critical_batch(peak, bandwidth, weight_bytes, E, k)`` with the chip's dense
    16-bit peak: ``ridge × bytes_per_weight × E / (2k)``.  For a dense model
    (no experts) E = k = 1.
    """
    from tmath.hardware import hardware
    from tmath.serving import critical_batch, dtype_bytes

    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    hw = hardware(gpu)
    e, k = (cfg.n_routed_experts, cfg.experts_per_token) if cfg.is_moe else (1, 1)
    return critical_batch(hw.dense_flops, hw.hbm_bandwidth, weight_bytes=dtype_bytes(weight_dtype),
                          experts=e, experts_per_token=k)


# --- symbolic ledger of a MoE + MLA model (DeepSeek V3 layout) -----------------------

#: Symbols, from the book's notation registry (:mod:`tmath.notation`): width D,
#: vocabulary V, layers L of which L_d dense (FFN width F), experts of width F_e
#: (E routed, E_shared shared, k routed per token), N heads, MLA ranks r_q (queries)
#: and d_c (keys/values), rotary d_R, no-rope d_n and value d_v head dims.  The key
#: "S" is kept as an alias of E_shared for older code.
@cache
def _symbols() -> dict[str, sp.Symbol]:
    out = {
        name: sym(name)
        for name in ("D", "V", "L", "L_d", "F", "F_e", "E", "E_shared", "k", "N",
                     "r_q", "d_c", "d_R", "d_n", "d_v")
    }
    out["S"] = out["E_shared"]
    return out


def __getattr__(name: str) -> Any:
    # ``tmath.moe.SYMBOLS`` is built on first use, so importing the module loads no SymPy.
    if name == "SYMBOLS":
        return _symbols()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def moe_param_exprs() -> dict[str, sp.Expr]:
    """Total and active parameters of a DeepSeek-V3-style model as SymPy expressions.

    MLA per layer: ``D r_q + r_q N (d_n + d_R) + D (d_c + d_R) + d_c N (d_n + d_v) + N d_v D``;
    norms ``L (2D + r_q + d_c) + D``; ``L_d`` dense gated MLPs ``3DF``; ``L - L_d`` MoE
    layers with ``E`` routed and ``E_shared`` shared gated experts ``3DF_e`` and a router ``ED``;
    untied embedding and LM head ``2VD``.  ``active`` replaces the routed ``E`` by ``k``
    (the router is still computed for every expert).  Equals ``tmath.count_params``.
    """
    g = _symbols()
    D, N, L, Ld = g["D"], g["N"], g["L"], g["L_d"]
    attn = (D * g["r_q"] + g["r_q"] * N * (g["d_n"] + g["d_R"]) + D * (g["d_c"] + g["d_R"])
            + g["d_c"] * N * (g["d_n"] + g["d_v"]) + N * g["d_v"] * D)
    base = (2 * g["V"] * D + L * attn + L * (2 * D + g["r_q"] + g["d_c"]) + D
            + Ld * 3 * D * g["F"])

    def with_routed(routed: sp.Expr) -> sp.Expr:
        return base + (L - Ld) * ((routed + g["E_shared"]) * 3 * D * g["F_e"] + g["E"] * D)

    return {"total": with_routed(g["E"]), "active": with_routed(g["k"])}


def moe_subs(cfg: ModelConfig) -> dict[sp.Symbol, int]:
    """Values of :data:`SYMBOLS` for a MoE + MLA config (e.g. ``preset("deepseek-v3")``)."""
    cfg = _moe_cfg(cfg)
    if not cfg.is_mla or cfg.q_lora_rank is None:
        raise ValueError(f"cfg {cfg.name!r} needs MLA with a q_lora_rank (DeepSeek-V3 layout)")
    vals = {"D": cfg.hidden_size, "V": cfg.vocab_size, "L": cfg.num_layers,
            "L_d": cfg.first_k_dense, "F": cfg.intermediate_size,
            "F_e": cfg.moe_intermediate_size, "E": cfg.n_routed_experts,
            "E_shared": cfg.n_shared_experts, "k": cfg.experts_per_token, "N": cfg.num_heads,
            "r_q": cfg.q_lora_rank, "d_c": cfg.kv_lora_rank, "d_R": cfg.qk_rope_head_dim,
            "d_n": cfg.qk_nope_head_dim, "d_v": cfg.v_head_dim}
    g = _symbols()
    return {g[name]: v for name, v in vals.items()}


def critical_batch_expr() -> tuple[sp.Expr, dict[str, sp.Symbol]]:
    """Weights-only critical batch ``B* = R b E / (2k)`` solved with SymPy.

    Intensity of a MoE layer: ``2 k B D F_e / (b E D F_e)`` FLOP per byte (b = bytes
    per weight, the registry's letter); setting it equal to the ridge R and solving
    for B.  E = k = 1 gives the dense ``R b / 2``.  The returned dict maps "B", "b"
    and "R" to the registry's symbols ("beta" is kept as an alias of "b").
    """
    # Solve over plain positive symbols (B is an integer in the registry, and solve
    # drops a root it cannot prove integral), then write the result in the book's letters.
    import sympy as sp

    B_, b_, R_ = sp.symbols("B_ b_ R_", positive=True)
    g = _symbols()
    E, k, D, Fe = g["E"], g["k"], g["D"], g["F_e"]
    intensity = 2 * k * B_ * D * Fe / (b_ * E * D * Fe)
    root = sp.solve(sp.Eq(intensity, R_), B_)[0]
    book = {"B": sym("B"), "b": sym("b"), "R": sym("R")}
    expr = root.subs({b_: book["b"], R_: book["R"]})
    return expr, {**book, "beta": book["b"]}

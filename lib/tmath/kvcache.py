"""KV-cache sizes for MHA, GQA, MQA and MLA.

Per token, a standard attention layer caches one key and one value vector per
KV head: ``2·L·K·H`` elements. MLA (DeepSeek V2/V3) caches the compressed
latent and the shared rotary key instead: ``L·(kv_lora_rank + qk_rope_head_dim)``
elements, the cache its decoding kernels keep (transformers' implementation
caches the same two tensors).

Element sizes in bytes: fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5. Results
are whole bytes; with int4 an odd element count is rounded *up* (two 4-bit
values per byte, the last byte half used). Scales/zero-points of quantised
caches are not included.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil

from tmath._checks import int_arg
from tmath.config import ModelConfig

DTYPE_BYTES: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
}


def dtype_bytes(dtype: str) -> Fraction:
    """Bytes per element of ``dtype`` (exact; int4 is 1/2)."""
    try:
        return DTYPE_BYTES[dtype]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}"
        ) from None


def kv_cache_elements_per_token(cfg: ModelConfig) -> int:
    """Cached elements per token over all layers (2·L·K·H, or MLA's latent)."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    if cfg.is_mla:
        return cfg.num_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim


def kv_cache_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """KV-cache bytes one token adds (all layers), rounded up to a whole byte."""
    return ceil(kv_cache_elements_per_token(cfg) * dtype_bytes(dtype))


def kv_cache_bytes(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Bytes of the KV cache of ``batch`` sequences of ``seq_len`` tokens (rounded up)."""
    int_arg("seq_len", seq_len)
    int_arg("batch", batch)
    return ceil(kv_cache_elements_per_token(cfg) * seq_len * batch * dtype_bytes(dtype))


def max_sequences(cfg: ModelConfig, budget_bytes: int, seq_len: int, dtype: str = "bf16") -> int:
    """How many full ``seq_len``-token sequences' KV caches fit in ``budget_bytes`` (floor)."""
    if not isinstance(budget_bytes, int) or isinstance(budget_bytes, bool):
        raise TypeError(f"budget_bytes must be an int number of bytes, got {budget_bytes!r}")
    if budget_bytes < 0:
        raise ValueError(f"budget_bytes must be >= 0, got {budget_bytes}")
    per_seq = kv_cache_bytes(cfg, seq_len, 1, dtype)
    return budget_bytes // per_seq

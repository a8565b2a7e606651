"""KV-cache sizes for MHA, GQA, MQA and MLA.

Per token, a standard attention layer caches one key and one value vector per
KV head: ``2·L·K·H`` elements. MLA (DeepSeek V2/V3) caches the compressed
latent and the shared rotary key instead: ``L·(kv_lora_rank + qk_rope_head_dim)``
elements, the cache its decoding kernels keep (transformers' implementation
caches the same two tensors).

Sliding-window layers (Mistral, Gemma 2/3, gpt-oss, Phi-3, ...) keep only the
last W positions, so per-token bytes no longer describe a sequence:
:func:`kv_cache_bytes_sequence` gives the bytes of whole sequences of a given
length. Convention: a window-W layer holds ``min(seq_len, W)`` positions, the
W keys the next query attends to; this is what transformers' static
sliding-window cache allocates (``StaticSlidingWindowLayer``: ``min(W,
max_cache_len)``). transformers' default ``DynamicSlidingWindowLayer`` stores
one position fewer between steps (``W − 1``: the new token's key completes
the window) and grows back to W while it attends; the difference is one
position per window layer. Global layers hold all ``seq_len`` positions.

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
from tmath.errors import InputError, InputTypeError, show

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
        raise InputError(
            f"未知的 dtype={show(dtype)}：请用 {'、'.join(DTYPE_BYTES)} 之一", "dtype"
        ) from None


def kv_cache_elements_per_token(cfg: ModelConfig) -> int:
    """Cached elements per token over all layers (2·L·K·H, or MLA's latent)."""
    if not isinstance(cfg, ModelConfig):
        raise InputTypeError(f"cfg 必须是 tmath.ModelConfig，收到 {type(cfg).__name__}", "cfg")
    if cfg.is_mla:
        return cfg.num_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim


def kv_cache_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """KV-cache bytes one token adds (all layers), rounded up to a whole byte.

    With sliding-window layers this is the growth while the sequence is
    shorter than the window; for whole sequences use :func:`kv_cache_bytes_sequence`.
    """
    return ceil(kv_cache_elements_per_token(cfg) * dtype_bytes(dtype))


def kv_cache_bytes_per_token_per_gpu(cfg: ModelConfig, tp: int, dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds on each of ``tp`` tensor-parallel GPUs.

    The split is :func:`tmath.layout.tp_layout`'s: K/tp KV heads per GPU, one whole head
    when K < tp (replicated on tp/K GPUs), all of MLA's latent on every GPU.
    """
    from tmath.layout import kv_share_per_gpu

    return kv_cache_bytes_per_token(cfg, dtype) * float(kv_share_per_gpu(cfg, tp))


def kv_cache_positions(cfg: ModelConfig, seq_len: int) -> int:
    """Cached positions of one sequence summed over the layers: min(T, W) per window layer."""
    T = int_arg("seq_len", seq_len)
    if not isinstance(cfg, ModelConfig):
        raise InputTypeError(f"cfg 必须是 tmath.ModelConfig，收到 {type(cfg).__name__}", "cfg")
    return sum(T if w is None else min(T, w) for w in cfg.layer_windows)


def kv_cache_bytes_sequence(cfg: ModelConfig, seq_len: int, dtype: str = "bf16",
                            batch: int = 1) -> int:
    """KV-cache bytes of ``batch`` whole sequences of ``seq_len`` tokens (rounded up).

    Honours sliding windows: a window-W layer keeps ``min(seq_len, W)`` positions
    (the module docstring states the convention and how it relates to
    transformers' caches). Without windows this is per-token bytes × seq_len × batch.
    """
    int_arg("batch", batch)
    per_layer_token = Fraction(kv_cache_elements_per_token(cfg), cfg.num_layers)
    return ceil(per_layer_token * kv_cache_positions(cfg, seq_len) * batch * dtype_bytes(dtype))


def kv_cache_bytes(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Bytes of the KV cache of ``batch`` sequences of ``seq_len`` tokens (rounded up).

    The same as :func:`kv_cache_bytes_sequence` (sliding windows honoured).
    """
    return kv_cache_bytes_sequence(cfg, seq_len, dtype=dtype, batch=batch)


def max_sequences(cfg: ModelConfig, budget_bytes: int, seq_len: int, dtype: str = "bf16") -> int:
    """How many full ``seq_len``-token sequences' KV caches fit in ``budget_bytes`` (floor).

    Sliding windows honoured (:func:`kv_cache_bytes_sequence`).
    """
    if not isinstance(budget_bytes, int) or isinstance(budget_bytes, bool):
        raise InputTypeError(f"budget_bytes 必须是整数字节数，收到 {show(budget_bytes)}",
                             "budget_bytes")
    if budget_bytes < 0:
        raise InputError(f"budget_bytes 必须 >= 0，收到 {budget_bytes}", "budget_bytes")
    per_seq = kv_cache_bytes_sequence(cfg, seq_len, dtype=dtype)
    return budget_bytes // per_seq

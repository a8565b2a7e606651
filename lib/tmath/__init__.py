"""tmath: the arithmetic of transformer language models, exactly.

One place for every computation the book 《Transformer 的数学》 shows: model
configurations and presets, exact parameter and FLOP counts (checked against
transformers and PyTorch's FlopCounterMode), memory, KV cache, serving bounds,
energy, attention in NumPy (naive and tiled), SymPy derivations, the errata of
the source notes and the exercises' answer keys.

Importing ``tmath`` is cheap: every name below is loaded from its module on first
use (PEP 562), so a notebook or the command line pays for SymPy, NumPy or
matplotlib only where it uses them.  ``tmath.plots`` is imported on its own (it
sets matplotlib's rcParams).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it (and, where it differs, its name there).
_NAMES: dict[str, tuple[str, str]] = {}


def _export(module: str, *names: str, **renamed: str) -> None:
    for name in names:
        _NAMES[name] = (module, name)
    for public, inner in renamed.items():
        _NAMES[public] = (module, inner)


# --- sources; the ledger: configs, presets, parameters, FLOPs, KV cache -------------
_export("sources", "SOURCES", "Source", "source")
_export("config", "SUPPORTED_MODEL_TYPES", "ModelConfig")
_export("flops", "FlopCount", "attention_crossover", "attention_matmul_ratio", "einsum_dims",
        "einsum_flops", "forward_flops", "six_n_t", "six_n_t_error", "training_flops")
_export("kvcache", "DTYPE_BYTES", "kv_cache_bytes", "kv_cache_bytes_per_token",
        "kv_cache_bytes_sequence", "max_sequences")
_export("params", "ParamCount", "count_params", "mtp_params")
# ``presets`` names both a module and its function: bound here, eagerly (a cheap import),
# because importing the submodule anywhere would otherwise rebind ``tmath.presets`` to it.
from tmath.presets import GPT3_TABLE_2_1, preset, presets  # noqa: E402, F401

# --- memory, serving, energy ----------------------------------------------------------
_export("energy", "EnergyChain", "energy_chain")
_export("hardware", "HARDWARE", "Hardware", "hardware_names", get_hardware="hardware")
_export("memory", "activation_bytes_per_layer", "activation_bytes_seed_heuristic",
        "activation_memory", "checkpoint_flops", "training_bytes_per_param",
        "zero_bytes_per_param", "ActivationBytes", "activation_bytes")
_export("serving", "concurrency", "critical_batch", "decode_bound", "decode_time_lower_bound",
        "max_concurrent_sequences", "WORKSPACE_BYTES_PER_GPU", "expected_experts_touched")
_export("sweep", "flops_vs_seq_len")
# --- attention in NumPy -----------------------------------------------------------------
_export("attention", "AttentionResult", "attention_hbm_bytes", "attention_memory_bytes",
        "causal_mask", "flash_attention", "flash_attention_backward", "merge_attention_states",
        "naive_attention", "naive_attention_backward", "peak_memory_and_time")
# --- the book's support: exercise keys, one deployment's ledger, notation ---------------
_export("exercises", "check")
_export("ledger", "build_ledger")
# --- many GPUs (Part V): the layout on a mesh, its collectives, the plan ---------------
_export("layout", "TPLayout", "tp_layout", "Layout", "LayoutError", "build_layout")
_export("notation", "sym", "syms")

#: Submodules reachable as attributes (``tmath.energy``) without an explicit import.
_SUBMODULES = frozenset({
    "actmeasure", "actterms", "attention", "calculator", "comm", "config", "crosscheck", "dist",
    "energy", "errata", "errors", "exercises", "flops", "fmt", "gpt", "hardware", "kvcache",
    "layout", "ledger", "memory", "moe", "nb", "notation", "params", "plan", "plots", "presets",
    "roofline", "serving", "sources", "sweep", "symbolic", "toy",
    "serve",  # Part VI: serving (issue 37)
})

__all__ = sorted(set(_NAMES) | {"GPT3_TABLE_2_1", "preset", "presets"} | {
    "energy", "hardware", "memory", "serving", "sweep", "attention", "calculator",
    "crosscheck", "errata", "exercises", "gpt", "moe", "roofline", "symbolic", "actmeasure",
    "ledger", "fmt", "notation", "comm", "layout",
    "serve",  # Part VI: serving (issue 37)
})


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        module, inner = _NAMES[name]
        value = getattr(importlib.import_module(f"tmath.{module}"), inner)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"tmath.{name}")
    else:
        raise AttributeError(f"module 'tmath' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)

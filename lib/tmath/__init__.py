"""tmath: the arithmetic of transformer language models, exactly.

One place for every computation the book 《Transformer 的数学》 shows: model
configurations and presets, exact parameter and FLOP counts (checked against
transformers and PyTorch's FlopCounterMode), memory, KV cache, serving bounds,
energy, attention in NumPy (naive and tiled), SymPy derivations, the errata of
the source notes and the exercises' answer keys.
"""

from tmath.sources import SOURCES, Source, source

__all__ = ["SOURCES", "Source", "source"]
__version__ = "0.1.0"

# --- the ledger: configs, presets, parameters, FLOPs, KV cache --------------
from tmath.config import SUPPORTED_MODEL_TYPES, ModelConfig  # noqa: E402
from tmath.flops import (  # noqa: E402
    FlopCount,
    attention_crossover,
    attention_matmul_ratio,
    einsum_dims,
    einsum_flops,
    forward_flops,
    six_n_t,
    six_n_t_error,
    training_flops,
)
from tmath.kvcache import (  # noqa: E402
    DTYPE_BYTES,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_cache_bytes_sequence,
    max_sequences,
)
from tmath.params import ParamCount, count_params, mtp_params  # noqa: E402
from tmath.presets import GPT3_TABLE_2_1, preset, presets  # noqa: E402

__all__ += [
    "SUPPORTED_MODEL_TYPES", "ModelConfig", "FlopCount", "attention_crossover",
    "attention_matmul_ratio", "einsum_dims", "einsum_flops", "forward_flops", "six_n_t",
    "six_n_t_error", "training_flops", "DTYPE_BYTES", "kv_cache_bytes",
    "kv_cache_bytes_per_token", "kv_cache_bytes_sequence", "max_sequences", "ParamCount",
    "count_params", "mtp_params",
    "GPT3_TABLE_2_1", "preset", "presets",
]

# --- memory, serving, energy --------------------------------------------------
from tmath import energy, hardware, memory, serving, sweep  # noqa: E402
from tmath.energy import EnergyChain, energy_chain  # noqa: E402
from tmath.hardware import HARDWARE, Hardware, hardware_names  # noqa: E402
from tmath.hardware import hardware as get_hardware  # noqa: E402
from tmath.memory import (  # noqa: E402
    activation_bytes_per_layer,
    activation_bytes_seed_heuristic,
    activation_memory,
    checkpoint_flops,
    training_bytes_per_param,
    zero_bytes_per_param,
)
from tmath.serving import (  # noqa: E402
    concurrency,
    critical_batch,
    decode_bound,
    decode_time_lower_bound,
    max_concurrent_sequences,
)
from tmath.sweep import flops_vs_seq_len  # noqa: E402

__all__ += [
    "energy", "hardware", "memory", "serving", "sweep",
    "EnergyChain", "energy_chain", "HARDWARE", "Hardware", "hardware_names", "get_hardware",
    "activation_bytes_per_layer", "activation_bytes_seed_heuristic", "activation_memory",
    "checkpoint_flops", "training_bytes_per_param", "zero_bytes_per_param",
    "concurrency", "critical_batch", "decode_bound", "decode_time_lower_bound",
    "max_concurrent_sequences", "flops_vs_seq_len",
]

# --- attention in NumPy ----------------------------------------------------------
from tmath.attention import (  # noqa: E402
    AttentionResult,
    attention_hbm_bytes,
    attention_memory_bytes,
    causal_mask,
    flash_attention,
    flash_attention_backward,
    merge_attention_states,
    naive_attention,
    naive_attention_backward,
    peak_memory_and_time,
)

__all__ += [
    "AttentionResult",
    "attention_hbm_bytes",
    "attention_memory_bytes",
    "causal_mask",
    "flash_attention",
    "flash_attention_backward",
    "merge_attention_states",
    "naive_attention",
    "naive_attention_backward",
    "peak_memory_and_time",
]

# --- the book's other modules and its support (errata, exercise keys) --------
from tmath import (  # noqa: E402
    attention,
    calculator,
    crosscheck,
    errata,
    exercises,
    gpt,
    moe,
    roofline,
    symbolic,
)
from tmath.exercises import check  # noqa: E402

__all__ += [
    "attention", "calculator", "crosscheck", "errata", "exercises", "gpt", "moe", "roofline",
    "symbolic", "check",
]

# --- one deployment's ledger; activations per architecture ----------------------
from tmath import actmeasure, ledger  # noqa: E402
from tmath.layout import TPLayout, tp_layout  # noqa: E402
from tmath.ledger import build_ledger  # noqa: E402
from tmath.memory import ActivationBytes, activation_bytes  # noqa: E402
from tmath.serving import WORKSPACE_BYTES_PER_GPU, expected_experts_touched  # noqa: E402

__all__ += [
    "actmeasure", "ledger", "build_ledger", "ActivationBytes", "activation_bytes",
    "expected_experts_touched", "WORKSPACE_BYTES_PER_GPU", "TPLayout", "tp_layout",
]

# --- many GPUs (Part V): the layout on a mesh, its collectives, the plan ------------------
from tmath import comm, layout  # noqa: E402
from tmath.layout import Layout, LayoutError, build_layout  # noqa: E402

__all__ += ["comm", "layout", "Layout", "LayoutError", "build_layout"]

# --- the book's one number formatter (tmath.plots is imported on its own: it sets rcParams)
from tmath import fmt, notation  # noqa: E402
from tmath.notation import sym, syms  # noqa: E402

__all__ += ["fmt", "notation", "sym", "syms"]

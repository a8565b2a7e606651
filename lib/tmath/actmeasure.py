"""Measure the activations a transformers model keeps for backward, and compare with the formula.

Ground truth for :func:`tmath.activation_bytes`: build a small Hugging Face model from a
config dict (random weights, float32, CPU, ``attn_implementation="eager"``, ``train()`` so
dropout is active), run one forward pass under ``torch.autograd.graph.saved_tensors_hooks``
and add up the bytes of the *distinct* tensors autograd saves for backward:

* distinct by storage: a view (a transpose, a reshape, a slice) of a tensor already saved
  shares its storage (``untyped_storage().data_ptr()``) and is counted once, at the size of
  the storage;
* parameters (weights, biases, norm scales) are saved too, but they are not activations:
  tensors whose storage is a parameter's are left out;
* per layer: the difference between a 2-layer and a 1-layer model of the same config, so
  what is not per layer (token ids, the embedding dropout, the rotary cos/sin tables shared
  by every layer, the final norm, the LM head input) cancels.

Known differences from a GPU run, which the formula takes as parameters: float32 here
(``dtype="fp32"``; bf16 on a GPU), and on the CPU PyTorch's dropout keeps its scaled mask in
the activation dtype (``mask_bytes=4`` here; CUDA's fused dropout keeps a 1-byte bool mask).
transformers' eager modules are the ``kernels="hf"`` variant of the formula.

``torch`` and ``transformers`` are imported inside the functions, so ``import tmath`` works
without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tmath._checks import int_arg

__all__ = [
    "TINY_GPT2",
    "TINY_LLAMA",
    "saved_activation_bytes",
    "ActivationCheck",
    "measured_layer_bytes",
    "check_activations",
]

#: A small GPT-2 (dropout 0.1 everywhere; GPT-2's own tanh GELU, ``gelu_new``).
TINY_GPT2: dict[str, Any] = {
    "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128,
    "vocab_size": 101, "n_inner": None, "activation_function": "gelu_new",
    "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0,
}

#: A small Llama with GQA (4 query heads, 2 KV heads), an MLP width that is not 4h, no dropout.
TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 101,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "hidden_act": "silu", "rope_theta": 10000.0,
    "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 0,
}

_LAYER_KEYS = {"gpt2": "n_layer", "llama": "num_hidden_layers"}


def _check_config(config: Any) -> dict:
    if not isinstance(config, dict) or config.get("model_type") not in _LAYER_KEYS:
        raise ValueError(
            "config must be a config.json-style dict with model_type 'gpt2' or 'llama' "
            f"(e.g. tmath.actmeasure.TINY_GPT2), got {config!r:.80}"
        )
    return dict(config)


#: tmath's attention variants and the transformers implementation measured for each: eager
#: keeps the s x s softmax; "flash" is PyTorch's scaled_dot_product_attention, which on the
#: CPU runs a flash-attention kernel (it keeps Q, K, V, the output and the logsumexp).
_ATTN_IMPL = {"eager": "eager", "flash": "sdpa"}


def _check_attention(attention: Any) -> str:
    if attention not in _ATTN_IMPL:
        raise ValueError(f"attention must be one of {tuple(_ATTN_IMPL)}, got {attention!r}")
    return attention


def _build(config: dict, layers: int, attention: str = "eager") -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    d = dict(config, **{_LAYER_KEYS[config["model_type"]]: layers})
    mt = d.pop("model_type")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(mt, **d),
                                             attn_implementation=_ATTN_IMPL[attention])
    return model.float().train()


def saved_activation_bytes(model: Any, input_ids: Any) -> int:
    """Bytes of the distinct non-parameter tensors ``model(input_ids)`` saves for backward."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params and ptr not in seen:
            seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids)
    del out  # the saved tensors stay alive until here, so no storage is reused while counting
    return sum(seen.values())


def measured_layer_bytes(config: dict, seq_len: int, batch: int, attention: str = "eager") -> int:
    """Saved bytes of one layer: a 2-layer model minus a 1-layer model, same input."""
    import torch

    config = _check_config(config)
    attention = _check_attention(attention)
    s, b = int_arg("seq_len", seq_len), int_arg("batch", batch)
    vocab = config["vocab_size"]
    torch.manual_seed(1)
    ids = torch.randint(0, vocab, (b, s))
    one, two = (saved_activation_bytes(_build(config, n, attention), ids) for n in (1, 2))
    return two - one


@dataclass(frozen=True)
class ActivationCheck:
    """Formula against measurement for one config and input shape (bytes of one layer)."""

    model_type: str
    seq_len: int
    batch: int
    attention: str
    measured: int
    formula_hf: float  # kernels="hf", fp32, CPU dropout masks: should equal ``measured``
    formula_fused: float  # kernels="fused", same dtype and masks: what a training stack keeps
    terms_hf: dict[str, float]

    @property
    def difference(self) -> float:
        return self.measured - self.formula_hf


def check_activations(config: dict, seq_len: int, batch: int,
                      attention: str = "eager") -> ActivationCheck:
    """Measure one layer of ``config`` and evaluate :func:`tmath.activation_bytes` for it.

    ``attention="flash"`` measures transformers' ``sdpa`` attention against the formula's
    FlashAttention terms.  Only without attention dropout (the tiny Llama): with dropout
    PyTorch's CPU SDPA falls back to its math path, which keeps the s x s matrices like
    eager attention (the tiny GPT-2 then measures exactly its eager bytes).
    """
    from tmath import ModelConfig
    from tmath.memory import activation_bytes

    config = _check_config(config)
    attention = _check_attention(attention)
    cfg = ModelConfig.from_hf(config, name=f"tiny-{config['model_type']}")
    dropout = config["model_type"] == "gpt2"
    kwargs = dict(dtype="fp32", mask_bytes=4, tp=1, attention=attention, dropout=dropout)
    hf = activation_bytes(cfg, seq_len, batch, kernels="hf", **kwargs)
    fused = activation_bytes(cfg, seq_len, batch, kernels="fused", **kwargs)
    measured = measured_layer_bytes(config, seq_len, batch, attention)
    return ActivationCheck(config["model_type"], seq_len, batch, attention, measured, hf.per_layer,
                           fused.per_layer, hf.terms)

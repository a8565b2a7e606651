"""Build Hugging Face transformers models from tmath configs and count their FLOPs with PyTorch.

The ledger of :mod:`tmath.flops` / :mod:`tmath.params` is checked against an
independent implementation: the transformers model of the same config, whose
parameters are counted with ``numel`` and whose matmul FLOPs are counted by
``torch.utils.flop_counter.FlopCounterMode``.

``torch`` and ``transformers`` are optional: they are imported inside the
functions, so ``import tmath`` (and this module) works without them.

Conventions of the measurement (see :func:`measured_flops`):

* float32 on CPU, ``torch.manual_seed(0)`` before building the model, random
  token ids; the counts depend only on shapes, never on the values.
* ``attn_implementation="eager"`` is pinned: on CPU the default "sdpa" path
  dispatches to a fused flash-attention kernel that FlopCounterMode does not
  count, so only eager attention gives a meaningful number. MoE models also pin
  ``experts_implementation="eager"`` (a loop of per-expert matmuls).
* One forward pass is counted, then ``logits.sum().backward()`` by a second
  counter; "train" = forward + backward (the optimizer step is not counted).

If the environment variable :data:`CACHE_ENV` names a directory, :func:`hf_param_count` and
:func:`measure` keep each result there under a hash of their arguments, and a second call
with the same arguments returns it instead of building the model again. The test suite sets
it to a fresh directory per session, so that a chapter's nbval run and its "visible code runs
alone" run, which make the same calls, build each model once (as :data:`tmath.dist.CACHE_ENV`
does for process groups); nothing sets it outside the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tmath import _cache
from tmath._checks import int_arg

__all__ = [
    "CACHE_ENV",
    "SMALL_VARIANTS",
    "FLOP_CONFIGS",
    "hf_config",
    "hf_param_count",
    "preset_to_hf",
    "FlopMeasurement",
    "measure",
    "measured_flops",
]

_MOE_TYPES = ("mixtral", "deepseek_v3", "qwen3_moe", "deepseek_v2", "gpt_oss")

#: Environment variable naming a directory where results are kept (tests only; see above).
CACHE_ENV = "TMATH_CROSSCHECK_CACHE"


def _cached(kind: str, key: dict, compute: Callable[[], Any]) -> Any:
    """``compute()``, or what it returned for the same ``kind`` and ``key`` in :data:`CACHE_ENV`."""
    where, hit = _cache.lookup(CACHE_ENV, {"kind": kind, **key})
    if hit is not None:
        return hit
    value = compute()
    if where:
        _cache.store(where, value)
    return value


def _check_dict(d: Any) -> dict:
    if not isinstance(d, dict) or "model_type" not in d:
        raise ValueError(
            "config must be a dict with a 'model_type' key (a transformers config.json as a dict), "
            f"got {type(d).__name__}"
        )
    return dict(d)


def hf_config(d: dict) -> Any:
    """A ``transformers.PretrainedConfig`` from a config.json-style dict (``model_type`` required)."""
    from transformers import AutoConfig

    d = _check_dict(d)
    mt = d.pop("model_type")
    return AutoConfig.for_model(mt, **d)


def hf_param_count(d: dict) -> int:
    """``sum(p.numel() for p in model.parameters())`` of the transformers model of ``d``.

    The model is built on the meta device (no memory, no weights): tied weights
    are one parameter and are counted once.
    """
    d = _check_dict(d)
    return _cached("hf_param_count", {"d": d}, lambda: _param_count(d))


def _param_count(d: dict) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    cfg = hf_config(d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


def _windows_to_hf(cfg: Any, d: dict) -> None:
    mt = cfg.model_type
    if mt in ("qwen2", "qwen3", "qwen3_moe"):
        d["use_sliding_window"] = cfg.sliding_window is not None
    if cfg.sliding_window is not None or mt in ("mistral", "gemma2", "gemma3_text", "gpt_oss"):
        d["sliding_window"] = cfg.sliding_window
    if cfg.layer_types is not None:
        d["layer_types"] = list(cfg.layer_types)
    elif mt in ("gemma2", "gemma3_text", "gpt_oss", "qwen2", "qwen3"):
        d["layer_types"] = list(cfg.resolved_layer_types)


def preset_to_hf(cfg: Any) -> dict:
    """Map a :class:`tmath.ModelConfig` back to a transformers config dict.

    Supported model types: every one of :data:`tmath.SUPPORTED_MODEL_TYPES`.
    """
    from tmath.config import ModelConfig

    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a tmath.ModelConfig, got {type(cfg).__name__}")
    mt = cfg.model_type
    if mt == "gpt2":
        return dict(model_type="gpt2", n_embd=cfg.hidden_size, n_layer=cfg.num_layers,
                    n_head=cfg.num_heads, n_positions=cfg.max_position,
                    n_inner=cfg.intermediate_size, vocab_size=cfg.vocab_size,
                    tie_word_embeddings=cfg.tie_embeddings)
    d = dict(model_type=mt, hidden_size=cfg.hidden_size,
             intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.num_layers,
             num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
             vocab_size=cfg.vocab_size, max_position_embeddings=cfg.max_position,
             tie_word_embeddings=cfg.tie_embeddings)
    if not cfg.is_mla:
        d["head_dim"] = cfg.head_dim
    if mt == "llama":
        d.update(attention_bias=cfg.qkv_bias, mlp_bias=cfg.mlp_bias)
    if mt in ("qwen3", "qwen3_moe", "gemma2", "gemma3_text", "olmo2", "gpt_oss",
              "deepseek_v2", "deepseek_v3"):
        d["attention_bias"] = cfg.qkv_bias
    if mt in ("gemma2", "gemma3_text"):
        d.update(attn_logit_softcapping=cfg.attn_logit_softcap,
                 final_logit_softcapping=cfg.final_logit_softcap)
    if mt in ("mixtral", "gpt_oss"):
        d.update(num_local_experts=cfg.n_routed_experts, num_experts_per_tok=cfg.experts_per_token)
    if mt == "qwen3_moe":
        d.update(num_experts=cfg.n_routed_experts, num_experts_per_tok=cfg.experts_per_token,
                 moe_intermediate_size=cfg.moe_intermediate_size,
                 mlp_only_layers=list(range(cfg.first_k_dense)))
    if mt in ("deepseek_v2", "deepseek_v3"):
        d.update(n_routed_experts=cfg.n_routed_experts, n_shared_experts=cfg.n_shared_experts,
                 num_experts_per_tok=cfg.experts_per_token, first_k_dense_replace=cfg.first_k_dense,
                 moe_intermediate_size=cfg.moe_intermediate_size, q_lora_rank=cfg.q_lora_rank,
                 kv_lora_rank=cfg.kv_lora_rank, qk_rope_head_dim=cfg.qk_rope_head_dim,
                 qk_nope_head_dim=cfg.qk_nope_head_dim, v_head_dim=cfg.v_head_dim,
                 n_group=1, topk_group=1)
    if mt == "deepseek_v2":
        d["mlp_bias"] = cfg.mlp_bias
    _windows_to_hf(cfg, d)
    return d


def _build(d: dict) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    d = _check_dict(d)
    if d["model_type"] in _MOE_TYPES:
        d["experts_implementation"] = "eager"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(hf_config(d), attn_implementation="eager")


def _ids(d: dict, batch: int, seq_len: int) -> Any:
    import torch

    vocab = d.get("vocab_size")
    if not isinstance(vocab, int) or vocab <= 0:
        raise ValueError("config dict needs a positive int 'vocab_size' to draw token ids")
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (batch, seq_len), generator=g)


@dataclass(frozen=True)
class FlopMeasurement:
    """What ``FlopCounterMode`` counted for one forward and one backward pass.

    ``forward_by_op`` / ``backward_by_op`` map aten op names (``"mm"``,
    ``"addmm"``, ``"bmm"``, ...) to FLOPs; they sum to ``forward`` / ``backward``.
    """

    batch: int
    seq_len: int
    forward: int
    backward: int
    forward_by_op: dict[str, int] = field(default_factory=dict)
    backward_by_op: dict[str, int] = field(default_factory=dict)

    @property
    def train(self) -> int:
        """Forward + backward FLOPs (one training step without the optimizer)."""
        return self.forward + self.backward


def _by_op(counter: Any) -> dict[str, int]:
    per_op = counter.get_flop_counts().get("Global", {})
    return {str(op).split(".")[-1]: int(v) for op, v in per_op.items()}


def measure(d: dict, batch: int, seq_len: int) -> FlopMeasurement:
    """Count the FLOPs of one forward and one backward pass of the transformers model of ``d``.

    One model is built (float32, CPU, eager attention, ``torch.manual_seed(0)``);
    ``batch`` x ``seq_len`` random token ids go through one forward pass, counted
    by one ``FlopCounterMode``, then ``logits.sum().backward()``, counted by a
    second one. Only shapes matter to the counts, so they are deterministic.
    """
    int_arg("batch", batch)
    int_arg("seq_len", seq_len)
    d = _check_dict(d)
    key = {"d": d, "batch": batch, "seq_len": seq_len}
    return FlopMeasurement(**_cached("measure", key, lambda: asdict(_measure(d, batch, seq_len))))


def _measure(d: dict, batch: int, seq_len: int) -> FlopMeasurement:
    from torch.utils.flop_counter import FlopCounterMode

    model = _build(d)
    ids = _ids(d, batch, seq_len)
    with FlopCounterMode(display=False) as fwd:
        out = model(ids)
    with FlopCounterMode(display=False) as bwd:
        out.logits.sum().backward()
    return FlopMeasurement(batch, seq_len, int(fwd.get_total_flops()), int(bwd.get_total_flops()),
                           _by_op(fwd), _by_op(bwd))


def measured_flops(d: dict, batch: int, seq_len: int) -> tuple[int, int]:
    """(forward, forward + backward) FLOPs that ``FlopCounterMode`` counts for ``d`` (see :func:`measure`)."""
    m = measure(d, batch, seq_len)
    return m.forward, m.train


# ------------------------------------------------------------------ configs to check
# Small variants that switch on what the presets do not (biases, explicit head_dim, MQA,
# untied embeddings, MLA without a query bottleneck, several shared experts); their
# parameters are checked on the meta device.
SMALL_VARIANTS = {
    "llama-biases": dict(model_type="llama", hidden_size=64, intermediate_size=96,
                         num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                         vocab_size=101, attention_bias=True, mlp_bias=True),
    "llama-explicit-head-dim-mqa": dict(model_type="llama", hidden_size=64, intermediate_size=96,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=1, head_dim=24, vocab_size=99,
                                        tie_word_embeddings=True),
    "gpt2-n-inner-untied": dict(model_type="gpt2", n_embd=48, n_layer=2, n_head=6, n_inner=100,
                                n_positions=40, vocab_size=77, tie_word_embeddings=False),
    "deepseek-q-lora-null": dict(model_type="deepseek_v3", hidden_size=64, intermediate_size=96,
                                 moe_intermediate_size=32, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=4, vocab_size=97,
                                 n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2,
                                 first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=16,
                                 qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12,
                                 n_group=2, topk_group=1, attention_bias=True),
    "mixtral-small": dict(model_type="mixtral", hidden_size=64, intermediate_size=80,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          num_local_experts=4, num_experts_per_tok=2, vocab_size=90),
}


# Tiny real models, one or more per model type, whose FLOPs FlopCounterMode counts.
FLOP_CONFIGS = {
    "gpt2-tiny": dict(model_type="gpt2", n_embd=32, n_layer=2, n_head=4, n_positions=64,
                      vocab_size=50, bos_token_id=0, eos_token_id=0),
    "llama-tiny-gqa": dict(model_type="llama", hidden_size=32, intermediate_size=48,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           vocab_size=60, bos_token_id=0, eos_token_id=0),
    "qwen2-tiny": dict(model_type="qwen2", hidden_size=32, intermediate_size=40,
                       num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                       vocab_size=70, bos_token_id=0, eos_token_id=0),
    "mistral-tiny-head-dim": dict(model_type="mistral", hidden_size=32, intermediate_size=40,
                                  num_hidden_layers=1, num_attention_heads=4,
                                  num_key_value_heads=1, head_dim=16, vocab_size=50,
                                  bos_token_id=0, eos_token_id=0),
    # MoE and MLA, with transformers' per-expert loop (experts_implementation="eager"):
    # the default grouped-mm kernel is not seen by FlopCounterMode.
    "mixtral-tiny": dict(model_type="mixtral", hidden_size=32, intermediate_size=40,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         num_local_experts=4, num_experts_per_tok=2, vocab_size=50,
                         bos_token_id=0, eos_token_id=0),
    # The families added for issue 15; sliding windows shorter than the measured T (5, 8),
    # so the masked eager matrix is what is measured.
    "qwen3-tiny-window": dict(model_type="qwen3", hidden_size=32, intermediate_size=48,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=60, use_sliding_window=True,
                              sliding_window=3, max_window_layers=1, bos_token_id=0,
                              eos_token_id=0),
    "qwen3-moe-tiny": dict(model_type="qwen3_moe", hidden_size=32, intermediate_size=48,
                           moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, num_experts=4,
                           num_experts_per_tok=2, mlp_only_layers=[0], vocab_size=60,
                           bos_token_id=0, eos_token_id=0),
    "gemma2-tiny": dict(model_type="gemma2", hidden_size=32, intermediate_size=48,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=16, vocab_size=60, sliding_window=4, bos_token_id=0,
                        eos_token_id=0, pad_token_id=0),
    "gemma3-tiny": dict(model_type="gemma3_text", hidden_size=32, intermediate_size=48,
                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=16, vocab_size=60, sliding_window=3, sliding_window_pattern=2,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0),
    "phi3-tiny-window": dict(model_type="phi3", hidden_size=32, intermediate_size=40,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             vocab_size=60, sliding_window=3, bos_token_id=0, eos_token_id=0,
                             pad_token_id=0),
    "olmo2-tiny": dict(model_type="olmo2", hidden_size=32, intermediate_size=40,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       vocab_size=60, bos_token_id=0, eos_token_id=0, pad_token_id=0),
    "gpt-oss-tiny": dict(model_type="gpt_oss", hidden_size=32, intermediate_size=16,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, num_local_experts=4, num_experts_per_tok=2, vocab_size=60,
                         sliding_window=3, bos_token_id=0, eos_token_id=0, pad_token_id=0),
    "deepseek-v2-tiny": dict(model_type="deepseek_v2", hidden_size=32, intermediate_size=48,
                             moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                             num_key_value_heads=4, vocab_size=50, n_routed_experts=8,
                             n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
                             q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
                             qk_nope_head_dim=16, v_head_dim=12, mlp_bias=True,
                             topk_method="greedy", bos_token_id=0, eos_token_id=0),
    "deepseek-v3-tiny": dict(model_type="deepseek_v3", hidden_size=32, intermediate_size=48,
                             moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                             num_key_value_heads=4, vocab_size=50, n_routed_experts=8,
                             n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
                             q_lora_rank=12, kv_lora_rank=16, qk_rope_head_dim=8,
                             qk_nope_head_dim=16, v_head_dim=12, n_group=2, topk_group=1,
                             bos_token_id=0, eos_token_id=0),
}

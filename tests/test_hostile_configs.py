"""Absurd and hostile config.json input gets one clean, named error (issue 19, section 3).

Real configs (every JSON under ``tests/hf_configs``, the multimodal wrappers included) are
mutated: keys deleted, values replaced by other types, numbers scaled by huge, negative,
zero or float factors, values nested, whole configs wrapped as a ``text_config``, and
raw JSON that Python's parser chokes on spliced into the text.  Each mutant must give
either a whole ledger that is valid JSON, or an :class:`tmath.errors.InputError` (a
``ValueError``; ``InputTypeError`` is also a ``TypeError``) whose message is Chinese and
names its field, never any other exception.  No example is timed: the plausible ranges
of :data:`tmath.config.LIMITS` bound the work by design (at most 10,000 layers, every
count a short integer sum), and an unbounded input is refused before any list is built.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tmath
from tmath.config import LIMITS, ModelConfig, parse_config_json
from tmath.errors import InputError, InputTypeError, has_chinese
from tmath.ledger import build_ledger, render_text

HF = Path(__file__).parent / "hf_configs"
CONFIGS = {p.relative_to(HF).as_posix(): json.loads(p.read_text(encoding="utf-8"))
           for p in sorted(HF.rglob("*.json"))}
LLAMA = CONFIGS["llama3-8b.json"]

# Keys the readers look at that a given config may not carry: mutating them exercises
# the defaults' paths and the refusals.
EXTRA_KEYS = ["head_dim", "layer_types", "sliding_window", "use_sliding_window",
              "sliding_window_pattern", "max_window_layers", "mlp_only_layers",
              "decoder_sparse_step", "n_inner", "num_key_value_heads", "text_config",
              "partial_rotary_factor", "attn_logit_softcapping", "first_k_dense_replace",
              "q_lora_rank", "num_nextn_predict_layers", "architectures", "model_type",
              "_name_or_path", "tie_word_embeddings", "add_cross_attention", "hidden_act"]
FACTORS = [0, -1, 2, 3, 1000, 10**6, 10**12, 10**30, -(10**18), 0.5, 1.5, 1e-9, 1e300,
           float("nan"), float("inf")]
VALUES = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, -1, 1, 2, 3, 7, 64, 4096, 10**12, 10**30, -(10**30), 2**63, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["silu", "gelu", "full_attention", "sliding_attention", "gelu_pytorch_tanh",
                     "llama", "gemma3_text", "llama4_text", "true", "false", "4096", ""]),
    st.lists(st.sampled_from(["full_attention", "sliding_attention", 0, 1, None, [1]]),
             max_size=70),
    st.dictionaries(st.sampled_from(["model_type", "hidden_size", "factor", "x"]),
                    st.one_of(st.integers(-5, 5), st.text(max_size=3)), max_size=3),
)
# Raw JSON fragments the parser itself must survive: nesting beyond the recursion limit,
# an integer of 5,000 digits, overflowing floats and the non-standard NaN / Infinity.
RAW = ["[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000, "9" * 5000, "1e400",
       "-1e400", "NaN", "-Infinity", "[" * 50 + "]" * 50]


def _nest(v, depth: int, as_dict: bool):
    for _ in range(depth):
        v = {"x": v} if as_dict else [v]
    return v


@st.composite
def mutants(draw):
    """A real config mutated 1-4 times, and optionally a raw JSON fragment for one key."""
    d = copy.deepcopy(CONFIGS[draw(st.sampled_from(sorted(CONFIGS)))])
    for _ in range(draw(st.integers(1, 4))):
        target = d
        if isinstance(d.get("text_config"), dict) and draw(st.booleans()):
            target = d["text_config"]
        key = draw(st.sampled_from(sorted(target) + EXTRA_KEYS))
        op = draw(st.sampled_from(["delete", "set", "scale", "scale", "nest", "wrap"]))
        if op == "delete":
            target.pop(key, None)
        elif op == "set":
            target[key] = draw(VALUES)
        elif op == "scale":
            v, f = target.get(key), draw(st.sampled_from(FACTORS))
            if isinstance(v, int | float) and not isinstance(v, bool):
                try:
                    target[key] = v * f
                except OverflowError:
                    target[key] = math.inf
            else:
                target[key] = f
        elif op == "nest":
            target[key] = _nest(target.get(key), draw(st.integers(1, 300)), draw(st.booleans()))
        else:  # the whole config becomes the text model of a (possibly unknown) wrapper
            d = {"model_type": draw(st.sampled_from(["gemma3", "llava", "llama4", "mystery", 7])),
                 "text_config": d}
            if draw(st.booleans()):
                d["tie_word_embeddings"] = draw(VALUES)
    raw = draw(st.one_of(st.none(), st.none(), st.tuples(st.sampled_from(EXTRA_KEYS + ["x"]),
                                                         st.sampled_from(RAW))))
    return d, raw


def _field_is_named(e: InputError) -> bool:
    """The message names the field: the key itself, or for the file, the file."""
    name = e.field.removeprefix("text_config.")
    return name in str(e) or (e.field == "config" and ".json" in str(e))


def _ledger_or_clean_error(d, raw):
    try:
        if raw is not None:
            key, fragment = raw
            text = json.dumps(d, allow_nan=True)
            text = ("{" if text == "{}" else text[:-1] + ", ") + f'"{key}": {fragment}' + "}"
            d = parse_config_json(text, "config.json")
        cfg = ModelConfig.from_hf(d)
        led = build_ledger(cfg)
    except (ValueError, TypeError) as e:
        assert isinstance(e, InputError), f"{type(e).__name__} without a field: {e}"
        assert isinstance(e.field, str) and e.field, e
        assert has_chinese(str(e)), f"not Chinese: {e}"
        assert _field_is_named(e), f"field {e.field!r} not named in: {e}"
        assert "\n" not in str(e)
        return "error"
    json.dumps(led, allow_nan=False)  # a valid JSON document: no inf or nan in it
    assert render_text(led)
    return "ledger"


@settings(max_examples=2000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutants())
def test_mutated_real_configs_give_a_ledger_or_one_clean_named_error(case):
    _ledger_or_clean_error(*case)


def test_the_mutants_reach_both_outcomes():
    # The fuzz above must not be vacuous: some mutants still give a ledger, some an error.
    outcomes = {_ledger_or_clean_error(copy.deepcopy(LLAMA), None),
                _ledger_or_clean_error({**LLAMA, "num_hidden_layers": -1}, None)}
    assert outcomes == {"ledger", "error"}


# --- the three reported cases, and the range table --------------------------------------


def test_deep_nesting_is_one_clean_error():
    with pytest.raises(InputError, match="嵌套太深") as e:
        parse_config_json('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert e.value.field == "config"
    # nested values inside a config are refused by name, their repr kept short
    with pytest.raises(InputTypeError, match="hidden_size") as e:
        ModelConfig.from_hf({**LLAMA, "hidden_size": _nest(4096, 800, False)})
    assert len(str(e.value)) < 200


@pytest.mark.parametrize("key,value,field,shown", [
    ("num_hidden_layers", 10**12, "num_hidden_layers", "1 到 10,000"),
    ("hidden_size", 10**30, "hidden_size", "1 到 1,000,000"),
    ("vocab_size", 10**9, "vocab_size", "1 到 100,000,000"),
    ("num_attention_heads", 0, "num_attention_heads", "1 到 10,000"),
    ("intermediate_size", -14336, "intermediate_size", "1 到 10,000,000"),
    ("max_position_embeddings", 10**10, "max_position_embeddings", "1 到 1,000,000,000"),
])
def test_absurd_numbers_name_the_field_and_the_range(key, value, field, shown):
    with pytest.raises(InputError) as e:
        ModelConfig.from_hf({**LLAMA, key: value})
    assert e.value.field == field and shown in str(e.value) and has_chinese(str(e.value))


def test_every_numeric_field_has_a_range_and_is_checked():
    # One table holds the ranges; ModelConfig refuses a value just outside each one.
    base = tmath.preset("deepseek-v3")
    fields = {f for f in LIMITS if hasattr(base, f)}
    assert fields >= {"hidden_size", "intermediate_size", "num_layers", "num_heads",
                      "num_kv_heads", "head_dim", "vocab_size", "max_position",
                      "n_routed_experts", "kv_lora_rank", "q_lora_rank"}
    for f in sorted(fields - {"sliding_window"}):
        lo, hi = LIMITS[f]
        for bad in (hi + 1, lo - 1):
            with pytest.raises(InputError) as e:
                base.replace(**{f: bad})
            assert e.value.field == f and f"{lo:,} 到 {hi:,}" in str(e.value), (f, bad, e.value)
    w = tmath.preset("mistral-7b")
    with pytest.raises(InputError, match="sliding_window"):
        w.replace(sliding_window=LIMITS["sliding_window"][1] + 1)


@pytest.mark.parametrize("key,value", [
    ("tie_word_embeddings", "false"), ("attention_bias", 1), ("layer_types", 5),
    ("sliding_window_pattern", 0), ("mlp_only_layers", "0"), ("use_sliding_window", "yes"),
])
def test_wrong_types_are_refused_not_coerced(key, value):
    # "false" used to read as True (bool("false")); 0 as a pattern divided by zero.
    base = {"gemma3_text": CONFIGS["gemma-3-4b-text.json"],
            "qwen3_moe": CONFIGS["qwen3-30b-a3b.json"]}
    d = base["gemma3_text"] if key in ("sliding_window_pattern", "layer_types") else (
        base["qwen3_moe"] if key in ("mlp_only_layers", "use_sliding_window") else LLAMA)
    d = {k: v for k, v in d.items() if k != "layer_types"} if key != "layer_types" else d
    with pytest.raises(InputError) as e:
        ModelConfig.from_hf({**d, key: value})
    assert e.value.field == key and has_chinese(str(e.value))

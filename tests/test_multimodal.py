"""Multimodal wrappers (a config.json with a ``text_config``): the language model, or a refusal.

The config files are the ones people download: ``google/gemma-3-4b-it`` (``gemma3``, whose
``text_config`` of type ``gemma3_text`` names only six keys and leaves the rest to
transformers' defaults) and ``meta-llama/Llama-4-Scout-17B-16E-Instruct`` (``llama4``, its
language model ``llama4_text``, which tmath does not count).  The count of Gemma 3's
language model is checked against transformers' ``Gemma3ForConditionalGeneration`` built on
the meta device, less its vision tower and multimodal projector.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tmath
from tmath.config import CHECKED_WRAPPERS, NESTED_DEFAULTS, WRAPPER_TIE_DEFAULTS, ModelConfig
from tmath.errors import InputError, has_chinese

HF = Path(__file__).parent / "hf_configs"
GEMMA3_IT = HF / "multimodal" / "gemma-3-4b-it.json"
LLAMA4_SCOUT = HF / "multimodal" / "llama-4-scout-17b-16e-instruct.json"
TINY_LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=8, num_key_value_heads=2, vocab_size=100)


def test_gemma3_wrapper_reads_its_sparse_text_config_with_transformers_defaults():
    wrapped = ModelConfig.from_hf(GEMMA3_IT)
    text = ModelConfig.from_hf(HF / "gemma-3-4b-text.json")  # the same text_config, written out
    assert wrapped.wrapper == "gemma3" and text.wrapper == ""
    assert wrapped == text.replace(name=wrapped.name, wrapper="gemma3")
    assert (wrapped.num_heads, wrapped.num_kv_heads, wrapped.head_dim, wrapped.vocab_size) == (
        8, 4, 256, 262_208)  # none of them in the file: Gemma3TextConfig's defaults


def test_llama4_is_refused_naming_llama4_text():
    with pytest.raises(InputError) as e:
        ModelConfig.from_hf(LLAMA4_SCOUT)
    assert e.value.field == "text_config.model_type"
    assert "llama4_text" in str(e.value) and "'llama4'" in str(e.value)
    assert has_chinese(str(e.value))
    # a text-only Llama 4 checkpoint is refused by its own model_type
    text = json.loads(LLAMA4_SCOUT.read_text())["text_config"]
    with pytest.raises(InputError, match="llama4_text") as e:
        ModelConfig.from_hf(text)
    assert e.value.field == "model_type"


def test_any_wrapper_around_a_supported_family_is_counted():
    vlm = {"model_type": "some_vlm", "tie_word_embeddings": False, "text_config": TINY_LLAMA,
           "vision_config": {"hidden_size": 32}}
    cfg = ModelConfig.from_hf(vlm)
    assert cfg.wrapper == "some_vlm" and cfg == ModelConfig.from_hf(TINY_LLAMA).replace(
        name=cfg.name, wrapper="some_vlm")
    # the wrapper's own tie flag decides the LM head (as transformers' wrapper classes do)
    tied = ModelConfig.from_hf({**vlm, "tie_word_embeddings": True})
    assert tied.tie_embeddings and tmath.count_params(cfg).total - tmath.count_params(
        tied).total == 100 * 64
    # no flag anywhere, and a wrapper whose default tmath does not know: refused, named
    bare = {k: v for k, v in vlm.items() if k != "tie_word_embeddings"}
    with pytest.raises(InputError) as e:
        ModelConfig.from_hf(bare)
    assert e.value.field == "tie_word_embeddings"
    flagged = {**bare, "text_config": {**TINY_LLAMA, "tie_word_embeddings": False}}
    assert ModelConfig.from_hf(flagged).tie_embeddings is False


@pytest.mark.parametrize("d,field,named", [
    ({"model_type": "qwen2_vl", "text_config": {"model_type": "qwen2_vl_text"}},
     "text_config.model_type", "qwen2_vl_text"),
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 10**9}},
     "text_config.hidden_size", "1 到 1,000,000"),
    ({"model_type": "gemma3", "text_config": "gemma3_text"}, "text_config", "JSON 对象"),
    ({"model_type": "gemma3", "text_config": {}}, "text_config.model_type", "None"),
])
def test_bad_wrappers_name_the_nested_field(d, field, named):
    with pytest.raises(InputError) as e:
        ModelConfig.from_hf(d)
    assert e.value.field == field and named in str(e.value) and has_chinese(str(e.value))


# --- against transformers ------------------------------------------------------------------


def test_nested_defaults_are_transformers_defaults():
    transformers = pytest.importorskip("transformers")
    for mt, defaults in NESTED_DEFAULTS.items():
        ref = transformers.AutoConfig.for_model(mt)
        for key, value in defaults.items():
            assert getattr(ref, key) == value, (mt, key)


def test_wrapper_tie_defaults_are_transformers_defaults():
    transformers = pytest.importorskip("transformers")
    for mt, tie in WRAPPER_TIE_DEFAULTS.items():
        assert transformers.AutoConfig.for_model(mt).tie_word_embeddings is tie, mt


@pytest.mark.parametrize("path", [GEMMA3_IT], ids=lambda p: p.stem)
def test_language_model_count_equals_transformers_without_the_vision_tower(path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    d = json.loads(path.read_text())
    assert d["model_type"] in CHECKED_WRAPPERS
    config = transformers.AutoConfig.for_model(**d)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)

    def numel(module):
        return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())

    not_counted = numel(model.model.vision_tower) + numel(model.model.multi_modal_projector)
    assert numel(model.model.vision_tower) > 0
    cfg = ModelConfig.from_hf(path)
    assert tmath.count_params(cfg).total == numel(model) - not_counted
    assert model.lm_head.weight is model.model.language_model.embed_tokens.weight  # tied: once

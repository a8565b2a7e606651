"""SymPy derivations the book states and simplifies.

These are written independently of :mod:`tmath.params` (which counts from a
:class:`~tmath.config.ModelConfig` the way the reference implementations lay out
their tensors), so that the two can check each other.
"""

from __future__ import annotations

import sympy as sp

#: Model width, FFN width, layers, vocabulary and context length, as symbols.
d, f, n_layers, vocab, n_ctx = sp.symbols("d F L V n_ctx", positive=True, integer=True)


def gpt_layer_terms(width: sp.Expr = d, ffn: sp.Expr = f) -> dict[str, sp.Expr]:
    """Parameters of one GPT-2/GPT-3 block, tensor by tensor.

    A GPT block holds the fused Q, K, V projection and the output projection
    (each with a bias), a 2-matrix MLP ``W_1`` (d -> F) and ``W_2`` (F -> d) with
    biases, and two LayerNorms with a scale and a shift each.
    """
    return {
        "W_Q, W_K, W_V": 3 * width * width,
        "b_Q, b_K, b_V": 3 * width,
        "W_O": width * width,
        "b_O": width,
        "W_1": width * ffn,
        "b_1": ffn,
        "W_2": ffn * width,
        "b_2": width,
        "LayerNorm (gamma, beta) x2": 4 * width,
    }


def gpt_layer_params(width: sp.Expr = d, ffn: sp.Expr = f) -> sp.Expr:
    """Total parameters of one GPT block (sum of :func:`gpt_layer_terms`)."""
    return sp.expand(sum(gpt_layer_terms(width, ffn).values()))


def gpt_model_params(
    width: sp.Expr = d,
    ffn: sp.Expr = f,
    layers: sp.Expr = n_layers,
    vocabulary: sp.Expr = vocab,
    context: sp.Expr = n_ctx,
) -> sp.Expr:
    """Parameters of a GPT-2/GPT-3 model with tied input/output embeddings.

    ``layers`` blocks, a token embedding ``V x d`` (shared with the LM head), a
    learned position embedding ``n_ctx x d`` and the final LayerNorm (2d).
    """
    return sp.expand(
        layers * gpt_layer_params(width, ffn) + vocabulary * width + context * width + 2 * width
    )

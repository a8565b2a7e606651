"""Answer keys of the exercises of book/intro/tour (see :mod:`tmath.exercises`)."""

from __future__ import annotations

import math

from tmath.exercises import answer
from tmath.variants import varied


@varied("ex-tour-1", count=True, unit="个参数")
def _tour_1(p) -> float:
    # outside the embedding tables (the layers and the final layer norm): every GPT-3 size's
    # total is printed in the cross-check appendix, this part nowhere
    from tmath import count_params, preset

    cfg = preset(p.model)
    return count_params(cfg).total - (cfg.vocab_size + cfg.max_position) * cfg.hidden_size


@varied("ex-tour-1/share", rel_tol=0, abs_tol=0.05, unit="%")
def _tour_1_share(p) -> float:
    from tmath import count_params, preset

    cfg = preset(p.model)
    return 100 * (cfg.vocab_size + cfg.max_position) * cfg.hidden_size / count_params(cfg).total


@answer("ex-tour-2", count=True)
def _tour_2() -> float:
    # Smallest integer d with 12d / (12d + 13) > 0.99, i.e. d > 1287 / 12.
    return math.floor(1287 / 12) + 1


def _tour_3_untied(model: str):
    from tmath import count_params, preset

    cfg = preset(model)
    untied = cfg.replace(tie_embeddings=False)
    return cfg, count_params(cfg).total, count_params(untied).total


@varied("ex-tour-3/extra", count=True, unit="个参数")
def _tour_3_extra(p) -> float:
    # An untied LM head adds one V x d matrix.
    _, tied, untied = _tour_3_untied(p.model)
    return untied - tied


@varied("ex-tour-3/share", rel_tol=0, abs_tol=0.005, unit="%")
def _tour_3_share(p) -> float:
    # Token embedding, positions and the untied LM head, as a share of the untied model.
    cfg, _, untied = _tour_3_untied(p.model)
    return 100 * (2 * cfg.vocab_size + cfg.max_position) * cfg.hidden_size / untied


@answer("ex-tour-4", rel_tol=1e-5, digits=5)
def _tour_4() -> float:
    from tmath import preset, symbolic

    d = preset("gpt3-175b").hidden_size
    layer = symbolic.gpt_layer_params(symbolic.d, 4 * symbolic.d)
    return float(layer.subs(symbolic.d, 2 * d) / layer.subs(symbolic.d, d))


@answer("ex-tour-5", count=True, unit="个参数")
def _tour_5() -> float:
    # One Llama 3 8B layer: everything but the embedding, the LM head and the final RMSNorm.
    from tmath import count_params, preset

    cfg = preset("llama3-8b")
    b = count_params(cfg).breakdown
    return (b["attention"] + b["mlp"] + b["norms"] - cfg.hidden_size) / cfg.num_layers

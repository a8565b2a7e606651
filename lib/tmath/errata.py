"""Where the source documents' figures disagree with the computation.

Each :class:`Erratum` records what a seed document states, the value tmath
recomputes (a function, so the appendix and the chapters always show the
current computation), why they differ, and the chapter that explains it. The
errata appendix of the book is generated from :data:`ERRATA`; the chapters glue
``erratum(key).recomputed()`` into their errata boxes.

Seeds: ``"000"`` is the GPT-3 walk-through, ``"003"`` the "Transformer math" notes.
Descriptions are in Chinese because they are printed in the book.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Erratum:
    """One disagreement between a source and the computation.

    ``seed`` names the source: ``"000"`` or ``"003"`` for the two seed notes, or
    a :mod:`tmath.sources` key for another public reference found along the way.

    A numeric erratum has ``stated`` (the source's figure in ``unit``) and
    ``compute()`` (the recomputed figure in the same unit); ``rel_tol`` is the
    relative difference below which the two would count as agreeing, so an
    erratum must exceed it.  A formula erratum has no single figure: it gives
    the ``correction`` in words and a ``verify()`` computation that settles it
    (returns True when the corrected formula agrees with an independent check
    and the source's does not).
    """

    key: str
    seed: str
    location: str
    claim: str
    cause: str
    chapter: str
    stated: float | None = None
    unit: str = ""
    compute: Callable[[], float] | None = None
    correction: str = ""
    verify: Callable[[], bool] | None = None
    fmt: str = ".4g"
    rel_tol: float = 1e-3
    #: Numbers quoted in ``cause`` (or ``correction``) are computed, not typed: those texts
    #: may hold ``{name}`` fields, filled from ``values()`` (strings already formatted,
    #: e.g. with :mod:`tmath.fmt`).  :meth:`cause_text` and :meth:`correction_text` fill them.
    values: Callable[[], dict[str, str]] | None = None
    #: The source states its figure as exact (“完全相同” is exactly 1), not rounded to the digits
    #: it is written with; otherwise an erratum must differ by more than that rounding.
    stated_exact: bool = False

    def __post_init__(self) -> None:
        numeric = self.stated is not None and self.compute is not None
        formula = self.stated is None and self.compute is None and bool(self.correction) and self.verify
        if not (numeric or formula):
            raise ValueError(
                f"erratum {self.key!r}: give either stated= and compute= (a figure), "
                "or correction= and verify= (a formula)"
            )

    @property
    def is_numeric(self) -> bool:
        return self.stated is not None

    def recomputed(self) -> float:
        if self.compute is None:
            raise ValueError(f"erratum {self.key!r} is about a formula; see .correction and .verify()")
        return float(self.compute())

    def rel_error(self) -> float:
        """Relative error of the stated figure against the recomputed one."""
        r = self.recomputed()
        return abs(self.stated - r) / abs(r)

    def format_value(self, x: float) -> str:
        """``x`` as the appendix prints it, through :mod:`tmath.fmt` (never e-notation).

        A ``"g"`` format (``".4g"``) gives that many significant digits with
        :func:`tmath.fmt.sci` from 10⁶ up (``3.229 × 10²³``) and :func:`tmath.fmt.num`
        below (``41.49``, ``2,048``); a fixed format
        (``",.0f"``, ``".2f"``) is kept as is, since it never writes an exponent.
        """
        from tmath import fmt as _fmt

        if self.fmt.endswith("g"):
            digits = int(self.fmt.lstrip(",.").rstrip("g") or 6)
            if x != 0 and abs(x) >= 1e6:
                return _fmt.sci(x, digits)
            return _fmt.num(x, digits)
        return f"{x:{self.fmt}}"

    def _filled(self, text: str) -> str:
        if self.values is None:
            return text
        try:
            return text.format(**self.values())
        except (KeyError, IndexError) as e:
            raise ValueError(f"erratum {self.key!r}: values() has no field {e} used in its text") from None

    def cause_text(self) -> str:
        """``cause`` with its ``{name}`` fields filled from :attr:`values`."""
        return self._filled(self.cause)

    def correction_text(self) -> str:
        """``correction`` with its ``{name}`` fields filled from :attr:`values`."""
        return self._filled(self.correction)

    def computation(self) -> str:
        """The code that settles this erratum, as the appendix shows it: the ``compute=`` (or
        ``verify=``) expression of its entry in this module, preceded by the module's helper
        functions and constants it uses (and theirs), read from the source, not retyped."""
        return _computation_source(self.key)

    def row(self) -> dict[str, str]:
        """The appendix row, formatted."""
        if self.is_numeric:
            stated = f"{self.format_value(self.stated)} {self.unit}".strip()
            recomputed = f"{self.format_value(self.recomputed())} {self.unit}".strip()
        else:
            stated, recomputed = "公式", self.correction_text()
        return {
            "key": self.key,
            "seed": self.seed,
            "location": self.location,
            "claim": self.claim,
            "stated": stated,
            "recomputed": recomputed,
            "cause": self.cause_text(),
            "chapter": self.chapter,
        }


def _computation_source(key: str) -> str:
    """See :meth:`Erratum.computation`."""
    import ast

    lines, defs, entries = _module_syntax()
    if key not in entries:
        raise ValueError(f"erratum {key!r} is not an Erratum(...) entry of tmath.errata")
    kind, expr = entries[key]

    order: list[str] = []

    def visit(node: ast.AST) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in defs and n.id not in order:
                order.append(n.id)
                visit(defs[n.id])
                order.remove(n.id)
                order.append(n.id)  # after what it uses

    visit(expr)
    parts = [_segment(lines, defs[name]) for name in order]
    text = _segment(lines, expr)
    parts.append(f"{kind} = ({text})" if "\n" in text else f"{kind} = {text}")  # a wrapped lambda
    return "\n\n".join(parts)


@functools.lru_cache(maxsize=1)
def _module_syntax() -> tuple[list[str], dict, dict]:
    """This module's source, parsed once: ``(its lines, {helper or CONSTANT name: its
    statement}, {erratum key: ("compute" or "verify", the expression)})``."""
    import ast
    import inspect
    import sys

    src = inspect.getsource(sys.modules[__name__])
    tree = ast.parse(src)
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id.isupper() and not t.id.startswith("ERRATA"):
                    defs[t.id] = node
    entries: dict[str, tuple[str, ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Erratum":
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("key"), ast.Constant):
                kind = "compute" if "compute" in kw else "verify"
                entries.setdefault(kw["key"].value, (kind, kw[kind]))
    lines, start = [], 0  # split as the parser counts lines (ast.get_source_segment does)
    for m in re.finditer(r"\r\n|\r|\n", src):
        lines.append(src[start:m.end()])
        start = m.end()
    if start < len(src):
        lines.append(src[start:])
    return lines, defs, entries


def _segment(lines: list[str], node) -> str:
    """``ast.get_source_segment(source, node)``, from the source's lines split once."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode()[node.col_offset:node.end_col_offset].decode()
    return "".join([lines[first].encode()[node.col_offset:].decode(), *lines[first + 1:last],
                    lines[last].encode()[:node.end_col_offset].decode()])


def _softmax(x) -> np.ndarray:
    z = np.asarray(x, dtype=float)
    e = np.exp(z - z.max())
    return e / e.sum()


# The 黑猫睡 example of seed 000 (first three components of each vector).
HEIMAOSHUI_SCORES = (0.029, 0.046, 0.063)
HEIMAOSHUI_WEIGHTS_STATED = (0.319, 0.328, 0.353)
HEIMAOSHUI_V = ((0.3, -0.1, 0.5), (0.1, 0.8, 0.2), (0.6, 0.2, -0.3))
#: q_3 (the query of 睡) and k_1, k_2, k_3 (黑, 猫, 睡), first three of 128 components.
HEIMAOSHUI_Q = (0.5, 0.2, -0.1)
HEIMAOSHUI_K = ((0.4, 0.7, 0.1), (0.6, 0.3, -0.2), (0.2, 0.5, 0.4))
#: The source's full 128-component dot products q_3 · k_j, before the 1/sqrt(128) scaling.
HEIMAOSHUI_DOTS = (0.33, 0.52, 0.71)


def _table_2_1_heads_x_dhead(name: str) -> int:
    """n_heads x d_head as printed in the GPT-3 paper's Table 2.1 (what d_model should be)."""
    from tmath import GPT3_TABLE_2_1

    return GPT3_TABLE_2_1[name][3] * GPT3_TABLE_2_1[name][4]


def _gpt3():
    from tmath import preset

    return preset("gpt3-175b")


def _gpt3_1_3b_heads() -> int:
    """GPT-3 XL's heads with Table 2.1's d_model = 2048 and d_head = 128: d_model / d_head."""
    from tmath import GPT3_TABLE_2_1

    _, _, d, _, dh = GPT3_TABLE_2_1["gpt3-1.3b"]
    return d // dh


def _gpt3_batch_tokens() -> int:
    # Table 2.1 of the GPT-3 paper: batch size 3.2M tokens for the 175B model.
    return 3_200_000


def _gpt3_layer_activation_gb() -> float:
    """Korthikanti et al. 2022, Eq. (1): one layer, no recomputation, no parallelism, for the
    3.2M-token batch as 3.2M / 2048 sequences of 2048 tokens (linear in the batch)."""
    from tmath import activation_bytes_per_layer

    cfg = _gpt3()
    per_seq = activation_bytes_per_layer(cfg.max_position, 1, cfg.hidden_size, cfg.num_heads)
    return per_seq * _gpt3_batch_tokens() / cfg.max_position / 1e9


def _gpt3_many_gpus_reason() -> bool:
    """One 2048-token sequence fits one H100 (96 layers, full recompute, at the backward's
    peak); the model state and the compute do not fit one device: they, not the 3.2M-token
    batch, need many GPUs."""
    from tmath import count_params, training_bytes_per_param
    from tmath.hardware import hardware
    from tmath.roofline import REPORTED_RUNS

    hbm = hardware("H100").hbm_bytes
    peak = _gpt3_full_recompute_peak_bytes()
    act_batch_one_layer = _gpt3_layer_activation_gb() * 1e9
    state = training_bytes_per_param("mixed-adam").total * count_params(_gpt3()).total
    years = REPORTED_RUNS["gpt3-175b"].reported_flops / hardware("V100").dense_flops / 3.15576e7
    return bool(peak < 0.1 * hbm < hbm < act_batch_one_layer and state > 30 * hbm and years > 10)


def _gpt3_full_recompute_peak_bytes() -> float:
    """Backward peak of one 2048-token GPT-3 sequence with per-layer checkpointing: the 95
    other layers' inputs plus one layer rebuilt with every activation (eager softmax), the
    count of the memory chapter (:func:`tmath.memory.segment_checkpoint_bytes`)."""
    from tmath.memory import segment_checkpoint_bytes

    cfg = _gpt3()
    return segment_checkpoint_bytes(cfg, cfg.max_position, 1, 1, attention="eager").peak


def _gpt3_params_with_attention_width(name: str, d_model: int, width: int) -> int:
    """A GPT-3 size (Table 2.1) counted with ``d_model`` and an attention ``width`` (the
    h x d_head columns of W^Q, W^K, W^V and rows of W^O) that need not equal d_model."""
    from tmath import preset

    cfg = preset(name)
    d, f = d_model, 4 * d_model
    layer = 4 * d * width + 3 * width + d + 2 * d * f + f + d + 4 * d
    return cfg.num_layers * layer + (cfg.vocab_size + cfg.max_position) * d + 2 * d


def _xl_heads_values() -> dict[str, str]:
    from tmath import GPT3_TABLE_2_1, count_params, fmt, preset

    printed, _, d, h, dh = GPT3_TABLE_2_1["gpt3-1.3b"]
    return {
        "d": fmt.num(d), "h": fmt.num(h), "dh": fmt.num(dh), "hd": fmt.num(h * dh),
        "printed": printed,
        "n_wide": fmt.num(_gpt3_params_with_attention_width("gpt3-1.3b", d, h * dh) / 1e9, 3),
        "n": fmt.num(count_params(preset("gpt3-1.3b")).total / 1e9, 3),
        "frac": fmt.num(d / h, 4),
        "h_preset": fmt.num(preset("gpt3-1.3b").num_heads),
    }


def _13b_values() -> dict[str, str]:
    from tmath import GPT3_TABLE_2_1, fmt

    printed, _, d, h, dh = GPT3_TABLE_2_1["gpt3-13b"]
    hd = h * dh

    def billions(d_model: int, width: int) -> str:
        return fmt.num(_gpt3_params_with_attention_width("gpt3-13b", d_model, width) / 1e9, 4)

    return {
        "h": fmt.num(h), "dh": fmt.num(dh), "hd": fmt.num(hd), "d": fmt.num(d), "printed": printed,
        "n_printed": billions(d, d), "n_self": billions(hd, hd), "n_mixed": billions(d, hd),
        "frac": fmt.num(d / h, 4),
    }


def _vocab_values() -> dict[str, str]:
    from tmath import fmt

    # GPT-2's byte-level BPE: 256 byte tokens, 50,000 merges, one end-of-text token.
    return {"v": fmt.num(_gpt3().vocab_size), "bytes": fmt.num(256), "merges": fmt.num(50_000)}


def _heimaoshui_values() -> dict[str, str]:
    from tmath import fmt

    a = _softmax(HEIMAOSHUI_SCORES)
    spread = max(HEIMAOSHUI_SCORES) - min(HEIMAOSHUI_SCORES)
    stated = HEIMAOSHUI_WEIGHTS_STATED
    needed = math.log(stated[2] / stated[0])
    v1 = [v[0] for v in HEIMAOSHUI_V]
    return {
        "spread": fmt.num(spread, 2),
        "a1": fmt.num(a[0], 4), "a2": fmt.num(a[1], 4), "a3": fmt.num(a[2], 4),
        "s1": fmt.num(stated[0], 3), "s3": fmt.num(stated[2], 3),
        "ratio": fmt.num(needed / spread, 2),
        "v1": fmt.num(v1[0], 1), "v2": fmt.num(v1[1], 1), "v3": fmt.num(v1[2], 1),
        "head": fmt.num(float(a @ np.array(v1)), 4),
    }


def _many_gpus_values() -> dict[str, str]:
    from tmath import count_params, fmt, training_bytes_per_param
    from tmath.hardware import hardware
    from tmath.roofline import REPORTED_RUNS

    cfg = _gpt3()
    t = cfg.max_position
    inputs = 2 * t * cfg.hidden_size * cfg.num_layers  # every layer's fp16 input
    recipe = training_bytes_per_param("mixed-adam")
    flops = REPORTED_RUNS["gpt3-175b"].reported_flops
    years = flops / hardware("V100").dense_flops / 3.15576e7
    hbm = hardware("H100").hbm_bytes
    return {
        "batch": fmt.num(_gpt3_batch_tokens()), "t": fmt.num(t), "layers": fmt.num(cfg.num_layers),
        "inputs": fmt.bytes_si(inputs, 2), "peak": fmt.bytes_si(_gpt3_full_recompute_peak_bytes(), 2),
        "hbm": f"{hbm / 2**30:.0f} GiB", "flops": fmt.sci(flops, 3), "years": f"{years:.0f}",
        "bpp": fmt.num(recipe.total), "state": fmt.bytes_si(recipe.total * count_params(cfg).total, 2),
    }


def _gpt3_layer_matmul_flops() -> float:
    cfg = _gpt3()
    d, f = cfg.hidden_size, cfg.intermediate_size
    weights_per_layer = 4 * d * d + 2 * d * f  # W_Q, W_K, W_V, W_O, W_1, W_2
    return 2.0 * _gpt3_batch_tokens() * weights_per_layer


def _gpt3_step_flops() -> float:
    from tmath import training_flops

    cfg = _gpt3()
    per_token = training_flops(cfg, seq_len=cfg.max_position, batch=1).total / cfg.max_position
    return per_token * _gpt3_batch_tokens()


def _llama70b_kv_mha_128k_gb() -> float:
    from tmath import kv_cache_bytes, preset

    cfg = preset("llama3-70b")
    mha = cfg.replace(num_kv_heads=cfg.num_heads)
    return kv_cache_bytes(mha, seq_len=131072, batch=1, dtype="bf16") / 1e9


def _llama70b_concurrency(seq_len: int) -> float:
    """Sequences of ``seq_len`` on 8 x H100 (TP=8), bf16 weights and KV, 5 GB/GPU overhead.

    The seed's own setup, computed exactly by :func:`tmath.serving.concurrency`:
    each GPU holds 1/8 of the weights and 1/8 of every sequence's KV heads.
    """
    from tmath import concurrency, preset

    return float(concurrency(preset("llama3-70b"), "H100", tp=8, context_len=seq_len).sequences)


def _crossover(name: str) -> float:
    """Exact T* (all decoder matmuls, no LM head, full attention) of a preset."""
    from tmath import attention_crossover, preset

    return float(attention_crossover(preset(name)))


# Seed 003, sec. 2.2: its own inputs for Llama 3 70B (6 N D at 40 % of 989 TFLOP/s), the GPU
# hours it prints, and the fleet it names.
SEED_LLAMA70B_PARAMS = 70.55e9
SEED_LLAMA70B_TOKENS = 15e12
SEED_H100_PEAK = 989e12
SEED_MFU = 0.4
SEED_GPU_HOURS_STATED = 4460
SEED_SECONDS_STATED = 1.6e7
SEED_FLEET_GPUS = 6400
SEED_FLEET_DAYS = 16


def _llama70b_seed_flops() -> float:
    return 6 * SEED_LLAMA70B_PARAMS * SEED_LLAMA70B_TOKENS


def _llama70b_gpu_hours() -> float:
    # The seed's own inputs: 6 x 70.55e9 x 15e12 FLOPs at 40% of 989 TFLOP/s.
    return _llama70b_seed_flops() / (SEED_H100_PEAK * SEED_MFU) / 3600


# --- Part I: GPT-3 one token at a time (book/gpt3/) ------------------------
ERRATA_GPT3: list[Erratum] = [
    Erratum(
        key="paper-gpt3-xl-heads",
        seed="brown2020gpt3",
        location="GPT-3 论文表 2.1：GPT-3 XL 一行",
        claim="n_heads = 24（同一行：d_model = 2048，d_head = 128）",
        stated=24,
        unit="个头",
        compute=lambda: _gpt3_1_3b_heads(),
        cause=(
            "这一行的 d_model = {d}、n_heads = {h}、d_head = {dh} 不能同时成立：GPT 系列约定"
            " n_heads × d_head = d_model（这是约定，不是多头注意力的要求），而 {h} × {dh} = {hd} ≠ {d}。"
            "若注意力真有 {hd} 列，全模型是 {n_wide}B，舍入不到表中的 {printed}；注意力宽 {d} 时是 {n}B，"
            "与之吻合，但 {d} ÷ {h} = {frac} 不是整数。所以错的是头数：本书的预设保留 d_model = {d}"
            " 与 d_head = {dh}，取 {d} ÷ {dh} = {h_preset} 个头。"
        ),
        values=_xl_heads_values,
        chapter="book/gpt3/architecture",
        fmt=",.0f",
    ),
    Erratum(
        key="paper-gpt3-13b-dmodel",
        seed="brown2020gpt3",
        location="GPT-3 论文表 2.1：GPT-3 13B 一行",
        claim="d_model = 5140（同一行：n_heads = 40，d_head = 128）",
        stated=5140,
        unit="",
        compute=lambda: _table_2_1_heads_x_dhead("gpt3-13b"),
        cause=(
            "{h} × {dh} = {hd}，而 {d} ÷ {h} = {frac} 不是整数。按 {d} 计数（注意力也取这个宽度）"
            "恰好得到论文的 {printed}（{n_printed}B）；按自洽的 {hd} 是 {n_self}B，d_model = {d}、"
            "注意力宽 {hd} 也只有 {n_mixed}B：没有一种读法让这一行自洽。本书的预设取 d_model = {hd}。"
        ),
        values=_13b_values,
        chapter="book/gpt3/architecture",
        fmt=",.0f",
    ),
    Erratum(
        key="gpt3-vocab",
        seed="000",
        location="架构参数表：词表大小",
        claim="词表大小 |V| = 50,527",
        stated=50527,
        unit="",
        compute=lambda: _gpt3().vocab_size,
        cause=(
            "数字 2 与 5 颠倒：GPT-3 沿用 GPT-2 的字节级 BPE 词表，共 {v} 个 token"
            "（{bytes} 个字节 token、{merges} 次合并产生的 token 和 1 个文本结束 token）。"
        ),
        values=_vocab_values,
        chapter="book/gpt3/architecture",
        fmt=",.0f",
    ),
    Erratum(
        key="heimaoshui-softmax",
        seed="000",
        location="黑猫睡 Step 3：softmax",
        claim="softmax([0.029, 0.046, 0.063]) ≈ [0.319, 0.328, 0.353]，第一项 α₃₁",
        stated=HEIMAOSHUI_WEIGHTS_STATED[0],
        unit="",
        compute=lambda: _softmax(HEIMAOSHUI_SCORES)[0],
        cause=(
            "三个得分最多相差 {spread}，softmax 后的权重是 {a1}、{a2}、{a3}，几乎均匀（都接近 1/3），"
            "拉不开到原文的 {s1}～{s3}：那需要约 {ratio} 倍大的得分差。"
        ),
        values=_heimaoshui_values,
        chapter="book/gpt3/multihead",
        fmt=".4f",
    ),
    Erratum(
        key="heimaoshui-head",
        seed="000",
        location="黑猫睡 Step 4：加权求和",
        claim="head₃ = [0.341, 0.301, …]，第一项",
        stated=0.341,
        unit="",
        compute=lambda: float(_softmax(HEIMAOSHUI_SCORES) @ np.array(HEIMAOSHUI_V)[:, 0]),
        cause=(
            "沿用了错误的注意力权重；用正确的 softmax 权重重算："
            "{a1} × {v1} + {a2} × {v2} + {a3} × {v3} = {head}。"
        ),
        values=_heimaoshui_values,
        chapter="book/gpt3/multihead",
        fmt=".4f",
    ),
    Erratum(
        key="gpt3-batch-many-gpus",
        seed="000",
        location="架构参数表之后：1. 显存压力",
        claim=(
            "一张 H100 几乎被一层的中间结果撑满。这直接决定了模型必须使用张量并行或数据并行，"
            "将 320 万个 token 分散到成百上千块显卡上"
        ),
        correction=(
            "激活值随微批次增长，不随全局批次增长：梯度累积让一张卡可以一条序列接一条序列地处理完"
            " {batch} 个 token。每条 {t} token 的序列整层重算时，存下的 {layers} 层输入共 {inputs}，"
            "反向重建一层时的峰值是 {peak}，远小于一张 H100 的 {hbm}。需要成百上千块卡的是算力"
            "（约 {flops} FLOPs，一张 V100 按峰值要算 {years} 年）和模型状态（混合精度 Adam 每参数"
            " {bpp} 字节，共 {state}）"
        ),
        verify=_gpt3_many_gpus_reason,
        cause=(
            "把全局批次（每次更新权重用的 token 数）当成了一张卡一次要装下的微批次。"
            "全局批次决定的是一步的计算量，不是一张卡的激活显存。"
        ),
        values=_many_gpus_values,
        chapter="book/gpt3/architecture",
    ),
]

# --- Part II-a: counting FLOPs (book/flops/) -------------------------------
def _gpt3_forward_step_flops() -> float:
    """Exact forward FLOPs of one GPT-3 175B step: 3.2M tokens in sequences of 2048."""
    from tmath import forward_flops

    cfg = _gpt3()
    per_seq = forward_flops(cfg, seq_len=cfg.max_position, batch=1).total
    return per_seq * _gpt3_batch_tokens() / cfg.max_position


def _llama70b_gpus_for_16_days() -> int:
    """H100s needed to do the seed's own 6 N D at 40% MFU within its 16 days: a whole number
    of GPUs, rounded up (fewer would not finish in time)."""
    return math.ceil(_llama70b_gpu_hours() / (SEED_FLEET_DAYS * 24))


def _llama70b_remat_ratio() -> float:
    """Training with per-layer checkpointing over the forward pass, Llama 3 70B at T = 8192:
    the recomputed forward leaves out the LM head, so slightly less than 4."""
    from tmath import forward_flops, preset, training_flops
    from tmath.memory import attention_core_forward_flops, recompute_flops

    cfg, t = preset("llama3-70b"), 8192
    train, fwd = training_flops(cfg, t).total, forward_flops(cfg, t)
    full = recompute_flops(train, fwd.total, attention_core_forward_flops(cfg, t), "full",
                           outside_layers_forward=fwd.breakdown["lm_head"])
    return full.total / fwd.total


def _training_not_always_3x_forward() -> bool:
    """Training is exactly 3 x the forward pass's matmuls without recomputation, nearly 4 x with
    full recomputation (one more forward of the layers), so "always 3 x" does not hold."""
    from tmath import forward_flops, preset, training_flops

    cfg, t = preset("llama3-70b"), 8192
    train, fwd = training_flops(cfg, t).total, forward_flops(cfg, t).total
    return abs(train / fwd - 3) < 1e-6 and 3.9 < _llama70b_remat_ratio() < 4  # (RoPE: not a matmul)


def _training_3x_values() -> dict[str, str]:
    from tmath import fmt

    return {"full": fmt.num(_llama70b_remat_ratio(), 4), "t": fmt.num(8192)}


def _sixpt_not_valid_up_to_8d() -> bool:
    """6PT's error for Llama 3 70B: beyond -10 % before T = D (full scores) or 2D (causal), and
    beyond -30 % at T = 8D with either count."""
    from tmath import preset
    from tmath.flops import six_n_t_error

    cfg = preset("llama3-70b")
    d = cfg.hidden_size
    return (six_n_t_error(cfg, d) < -0.10 and six_n_t_error(cfg, 2 * d, causal=True) < -0.10
            and six_n_t_error(cfg, 8 * d) < -0.40 and six_n_t_error(cfg, 8 * d, causal=True) < -0.30)


def _sixpt_8d_values() -> dict[str, str]:
    from tmath import fmt, preset
    from tmath.flops import six_n_t_error
    from tmath.sweep import six_n_t_threshold

    cfg = preset("llama3-70b")
    d = cfg.hidden_size
    t_full, t_causal = six_n_t_threshold(cfg), six_n_t_threshold(cfg, causal=True)
    return {
        "d": fmt.num(d),
        "t_full": fmt.num(t_full), "full_d": fmt.num(t_full / d, 2),
        "t_causal": fmt.num(t_causal), "causal_d": fmt.num(t_causal / d, 3),
        "err_d": fmt.pct(-six_n_t_error(cfg, d)),
        "err_d_causal": fmt.pct(-six_n_t_error(cfg, d, causal=True)),
        "err_8d": fmt.pct(-six_n_t_error(cfg, 8 * d)),
        "err_8d_causal": fmt.pct(-six_n_t_error(cfg, 8 * d, causal=True)),
    }


def _gpt3_step_values() -> dict[str, str]:
    """The context and the causal-count variants of the GPT-3 step figures."""
    from tmath import fmt, forward_flops, training_flops

    cfg = _gpt3()
    t = cfg.max_position
    scale = _gpt3_batch_tokens() / t
    fwd = forward_flops(cfg, seq_len=t, causal=True).total * scale
    step = training_flops(cfg, seq_len=t, causal=True).total * scale
    return {"ctx": fmt.num(t), "fwd_causal": fmt.sci(fwd), "step_causal": fmt.sci(step)}


def _gpu_hours_values() -> dict[str, str]:
    from tmath import fmt

    denominator = SEED_H100_PEAK * SEED_MFU
    seconds = _llama70b_seed_flops() / denominator
    return {
        "flops": fmt.sci(_llama70b_seed_flops(), 3), "den": fmt.sci(denominator),
        "sec": fmt.sci(seconds, 2), "sec_stated": fmt.sci(SEED_SECONDS_STATED, 2),
        "factor": fmt.num(seconds / SEED_SECONDS_STATED, 2), "hours": fmt.num(round(_llama70b_gpu_hours())),
    }


def _fleet_values() -> dict[str, str]:
    from tmath import fmt

    hours = _llama70b_gpu_hours()
    h = SEED_FLEET_DAYS * 24
    return {
        "p": fmt.sci(SEED_LLAMA70B_PARAMS, 4), "tokens": fmt.sci(SEED_LLAMA70B_TOKENS, 2),
        "peak": fmt.num(SEED_H100_PEAK / 1e12), "mfu": fmt.pct(SEED_MFU, 2),
        "hours": fmt.num(round(hours)), "days": fmt.num(SEED_FLEET_DAYS), "h": fmt.num(h),
        "exact": fmt.num(hours / h, 7), "gpus": fmt.num(_llama70b_gpus_for_16_days()),
        "fleet": fmt.num(SEED_FLEET_GPUS), "fleet_days": fmt.num(hours / SEED_FLEET_GPUS / 24, 3),
        "product": fmt.num(SEED_FLEET_GPUS * h), "stated": fmt.num(SEED_GPU_HOURS_STATED),
    }


def _matmul_values() -> dict[str, str]:
    from tmath import fmt

    n, p, m = MATMUL_EXAMPLE_NPM
    return {"n": fmt.num(n), "p": fmt.num(p), "m": fmt.num(m)}


# The seed's matmul example, on a concrete shape: 4096 tokens x D = 8192 into F = 28672
# (the up-projection of Llama 3 70B): A is [N, P], B is [P, M].
MATMUL_EXAMPLE_NPM = (4096, 8192, 28672)


ERRATA_FLOPS: list[Erratum] = [
    Erratum(
        key="gpt3-layer-flops",
        seed="000",
        location="训练时的矩阵乘法规模：一层 Block",
        claim="6 × 966 万亿 ≈ 5,800 万亿次（一层 Block 共 6 次大矩阵乘法）",
        stated=5.8e15,
        unit="FLOPs",
        compute=_gpt3_layer_matmul_flops,
        cause=(
            "6 次矩阵乘法并不一样大：W₁、W₂ 各是 W_Q 的 4 倍（d×4d），"
            "一层的权重矩阵乘法相当于 4 + 2×4 = 12 个 d×d，而不是 6 个。"
        ),
        chapter="book/flops/six-pt",
        fmt=".4g",
    ),
    Erratum(
        key="gpt3-forward-flops",
        seed="000",
        location="训练时的矩阵乘法规模：96 层前向传播",
        claim="96 × 5800 万亿 ≈ 5.57 × 10¹⁷ 次（96 层前向传播）",
        stated=5.57e17,
        unit="FLOPs",
        compute=_gpt3_forward_step_flops,
        cause=(
            "每层少算了一半（见 gpt3-layer-flops）；精确的一次前向还包括注意力点积 QKᵀ、PV 和输出层。"
            "按 3.2M token、上下文 {ctx}、完整的 T×T 分数矩阵计；只算因果下三角是 {fwd_causal} FLOPs。"
        ),
        values=_gpt3_step_values,
        chapter="book/flops/six-pt",
        fmt=".4g",
    ),
    Erratum(
        key="gpt3-step-flops",
        seed="000",
        location="一个训练 step 的 FLOPs",
        claim="≈ 1.67 × 10¹⁸ 次浮点运算",
        stated=1.67e18,
        unit="FLOPs",
        compute=_gpt3_step_flops,
        cause=(
            "沿用了上一条少算一半的每层 FLOPs；另外漏掉了注意力点积（QKᵀ 与 PV）和输出层（LM head）。"
            "精确值按 3.2M token、上下文 {ctx}、完整的 T×T 分数矩阵计；只算因果下三角是 {step_causal} FLOPs。"
        ),
        values=_gpt3_step_values,
        chapter="book/flops/six-pt",
        fmt=".4g",
    ),
    Erratum(
        key="training-always-3x",
        seed="003",
        location="2.2 三个倍数必须记住",
        claim="推论：训练 FLOPs 永远是推理的 3 倍",
        correction=(
            "全部参数都训练、不重计算时，训练的矩阵乘 FLOPs 恰是前向的 3 倍；整层重计算时约 {full} 倍"
            "（Llama 3 70B，T = {t}：层检查点把各层的前向再做一遍，输出层不重算，所以不到 4 倍）；"
            "冻结的权重（不算 AᵀG）只要 2 倍。输入是常数的矩阵乘也只要 2 倍（不算 GBᵀ），"
            "但预训练的 Transformer 里没有这样的矩阵乘：第一层的输入来自可训练的词嵌入"
            "（和 LayerNorm），同样要算输入梯度"
        ),
        verify=_training_not_always_3x_forward,
        cause=(
            "3 倍来自每个矩阵乘的反向要算两个梯度（对输入、对权重），各等于一次前向；"
            "重计算多做一次各层的前向，冻结参数省掉对权重的梯度，所以“永远”不成立。"
        ),
        values=_training_3x_values,
        chapter="book/flops/six-pt",
    ),
    Erratum(
        key="llama3-70b-gpu-hours",
        seed="003",
        location="2.2 验证 Llama 3 70B",
        claim="6.35e24 / (989e12 × 0.4) = 1.6e7 s = 4460 小时·卡",
        stated=SEED_GPU_HOURS_STATED,
        unit="GPU·h",
        compute=_llama70b_gpu_hours,
        cause=(
            "{flops} ÷ {den} = {sec} 秒，而不是 {sec_stated} 秒：差了 {factor} 倍；"
            "折合 {hours} 卡时。"
        ),
        values=_gpu_hours_values,
        chapter="book/flops/six-pt",
        fmt=",.0f",
    ),
    Erratum(
        key="llama3-70b-h100-fleet",
        seed="003",
        location="2.2 验证 Llama 3 70B",
        claim="→ 约 6400 张 H100 跑 16 天",
        stated=SEED_FLEET_GPUS,
        unit="张 H100",
        compute=_llama70b_gpus_for_16_days,
        cause=(
            "按原文自己的输入（6 × {p} × {tokens} FLOPs、{peak} TFLOP/s、{mfu} MFU）共需 {hours} 卡时；"
            "{days} 天（{h} 小时）跑完需要 {hours} ÷ {h} = {exact}，向上取整为 {gpus} 张卡；"
            "{fleet} 张卡则要 {fleet_days} 天。{fleet} 张 × {h} 小时只有 {product} 卡时，"
            "与原文的 {stated} 卡时和正确的 {hours} 卡时都对不上。"
        ),
        values=_fleet_values,
        chapter="book/flops/six-pt",
        fmt=",.0f",
    ),
    Erratum(
        key="matmul-output-count",
        seed="003",
        location="一、FLOPs 的基本单元：矩阵乘",
        claim="矩阵乘 → 2NPM（每个输出元素是 N 维点积，共 PM 个输出）",
        stated=MATMUL_EXAMPLE_NPM[1] * MATMUL_EXAMPLE_NPM[2],
        unit="个输出",
        compute=lambda: MATMUL_EXAMPLE_NPM[0] * MATMUL_EXAMPLE_NPM[2],
        cause=(
            "A ∈ [N, P]、B ∈ [P, M] 的乘积是 [N, M]：共 NM 个输出，每个是 P 维点积"
            "（P 是被求和掉的维度）；总数 2NPM 没错，拆法错了。"
            "数值取 N = {n} 个 token、P = {p}、M = {m}（Llama 3 70B 的上投影）。"
        ),
        values=_matmul_values,
        chapter="book/flops/units",
        fmt=",.0f",
    ),
    Erratum(
        key="sixpt-below-8d",
        seed="003",
        location="10 Transformer 账本速查：FLOPs（训练）总计",
        claim="总计 ≈ 6 × params × tokens（T < 8D 时成立）",
        correction=(
            "T = 8D 恰是（原文假设下）注意力点积与其余矩阵乘相等之处，6PT 在那里约低估一半；"
            "要误差在 10% 以内，按完整的 T×T 分数矩阵计，T 须短于约 {full_d}D"
            "（Llama 3 70B：T < {t_full}）；用跳过被掩掉的块的因果核计，约 {causal_d}D（T < {t_causal}）"
        ),
        verify=_sixpt_not_valid_up_to_8d,
        cause=(
            "8D 是注意力点积追上其余矩阵乘的临界长度，不是 6PT 的适用上限；"
            "Llama 3 70B 在 T = D = {d} 时 6PT 已低估 {err_d}（因果核 {err_d_causal}），"
            "在 T = 8D 时低估 {err_8d}（因果核 {err_8d_causal}）。"
        ),
        values=_sixpt_8d_values,
        chapter="book/flops/when-6pt-fails",
    ),
]

def _moe_ring_ratio() -> float:
    """TP all-reduce over MoE all-to-all volume, both counted forward + backward, DeepSeek V3's k."""
    from tmath import moe, preset

    return float(moe.ring_comm_units(preset("deepseek-v3").experts_per_token).ratio)


def _llama70b_128k_kv_fits_one_gpu() -> bool:
    """One 128K-token bf16 KV cache of Llama 3 70B fits an 80 GiB H100; with the weights it does not."""
    from tmath import count_params, get_hardware, kv_cache_bytes_sequence, preset

    cfg = preset("llama3-70b")
    hbm = get_hardware("H100").hbm_bytes
    kv = kv_cache_bytes_sequence(cfg, 131072, "bf16")
    weights = 2 * count_params(cfg).total
    return bool(kv < hbm < kv + weights and kv / 8 < 0.1 * hbm)


def _decode_bound_depends_on_batch() -> bool:
    """Llama 3 70B, TP=8, 8K context: the weight read is the same for every batch, the step is not."""
    from tmath import decode_bound, preset

    cfg = preset("llama3-70b")
    one, many = (decode_bound(cfg, "H100", tp=8, batch=b, context_len=8192) for b in (1, 64))
    return bool(one.weight_bytes == many.weight_bytes and many.seconds > 2 * one.seconds)


def _llama3_untied() -> bool:
    """Llama 3 8B/70B and 3.1 405B keep separate V x D input and output tables."""
    from tmath import count_params, preset

    ok = True
    for name in ("llama3-8b", "llama3-70b", "llama3.1-405b"):
        cfg = preset(name)
        b = count_params(cfg).breakdown
        vd = cfg.vocab_size * cfg.hidden_size
        ok &= (not cfg.tie_embeddings) and b["embedding"] == b["lm_head"] == vd
    return bool(ok)


def _dsv3_total_over_active() -> bool:
    """DeepSeek V3's total/active parameter ratio is about 18 (the "18 倍显存" half holds)."""
    from tmath import count_params, preset

    p = count_params(preset("deepseek-v3"))
    return bool(17.5 < p.total / p.active < 18.5)


@functools.cache
def _ledger_facts() -> dict[str, str]:
    """Every figure the book/ledger errata quote in their causes, computed and formatted once."""
    from tmath import (
        attention_crossover,
        attention_matmul_ratio,
        concurrency,
        count_params,
        decode_bound,
        fmt,
        get_hardware,
        kv_cache_bytes_per_token,
        kv_cache_bytes_sequence,
        moe,
        preset,
    )

    c70, c405, g27 = preset("llama3-70b"), preset("llama3.1-405b"), preset("gemma-2-27b")
    ds = preset("deepseek-v3")
    h100 = get_hardware("H100")
    p70 = count_params(c70)
    mha = c70.replace(num_kv_heads=c70.num_heads)
    mha_128k = kv_cache_bytes_sequence(mha, 131072, "bf16")
    c4k = concurrency(c70, "H100", tp=8, context_len=4096)
    seq4k = kv_cache_bytes_sequence(c70, 4096, "bf16")
    d1, d8 = (decode_bound(c70, "H100", tp=tp) for tp in (1, 8))
    emb = p70.breakdown["embedding"]
    t70, t405 = attention_crossover(c70), attention_crossover(c405)
    kv128 = kv_cache_bytes_sequence(c70, 131072, "bf16")
    dsp = count_params(ds)
    cb = {dt: moe.moe_critical_batch(ds, "TPUv5e", dt) for dt in ("bf16", "fp8")}
    dense_cb = moe.moe_critical_batch(c70, "TPUv5e", "bf16")
    t_g27 = {
        "full": attention_crossover(g27, window=False),
        "win": attention_crossover(g27),
        "win_causal": attention_crossover(g27, causal=True),
    }
    f = {
        # 5.2: KV cache
        "mha_mib": fmt.num(kv_cache_bytes_per_token(mha, "bf16") / 2**20, 2),
        "len_128k": fmt.num(131072),
        "len_128000": fmt.num(128000),
        "seed_mha_gb": "336",
        "mha_128k_gb": fmt.num(mha_128k / 1e9, 4),
        "mha_128k_gib": fmt.num(mha_128k / 2**30, 3),
        "kv128_gb": fmt.num(kv128 / 1e9, 3),
        "kv128_share": fmt.pct(kv128 / h100.hbm_bytes, 2),
        "kv128_per_gpu_gb": fmt.num(kv128 / 8 / 1e9, 2),
        # 5.3: concurrency on 8 x H100, TP = 8
        "seed_formula": "440 GB ÷ (0.32 MB × 4096)",
        "seed_pool": "440",
        "k128": "128K",
        "seed_formula_4k": fmt.num(round(440e9 / (0.32e6 * 4096))),
        "seed_formula_8k": fmt.num(round(440e9 / (0.32e6 * 8192))),
        "seed_formula_32k": fmt.num(round(440e9 / (0.32e6 * 32768))),
        "seq4k_gb": fmt.num(seq4k / 1e9, 3),
        "hbm_gib": fmt.num(h100.hbm_bytes / 2**30, 2),
        "hbm_gb": fmt.num(h100.hbm_bytes / 1e9, 3),
        "w_gb": fmt.num(2 * p70.total / 1e9, 4),
        "w_gpu_gb": fmt.num(c4k.weight_bytes_per_gpu / 1e9, 4),
        "budget_gb": fmt.num(c4k.kv_budget_bytes_per_gpu / 1e9, 3),
        "pooled_4k": fmt.num(int(440e9 // seq4k)),
        "params_b": fmt.num(p70.total / 1e9, 4),
        "seed_weights_gb": "140",
        # 5.4: decode
        "vocab": fmt.num(c70.vocab_size),
        "width": fmt.num(c70.hidden_size),
        "read_b": fmt.num((p70.total - emb) / 1e9, 4),
        "read_gb": fmt.num(d1.weight_bytes / 1e9, 4),
        "bw_tbs": fmt.num(h100.hbm_bandwidth / 1e12, 3),
        "decode_tp1_ms": fmt.num(d1.seconds * 1e3, 3),
        "decode_tp8_ms": fmt.num(d8.seconds * 1e3, 3),
        "tp8_allreduces": fmt.num(2 * c70.num_layers),
        "kv_equals_weights": fmt.num(round(d8.weight_bytes / (kv_cache_bytes_per_token(c70) * 8192))),
        # 4: crossover
        "f70": fmt.num(c70.intermediate_size),
        "f70_d": fmt.num(c70.intermediate_size / c70.hidden_size, 3),
        "g70": fmt.num(c70.num_heads // c70.num_kv_heads),
        "t70": fmt.num(t70),
        "t70_d": fmt.num(t70 / c70.hidden_size, 4),
        "t70_causal": fmt.num(attention_crossover(c70, causal=True)),
        "seed_8d_70": fmt.num(8 * c70.hidden_size),
        "seed_ratio_1m": "15.3",
        "ratio_more": fmt.pct(8 * c70.hidden_size / t70 - 1, 3),
        "ratio_less": fmt.pct(1 - t70 / (8 * c70.hidden_size), 3),
        "ratio_x": fmt.num(8 * c70.hidden_size / t70, 4),
        **{f"r70_{k}": fmt.num(attention_matmul_ratio(c70, t), 3)
           for k, t in (("4k", 4096), ("32k", 32768), ("64k", 65536), ("128k", 131072))},
        "f405": fmt.num(c405.intermediate_size),
        "f405_d": fmt.num(c405.intermediate_size / c405.hidden_size, 3),
        "g405": fmt.num(c405.num_heads // c405.num_kv_heads),
        "t405": fmt.num(t405),
        "t405_d": fmt.num(t405 / c405.hidden_size, 3),
        "d_g27": fmt.num(g27.hidden_size),
        "f_g27": fmt.num(g27.intermediate_size),
        "f_g27_d": fmt.num(g27.intermediate_size / g27.hidden_size),
        "nh_g27": fmt.num(g27.num_heads * g27.head_dim),
        "n_g27": fmt.num(g27.num_heads),
        "h_g27": fmt.num(g27.head_dim),
        "w_g27": fmt.num(g27.sliding_window),
        "ctx_g27": fmt.num(g27.max_position),
        "t_g27": fmt.num(t_g27["full"]),
        "t_g27_d": fmt.num(t_g27["full"] / g27.hidden_size, 3),
        "t_g27_win": fmt.num(t_g27["win"]),
        "t_g27_win_causal": fmt.num(round(t_g27["win_causal"])),
        # 6: MoE
        "cb_dense_bf16": fmt.num(round(dense_cb)),
        "cb_seed_moe": "3,840",
        "seed_half_ridge": "120",
        "e_ds": fmt.num(ds.n_routed_experts),
        "k_ds": fmt.num(ds.experts_per_token),
        "cb_ds_bf16": fmt.num(round(cb["bf16"])),
        "ds_total_over_active": fmt.num(dsp.total / dsp.active, 3),
        "ds_active_b": fmt.num(dsp.active / 1e9, 4),
        "ds_active_noemb_b": fmt.num((dsp.active - dsp.breakdown["embedding"]) / 1e9, 4),
        "ds_emb_b": fmt.num(dsp.breakdown["embedding"] / 1e9, 3),
        "ds_readme_active": "36.7",
        "ds_readme_old": "36.6",
        "ds_readme_head": "0.9",
    }
    return f


# --- Part II-b: the full ledger (book/ledger/) -----------------------------
ERRATA_LEDGER: list[Erratum] = [
    Erratum(
        key="llama3-70b-mha-kv-128k",
        seed="003",
        location="5.2 KV Cache：MHA 对比",
        claim="MHA (K=64): KV/token = 2×80×64×128×2 = 2.5 MiB/token …… 128K = 336 GB (完全不可能)",
        stated=336,
        unit="GB",
        compute=_llama70b_kv_mha_128k_gb,
        cause=(
            "{mha_mib} MiB/token × {len_128k} token = {mha_128k_gb} GB（{mha_128k_gib} GiB）；"
            "{seed_mha_gb} GB 相当于把 {len_128k} 个 token 当成了 {len_128000} 个。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
        fmt=".1f",
    ),
    Erratum(
        key="llama3-70b-concurrency-4k",
        seed="003",
        location="5.3 部署能撑多少并发：4K 上下文",
        claim="4K 上下文 → 440 / (0.32 × 4096) = 41 条",
        stated=41,
        unit="条",
        compute=lambda: _llama70b_concurrency(4096),
        cause=(
            "原文自己的式子 {seed_formula} 算出来约 {seed_formula_4k} 条，写下的 41 少了约 8 倍——"
            "41 恰好是单卡的 55 GB 除以一条 4K 序列的全部 KV cache（{seq4k_gb} GB）。TP=8 时每张卡只存"
            " 1/8 的 KV 头，按每卡算和按 8 卡总池算是同一回事。重算值按每卡 {hbm_gib} GiB（{hbm_gb} GB）"
            "− {w_gpu_gb} GB 权重 − 5 GB 工作区 = {budget_gb} GB 的 KV 预算计；按原文的 {seed_pool} GB 总池和"
            "精确的 KV 字节数计是 {pooled_4k} 条。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
        fmt=".0f",
    ),
    Erratum(
        key="llama3-70b-concurrency-8k",
        seed="003",
        location="5.3 部署能撑多少并发：8K 上下文",
        claim="8K 上下文 → 440 / (0.32 × 8192) = 20 条",
        stated=20,
        unit="条",
        compute=lambda: _llama70b_concurrency(8192),
        cause="与 4K 一条同因：原文的式子本身给出约 {seed_formula_8k} 条，写下的结果少了约 8 倍。",
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
        fmt=".0f",
    ),
    Erratum(
        key="llama3-70b-concurrency-32k",
        seed="003",
        location="5.3 部署能撑多少并发：32K 上下文",
        claim="32K 上下文 → 440 / (0.32 × 32768) = 5 条",
        stated=5,
        unit="条",
        compute=lambda: _llama70b_concurrency(32768),
        cause="与 4K 一条同因：原文的式子本身给出约 {seed_formula_32k} 条，写下的结果少了约 8 倍。",
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
        fmt=".0f",
    ),
    Erratum(
        key="llama3-70b-crossover",
        seed="003",
        location="4 节：实际数字（Llama 3 70B, D=8192）",
        claim="T_critical = 8 × 8192 = 65,536 tokens",
        stated=65536,
        unit="tokens",
        compute=lambda: _crossover("llama3-70b"),
        cause=(
            "T > 8D 在原文的假设（门控 MLP 且 F = 4D、MHA 即 K = N）下是对的，但 Llama 3 70B 两条都不满足："
            "F = {f70} = {f70_d}D，K = N/{g70}。代入真实配置，注意力点积与全部层内矩阵乘相等的位置是 "
            "T = {t70} = {t70_d}D（全量计数，即点积按满的 T×T 计；不计 LM head）；"
            "按因果掩码计是 {t70_causal}。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/crossover",
        fmt=",.0f",
    ),
    Erratum(
        key="llama3-70b-attn-ratio-1m",
        seed="003",
        location="4 节：实际数字，T = 1,000,000",
        claim="T = 1,000,000 → attn/matmul = 15.3",
        stated=15.3,
        unit="",
        compute=lambda: __import__("tmath").attention_matmul_ratio(
            __import__("tmath").preset("llama3-70b"), 1_000_000
        ),
        cause=(
            "{seed_ratio_1m} = 10⁶ ÷ {seed_8d_70} 用的是假设下的 8D；按真实配置（全量计数）比值是"
            " T ÷ {t70}：原文这张表的每一项都比真实值小 {ratio_less}"
            "（真实值是原文的 {ratio_x} 倍，即大 {ratio_more}；4K 时 {r70_4k}，32K 时 {r70_32k}，"
            "64K 时 {r70_64k}，{k128} 时 {r70_128k}）。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/crossover",
        fmt=".1f",
    ),
    Erratum(
        key="llama3-405b-crossover",
        seed="003",
        location="4 节：Llama-405B (D=16384)",
        claim="Llama-405B: T_critical = 131k",
        stated=131072,
        unit="tokens",
        compute=lambda: _crossover("llama3.1-405b"),
        cause=(
            "同样只在 F = 4D、K = N 的假设下成立；Llama 3.1 405B 的 F = {f405} = {f405_d}D，K = N/{g405}，"
            "真实临界点是 {t405} = {t405_d}D（全量计数，不计 LM head）。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/crossover",
        fmt=",.0f",
    ),
    Erratum(
        key="gemma2-27b-crossover",
        seed="003",
        location="4 节：Gemma-27B (D=4608)",
        claim="Gemma-27B (D=4608): T_critical = 37k",
        stated=37000,
        unit="tokens",
        compute=lambda: float(
            __import__("tmath").attention_crossover(
                __import__("tmath").preset("gemma-2-27b"), window=False
            )
        ),
        cause=(
            "37k = 8 × {d_g27}，只在原文的三条假设（F = 4D、K = N、NH = D）下成立。Gemma 2 27B 的"
            " F = {f_g27} = {f_g27_d}D，{n_g27} 个查询头、每头 {h_g27} 维，NH = {nh_g27} 小于 D：其余矩阵乘"
            "比点积重得多。全量计数、不计窗口（eager 实际算的）T* = {t_g27} = {t_g27_d}D；它一半的层是"
            " {w_g27} 个 token 的滑动窗口，计窗口还要更晚：全量计数 {t_g27_win}，"
            "因果计数 {t_g27_win_causal}。"
            "每一种都远超它 {ctx_g27} 的原生上下文。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/crossover",
        fmt=",.0f",
    ),
    Erratum(
        key="moe-critical-batch-ratio",
        seed="003",
        location="6.2 MoE 的 roofline",
        claim="对比 dense 模型只要 240，MoE 要 3840——差了 16 倍。",
        stated=16,
        unit="倍",
        compute=lambda: __import__("tmath").preset("deepseek-v3").n_routed_experts
        / __import__("tmath").preset("deepseek-v3").experts_per_token,
        cause=(
            "两个数用了不同的约定：约 {cb_dense_bf16} 是 bf16 权重（每参数 2 字节）下 dense 的临界 batch，"
            "{cb_seed_moe} = {seed_half_ridge}·E/k 却把字节数记成参数个数（相当于每参数 1 字节）。"
            "同一约定下 MoE 与 dense 的临界 batch 之比恰为 E/k = {e_ds}/{k_ds}，不是 16；"
            "bf16 权重时 DeepSeek V3 的临界 batch 约 {cb_ds_bf16}。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/moe-deepseek",
        fmt=".0f",
    ),
    Erratum(
        key="moe-alltoall-vs-allreduce",
        seed="003",
        location="6.3 MoE 的通信账",
        claim="TP 通信是 MoE AllToAll 的 16 倍!",
        stated=16,
        unit="倍",
        compute=lambda: float(_moe_ring_ratio()),
        cause=(
            "原文 TP 按前向 + 反向数了 4 次 AllReduce，MoE 却只数了前向的 2 次 AllToAll，"
            "而且漏了 top-k：每个 token 要发给 k 个专家，AllToAll 搬运的数组是 k·V。"
            "前后向一致计数时比值是 8/k；DeepSeek V3 的 k = 8，两者一样多。k 份拷贝是不去重的上界："
            "按节点去重（DeepSeek V3 每个 token 至多发往 4 个节点）时 MoE 的量更小，"
            "比值在 2 到 8 之间，仍到不了 16。"
        ),
        chapter="book/ledger/moe-deepseek",
        fmt=".3g",
    ),
    Erratum(
        key="deepseek-v3-readme-active",
        seed="deepseek2024v3weights",
        location="README_WEIGHTS.md：Main Model Weights, Parameter Count",
        claim="Activation parameters: 36.7B (including 0.9B for Embedding and 0.9B for the output Head)",
        stated=36.7,
        unit="B",
        compute=lambda: __import__("tmath").count_params(
            __import__("tmath").preset("deepseek-v3")
        ).active / 1e9,
        cause=(
            "连同括号里说的两张表（输入嵌入和输出层各 {ds_emb_b}B）一起数，激活参数是 {ds_active_b}B；"
            "{ds_readme_active}B 只接近不计输入嵌入时的 {ds_active_noemb_b}B。该文件较早的版本写的正是"
            "“{ds_readme_old}B (including {ds_readme_head}B for the output Head)”，与不计输入嵌入的计数一致；"
            "后来括号里补上了嵌入，总数却只从 {ds_readme_old}B 改成 {ds_readme_active}B，没有加上这张表。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/moe-deepseek",
        fmt=".4g",
    ),
    Erratum(
        key="llama3-70b-128k-one-gpu",
        seed="003",
        location="5.2 KV Cache：单条序列",
        claim="128K 上下文 → 320K × 131072 = 42.9 GB ← 单条就爆单卡!",
        correction=(
            "{kv128_gb} GB 的 KV cache 单独放得进一张 {hbm_gib} GiB 的 H100（约占 {kv128_share}）；"
            "放不下的是它加上 {w_gb} GB 的 bf16 权重。TP=8 时每张卡只存每条序列的 1/8"
            "（约 {kv128_per_gpu_gb} GB）。"
        ),
        verify=_llama70b_128k_kv_fits_one_gpu,
        cause="“爆卡”的是权重加 KV cache，不是 KV cache 本身；原文把两笔账混成了一笔。",
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
    ),
    Erratum(
        key="llama3-70b-decode-batch-independent",
        seed="003",
        location="5.4 Decode 延迟的物理下界",
        claim="注意:这个下界与 batch size 无关——因为 decode 时 batch 里的所有序列共享同一份权重读取。",
        correction=(
            "补充说明，不是算错：对原文定义的下界（只算权重的读取）这句话成立。但解码一步还要读每条序列"
            "已缓存的 S 个 token 的 KV，计入它的下界是（权重字节 + B × 每条序列的 KV 字节）÷ 带宽，"
            "随 B 和 S 线性增长：Llama 3 70B、TP=8、S = 8K 时，"
            "约 {kv_equals_weights} 条序列的 KV 就与权重一样多，"
            "大批量时只算权重的下界就不再贴近实际。"
        ),
        verify=_decode_bound_depends_on_batch,
        cause=(
            "原文的下界只算了权重；作为下界它没错，但“大 batch 时吞吐暴涨”要打折扣："
            "KV cache 的读取正比于 batch。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/llama3-70b",
    ),
    Erratum(
        key="llama3-untied-embeddings",
        seed="003",
        location="十一、面试题：参数量（主项三条）",
        claim="Embedding+Unembed = 2DV（通常 tied，只算一份）",
        correction=(
            "Llama 3 8B/70B 与 Llama 3.1 405B 都不绑定（tie_word_embeddings = false）：输入嵌入与"
            "LM head 是两张 V×D 的表，2DV 两份都要算；GPT-2/GPT-3 才绑定，只算一份。"
        ),
        verify=_llama3_untied,
        cause="“通常 tied”对 GPT-2 一代成立，对原文自己举例的 Llama 3 不成立（其配置文件写明不绑定）。",
        chapter="book/ledger/llama3-70b",
    ),
    Erratum(
        key="moe-18x-memory-2x-compute",
        seed="003",
        location="6.1 参数 vs 激活参数",
        claim="这就是 MoE 的核心 trade-off：用 18 倍显存换 2 倍算力效率",
        correction=(
            "前半句是 DeepSeek V3 总参数与激活参数之比（约 {ds_total_over_active}）：显存按总参数、"
            "每 token 的计算按激活参数。后半句的“2 倍”没有推导，也没有约定（与哪个稠密模型比、比什么），"
            "无从验算，本书不采用。"
        ),
        verify=_dsv3_total_over_active,
        cause=(
            "“2 倍”没有出处：同样的激活参数，MoE 与稠密模型每 token 的 FLOPs 相同；"
            "要比的是同质量下的代价。"
        ),
        values=_ledger_facts,
        chapter="book/ledger/moe-deepseek",
    ),
]

# --- Part III: FlashAttention (book/flash/) --------------------------------
def _flash_example(seed: int = 0, T: int = 5, S: int = 7, H: int = 4):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((T, H)), rng.standard_normal((S, H)),
            rng.standard_normal((S, H)), rng.standard_normal((T, H)))


def _flash_backward_seed_formula_fails() -> bool:
    """The correct score gradient matches central differences; the source's (8.3) does not."""
    from tmath.attention import naive_attention_backward

    q, k, v, do = _flash_example()
    tau = 1 / math.sqrt(q.shape[-1])
    s0 = tau * q @ k.T

    def loss(s: np.ndarray) -> float:
        p_ = np.exp(s - s.max(axis=-1, keepdims=True))
        p_ /= p_.sum(axis=-1, keepdims=True)
        return float(np.sum((p_ @ v) * do))

    eps = 1e-6
    ds_fd = np.zeros_like(s0)
    for idx in np.ndindex(s0.shape):
        plus, minus = s0.copy(), s0.copy()
        plus[idx] += eps
        minus[idx] -= eps
        ds_fd[idx] = (loss(plus) - loss(minus)) / (2 * eps)
    p = np.exp(s0 - s0.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dp = do @ v.T
    ds_correct = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    ds_seed = (dp - p * dp.sum(axis=-1, keepdims=True)) * p  # the source's formula
    dq, _, _ = naive_attention_backward(q, k, v, do)
    scale = np.max(np.abs(ds_fd))
    return bool(np.max(np.abs(ds_correct - ds_fd)) < 1e-6 * scale
                and np.max(np.abs(ds_seed - ds_fd)) > 0.1 * scale
                and np.allclose(dq, tau * ds_correct @ k, rtol=1e-10, atol=1e-12))


def _flash_merge_with_output_rescaled() -> bool:
    """Merging (m, l) alone cannot give the output; merging (m, l, O) reproduces it exactly."""
    from tmath.attention import flash_attention, merge_attention_states, naive_attention

    q, k, v, _ = _flash_example()
    a = naive_attention(q, k[:3], v[:3], return_stats=True)
    b = naive_attention(q, k[3:], v[3:], return_stats=True)
    merged = merge_attention_states(a, b)
    full = naive_attention(q, k, v)
    # Without rescaling O, weighting the block outputs by their local sums is wrong:
    unscaled = (a.l[..., None] * a.o + b.l[..., None] * b.o) / (a.l + b.l)[..., None]
    tiled = flash_attention(q, k, v, block_q=2, block_k=3)
    return bool(np.allclose(merged.o, full, rtol=1e-12, atol=1e-14)
                and np.allclose(tiled, full, rtol=1e-12, atol=1e-14)
                and not np.allclose(unscaled, full, rtol=1e-3))


def _flash_memory_terms() -> bool:
    """Naive attention materializes B·N·T·S scores whatever H; tiled keeps O (B·N·T·H) + stats."""
    from tmath.attention import attention_memory_bytes, flash_attention

    B, N, T, S = 2, 3, 5, 7
    rng = np.random.default_rng(0)
    ok = True
    for H in (4, 8):
        q = rng.standard_normal((B, N, T, H))
        k, v = rng.standard_normal((B, N, S, H)), rng.standard_normal((B, N, S, H))
        scores = np.einsum("bnth,bnsh->bnts", q, k)
        res = flash_attention(q, k, v, block_q=2, block_k=3, return_stats=True)
        ok &= scores.size == attention_memory_bytes(B, T, S, N, 1) == B * N * T * S
        ok &= res.o.size == B * N * T * H and res.m.size == res.l.size == B * N * T
        ok &= scores.size != B * T * S * H  # the source's quadratic term
        ok &= res.o.size != B * T * H  # the source's linear term
    return bool(ok)


def _flash_training_flops_ratio() -> float:
    """FlashAttention / standard attention score-matmul FLOPs of a training step (GPT-2 medium)."""
    from tmath import preset, training_flops
    from tmath.attention import flash_training_attention_flops

    cfg = preset("gpt2-medium")
    std = training_flops(cfg, 1024, 1).breakdown
    return flash_training_attention_flops(cfg, 1024, 1) / (
        std["attention_scores"] + std["attention_values"]
    )


def _fmt():
    from tmath import fmt

    return fmt


def _hw():
    from tmath import hardware

    return hardware


def _dao2022() -> dict:
    from tmath.attention import DAO2022_GPT2_MEDIUM

    return DAO2022_GPT2_MEDIUM


ERRATA_FLASH: list[Erratum] = [
    Erratum(
        key="flash-quadratic-memory-term",
        seed="003",
        location="8.2 online softmax 的核心恒等式（末尾）",
        claim="显存: O(B·T·H) 而不是 O(B·T·S·H) → 从 quadratic 到 linear!",
        correction=(
            "平方项是 O(B·N·T·S)（分数矩阵 [B, N, T, S]，与头维度 H 无关）；"
            "分块实现保存的线性项是 O(B·N·T·H)（输出 O）加 O(B·N·T)（每行的 m、ℓ 或 lse）"
        ),
        verify=_flash_memory_terms,
        cause=(
            "原文把头数 N 和头维度 H 混为一谈：平方项里多了 H、少了 N，线性项里少了 N。"
            "核对：对两个不同的 H，朴素实现物化的分数矩阵元素数都是 B·N·T·S；"
            "分块实现的输出有 B·N·T·H 个元素、统计量 B·N·T 个。"
        ),
        chapter="book/flash/naive-memory",
    ),
    Erratum(
        key="flash-training-flops",
        seed="003",
        location="Q9（进阶）：FlashAttention 到底省了什么",
        claim="FLOPs 完全相同（FlashAttention 与朴素注意力）；训练时注意力点积 FLOPs 之比",
        stated=1.0,
        unit="倍",
        compute=_flash_training_flops_ratio,
        cause=(
            "前向的 FLOPs 相同，训练时不同：FlashAttention 的反向不保存 P，要重算 S = QKᵀ，"
            "每层注意力点积从 12·B·T²·N·H 变成 14·B·T²·N·H（7/6 倍）。"
            "Dao 等人（2022）图 2 的 GPT-2 medium 前向加反向实测也是 FlashAttention 多："
            "{flash} 对 {std} GFLOPs。"
        ),
        values=lambda: {
            "flash": _fmt().num(_dao2022()["gflops"]["flash"], 3),
            "std": _fmt().num(_dao2022()["gflops"]["standard"], 3),
        },
        stated_exact=True,
        chapter="book/flash/naive-memory",
        fmt=".4g",
    ),
    Erratum(
        key="flash-merge-output",
        seed="003",
        location="8.2 分块合并公式",
        claim="只给出 M 与 L 的合并，却说只需维护 M、L、O 三个状态",
        correction="O = (exp(M¹−M)·L¹·O¹ + exp(M²−M)·L²·O²) / L：输出也必须按新最大值重缩放",
        verify=_flash_merge_with_output_rescaled,
        cause=(
            "只合并 L 得不到输出；按局部和加权而不重缩放的输出与精确注意力不符，"
            "补上 O 的重缩放后与朴素注意力一致到 10⁻¹²。"
        ),
        chapter="book/flash/online-softmax",
    ),
    Erratum(
        key="flash-backward-formula",
        seed="003",
        location="8.3 反向传播的巧妙恒等式",
        claim="dSᵢⱼ = Σ_d dOᵢd · Vⱼd；d(qᵢ·kⱼ) = (dSᵢⱼ − Sᵢⱼ·Σⱼ dSᵢⱼ)·Sᵢⱼ",
        correction=(
            "dOᵢ·vⱼ 是对概率的梯度 dPᵢⱼ；对分数的梯度是 dSᵢⱼ = Pᵢⱼ(dPᵢⱼ − Σₗ Pᵢₗ dPᵢₗ)，"
            "对 qᵢ·kⱼ 的梯度再乘 τ = 1/√H"
        ),
        verify=_flash_backward_seed_formula_fails,
        cause=(
            "原文把 softmax 权重也记作 S，于是对概率的梯度 dPᵢⱼ 被写成了 dSᵢⱼ；"
            "减去的应是以 P 加权的行和 Σₗ Pᵢₗ dPᵢₗ，不是 Pᵢⱼ 乘以不加权的行和。"
            "核对：在一个随机的 5×7 例子（H = 4）上，正确的式子与中心有限差分一致，原文的式子不一致。"
        ),
        chapter="book/flash/backward",
    ),
]

def _gpt3_train_flops() -> float:
    """Exact training FLOPs of GPT-3 175B over its 300B tokens (context 2048, no causal saving)."""
    return _gpt3_step_flops() / _gpt3_batch_tokens() * 300e9


def _v100_flops_per_watt() -> float:
    from tmath.hardware import hardware

    return hardware("V100").flops_per_watt


def _gpt3_lower_bound_mwh() -> float:
    """Training FLOPs at the V100's datasheet FLOP/s per W: no PUE, 100% utilization."""
    return _gpt3_train_flops() / _v100_flops_per_watt() / 3.6e9


def _gpt3_step_seconds_1024() -> float:
    """One step on the seed's own 1024 V100s at datasheet peak (125 TFLOP/s)."""
    from tmath.hardware import hardware

    return _gpt3_step_flops() / (SEED_V100_COUNT * hardware("V100").dense_flops)


def _v100():
    from tmath.hardware import hardware

    return hardware("V100")


# Seed 000's V100 throughput (1.4e14 FLOP/s; the datasheet says 125e12), its GPU count and
# its lower bound of the training energy.
SEED_V100_FLOPS = 1.4e14
SEED_V100_COUNT = 1024
SEED_LOWER_BOUND_MWH = 93.0

# Seed 000 quotes the measured figure from Patterson et al. 2021, Table 4.
GPT3_MEASURED_MWH = 1287.0
# Li et al. 2023 (li2023thirsty): on-site water of GPT-3's training, litres.
GPT3_WATER_L = 700_000.0
# FINA Facilities Rules FR 3 (fina2009facilities): 50 m x 25 m x 2 m minimum depth.
OLYMPIC_POOL_M3 = 50.0 * 25.0 * 2.0
# The seed: efficiency grows 1.28x a year "from 2010 to 2024"; "by the end of the 2030s".
EFFICIENCY_ANNUAL_FACTOR = 1.28

# Seed 000: "以 FP16 格式，NVIDIA H100 达到每瓦 1.4e12 FLOP/s，Meta MTIA 达到 2.1e12 FLOP/s".
SEED_MTIA_FLOPS_PER_WATT = 2.1e12


def _mtia_flops_per_watt() -> float:
    """MTIA v1: 51.2 TFLOP/s FP16 over a 25 W TDP (Meta's announcement, meta2023mtia)."""
    from tmath.hardware import MTIA_V1_FP16_FLOPS, MTIA_V1_TDP_WATTS

    return MTIA_V1_FP16_FLOPS / MTIA_V1_TDP_WATTS


# --- Part IV: energy (book/energy/) ----------------------------------------
ERRATA_ENERGY: list[Erratum] = [
    Erratum(
        key="efficiency-doubling",
        seed="000",
        location="能效趋势",
        claim=(
            "GPU/TPU 能效历史上每两年翻一倍。……"
            "GPU 的每瓦 FLOP/s 从 2010 年到 2024 年以每年约 1.28 倍的速度提升。"
        ),
        stated=2.0,
        unit="年",
        compute=lambda: math.log(2) / math.log(EFFICIENCY_ANNUAL_FACTOR),
        cause=(
            "前后不一致，而不是一处算错：两句说的都是每瓦 FLOP/s 的增长，每年 {f} 倍对应的翻倍时间是"
            " ln2 / ln{f} 年（重算一栏），每两年翻一倍则对应每年 {f2} 倍。"
            "第一句引的是 Epoch AI 的 GPU/TPU 统计，"
            "第二句只说 GPU、2010–2024 年，样本不同或许能解释差距，但原文没有说明，两个速度不能混着用来外推。"
        ),
        values=lambda: {"f": _fmt().num(EFFICIENCY_ANNUAL_FACTOR, 3), "f2": _fmt().num(math.sqrt(2), 3)},
        chapter="book/energy/energy",
        fmt=".2f",
    ),
    Erratum(
        key="efficiency-2030s",
        seed="000",
        location="能效趋势：外推",
        claim="每年约 1.28 倍（2010–2024），如果延续，到 2030 年代末训练效率将提升 4 倍",
        stated=4.0,
        unit="倍",
        compute=lambda: EFFICIENCY_ANNUAL_FACTOR ** (2039 - 2024),
        cause=(
            "从 2024 年到 2039 年共 15 年，{f}¹⁵ ≈ {x15} 倍，"
            "不是 4 倍；4 倍对应的只是到 2030 年的 6 年（{f}⁶ ≈ {x6}）。"
        ),
        values=lambda: {
            "f": _fmt().num(EFFICIENCY_ANNUAL_FACTOR, 3),
            "x15": _fmt().num(EFFICIENCY_ANNUAL_FACTOR**15, 3),
            "x6": _fmt().num(EFFICIENCY_ANNUAL_FACTOR**6, 2),
        },
        chapter="book/energy/energy",
        fmt=".1f",
    ),
    Erratum(
        key="mtia-flops-per-watt",
        seed="000",
        location="能效趋势：Meta MTIA",
        claim="以 FP16 格式，NVIDIA H100 达到每瓦 1.4×10¹² FLOP/s，Meta MTIA 达到 2.1×10¹² FLOP/s。",
        stated=SEED_MTIA_FLOPS_PER_WATT,
        unit="FLOP/J",
        compute=_mtia_flops_per_watt,
        cause=(
            "只错在最后一位：Meta 公布的 MTIA v1 是 FP16 {peak} TFLOP/s、TDP {tdp} W，"
            "相除得 {eff} FLOP/J，按原文的两位有效数字应写 {eff2}。"
            "原文没有写出算式；它的 {seed} 与先把 {eff} 舍成三位（{eff3}）、再四舍五入成两位的结果相同，"
            "两次舍入把末位抬高了一格。原文的结论（MTIA v1 的峰值能效高于 H100）不变。"
        ),
        values=lambda: {
            "peak": _fmt().num(_hw().MTIA_V1_FP16_FLOPS / 1e12, 3),
            "tdp": _fmt().num(_hw().MTIA_V1_TDP_WATTS),
            "eff": _fmt().sci(_mtia_flops_per_watt(), 4),
            "eff2": _fmt().sci(_mtia_flops_per_watt(), 2),
            "eff3": _fmt().sci(_mtia_flops_per_watt(), 3),
            "seed": _fmt().sci(SEED_MTIA_FLOPS_PER_WATT, 2),
        },
        chapter="book/energy/energy",
        fmt=".4g",
    ),
    Erratum(
        key="v100-flops-per-watt",
        seed="000",
        location="FLOPs 与电能：V100 能效",
        claim="V100 能效约 4.7×10¹¹ FLOP/s per Watt（功耗 300W，吞吐 1.4×10¹⁴ FLOP/s）",
        stated=4.7e11,
        unit="FLOP/J",
        compute=_v100_flops_per_watt,
        cause=(
            "V100 SXM2 数据手册的张量核心峰值是 {peak} TFLOP/s（fp16），不是 {seed_peak}；"
            "{peak} × 10¹² FLOP/s ÷ {tdp} W ≈ {eff} FLOP/J。"
        ),
        values=lambda: {
            "peak": _fmt().num(_v100().dense_flops / 1e12),
            "seed_peak": _fmt().num(SEED_V100_FLOPS / 1e12),
            "tdp": _fmt().num(_v100().tdp_watts),
            "eff": _fmt().sci(_v100_flops_per_watt(), 3),
        },
        chapter="book/energy/energy",
        fmt=".3g",
    ),
    Erratum(
        key="gpt3-step-seconds",
        seed="000",
        location="FLOPs 与电能：单 step 耗时",
        claim="1.67×10¹⁸ / (1024 × 1.4×10¹⁴) ≈ 11.6 秒",
        stated=11.6,
        unit="s",
        compute=_gpt3_step_seconds_1024,
        cause=(
            "沿用了少算一半的每步 FLOPs（gpt3-step-flops）和偏高的 V100 峰值（见“V100 能效”一条）；"
            "按原文自己的 {gpus} 张卡、数据手册峰值、满利用率（利用率为 1）重算。"
        ),
        values=lambda: {"gpus": _fmt().num(SEED_V100_COUNT)},
        chapter="book/energy/energy",
        fmt=".1f",
    ),
    Erratum(
        key="gpt3-step-kwh",
        seed="000",
        location="FLOPs 与电能：每 step 电能",
        claim="1024 × 300W × 11.6s ≈ 0.99 kWh/step",
        stated=0.99,
        unit="kWh",
        compute=lambda: SEED_V100_COUNT * 300.0 * _gpt3_step_seconds_1024() / 3.6e6,
        cause="乘法本身没错，错在输入的单步耗时（gpt3-step-seconds）。",
        chapter="book/energy/energy",
        fmt=".2f",
    ),
    Erratum(
        key="gpt3-energy-lower-bound",
        seed="000",
        location="FLOPs 与电能：理论下限",
        claim="93,750 × 0.99 ≈ 93 MWh（理论下限）",
        stated=SEED_LOWER_BOUND_MWH,
        unit="MWh",
        compute=_gpt3_lower_bound_mwh,
        cause=(
            "每步 FLOPs 少算约一半（gpt3-step-flops），V100 能效又高估 {over}（见“V100 能效”一条）；"
            "精确训练 FLOPs 除以数据手册能效，下限是原文的 {times} 倍。"
        ),
        values=lambda: {
            "over": _fmt().pct(SEED_V100_FLOPS / _v100().dense_flops - 1, 2),
            "times": _fmt().num(_gpt3_lower_bound_mwh() / SEED_LOWER_BOUND_MWH, 3),
        },
        chapter="book/energy/energy",
        fmt=".0f",
    ),
    Erratum(
        key="gpt3-energy-gap",
        seed="000",
        location="FLOPs 与电能：差距倍数",
        claim="GPT-3 训练理论用电 93 MWh，实际……真实用电达 1,287 MWh——是理论值的 14 倍。",
        stated=14.0,
        unit="倍",
        compute=lambda: GPT3_MEASURED_MWH / _gpt3_lower_bound_mwh(),
        cause="下限算低了一半多（gpt3-energy-lower-bound），差距因而被夸大了一倍多；按正确的下限算出的差距见重算一栏。",
        chapter="book/energy/energy",
        fmt=".1f",
    ),
    Erratum(
        key="gpt3-water-olympic-pool",
        seed="000",
        location="FLOPs 与电能：用水",
        claim="超过 700 千升水用于冷却（相当于三分之二个奥运标准泳池）",
        stated=2 / 3,
        unit="个泳池",
        compute=lambda: GPT3_WATER_L / 1000 / OLYMPIC_POOL_M3,
        cause=(
            "奥运标准泳池 50 m × 25 m × 至少 2 m 深，至少 {pool} m³（{pool} 千升）；"
            "{water} 千升只是它的四分之一多一点（见重算一栏），而不是三分之二。"
        ),
        values=lambda: {
            "pool": _fmt().num(OLYMPIC_POOL_M3),
            "water": _fmt().num(GPT3_WATER_L / 1000),
        },
        chapter="book/energy/energy",
        fmt=".2f",
    ),
]

# --- Part V (多卡的账, book/parallel/) ---------------------------------------------------
# The collectives, data-parallel and tensor-parallel chapters recompute every communication
# figure of the sources and find none wrong under every reading: the source's all-to-all
# V/(4W) holds on the bidirectional ring it assumes (book/parallel/collectives states both
# topologies), its "TP 通信是 MoE AllToAll 的 16 倍" is moe-alltoall-vs-allreduce above, and
# 000's "数千张 GPU 之间同步梯度" is quantified in book/parallel/data.  The one row below is
# an error of a paper the last chapter quotes.
def _llama3_table4_row3() -> dict:
    from tmath.roofline import LLAMA3_405B_TABLE4

    return LLAMA3_405B_TABLE4[2]


def _llama3_table4_dp() -> float:
    """The DP of Table 4's last row that its other columns imply: GPUs / (TP·CP·PP)."""
    r = _llama3_table4_row3()
    return r["gpus"] / (r["tp"] * r["cp"] * r["pp"])


def _llama3_table4_dp_values() -> dict[str, str]:
    from tmath import fmt

    r = _llama3_table4_row3()
    v1 = 4
    return {"gpus": fmt.num(r["gpus"]), "tp": fmt.num(r["tp"]), "cp": fmt.num(r["cp"]),
            "pp": fmt.num(r["pp"]), "dp": fmt.num(int(_llama3_table4_dp())),
            "gpus_v1": fmt.num(r["tp"] * r["cp"] * r["pp"] * v1),
            "tokens_v1": fmt.sci(v1 * r["batch_per_dp"] * r["seq_len"], 3),
            "tokens": fmt.sci(int(_llama3_table4_dp()) * r["batch_per_dp"] * r["seq_len"], 3)}


ERRATA_PARALLEL: list[Erratum] = [
    Erratum(
        key="llama3-table4-dp",
        seed="llama3herd2024",
        location="Llama 3 论文表 4 最后一行（2024 年 7 月初版 v1 的 PDF，及 v3 之前的 HTML 页）",
        claim="GPUs 16,384，TP 8，CP 16，PP 16，DP 4，Seq. Len. 131,072，Batch size/DP 16，Tokens/Batch 16M",
        stated=4,
        unit="",
        compute=_llama3_table4_dp,
        cause=(
            "四个并行度之积必须等于卡数：{gpus} ÷ ({tp} × {cp} × {pp}) = {dp}。"
            "DP = 4 时只用了 {gpus_v1} 张卡，每步也只有 {tokens_v1} 个 token，"
            "而不是表中的 16M（DP = {dp} 时是 {tokens}）。"
            "论文 v3 的表 4 已改为 {dp}。"
        ),
        chapter="book/parallel/together",
        fmt=".0f",
        values=_llama3_table4_dp_values,
    ),
]

#: Every erratum, in the order of the book's parts.
ERRATA: list[Erratum] = (ERRATA_GPT3 + ERRATA_FLOPS + ERRATA_LEDGER + ERRATA_FLASH + ERRATA_ENERGY
                          + ERRATA_PARALLEL)


def erratum(key: str) -> Erratum:
    """Look up an erratum by key (``ValueError`` listing the keys if unknown)."""
    for e in ERRATA:
        if e.key == key:
            return e
    raise ValueError(f"unknown erratum {key!r}; known: {', '.join(e.key for e in ERRATA)}")

"""The book's one notation: every letter, its meaning, its scope and its SymPy symbol.

This registry is the single source of the notation page (``book/notation.md``,
whose tables ``tests/test_notation.py`` compares with :data:`SYMBOLS` row by
row) and of the SymPy code (:mod:`tmath.symbolic` and the chapters take their
symbols from :func:`sym`).  The rules it encodes:

- **One letter, one meaning.**  A scalar symbol (italic) means one thing in the
  whole book.  A chapter-local quantity gets a letter or a subscript of its own
  (``N_gpu`` GPUs, ``P_chip`` chip power, ``T_train`` training tokens).
- **Matrices are bold** (:data:`MATRICES`): :math:`\\mathbf{Q}, \\mathbf{K},
  \\mathbf{V}` in attention are matrices, while italic :math:`K` (KV heads) and
  :math:`V` (vocabulary) are sizes.  The entries of a bold matrix are the
  lower-case letter with indices (:math:`s_{ij}` of :math:`\\mathbf{S}`), so
  SymPy names such as ``s1``, ``v_12`` or ``a_{i}{j}`` are entries, not new
  symbols.
- **Part I** (the GPT-3 chapters) follows the GPT-3 paper and the source notes:
  ``d`` (= D), ``h`` (= N), ``d_head`` (= H), ``n_ctx``.  ``h`` means heads only.
- Quoting a paper's formula verbatim (PaLM's :math:`6N + 12LHQT`,
  Korthikanti's :math:`sbh(34 + 5as/h)`) keeps the paper's letters in the
  prose; derivations in SymPy use the book's letters.

Each :class:`Notation` carries the SymPy assumptions, so :func:`sym` returns
exactly the symbol the library uses (``sym("D")`` is ``D``, positive integer,
the same object on every call and the same object as ``sp.Symbol("D",
positive=True, integer=True)``).

:func:`undeclared_symbols` finds the SymPy symbols a notebook creates that the
registry does not know.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # SymPy is imported where a symbol is made, not by ``import tmath``
    import sympy as sp

__all__ = [
    "Notation", "Matrix", "SYMBOLS", "MATRICES", "SCOPE_BOOK", "sym", "syms", "latex",
    "latex_names", "is_declared", "undeclared_symbols", "SCOPE_PATHS", "chapter_of", "in_scope",
]

SCOPE_BOOK = "全书"
_PART1 = "第一部分（GPT-3）与导览"
_FLOPS = "第二部分：FLOPs 的基本单元"
_MOE = "MoE 与 DeepSeek V3"
_FLASH = "第三部分：FlashAttention"
_ENERGY = "第四部分：从 FLOPs 到千瓦时"
_FORWARD = "一个 token 的前向传播"
_MULTIHEAD = "多头注意力"
_MEMORY = "显存与重计算"
_PIPELINE = "流水线、专家与上下文并行"
_COLL = "集合通信"
_SERVE = "第六部分：推理与服务的账"

#: Where each chapter-local scope applies: chapter documents relative to ``book/``
#: (a trailing ``/`` is a whole part).  A chapter-local symbol used elsewhere is undeclared.
SCOPE_PATHS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    _PART1: ("intro/", "gpt3/"),
    _FORWARD: ("gpt3/forward",),
    _MULTIHEAD: ("gpt3/multihead",),
    _FLOPS: ("flops/",),
    _MOE: ("ledger/moe-deepseek",),
    _FLASH: ("flash/",),
    _ENERGY: ("energy/",),
    _MEMORY: ("ledger/memory",),
    _PIPELINE: ("parallel/pipeline-expert-context",),
    _COLL: ("parallel/collectives",),
    _SERVE: ("serving/",),
})

_SIZE = MappingProxyType({"positive": True, "integer": True})
_POS = MappingProxyType({"positive": True})
_INT = MappingProxyType({"integer": True, "nonnegative": True})


@dataclass(frozen=True)
class Notation:
    """One scalar symbol of the book.

    ``key`` is how code asks for it (``sym("N_gpu")``) and, unless ``name`` is
    given, also the SymPy name.  ``latex`` is how the notation page writes it;
    ``meaning`` and ``scope`` are the page's words; ``config_field`` and
    ``hf_keys`` tie a size to :class:`tmath.ModelConfig` and Hugging Face
    ``config.json`` keys; ``size`` puts a book-wide size in the page's first
    table.  ``indexed`` marks letters whose indexed forms (``m1``, ``m_2``) are
    the same quantity per block or position.
    """

    key: str
    latex: str
    meaning: str
    scope: str = SCOPE_BOOK
    assumptions: Mapping[str, bool] = field(default_factory=lambda: _SIZE)
    name: str | None = None
    config_field: str | None = None
    hf_keys: str | None = None
    indexed: bool = False
    size: bool = False

    @property
    def sympy_name(self) -> str:
        return self.name or self.key

    @property
    def symbol(self) -> sp.Symbol:
        import sympy as sp

        return sp.Symbol(self.sympy_name, **dict(self.assumptions))


@dataclass(frozen=True)
class Matrix:
    """A bold matrix (or tensor) of the book; its entries are the lower-case letter with indices."""

    key: str
    latex: str
    meaning: str
    scope: str = SCOPE_BOOK


_SIZES: tuple[Notation, ...] = (
    # --- book-wide sizes (the first table of the notation page) ---------------------
    Notation("B", "B", "批大小（batch size），一次处理的序列条数"),
    Notation("T", "T", "序列长度（query 一侧的 token 数）"),
    Notation("S", "S", "key/value 一侧的序列长度；自注意力训练时 $S=T$，解码时 $S$ 是已缓存的长度"),
    Notation("D", "D", r"模型宽度（hidden size，$d_{\text{model}}$）",
             config_field="hidden_size", hf_keys="`hidden_size`、`n_embd`"),
    Notation("F", "F", "前馈网络（FFN）中间维度",
             config_field="intermediate_size", hf_keys="`intermediate_size`、`n_inner`"),
    Notation("L", "L", "Transformer 层数",
             config_field="num_layers", hf_keys="`num_hidden_layers`、`n_layer`"),
    Notation("N", "N", "query 头数",
             config_field="num_heads", hf_keys="`num_attention_heads`、`n_head`"),
    Notation("K", "K", "key/value 头数；多头注意力（MHA）$K=N$，分组查询注意力（GQA）$K<N$，"
             "多查询注意力（MQA）$K=1$",
             config_field="num_kv_heads", hf_keys="`num_key_value_heads`"),
    Notation("G", "G", "每组共享一对 K/V 头的 query 头数，$G=N/K$", config_field="num_groups"),
    Notation("H", "H", r"每个头的维度（head dim）；通常 $N\cdot H=D$，但不必然",
             config_field="head_dim", hf_keys="`head_dim`"),
    Notation("V", "V", "词表大小（vocabulary size）",
             config_field="vocab_size", hf_keys="`vocab_size`"),
    Notation("W", "W", "滑动窗口层的窗口长度：一个 query 能看到的 key 数（含它自己）",
             config_field="sliding_window", hf_keys="`sliding_window`"),
    Notation("E", "E", "混合专家（MoE）中路由专家（routed experts）的个数",
             config_field="n_routed_experts", hf_keys="`num_local_experts`、`n_routed_experts`"),
    Notation("E_shared", r"E_{\text{shared}}", "共享专家（shared experts）的个数",
             config_field="n_shared_experts", hf_keys="`n_shared_experts`"),
    Notation("k", "k", "每个 token 激活的路由专家个数（top-$k$）",
             config_field="experts_per_token", hf_keys="`num_experts_per_tok`"),
    Notation("F_e", "F_e", "每个专家的 FFN 中间维度",
             config_field="moe_intermediate_size", hf_keys="`moe_intermediate_size`"),
    Notation("L_d", "L_d", "MoE 模型开头的稠密（非 MoE）层数",
             config_field="first_k_dense", hf_keys="`first_k_dense_replace`"),
    Notation("r_q", "r_q", "多头潜在注意力（MLA）中 query 的低秩维度",
             config_field="q_lora_rank", hf_keys="`q_lora_rank`"),
    Notation("d_c", "d_c", "MLA 中 key/value 的压缩潜向量维度（KV 缓存存它）",
             config_field="kv_lora_rank", hf_keys="`kv_lora_rank`"),
    Notation("d_R", "d_R", "MLA 中带旋转位置编码（RoPE）的那部分头维度",
             config_field="qk_rope_head_dim", hf_keys="`qk_rope_head_dim`"),
    Notation("d_n", "d_n", "MLA 中不带 RoPE 的那部分 query/key 头维度",
             config_field="qk_nope_head_dim", hf_keys="`qk_nope_head_dim`"),
    Notation("d_v", "d_v", "MLA 中 value 的头维度",
             config_field="v_head_dim", hf_keys="`v_head_dim`"),
)

_ENTRIES: tuple[Notation, ...] = tuple(dataclasses.replace(e, size=True) for e in _SIZES) + (
    # --- book-wide counts, bytes and rates (second table) ------------------------------
    Notation("P", "P", "参数量（模型的全部参数）"),
    Notation("P_active", r"P_{\text{active}}", "MoE 每个 token 实际经过的参数量"),
    Notation("T_train", r"T_{\text{train}}", r"训练用的 token 总数（$6PT_{\text{train}}$ 里的那个）"),
    Notation("C", "C", "一次训练的总计算量（FLOPs）"),
    Notation("b", "b", "每个元素的字节数（bf16 为 2，fp8 为 1）", assumptions=_POS),
    Notation("b_opt", r"b_{\text{opt}}", "每个参数的训练状态字节数（混合精度 Adam 为 16；ZeRO 论文把其中"
             "优化器的 12 字节记作 $K$）", assumptions=_POS),
    Notation("I", "I", "算术强度（arithmetic intensity）：FLOPs 与搬运字节数之比", assumptions=_POS),
    Notation("pi", r"\pi", "芯片的峰值算力（FLOP/s）", assumptions=_POS),
    Notation("beta", r"\beta", "内存带宽（字节/s）", assumptions=_POS),
    Notation("R", "R", r"脊点（ridge point）$\pi/\beta$：算力受限所需的最低算术强度（FLOP/字节）",
             assumptions=_POS),
    Notation("N_gpu", r"N_{\text{gpu}}", "GPU（加速卡）的张数"),
    Notation("n_TP", r"n_{\text{TP}}", "张量并行（tensor parallelism）的卡数"),
    Notation("n_DP", r"n_{\text{DP}}", "数据并行（data parallelism）的副本数"),
    Notation("n_PP", r"n_{\text{PP}}", "流水线并行（pipeline parallelism）的段数"),
    Notation("n_EP", r"n_{\text{EP}}",
             "专家并行（expert parallelism）的卡数；专家并行组从数据并行的副本里划出"),
    Notation("n_CP", r"n_{\text{CP}}", "上下文并行（context parallelism）的卡数：一条序列切成的片数"),
    Notation("W_link", r"W_{\text{link}}", "卡间链路带宽（字节/s），每个方向", assumptions=_POS),
    Notation("n_mb", r"n_{\text{mb}}", r"一个优化器步里每条流水线的微批次（micro-batch）数，"
             r"$n_{\text{mb}} = B_{\text{global}}/(n_{\text{DP}} B)$"),
    Notation("n_VPP", r"n_{\text{VPP}}", "交错数：交错排法下每张卡的模型块个数（Megatron-LM 的 virtual "
             "pipeline stages，Llama 3 论文的 V）"),
    Notation("B_global", r"B_{\text{global}}", "全局批大小：一个优化器步处理的序列条数"),
    Notation("M_arr", r"M_{\text{arr}}", "一次集合通信所作用的整个数组的字节数（all-reduce、all-to-all "
             "每卡的输入，all-gather 的输出，reduce-scatter 的输入）", assumptions=_POS),
    Notation("alpha", r"\alpha", "α–β 模型里集合通信每一步的固定延迟（秒）", assumptions=_POS),
    Notation("L_link", r"L_{\text{link}}", "一次集合通信中最忙的那条链路单向承载的字节数", assumptions=_POS),
    Notation("N_rep", r"N_{\text{rep}}", "一个模型副本占的卡数（数据并行组之外的切分：张量、流水线并行等）"),
    Notation("i", "i", "query 一侧的位置下标", assumptions=_INT),
    Notation("j", "j", "key 一侧的位置下标", assumptions=_INT),
    Notation("c", "c", "头编号，写成上标 $(c)$：$q_i^{(c)}$", assumptions=_INT),
    # --- chapter-local symbols (third table) ------------------------------------------
    Notation("d", "d", "模型宽度，$=D$（GPT-3 论文的写法）", scope=_PART1),
    Notation("h", "h", "注意力头数，$=N$（GPT-3 论文的写法）；全书只表示头数", scope=_PART1),
    Notation("d_head", r"d_{\text{head}}", "每个头的维度，$=H$", scope=_PART1),
    Notation("n_ctx", r"n_{\text{ctx}}", "上下文长度，也是学习式位置表的行数", scope=_PART1),
    Notation("P_layer", r"P_{\text{layer}}", "一层的参数量", scope=_PART1),
    Notation("n", "n", r"块矩阵恒等式中的 token 个数（矩阵 $\mathbf{X}$ 的行数）", scope=_MULTIHEAD),
    Notation("d_out", r"d_{\text{out}}", "输出投影的输出宽度", scope=_MULTIHEAD),
    Notation("mu", r"\mu", "LayerNorm 中一个向量各分量的均值", scope=_FORWARD, assumptions=_POS),
    Notation("sigma", r"\sigma", "LayerNorm 中一个向量各分量的标准差", scope=_FORWARD,
             assumptions=_POS),
    Notation("epsilon", r"\epsilon", "LayerNorm 分母里防止除零的小常数", scope=_FORWARD,
             assumptions=_POS),
    Notation("d_1", "d_1", r"一般矩阵乘 $\mathbf{A}\mathbf{B}$ 中 $\mathbf{A}$ 的行数",
             scope=_FLOPS),
    Notation("d_2", "d_2", r"一般矩阵乘中被求和掉的内维（$\mathbf{A}$ 的列数、$\mathbf{B}$ 的行数）",
             scope=_FLOPS),
    Notation("d_3", "d_3", r"一般矩阵乘中 $\mathbf{B}$ 的列数", scope=_FLOPS),
    Notation("I_matmul", r"I_{\text{matmul}}", "矩阵乘的算术强度", scope=_FLOPS, assumptions=_POS),
    Notation("I_add", r"I_{\text{add}}", "逐元素加法的算术强度", scope=_FLOPS, assumptions=_POS),
    Notation("n_MoE", r"n_{\text{MoE}}", "专家并行（expert parallelism）的卡数", scope=_MOE),
    Notation("M_msg", r"M_{\text{msg}}", "一次集合通信每张卡要发送的字节数", scope=_MOE,
             assumptions=_POS),
    Notation("B_q", "B_q", "FlashAttention 中一个 query 块的行数", scope=_FLASH),
    Notation("B_k", "B_k", "FlashAttention 中一个 key/value 块的行数", scope=_FLASH),
    Notation("m", "m", "在线 softmax 的运行最大值（$m_i$、第 1 块的 $m_1$）", scope=_FLASH,
             assumptions=MappingProxyType({"real": True}), indexed=True),
    Notation("ell", r"\ell", r"在线 softmax 的运行指数和（$\ell_i$）", scope=_FLASH,
             assumptions=_POS, indexed=True),
    Notation("delta", r"\delta", r"反向传播中每行的点积 $\delta_i = \sum_j p_{ij}\,\mathrm{d}p_{ij}$"
             r"（FlashAttention 论文记作 $D_i$）", scope=_FLASH,
             assumptions=MappingProxyType({"real": True}), indexed=True),
    Notation("eta", r"\eta", "芯片的峰值能效（FLOP/J）", scope=_ENERGY, assumptions=_POS),
    Notation("u", "u", "算力利用率（MFU）", scope=_ENERGY, assumptions=_POS),
    Notation("u_train", r"u_{\text{train}}", "训练时的算力利用率", scope=_ENERGY, assumptions=_POS),
    Notation("u_inf", r"u_{\text{inf}}", "推理时的算力利用率", scope=_ENERGY, assumptions=_POS),
    Notation("PUE", r"\mathrm{PUE}", "数据中心能源使用效率（总用电 ÷ IT 设备用电）", scope=_ENERGY,
             assumptions=_POS, name=r"\mathrm{PUE}"),
    Notation("g", "g", "电网碳强度（kg CO₂e/kWh）", scope=_ENERGY, assumptions=_POS),
    Notation("w", "w", "每千瓦时的耗水量（L/kWh）", scope=_ENERGY, assumptions=_POS),
    Notation("P_chip", r"P_{\text{chip}}", "每块芯片的功率（W）", scope=_ENERGY, assumptions=_POS),
    Notation("E_J", r"\mathcal{E}", "芯片消耗的电能（J），不含机房的额外开销；不与专家数 $E$ 混用",
             scope=_ENERGY, assumptions=_POS, name=r"\mathcal{E}"),
    Notation("E_DC", r"\mathcal{E}_{\text{DC}}",
             r"数据中心的总用电（kWh），计入 PUE：$\mathcal{E}_{\text{DC}} = \mathrm{PUE}\cdot\mathcal{E}$",
             scope=_ENERGY, assumptions=_POS, name=r"\mathcal{E}_{\text{DC}}"),
    Notation("T_serve", r"T_{\text{serve}}", "推理服务处理的 token 总数", scope=_ENERGY,
             assumptions=_POS),
    Notation("s_inf", r"s_{\text{inf}}", "推理在训练加推理总能耗中的占比", scope=_ENERGY,
             assumptions=_POS),
    Notation("b_mask", r"b_{\text{mask}}", "dropout 掩码每个元素的字节数（CUDA 的融合 dropout 为 1）",
             scope=_MEMORY, assumptions=_POS),
    Notation("b_stat", r"b_{\text{stat}}", "归一化统计量（均值、rstd）每个元素的字节数（总是 fp32，为 4）",
             scope=_MEMORY, assumptions=_POS),
    Notation("L_seg", r"L_{\text{seg}}", "分段重计算中每段的层数（每段只存段的输入）", scope=_MEMORY),
    Notation("A_in", r"A_{\text{in}}", "一层输入的字节数（每卡）：分段重计算每段只存它", scope=_MEMORY,
             assumptions=_POS),
    Notation("A_layer", r"A_{\text{layer}}", "一层不重计算时为反向保存的激活字节数（每卡）", scope=_MEMORY,
             assumptions=_POS),
    Notation("W_host", r"W_{\text{host}}", "GPU 与主机内存之间的链路（PCIe）单向带宽（字节/s）",
             scope=_MEMORY, assumptions=_POS),
    Notation("t_F", r"t_F", "流水线一段做一个微批次前向的时间（DeepSeek-V3 报告表 2 的 $F$）",
             scope=_PIPELINE, assumptions=_POS),
    Notation("t_B", r"t_B", "流水线一段做一个微批次整个反向的时间（输入梯度加权重梯度，报告的 $B$）",
             scope=_PIPELINE, assumptions=_POS),
    Notation("t_W", r"t_W", "反向里算权重梯度那部分的时间（报告的 $W$）", scope=_PIPELINE,
             assumptions=_POS),
    Notation("t_FB", r"t_{F\&B}", "一对互相重叠的前向与反向的时间（报告的 $F\\&B$）",
             scope=_PIPELINE, assumptions=_POS),
    Notation("a_side", "a", "TPU 环面上一个组所占盒子的边长（一个轴上的芯片数；第 $i$ 轴的记作 $a_i$）",
             scope=_COLL, assumptions=_SIZE, indexed=True),
    Notation("n_axes", r"n_{\text{axes}}", "一个组在环面上同时用的轴数（JAX scaling book 的写法）",
             scope=_COLL, assumptions=_SIZE),
    Notation("s", "s", r"多轴 all-gather 的第几段（$1$ 到 $n_{\text{axes}}$）", scope=_COLL,
             assumptions=_SIZE),
    # Part VI (book/serving/): serving
    Notation("kappa", r"\kappa", "每个 token 的 KV cache 字节数（所有层、所有 KV 头；MLA 为压缩潜向量）",
             scope=_SERVE, assumptions=_POS),
    Notation("n_blk", r"n_{\text{blk}}", "分页 KV cache 一个块（block）存的 token 数", scope=_SERVE),
    Notation("r", "r", r"序列长度除以块大小 $n_{\text{blk}}$ 的余数", scope=_SERVE, assumptions=_INT),
    Notation("alpha_acc", r"\alpha_{\text{acc}}", "投机解码中草稿模型的一个 token 被目标模型接受的概率",
             scope=_SERVE, assumptions=_POS),
    Notation("gamma", r"\gamma", "投机解码中草稿模型每轮提出的 token 数", scope=_SERVE,
             assumptions=_SIZE),
    Notation("n_acc", r"n_{\text{acc}}",
             r"投机解码一轮里被接受的草稿 token 数（$0\le n_{\text{acc}}\le\gamma$）",
             scope=_SERVE, assumptions=_INT),
    Notation("c_draft", r"c_{\text{draft}}", "草稿模型一步的时间与目标模型一步的时间之比", scope=_SERVE,
             assumptions=_POS),
    Notation("O", "O", "一条请求输出的 token 数（解码 $O-1$ 步；TPOT 是这 $O-1$ 步的平均）",
             scope=_SERVE),
    Notation("B_star", r"B^{*}", "解码一步从受读取限制变成受算力限制所需的最小批", scope=_SERVE),
    Notation("S_lim", r"S_{\lim}",
             "上下文长度的界（token）：每条序列的上下文长于它时，解码无论批多大都受读取限制",
             scope=_SERVE, assumptions=_POS),
    Notation("w_bar", r"\overline{w}", "分页 KV cache 中每条序列最后一块平均空着的位置数", scope=_SERVE,
             assumptions=_POS),
    Notation("t_pre", r"t_{\text{pre}}", "单独一次预填充的时间（秒）", scope=_SERVE, assumptions=_POS),
    Notation("t_dec", r"t_{\text{dec}}", "只有解码时平均一步的时间（秒）", scope=_SERVE, assumptions=_POS),
    Notation("p_hour", r"p_{\text{hour}}", "每卡每小时的租价（美元）", scope=_SERVE, assumptions=_POS),
    Notation("r_tok", r"r_{\text{tok}}", "一组卡每秒处理的 token 数", scope=_SERVE, assumptions=_POS),
)

_MATRIX_ENTRIES: tuple[Matrix, ...] = (
    Matrix("X", r"\mathbf{X}", "输入激活，每行一个 token"),
    Matrix("W", r"\mathbf{W}", r"权重矩阵（$\mathbf{W}^Q$、$\mathbf{W}^O$、$\mathbf{W}_1$ 等）"),
    Matrix("Q", r"\mathbf{Q}", "query 矩阵"),
    Matrix("K", r"\mathbf{K}", "key 矩阵（不要和 KV 头数 $K$ 混淆）"),
    Matrix("V", r"\mathbf{V}", "value 矩阵（不要和词表大小 $V$ 混淆）"),
    Matrix("S", r"\mathbf{S}", r"注意力分数矩阵 $\mathbf{Q}\mathbf{K}^\top/\sqrt{H}$"),
    Matrix("P", r"\mathbf{P}", r"softmax 之后的注意力概率矩阵，$\mathbf{P}\mathbf{V}$ 中的那个"),
    Matrix("O", r"\mathbf{O}", "注意力的输出"),
    Matrix("Z", r"\mathbf{Z}", r"一个头的输出 $\mathbf{Z}^{(c)}$"),
    Matrix("dO", r"\mathrm{d}\mathbf{O}", r"损失对 $\mathbf{O}$ 的梯度（$\mathrm{d}\mathbf{S}$ 等同理）"),
    Matrix("M", r"\mathbf{M}", r"因果掩码，加在得分上：$j\le i$ 处为 0，$j>i$ 处为 $-\infty$", scope=_PART1),
    Matrix("A", r"\mathbf{A}", r"一般矩阵乘 $\mathbf{C}=\mathbf{A}\mathbf{B}$ 的左因子（输入激活）",
           scope=_FLOPS),
    Matrix("B", r"\mathbf{B}", "一般矩阵乘的右因子（参数）", scope=_FLOPS),
    Matrix("C", r"\mathbf{C}", "一般矩阵乘的积", scope=_FLOPS),
    Matrix("G", r"\mathbf{G}", r"上游传来的梯度 $\partial L/\partial \mathbf{C}$（不是分组数 $G$）",
           scope=_FLOPS),
    Matrix("Y", r"\mathbf{Y}", "平方损失的目标值", scope=_FLOPS),
)


def _index(entries: tuple, what: str) -> Mapping:
    out = {}
    for e in entries:
        if e.key in out:
            raise RuntimeError(f"duplicate {what} key {e.key!r}")  # pragma: no cover
        out[e.key] = e
    return MappingProxyType(out)


#: Every scalar symbol of the book, by key, in the notation page's order.
SYMBOLS: Mapping[str, Notation] = _index(_ENTRIES, "symbol")
#: The bold matrices; an entry of ``X`` is ``x_{ij}`` (SymPy ``x11``, ``x_12``, ``x_{i}{j}``).
MATRICES: Mapping[str, Matrix] = _index(_MATRIX_ENTRIES, "matrix")
_BY_NAME: Mapping[str, Notation] = MappingProxyType({e.sympy_name: e for e in _ENTRIES})


@cache
def _symbol_cache() -> dict[str, sp.Symbol]:
    """The SymPy symbol of every key, made once (on the first :func:`sym` call)."""
    return {key: e.symbol for key, e in SYMBOLS.items()}


def sym(key: str) -> sp.Symbol:
    """The SymPy symbol of ``key`` (same object on every call), e.g. ``sym("D")``.

    Raises :class:`KeyError` naming the key and the nearest registered ones.
    """
    if not isinstance(key, str):
        raise TypeError(f"key must be a str such as 'D', got {type(key).__name__} {key!r}")
    try:
        return _symbol_cache()[key]
    except KeyError:
        near = [k for k in SYMBOLS if k.lower().startswith(key[:1].lower())]
        raise KeyError(
            f"{key!r} is not in the book's notation (tmath.notation.SYMBOLS); "
            f"registered keys starting alike: {', '.join(near) or 'none'}. "
            "Add it there and to book/notation.md, or use a registered letter."
        ) from None


def syms(keys: str) -> tuple[sp.Symbol, ...]:
    """Several symbols at once: ``syms("D L V")`` (keys separated by spaces or commas)."""
    if not isinstance(keys, str):
        raise TypeError(f"keys must be a str such as 'D L V', got {type(keys).__name__}")
    return tuple(sym(k) for k in re.split(r"[\s,]+", keys.strip()) if k)


def latex_names() -> dict[sp.Symbol, str]:
    """``{symbol: LaTeX}`` for ``sp.latex(expr, symbol_names=latex_names())``."""
    cache = _symbol_cache()
    return {cache[k]: e.latex for k, e in SYMBOLS.items()}


def latex(expr: object, **kwargs: object) -> str:
    r"""``sp.latex`` with the registry's LaTeX for each symbol (``N_{\text{gpu}}``, not ``N_{gpu}``)."""
    import sympy as sp

    return sp.latex(expr, symbol_names=latex_names(), **kwargs)


# --- notebooks: which SymPy symbols do they create? -----------------------------------

# an entry of a bold matrix or an indexed scalar: a letter (or dO), then indices
_ENTRY = re.compile(r"(?P<base>d?[A-Za-z])(?:_?(?:\d+|\{\}|\{[^{}]*\})+)")


def chapter_of(path: str | Path) -> str | None:
    """A notebook's chapter as the notation scopes name it: ``"gpt3/forward"`` for
    ``.../book/gpt3/forward.ipynb``; ``None`` outside ``book/``."""
    parts = Path(path).with_suffix("").parts
    if "book" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("book")
    return "/".join(parts[i + 1:])


def in_scope(scope: str, chapter: str | None) -> bool:
    """Whether a symbol of ``scope`` may be used in ``chapter`` (``None``: anywhere)."""
    if scope == SCOPE_BOOK or chapter is None:
        return True
    return any(
        chapter.startswith(p) if p.endswith("/") else chapter == p for p in SCOPE_PATHS[scope]
    )


def is_declared(name: str, *, matrix: bool = False, chapter: str | None = None) -> bool:
    """Whether the SymPy symbol name ``name`` is in the book's notation.

    Declared: a registered symbol's SymPy name or key, if ``chapter`` (e.g.
    ``"energy/energy"``; ``None``: any) is in its scope; an entry of a bold
    matrix (``s1``, ``v_12``, ``a_{}{}`` for ``f"a_{i}{j}"``, ``dO1``); an indexed
    form of an ``indexed`` symbol (``m1``).  With ``matrix=True`` (a
    ``MatrixSymbol``), the name must be a registered matrix, optionally with a
    superscript or subscript (``W^{(1)}``, ``W_O``).
    """
    if matrix:
        head = re.match(r"d?[A-Z]", name)
        return bool(head) and head.group(0)[-1] in MATRICES and in_scope(
            MATRICES[head.group(0)[-1]].scope, chapter
        )
    entry = _BY_NAME.get(name) or SYMBOLS.get(name)
    if entry is not None:
        return in_scope(entry.scope, chapter)
    m = _ENTRY.fullmatch(name)
    if not m:
        return False
    base = m.group("base")
    if base in SYMBOLS and SYMBOLS[base].indexed:
        return in_scope(SYMBOLS[base].scope, chapter)
    key = base[1] if len(base) == 2 else base.upper()  # dO1: an entry of the gradient of O
    return key in MATRICES and in_scope(MATRICES[key].scope, chapter)


_SYMBOL_FUNCS = {"Symbol", "symbols", "Dummy", "var"}
_SYMPY_MODULES = {"sp", "sympy"}


def _literal_name(node: ast.expr) -> str | None:
    """A str constant, or an f-string with each replacement field as ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                parts.append("{}")
        return "".join(parts)
    return None


def _names_in_call(call: ast.Call, imported: Mapping[str, str]) -> tuple[str, list[str]]:
    """``(kind, names)`` of a SymPy symbol-creating call, ``kind`` "symbol" or "matrix"."""
    func = call.func
    attr = func.attr if isinstance(func, ast.Attribute) else imported[func.id]  # type: ignore[union-attr]
    kind = "matrix" if attr == "MatrixSymbol" else "symbol"
    if not call.args:
        return kind, []
    arg = call.args[0]
    text = _literal_name(arg)
    if text is None:
        return kind, [f"<{ast.unparse(arg)}>"]
    if attr in {"symbols", "var"} and "{}" not in text:
        import sympy as sp

        names = [s.name for s in sp.symbols(text, seq=True)]
        return kind, names
    return kind, [text]


def _is_symbol_call(call: ast.Call, imported: Mapping[str, str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id in _SYMPY_MODULES and func.attr in _SYMBOL_FUNCS | {"MatrixSymbol"}
    if isinstance(func, ast.Name):
        return func.id in imported
    return False


def _strip_magics(source: str) -> str:
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def undeclared_symbols(notebook_path: str | Path, chapter: str | None = None) -> list[str]:
    """Names of the SymPy symbols a notebook's code cells create that the registry does not know.

    Looks at every ``sp.Symbol``/``sp.symbols``/``sp.Dummy``/``sp.MatrixSymbol`` call
    (also ``sympy.``, and ``Symbol``/``symbols`` imported from sympy) with a
    literal name; ``symbols("s1:4")`` expands to ``s1, s2, s3`` as SymPy does.
    A name that is not a literal is reported as ``<expression>``: the check
    cannot prove it is declared.  Each undeclared name is listed once, in order
    of first appearance.  A chapter-local symbol (e.g. ``g``, the grid's carbon
    intensity) counts as declared only inside its scope (:data:`SCOPE_PATHS`);
    ``chapter`` defaults to :func:`chapter_of` the path (``None`` outside
    ``book/``: every scope allowed).  Symbols taken from :func:`sym` are declared
    by construction.
    """
    if chapter is None:
        chapter = chapter_of(notebook_path)
    nb = json.loads(Path(notebook_path).read_text(encoding="utf-8"))
    trees = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        try:
            trees.append(ast.parse(_strip_magics(source)))
        except SyntaxError:
            continue
    # names imported from sympy in any cell (the kernel shares them across cells)
    imported = {
        alias.asname or alias.name: alias.name
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "sympy"
        for alias in node.names
        if alias.name in _SYMBOL_FUNCS | {"MatrixSymbol"}
    }
    found: list[str] = []
    for tree in trees:
        calls = sorted(
            (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_symbol_call(n, imported)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        for call in calls:
            kind, names = _names_in_call(call, imported)
            for name in names:
                declared = not name.startswith("<") and is_declared(
                    name, matrix=kind == "matrix", chapter=chapter
                )
                if not declared and name not in found:
                    found.append(name)
    return found

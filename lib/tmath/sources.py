"""Every external fact the book uses, with its primary source.

Each entry of :data:`SOURCES` is a :class:`Source`; ``key`` doubles as the
BibTeX key in ``book/references.bib`` so the prose can cite it with
``{cite}`key```.  Numbers taken from a source live next to the code that uses
them (presets, hardware table) and name the key of their source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    where: str  # URL or bibliographic locator of the primary source
    note: str = ""


SOURCES: dict[str, Source] = {}


def register(key: str, title: str, where: str, note: str = "") -> Source:
    """Add a source to the registry (idempotent for identical entries)."""
    src = Source(key, title, where, note)
    old = SOURCES.get(key)
    if old is not None and old != src:
        raise ValueError(f"source key {key!r} registered twice with different data")
    SOURCES[key] = src
    return src


def source(key: str) -> Source:
    """Look up a source by key; unknown keys get a clear error."""
    try:
        return SOURCES[key]
    except KeyError:
        raise ValueError(
            f"unknown source key {key!r}; known keys: {', '.join(sorted(SOURCES))}"
        ) from None


register(
    "brown2020gpt3",
    "Language Models are Few-Shot Learners (GPT-3), Table 2.1",
    "https://arxiv.org/abs/2005.14165",
)
register(
    "radford2019gpt2",
    "Language Models are Unsupervised Multitask Learners (GPT-2); configs of the "
    "Hugging Face checkpoints gpt2, gpt2-medium, gpt2-large, gpt2-xl",
    "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
)
register(
    "vaswani2017attention",
    "Attention Is All You Need",
    "https://arxiv.org/abs/1706.03762",
)
register(
    "dao2022flashattention",
    "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness "
    "(Dao, Fu, Ermon, Rudra, Re; NeurIPS 2022), Algorithm 0, Algorithm 1, Theorem 2",
    "https://arxiv.org/abs/2205.14135",
    "Theorem 2: standard attention needs Theta(Nd + N^2) HBM accesses, FlashAttention "
    "Theta(N^2 d^2 M^-1) for head dimension d and SRAM size M (d <= M <= Nd).",
)
register(
    "dao2023flashattention2",
    "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning "
    "(Dao, 2023), Algorithms 1 and 2",
    "https://arxiv.org/abs/2307.08691",
    "Loop order with query blocks outer; backward recomputes P from the saved "
    "logsumexp and uses D_i = rowsum(dO_i * O_i).",
)

# --- sources of the memory / serving / energy / hardware work ----------------
register(
    "nvidia-v100-datasheet",
    "NVIDIA Tesla V100 GPU Accelerator datasheet (V100 SXM2: 125 TFLOPS tensor "
    "performance (fp16), 32/16 GB HBM2, 900 GB/s, 300 W, NVLink 300 GB/s)",
    "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
)
register(
    "nvidia-a100-datasheet",
    "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM: BF16 tensor 312 TFLOPS "
    "dense / 624 sparse, 80 GB HBM2e, 2,039 GB/s, 400 W, NVLink 600 GB/s)",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
)
register(
    "nvidia-h100-datasheet",
    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: BF16 tensor 1,979 TFLOPS "
    "with sparsity = 989 dense, FP8 3,958 sparse = 1,979 dense, 80 GB, 3.35 TB/s, "
    "up to 700 W, NVLink 900 GB/s)",
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    "The datasheet footnote: 'With sparsity'; dense figures are one-half.",
)
register(
    "nvidia-h200-datasheet",
    "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: BF16 tensor 1,979 TFLOPS "
    "with sparsity = 989 dense, 141 GB HBM3e, 4.8 TB/s, up to 700 W, NVLink 900 GB/s)",
    "https://www.nvidia.com/en-us/data-center/h200/",
)
register(
    "nvidia-h800-product",
    "NVIDIA H800 Tensor Core GPU (SXM) product page: Hopper GH100 like H100 SXM "
    "(same tensor FLOP/s, 80 GB, 3.35 TB/s, 700 W) with NVLink limited to 400 GB/s",
    "https://www.nvidia.cn/data-center/h800/",
    "Secondary confirmation of the 400 GB/s NVLink figure; the compute figures "
    "equal the H100 SXM's. Treat as the least certain entry of the table.",
)
register(
    "google-tpu-v5e",
    "Google Cloud TPU v5e documentation (per chip: 197 TFLOP/s bf16, 394 TOP/s "
    "int8, 16 GB HBM2, 819 GB/s, ICI 1,600 Gbps)",
    "https://cloud.google.com/tpu/docs/v5e",
    "Google publishes no per-chip TDP for v5e.",
)

register(
    "korthikanti2022activation",
    "Reducing Activation Recomputation in Large Transformer Models "
    "(Korthikanti et al., 2022), Section 4, Eqs. (1)-(5) and Table 2",
    "https://arxiv.org/abs/2205.05198",
    "Activation bytes per layer, 16-bit activations, GPT layout (2-matrix 4h MLP): "
    "sbh(34 + 5as/h) without parallelism; sbh(10 + 24/t + 5as/(ht)) with tensor "
    "parallelism t; (sbh/t)(34 + 5as/h) with tensor + sequence parallelism; "
    "34sbh/t with selective recomputation (+SP); 2sbh with full recomputation.",
)
register(
    "rajbhandari2020zero",
    "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models "
    "(Rajbhandari et al., 2020), Section 5 and Figure 1",
    "https://arxiv.org/abs/1910.02054",
    "Mixed-precision Adam holds 2+2+K bytes/param with K = 12; stage 1/2/3 "
    "partition optimizer states / +gradients / +parameters over N_d ranks. "
    "Figure 1 example: 7.5B params, N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB.",
)
register(
    "patterson2021carbon",
    "Carbon Emissions and Large Neural Network Training (Patterson et al., 2021), Table 4",
    "https://arxiv.org/abs/2104.10350",
    "GPT-3: 1,287 MWh and 552 tCO2e (net). Same table: V100 GPUs, 10,000 "
    "processors, 14.8 days, 330 W average per processor, PUE 1.10, 0.429 "
    "kgCO2e/kWh, 3.14e23 FLOPs (these five were read from the table as recalled; "
    "they reproduce the 1,287 MWh and 552 t to 0.2%).",
)
register(
    "li2023thirsty",
    "Making AI Less 'Thirsty': Uncovering and Addressing the Secret Water "
    "Footprint of AI Models (Li, Yang, Islam, Ren, 2023)",
    "https://arxiv.org/abs/2304.03271",
    "Estimates that training GPT-3 in Microsoft's U.S. data centers evaporated "
    "about 700,000 litres of clean freshwater on site.",
)
register(
    "milakov2018online",
    "Online normalizer calculation for softmax (Milakov, Gimelshein, 2018)",
    "https://arxiv.org/abs/1805.02867",
    "The running-max / running-sum softmax normalizer in one pass.",
)
register(
    "liu2023ringattention",
    "Ring Attention with Blockwise Transformers for Near-Infinite Context "
    "(Liu, Zaharia, Abbeel, 2023)",
    "https://arxiv.org/abs/2310.01889",
    "Sequence split across devices; K/V blocks passed around a ring and merged "
    "with the online-softmax statistics.",
)

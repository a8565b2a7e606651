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


def cite(key: str, *, short: bool = False) -> str:
    """A source as the book prints it: a short Chinese citation, never the raw key.

    ``cite("nvidia-h100-datasheet")`` gives ``NVIDIA《H100 Tensor Core GPU 数据手册》``,
    ``cite("brown2020gpt3")`` gives ``Brown 等（2020）《Language Models are Few-Shot
    Learners》``; ``short=True`` keeps only the author and year (``Brown 等（2020）``) for
    a narrow table column whose neighbour already names the work.  Use it wherever a cell
    *prints* a source (prose cites with ``{cite}`key```, which the bibliography renders).
    Unknown keys, and keys with no citation text yet, raise ``ValueError`` naming the key
    and the fix.
    """
    source(key)  # unknown key: the registry's error, listing the known keys
    try:
        text = CITATIONS[key]
    except KeyError:
        raise ValueError(
            f"source {key!r} has no printed citation: add it to tmath.sources.CITATIONS"
        ) from None
    if short and "《" in text:
        text = text.split("《", 1)[0].rstrip("，") or text
    return text


#: key -> how a printed output names the source (author or publisher, year, title).
CITATIONS: dict[str, str] = {
    "google2024gemma2_27b": "Google《Gemma 2 27B 官方 config.json》",
    "huang2019gpipe": "Huang 等（2019）《GPipe》",
    "li2020pytorchddp": "Li 等（2020）《PyTorch Distributed》",
    "megatron-core-tp-layers": "NVIDIA《Megatron-LM 源码：tensor_parallel/layers.py》",
    "microsoft2020supercomputer": "Microsoft（2020）《OpenAI 超级计算机发布文》",
    "narayanan2021megatron": "Narayanan 等（2021）《Megatron-LM on GPU Clusters》",
    "nccl-issue-812": "NVIDIA《NCCL issue 812：DGX A100 上 all-reduce 的总线带宽》",
    "nccl-tuning": "NVIDIA《NCCL v2.27.7-1 源码：graph/tuning.cc》",
    "nccl-topo": "NVIDIA《NCCL v2.27.7-1 源码：graph/topo.h、topo.cc》",
    "nccl-search": "NVIDIA《NCCL v2.27.7-1 源码：graph/search.cc》",
    "nccl-tests-issue-212": "NVIDIA《nccl-tests issue 212：H100 的 all-reduce 性能》",
    "vllm-custom-allreduce": "vLLM《源码：csrc/custom_all_reduce.cuh》",
    "nvidia-dgx-b200-guide": "NVIDIA《DGX B200 用户指南》",
    "nvidia-dgx-basepod": "NVIDIA《DGX BasePOD 参考架构》",
    "nvidia-nim-llm-benchmarking": "NVIDIA《NIM LLM 基准测试：Llama 3.3 70B》",
    "patarasuk2009bandwidth": "Patarasuk、Yuan（2009）《带宽最优的 all-reduce》",
    "pytorch-fsdp2-docs": "PyTorch 文档《fully_shard（FSDP2）》",
    "pytorch-gloo-reduce-scatter": "PyTorch 源码《c10d/ProcessGroupGloo.cpp：reduce_scatter》",
    "linux-man-proc-pid-io": "Linux man-pages《proc_pid_io(5)》",
    "deepspeed-engine-no-sync": "DeepSpeed 源码《runtime/engine.py：no_sync》",
    "deepspeed-pr4713": "DeepSpeed 拉取请求 4713《BF16_Optimizer：支持 bf16 梯度累积》",
    "nccl-tests-performance": "NVIDIA《nccl-tests：PERFORMANCE.md》",
    "pytorch-pipelining-stage": "PyTorch 源码《pipelining/stage.py》",
    "zhu2024ringflashattn": "Zhu（2024）《ring-flash-attention 源码：ring_flash_attn.py》",
    "pytorch-tp-docs": "PyTorch 文档《Tensor Parallelism》",
    "pytorch-tp-tutorial": "Liang、Liu（2024）《PyTorch 张量并行教程》",
    "torchtitan-parallelize-llama": "PyTorch《torchtitan 源码：llama3 的 apply_tp》",
    "megatron-lm-tp-comm-overlap": "NVIDIA《Megatron-LM 源码：--tp-comm-overlap 参数》",
    "nvidia-gb200-nvl72": "NVIDIA《GB200 NVL72 产品页》",
    "wang2023overlap": "Wang 等（2023）《通过分解让通信与有依赖的计算重叠》",
    "thakur2005mpich": "Thakur 等（2005）《MPICH 集合通信优化》",
    "brown2020gpt3": "Brown 等（2020）《Language Models are Few-Shot Learners》",
    "radford2019gpt2": "Radford 等（2019）《Language Models are Unsupervised Multitask Learners》",
    "vaswani2017attention": "Vaswani 等（2017）《Attention Is All You Need》",
    "dao2022flashattention": "Dao 等（2022）《FlashAttention》",
    "dao2023flashattention2": "Dao（2023）《FlashAttention-2》",
    "nvidia-v100-datasheet": "NVIDIA《Tesla V100 数据手册》",
    "nvidia-a100-datasheet": "NVIDIA《A100 Tensor Core GPU 数据手册》",
    "nvidia-h100-datasheet": "NVIDIA《H100 Tensor Core GPU 数据手册》",
    "nvidia-h200-datasheet": "NVIDIA《H200 Tensor Core GPU》产品页",
    "nvidia-h800-product": "NVIDIA《H800 Tensor Core GPU》产品页",
    "google-tpu-v5e": "Google Cloud《Cloud TPU v5e》文档",
    "google-tpu-v4": "Google Cloud《Cloud TPU v4》文档",
    "google-tpu-v5p": "Google Cloud《Cloud TPU v5p》文档",
    "google-tpu-v6e": "Google Cloud《Cloud TPU v6e》文档",
    "nvidia-dgx-b200-datasheet": "NVIDIA《DGX B200 数据手册》",
    "nvidia-dgx-a100-guide": "NVIDIA《DGX A100 用户指南》",
    "korthikanti2022activation": "Korthikanti 等（2022）《Reducing Activation Recomputation》",
    "rajbhandari2020zero": "Rajbhandari 等（2020）《ZeRO》",
    "patterson2021carbon": "Patterson 等（2021）《Carbon Emissions and Large Neural Network Training》",
    "li2023thirsty": "Li 等（2023）《Making AI Less “Thirsty”》",
    "milakov2018online": "Milakov、Gimelshein（2018）《Online Normalizer Calculation for Softmax》",
    "liu2023ringattention": "Liu 等（2023）《Ring Attention》",
    "meta2024llama3_8b": "Meta，Llama 3 8B 官方 config.json",
    "meta2024llama3_70b": "Meta，Llama 3 70B 官方 config.json",
    "meta2024llama31_405b": "Meta，Llama 3.1 405B 官方 config.json",
    "mistral2023mistral7b": "Mistral AI，Mistral 7B v0.1 官方 config.json",
    "mistral2024mixtral": "Mistral AI，Mixtral 8x7B v0.1 官方 config.json",
    "qwen2025qwen3_30b_a3b": "Qwen 团队，Qwen3-30B-A3B 官方 config.json",
    "openai2025gptoss20b": "OpenAI，gpt-oss-20b 官方 config.json",
    "google2024gemma2": "Google DeepMind，Gemma 2 9B 官方 config.json",
    "deepseek2024v2lite": "DeepSeek-AI，DeepSeek-V2-Lite 官方 config.json",
    "qwen2024qwen2_7b": "Qwen 团队，Qwen2-7B-Instruct 官方 config.json",
    "deepseek2024v3": "DeepSeek-AI，DeepSeek-V3 官方 config.json",
    "meta2024llama31_modelcard": "Meta《Llama 3.1 模型卡》",
    "meta2023mtia": "Meta（2023）《MTIA v1：Meta 第一代 AI 推理加速器》",
    "meta2024mtia": "Meta（2024）《下一代 Meta 训练与推理加速器》",
    "firoozshahian2023mtia": "Firoozshahian 等（2023）《MTIA: First Generation Silicon》",
    "fina2009facilities": "FINA《设施规则 2009–2013》FR 3",
    "deepseek2024v3report": "DeepSeek-AI（2024）《DeepSeek-V3 Technical Report》",
    "deepseek2025profiledata": "DeepSeek-AI（2025）《Profiling Data in DeepSeek Infra》",
    "deepseek2024v3weights": "DeepSeek-AI《DeepSeek-V3 权重文件说明》（README_WEIGHTS.md）",
    "deepseek2024v2": "DeepSeek-AI（2024）《DeepSeek-V2》",
    "mistral2023mixtralblog": "Mistral AI《Mixtral of experts》公告（2023）",
    "austin2025scalingbook": "Austin 等（2025）《How to Scale Your Model》",
    "ba2016layernorm": "Ba 等（2016）《Layer Normalization》",
    "hendrycks2016gelu": "Hendrycks、Gimpel（2016）《Gaussian Error Linear Units》",
    "meta2024llama3_modelcard": "Meta《Llama 3 模型卡》",
    "chowdhery2022palm": "Chowdhery 等（2022）《PaLM》",
    "openai2020api": "OpenAI（2020-06-11）《OpenAI API》公告",
    "kaplan2020scaling": "Kaplan 等（2020）《Scaling Laws for Neural Language Models》",
    "hoffmann2022chinchilla": "Hoffmann 等（2022）《Training Compute-Optimal Large Language Models》",
    "ainslie2023gqa": "Ainslie 等（2023）《GQA》",
    "shazeer2019mqa": "Shazeer（2019）《One Write-Head is All You Need》",
    "shazeer2020glu": "Shazeer（2020）《GLU Variants Improve Transformer》",
    "chen2016checkpoint": "Chen 等（2016）《Training Deep Nets with Sublinear Memory Cost》",
    "llama3herd2024": "Llama 团队（2024）《The Llama 3 Herd of Models》",
    "pope2022inference": "Pope 等（2023）《Efficiently Scaling Transformer Inference》",
    "anthony2023math101": "Anthony 等（2023）《Transformer Math 101》",
    "kipply2022inference": "kipply（2022）《Transformer Inference Arithmetic》",
    "tazi2025playbook": "Tazi 等（2025）《The Ultra-Scale Playbook》",
    "pytorch-checkpoint-docs": "PyTorch 文档《torch.utils.checkpoint》",
    "megatron-lm-arguments": "NVIDIA Megatron-LM 源码 arguments.py（重计算参数）",
    "megatron-bridge-recompute": "NVIDIA Megatron Bridge 文档《Activation Recomputation》",
    "deepspeed-activation-checkpointing": "DeepSpeed 文档《Activation Checkpointing》",
    "jax-checkpoint-docs": "JAX 文档《Gradient checkpointing with jax.checkpoint》",
    "shoeybi2019megatron": "Shoeybi 等（2019）《Megatron-LM》",
    # Part VI, serving (issue 37; tmath.serve)
    "deepseek2025inferencesystem": "DeepSeek-AI（2025）《DeepSeek-V3/R1 推理系统概览》",
    # --- published runs (issue 36): recipes, DeepSeek-V3's techniques, the runs' figures ---
    "deepseek2024v3infra": "DeepSeek-AI（2024）《DeepSeek-V3 Technical Report》§3.2–3.3",
    "austin2025scalingbooktraining": "Austin 等（2025）《How to Scale Your Model》第 5 节",
    "deepseek2025dualpipe": "DeepSeek-AI（2025）《DualPipe》源码与 README",
    "qi2024zerobubble": "Qi 等（2024）《Zero Bubble (Almost) Pipeline Parallelism》",
    "megatron-core-pipeline-schedules": "NVIDIA《Megatron-LM 源码：pipeline_parallel/schedules.py》",
    # Part VI, the pages (book/serving/)
    "kwon2023vllm": "Kwon 等（2023）《PagedAttention》",
    "yu2022orca": "Yu 等（2022）《Orca》",
    "agrawal2024sarathi": "Agrawal 等（2024）《Sarathi-Serve》",
    "leviathan2023speculative": "Leviathan 等（2023）《Speculative Decoding》",
    "chen2023speculative": "Chen 等（2023）《Speculative Sampling》",
    "frantar2022gptq": "Frantar 等（2022）《GPTQ》",
    "dettmers2022llmint8": "Dettmers 等（2022）《LLM.int8()》",
    "zhong2024distserve": "Zhong 等（2024）《DistServe》",
    "patel2024splitwise": "Patel 等（2024）《Splitwise》",
}


register(
    "brown2020gpt3",
    "Language Models are Few-Shot Learners (GPT-3), Table 2.1",
    "https://arxiv.org/abs/2005.14165",
)
register(
    "llama3herd2024",
    "The Llama 3 Herd of Models (Llama Team, AI @ Meta, 2024)",
    "https://arxiv.org/abs/2407.21783",
    "Llama 3 405B pre-trained with 3.8e25 FLOPs on up to 16K H100 GPUs; Table 4: BF16 model "
    "FLOPs utilization 38-43% across the three pre-training configurations; 128K context "
    "for the Llama 3.1 models.",
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
    "dense / 624 sparse, 80 GB HBM2e, 2,039 GB/s, 400 W, NVLink 600 GB/s; A100 40GB SXM: "
    "the same tensor peak, 40 GB HBM2, 1,555 GB/s, 400 W, NVLink 600 GB/s)",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
)
register(
    "nvidia-h100-datasheet",
    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: BF16 tensor 1,979 TFLOPS "
    "with sparsity = 989 dense, FP8 3,958 sparse = 1,979 dense, 80 GB, 3.35 TB/s, "
    "up to 700 W, NVLink 900 GB/s, PCIe Gen5 128 GB/s)",
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    "The datasheet footnote: 'With sparsity'; dense figures are one-half. The PCIe figure "
    "is both directions of a x16 link together (64 GB/s each way: "
    "tmath.memory.PCIE_GEN5_X16_BYTES_PER_S).",
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
    "int8, 16 GB HBM2, 819 GB/s; bidirectional inter-chip interconnect (ICI) 400 GBps per "
    "chip over 4 ICI ports; 2D torus; 256 chips per pod; 8 chips and 2 x 100 Gbps NICs per "
    "host, data center network bandwidth 6.4 Tbps per pod)",
    "https://cloud.google.com/tpu/docs/v5e",
    "Google publishes no per-chip TDP for v5e. An older version of the page printed 'ICI "
    "1,600 Gbps' (200 GB/s, one direction); the current page prints 400 GBps bidirectional: "
    "the same links, 50 GB/s per port per direction.",
)
register(
    "google-tpu-v4",
    "Google Cloud TPU v4 documentation (per chip: 275 TFLOP/s bf16, 32 GiB HBM2, 1,200 GBps; "
    "4,096 chips per pod; bisection bandwidth per Pod 24 TB/s; 3D mesh, a 3D torus on slices "
    "whose sides are multiples of 4)",
    "https://cloud.google.com/tpu/docs/v4",
    "Google's v4 page prints no ICI or data-centre-network bandwidth per chip; tmath takes "
    "those from the scaling book (austin2025scalingbook: ICI 4.5e10 bytes/s per link one way, "
    "6 links per chip; DCN about 2.5e10 bytes/s per host of 4 chips). Its 'Measured "
    "min/mean/max power 90/170/192 W' is not a TDP.",
)
register(
    "google-tpu-v5p",
    "Google Cloud TPU v5p documentation (per chip: 459 TFLOP/s bf16, 95 GiB HBM2e, 2,765 GBps; "
    "bidirectional ICI 1,200 GBps per chip; data center network (DCN) 50 Gbps per chip; 3D "
    "torus; 8,960 chips per pod, the largest job a 96-cube slice of 6,144 chips)",
    "https://cloud.google.com/tpu/docs/v5p",
    "ICI: 1,200 GBps over 6 ports (3D torus) and 2 directions = 100 GB/s per port per "
    "direction. An older version of the page printed 'Interchip Interconnect BW 4800 Gbps' "
    "(600 GB/s, one direction): the same links. DCN 50 Gbps = 6.25 GB/s per chip.",
)
register(
    "google-tpu-v6e",
    "Google Cloud TPU v6e (Trillium) documentation (per chip: 918 TFLOP/s bf16, 32 GB HBM, "
    "1,638 GBps, bidirectional ICI 800 GBps over 4 ports; 8 chips per host, 256 chips per "
    "pod, 2D torus; 4 x 200 Gbps NICs per host, data center network 25.6 Tbps per pod)",
    "https://cloud.google.com/tpu/docs/v6e",
    "ICI: 800 GBps / 4 ports / 2 directions = 100 GB/s per port per direction. DCN: 25.6 Tbps "
    "per pod / 256 chips = 100 Gbps = 12.5 GB/s per chip (4 x 200 Gbps per host of 8 chips).",
)
register(
    "nvidia-dgx-b200-datasheet",
    "NVIDIA DGX B200 datasheet (8 x B200: 72 PFLOPS FP8 training and 144 PFLOPS FP4 "
    "inference, 1,440 GB total GPU memory, 64 TB/s HBM3e bandwidth, 14.4 TB/s aggregate "
    "NVLink bandwidth; 8 x single-port ConnectX-7, up to 400 Gb/s InfiniBand)",
    "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet",
    "Per GPU: 180 GB, 8 TB/s, 9 PFLOPS FP8 with sparsity = 4.5 PFLOPS dense, and the bf16 "
    "dense peak half of that, 2.25 PFLOPS (NVIDIA's HGX B200 table: FP16/BF16 36 PFLOPS with "
    "sparsity for 8 GPUs). The datasheet gives the system's power, not a per-GPU TDP.",
)
register(
    "nvidia-dgx-a100-guide",
    "NVIDIA DGX A100 User Guide, Introduction: hardware overview (8 x A100 SXM; 6 NVSwitch "
    "chips, 600 GB/s NVLink per GPU; 8 x single-port ConnectX-6 VPI, 200 Gb/s HDR "
    "InfiniBand, for the compute fabric)",
    "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html",
    "One 200 Gb/s (25 GB/s each way) HDR port per GPU; NVLink 3: 12 links of 25 GB/s each way.",
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
    "Figure 1 example: 7.5B params, N_d = 64: 120GB, 31.4GB, 16.6GB, 1.9GB as printed "
    "(1.875 GB unrounded).",
)
register(
    "patterson2021carbon",
    "Carbon Emissions and Large Neural Network Training (Patterson et al., 2021), Table 4",
    "https://arxiv.org/abs/2104.10350",
    "GPT-3 column of Table 4 (verified against the paper's text): Microsoft "
    "datacenter, gross and net 0.429 kgCO2e/kWh, PUE 1.10, V100 (TDP 300 W), "
    "measured system average power 330 W per accelerator, measured performance "
    "24.6 TFLOP/s (footnote 12: V100 peak 125), 10,000 chips, 14.8 days, 3.14e23 "
    "FLOPs, 1,287 MWh, 552.1 tCO2e gross and net. Appendix A: OpenAI supplied the "
    "PUE, the 330 W and the 24.6 TFLOP/s; 14.8 days = 3.14e23 / (10,000 x 24.6e12).",
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

# --- sources the bibliography cites (book/references.bib): one entry per BibTeX key ----
register(
    "openai2020api",
    "OpenAI API (Brockman, Murati, Welinder; OpenAI blog, 11 June 2020)",
    "https://openai.com/index/openai-api/",
    "'We're releasing an API for accessing new AI models developed by OpenAI ... Today the "
    "API runs models with weights from the GPT-3 family'; launched as a private beta. The "
    "release date 2020-06-11 of seed 000 is this announcement; the paper's arXiv v1 "
    "(2005.14165) is dated 2020-05-28.",
)
register(
    "kaplan2020scaling",
    "Scaling Laws for Neural Language Models (Kaplan et al., 2020)",
    "https://arxiv.org/abs/2001.08361",
    "Training compute C ~ 6NBS (Section 2.1): 6 FLOPs per parameter per token.",
)
register(
    "hoffmann2022chinchilla",
    "Training Compute-Optimal Large Language Models (Hoffmann et al., 2022)",
    "https://arxiv.org/abs/2203.15556",
    "Chinchilla; training FLOPs approximated as 6ND, and an exact count in Appendix F.",
)
register(
    "ainslie2023gqa",
    "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints "
    "(Ainslie et al., EMNLP 2023)",
    "https://arxiv.org/abs/2305.13245",
    "Grouped-query attention: G groups of query heads share one key/value head.",
)
register(
    "shazeer2019mqa",
    "Fast Transformer Decoding: One Write-Head is All You Need (Shazeer, 2019)",
    "https://arxiv.org/abs/1911.02150",
    "Multi-query attention: all query heads share one key/value head.",
)
register(
    "shazeer2020glu",
    "GLU Variants Improve Transformer (Shazeer, 2020)",
    "https://arxiv.org/abs/2002.05202",
    "Gated MLPs (SwiGLU, GEGLU): three weight matrices instead of two.",
)
register(
    "chen2016checkpoint",
    "Training Deep Nets with Sublinear Memory Cost (Chen, Xu, Zhang, Guestrin, 2016)",
    "https://arxiv.org/abs/1604.06174",
    "Gradient checkpointing: store segment inputs, recompute the rest in the backward pass.",
)
register(
    "pope2022inference",
    "Efficiently Scaling Transformer Inference (Pope et al., MLSys 2023)",
    "https://arxiv.org/abs/2211.05102",
    "Decoding reads all weights (and the KV cache) per step: memory-bandwidth bound at small "
    "batch; partitioning layouts for inference.",
)
register(
    "anthony2023math101",
    "Transformer Math 101 (Anthony, Biderman, Schoelkopf; EleutherAI blog, 2023)",
    "https://blog.eleuther.ai/transformer-math/",
)
register(
    "kipply2022inference",
    "Transformer Inference Arithmetic (kipply, 2022)",
    "https://kipp.ly/transformer-inference-arithmetic/",
)
register(
    "tazi2025playbook",
    "The Ultra-Scale Playbook: Training LLMs on GPU Clusters (Tazi et al., Hugging Face, 2025)",
    "https://huggingface.co/spaces/nanotron/ultrascale-playbook",
)
register(
    "pytorch-checkpoint-docs",
    "PyTorch documentation: torch.utils.checkpoint (checkpoint, checkpoint_sequential)",
    "https://pytorch.org/docs/stable/checkpoint.html",
)
register(
    "megatron-lm-arguments",
    "Megatron-LM: command-line arguments for activation recomputation "
    "(--recompute-granularity, --recompute-method, --recompute-num-layers)",
    "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/arguments.py",
)
register(
    "megatron-bridge-recompute",
    "Activation Recomputation (NVIDIA Megatron Bridge documentation, version 0.7.0)",
    "https://docs.nvidia.com/nemo/megatron-bridge/0.7.0/training/activation-recomputation.html",
)
register(
    "deepspeed-activation-checkpointing",
    "Activation Checkpointing (DeepSpeed documentation; configuration key "
    "activation_checkpointing)",
    "https://deepspeed.readthedocs.io/en/latest/activation-checkpointing.html",
)
register(
    "jax-checkpoint-docs",
    "Gradient checkpointing with jax.checkpoint (jax.remat), JAX documentation",
    "https://docs.jax.dev/en/latest/gradient-checkpointing.html",
)
register(
    "shoeybi2019megatron",
    "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model Parallelism "
    "(Shoeybi et al., 2019)",
    "https://arxiv.org/abs/1909.08053",
    "Tensor parallelism of the MLP and attention blocks: two all-reduces per layer in the "
    "forward pass and two in the backward.",
)

# --- ledger presets (config.json files of the official checkpoints) ----------
register(
    "meta2024llama3_8b",
    "Meta Llama 3 8B: config.json of the official checkpoint",
    "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
    "hidden 4096, FFN 14336, 32 layers, 32 heads, 8 KV heads, vocab 128256, context 8192",
)
register(
    "meta2024llama3_70b",
    "Meta Llama 3 70B: config.json of the official checkpoint",
    "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
    "hidden 8192, FFN 28672, 80 layers, 64 heads, 8 KV heads, vocab 128256, context 8192",
)
register(
    "meta2024llama31_405b",
    "Meta Llama 3.1 405B: config.json of the official checkpoint",
    "https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json",
    "hidden 16384, FFN 53248, 126 layers, 128 heads, 8 KV heads, vocab 128256, context 131072",
)
register(
    "mistral2023mistral7b",
    "Mistral 7B v0.1: config.json of the official checkpoint",
    "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
    "hidden 4096, FFN 14336, 32 layers, 32 heads, 8 KV heads, vocab 32000, context 32768",
)
register(
    "mistral2024mixtral",
    "Mixtral 8x7B v0.1: config.json of the official checkpoint (Jiang et al. 2024, "
    "Mixtral of Experts, arXiv:2401.04088)",
    "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
    "hidden 4096, expert FFN 14336, 32 layers, 32 heads, 8 KV heads, vocab 32000, "
    "8 experts, 2 per token, context 32768",
)
register(
    "qwen2025qwen3_30b_a3b",
    "Qwen3-30B-A3B: config.json of the official checkpoint (Qwen3 Technical Report, "
    "arXiv:2505.09388)",
    "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
    "hidden 2048, 48 layers, 32 heads of 128, 4 KV heads, 128 experts of 768 (top 8), "
    "q/k RMSNorm per head, vocab 151936, context 40960",
)
register(
    "openai2025gptoss20b",
    "gpt-oss-20b: config.json of the official checkpoint (gpt-oss-120b & gpt-oss-20b model card, "
    "arXiv:2508.10925)",
    "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
    "hidden 2880, 24 layers alternating 128-token sliding-window and full attention, 64 heads "
    "of 64, 8 KV heads, attention sinks, 32 experts of 2880 (top 4) with biases, vocab 201088",
)
register(
    "google2024gemma2",
    "Gemma 2 9B: config.json of the official checkpoint (Gemma 2: Improving Open Language "
    "Models at a Practical Size, arXiv:2408.00118)",
    "https://huggingface.co/google/gemma-2-9b/blob/main/config.json",
    "hidden 3584, FFN 14336, 42 layers alternating 4096-token sliding-window and global "
    "attention, 16 heads of 256, 8 KV heads, vocab 256000, context 8192",
)
register(
    "google2024gemma2_27b",
    "Gemma 2 27B: config.json of the official checkpoint (Gemma 2: Improving Open Language "
    "Models at a Practical Size, arXiv:2408.00118, Tables 1 and 2)",
    "https://huggingface.co/google/gemma-2-27b/blob/main/config.json",
    "hidden 4608, FFN 36864 (the report's Table 1 lists 73728, gate and up together), 46 layers "
    "alternating 4096-token sliding-window and global attention, 32 heads of 128, 16 KV heads, "
    "query_pre_attn_scalar 144, vocab 256000, tied embeddings, context 8192; Table 2: "
    "1,179,648,000 embedding + 26,047,480,320 non-embedding parameters",
)
register(
    "deepseek2024v2lite",
    "DeepSeek-V2-Lite: config.json of the official checkpoint (DeepSeek-V2 report, "
    "arXiv:2405.04434)",
    "https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json",
    "hidden 2048, 27 layers (first dense), 16 heads, MLA without q-LoRA (kv_lora_rank 512, "
    "rope 64, nope 128, v 128), 64 routed experts of 1408 (top 6) + 2 shared, vocab 102400",
)
register(
    "qwen2024qwen2_7b",
    "Qwen2-7B-Instruct: config.json of the official checkpoint (Qwen2 Technical Report, "
    "arXiv:2407.10671)",
    "https://huggingface.co/Qwen/Qwen2-7B-Instruct/blob/main/config.json",
    "hidden 3584, FFN 18944, 28 layers, 28 heads, 4 KV heads, vocab 152064, context 32768",
)
register(
    "deepseek2024v3",
    "DeepSeek-V3: config.json of the official checkpoint and the DeepSeek-V3 Technical "
    "Report (arXiv:2412.19437)",
    "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
    "hidden 7168, dense FFN 18432, 61 layers (first 3 dense), 128 heads, MLA q_lora_rank "
    "1536, kv_lora_rank 512, rope 64, nope 128, v 128, 256 routed + 1 shared experts of "
    "width 2048, 8 per token, vocab 129280, 1 MTP module; report: 671B total, 37B active",
)

# --- energy chapter (book/energy/energy) --------------------------------------
register(
    "meta2024llama31_modelcard",
    "Meta Llama 3.1 model card (llama-models repository, models/llama3_1/MODEL_CARD.md), "
    "Hardware and Software: Training Energy Use and Greenhouse Gas Emissions",
    "https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/MODEL_CARD.md",
    "H100-80GB, TDP 700 W. Training time (GPU hours) / location-based tCO2eq: "
    "8B 1.46M / 420; 70B 7.0M / 2,040; 405B 30.84M / 8,930; total 39.3M / 11,390; "
    "market-based 0. Pretraining data ~15T tokens.",
)
register(
    "meta2023mtia",
    "MTIA v1: Meta's first-generation AI inference accelerator (Meta AI blog, 18 May 2023)",
    "https://ai.meta.com/blog/meta-training-inference-accelerator-AI-MTIA/",
    "'The accelerator is fabricated in TSMC 7nm process and runs at 800 MHz, providing 102.4 "
    "TOPS at INT8 precision and 51.2 TFLOPS at FP16 precision. It has a thermal design power "
    "(TDP) of 25 W.' An inference accelerator for recommendation models (DLRMs), designed in "
    "2020. Read through verbatim copies of the post (first published at "
    "ai.facebook.com/blog/meta-training-inference-accelerator-AI-MTIA/).",
)
register(
    "meta2024mtia",
    "Our next-generation Meta Training and Inference Accelerator (Meta AI blog, 10 April 2024)",
    "https://ai.meta.com/blog/next-generation-meta-training-inference-accelerator-AI-MTIA/",
    "Its table compares MTIA v1 with the next generation: v1 GEMM TOPS '102.4 TFLOPS/s (INT8), "
    "51.2 TFLOPS/s (FP16/BF16)', TDP 25 W (next generation: 354 / 177 TFLOPS/s dense, twice "
    "that '(sparsity)', 90 W). v1 has no sparse figure: 51.2 is its dense 16-bit matmul peak.",
)
register(
    "firoozshahian2023mtia",
    "MTIA: First Generation Silicon Targeting Meta's Recommendation Systems (Firoozshahian et "
    "al., ISCA 2023)",
    "https://doi.org/10.1145/3579371.3589348",
    "Abstract: 'We averaged 0.9x perf/W across various DLRMs, and benchmarks show operators such "
    "as GEMMs reaching 2x perf/W' (against a GPU), with the software stack of the time.",
)
register(
    "fina2009facilities",
    "FINA Facilities Rules 2009-2013, FR 3: swimming pools for Olympic Games and "
    "World Championships",
    "https://www.fina.org/ (FINA Handbook, Facilities Rules FR 3.1-3.7)",
    "Length 50.0 m, width 25.0 m, depth 2 m minimum (3 m recommended): at least "
    "2,500 m3 of water.",
)
register(
    "deepseek2024v3report",
    "DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv:2412.19437), Table 1: training "
    "costs of DeepSeek-V3",
    "https://arxiv.org/abs/2412.19437",
    "H800 GPU hours: pre-training 2,664K, context extension 119K, post-training 5K, "
    "total 2,788K ($5.576M at $2 per GPU hour); 180K H800 GPU hours per trillion "
    "tokens (3.7 days on 2,048 H800 GPUs); 14.8T pre-training tokens.",
)

register(
    "deepseek2025profiledata",
    "DeepSeek-AI, Profiling Data in DeepSeek Infra (README of deepseek-ai/profile-data), "
    "Training: 'a pair of individual forward and backward chunks in DualPipe. Each chunk "
    "contains 4 MoE (Mixture of Experts) layers. The parallel configuration aligns with "
    "DeepSeek-V3 pretraining settings: EP64, TP1 with 4K sequence length.'",
    "https://github.com/deepseek-ai/profile-data",
    "The only published figure for the layers a DeepSeek-V3 pipeline stage holds: 4 MoE "
    "layers a chunk. How the 61 layers (3 dense) and the MTP module fall on the first and "
    "last of the 16 stages is not published.",
)

# --- MoE / memory / cheat-sheet chapters (book/ledger/moe-deepseek, memory, cheatsheet) ---
register(
    "deepseek2024v3weights",
    "DeepSeek-V3 Weight File Documentation (README_WEIGHTS.md of the deepseek-ai/DeepSeek-V3 "
    "repository and Hugging Face checkpoint)",
    "https://github.com/deepseek-ai/DeepSeek-V3/blob/main/README_WEIGHTS.md",
    "Main Model Weights, Parameter Count (the text at commits b4e06d8 and 0b39205 of the "
    "repository): 'Total parameters: 671B'; 'Activation parameters: 36.7B (including 0.9B for "
    "Embedding and 0.9B for the output Head).' MTP Modules: '11.5B unique parameters, excluding "
    "the shared 0.9B Embedding and 0.9B output Head'. (A copy of an earlier revision, vendored "
    "in tenstorrent/tt-metal, read '36.6B (including 0.9B for the output Head)'.) The Hugging "
    "Face model card: total size 685B = 671B main model + 14B MTP module.",
)
register(
    "deepseek2024v2",
    "DeepSeek-AI, DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts "
    "Language Model (arXiv:2405.04434), Section 2.1 and Table 1",
    "https://arxiv.org/abs/2405.04434",
    "Table 1: KV cache per token MHA 2 n_h d_h l, GQA 2 n_g d_h l, MQA 2 d_h l, MLA "
    "(d_c + d_h^R) l ~ 9/2 d_h l, 'equal to GQA with only 2.25 groups'.",
)
register(
    "mistral2023mixtralblog",
    "Mistral AI, 'Mixtral of experts' (announcement, 11 December 2023)",
    "https://mistral.ai/news/mixtral-of-experts/",
    "'Mixtral has 46.7B total parameters but only uses 12.9B parameters per token.' "
    "The paper (arXiv:2401.04088) rounds these to 47B and 13B.",
)
register(
    "austin2025scalingbook",
    "Austin et al., How to Scale Your Model (the JAX scaling book), 'All about "
    "Transformer math' and 'Sharded matrices' chapters",
    "https://jax-ml.github.io/scaling-book/",
    "Ring cost model with V bytes and link bandwidth W: all-gather V/W, all-reduce 2V/W, "
    "all-to-all on a bidirectional ring about V/(4W); the seed document summarises this chapter.",
)

# --- Part I (GPT-3 one token at a time) ------------------------------------------
register(
    "ba2016layernorm",
    "Layer Normalization (Ba, Kiros, Hinton, 2016)",
    "https://arxiv.org/abs/1607.06450",
    "LayerNorm: normalise over the hidden units of one example, then a learned gain and bias.",
)
register(
    "hendrycks2016gelu",
    "Gaussian Error Linear Units (GELUs) (Hendrycks, Gimpel, 2016)",
    "https://arxiv.org/abs/1606.08415",
    "GELU(x) = x Phi(x); tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).",
)

# --- Part II-a: counting FLOPs (book/flops/) ----------------------------------------
register(
    "meta2024llama3_modelcard",
    "Meta Llama 3 model card (meta-llama/llama3 repository, MODEL_CARD.md), Hardware and "
    "Software: Carbon Footprint",
    "https://github.com/meta-llama/llama3/blob/main/MODEL_CARD.md",
    "Pretraining on H100-80GB (TDP 700 W): Llama 3 8B 1.3M GPU hours, Llama 3 70B 6.4M GPU "
    "hours, total 7.7M; 'pretrained on over 15 trillion tokens' (token count 15T+); "
    "context length 8k.",
)
register(
    "chowdhery2022palm",
    "PaLM: Scaling Language Modeling with Pathways (Chowdhery et al., 2022), Appendix B: "
    "Compute Usage and Model FLOPs Utilization",
    "https://arxiv.org/abs/2204.02311",
    "MFU = observed tokens/s over the theoretical peak tokens/s at peak FLOP/s; a dense model "
    "needs 6N matmul FLOPs per token, and 'the matmuls in dense self-attention add 6LH(2QT) "
    "FLOPs per token' (L layers, H heads, Q head dimension, T sequence length): 6N + 12LHQT. "
    "Rematerialization is not counted in MFU (it is in hardware FLOPs utilization).",
)

# --- Part V: links between accelerators and parallel training --------------------------------
register(
    "nvidia-dgx-b200-guide",
    "NVIDIA DGX B200 User Guide, Introduction to NVIDIA DGX B200 Systems: component "
    "descriptions (8 x B200; 2 x 5th-generation NVLink switches, 14.4 TB/s aggregate "
    "bandwidth; 8 x ConnectX-7 single-port cards, InfiniBand up to 400 Gb/s)",
    "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
    "14.4 TB/s over 8 GPUs = 1.8 TB/s per GPU (both directions), 900 GB/s each way: "
    "NVLink 5, 18 links of 100 GB/s.",
)
register(
    "nvidia-dgx-basepod",
    "NVIDIA DGX BasePOD Reference Architecture, Core Components: DGX H100/H200 systems "
    "(eight Hopper GPUs, four NVSwitch chips; four OSFP ports serving eight single-port "
    "ConnectX-7 VPI, up to 400 Gb/s InfiniBand/Ethernet)",
    "https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-"
    "enterprise-ai/latest/core-components.html",
    "One 400 Gb/s (50 GB/s each way) InfiniBand NDR port per GPU, eight per node, for the "
    "compute fabric.",
)
register(
    "nccl-tuning",
    "NCCL v2.27.7-1 source, src/graph/tuning.cc: the cost model NCCL uses to choose algorithms "
    "and protocols (baseLat, hwLat, llMaxBws, ncclTopoTuneModel)",
    "https://github.com/NVIDIA/nccl/blob/v2.27.7-1/src/graph/tuning.cc",
    "Ring algorithm, protocols LL / LL128 / Simple: per-step latency (hwLat) NVLink "
    "0.6 / 1.9 / 3.4 us, PCI 1.0 / 2.5 / 5.7 us, network 2.7 / 4.0 / 14.0 us (Tree's network "
    "5.0 / 8.5 / 14 us, used 'with ppn=1'); base latency per collective (baseLat) "
    "6.6 / 14.0 / 8.4 us.  Bus bandwidth: LL min(llMaxBw, busBw * .5), llMaxBw 141.0 GB/s on "
    "one Hopper node (2 x 141.0 on Blackwell), 39.0 / 20.4 GB/s on 2 / more Intel nodes; "
    "LL128 busBw * 0.92 (capped per channel at 36.7 GB/s on Hopper); Simple all.  Ring "
    "all-reduce takes 2(n-1) steps, all-gather and reduce-scatter n-1; across nodes "
    "2(nNodes-1) (resp. nNodes-1) of them are charged the network latency, the rest "
    "max(intra-node latency, net overhead 1 us, x3 for Simple).  Model constants, not "
    "measurements.",
)
register(
    "nccl-topo",
    "NCCL v2.27.7-1 source, src/graph/topo.h and topo.cc: the topology model's link "
    "bandwidths",
    "https://github.com/NVIDIA/nccl/blob/v2.27.7-1/src/graph/topo.h",
    "SM90_NVLINK_BW 20.6 and SM100_NVLINK_BW 40.1 GB/s per NVLink (H100: 18 links, "
    "370.8 GB/s; B200: 721.8 GB/s); topo.cc's kvDictPciGen counts '32.0 GT/s PCIe' as 240 x "
    "100 Mb/s a lane, width x speed / 80 = 48 GB/s for x16; a NIC's bandwidth is its speed "
    "in Mb/s / 8000 (400 Gb/s: 50 GB/s).",
)
register(
    "nccl-search",
    "NCCL v2.27.7-1 source, src/graph/search.cc: the speeds the graph search tries for a "
    "channel",
    "https://github.com/NVIDIA/nccl/blob/v2.27.7-1/src/graph/search.cc",
    "sm90SpeedArrayInter = { 48.0, 45.0, 42.0, ... }: on Hopper no ring channel through a "
    "network card is faster than 48 GB/s; one 50 GB/s NDR port carries at most 48 GB/s of "
    "channels.",
)
register(
    "nccl-tests-issue-212",
    "NVIDIA/nccl-tests issue 212, \"H100 all reduce performance is poor\" (comment by "
    "NVIDIA's sjeaugey, 2024-05-06)",
    "https://github.com/NVIDIA/nccl-tests/issues/212",
    "'450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an effective "
    "NVLink bandwidth of 370GB/s ... Now allreduce uses NVLink SHARP by default ... On 8 GPUs, "
    "you should reach a peak busBw of ~480GB/s (algbw ~275GB/s).'",
)
register(
    "vllm-custom-allreduce",
    "vLLM source, csrc/custom_all_reduce.cuh: the custom all-reduce kernels "
    "(cross_device_reduce_1stage, cross_device_reduce_2stage)",
    "https://github.com/vllm-project/vllm/blob/036bb685581dbedcd6cf7fc845fe87268c7d1191/"
    "csrc/custom_all_reduce.cuh",
    "One-stage kernel: a start flag written to every other rank ('Latency = 1 p2p write'), then "
    "each rank reads every rank's registered buffer and sums it locally; no ring of 2(n-1) "
    "steps.  The two-stage kernel is a reduce-scatter then an all-gather over the same "
    "peer-to-peer reads.",
)
register(
    "nccl-issue-812",
    "NVIDIA/nccl issue 812, \"Why Tree has better bandwidth performance than Ring on only 2 "
    "DGX-A100?\" (comment by NVIDIA's AddyLaddy, 2023-03-31)",
    "https://github.com/NVIDIA/nccl/issues/812",
    "\"On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s "
    "AllReduce BusBW\": a multi-node ring spreads a node's traffic over all its NICs (8 x 25 GB/s "
    "= 200 GB/s, measured 96 % of it).",
)
register(
    "narayanan2021megatron",
    "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM "
    "(Narayanan et al., SC 2021)",
    "https://arxiv.org/abs/2104.04473",
    "PTD-P: tensor, pipeline and data parallelism; the 1F1B schedule and its bubble "
    "(p-1)/m of the ideal time, (p-1)/(m+p-1) of the whole step; scatter/gather of "
    "pipeline messages over the tensor-parallel group.",
)
register(
    "huang2019gpipe",
    "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism "
    "(Huang et al., NeurIPS 2019)",
    "https://arxiv.org/abs/1811.06965",
    "M micro-batches over K pipeline stages; bubble O((K-1)/(M+K-1)).",
)

register(
    "nvidia-nim-llm-benchmarking",
    "NVIDIA NIM LLMs Benchmarking, Performance: Llama-3.3-70b-instruct results (NIM 1.8.0, "
    "2 x H100 80G, fp8 TP2), measured with AIPerf",
    "https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance",
    "5000 Input Tokens / 500 Output Tokens, concurrency 1: TTFT 406.77 ms, ITL 18.58 ms, "
    "throughput 51.67 tokens/s; concurrency 5: TTFT 546.7 ms, ITL 21.83 ms; concurrency 25: "
    "TTFT 688.69 ms, ITL 38.75 ms.  500 Input / 2000 Output, concurrency 1: TTFT 47.77 ms, "
    "ITL 18.91 ms.",
)

register(
    "pytorch-pipelining-stage",
    "PyTorch source, torch/distributed/pipelining/stage.py: _PipelineStageBase."
    "backward_maybe_with_nosync",
    "https://github.com/pytorch/pytorch/blob/main/torch/distributed/pipelining/stage.py",
    "With FSDP, every micro-batch's backward calls set_requires_gradient_sync(last_backward): "
    "'we need to accumulate gradients on previous steps and reduce them on the last step'.",
)
register(
    "zhu2024ringflashattn",
    "ring-flash-attention (Zilin Zhu), ring_flash_attn/ring_flash_attn.py: "
    "ring_flash_attn_backward (commit be3b01f, 2024-12-19)",
    "https://github.com/zhuzilin/ring-flash-attention/blob/"
    "be3b01f5706f45245f9b6d78d6df231954b2ee64/ring_flash_attn/ring_flash_attn.py",
    "The backward passes k, v to the next rank world_size - 1 times (send_recv_kv only while "
    "step + 1 != world_size) and dk, dv every step, world_size times (d_kv_comm.send_recv_kv "
    "after each step, then a final wait): the accumulated dK, dV end on their owner.  They are "
    "accumulated in fp32 (block_dk_buffer.to(torch.float32)) and sent as fp32, cast to the "
    "input dtype only at the end.",
)
# --- Part V (多卡的账): collectives, data and tensor parallelism ------------------------
register("patarasuk2009bandwidth", "Bandwidth optimal all-reduce algorithms for clusters of "
         "workstations (Patarasuk and Yuan, J. Parallel Distrib. Comput. 69(2), 2009)",
         "https://doi.org/10.1016/j.jpdc.2008.09.002",
         "Lower bound: every all-reduce algorithm sends at least 2(N-1)/N of the array per "
         "process; the ring algorithm meets it.")
register("thakur2005mpich", "Optimization of Collective Communication Operations in MPICH "
         "(Thakur, Rabenseifner, Gropp, IJHPCA 19(1), 2005)",
         "https://doi.org/10.1177/1094342005051521",
         "Cost model: a message of n bytes takes alpha + n*beta (latency plus bytes over "
         "bandwidth); ring, recursive-doubling and Rabenseifner algorithms compared in it.")
register("li2020pytorchddp", "PyTorch Distributed: Experiences on Accelerating Data Parallel "
         "Training (Li et al., VLDB 2020)", "https://arxiv.org/abs/2006.15704",
         "DistributedDataParallel: gradient bucketing, all-reduce launched per bucket during "
         "the backward (overlap), no_sync for gradient accumulation.")
register("microsoft2020supercomputer", "Microsoft announces new supercomputer, lays out vision "
         "for future AI work (Microsoft, 19 May 2020)",
         "https://blogs.microsoft.com/ai/openai-azure-supercomputer/",
         "The supercomputer built for OpenAI: more than 285,000 CPU cores, 10,000 GPUs and "
         "400 gigabits per second of network connectivity for each GPU server.  The GPUs per "
         "server are not given.")
register("megatron-core-tp-layers", "Megatron-LM source, megatron/core/tensor_parallel/"
         "layers.py: LinearWithGradAccumulationAndAsyncCommunication",
         "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/tensor_parallel/layers.py",
         "With sequence_parallel the forward all-gathers the input shard and saves only the "
         "shard; the backward all-gathers it again for the weight gradient and reduce-"
         "scatters the input gradient.")
register("pytorch-tp-docs", "Tensor Parallelism - torch.distributed.tensor.parallel "
         "(PyTorch documentation)",
         "https://docs.pytorch.org/docs/stable/distributed.tensor.parallel.html")
register("pytorch-fsdp2-docs", "torch.distributed.fsdp.fully_shard (PyTorch documentation)",
         "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
         "FSDPModule.set_requires_gradient_sync: 'This can be used to implement gradient "
         "accumulation *without communication*' ('the equivalence of `no_sync` in FSDP1'). "
         "FSDPModule.set_reshard_after_backward: 'This can be used during gradient accumulation "
         "to trade off higher memory for reduced communication since the unsharded parameters "
         "do not need to be re-all-gathered before the next forward.' (Docstrings of torch "
         "2.13, which the page renders.)")
register("deepspeed-engine-no-sync", "DeepSpeed source, deepspeed/runtime/engine.py: "
         "DeepSpeedEngine.no_sync",
         "https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/engine.py",
         "assert not self.zero_optimization_partition_gradients(): 'no_sync context manager is "
         "incompatible with gradient partitioning logic of ZeRO stage' 2 or 3: with gradients "
         "partitioned, every micro-batch's gradients are reduced into the rank's partition.")
register("deepspeed-pr4713", "DeepSpeed pull request 4713, 'BF16_Optimizer: add support for "
         "bf16 grad acc'", "https://github.com/microsoft/DeepSpeed/pull/4713",
         "'the default accumulation data type is fp32'; \"data_types\": {\"grad_accum_dtype\": "
         "\"bf16\"} accumulates in bf16 instead.")
register(
    "pytorch-gloo-reduce-scatter",
    "PyTorch source, torch/csrc/distributed/c10d/ProcessGroupGloo.cpp: "
    "ProcessGroupGloo::reduce_scatter_tensor_coalesced (commit c194358a)",
    "https://github.com/pytorch/pytorch/blob/c194358a8ee425df52e5d940e34ba878d82d433c/"
    "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp",
    "_reduce_scatter_base calls reduce_scatter_tensor_coalesced, which does "
    "'buffers.push_back(inputTensors[i].clone());', then 'works.push_back(allreduce(inp));' "
    "on each buffer, and on wait 'outputTensors[i].copy_(buffers[i].chunk(worldSize)[rank]);': "
    "an all-reduce of a copy of the whole input, one chunk kept.",
)
register(
    "linux-man-proc-pid-io",
    "Linux man-pages 6.16, proc_pid_io(5): /proc/pid/io - I/O statistics",
    "https://man7.org/linux/man-pages/man5/proc_pid_io.5.html",
    "'wchar: characters written. The number of bytes returned by successful write(2) and "
    "similar system calls.'",
)
register("nccl-tests-performance", "NVIDIA nccl-tests, doc/PERFORMANCE.md: Performance "
         "reported by NCCL tests", "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md",
         "algbw = S/t; bus bandwidth = algbw x 2(n-1)/n for AllReduce, x (n-1)/n for "
         "ReduceScatter, AllGather and AlltoAll, x 1 for Broadcast and Reduce: 'Using this bus "
         "bandwidth, we can compare it with the hardware peak bandwidth, independently of the "
         "number of ranks used.'")
register("nvidia-gb200-nvl72", "NVIDIA GB200 NVL72 (product page)",
         "https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
         "72 Blackwell GPUs and 36 Grace CPUs in one rack, one 72-GPU NVLink domain.")
register("pytorch-tp-tutorial", "Large Scale Transformer model training with Tensor Parallel "
         "(TP) (PyTorch tutorial)",
         "https://docs.pytorch.org/tutorials/intermediate/TP_tutorial.html",
         "Plain plan: one ColwiseParallel per wq, wk, wv, w1, w3; the sequence-parallel plan "
         "adds PrepareModuleInput on attention and feed_forward.")
register("torchtitan-parallelize-llama", "torchtitan source, torchtitan/models/llama3/infra/"
         "parallelize.py: apply_tp",
         "https://github.com/pytorch/torchtitan/blob/main/torchtitan/models/llama3/infra/parallelize.py",
         "wq, wk, wv and w1, w3 stay separate ColwiseParallel modules; attention and "
         "feed_forward get PrepareModuleInput (Shard(1) to Replicate()).")
register("megatron-lm-tp-comm-overlap", "Megatron-LM source, megatron/training/arguments.py: "
         "--tp-comm-overlap",
         "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/arguments.py",
         "'Enables the overlap of Tensor parallel communication and GEMM kernels'; asserts "
         "that sequence parallelism is enabled.")
register("wang2023overlap", "Wang et al., Overlap Communication with Dependent Computation "
         "via Decomposition in Large Deep Learning Models (ASPLOS 2023)",
         "https://doi.org/10.1145/3567955.3567959")

# --- Part VI, serving (issue 37; tmath.serve.DEEPSEEK_V3_SERVING) -----------------------------
register(
    "deepseek2025inferencesystem",
    "DeepSeek-AI, Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview "
    "(open-infra-index, 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_"
    "system_overview.md, 1 March 2025)",
    "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
    "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md",
    "'Prefilling Phase [Routed Expert EP32, MLA/Shared Expert DP32]: Each deployment unit spans "
    "4 nodes with 32 redundant routed experts, where each GPU handles 9 routed experts and 1 "
    "shared expert.' 'Decoding Phase [Routed Expert EP144, MLA/Shared Expert DP144]: Each "
    "deployment unit spans 18 nodes with 32 redundant routed experts, where each GPU manages 2 "
    "routed experts and 1 shared expert.' 'All DeepSeek-V3/R1 inference services are served on "
    "H800 GPUs with precision consistent with training.' Over 24 hours (UTC+8 02/27/2025 12:00 "
    "PM to 02/28/2025 12:00 PM): peak 278 nodes, average 226.75 nodes (8 H800 each); 'Assuming "
    "the leasing cost of one H800 GPU is $2 per hour, the total daily cost amounts to "
    "$87,072.' 'Total input tokens: 608B, of which 342B tokens (56.3%) hit the on-disk KV "
    "cache.' 'Total output tokens: 168B. The average output speed was 20-22 tokens per second, "
    "and the average kvcache length per output token was 4,989 tokens.' 'Each H800 node "
    "delivers an average throughput of ~73.7k tokens/s input (including cache hits) during "
    "prefilling or ~14.8k tokens/s output during decoding.' Theoretical revenue at R1 prices "
    "($0.14/M input cache hit, $0.55/M cache miss, $2.19/M output): $562,027 a day, 'a cost "
    "profit margin of 545%'.",
)
# --- published runs (issue 36): recipes, DeepSeek-V3's techniques, the runs' figures ---------
register(
    "deepseek2024v3infra",
    "DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv:2412.19437v2), Section 3.2 Training "
    "Framework and Section 3.3 FP8 Training",
    "https://arxiv.org/abs/2412.19437",
    "§3.2: '16-way Pipeline Parallelism (PP), 64-way Expert Parallelism (EP) spanning 8 "
    "nodes, and ZeRO-1 Data Parallelism (DP)'; 'DualPipe requires keeping two copies of the "
    "model parameters'. §3.2.2: 'NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times that "
    "of IB (50 GB/s) ... we limit each token to be dispatched to at most 4 nodes ... it will "
    "first be transmitted via IB to the GPUs with the same in-node index on its target nodes "
    "... instantaneously forwarded via NVLink ... communications via IB and NVLink are fully "
    "overlapped'. §3.2.3: 'We recompute all RMSNorm operations and MLA up-projections during "
    "back-propagation'; 'The EMA parameters are stored in CPU memory'; 'we deploy the "
    "shallowest layers (including the embedding layer) and deepest layers (including the "
    "output head) of the model on the same PP rank'. §3.3.1: 'we store the master weights, "
    "weight gradients, and optimizer states in higher precision'. §3.3.3: 'We adopt the BF16 "
    "data format instead of FP32 to track the first and second moments in the AdamW ... the "
    "master weights (stored by the optimizer) and gradients (used for batch size "
    "accumulation) are still retained in FP32'; 'cache activations in FP8 format for the "
    "backward pass of the Linear operator'; 'a customized E5M6 data format' for the inputs of "
    "the Linear after attention; 'we cache the inputs of the SwiGLU operator and recompute its "
    "output in the backward pass'; 'we quantize the activation before MoE up-projections into "
    "FP8 and then apply dispatch components ... A similar strategy is applied to the activation "
    "gradient before MoE down-projections. For both the forward and backward combine "
    "components, we retain them in BF16'.",
)
register(
    "austin2025scalingbooktraining",
    "Austin et al., How to Scale Your Model, Part 5: How to Parallelize a Transformer for "
    "Training (Data Parallelism)",
    "https://jax-ml.github.io/scaling-book/training/",
    "'if we train with parameters in bf16 and optimizer state in fp32 with Adam' (footnote: "
    "'Adam stores parameters, first order and second order accumulators. Since the params are "
    "in bfloat16 and optimizer state is in float32, this gives us 2 + 8 = 10 bytes per "
    "parameters.'); 'the largest model we can train with Adam and pure data parallelism has "
    "num_params = HBM per device / 10'.",
)
register(
    "deepseek2025dualpipe",
    "DeepSeek-AI, DualPipe: dualpipe/dualpipe.py and README (commit 3da1bbe, March 2025)",
    "https://github.com/deepseek-ai/DualPipe",
    "README: 'DualPipeV is a concise V-shape schedule derived from DualPipe using a "
    "\"cut-in-half\" procedure'; its table 'Pipeline Bubbles and Memory Usage Comparison (based "
    "on the same number of PP stages)': DualPipe bubble (PP/2-1)(F&B+B-3W), parameter per "
    "device 2x, activation per device PP+1, #devices PP; DualPipeV the same bubble, 2x, PP+1, "
    "#devices PP/2. dualpipe.py: 'assert num_ranks % 2 == 0', 'num_chunks % 2 == 0 and "
    "num_chunks >= num_ranks * 2'.",
)
register(
    "megatron-core-pipeline-schedules",
    "NVIDIA Megatron-LM: megatron/core/pipeline_parallel/schedules.py and "
    "model_parallel_config.py (microbatch_group_size_per_vp_stage), arguments.py "
    "(--pipeline-model-parallel-layout), commit d98e8a6",
    "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/pipeline_parallel/schedules.py",
    "'The number of contiguous micro-batches in a virtual pipeline stage should range in "
    "[PP, M]'; 'The remainder of M (the total micro-batches) divided by N (number of "
    "contiguous micro-batches in a virtual pipeline stage) should be 0, or larger than or "
    "equal to the pipeline-parallel size'; the config's default N is the pipeline-parallel "
    "size. --pipeline-model-parallel-layout: 'A string that describes a custom pipeline model "
    "parallel layout. e.g., \"E|(t|)*3,m|m||L\"'.",
)
register(
    "qi2024zerobubble",
    "Qi, Wan, Huang, Lin, Zero Bubble (Almost) Pipeline Parallelism (ICLR 2024)",
    "https://arxiv.org/abs/2401.10241",
    "Splits the backward into B (input gradient) and W (weight gradient); ZB-H1 keeps "
    "1F1B's peak memory with bubble (p-1)(T_F+T_B-T_W).",
)

# --- Part VI, the pages (book/serving/; issue 37) -------------------------------------------
register("kwon2023vllm", "Kwon et al., Efficient Memory Management for Large Language Model "
         "Serving with PagedAttention (SOSP 2023)", "https://arxiv.org/abs/2309.06180",
         "The KV cache of a request is stored in fixed-size blocks, allocated on demand; blocks "
         "of a shared prefix are shared between sequences, copy-on-write for the last one.")
register("yu2022orca", "Yu et al., Orca: A Distributed Serving System for Transformer-Based "
         "Generative Models (OSDI 2022)",
         "https://www.usenix.org/conference/osdi22/presentation/yu",
         "Iteration-level scheduling: the batch is re-formed at every iteration, so a request "
         "joins and leaves without waiting for the rest of its batch.")
register("agrawal2024sarathi", "Agrawal et al., Taming Throughput-Latency Tradeoff in LLM "
         "Inference with Sarathi-Serve (OSDI 2024)", "https://arxiv.org/abs/2403.02310",
         "Chunked prefills and stall-free batching: prompts are split into chunks that fill a "
         "token budget per iteration beside the running decodes.")
register("leviathan2023speculative", "Leviathan, Kalman and Matias, Fast Inference from "
         "Transformers via Speculative Decoding (ICML 2023)", "https://arxiv.org/abs/2211.17192",
         "Equation 1: the expected number of tokens per run of the target model is "
         "(1 - alpha^(gamma+1)) / (1 - alpha); Theorem 3.8: the expected walltime improvement "
         "is (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)), c the cost of a draft step "
         "over a target step.")
register("chen2023speculative", "Chen et al., Accelerating Large Language Model Decoding with "
         "Speculative Sampling (2023)", "https://arxiv.org/abs/2302.01318",
         "The same accept/reject scheme (modified rejection sampling), which keeps the target "
         "model's distribution.")
register("frantar2022gptq", "Frantar, Ashkboos, Hoefler and Alistarh, GPTQ: Accurate "
         "Post-Training Quantization for Generative Pre-trained Transformers (ICLR 2023)",
         "https://arxiv.org/abs/2210.17323",
         "Abstract: 'reducing the bitwidth down to 3 or 4 bits per weight, with negligible "
         "accuracy degradation relative to the uncompressed baseline'.")
register("dettmers2022llmint8", "Dettmers, Lewis, Belkada and Zettlemoyer, LLM.int8(): 8-bit "
         "Matrix Multiplication for Transformers at Scale (NeurIPS 2022)",
         "https://arxiv.org/abs/2208.07339",
         "'use the resulting model immediately for inference without any performance "
         "degradation'; 'large magnitude outlier features that ruin quantization precision once "
         "they emerge in all transformer layers starting at scales of 6.7B parameters'.")
register("zhong2024distserve", "Zhong et al., DistServe: Disaggregating Prefill and Decoding "
         "for Goodput-optimized Large Language Model Serving (OSDI 2024)",
         "https://arxiv.org/abs/2401.09670",
         "Abstract: 'DistServe can serve 7.4x more requests or 12.6x tighter SLO, compared to "
         "state-of-the-art systems, while staying within latency constraints for > 90% of "
         "requests.'")
register("patel2024splitwise", "Patel et al., Splitwise: Efficient Generative LLM Inference "
         "Using Phase Splitting (ISCA 2024)", "https://arxiv.org/abs/2311.18677",
         "Abstract (arXiv v2, as in ISCA 2024): 'Compared to current designs, Splitwise clusters "
         "achieve up to 1.4x higher throughput at 20% lower cost. Alternatively, they can deliver "
         "2.35x more throughput under the same power and cost budgets.'")

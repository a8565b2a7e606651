"""The ledger of one model in one deployment: every figure ``python -m tmath ledger`` prints.

:func:`build_ledger` returns a JSON-serialisable dict (plain numbers: bytes, seconds,
FLOPs); :func:`render_text` lays it out as the aligned text table the command line
prints.  The command line (:mod:`tmath.cli`), the calculator's widget and static tables
(:mod:`tmath.calculator`) and ``benchmarks/bench_ledger.py`` all call these two.

A deployment that cannot exist is said so, never silently priced:

* ``tp`` must divide the query heads (and split or evenly replicate the KV heads):
  :func:`tmath.layout.tp_layout` raises ``ValueError`` naming both numbers.  When there
  are fewer KV heads than GPUs, each KV head is replicated and the ledger says so.
* ``seq_len`` defaults to the smaller of :data:`DEFAULT_SEQ_LEN` (2,048) and the model's
  ``max_position``, so every model has a ledger with the default settings; the ledger
  records which T it used and why (``settings.seq_len_source``, ``seq_len_note_zh``).
* ``seq_len`` beyond the model's ``max_position`` (``max_position_embeddings``) raises
  ``ValueError`` naming both.  There is deliberately no override flag: a model whose
  context has been extended (RoPE scaling) publishes the extended length in its
  config.json, and a reader who wants to price an extrapolation edits that field, which
  keeps the assumption visible in the input rather than hidden in a flag.
* ``feasibility``: serving the batch needs, on every GPU, its share of the weights, its
  share of the batch's KV cache and a stated workspace
  (:data:`tmath.serving.WORKSPACE_BYTES_PER_GPU`, 5 GB: CUDA context, library buffers, one
  step's activations, fragmentation).  That sum is compared with the usable memory per
  GPU, by default the card's capacity with the datasheet's GB read as GiB (H100: 80 GiB =
  85.9e9 B; the runtime reports 81,559 MiB, see :mod:`tmath.hardware`), or ``hbm_bytes``
  if given.
  ``feasible`` is False when it does not fit; every other figure is still computed (it is
  arithmetic), and the text and the tables flag it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_ledger", "render_text", "feasibility_line_zh", "DEFAULT_SEQ_LEN",
           "SETTING_LIMITS", "default_seq_len"]

_RECOMPUTES = ("none", "selective", "full")

#: T when none is given: 2,048 tokens, or the model's context if that is shorter.
DEFAULT_SEQ_LEN = 2048
#: Plausible ranges of the deployment settings (the model's own fields: tmath.config.LIMITS).
#: ``seq_len`` is further capped by the model's ``max_position``.
SETTING_LIMITS: dict[str, tuple[float, float]] = {
    "seq_len": (1, 10**9),
    "batch": (1, 10**7),
    "tp": (1, 100_000),
    "hbm_bytes": (0, 1e15),  # low exclusive: up to a petabyte per GPU
    "workspace_bytes": (0, 1e15),  # low inclusive
    # ``tmath plan``'s mesh and batch.  The largest accelerator clusters built hold some
    # 10^5 GPUs (xAI's Colossus: about 2 × 10^5 H100 and H200 in 2025), and the largest
    # training runs published used 16,384 H100 (Llama 3 405B) and 50,944 TPU v5e chips
    # (Google's multislice run, 2023).  One million accelerators, the scale announced for
    # the next clusters, bounds the world size dp·tp·pp·cp with room to spare, and with it
    # every count the planner makes; each degree is bounded on its own as well.
    "world_size": (1, 10**6),
    "dp": (1, 10**6),
    "pp": (1, 10_000),  # at least one layer per stage: tmath.config.LIMITS["num_layers"]
    "ep": (1, 100_000),  # at least one expert per GPU: LIMITS["n_routed_experts"]
    "cp": (1, 10**6),
    "micro_batch": (1, 10**7),  # as ``batch``
    "global_batch": (1, 10**9),  # 1,000 micro-batches per replica at the largest dp
    "stage": (0, 9_999),  # a pipeline stage: below pp
    "pp_edge_layers": (1, 10_000),  # LIMITS["num_layers"]
}
_FLAGS = {"seq_len": "--seq-len", "batch": "--batch", "tp": "--tp", "hbm_bytes": "--hbm-gb",
          "workspace_bytes": "--workspace-gb", "dtype": "--dtype", "gpu": "--gpu",
          "recipe": "--recipe", "attention": "--attention", "hardware": "--gpu"}


def default_seq_len(cfg: Any) -> int:
    """The T used when none is given: ``min(DEFAULT_SEQ_LEN, cfg.max_position)``."""
    return min(DEFAULT_SEQ_LEN, cfg.max_position)


def _fmt_int(n: float) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.3f} {unit}"
    return f"{n:,.0f} B"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def _positive(name: str, v: Any, allow_zero: bool = False) -> float:
    from tmath.errors import InputError, show

    lo, hi = SETTING_LIMITS[name]
    bad = isinstance(v, bool) or not isinstance(v, (int, float)) or v != v
    if bad or not (lo <= v if allow_zero else lo < v) or not v <= hi:
        what = "非负" if allow_zero else "正"
        raise InputError(f"{name}（{_FLAGS[name]}）必须是{what}的字节数，不超过 {hi:g}，收到 "
                         f"{show(v)}", name)
    return float(v)


def _setting(name: str, v: Any, hi: int | None = None) -> int:
    from tmath.errors import InputError, InputTypeError, show

    lo, top = SETTING_LIMITS[name]
    hi = top if hi is None else hi
    flag = _FLAGS[name]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputTypeError(f"{flag} 必须是正整数，收到 {show(v)}", name)
    if not lo <= v <= hi:
        raise InputError(f"{flag} 必须在 {lo:,} 到 {hi:,} 之间，收到 {show(v)}", name)
    return v


def feasibility_line_zh(feas: dict[str, Any]) -> str:
    """One Chinese sentence: does the deployment fit, and by how much."""
    need, cap = feas["needed_bytes_per_gpu"], feas["hbm_bytes_per_gpu"]
    parts = (f"权重 {_gb(feas['weight_bytes_per_gpu'])} + KV cache {_gb(feas['kv_bytes_per_gpu'])}"
             f" + 工作区 {_gb(feas['workspace_bytes_per_gpu'])}")
    if feas["feasible"]:
        return (f"可行：每卡需要 {_gb(need)}（{parts}），{feas['gpu']} 每卡 {_gb(cap)}，"
                f"余 {_gb(cap - need)}")
    return f"不可行：每卡需要 {_gb(need)}（{parts}），超过 {feas['gpu']} 的 {_gb(cap)}"


def build_ledger(
    cfg: Any,
    *,
    seq_len: int | None = None,
    batch: int = 1,
    dtype: str = "bf16",
    tp: int = 1,
    gpu: str = "H100",
    recipe: str = "mixed-adam",
    hbm_bytes: float | None = None,
    workspace_bytes: float | None = None,
    attention: str = "eager",
) -> dict[str, Any]:
    """The whole ledger of ``cfg`` in one deployment, as a JSON-serialisable dict.

    ``seq_len`` tokens per sequence, ``batch`` sequences (the decode batch, and the
    micro-batch of the activation figures: sequences one TP group processes per forward
    pass), weights and KV cache in ``dtype``, ``tp`` GPUs of type ``gpu``.  ``hbm_bytes``
    is the usable memory per GPU (default: the datasheet capacity, decimal bytes);
    ``workspace_bytes`` the memory reserved per GPU beyond weights and KV (default
    :data:`tmath.serving.WORKSPACE_BYTES_PER_GPU`).  ``attention`` is the training-FLOP
    convention of :func:`tmath.training_flops`: ``"eager"`` (probabilities saved, what
    FlopCounterMode measures) or ``"flash"`` (the backward recomputes QKᵀ: 14·B·T²·N·H
    per layer instead of 12).  ``seq_len`` None: :func:`default_seq_len`.  See the module
    docstring for what is refused and how feasibility is judged.  Bad settings raise
    :class:`tmath.errors.InputError` naming the setting (``.field``) and its range.
    """
    import tmath
    from tmath.errors import InputError, InputTypeError, has_chinese, show
    from tmath.hardware import hardware
    from tmath.layout import tp_layout
    from tmath.memory import activation_bytes, activation_memory, training_bytes_per_param
    from tmath.serving import WORKSPACE_BYTES_PER_GPU, decode_bound, dtype_bytes

    if not isinstance(cfg, tmath.ModelConfig):
        raise InputTypeError(f"cfg 必须是 tmath.ModelConfig，收到 {type(cfg).__name__}", "cfg")
    if seq_len is None:
        seq_len = default_seq_len(cfg)
        seq_source = "default"
        seq_note = (f"默认 T：取 {DEFAULT_SEQ_LEN:,} 与模型位置数 {cfg.max_position:,} 中较小者，"
                    f"T={seq_len:,}（用 --seq-len 指定别的 T）")
    else:
        _setting("seq_len", seq_len)
        if seq_len > cfg.max_position:
            raise InputError(
                f"--seq-len {seq_len:,} 超过了 {cfg.name} 的 {cfg.max_position:,} 个位置"
                f"（max_position_embeddings）：请用 --seq-len <= {cfg.max_position:,}", "seq_len")
        seq_source = "given"
        seq_note = f"T={seq_len:,}（指定）"
    _setting("batch", batch)
    _setting("tp", tp)
    if attention not in ("eager", "flash"):
        raise InputError(f"--attention {show(attention)}：请用 eager（保存注意力概率）或 flash"
                         "（反向重算 QKᵀ）", "attention")
    try:
        layout = tp_layout(cfg, tp)
    except (ValueError, TypeError) as e:  # tmath's layout module words it; add the setting
        msg = str(e) if has_chinese(str(e)) else f"TP={tp} 无法均分 {cfg.name} 的注意力头：{e}"
        raise InputError(msg, "tp") from None
    try:
        wbytes = dtype_bytes(dtype)  # validates
    except (ValueError, TypeError):
        raise InputError(f"--dtype {show(dtype)} 未知：请用 fp32、bf16、fp16、fp8、int8、int4 之一",
                         "dtype") from None
    hw = hardware(gpu)
    cap = hw.hbm_bytes if hbm_bytes is None else _positive("hbm_bytes", hbm_bytes)
    work = WORKSPACE_BYTES_PER_GPU if workspace_bytes is None else _positive(
        "workspace_bytes", workspace_bytes, allow_zero=True)
    p = tmath.count_params(cfg)
    f = tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=False, attention=attention)
    fc = tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=True, attention=attention)
    # sliding-window layers: the useful FLOPs (a windowed kernel), beside the eager count
    fw = (tmath.training_flops(cfg, seq_len=seq_len, batch=batch, causal=True, window=True,
                               attention=attention)
          if any(w is not None for w in cfg.layer_windows) else None)
    tokens = seq_len * batch
    n6 = p.active if cfg.is_moe else p.total
    six_nt = 6 * n6 * tokens
    kv_tok = tmath.kv_cache_bytes_per_token(cfg, dtype=dtype)
    rb = training_bytes_per_param(recipe)
    dec = decode_bound(cfg, hw, tp=tp, batch=batch, context_len=seq_len, weight_dtype=dtype, kv_dtype=dtype)
    dec_step = _decode_with_comm(cfg, hw, tp=tp, batch=batch, seq_len=seq_len, dtype=dtype)
    sp = tp > 1
    acts = {r: activation_bytes(cfg, seq_len, batch, recompute=r, tp=tp, sequence_parallel=sp)
            for r in _RECOMPUTES}
    kor = {r: activation_memory(cfg, seq_len, batch, recompute=r, tp=tp, sequence_parallel=sp)
           for r in _RECOMPUTES}
    step_s = f.total / (hw.dense_flops * tp)
    kv_seq = dec.kv_bytes / batch
    weight_gpu = p.total * wbytes / tp
    kv_gpu = dec.kv_bytes_per_gpu
    need = weight_gpu + kv_gpu + work
    feas = {
        "feasible": bool(need <= cap),
        "scope": "serving the batch: weights/tp + the batch's KV cache per GPU + workspace",
        "gpu": hw.name,
        "hbm_bytes_per_gpu": cap,
        "hbm_convention": "the datasheet's GB read as GiB (80 GB = 80 * 2**30 bytes) unless hbm_bytes "
        "is given; nvidia-smi reports an H100 SXM as 81559 MiB",
        "weight_bytes_per_gpu": weight_gpu,
        "kv_bytes_per_gpu": kv_gpu,
        "workspace_bytes_per_gpu": work,
        "needed_bytes_per_gpu": need,
        "headroom_bytes_per_gpu": cap - need,
    }
    feas["verdict_zh"] = feasibility_line_zh(feas)
    if layout.mla:
        kv_note = f"MLA 的潜向量缓存不按头切分：{tp} 张卡每张各存一整份" if tp > 1 else ""
    elif layout.kv_replicated:
        kv_note = (f"KV 头复制：{layout.num_kv_heads} 个 KV 头少于 TP={tp}，每张卡存 1 个头，"
                   f"每个头复制在 {layout.kv_replicas} 张卡上")
    else:
        kv_note = ""
    a0 = acts["none"]
    return {
        "model": {
            "name": cfg.name,
            "model_type": cfg.model_type,
            "wrapper": cfg.wrapper or None,
            "not_counted_zh": _not_counted_zh(cfg),
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_layers": cfg.num_layers,
            "num_heads": cfg.num_heads,
            "num_kv_heads": cfg.num_kv_heads,
            "head_dim": cfg.head_dim,
            "vocab_size": cfg.vocab_size,
            "max_position": cfg.max_position,
            "mlp": cfg.mlp,
            "moe": bool(cfg.is_moe),
            "mla": bool(cfg.is_mla),
        },
        "settings": {
            "seq_len": seq_len,
            "seq_len_source": seq_source,
            "seq_len_note_zh": seq_note,
            "batch": batch,
            "dtype": dtype,
            "tp": tp,
            "gpu": hw.name,
            "recipe": recipe,
            "attention": attention,
        },
        "tp_layout": {
            "heads_per_gpu": layout.heads_per_gpu,
            "kv_heads_per_gpu": layout.kv_heads_per_gpu,
            "kv_replicas": layout.kv_replicas,
            "kv_replicated": layout.kv_replicated,
            "note_zh": kv_note,
        },
        "feasibility": feas,
        "params": {"total": p.total, "active": p.active, "breakdown": dict(p.breakdown)},
        "training_flops": {
            "tokens": tokens,
            "total": f.total,
            "total_causal": fc.total,
            "total_causal_window": None if fw is None else fw.total,
            "breakdown": dict(f.breakdown),
            "six_n_t": six_nt,
            "six_n_t_uses": "active" if cfg.is_moe else "total",
            "six_n_t_rel_error": (six_nt - f.total) / f.total,
        },
        "kv_cache": {
            "bytes_per_token": kv_tok,
            "bytes_per_sequence": kv_seq,
            "bytes_batch": dec.kv_bytes,
        },
        "training_memory": {
            "bytes_per_param": rb.total,
            "bytes_per_param_breakdown": rb.breakdown,
            "states_bytes": p.total * rb.total,
            "activation_bytes_per_gpu": {r: a.total for r, a in acts.items()},
            "activation_micro_batch": batch,
            "activation_sequence_parallel": sp,
            "activation_checked": a0.checked,
            "activation_convention": f"per architecture ({a0.block} block, tmath.activation_bytes): "
            f"per GPU, micro-batch {batch}, TP={tp}, sequence parallel {'on' if sp else 'off'}, "
            "bf16 activations, 1-byte dropout masks, fused kernels, eager softmax kept",
            "activation_convention_zh": a0.describe_zh(),
            "activation_bytes_per_gpu_korthikanti_gpt": kor,
        },
        "decode": {
            "gpu": hw.name,
            "tp": tp,
            "bandwidth_bytes_per_s": hw.hbm_bandwidth,
            "weight_bytes": dec.weight_bytes,
            "kv_bytes": dec.kv_bytes,
            "bytes_per_gpu": dec.bytes_per_gpu,
            "step_seconds": dec.seconds,
            "tokens_per_s_per_seq": dec.tokens_per_s_per_seq,
            "tokens_per_s": dec.tokens_per_s,
            "moe_weights": dec.moe_weights if cfg.is_moe else None,
            "experts_read_per_moe_layer": dec.experts_read,
            "kv_replicas": dec.kv_replicas,
        },
        "decode_step": dec_step,
        "step_time_at_peak_s": step_s,
        "step_energy_at_peak_j": f.total / hw.flops_per_watt if hw.tdp_watts else None,
    }


def _decode_with_comm(cfg: Any, hw: Any, *, tp: int, batch: int, seq_len: int,
                      dtype: str) -> dict[str, Any]:
    """The decode step with tensor parallelism's all-reduces: :func:`tmath.serving.decode_step`,
    the one function the book's serving pages call too.

    Convention: the step that produces each sequence's T-th token (it reads the KV of T−1
    cached tokens); the slower of its HBM reads and its compute, plus 2 all-reduces per layer
    of the batch's hidden states (bf16) on the node's link, priced by NCCL's ring model and
    not overlapped with compute: a model estimate, not a bound.  ``step_seconds`` without
    NCCL's base latency per collective, ``step_seconds_nccl_base`` with it.  Fp8 weights on a
    GPU without fp8 tensor cores compute in bf16.  A GPU with no node data
    (:data:`tmath.hardware.NODES`) and tp > 1 gets ``priced`` False: its all-reduces are not
    counted, and the text says so.
    """
    from tmath.hardware import link, node
    from tmath.serving import NCCL_BASE_LATENCY, decode_step

    compute = "fp8" if dtype == "fp8" and hw.fp8_flops else "bf16"
    priced = True
    if tp > 1:
        try:
            node(hw)
        except ValueError:
            priced = False
    kw = dict(tp=tp, batch=batch, context_len=seq_len - 1, weight_dtype=dtype, kv_dtype=dtype,
              compute_dtype=compute)
    if not priced:  # reads and FLOPs only: any link name gets past the lookup, its time unused
        bare = decode_step(cfg, hw, link="NVLink4", **kw)
        roof = max(bare.memory_seconds, bare.compute_seconds)
        return {"priced": False, "nccl": False, "context_len": seq_len - 1, "compute_dtype": compute,
                "all_reduces": bare.all_reduces, "all_reduce_bytes": bare.all_reduce_bytes,
                "all_reduce_seconds": None, "all_reduce_seconds_nccl_base": None, "link": "",
                "nccl_base_latency_s": NCCL_BASE_LATENCY,
                "memory_seconds": bare.memory_seconds, "compute_seconds": bare.compute_seconds,
                "comm_seconds": None, "step_seconds": roof, "step_seconds_nccl_base": None,
                "tokens_per_s_per_seq": 1 / roof, "tokens_per_s": batch / roof}
    step = decode_step(cfg, hw, **kw)
    nccl = tp > 1 and link(step.link).step_latency is not None  # NCCL's model, NVIDIA links
    base = decode_step(cfg, hw, base_latency=NCCL_BASE_LATENCY if nccl else 0.0, **kw)
    return {
        "priced": True,
        "nccl": nccl,
        "context_len": seq_len - 1,
        "compute_dtype": compute,
        "all_reduces": step.all_reduces,
        "all_reduce_bytes": step.all_reduce_bytes,
        "all_reduce_seconds": step.all_reduce_seconds,
        "all_reduce_seconds_nccl_base": base.all_reduce_seconds,
        "link": step.link,
        "nccl_base_latency_s": NCCL_BASE_LATENCY,
        "memory_seconds": step.memory_seconds,
        "compute_seconds": step.compute_seconds,
        "comm_seconds": step.comm_seconds,
        "step_seconds": step.seconds,
        "step_seconds_nccl_base": base.seconds,
        "tokens_per_s_per_seq": 1 / step.seconds,
        "tokens_per_s": step.tokens_per_s,
    }


def _decode_step_rows(ds: dict[str, Any], s: dict[str, Any]) -> list[tuple[str, str]]:
    """The printed rows of :func:`_decode_with_comm`."""
    rows = [("解码一步的估计（含 TP 的 all-reduce）", ""),
            ("读 HBM", f"{1e3 * ds['memory_seconds']:.3f} ms"),
            ("计算", f"{1e3 * ds['compute_seconds']:.3f} ms")]
    if s["tp"] == 1:
        rows += [("all-reduce", "无（TP=1）"), ("一步时间", f"{1e3 * ds['step_seconds']:.3f} ms")]
    elif not ds["priced"]:
        rows += [(f"{ds['all_reduces']} 次 all-reduce", "未计（无链路数据）"),
                 ("一步时间（不含通信）", f"{1e3 * ds['step_seconds']:.3f} ms")]
    else:
        rows += [
            (f"{ds['all_reduces']} 次 all-reduce（{ds['link']}）",
             f"每次 {_fmt_bytes(ds['all_reduce_bytes'])}"),
            ("每次 all-reduce 的时间", f"{1e6 * ds['all_reduce_seconds']:.2f} µs"),
            ("一步时间", f"{1e3 * ds['step_seconds']:.3f} ms"),
        ]
        if ds["nccl"]:
            rows.append(("每次加 NCCL 基础延迟时", f"{1e3 * ds['step_seconds_nccl_base']:.3f} ms"))
    rows.append(("每条序列 token/s", f"{ds['tokens_per_s_per_seq']:,.1f}"))
    return rows


def _decode_step_note_zh(ds: dict[str, Any], s: dict[str, Any]) -> str:
    """The convention of the decode estimate, in one line of the notes."""
    text = (f"解码估计：每条序列已缓存 T−1 = {ds['context_len']:,} 个 token、生成第 T 个的一步；"
            "读 HBM（峰值带宽）与计算（峰值算力）取大者")
    if s["tp"] == 1:
        return text + "。"
    text += "，再加每层 2 次 all-reduce（注意力后、MLP 后，数组是 B 个 token 的 bf16 隐藏状态）"
    if not ds["priced"]:
        return text + f"；{s['gpu']} 没有节点与链路数据，这些 all-reduce 未计。"
    if not ds["nccl"]:
        return text + f"，按 {ds['link']} 的 α–β 模型、不与计算重叠地相加（模型估计，不是下界）。"
    base_us = 1e6 * ds["nccl_base_latency_s"]
    return (text + "，按 NCCL 的环形代价模型、不与计算重叠地相加（模型估计，不是下界）；"
            f"NCCL 基础延迟每次 {base_us:.1f} µs（tmath.serving.NCCL_BASE_LATENCY）。")


def _not_counted_zh(cfg: Any) -> str:
    """What a multimodal wrapper's ledger leaves out ("" for a text-only config)."""
    if not cfg.wrapper:
        return ""
    return (f"只计语言模型（text_config，{cfg.model_type}）：多模态封装 {cfg.wrapper} 的视觉塔、"
            "多模态投影层等其余部分未计入参数、FLOPs 与显存")


# Chinese names of the breakdown keys (tmath.params and tmath.flops), for the printed ledger.
PART_ZH = {
    "embedding": "词嵌入", "positions": "位置嵌入", "attention": "注意力", "mlp": "MLP",
    "routed_experts": "路由专家", "shared_experts": "共享专家", "router": "路由器",
    "norms": "归一化", "lm_head": "输出层（LM head）", "attention_proj": "注意力投影（Q/K/V/O）",
    "attention_scores": "注意力得分 QKᵀ", "attention_values": "注意力加权 PV", "rope": "旋转位置表",
    "attention_recompute": "反向重算 QKᵀ",
}
RECOMPUTE_ZH = {"none": "不重算", "selective": "选择性重算", "full": "完全重算"}


def _width(text: str) -> int:
    """Columns a terminal gives ``text``: CJK characters take two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _table(rows: list[tuple[str, str]]) -> str:
    w = max(_width(k) for k, _ in rows)
    vw = max(_width(v) for _, v in rows)
    out = []
    for k, v in rows:
        if v == "" and not k.startswith(" "):
            out.append(f"\n{k}")
        else:
            out.append(f"  {k}{' ' * (w - _width(k))}  {' ' * (vw - _width(v))}{v}")
    return "\n".join(out).lstrip("\n")


def render_text(led: dict[str, Any]) -> str:
    """The ledger as the aligned text table the command line prints (in Chinese).

    The deployment verdict comes first: a number for a setup that does not fit is
    never printed without saying so.
    """
    from tmath.fmt import sci

    m, s, p, f = led["model"], led["settings"], led["params"], led["training_flops"]
    kv, tm, d = led["kv_cache"], led["training_memory"], led["decode"]
    feas, lay = led["feasibility"], led["tp_layout"]
    head = [f"部署：{feas['verdict_zh']}"]
    if not feas["feasible"]:
        head.append("下面的解码与训练数字假设这一部署存在，只作对照。")
    if m.get("not_counted_zh"):
        head.append(m["not_counted_zh"])
    rows: list[tuple[str, str]] = [
        (f"模型 {m['name']}（{m['model_type']}）", ""),
        ("D / F / L", f"{m['hidden_size']} / {m['intermediate_size']} / {m['num_layers']}"),
        ("N / K / H / V", f"{m['num_heads']} / {m['num_kv_heads']} / {m['head_dim']} / {m['vocab_size']}"),
        ("设置", f"T={s['seq_len']} B={s['batch']} {s['dtype']} TP={s['tp']} {s['gpu']}"),
        ("参数量", ""),
        ("总数", _fmt_int(p["total"])),
        ("每 token 激活", _fmt_int(p["active"])),
    ]
    rows += [(f"  {PART_ZH.get(k, k)}", _fmt_int(v)) for k, v in p["breakdown"].items()]
    rows += [
        ("每步训练 FLOPs（前向 + 反向，"
         + ("FlashAttention：反向重算 QKᵀ）" if s.get("attention") == "flash" else "保存注意力概率）"), ""),
        ("总数（全量注意力）", sci(f["total"])),
        ("总数（因果）", sci(f["total_causal"])),
    ]
    if f.get("total_causal_window") is not None:
        rows.append(("总数（因果，窗口层只计窗口内）", sci(f["total_causal_window"])))
    rows += [(f"  {PART_ZH.get(k, k)}", sci(v) if v else "0") for k, v in f["breakdown"].items()]
    rows += [
        (f"6·P·token 数（P 取{'每 token 激活参数' if f['six_n_t_uses'] == 'active' else '总参数'}）",
         sci(f["six_n_t"])),
        ("6PT 相对误差", f"{100 * f['six_n_t_rel_error']:+.3f}%".replace("-", "−")),
        ("KV cache", ""),
        ("每 token", _fmt_bytes(kv["bytes_per_token"])),
        (f"每条序列（T={s['seq_len']}）", _fmt_bytes(kv["bytes_per_sequence"])),
        ("训练显存", ""),
        (f"状态（{s['recipe']}，每参数 {tm['bytes_per_param']} B，全模型）", _fmt_bytes(tm["states_bytes"])),
        (f"状态每卡（TP={s['tp']}，无 ZeRO）", _fmt_bytes(tm["states_bytes"] / s["tp"])),
    ]
    rows += [
        (f"激活，{RECOMPUTE_ZH.get(k, k)}", _fmt_bytes(v)) for k, v in tm["activation_bytes_per_gpu"].items()
    ]
    rows += [
        ("解码一步的下界（只计 HBM 读取）", ""),
        ("每卡读取字节", _fmt_bytes(d["bytes_per_gpu"])),
        ("一步时间", f"{1e3 * d['step_seconds']:.3f} ms"),
        ("每条序列 token/s", f"{d['tokens_per_s_per_seq']:,.1f}"),
        ("整批 token/s", f"{d['tokens_per_s']:,.1f}"),
    ]
    if d.get("experts_read_per_moe_layer") is not None:
        rows.append(("每个 MoE 层读取的路由专家", f"{d['experts_read_per_moe_layer']:,.2f}"))
    ds = led.get("decode_step")
    if ds is not None:
        rows += _decode_step_rows(ds, s)

    def g4(x: float) -> str:  # 4 significant digits, as a textbook writes a large one
        return f"{x:.4g}" if 1e-3 <= abs(x) < 1e4 else sci(x)

    rows += [
        ("峰值算力下的一个训练步（全量注意力，不判显存）", ""),
        (f"{s['tp']}×{s['gpu']} 上的时间", f"{g4(led['step_time_at_peak_s'])} s"),
    ]
    if led["step_energy_at_peak_j"] is not None:
        rows.append(("能耗（按 TDP，PUE 1）", f"{g4(led['step_energy_at_peak_j'])} J"))
    checked = "" if tm["activation_checked"] else f"；{m['model_type']} 按通用块估算，未与实测核对"
    notes = [f"激活：{tm['activation_convention_zh']}（bf16 激活、融合算子{checked}）"]
    if s.get("seq_len_source") == "default":
        notes.insert(0, s["seq_len_note_zh"])
    if d.get("experts_read_per_moe_layer") is not None:
        notes.append(
            f"MoE：一步 {s['batch']} 个 token，每个 MoE 层按均匀路由期望读到 "
            f"{d['experts_read_per_moe_layer']:,.2f} 个路由专家（E·(1−(1−k/E)^B)）"
            + ("，共享专家总读" if p["breakdown"].get("shared_experts") else "，没有共享专家")
        )
    if lay["note_zh"]:
        notes.append(lay["note_zh"])
    if ds is not None:
        notes.append(_decode_step_note_zh(ds, s))
    return "\n".join(head) + "\n\n" + _table(rows) + "\n\n" + "\n".join(notes)

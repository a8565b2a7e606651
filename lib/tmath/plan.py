"""``tmath plan``: one training layout on many GPUs, per GPU — memory, bytes sent, bubble,
step time and a feasibility verdict.

:func:`build_plan` returns a JSON-serialisable dict; :func:`render_text` lays it out in
Chinese; :func:`add_plan_parser` and :func:`run_plan` are the command line
(``python -m tmath plan (CONFIG | --preset NAME) --dp N --tp N --pp N --ep N --cp N
--zero {0,1,2,3} --micro-batch b --global-batch G --seq-len T [--gpu NAME]
[--recompute {none,selective,full}] [--stage-layers LIST] [--peak-tflops X --hbm-gb X
--gpus-per-node N --intra-gbs X --inter-gbs X] [--json]``).

Conventions (:mod:`tmath.layout` states each in full; ``--help`` repeats them):

1. Ring algorithms; **bytes sent per GPU per optimizer step** (:mod:`tmath.comm`).
2. **Transformer layers only**: the embedding's and the LM head's collectives are left out.
3. **A GPU in a middle pipeline stage** (stage 1 when pp ≥ 3, else stage 0); the memory
   verdict checks every stage.
4. bf16 activations and gradients; weights, gradients and optimizer states per parameter
   from the training recipe (mixed-precision Adam: 2 + 2 + 12 bytes).
5. Pipeline sends split over the TP group: ``b·T·D/(cp·tp)`` per micro-batch each way; 1F1B,
   bubble ``(pp−1)/(n_mb+pp−1)`` with ``n_mb = G/(dp·b)`` micro-batches.
6. Uniform routing for MoE, counting the k copies of each token; EP groups are carved out of
   the DP ranks (ep divides dp).
7. ZeRO-1 and 2 move the bytes of an all-reduce (ZeRO-2 once per micro-batch for the
   gradients); ZeRO-3 1.5× that per micro-batch.
8. Activations: :func:`tmath.memory.activation_bytes` (Llama or GPT block, FlashAttention,
   sequence parallelism when tp > 1), for the micro-batches the stage holds in flight under
   1F1B; full recomputation adds one layer's activations being recomputed.
9. Step time: the FLOPs of the global batch (plus recomputation) spread evenly over the
   GPUs at the GPU's dense 16-bit peak, stretched by the bubble, plus every collective in
   NCCL's cost model (:func:`tmath.comm.nccl_time`: the fastest of its three protocols) on
   the links its axis rides; a group spanning nodes with g members per node reaches the
   network through g NICs, nothing overlapped (``step_time_overlap_s`` hides all
   communication).  Both are model estimates, neither a bound: compute runs at peak, which
   no kernel reaches, so with no communication the MFU is 100 %.
   A TPU's "node" is its pod (v5p: the largest slice); a group larger than that runs ICI
   inside each pod and the data-centre network between pods, one after the other
   (:func:`_multislice_time`).  The job's chips in one pod are one slice, the most cube-like
   box (:func:`tmath.comm.torus_slice`); a TPU group occupies a box inside it and runs on all
   its axes at once (:func:`_ici_time`, :func:`tmath.comm.torus_time`), with a wraparound
   link only on a side that runs the slice's whole side; the text names the slice's box and
   each axis' box.
10. Memory per GPU is compared with the datasheet capacity minus a 5 GB workspace
    (:data:`tmath.serving.WORKSPACE_BYTES_PER_GPU`).

Every integer argument has a plausible range, in the table ``ledger`` uses
(:data:`tmath.ledger.SETTING_LIMITS`; at most 10⁶ GPUs in all), checked before any work;
what depends on the mesh is closed-form (members of a group per node), so an absurd
argument is one line of Chinese naming the flag and the range, never a traceback; the
memory of the pp stages takes time linear in pp.  A collective's ``link`` is the link its
time is computed on, and ``links[axis]`` the links the axis' collectives ride
(``"NVLink4+IB-NDR"`` when they differ).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from fractions import Fraction
from typing import Any

__all__ = ["CONVENTIONS_ZH", "build_plan", "render_text", "add_plan_parser", "run_plan"]

#: The conventions, as the text output and ``--help`` state them.
CONVENTIONS_ZH: tuple[str, ...] = (
    "环形算法；数的是每个优化器步里每张卡发出的字节。",
    "只算 Transformer 层：词嵌入和 LM head 的集合通信不计。",
    "描述的是流水线中间的一段（pp ≥ 3 时为第 1 段，否则第 0 段）；显存可行性检查每一段。",
    "激活与梯度用 bf16；权重、梯度、优化器状态每参数的字节数取自训练配方（混合精度 Adam：2 + 2 + 12）。",
    "流水线的消息在 TP 组内切开发送：每个微批次每个方向 b·T·D/(cp·tp) 个元素；默认 1F1B 调度，"
    "气泡占一步的 (pp−1)/(n_mb+pp−1)，n_mb = G/(dp·b)。",
    "张量并行开序列并行时按 Megatron-LM 计：每层每个微批次 6 次 all-gather、4 次 reduce-scatter"
    "（反向为算权重梯度再 all-gather 一次块输入，因为激活只存了 1/tp 的输入），"
    "字节是不开序列并行时的 5/4；整层重计算再加重算的前向。",
    "MoE 按均匀路由计，每个 token 发往 k 个专家（k 份）；专家并行组从数据并行的副本里划出（ep 整除 dp）。",
    "ZeRO-1、2 发送的字节与一次 all-reduce 相同（ZeRO-2 每个微批次 reduce-scatter 一次梯度）；"
    "ZeRO-3 每个微批次是它的 1.5 倍。",
    "激活按 tmath.memory.activation_bytes（FlashAttention，tp > 1 时开序列并行），乘以 1F1B 下该段同时在途的"
    "微批次数；整层重计算再加上正在重算的一层。",
    "步时：全局批的 FLOPs（含重计算）平均分到每张卡、按该卡的稠密 16 位峰值算，再按气泡拉长，加上每个集合通信"
    "在其轴所走链路上按 NCCL 成本模型（v2.27.7-1）的时间（三种协议取最快的；链路带宽取 NCCL 的有效值，"
    "如 H100 的 NVLink 每方向 370.8 GB/s，不是线速 450 GB/s；"
    "跨机的组每台机器有 g 个组员时经 g 张网卡出机器；"
    "TPU 的组在 pod 内按环面计价：组占 slice 里的一个盒子，各轴同时走，只有跑满 slice 整条边的轴有回绕链路；"
    "TPU 的组大过一个 pod 时，pod 内走 ICI、pod 之间走数据中心网络（DCN），两段先后进行；"
    "不与计算重叠）。这是模型的估计，不是上界也不是下界：计算按峰值算，真实的核函数到不了峰值"
    "（没有通信时 MFU 便是 100 %），通信按 NCCL 的环形模型算，真实的库另有更快的算法。",
    "可行性：每张卡的显存与数据手册容量比较，另留 5 GB 工作区。",
)


def _int(x: Any) -> int:
    return int(x) if not isinstance(x, Fraction) else -(-x.numerator // x.denominator)


def _stage_memory(st: dict[str, int], dense: int, moe: int, in_flight: int, recompute: str,
                  act: dict[str, Any]) -> dict[str, int]:
    """Memory of one stage: its states ``st`` (:attr:`tmath.layout.Layout.state_bytes`), and
    the activations of its ``dense`` and ``moe`` layers (from tmath.memory) for ``in_flight``
    micro-batches."""
    per_mb = dense * act["dense"] + moe * act["moe"]
    acts = per_mb * in_flight
    if recompute == "full":
        acts += act["recomputed_layer"]
    return {"weights": st["weights"], "grads": st["grads"], "optimizer": st["optimizer"],
            "activations": _int(Fraction(acts))}


def _memory_by_stage(lay: Any, act: dict[str, Any],
                     sched: dict[str, Any] | None = None) -> list[dict[str, int]]:
    """:func:`_stage_memory` of every pipeline stage, in time and memory linear in pp.

    A stage's states depend only on its layer counts and on whether it holds the embedding
    (the first) or the LM head (the last), so one layout is built per distinct stage, not
    per stage; the layers before each stage are summed as the loop goes.
    """
    cfg, states, rows, start = lay.cfg, {}, [], 0
    for s, n in enumerate(lay.stage_layers):
        # MoE layers among start … start+n−1: those at or after first_k_dense
        moe = max(0, start + n - max(start, cfg.first_k_dense)) if cfg.is_moe else 0
        key = (n, moe, s == 0, s == lay.pp - 1)
        if key not in states:
            states[key] = lay.at_stage(s).state_bytes
        in_flight = (min(lay.pp - s, lay.micro_batches) if sched is None  # Layout.in_flight
                     else sched["in_flight"][s])
        rows.append(_stage_memory(states[key], n - moe, moe, in_flight, lay.recompute, act))
        start += n
    if sched is not None and sched["weight_copies"] == 2:
        rows = _dualpipe_memory(rows)
    return rows


def _activation_per_layer(cfg: Any, lay: Any, saving: dict[str, bool] | None = None
                          ) -> dict[str, float]:
    """Activation bytes of one dense and one MoE layer for one micro-batch on one GPU;
    ``saving`` the DeepSeek-V3 switches of :func:`tmath.memory.activation_bytes`
    (``recompute_norm_up``, ``fp8_cache``)."""
    from tmath.memory import activation_bytes

    kw = dict(tp=lay.tp, sequence_parallel=lay.sequence_parallel, attention="flash")
    seq, b = lay.seq_len // lay.cp, lay.micro_batch
    a = activation_bytes(cfg, seq, b, recompute=lay.recompute, **kw, **(saving or {}))
    full = activation_bytes(cfg, seq, b, recompute="none", **kw)
    n_moe = cfg.num_moe_layers if cfg.is_moe else 0
    n_dense = cfg.num_layers - n_moe

    def split(x: Any) -> tuple[float, float]:
        moe = x.per_layer if n_moe else 0.0
        dense = (x.total - n_moe * moe) / n_dense if n_dense else 0.0
        return dense, moe

    dense, moe = split(a)
    fd, fm = split(full)
    return {"dense": dense, "moe": moe, "recomputed_layer": max(fd, fm), "checked": a.checked,
            "block": a.block}


def _offsets_below(factors: list[tuple[int, int]], n: int) -> int:
    """How many of the offsets ``Σ i_k·stride_k`` (``0 ≤ i_k < size_k``) are below ``n``.

    ``factors`` are ``(stride, size)`` pairs, smallest stride first, each stride larger than
    the largest offset of the factors before it (the layout's mixed radix), so the offsets
    of the last factor's block ``i`` lie in ``[i·stride, (i+1)·stride)``: the blocks below
    ``n // stride`` count whole, the block holding ``n`` counts by recursion.  Closed form:
    no offset is listed, whatever the sizes.
    """
    if not factors:
        return 1 if n > 0 else 0
    *lower, (stride, size) = factors
    whole, rest = divmod(n, stride)
    block = math.prod(s for _, s in lower)
    return min(size, whole) * block + (_offsets_below(lower, rest) if whole < size else 0)


def _group_factors(lay: Any, c: Any) -> list[tuple[int, int]]:
    """The rank offsets of collective ``c``'s group (the one holding rank 0) as ``(stride,
    size)`` factors, smallest stride first: the layout's strides (tp fastest, then cp,
    ep/dp, pp)."""
    s = lay.strides
    if c.axis == "tp":
        return [(1, c.group)]
    if c.axis == "cp":
        return [(s["cp"], lay.cp)]
    if c.axis == "ep":
        return [(s["ep"], lay.ep)]
    if c.axis == "pp":
        return [(s["pp"], 2)]
    if c.group == lay.dp_group:
        return [(s["cp"], lay.cp), (s["dp"], lay.dp)]
    # the routed experts' DP group: every ep-th DP rank
    return [(s["cp"], lay.cp), (s["dp"] * lay.ep, lay.dp // lay.ep)]


def _members_per_node(lay: Any, c: Any) -> int:
    """How many members of collective ``c``'s group (the one holding rank 0) share a node.

    A node holds ranks ``0 … gpus_per_node−1``; a group on the intra-node link has all its
    members there.  Counted in closed form (:func:`_offsets_below` on
    :func:`_group_factors`): the time and memory do not grow with the mesh.
    """
    if c.link != lay.inter_link or lay.intra_link == lay.inter_link:
        return c.group
    g = max(1, _offsets_below(_group_factors(lay, c), lay.gpus_per_node))
    while c.group % g:  # an uneven split: count the node by its largest even share
        g -= 1  # at most gpus_per_node steps
    return g


#: The arguments :func:`build_plan` bounds, each by its plausible range in
#: :data:`tmath.ledger.SETTING_LIMITS` (the table ``ledger`` uses), before any other work.
_BOUNDED = ("dp", "tp", "pp", "ep", "cp", "micro_batch", "global_batch", "seq_len", "stage",
            "pp_edge_layers")


def _check_bounds(values: dict[str, Any]) -> None:
    """Refuse an argument outside its plausible range, or a mesh of more GPUs than any
    cluster (``SETTING_LIMITS["world_size"]``), naming the argument, its flag and the range.

    Runs before the layout is built, so nothing that grows with the mesh is ever computed
    for an absurd one; a value that is not an integer is left to :func:`tmath.layout.build_layout`,
    which names it.
    """
    from tmath.errors import show
    from tmath.layout import LayoutError, _index
    from tmath.ledger import SETTING_LIMITS

    ints: dict[str, int] = {}
    for name in _BOUNDED:
        v = values[name]
        if v is None:
            continue
        try:
            n = _index(v)
        except TypeError:
            continue
        lo, hi = SETTING_LIMITS[name]
        if not lo <= n <= hi:
            shown = f"{n:,}" if abs(n) < 10**15 else show(n)
            raise LayoutError(f"{name}（{_field_flag(name)}）必须在 {lo:,} 到 {hi:,} 之间，"
                              f"收到 {shown}", name)
        ints[name] = n
    degrees = {a: ints.get(a, 1) for a in ("dp", "tp", "pp", "cp")}
    world = math.prod(degrees.values())
    top = SETTING_LIMITS["world_size"][1]
    if world > top:
        big = max(degrees, key=lambda a: degrees[a])  # the first of the largest: dp on a tie
        others = "、".join(_field_flag(a) for a in degrees if a != big)
        raise LayoutError(
            f"dp×tp×pp×cp = {'×'.join(f'{v:,}' for v in degrees.values())} = {world:,} 张卡，"
            f"超过合理上限 {top:,}（已建成的最大集群约 20 万张卡）：减小 {_field_flag(big)}"
            f"（或 {others}）", big)


#: Plausible ranges of the hardware figures a reader may give (``tmath plan --peak-tflops``
#: ...): low exclusive, high inclusive.  The fastest chips of 2025 reach some 10¹⁵–10¹⁶ FLOP/s
#: and 10² GB of HBM; the bounds leave three orders of magnitude either way.
HARDWARE_LIMITS: dict[str, tuple[float, float]] = {
    "peak_flops": (0, 1e19),  # FLOP/s
    "hbm_bytes": (0, 1e15),  # bytes (tmath.ledger.SETTING_LIMITS["hbm_bytes"])
    "gpus_per_node": (1, 10**6),  # inclusive: the world-size bound
    "intra_bandwidth": (0, 1e14),  # bytes/s per direction
    "inter_bandwidth": (0, 1e14),
}
#: How the command line names each, and in what unit (the value divided by ``scale``).
_HW_FLAGS = {"peak_flops": ("--peak-tflops", 1e12, "TFLOP/s"),
             "hbm_bytes": ("--hbm-gb", 1e9, "GB"),
             "gpus_per_node": ("--gpus-per-node", 1, "张卡"),
             "intra_bandwidth": ("--intra-gbs", 1e9, "GB/s"),
             "inter_bandwidth": ("--inter-gbs", 1e9, "GB/s")}


def _custom_hardware(values: dict[str, Any]) -> dict[str, float]:
    """The hardware figures given (not ``None``), checked against :data:`HARDWARE_LIMITS`;
    an out-of-range or non-numeric one is a :class:`tmath.layout.LayoutError` naming it."""
    from tmath.errors import show
    from tmath.layout import LayoutError

    out: dict[str, float] = {}
    for name, v in values.items():
        if v is None:
            continue
        flag, scale, unit = _HW_FLAGS[name]
        lo, hi = HARDWARE_LIMITS[name]
        if name == "gpus_per_node":
            ok = not isinstance(v, bool) and isinstance(v, int) and lo <= v <= hi
            if not ok:
                raise LayoutError(f"gpus_per_node（{flag}）必须是 {lo:,} 到 {hi:,} 之间的整数，"
                                  f"收到 {show(v)}", name)
            out[name] = int(v)
            continue
        ok = (not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
              and lo < v <= hi)
        if not ok:
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            got = f"{v / scale:.6g} {unit}" if number else show(v)
            raise LayoutError(f"{name}（{flag}）必须是正数，不超过 {hi / scale:,.0f} {unit}，收到 {got}",
                              name)
        out[name] = float(v)
    return out


def _rated(lk: Any, bandwidth: float) -> Any:
    """Link ``lk`` at another bandwidth (bytes/s per direction): its latencies and topology
    kept, named for the figure (``"NVLink4@300GB/s"``)."""
    from dataclasses import replace

    return replace(lk, name=f"{lk.name}@{bandwidth / 1e9:.4g}GB/s", bandwidth=bandwidth,
                   bidirectional=2 * bandwidth)


def _multislice_time(kind: str, nbytes: Any, n: int, per_pod: int, ici: Any, dcn: Any,
                     slice_chips: int | None = None) -> float:
    """Seconds of a collective over ``n`` TPU chips in ``n/per_pod`` pods (slices): ICI inside
    each pod, the data-centre network between them, one after the other (no overlap), as
    XLA's multislice runs it.

    An all-reduce reduce-scatters over the ``per_pod`` chips of a pod on ICI, all-reduces
    each chip's ``1/per_pod`` shard across the pods on its own DCN share, and all-gathers on
    ICI; a reduce-scatter or all-gather is the matching half; an all-to-all sends the part
    bound for other pods, ``(n−per_pod)/n`` of a chip's input, over its DCN share and the
    rest over ICI; a send crosses the DCN once.  ``slice_chips``: the chips of the job in one
    pod (default ``per_pod``: the group's share of a pod is the whole slice there), whose box
    decides the wraparound links (:func:`_ici_time`).
    """
    from fractions import Fraction

    from tmath import comm

    v = Fraction(nbytes)
    pods = n // per_pod

    def on(lk: Any, k: str, vv: Any, m: int) -> float:
        if m == 1 and k != "send":
            return 0.0
        if lk is ici:
            return _ici_time(k, vv, m, lk, slice_chips)
        return comm.collective_time(k, vv, m, bandwidth=lk.bandwidth, alpha=lk.alpha,
                                    topology=lk.topology)

    shard = v / per_pod
    if kind == "all_reduce":
        return (on(ici, "reduce_scatter", v, per_pod) + on(dcn, "all_reduce", shard, pods)
                + on(ici, "all_gather", v, per_pod))
    if kind == "reduce_scatter":
        return on(ici, "reduce_scatter", v, per_pod) + on(dcn, "reduce_scatter", shard, pods)
    if kind == "all_gather":
        return on(dcn, "all_gather", shard, pods) + on(ici, "all_gather", v, per_pod)
    if kind == "all_to_all":
        away = float(v * Fraction(n - per_pod, n)) / dcn.bandwidth + (pods - 1) * dcn.alpha
        return away + on(ici, "all_to_all", v * Fraction(per_pod, n), per_pod)
    return on(dcn, "send", v, 2)


#: DeepSeek-V3's techniques ``plan`` can switch on, with the report's section (source
#: ``deepseek2024v3infra``) and what each changes, in Chinese.
DEEPSEEK_SWITCHES: dict[str, tuple[str, str, str]] = {
    "recompute_norm_up": ("--recompute-norm-up", "§3.2.3",
                          "反向时重算所有 RMSNorm 和 MLA 的上投影：不存它们的输出，改存 MLA 的潜向量"
                          "（重算上投影的 FLOPs 计入硬件 FLOPs，RMSNorm 是逐元素运算，记 0）"),
    "fp8_activations": ("--fp8-activations", "§3.3.3",
                        "Linear 的输入按 FP8 缓存（1 字节），注意力后那个 Linear 的输入用 E5M6（1.5 字节），"
                        "MoE 层 SwiGLU 的输入存 FP8、输出反向时重算；归一化与注意力保持原精度；"
                        "每 128 个元素一个 FP32 缩放因子（3 %）不计"),
    "ep_fp8_dispatch": ("--ep-fp8-dispatch", "§3.3.3",
                        "专家并行分发方向的全交换（前向分发、反向发回下投影输出的梯度）用 FP8（1 字节），"
                        "合并方向的（前向合并、反向发回专家输入的梯度）用 BF16（2 字节）"),
    "node_limit": ("--node-limit", "§3.2.2",
                   "限节点路由：每个 token 至多发往 M 个节点，经 IB 每个节点只发一份（到同号的卡），"
                   "再经 NVLink 转给持有其专家的卡；均匀路由下每个 token 出机器 M·(n−1)/n 份"
                   "（n 是 EP 组跨的节点数），机内转发 k·(g−1)/g 份（g 是每节点的组员数）；"
                   "IB 与 NVLink 两段同时进行，取较慢的一段"),
}
#: Largest node limit ``plan`` accepts (no cluster has more nodes in one EP group).
NODE_LIMIT_MAX = 10_000
#: Plausible range of ``--tokens`` (a run's length in tokens): GPT-3's 3 × 10¹¹ and
#: Llama 3's 1.5 × 10¹³ sit well inside it.
TOKENS_LIMITS = (1.0, 1e16)


def _check_deepseek_switches(cfg: Any, recompute: str, recompute_norm_up: Any,
                             fp8_activations: Any, ep_fp8_dispatch: Any, node_limit: Any,
                             ep: Any) -> dict[str, bool]:
    """Check DeepSeek-V3's switches (:data:`DEEPSEEK_SWITCHES`); the activation ones as
    keyword arguments of :func:`tmath.memory.activation_bytes`."""
    from tmath.errors import show
    from tmath.layout import LayoutError

    for name, v in (("recompute_norm_up", recompute_norm_up), ("fp8_activations", fp8_activations),
                    ("ep_fp8_dispatch", ep_fp8_dispatch)):
        if not isinstance(v, bool):
            raise LayoutError(f"{name}（{DEEPSEEK_SWITCHES[name][0]}）是开关，必须是 True 或 False，"
                              f"收到 {show(v)}", name)
        if v and recompute == "full":
            if name != "ep_fp8_dispatch":
                raise LayoutError(
                    f"{DEEPSEEK_SWITCHES[name][0]} 与 --recompute full 不能同用：整层重计算只存每层的输入，"
                    "没有别的激活可省；取 --recompute none 或 selective", name)
    if node_limit is not None:
        ok = not isinstance(node_limit, bool) and isinstance(node_limit, int) \
            and 1 <= node_limit <= NODE_LIMIT_MAX
        if not ok:
            raise LayoutError(f"node_limit（--node-limit）是每个 token 至多发往的节点数，必须是 1 到 "
                              f"{NODE_LIMIT_MAX:,} 之间的整数（DeepSeek-V3 取 4），收到 {show(node_limit)}",
                              "node_limit")
    for name, on in (("ep_fp8_dispatch", ep_fp8_dispatch), ("node_limit", node_limit is not None)):
        if on and (not cfg.is_moe or ep == 1):
            why = f"{cfg.name} 没有路由专家" if not cfg.is_moe else "ep=1 时没有专家并行的全交换"
            raise LayoutError(f"{DEEPSEEK_SWITCHES[name][0]} 规定专家并行的全交换怎么发，但{why}："
                              "取 MoE 模型和 --ep > 1，或不给它", name)
    return {"recompute_norm_up": recompute_norm_up, "fp8_cache": fp8_activations}


def _check_tokens(tokens: Any) -> float | None:
    """``tokens`` (the run's length) checked against :data:`TOKENS_LIMITS`."""
    from tmath.errors import show
    from tmath.layout import LayoutError

    if tokens is None:
        return None
    lo, hi = TOKENS_LIMITS
    ok = (not isinstance(tokens, bool) and isinstance(tokens, (int, float))
          and math.isfinite(tokens) and lo <= tokens <= hi)
    if not ok:
        raise LayoutError(f"tokens（--tokens）是整个训练的 token 数，必须在 1 到 10¹⁶ 之间"
                          f"（如 14.8e12），收到 {show(tokens)}", "tokens")
    return float(tokens)


def _node_limited_time(c: Any, intra: Any, inter: Any, routing: dict[str, Any]) -> float:
    """Seconds of one node-limited all-to-all (DeepSeek-V3's kernels, report §3.2.2).

    The network part sends ``c.routed[0]`` bytes through the GPU's own NIC, one message to
    each of the other ``nodes − 1`` nodes; the node part forwards ``c.routed[1]`` bytes
    over the node's link, to the other ``per_node − 1`` members.  "Communications via IB and
    NVLink are fully overlapped": the slower of the two, each a latency per message plus
    bytes over the link's bandwidth (:attr:`tmath.hardware.Link.bandwidth`).
    """
    ib, nvl = c.routed
    t_ib = float(ib) / inter.bandwidth + (routing["nodes"] - 1) * inter.alpha
    t_nvl = float(nvl) / intra.bandwidth + (routing["per_node"] - 1) * intra.alpha if nvl else 0.0
    return max(t_ib, t_nvl)


def _up_projection_flops(cfg: Any) -> int:
    """Forward FLOPs per token of MLA's up-projections, all layers (the recomputation of
    ``recompute_norm_up``): 2·(q_lora·N·(nope+rope) + kv_lora·N·(nope+v)) per layer; 0 for
    a model without MLA."""
    if not cfg.is_mla:
        return 0
    n = cfg.num_heads
    q = (cfg.q_lora_rank or 0) * n * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
    kv = cfg.kv_lora_rank * n * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    return cfg.num_layers * 2 * (q + kv)


def _run_length(tokens_per_step: int, step_s: float, overlap_s: float, world: int,
                tokens: float | None) -> dict[str, float | None]:
    """Tokens per second, and for a run of ``tokens`` tokens its GPU-hours and days, at the
    step time without overlap and with all communication hidden (``*_overlap``)."""
    out: dict[str, float | None] = {}
    for tag, t in (("", step_s), ("_overlap", overlap_s)):
        rate = tokens_per_step / t
        out["tokens_per_s" + tag] = rate
        seconds = None if tokens is None else tokens / rate
        out["gpu_hours" + tag] = None if seconds is None else seconds * world / 3600
        out["days" + tag] = None if seconds is None else seconds / 86400
    return out


def _note_deepseek(plan: dict[str, Any], lay: Any, recipe: str) -> None:
    """State, in the plan's conventions, the published recipe and DeepSeek-V3's switches
    it uses (with the report's sections)."""
    from tmath.memory import RECIPE_NOTES_ZH

    notes = plan["conventions_zh"]
    if recipe in RECIPE_NOTES_ZH:
        notes.append(f"训练配方 {recipe}：{RECIPE_NOTES_ZH[recipe]}。")
    on = [k for k in DEEPSEEK_SWITCHES if plan["settings"][k] not in (False, None)]
    for k in on:
        flag, sec, what = DEEPSEEK_SWITCHES[k]
        limit = f" {plan['settings']['node_limit']}" if k == "node_limit" else ""
        extra = ""
        if k == "node_limit" and lay.ep_routing is None:
            extra = "（EP 组在一个节点之内，限节点不起作用）"
        notes.append(f"{flag}{limit}（DeepSeek-V3 报告 {sec}）：{what}{extra}。")
    if on:
        notes.append("DeepSeek-V3 报告 §3.2.3 的另两条不改变这里的数：EMA 存在 CPU 内存（这里本来不计 EMA）；"
                     "MTP 模块与主模型共享词嵌入和输出头（这里不计 MTP 模块）。")


def _ici_box(n: int, lk: Any, slice_chips: int | None = None, kind: str = "all_gather"
             ) -> tuple[tuple[int, bool], ...] | None:
    """The torus box a group of ``n`` chips occupies on ICI link ``lk`` inside a slice of
    ``slice_chips`` chips (default n: the group is the slice), the best for ``kind``
    (:func:`tmath.comm.torus_shape`), ``None`` if ``lk`` is no torus or no box holds n chips."""
    from tmath import comm

    if not getattr(lk, "torus_axes", None):
        return None
    if kind == "send":
        kind = "all_gather"
    return comm.torus_shape(n, axes=lk.torus_axes, wrap_multiple=lk.wrap_multiple,
                            max_side=lk.torus_max_side,
                            slice_chips=max(n, slice_chips or n), kind=kind)


def _ici_time(kind: str, nbytes: Any, n: int, lk: Any, slice_chips: int | None = None) -> float:
    """Seconds of a collective over ``n`` chips of a slice of ``slice_chips`` chips (default
    n) of one TPU pod on ICI link ``lk``: on every axis
    of the group's torus box at once (:func:`tmath.comm.torus_time`), or on one ring threaded
    through the box when that is faster (:func:`tmath.comm.torus_has_ring`: a small block
    without wraparound links), or as one ring of n chips when no box holds them
    (:func:`_ici_box`)."""
    from tmath import comm

    box = _ici_box(n, lk, slice_chips, kind)
    ring = comm.collective_time(kind, nbytes, n, bandwidth=lk.bandwidth, alpha=lk.alpha,
                                topology=lk.topology)
    if box is None:
        return ring
    t = comm.torus_time(kind, nbytes, box, bandwidth=lk.bandwidth, alpha=lk.alpha)
    # a box without wraparound links may do better on one ring threaded through it
    return min(t, ring) if comm.torus_has_ring(box) else t


def _note_torus(plan: dict[str, Any], lk: Any, slice_chips: int) -> None:
    """On a TPU, name the model the ICI collectives were priced with, the slice's box and
    each axis' box in it."""
    from tmath import comm

    box_zh = {}
    for row in plan["collectives"]:
        links = (lk.name, plan["hardware"]["inter_link"]["name"])
        if row["link"] not in links or row["axis"] in box_zh or row["group"] == 1:
            continue
        n = row["group"] if row["per_node"] == row["group"] else row["per_node"]
        box = _ici_box(n, lk, slice_chips, row["kind"]) if row["kind"] != "send" else ()
        if box is None:
            box_zh[row["axis"]] = f"{row['axis']} 组 {n} 颗（摆不成盒子，按一个环计）"
        elif box:
            sides = "×".join(str(a) for a, _ in box)
            lines = [str(a) for a, w in box if not w]
            box_zh[row["axis"]] = (f"{row['axis']} 组 {sides}"
                                   + (f"（边长 {'、'.join(lines)} 无回绕）" if lines else "（各边有回绕）"))
    where = "；".join(box_zh.values()) or "没有跨芯片的组"
    whole = comm.torus_slice(slice_chips, axes=lk.torus_axes, wrap_multiple=lk.wrap_multiple,
                             max_side=lk.torus_max_side)
    if whole is None:
        slice_zh = f"每个 pod 内的 {slice_chips:,} 颗芯片摆不成盒子"
    else:
        sides = "×".join(str(a) for a, _ in whole)
        wrapped = [str(a) for a, w in whole if w]
        slice_zh = (f"每个 pod 内的 slice 取 {sides}（{slice_chips:,} 颗，"
                    + ("各边有回绕" if len(wrapped) == len(whole) else
                       f"边长 {'、'.join(wrapped)} 有回绕" if wrapped else "没有回绕") + "）")
    plan["conventions_zh"].append(
        "TPU 的 ICI 按环面计（tmath.comm.torus_time）：作业在一个 pod 内的芯片是一个 slice，"
        "取最接近立方（正方）的盒子；"
        "一个组占 slice 里的一个子盒子（取对它的集合通信最省的形状），"
        "all-gather、reduce-scatter、all-reduce 在它的各轴上同时走（JAX scaling book），"
        "all-to-all 按维序路由、由最长的一轴（对分带宽）决定；"
        "回绕链路连的是 slice 一条边的两端：v4、v5p 的 slice 由整个 4×4×4 立方体拼成时各边才有回绕，"
        "v5e、v6e 的边是整条 16 时才有；组的一条边只有占满 slice 的那条边时才有回绕，"
        "否则按一条线计；没有回绕的小盒子若穿一个环更快（如 4×2），按那个环计。"
        f"本计划：{slice_zh}；{where}。各轴的盒子分别取最省的，不保证能同时摆进同一个 slice；"
        "组不是盒子时（如 tp = 8 占 16 条边的一半）也按盒子算：两处都偏乐观。")


def build_plan(
    cfg: Any,
    *,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    cp: int = 1,
    zero: int = 0,
    micro_batch: int = 1,
    global_batch: int | None = None,
    seq_len: int = 2048,
    gpu: str = "H100",
    recompute: str = "none",
    sequence_parallel: bool | None = None,
    stage: int | None = None,
    pp_edge_layers: int | None = None,
    recipe: str = "mixed-adam",
    workspace_bytes: float | None = None,
    hbm_bytes: float | None = None,
    stage_layers: Any = None,
    peak_flops: float | None = None,
    gpus_per_node: int | None = None,
    intra_bandwidth: float | None = None,
    inter_bandwidth: float | None = None,
    order: str = "megatron",
    schedule: str = "1f1b",
    virtual_stages: int = 1,
    recompute_norm_up: bool = False,
    fp8_activations: bool = False,
    ep_fp8_dispatch: bool = False,
    node_limit: int | None = None,
    tokens: float | None = None,
) -> dict[str, Any]:
    """The plan of ``cfg`` on a ``dp × tp × pp × cp`` mesh of ``gpu`` (ep inside dp).

    DeepSeek-V3's techniques (report §3.2.2, §3.2.3, §3.3.3; :data:`DEEPSEEK_SWITCHES`):
    ``recompute_norm_up`` and ``fp8_activations`` shrink the activations
    (:func:`tmath.memory.deepseek_activation_terms`; the recomputed up-projections' FLOPs
    join the hardware FLOPs), ``ep_fp8_dispatch`` and ``node_limit`` price the MoE
    all-to-alls as its kernels run them (:func:`_node_limited_time`).  ``tokens`` (a run of
    that many tokens) adds the GPU-hours and days of the run (:func:`_run_length`).

    ``order`` is the mesh order (:data:`tmath.layout.ORDERS`): ``"megatron"`` (tp, cp, dp,
    pp) or ``"llama3"`` (the Llama 3 paper's [TP, CP, PP, DP]); it decides which groups fit
    in a node.

    Raises :class:`tmath.layout.LayoutError` (a ``ValueError`` with ``.field``) for a
    layout that cannot exist, and, before any other work, for an integer argument outside
    its plausible range or a mesh of more than 10⁶ GPUs (:data:`tmath.ledger.SETTING_LIMITS`).
    ``gpu`` must have a node (:data:`tmath.hardware.NODES`); ``sequence_parallel=True``
    needs tp > 1.  Time and memory do not grow with the mesh.  See the module docstring for
    the conventions.

    ``stage_layers`` gives every pipeline stage's layer count (:func:`tmath.layout.build_layout`).
    Any accelerator: ``peak_flops`` (dense 16-bit FLOP/s), ``hbm_bytes``, ``gpus_per_node``,
    ``intra_bandwidth`` and ``inter_bandwidth`` (bytes/s per direction and GPU, inside a node
    and between nodes) replace ``gpu``'s figures, each bounded by :data:`HARDWARE_LIMITS`;
    the links keep ``gpu``'s latencies and topology.
    """
    import tmath
    from tmath import comm
    from tmath.errors import show
    from tmath.hardware import NODES, hardware, link
    from tmath.layout import AXES, LayoutError, build_layout
    from tmath.memory import checkpoint_flops, training_bytes_per_param
    from tmath.serving import WORKSPACE_BYTES_PER_GPU

    _check_bounds({"dp": dp, "tp": tp, "pp": pp, "ep": ep, "cp": cp, "micro_batch": micro_batch,
                   "global_batch": global_batch, "seq_len": seq_len, "stage": stage,
                   "pp_edge_layers": pp_edge_layers})
    saving = _check_deepseek_switches(cfg, recompute, recompute_norm_up, fp8_activations,
                                      ep_fp8_dispatch, node_limit, ep)
    tokens = _check_tokens(tokens)
    usable = "、".join(NODES)  # the GPUs with a node (links, GPUs per node): the only ones here
    try:
        hw = hardware(gpu)
    except (ValueError, TypeError):
        raise LayoutError(f"未知 GPU {show(gpu)}：请用 {usable} 之一", "gpu") from None
    if hw.name not in NODES:
        raise LayoutError(f"{hw.name} 没有节点与链路数据（每节点几张卡、走什么链路），算不了通信："
                          f"请用 {usable} 之一", "gpu")
    nd = NODES[hw.name]
    custom = _custom_hardware({"peak_flops": peak_flops, "hbm_bytes": hbm_bytes,
                               "gpus_per_node": gpus_per_node,
                               "intra_bandwidth": intra_bandwidth,
                               "inter_bandwidth": inter_bandwidth})
    lk_intra, lk_inter = link(nd.intra), link(nd.inter)
    if "intra_bandwidth" in custom:
        lk_intra = _rated(lk_intra, custom["intra_bandwidth"])
    if "inter_bandwidth" in custom:
        lk_inter = _rated(lk_inter, custom["inter_bandwidth"])
    per_node_size = custom.get("gpus_per_node", nd.size)
    flops = custom.get("peak_flops", hw.dense_flops)
    if sequence_parallel is True and tp == 1:
        raise LayoutError("序列并行把激活按序列切到张量并行组的各卡上，tp=1 时无从切分："
                          "取 tp > 1，或不开序列并行（off）", "sequence_parallel")
    try:
        rb = training_bytes_per_param(recipe)
    except ValueError as e:
        raise LayoutError(str(e), "recipe") from None
    lay = build_layout(
        cfg, dp=dp, tp=tp, pp=pp, ep=ep, cp=cp, zero=zero, micro_batch=micro_batch,
        global_batch=global_batch, seq_len=seq_len, recompute=recompute,
        sequence_parallel=sequence_parallel, stage=stage, pp_edge_layers=pp_edge_layers,
        stage_layers=stage_layers,
        act_bytes=2, param_bytes=rb.weights, grad_bytes=rb.grads, optimizer_bytes=rb.optimizer,
        gpus_per_node=per_node_size, intra_link=lk_intra.name, inter_link=lk_inter.name,
        order=order, ep_fp8_dispatch=ep_fp8_dispatch, node_limit=node_limit)
    cap = custom.get("hbm_bytes", hw.hbm_bytes)
    work = WORKSPACE_BYTES_PER_GPU if workspace_bytes is None else float(workspace_bytes)

    act = _activation_per_layer(cfg, lay, saving)
    sched = _schedule(lay, schedule, virtual_stages)
    stages = []
    for s, mem in enumerate(_memory_by_stage(lay, act, sched)):
        total = sum(mem.values())
        stages.append({"stage": s, **mem, "total": total,
                       "fits": bool(total + work <= cap)})
    mem = {k: v for k, v in stages[lay.stage].items() if k not in ("stage", "total", "fits")}
    worst = max(stages, key=lambda r: r["total"])

    # communication: bytes and seconds on the links each axis rides
    colls = lay.collectives()
    if sched["weight_copies"] == 2:  # DualPipe: two copies of the parameters to synchronise
        colls = _dualpipe_dp(colls)
    # a TPU job's chips in one pod are one slice: its box decides the wraparound links
    slice_chips = min(lay.world_size, lay.gpus_per_node)
    comm_s = dict.fromkeys(AXES, 0.0)
    coll_rows = []
    for c in colls:
        per_node = _members_per_node(lay, c)
        spans = per_node < c.group and c.link == lay.inter_link
        if c.routed is not None:  # DeepSeek-V3's node-limited all-to-all
            t = _node_limited_time(c, lk_intra, lk_inter, lay.ep_routing)
        elif lk_intra.step_latency is None:  # not an NCCL link (TPU ICI, DCN): the α–β model
            if spans:  # a group larger than a pod: ICI inside each pod, DCN between pods
                t = _multislice_time(c.kind, c.nbytes, c.group, per_node, lk_intra, lk_inter,
                                     slice_chips)
            else:  # inside one pod: the group's torus box in the slice, every axis at once
                t = _ici_time(c.kind, c.nbytes, c.group, lk_intra, slice_chips)
        else:
            t = comm.nccl_time(c.kind, c.nbytes, c.group, intra=lk_intra,
                               inter=lk_inter if spans else None,
                               per_node=per_node if spans else None)
        # the label is the link the time is computed on: a group whose members all share
        # a node (a pipeline pair, KV replicas inside a wider TP group) rides its NVLink
        used = lay.inter_link if spans else lay.intra_link
        if c.routed is not None:  # node-limited: the network to each node, then its link
            used = f"{lay.inter_link}+{lay.intra_link}"
        comm_s[c.axis] += c.count * t
        coll_rows.append({**c.as_dict(), "link": used, "per_node": per_node, "seconds_each": t,
                          "seconds": c.count * t})
    _schedule_comm(sched, comm_s, coll_rows)
    comm_total = sum(comm_s.values())
    # each axis' links: those its collectives ride ("NVLink4+IB-NDR" when they differ); an
    # axis that sends nothing keeps the layout's link of its group
    axis_links: dict[str, list[str]] = {}
    for row in coll_rows:
        seen = axis_links.setdefault(row["axis"], [])
        if row["link"] not in seen:
            seen.append(row["link"])
    links = {a: "+".join(axis_links[a]) if a in axis_links else lay.links[a] for a in AXES}

    # compute
    fl = checkpoint_flops(cfg, lay.seq_len, lay.global_batch, strategy=recompute, causal=True)
    model_flops, hw_flops = fl.base, fl.total
    if recompute_norm_up:
        hw_flops += _up_projection_flops(cfg) * lay.global_batch * lay.seq_len
    compute_s = hw_flops / (lay.world_size * flops)
    bubble = float(sched["bubble_fraction"])
    pipeline_s = compute_s * (1 + sched["bubble_ratio"])
    step_s = pipeline_s + comm_total
    overlap_s = max(pipeline_s, comm_total)
    feasible = all(r["fits"] for r in stages)
    p = lay.params_per_gpu
    plan = {
        "model": {"name": cfg.name, "model_type": cfg.model_type, "num_layers": cfg.num_layers,
                  "num_heads": cfg.num_heads, "num_kv_heads": cfg.num_kv_heads,
                  "hidden_size": cfg.hidden_size, "n_routed_experts": cfg.n_routed_experts,
                  "params": tmath.count_params(cfg).total},
        "settings": {"dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "cp": lay.cp,
                     "zero": lay.zero, "micro_batch": lay.micro_batch,
                     "global_batch": lay.global_batch, "seq_len": lay.seq_len,
                     "recompute": lay.recompute, "sequence_parallel": lay.sequence_parallel,
                     "gpu": hw.name, "recipe": recipe, "stage_layers": list(lay.stage_layers),
                     "gpus_per_node": lay.gpus_per_node,
                     "recompute_norm_up": recompute_norm_up, "fp8_activations": fp8_activations,
                     "ep_fp8_dispatch": ep_fp8_dispatch, "node_limit": node_limit,
                     "tokens": tokens},
        "world_size": lay.world_size,
        "micro_batches": lay.micro_batches,
        "bubble_fraction": bubble,
        "schedule": {k: v for k, v in sched.items() if k != "in_flight"},
        "stage": {"index": lay.stage, "layers": [lay.layers.start, lay.layers.stop],
                  "dense_layers": lay.dense_layers, "moe_layers": lay.moe_layers,
                  "in_flight_micro_batches": sched["in_flight"][lay.stage],
                  "holds_embedding": bool(p["embedding"]), "holds_lm_head": bool(p["lm_head"])},
        "per_gpu": {"heads": lay.heads_per_gpu, "kv_heads": lay.kv_heads_per_gpu,
                    "kv_replicas": lay.tp_split.kv_replicas, "experts": lay.experts_per_gpu,
                    "tokens_per_micro_batch": lay.tokens_per_gpu, "params": p},
        "memory_bytes_per_gpu": mem,
        "memory_by_stage": stages,
        "activation_block": act["block"],
        "activation_checked": act["checked"],
        "comm_bytes_per_gpu": _schedule_bytes(sched, lay.comm_bytes_per_gpu()),
        "links": links,
        "collectives": coll_rows,
        "comm_time_s": comm_s,
        "model_flops": model_flops,
        "hardware_flops": hw_flops,
        "compute_time_s": compute_s,
        "pipeline_time_s": pipeline_s,
        "step_time_s": step_s,
        "step_time_overlap_s": overlap_s,
        "mfu": model_flops / (lay.world_size * flops * step_s),
        **_run_length(lay.global_batch * lay.seq_len, step_s, overlap_s, lay.world_size, tokens),
        "hardware": {"name": hw.name, "dense_flops": flops, "hbm_bytes": cap,
                     "gpus_per_node": lay.gpus_per_node,
                     "intra_link": {"name": lk_intra.name, "bandwidth": lk_intra.bandwidth},
                     "inter_link": {"name": lk_inter.name, "bandwidth": lk_inter.bandwidth},
                     "custom": sorted(custom),
                     # NCCL's cost model on GPU links; the plain α–β model on TPU ICI and DCN
                     "comm_model": "alpha-beta" if lk_intra.step_latency is None else "nccl"},
        "hbm_bytes_per_gpu": cap,
        "workspace_bytes_per_gpu": work,
        "worst_stage": worst["stage"],
        "feasible": feasible,
        "conventions_zh": list(CONVENTIONS_ZH),
    }
    plan["verdict_zh"] = _verdict(plan)
    _note_schedule(plan)
    _note_order(plan, order)
    _note_deepseek(plan, lay, recipe)
    if lk_intra.step_latency is None and getattr(lk_intra, "torus_axes", None):
        _note_torus(plan, lk_intra, slice_chips)
    return plan

# --- pipeline schedules (tmath.schedule) --------------------------------------------------

#: ``--schedule`` choices, and the bound of ``--virtual-stages``.
SCHEDULE_CHOICES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe")
MAX_VIRTUAL_STAGES = 64


def _virtual_stages_arg(args: argparse.Namespace) -> int:
    v = getattr(args, "virtual_stages", None)
    return 1 if v is None else v


def _schedule(lay: Any, schedule: str, virtual_stages: int) -> dict[str, Any]:
    """The pipeline schedule's bubble, activations in flight per stage and weight copies,
    from :mod:`tmath.schedule`'s closed forms (its simulator checks them in the tests),
    with F = 1, B = 2 (the whole backward), W = 1 and F&B = F + B; a ``LayoutError``
    naming the flag when the schedule cannot run on this layout."""
    from tmath import schedule as sc
    from tmath.layout import LayoutError

    if schedule not in SCHEDULE_CHOICES:
        raise LayoutError(f"--schedule {schedule!r} 未知：请用 {'、'.join(SCHEDULE_CHOICES)} 之一",
                          "schedule")
    v = virtual_stages
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_VIRTUAL_STAGES:
        raise LayoutError(f"--virtual-stages 必须是 1 到 {MAX_VIRTUAL_STAGES} 的整数，收到 {v!r}",
                          "virtual_stages")
    pp, m = lay.pp, lay.micro_batches
    if schedule == "interleaved" and v == 1:
        raise LayoutError("交错 1F1B 需要 --virtual-stages V（V ≥ 2，每张卡放 V 个模型块）",
                          "virtual_stages")
    if schedule != "interleaved" and v != 1:
        raise LayoutError(f"--virtual-stages 只配 --schedule interleaved（现在是 {schedule}）",
                          "virtual_stages")
    if pp == 1 and schedule != "1f1b":
        raise LayoutError(f"--schedule {schedule} 是流水线的调度，pp=1 时没有流水线：取 pp ≥ 2"
                          "，或不给 --schedule", "schedule")
    if schedule == "interleaved":
        # chunks of ⌈n/V⌉ and ⌊n/V⌋ layers (the larger first), as Megatron-Core's
        # --pipeline-model-parallel-layout allows; the 2021 paper's even split is n % V == 0
        bad = [n for n in lay.stage_layers if n < v]
        if bad:
            raise LayoutError(f"交错 1F1B 把每段的层分成 V={v} 块，每块至少 1 层：各段层数 "
                              f"{list(lay.stage_layers)} 中有 {bad[0]} 层的一段不够分；"
                              f"取 --virtual-stages ≤ {min(lay.stage_layers)}", "virtual_stages")
    if schedule == "zb-h1" and m < pp:
        raise LayoutError(f"ZB-H1 的气泡公式 (p−1)(F+B−2W) 要求每条流水线的微批次数 n_mb ≥ pp："
                          f"n_mb = G/(dp·b) = {m}，pp = {pp}；加大 --global-batch", "global_batch")
    try:
        sc.check_schedule(schedule, pp, m, v)
    except ValueError as e:
        msg = str(e).split("：", 1)
        field = {"pp": "pp", "virtual_stages": "virtual_stages"}.get(msg[0], "global_batch")
        why = msg[-1] + ("（n_mb = G/(dp·b)）" if field == "global_batch" else "")
        raise LayoutError(why, field) from None
    ratio = sc.bubble_ratio(schedule, pp, m, v, t_forward=1, t_backward=2, t_weight=1)
    flights = [sc.in_flight(schedule, pp, m, s, v) for s in range(pp)]  # closed forms: O(pp)
    return {"name": schedule, "name_zh": sc.NAMES_ZH[schedule], "virtual_stages": v,
            "bubble_formula": sc.BUBBLE_FORMULAS[schedule],
            "bubble_ratio": float(ratio), "bubble_fraction": float(ratio / (1 + ratio)),
            "weight_copies": sc.WEIGHT_COPIES[schedule],
            "chunk_layers": [_chunk_layers(n, v) for n in lay.stage_layers]
            if schedule == "interleaved" else None,
            "micro_batch_group": sc.interleave_group(pp, m) if schedule == "interleaved" else None,
            "in_flight": [f if isinstance(f, int) else float(f) for f in flights],
            "pp_messages_factor": v}


def _chunk_layers(n: int, v: int) -> list[int]:
    """A stage of ``n`` layers in ``v`` interleaved chunks: n mod v chunks of ⌈n/v⌉ layers
    first, then ⌊n/v⌋ (7 in 2: [4, 3]; 7 in 4: [2, 2, 2, 1])."""
    q, r = divmod(n, v)
    return [q + 1] * r + [q] * (v - r)


def _dualpipe_memory(rows: list[dict[str, int]]) -> list[dict[str, int]]:
    """DualPipe: GPU i holds stage i and stage pp−1−i (two copies of the parameters, each
    with its gradients and optimizer states); its pp + 1 chunks in flight are counted at
    the larger of the two stages' activations (an upper bound)."""
    n = len(rows)
    out = []
    for i, r in enumerate(rows):
        o = rows[n - 1 - i]
        out.append({"weights": r["weights"] + o["weights"], "grads": r["grads"] + o["grads"],
                    "optimizer": r["optimizer"] + o["optimizer"],
                    "activations": max(r["activations"], o["activations"])})
    return out


def _dualpipe_dp(colls: list[Any]) -> list[Any]:
    """DualPipe keeps two copies of the model parameters (DeepSeek-V3 report §3.2.1): GPU i
    holds stage i and stage pp−1−i, so its data-parallel collectives (gradients, ZeRO's
    weights) carry the bytes of both, counted as twice the stage shown."""
    from dataclasses import replace

    return [replace(c, nbytes=2 * c.nbytes) if c.axis == "dp" else c for c in colls]


def _schedule_comm(sched: dict[str, Any], comm_s: dict[str, float],
                   rows: list[dict[str, Any]]) -> None:
    """Interleaved 1F1B: every micro-batch crosses each GPU V times, V× the pipeline sends."""
    v = sched["pp_messages_factor"]
    if v == 1:
        return
    comm_s["pp"] *= v
    for r in rows:
        if r["axis"] == "pp":
            r["count"] *= v
            r["seconds"] *= v


def _schedule_bytes(sched: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
    v = sched["pp_messages_factor"]
    out = sent if v == 1 else {**sent, "pp": sent["pp"] * v}
    if sched["weight_copies"] == 2:  # DualPipe: the two copies' data-parallel bytes
        out = {**out, "dp": out["dp"] * 2}
    return out


def _mb(x: float) -> str:
    return f"{x:g}"


def _note_schedule(plan: dict[str, Any]) -> None:
    """State the schedule's conventions in ``plan``'s conventions."""
    sc = plan["schedule"]
    text = (f"流水线调度 {sc['name_zh']}（--schedule {sc['name']}）：气泡 {sc['bubble_formula']}，"
            "取 F = 1、B = 2（整个反向）、W = 1（反向中算权重梯度的部分）、F&B = F + B；"
            "步时 = 计算 ×（1 + 气泡/理想计算时间）。激活按该调度的在途微批次数（整段为单位）计。")
    if sc["name"] == "interleaved":
        text += f"每张卡 V = {sc['virtual_stages']} 个模型块，流水线的点对点发送是 1F1B 的 V 倍。"
        text += (f"微批次按每组 N = {sc['micro_batch_group']} 个轮流过各块（Megatron-Core 的 "
                 "microbatch_group_size_per_vp_stage：n_mb 是 pp 的倍数时取 N = pp，否则取它接受的最小 N）。")
        chunks = sc["chunk_layers"]
        if any(max(c) != min(c) for c in chunks):
            uneven = sorted({"+".join(map(str, c)) for c in chunks if max(c) != min(c)})
            text += (f"有的段层数不能被 V 整除，各块层数相差 1（{'、'.join(uneven)}，多的在前，"
                     "Megatron-Core 的 --pipeline-model-parallel-layout 允许）；"
                     "气泡仍按各块等长的 (p−1)(F+B)/V 计（近似：不等长的块没有模拟）。")
    if sc["name"] == "zb-h1":
        text += "一个微批次的激活算到它的 W 结束为止（W 其实只需其中一部分：偏保守）。"
    if sc["weight_copies"] == 2:
        text += ("DualPipe 第 i 张卡放第 i 段和第 pp−1−i 段：参数两份，各带梯度与优化器状态；"
                 "在途 pp + 1 块的激活按两段中较大的一段计（上界）；数据并行的梯度同步（和 ZeRO 的参数收集）"
                 "要同步两份参数，按所示段的两倍字节计。")
    plan["conventions_zh"].append(text)



def _note_order(plan: dict[str, Any], order: str) -> None:
    """Record the mesh order in ``plan``'s settings and conventions."""
    from tmath.layout import ORDERS

    plan["settings"]["order"] = order
    axes = "、".join(ORDERS[order])
    who = "Megatron-LM 的排法" if order == "megatron" else "Llama 3 论文的 [TP, CP, PP, DP]"
    plan["conventions_zh"].append(
        f"卡号按 {axes} 的顺序排（{who}，--order {order}；越靠前的轴组员的卡号越近）：一个组的"
        f"组员都在同一节点（{plan['settings']['gpus_per_node']} 卡）内时走节点内的链路，否则走网络。")


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f} GB"


def _verdict(plan: dict[str, Any]) -> str:
    w = plan["memory_by_stage"][plan["worst_stage"]]
    cap, work = plan["hbm_bytes_per_gpu"], plan["workspace_bytes_per_gpu"]
    need = w["total"] + work
    where = f"最紧的是第 {w['stage']} 段" if len(plan["memory_by_stage"]) > 1 else "每张卡"
    if plan["schedule"]["weight_copies"] == 2:  # DualPipe: GPU i holds stages i and pp−1−i
        i, pp = w["stage"], len(plan["memory_by_stage"])
        where = f"最紧的是卡 {i}（第 {i} 段与第 {pp - 1 - i} 段）"
    if plan["feasible"]:
        return (f"可行：{where}需要 {_gb(need)}（含 {_gb(work)} 工作区），"
                f"{plan['settings']['gpu']} 每卡 {_gb(cap)}，余 {_gb(cap - need)}")
    return (f"不可行：{where}需要 {_gb(need)}（含 {_gb(work)} 工作区），超过 "
            f"{plan['settings']['gpu']} 的 {_gb(cap)}")


def _worst_card_lines(plan: dict[str, Any]) -> list[str]:
    """The card the verdict speaks of, when it is not the stage the text describes: its total
    and activations, so the memory table and the verdict name the same card."""
    i = plan["worst_stage"]
    if i == plan["stage"]["index"]:
        return []
    w, pp = plan["memory_by_stage"][i], len(plan["memory_by_stage"])
    who = (f"卡 {i}（第 {i} 段与第 {pp - 1 - i} 段）" if plan["schedule"]["weight_copies"] == 2
           else f"第 {i} 段的卡")
    return [f"  最紧的是{who}：权重 {_bytes(w['weights'])}、梯度 {_bytes(w['grads'])}、"
            f"优化器状态 {_bytes(w['optimizer'])}、激活 {_bytes(w['activations'])}，"
            f"合计 {_bytes(w['total'])}（部署的判定按这张卡）"]


_PHASE_ZH = {"forward": "前向", "backward": "反向", "recompute": "重算", "step": "每步一次"}


def _bytes(n: float) -> str:
    from tmath.fmt import bytes_si

    return bytes_si(n, 2) if n else "0"


def _columns(text: str) -> int:
    """Terminal columns of ``text``: a CJK character takes two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


_BREAK_AFTER = " ，、；：）"
_NO_START = "，、；：）。"


def _wrap(line: str, width: int) -> list[str]:
    """``line`` cut into pieces of at most ``width`` columns, after a space or a Chinese
    comma where one is near; continuation lines keep the indent and add four spaces."""
    if _columns(line) <= width:
        return [line]
    lead = " " * (len(line) - len(line.lstrip(" ")) + 4)
    out, rest, first = [], line, True
    while _columns(rest) > (room := width if first else width - len(lead)):
        cut, cols, best = 0, 0, 0
        for i, ch in enumerate(rest):
            cols += _columns(ch)
            if cols > room:
                break
            cut = i + 1
            glued = ch == " " and 0 < i < len(rest) - 1 and rest[i - 1].isdigit() \
                and rest[i + 1].isalpha()  # "85.90 GB": keep a number with its unit
            if ch in _BREAK_AFTER and cols > room // 2 and not glued:
                best = i + 1
        cut = best or cut
        while 1 < cut < len(rest) and rest[cut] in _NO_START:  # no line starts with a comma
            cut -= 1
        out.append((rest[:cut] if first else lead + rest[:cut]).rstrip())
        rest, first = rest[cut:].lstrip(" "), False
    if rest:
        out.append(lead + rest if not first else rest)
    return out


def _custom_line(hw: dict[str, Any]) -> str:
    """The hardware a reader gave on the command line, as the text output states it."""
    return (f"硬件按给定的数字（其余取 {hw['name']} 的）："
            f"16 位稠密峰值 {hw['dense_flops'] / 1e12:,.4g} TFLOP/s，"
            f"HBM {hw['hbm_bytes'] / 1e9:,.4g} GB，每节点 {hw['gpus_per_node']:,} 张卡，"
            f"节点内 {hw['intra_link']['bandwidth'] / 1e9:,.4g} GB/s、"
            f"节点间 {hw['inter_link']['bandwidth'] / 1e9:,.4g} GB/s（每卡每方向）")


def _run_lines(plan: dict[str, Any]) -> list[str]:
    """Throughput, and a run's GPU-hours and days, when ``--tokens`` was given (without
    it the text is as before; ``--json`` always has ``tokens_per_s``)."""
    from tmath.fmt import sci

    n = plan["settings"].get("tokens")
    lines = []
    if n is not None:
        lines.append(f"  吞吐                        每秒 {plan['tokens_per_s']:,.0f} token"
                     f"（通信全部藏住时 {plan['tokens_per_s_overlap']:,.0f}）")
        lines.append(f"  训练 {sci(n, 4)} 个 token     {plan['gpu_hours']:,.0f} GPU·时，"
                     f"{plan['days']:,.1f} 天（通信全部藏住时 {plan['gpu_hours_overlap']:,.0f} GPU·时，"
                     f"{plan['days_overlap']:,.1f} 天）")
    return lines


def render_text(plan: dict[str, Any], width: int | None = None) -> str:
    """The plan as the Chinese text ``tmath plan`` prints; the verdict comes first.

    ``width`` (columns, a CJK character counting two) wraps every longer line, for a page
    or a narrow terminal; ``None`` leaves the lines whole.
    """
    from tmath.comm import KIND_ZH
    from tmath.layout import AXIS_ZH

    s, st, g = plan["settings"], plan["stage"], plan["per_gpu"]
    m = plan["memory_bytes_per_gpu"]
    lines = [f"部署：{plan['verdict_zh']}"]
    if not plan["feasible"]:
        lines.append("下面的数字假设这一布局存在，只作对照。")
    lines += [
        "",
        f"模型 {plan['model']['name']}，{s['gpu']} × {plan['world_size']:,}"
        f"（dp={s['dp']} × tp={s['tp']} × pp={s['pp']} × cp={s['cp']}；ep={s['ep']} 从 dp 中划出），"
        f"ZeRO-{s['zero']}，重计算 {s['recompute']}，序列并行{'开' if s['sequence_parallel'] else '关'}",
        *([_custom_line(plan["hardware"])] if plan["hardware"]["custom"] else []),
        f"每步 {s['global_batch']:,} 条序列 × {s['seq_len']:,} token；微批次 {s['micro_batch']} 条，"
        f"每条流水线 n_mb = {plan['micro_batches']} 个；{plan['schedule']['name_zh']} 气泡占一步 "
        f"{plan['bubble_fraction']:.1%}（占理想计算时间 {plan['schedule']['bubble_ratio']:.1%}）",
        "",
        f"第 {st['index']} 段（共 {s['pp']} 段，层 {st['layers'][0]}–{st['layers'][1] - 1}，"
        f"稠密 {st['dense_layers']} 层、MoE {st['moe_layers']} 层）的一张卡持有：",
        f"  query 头 {g['heads']} 个，KV 头 {g['kv_heads']} 个"
        + (f"（每个 KV 头复制在 {g['kv_replicas']} 张卡上）" if g["kv_replicas"] > 1 else "")
        + (f"，路由专家 {g['experts']} 个" if g["experts"] else "")
        + f"；每个微批次 {g['tokens_per_micro_batch']:,} 个 token",
        f"  参数 {sum(g['params'].values()):,} 个"
        + ("（含词嵌入）" if st["holds_embedding"] else "")
        + ("（含 LM head）" if st["holds_lm_head"] else ""),
        "",
        "每卡显存：",
        f"  权重        {_bytes(m['weights'])}",
        f"  梯度        {_bytes(m['grads'])}",
        f"  优化器状态  {_bytes(m['optimizer'])}",
        f"  激活        {_bytes(m['activations'])}（同时在途 {_mb(st['in_flight_micro_batches'])} 个微批次）",
        f"  合计        {_bytes(sum(m.values()))}（另留工作区 {_bytes(plan['workspace_bytes_per_gpu'])}；"
        f"HBM {_bytes(plan['hbm_bytes_per_gpu'])}）",
        *_worst_card_lines(plan),
        "",
        "每个优化器步每卡发出的字节（环形算法）：",
    ]
    for a in ("dp", "tp", "pp", "ep", "cp"):
        b = plan["comm_bytes_per_gpu"][a]
        t = plan["comm_time_s"][a]
        where = (f"走 {plan['links'][a].replace('+', ' 与 ')}，约 {t * 1e3:,.1f} ms" if b
                 else "（不用）")
        lines.append(f"  {AXIS_ZH[a]}  {_bytes(b)}  {where}")
    lines += ["", "其中（每个优化器步）："]
    for c in plan["collectives"]:
        split = (f"：网络 {_bytes(c['network_bytes_sent'])}、节点内 {_bytes(c['node_bytes_sent'])}"
                 if "network_bytes_sent" in c else "")
        lines.append(f"  [{c['axis']}，{_PHASE_ZH[c['phase']]}] {KIND_ZH[c['kind']]} ×{c['count']:,}"
                     f"（组内 {c['group']} 张卡，数组 {_bytes(c['nbytes'])}，每次发出 "
                     f"{_bytes(c['bytes_sent'])}{split}，走 {c['link'].replace('+', ' 与 ')}）："
                     f"{c['what_zh']}")
    lines += [
        "",
        "一个优化器步的时间估计：",
        f"  计算（峰值算力，含重计算）  {plan['compute_time_s']:.4g} s",
        f"  加上流水线气泡              {plan['pipeline_time_s']:.4g} s",
        f"  通信（{'NCCL 模型' if plan['hardware']['comm_model'] == 'nccl' else 'α–β 模型'}，不重叠）   "
        f"{sum(plan['comm_time_s'].values()):.4g} s",
        f"  合计（峰值算力，不重叠）    {plan['step_time_s']:.4g} s；通信全部藏住时 "
        f"{plan['step_time_overlap_s']:.4g} s",
        f"  由此的 MFU（计算按峰值）    {plan['mfu']:.1%}"
        + ("" if plan["feasible"] else "（这一布局放不下，MFU 只作对照）"),
        *_run_lines(plan),
        "",
        "约定：",
    ]
    lines += [f"  {i}. {c}" for i, c in enumerate(plan["conventions_zh"], 1)]
    if not plan["activation_checked"]:
        lines.append(f"  注：激活按 {plan['activation_block']} 块的逐项公式估算，这一架构未与实测核对。")
    if width is not None:
        from tmath._checks import int_arg

        width = int_arg("width", width, 20)
        lines = [piece for line in lines for piece in _wrap(line, width)]
    return "\n".join(lines)


_EPILOG = "约定：\n" + "\n".join(f"  {i}. {c}" for i, c in enumerate(CONVENTIONS_ZH, 1)) + (
    "\n\n例：python -m tmath plan --preset llama3.1-405b --dp 128 --tp 8 --pp 16 --zero 1 "
    "--micro-batch 1 --global-batch 2048 --seq-len 8192 --pp-edge-layers 7\n"
    "    python -m tmath plan --preset deepseek-v3 --gpu H800 --dp 128 --pp 16 --ep 64 --zero 1 "
    "--global-batch 15360 --seq-len 4096 --stage-layers '3,4*14,2' --recipe deepseek-v3-fp8 "
    "--recompute-norm-up --fp8-activations --ep-fp8-dispatch --node-limit 4 --schedule dualpipe "
    "--tokens 14.8e12")


def add_plan_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``plan`` on the command line's subparsers (``tmath.cli`` calls this)."""
    p = subparsers.add_parser(
        "plan", help="一个训练布局在多卡上的账：每卡显存、各轴通信字节、气泡、步时、可行性",
        description="一个模型在 dp × tp × pp × cp 张卡上训练时，每张卡的显存、每个优化器步在各并行轴上发出的"
                    "字节、流水线气泡、步时估计与可行性判断。",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", help="Hugging Face 的 config.json")
    p.add_argument("--preset", help="预设模型名（见 `tmath presets`）")
    for flag, what in (("--dp", "数据并行副本数 n_DP"), ("--tp", "张量并行卡数 n_TP"),
                       ("--pp", "流水线段数 n_PP"), ("--ep", "专家并行卡数 n_EP（须整除 dp）"),
                       ("--cp", "上下文并行卡数 n_CP（须整除 seq-len）")):
        p.add_argument(flag, type=int, default=1, help=f"{what}，默认 1")
    p.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3), help="ZeRO 阶段，默认 0")
    p.add_argument("--micro-batch", type=int, default=1, help="每个微批次的序列条数 b，默认 1")
    p.add_argument("--global-batch", type=int, default=None,
                   help="每个优化器步的序列条数 G（dp×b 的倍数），默认 dp×b")
    p.add_argument("--seq-len", type=int, default=2048, help="序列长度 T，默认 2048")
    from tmath.hardware import NODES

    p.add_argument("--gpu", default="H100",
                   help=f"GPU 名（{'、'.join(NODES)}：有节点与链路数据的），默认 H100")
    p.add_argument("--recompute", default="none", choices=("none", "selective", "full"),
                   help="激活重计算，默认 none")
    p.add_argument("--sequence-parallel", choices=("on", "off"), default=None,
                   help="序列并行，默认 tp > 1 时开")
    p.add_argument("--stage", type=int, default=None, help="描述第几段（0 起），默认中间一段")
    p.add_argument("--pp-edge-layers", type=int, default=None,
                   help="首末两段各放的层数（其余层平均分给中间各段）")
    p.add_argument("--stage-layers", default=None, metavar="LIST",
                   help="逐段给出层数，逗号隔开，重复的写成 层数*段数（如 DeepSeek-V3 的 61 层分 16 段："
                        "3,4*14,2）；与 --pp-edge-layers 二选一")
    for flag, what in (("--peak-tflops", "每卡 16 位稠密峰值算力（TFLOP/s）"),
                       ("--hbm-gb", "每卡显存（GB，10⁹ 字节）"),
                       ("--intra-gbs", "节点内链路带宽（GB/s，每卡每方向）"),
                       ("--inter-gbs", "节点间链路带宽（GB/s，每卡每方向）")):
        p.add_argument(flag, type=float, default=None, help=f"{what}，替换 --gpu 的数字")
    p.add_argument("--gpus-per-node", type=int, default=None,
                   help="每节点卡数（TPU：一个 pod 或 slice 的芯片数），替换 --gpu 的数字")
    from tmath.memory import RECIPES

    p.add_argument("--recipe", default="mixed-adam",
                   help=f"训练配方（每参数字节数）：{'、'.join(RECIPES)}；默认 mixed-adam")
    for key in ("recompute_norm_up", "fp8_activations", "ep_fp8_dispatch"):
        flag, sec, what = DEEPSEEK_SWITCHES[key]
        p.add_argument(flag, action="store_true",
                       help=f"DeepSeek-V3 报告 {sec}：{what}".replace("%", "%%"))
    flag, sec, what = DEEPSEEK_SWITCHES["node_limit"]
    p.add_argument(flag, type=int, default=None, metavar="M",
                   help=f"DeepSeek-V3 报告 {sec}：{what}（DeepSeek-V3 取 4）；默认不限")
    p.add_argument("--tokens", type=float, default=None, metavar="N",
                   help="整个训练的 token 数（如 14.8e12）：按估计的步时给出 GPU·时与天数")
    p.add_argument("--order", default="megatron", choices=("megatron", "llama3"),
                   help="卡号的排法：megatron（tp、cp、dp、pp），或 llama3（Llama 3 论文的 "
                        "[TP, CP, PP, DP]）；默认 megatron")
    p.add_argument("--schedule", default="1f1b", choices=SCHEDULE_CHOICES,
                   help="流水线调度：gpipe、1f1b（默认）、interleaved（交错 1F1B，配 --virtual-stages）、"
                        "zb-h1（零气泡）、dualpipe（DeepSeek-V3，参数两份）")
    p.add_argument("--virtual-stages", type=int, default=None, metavar="V",
                   help=f"交错 1F1B 每张卡的模型块数 V（2 到 {MAX_VIRTUAL_STAGES}），"
                        "只配 --schedule interleaved")
    p.add_argument("--json", action="store_true", help="输出 JSON")
    return p


def _field_flag(field: str) -> str:
    if field in _HW_FLAGS:  # the hardware figures: the flag names the unit (--peak-tflops)
        return _HW_FLAGS[field][0]
    return "--" + field.replace("_", "-")


def run_plan(args: argparse.Namespace) -> int:
    """Run ``tmath plan``: print the plan (text or ``--json``); 2 on bad input."""
    import tmath
    from tmath.layout import LayoutError

    def fail(msg: str, field: str) -> int:
        msg = " ".join(str(msg).split())
        if getattr(args, "json", False):
            print(json.dumps({"error": msg, "field": field}, ensure_ascii=False))
        else:
            flag = _field_flag(field) if field != "config" else "CONFIG"
            named = msg.startswith(flag) or f"（{flag}）" in msg  # the message names it first
            print(f"tmath: 错误：{msg}" if named else f"tmath: 错误：{flag}：{msg}",
                  file=sys.stderr)
        return 2

    if (args.config is None) == (args.preset is None):
        return fail("给出 CONFIG.json 或 --preset NAME 二者之一", "config")
    if args.preset is not None and args.preset not in tmath.presets():
        from tmath.errors import show

        return fail(f"--preset {show(args.preset)} 未知：请用 {'、'.join(tmath.presets())} 之一"
                    "（tmath presets 列出全部）", "preset")
    try:
        cfg = tmath.preset(args.preset) if args.preset else tmath.ModelConfig.from_hf(args.config)
    except (ValueError, TypeError, OSError) as e:
        return fail(str(e), "preset" if args.preset else "config")
    sp = None if args.sequence_parallel is None else args.sequence_parallel == "on"
    try:
        plan = build_plan(
            cfg, dp=args.dp, tp=args.tp, pp=args.pp, ep=args.ep, cp=args.cp, zero=args.zero,
            micro_batch=args.micro_batch, global_batch=args.global_batch, seq_len=args.seq_len,
            gpu=args.gpu, recompute=args.recompute, sequence_parallel=sp, stage=args.stage,
            pp_edge_layers=args.pp_edge_layers, recipe=args.recipe,
            stage_layers=args.stage_layers,
            peak_flops=None if args.peak_tflops is None else args.peak_tflops * 1e12,
            hbm_bytes=None if args.hbm_gb is None else args.hbm_gb * 1e9,
            gpus_per_node=args.gpus_per_node,
            intra_bandwidth=None if args.intra_gbs is None else args.intra_gbs * 1e9,
            inter_bandwidth=None if args.inter_gbs is None else args.inter_gbs * 1e9,
            order=args.order, recompute_norm_up=args.recompute_norm_up,
            fp8_activations=args.fp8_activations, ep_fp8_dispatch=args.ep_fp8_dispatch,
            node_limit=args.node_limit, tokens=args.tokens,
            schedule=args.schedule, virtual_stages=_virtual_stages_arg(args))
    except LayoutError as e:
        return fail(str(e), e.field)
    except (ValueError, TypeError) as e:
        return fail(str(e), "config")
    text = json.dumps(plan, indent=2, ensure_ascii=False) if args.json else render_text(plan)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # pragma: no cover - `tmath plan ... | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


#: Llama 3 405B's pre-training layouts as the Llama 3 paper reports them: Table 4, "Scaling
#: configurations and MFU for each stage of Llama 3 405B pre-training" (arXiv:2407.21783v3,
#: section 3.3.2, p. 10; source key ``llama3herd2024``).  ``batch_per_dp`` is sequences per
#: data-parallel group and step; ``tokens_per_batch`` the table's "16M"; ``mfu`` its "BF16 MFU".
#: The July 2024 v1 (its PDF, and the arXiv HTML before v3) printed DP = 4 in the last row; v3
#: prints 8, the only value for which
#: TP·CP·PP·DP = 16,384 (the errata appendix lists it as ``llama3-table4-dp``).
def llama3_405b_layout(row: int) -> dict[str, Any]:
    """Keyword arguments of :func:`build_plan` for row ``row`` (0, 1, 2) of
    :data:`LLAMA3_405B_TABLE4`: one sequence per micro-batch, ``batch_per_dp`` of them per
    data-parallel group, 7 layers on the first and the last pipeline stage (the paper takes
    one layer off each end: 126 = 7 + 14 × 8 + 7)."""
    if isinstance(row, bool) or row not in range(3):
        raise ValueError(f"row={row!r}：表 4 只有第 0、1、2 行")
    from tmath.roofline import LLAMA3_405B_TABLE4

    r = LLAMA3_405B_TABLE4[row]
    return {"dp": r["dp"], "tp": r["tp"], "pp": r["pp"], "cp": r["cp"], "micro_batch": 1,
            "global_batch": r["dp"] * r["batch_per_dp"], "seq_len": r["seq_len"],
            "pp_edge_layers": 7}

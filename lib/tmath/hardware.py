"""Accelerator table: peak dense FLOP/s, memory, bandwidth and power, with sources.

Conventions (read before using a number):

* ``dense_flops`` is the *dense* (no structured sparsity) tensor-core peak for
  16-bit matmuls: bf16 where the chip supports it, fp16 on V100 (no bf16).
  NVIDIA datasheets for A100/H100/H200 print the *sparse* figure with an
  asterisk; the dense figure is half of it (e.g. H100 SXM: 1,979 sparse ->
  989 dense TFLOP/s).
* ``fp8_flops`` is the dense fp8 peak, ``None`` where the chip has no fp8.
* ``hbm_bytes`` is the memory capacity in bytes, reading the datasheet's "GB" as
  GiB (2**30 bytes): an H100 SXM "80 GB" holds 80 GiB = 85,899,345,920 bytes
  (85.9 GB), the physical HBM.  This is the book's capacity convention (the
  notation page states it), and feasibility checks compare against it
  (:func:`tmath.ledger.build_ledger` takes any other figure as ``hbm_bytes``).
  Reading "80 GB" as 80e9 bytes would understate the card by 7 %.  The runtime
  sees a little less: ``nvidia-smi`` shows ``81559MiB`` on an H100 SXM (85.52e9
  bytes, 79.6 GiB; the driver keeps the rest), an A100 80GB ``81920MiB``;
  ``runtime_total_bytes`` records those totals where we have a report
  (modal-labs/modal-client pull request 2797 lists them).  The workspace
  reserved per GPU (:data:`tmath.serving.WORKSPACE_BYTES_PER_GPU`, 5 GB) covers
  that reserve, the CUDA context and the framework's buffers.
* ``hbm_bandwidth`` is bytes/s, decimal (``3.35 TB/s`` -> ``3.35e12``).
* ``tdp_watts`` is the board's maximum thermal design power (``None`` if the
  vendor does not publish it).  Energy estimates that divide FLOPs by
  FLOP/s-per-watt assume the chip draws exactly its TDP.
* ``interconnect_bandwidth`` is the vendor's total (bidirectional) NVLink /
  ICI figure in bytes/s, as printed.  The links themselves, per direction, with a
  latency each, are in :data:`LINKS` (Part V): their ``bandwidth`` is NCCL's effective
  figure where NCCL's topology model has one (H100 NVLink 370.8 GB/s), their
  ``line_rate`` the line rate (450 GB/s), the ceiling; :data:`NODES` says which links a GPU's
  usual machine has.

Every entry names a key of :mod:`tmath.sources`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tmath.errors import InputError, InputTypeError, show

__all__ = ["Hardware", "HARDWARE", "hardware", "hardware_names", "Link", "LINKS", "link", "Node",
           "NODES", "node"]


@dataclass(frozen=True)
class Hardware:
    """One accelerator's datasheet numbers (units in the field names/docs)."""

    name: str
    dense_flops: float  # FLOP/s, dense 16-bit tensor (bf16; fp16 on V100)
    fp8_flops: float | None  # FLOP/s, dense fp8 tensor; None if unsupported
    hbm_bytes: float  # bytes: the datasheet's GB read as GiB (80 GB -> 80 * 2**30)
    hbm_bandwidth: float  # bytes/s
    tdp_watts: float | None  # W, board maximum
    interconnect_bandwidth: float | None  # bytes/s, total as printed
    year: int  # first availability
    precision: str  # which 16-bit format dense_flops refers to
    source: str  # key in tmath.sources
    runtime_total_bytes: float | None = None  # nvidia-smi's "total" in bytes (MiB x 2**20), if known

    @property
    def flops_per_watt(self) -> float:
        """Dense 16-bit FLOP/s per watt of TDP (= FLOP per joule)."""
        if not self.tdp_watts:
            raise InputError(f"硬件 {self.name!r} 没有公布的 TDP：请直接传入 flops_per_watt",
                             "flops_per_watt")
        return self.dense_flops / self.tdp_watts

    @property
    def ridge_intensity(self) -> float:
        """Roofline ridge point: dense FLOP/s over HBM bytes/s (FLOP per byte)."""
        return self.dense_flops / self.hbm_bandwidth


GiB = 2**30

_TABLE = [
    Hardware("V100", 125e12, None, 32 * GiB, 900e9, 300.0, 300e9, 2017, "fp16", "nvidia-v100-datasheet"),
    Hardware("A100", 312e12, None, 80 * GiB, 2039e9, 400.0, 600e9, 2020, "bf16", "nvidia-a100-datasheet",
             81920 * 2**20),
    Hardware("H100", 989e12, 1979e12, 80 * GiB, 3.35e12, 700.0, 900e9, 2022, "bf16", "nvidia-h100-datasheet",
             81559 * 2**20),
    Hardware("H800", 989e12, 1979e12, 80 * GiB, 3.35e12, 700.0, 400e9, 2023, "bf16", "nvidia-h800-product"),
    Hardware("H200", 989e12, 1979e12, 141 * GiB, 4.8e12, 700.0, 900e9, 2024, "bf16", "nvidia-h200-datasheet"),
    Hardware("TPUv5e", 197e12, None, 16 * GiB, 819e9, None, 400e9, 2023, "bf16", "google-tpu-v5e"),
    # added for Part V's planner (issue 32, item 11); each figure from the source named
    Hardware("A100-40GB", 312e12, None, 40 * GiB, 1555e9, 400.0, 600e9, 2020, "bf16",
             "nvidia-a100-datasheet"),
    Hardware("B200", 2.25e15, 4.5e15, 180 * GiB, 8e12, None, 1800e9, 2024, "bf16",
             "nvidia-dgx-b200-datasheet"),
    Hardware("TPUv4", 275e12, None, 32 * GiB, 1200e9, None, 540e9, 2021, "bf16", "google-tpu-v4"),
    # v5p: Google prints an FP8 peak equal to bf16's (459 TFLOP/s), no faster path: None
    Hardware("TPUv5p", 459e12, None, 95 * GiB, 2765e9, None, 1200e9, 2023, "bf16",
             "google-tpu-v5p"),
    Hardware("TPUv6e", 918e12, None, 32 * GiB, 1638e9, None, 800e9, 2024, "bf16", "google-tpu-v6e"),
]

#: Meta's MTIA v1 (announced 2023): an inference accelerator for recommendation models, kept
#: out of :data:`HARDWARE` (LPDDR5 rather than HBM, no NVLink; nothing in the book trains or
#: serves on it).  Its dense 16-bit (FP16/BF16) matmul peak in FLOP/s and its TDP in W, as
#: Meta's announcement gives them (source key :data:`MTIA_V1_SOURCE`; Meta's 2024 table,
#: ``meta2024mtia``, gives the same two figures and no sparse one).
MTIA_V1_FP16_FLOPS = 51.2e12
MTIA_V1_TDP_WATTS = 25.0
MTIA_V1_SOURCE = "meta2023mtia"

#: name -> :class:`Hardware`.  Names: V100 (SXM2 32GB), A100 (SXM 80GB),
#: H100 (SXM 80GB), H800 (SXM), H200 (SXM 141GB), TPUv5e, A100-40GB (SXM 40GB), B200 (SXM,
#: as in DGX B200), TPUv4 (the scaling book's "v4p"), TPUv5p, TPUv6e (Trillium).
#: B200's ``dense_flops``/``fp8_flops`` are half the DGX B200 datasheet's sparse FP8 figure per
#: GPU (72 PFLOPS / 8 = 9 PFLOPS sparse, 4.5 dense; bf16 half of fp8); its TDP is left
#: ``None`` (the datasheet gives the system's power, not the GPU's).  TPU v4's
#: ``interconnect_bandwidth`` is 6 ICI links x 45 GB/s x 2 directions (the scaling book's
#: per-link figure; Google's v4 page prints no ICI bandwidth per chip).
HARDWARE: dict[str, Hardware] = {h.name: h for h in _TABLE}

_ALIASES = {
    "v100-sxm2": "V100",
    "v100-sxm2-32gb": "V100",
    "a100-sxm": "A100",
    "a100-80gb": "A100",
    "a100-sxm-80gb": "A100",
    "h100-sxm": "H100",
    "h100-sxm5": "H100",
    "h100-80gb": "H100",
    "h800-sxm": "H800",
    "h200-sxm": "H200",
    "tpu-v5e": "TPUv5e",
    "v5e": "TPUv5e",
    "a100-80gb-sxm": "A100",
    "a100-40gb": "A100-40GB",
    "a100-sxm-40gb": "A100-40GB",
    "b200-sxm": "B200",
    "tpu-v4": "TPUv4",
    "tpuv4p": "TPUv4",
    "tpu-v4p": "TPUv4",
    "v4": "TPUv4",
    "v4p": "TPUv4",
    "tpu-v5p": "TPUv5p",
    "v5p": "TPUv5p",
    "tpu-v6e": "TPUv6e",
    "v6e": "TPUv6e",
    "trillium": "TPUv6e",
}


def hardware_names() -> list[str]:
    """Names accepted by :func:`hardware` (aliases not listed)."""
    return list(HARDWARE)


def hardware(name: str | Hardware) -> Hardware:
    """Look up an accelerator by name (case-insensitive; e.g. ``"h100"``, ``"A100-SXM"``)."""
    if isinstance(name, Hardware):
        return name
    if not isinstance(name, str):
        raise InputTypeError(f"硬件名 hardware 必须是字符串，收到 {type(name).__name__}", "hardware")
    key = name.strip().lower()
    for hname in HARDWARE:
        if hname.lower() == key:
            return HARDWARE[hname]
    if key in _ALIASES:
        return HARDWARE[_ALIASES[key]]
    raise InputError(f"未知硬件 hardware={show(name)}：请用 {'、'.join(HARDWARE)} 之一", "hardware")


# --- links between accelerators (Part V) ---------------------------------------------------


@dataclass(frozen=True)
class Link:
    """One kind of link between accelerators, as :mod:`tmath.comm` prices it.

    ``bandwidth`` is bytes/s **per direction** available to one GPU (one chip) on this link
    (the book's convention; vendors print the sum of both directions, kept as
    ``bidirectional``).  ``alpha`` is the latency of one step of a ring collective, in
    seconds; ``alpha_cited`` says whether it comes from ``alpha_source`` or is an assumption
    stated in ``note``.  ``topology`` is ``"switch"`` (every GPU has a full-bandwidth port
    into a non-blocking switch) or ``"ring"`` (a bidirectional ring: one axis of a torus).
    ``per`` says what the bandwidth belongs to.  ``step_latency`` is NCCL's per-step latency
    of the ring algorithm on this kind of link for its three protocols ``(LL, LL128, Simple)``
    (:data:`tmath.comm.PROTOCOLS`), ``None`` for a link NCCL does not drive (TPU ICI);
    ``alpha`` is then Simple's figure, the protocol NCCL runs large (bandwidth-bound) messages
    with.

    **Two bandwidths.**  ``bandwidth`` is the figure the time model uses: where NCCL's own
    topology model has an *effective* figure for the link (:data:`tmath.comm.NCCL_VERSION`'s
    ``topo.h`` and ``search.cc``: what is left after the protocol's headers), it is that
    figure, and ``effective_source`` names it; ``line_rate`` is the physical line rate per
    direction, the ceiling no collective reaches (``None``: the link has no separate
    effective figure, :attr:`ceiling` is then ``bandwidth``).  ``ll_max_bw`` is NCCL's cap on
    the LL protocol's bus bandwidth inside one node of the GPU generation the link belongs to
    (``llMaxBws`` in ``tuning.cc``; ``None``: no cap).
    """

    name: str
    bandwidth: float  # bytes/s, one direction, per GPU (chip)
    bidirectional: float  # bytes/s, both directions, as the vendor prints it
    alpha: float  # seconds per ring step
    alpha_cited: bool
    topology: str
    scope_zh: str
    per: str
    source: str
    alpha_source: str | None
    note: str = ""
    step_latency: tuple[float, float, float] | None = None  # s per ring step: LL, LL128, Simple
    line_rate: float | None = None  # bytes/s, one direction: the physical ceiling
    effective_source: str | None = None  # where ``bandwidth`` comes from, if not line rate
    ll_max_bw: float | None = None  # bytes/s: NCCL's cap on LL's bus bandwidth in one node
    # a TPU torus (ICI): its axes (2 or 3); the slice sides that get a wraparound link
    # (multiples of this: on 3 axes only when every side of the slice is one, whole 4x4x4
    # cubes; a group inside the slice has one only on a side it runs end to end); the longest
    # side (None: no limit inside the pod); tmath.comm.torus_slice, tmath.comm.torus_shape
    torus_axes: int | None = None
    wrap_multiple: int | None = None
    torus_max_side: int | None = None

    @property
    def ceiling(self) -> float:
        """The line rate per direction (bytes/s): no collective goes faster."""
        return self.line_rate if self.line_rate is not None else self.bandwidth


# NCCL's own cost model (tmath.comm.NCCL_VERSION, src/graph/tuning.cc, hwLat, ring algorithm),
# seconds per step for the protocols (LL, LL128, Simple): NVLink (0.6, 1.9, 3.4) us, PCIe (1.0,
# 2.5, 5.7) us, network (2.7, 4.0, 14.0) us.  Model constants NCCL uses to pick an algorithm and
# a protocol, not measurements.  ``alpha`` is Simple's figure: LL's smaller latency comes with
# half of the bandwidth at most (tmath.comm.PROTOCOLS), so large messages run Simple.
#
# Bandwidths: NCCL's effective figures, one direction, from the same tag.  NVLink: topo.h's
# SM90_NVLINK_BW 20.6 GB/s and SM100_NVLINK_BW 40.1 GB/s per link (the line rates are 25 and
# 50 GB/s: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an
# effective NVLink bandwidth of 370GB/s", nccl-tests issue 212).  PCIe 5.0 x16: topo.cc's
# kvDictPciGen counts 32 GT/s as 24 Gb/s a lane (x16 = 48 GB/s; line rate 64 GB/s).  A
# 400 Gb/s NIC: topo.cc reads 50 GB/s, but no ring channel through it is faster than the top
# of search.cc's sm90SpeedArrayInter, 48 GB/s.
_US = 1e-6
_NVLINK_LAT = (0.6 * _US, 1.9 * _US, 3.4 * _US)
_PCI_LAT = (1.0 * _US, 2.5 * _US, 5.7 * _US)
_NET_LAT = (2.7 * _US, 4.0 * _US, 14.0 * _US)
_LINK_TABLE = [
    Link("NVLink4", 18 * 20.6e9, 900e9, _NVLINK_LAT[2], True, "switch", "节点内（NVSwitch）",
         "每张 H100：18 条 NVLink，每条每方向线速 25 GB/s，NCCL 按有效 20.6 GB/s 计",
         "nvidia-h100-datasheet", "nccl-tuning",
         "H100 SXM datasheet: NVLink 900 GB/s (both directions), 450 GB/s each way line rate; "
         "NCCL's topology model: 18 x 20.6 = 370.8 GB/s.", _NVLINK_LAT, line_rate=450e9,
         effective_source="nccl-topo", ll_max_bw=141e9),
    Link("NVLink5", 18 * 40.1e9, 1800e9, _NVLINK_LAT[2], True, "switch", "节点内（NVSwitch）",
         "每张 B200：18 条 NVLink，每条每方向线速 50 GB/s，NCCL 按有效 40.1 GB/s 计",
         "nvidia-dgx-b200-guide", "nccl-tuning",
         "DGX B200: 2 NVLink switches, 14.4 TB/s aggregate over 8 GPUs = 1.8 TB/s per GPU. "
         "NCCL's topology model: 18 x 40.1 = 721.8 GB/s. "
         "alpha: NCCL's model has one NVLink figure for every generation.", _NVLINK_LAT,
         line_rate=900e9, effective_source="nccl-topo", ll_max_bw=2 * 141e9),
    Link("PCIe5x16", 16 * 24e9 / 8, 128e9, _PCI_LAT[2], True, "switch", "主机总线（PCIe）",
         "一条 PCIe 5.0 ×16：每方向线速 64 GB/s，NCCL 按每通道 24 Gb/s 计", "nvidia-h100-datasheet",
         "nccl-tuning",
         "H100 datasheet: PCIe Gen5 128 GB/s (both directions), 64 GB/s each way; NCCL's "
         "topology model: 16 lanes x 24 Gb/s = 48 GB/s.", _PCI_LAT, line_rate=64e9,
         effective_source="nccl-topo", ll_max_bw=141e9),
    Link("IB-NDR", 48e9, 100e9, _NET_LAT[2], True, "switch", "跨节点（InfiniBand）",
         "每个 NDR 端口线速 400 Gb/s（每方向 50 GB/s），NCCL 的环每卡最多 48 GB/s；"
         "DGX H100 每节点 8 个 ConnectX-7 端口，每张 GPU 一个",
         "nvidia-dgx-basepod", "nccl-tuning",
         "Assumes a full-bisection (non-blocking) fat tree, one NIC per GPU: a node's 8 GPUs "
         "reach the network at 8 x 48 GB/s (tmath.comm.group_bandwidth). 48 GB/s: the top of "
         "NCCL's sm90SpeedArrayInter (a ring channel's bandwidth through a NIC).", _NET_LAT,
         line_rate=50e9, effective_source="nccl-search"),
    Link("ICI-v5e", 50e9, 100e9, 1.0e-6, False, "ring", "芯片间（ICI，二维环面）",
         "每个 ICI 端口；每颗 v5e 4 个端口，共 400 GB/s（两个方向之和）", "google-tpu-v5e", None,
         "Per port: 400 GB/s bidirectional per chip / 4 ports / 2 directions. alpha: an "
         "assumed 1 us per hop (Google publishes no ICI latency); it only matters for small "
         "messages.",
         torus_axes=2, wrap_multiple=16, torus_max_side=16),
    # added for Part V's planner (issue 32, item 11)
    Link("NVLink3", 12 * 20.0e9, 600e9, _NVLINK_LAT[2], True, "switch", "节点内（NVSwitch）",
         "每张 A100：12 条 NVLink，每条每方向线速 25 GB/s，NCCL 按有效 20.0 GB/s 计",
         "nvidia-a100-datasheet", "nccl-tuning",
         "A100 SXM datasheet: NVLink 600 GB/s (both directions), 300 GB/s each way line rate; "
         "NCCL's topology model: 12 x 20.0 (SM80_NVLINK_BW) = 240 GB/s.", _NVLINK_LAT,
         line_rate=300e9, effective_source="nccl-topo", ll_max_bw=87.7e9),
    Link("NVLink-H800", 160e9, 400e9, _NVLINK_LAT[2], True, "switch", "节点内（NVSwitch）",
         "每张 H800：DeepSeek-V3 报告给出的 NVLink 带宽 160 GB/s", "deepseek2024v3report",
         "nccl-tuning",
         "DeepSeek-V3 report, sec. 3.2.2: 'NVLink offers a bandwidth of 160 GB/s, roughly 3.2 "
         "times that of IB (50 GB/s)' (H800 cluster, sec. 3.1). NVIDIA's H800 page prints "
         "400 GB/s for both directions (nvidia-h800-product), 200 GB/s each way: the report's "
         "160 GB/s is the bandwidth its kernels plan with, below that line rate (NCCL's model "
         "would give its 8 links 8 x 20.6 = 164.8 GB/s).", _NVLINK_LAT, line_rate=200e9,
         effective_source="deepseek2024v3report", ll_max_bw=141e9),
    Link("IB-HDR", 24e9, 50e9, _NET_LAT[2], True, "switch", "跨节点（InfiniBand）",
         "每个 HDR 端口线速 200 Gb/s（每方向 25 GB/s），NCCL 的环每卡最多 24 GB/s；"
         "DGX A100 每节点 8 个 ConnectX-6 端口，每张 GPU 一个",
         "nvidia-dgx-a100-guide", "nccl-tuning",
         "Assumes a full-bisection (non-blocking) fat tree, one NIC per GPU, as IB-NDR. 24 GB/s: "
         "the largest speed of NCCL's speedArrayInter (pre-Hopper) under the NIC's 25 GB/s.",
         _NET_LAT, line_rate=25e9, effective_source="nccl-search"),
    Link("ICI-v4", 45e9, 90e9, 1.0e-6, False, "ring", "芯片间（ICI，三维环面）",
         "每个 ICI 端口；每颗 v4 6 个端口", "austin2025scalingbook", None,
         "The scaling book's 4.5e10 bytes/s per link one way (Google's v4 page gives no ICI "
         "figure). alpha: an assumed 1 us per hop, as ICI-v5e.",
         torus_axes=3, wrap_multiple=4, torus_max_side=None),
    Link("ICI-v5p", 100e9, 200e9, 1.0e-6, False, "ring", "芯片间（ICI，三维环面）",
         "每个 ICI 端口；每颗 v5p 6 个端口，共 1,200 GB/s（两个方向之和）", "google-tpu-v5p", None,
         "Per port: 1,200 GBps bidirectional per chip / 6 ports / 2 directions. alpha: an "
         "assumed 1 us per hop, as ICI-v5e.",
         torus_axes=3, wrap_multiple=4, torus_max_side=None),
    Link("ICI-v6e", 100e9, 200e9, 1.0e-6, False, "ring", "芯片间（ICI，二维环面）",
         "每个 ICI 端口；每颗 v6e 4 个端口，共 800 GB/s（两个方向之和）", "google-tpu-v6e", None,
         "Per port: 800 GBps bidirectional per chip / 4 ports / 2 directions. alpha: an "
         "assumed 1 us per hop, as ICI-v5e.",
         torus_axes=2, wrap_multiple=16, torus_max_side=16),
    # the data-centre network (DCN) between TPU slices: each chip's share of its host's NICs
    Link("DCN-v4", 6.25e9, 12.5e9, 10e-6, False, "switch", "跨 pod（数据中心网络 DCN）",
         "每颗芯片分到的主机网卡带宽：每台主机约 25 GB/s、4 颗芯片", "austin2025scalingbook", None,
         "The scaling book's 'DCN bandwidth is typically around 2.5e10 bytes/second per host', "
         "a v4 host holding 4 chips (2x2x1). alpha: an assumed 10 us per step (Google publishes "
         "no DCN latency)."),
    Link("DCN-v5e", 3.125e9, 6.25e9, 10e-6, False, "switch", "跨 pod（数据中心网络 DCN）",
         "每颗芯片分到的主机网卡带宽：每台主机 2 × 100 Gb/s、8 颗芯片", "google-tpu-v5e", None,
         "6.4 Tbps per pod / 256 chips = 25 Gb/s = 3.125 GB/s per chip and direction (2 x 100 "
         "Gbps NICs per host of 8 chips). alpha: an assumed 10 us per step (Google publishes no "
         "DCN latency)."),
    Link("DCN-v5p", 6.25e9, 12.5e9, 10e-6, False, "switch", "跨 slice（数据中心网络 DCN）",
         "每颗芯片 50 Gb/s", "google-tpu-v5p", None,
         "DCN 50 Gbps per chip = 6.25 GB/s per direction. alpha: an assumed 10 us per step "
         "(Google publishes no DCN latency)."),
    Link("DCN-v6e", 12.5e9, 25e9, 10e-6, False, "switch", "跨 pod（数据中心网络 DCN）",
         "每颗芯片分到的主机网卡带宽：每台主机 4 × 200 Gb/s、8 颗芯片", "google-tpu-v6e", None,
         "25.6 Tbps per pod / 256 chips = 100 Gb/s = 12.5 GB/s per chip and direction. alpha: "
         "an assumed 10 us per step (Google publishes no DCN latency)."),
]

#: name -> :class:`Link`.
LINKS: dict[str, Link] = {lk.name: lk for lk in _LINK_TABLE}


@dataclass(frozen=True)
class Node:
    """How a machine groups its accelerators: ``size`` of them share ``intra`` links; the
    rest of the cluster is reached over ``inter``."""

    size: int
    intra: str
    inter: str
    source: str


#: GPU name -> its usual node: DGX/HGX H100 and H200 (8 GPUs on NVSwitch, one NDR port each);
#: DGX A100 (NVLink 3, one HDR port each); DGX B200 (NVLink 5, one NDR port each); DeepSeek's
#: H800 nodes (8 GPUs, NVLink at 160 GB/s, IB at 50 GB/s: the DeepSeek-V3 report, sec. 3.1 and
#: 3.2.2).  For a TPU the "node" is the largest group of chips on one ICI torus -- a pod
#: (v5e, v6e: 256 chips; v4: 4,096) or, for v5p, the largest slice a job may have (6,144 of the
#: pod's 8,960 chips) -- and ``inter`` is the data-centre network (DCN) between pods, each
#: chip with its share of its host's NICs.  A group larger than that crosses the DCN.
NODES: dict[str, Node] = {
    "H100": Node(8, "NVLink4", "IB-NDR", "nvidia-dgx-basepod"),
    "H200": Node(8, "NVLink4", "IB-NDR", "nvidia-dgx-basepod"),
    "TPUv5e": Node(256, "ICI-v5e", "DCN-v5e", "google-tpu-v5e"),
    "A100": Node(8, "NVLink3", "IB-HDR", "nvidia-dgx-a100-guide"),
    "A100-40GB": Node(8, "NVLink3", "IB-HDR", "nvidia-dgx-a100-guide"),
    "H800": Node(8, "NVLink-H800", "IB-NDR", "deepseek2024v3report"),
    "B200": Node(8, "NVLink5", "IB-NDR", "nvidia-dgx-b200-guide"),
    "TPUv4": Node(4096, "ICI-v4", "DCN-v4", "google-tpu-v4"),
    "TPUv5p": Node(6144, "ICI-v5p", "DCN-v5p", "google-tpu-v5p"),
    "TPUv6e": Node(256, "ICI-v6e", "DCN-v6e", "google-tpu-v6e"),
}


def link(name: str | Link) -> Link:
    """Look up a link by name (case-insensitive), e.g. ``"NVLink4"``, ``"ib-ndr"``."""
    if isinstance(name, Link):
        return name
    if not isinstance(name, str):
        raise TypeError(f"链路名必须是字符串，收到 {type(name).__name__}")
    for k, v in LINKS.items():
        if k.lower() == name.strip().lower():
            return v
    raise ValueError(f"未知的链路 {name!r}；可选：{', '.join(LINKS)}")


def node(gpu: str | Hardware) -> Node:
    """The usual node of ``gpu`` (:data:`NODES`); a clear error for a GPU without one."""
    hw = hardware(gpu)
    try:
        return NODES[hw.name]
    except KeyError:
        raise ValueError(
            f"{hw.name} 没有节点与链路数据（可选：{', '.join(NODES)}）；"
            "请给出每节点卡数与节点内、节点间的链路（tmath.hardware.LINKS）"
        ) from None

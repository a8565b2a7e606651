"""tmath.comm: ring volumes, the α–β time model, topologies; and the links of the hardware table."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from tmath import comm, hardware, moe, serving
from tmath.sources import SOURCES

ROOT = Path(__file__).resolve().parents[1]


def ring_by_simulation(kind: str, n: int, chunk: int) -> int:
    """Bytes rank 0 sends when a ring algorithm is played out step by step (chunk = V/n)."""
    if kind == "reduce_scatter" or kind == "all_gather":
        return (n - 1) * chunk  # each of the n-1 steps passes one chunk to the right
    if kind == "all_reduce":
        return ring_by_simulation("reduce_scatter", n, chunk) + ring_by_simulation(
            "all_gather", n, chunk)
    if kind == "all_to_all":
        return sum(chunk for dst in range(n) if dst != 0)  # straight to each owner
    raise AssertionError(kind)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 64])
@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_bytes_sent_is_the_ring_played_out(kind, n):
    chunk = 96
    assert comm.bytes_sent(kind, n * chunk, n) == ring_by_simulation(kind, n, chunk)


def test_the_books_ring_formulas():
    v = 8_000
    assert comm.bytes_sent("all_reduce", v, 8) == 2 * 7 * v // 8 == 14_000
    assert comm.bytes_sent("all_gather", v, 8) == comm.bytes_sent("reduce_scatter", v, 8) == 7_000
    assert comm.bytes_sent("all_to_all", v, 8) == 7_000
    assert comm.bytes_sent("send", v, 2) == v
    assert comm.bytes_sent("all_reduce", v, 1) == 0  # nobody to talk to
    # exact, not rounded: 10 bytes over 3 GPUs
    assert comm.bytes_sent("all_gather", 10, 3) == Fraction(20, 3)
    assert comm.whole_bytes(Fraction(20, 3)) == 7
    assert [comm.steps(k, 8) for k in comm.KINDS] == [14, 7, 7, 7, 1]


def test_ring_derivation_in_sympy_agrees_with_the_numbers():
    import sympy as sp

    d = comm.ring_derivation()
    n, v = d["symbols"]["N_gpu"], d["symbols"]["M_arr"]
    assert sp.simplify(d["all_reduce"]["sent"] - 2 * (n - 1) * v / n) == 0
    for k in ("all_gather", "reduce_scatter", "all_to_all"):
        assert sp.simplify(d[k]["sent"] - (n - 1) * v / n) == 0
    for k in ("all_reduce", "all_gather", "all_to_all"):
        for nn in (2, 3, 8):
            assert d[k]["sent"].subs({n: nn, v: 4800}) == comm.bytes_sent(k, 4800, nn)
    ring = d["all_to_all_ring"]
    assert sp.simplify(ring["hops_per_source"] - n**2 / 4) == 0
    assert sp.simplify(ring["load_per_link"] - v * n / 8) == 0
    for nn in (2, 4, 8, 16):
        assert ring["load_per_link"].subs({n: nn, v: 6400}) == comm.link_load(
            "all_to_all", 6400, nn, "ring")


def test_alltoall_on_a_ring_is_the_sources_v_over_4w():
    """A bidirectional ring of n GPUs, each holding V: the busiest link carries V·n/8, i.e.
    V_g/8 of the global array V_g = n·V.  With the JAX book's W (both directions, 2W) that is
    V_g/(4·W_bidir): the source's V/(4W).  On a switch the same all-to-all costs
    (n−1)/n·V/W per GPU, so the ring is n²/(8(n−1)) times slower (8/7 on 8 GPUs, and
    growing with n)."""
    for n in (4, 8, 16, 64):
        v_local = 1_000 * n
        v_global = n * v_local
        load = comm.link_load("all_to_all", v_local, n, "ring")
        assert load == Fraction(v_global, 8)
        w_dir = 100.0
        t_ring = comm.collective_time("all_to_all", v_local, n, bandwidth=w_dir,
                                      topology="ring")
        assert t_ring == pytest.approx(v_global / (4 * (2 * w_dir)))
        t_switch = comm.collective_time("all_to_all", v_local, n, bandwidth=w_dir)
        assert t_switch == pytest.approx((n - 1) / n * v_local / w_dir)
        assert t_ring / t_switch == pytest.approx(n * n / (8 * (n - 1)))
    # ring all-reduce / all-gather: half of the bytes go each way round
    assert comm.link_load("all_gather", 800, 4, "ring") == 300


def test_alpha_beta_time():
    t = comm.collective_time("all_reduce", 8e6, 8, bandwidth=1e9, alpha=1e-6)
    assert t == pytest.approx(14 * 1e-6 + 2 * 7 / 8 * 8e6 / 1e9)  # 14 steps, 14 MB
    assert comm.collective_time("all_reduce", 1e9, 1, bandwidth=1e9, alpha=1.0) == 0
    # a small message is latency-bound, a large one bandwidth-bound
    small = comm.collective_time("all_reduce", 1e3, 8, bandwidth=450e9, alpha=0.6e-6)
    assert 14 * 0.6e-6 / small > 0.99


@pytest.mark.parametrize("call, exc, match", [
    (lambda: comm.bytes_sent("broadcast", 1, 2), ValueError, "kind"),
    (lambda: comm.bytes_sent("all_reduce", -1, 2), ValueError, "nbytes"),
    (lambda: comm.bytes_sent("all_reduce", "8", 2), TypeError, "nbytes"),
    (lambda: comm.bytes_sent("all_reduce", 8, 0), ValueError, "n"),
    (lambda: comm.link_load("all_reduce", 8, 2, "mesh"), ValueError, "topology"),
    (lambda: comm.collective_time("send", 8, 2, bandwidth=0), ValueError, "bandwidth"),
])
def test_bad_input_names_the_field(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_old_names_are_the_one_implementation():
    assert serving.allreduce_bytes_per_rank is comm.allreduce_bytes_per_rank
    assert serving.moe_alltoall_bytes_per_layer is comm.moe_alltoall_bytes_per_layer
    assert moe.ring_comm_units is comm.ring_comm_units and moe.RingComm is comm.RingComm
    assert serving.allreduce_bytes_per_rank(8e9, 8) == pytest.approx(14e9)
    assert moe.ring_comm_units(1, moe_training=False).ratio == 16


def test_no_module_imports_back_up():
    """serving never imports moe, and layout imports none of memory, kvcache, serving, moe."""
    for path, banned in ((ROOT / "lib/tmath/serving.py", ("tmath.moe",)),
                         (ROOT / "lib/tmath/layout.py", ("tmath.memory", "tmath.kvcache",
                                                         "tmath.serving", "tmath.moe")),
                         (ROOT / "lib/tmath/comm.py", ("tmath.layout", "tmath.serving"))):
        text = path.read_text(encoding="utf-8")
        for b in banned:
            assert not re.search(rf"(from|import) {re.escape(b)}\b", text), (path.name, b)


# --- the links of the hardware table ------------------------------------------------------

def test_links_are_per_direction_and_cited():
    links = hardware.LINKS
    assert set(links) == {"NVLink4", "NVLink5", "PCIe5x16", "IB-NDR", "ICI-v5e",
                          # issue 32, item 11 (tests/test_plan_hw.py checks their figures)
                          "NVLink3", "NVLink-H800", "IB-HDR", "ICI-v4", "ICI-v5p", "ICI-v6e",
                          "DCN-v4", "DCN-v5e", "DCN-v5p", "DCN-v6e"}
    # the line rates (the ceilings); the bandwidths the model uses are NCCL's, tested below
    assert links["NVLink4"].ceiling == 450e9 and links["NVLink4"].bidirectional == 900e9
    assert links["NVLink5"].ceiling == 900e9
    assert links["NVLink3"].ceiling == 300e9 and links["NVLink3"].bandwidth == 12 * 20.0e9
    assert links["PCIe5x16"].ceiling == 64e9
    assert links["IB-NDR"].ceiling == 400e9 / 8  # 400 Gb/s a port
    assert links["IB-HDR"].ceiling == 200e9 / 8 and links["IB-HDR"].bandwidth == 24e9
    assert links["ICI-v5e"].bandwidth * 2 * 4 == 400e9  # 4 ports, 400 GB/s both ways per chip
    # H800's NVLink: the DeepSeek-V3 report's 160 GB/s, under NVIDIA's 400 GB/s both ways
    assert links["NVLink-H800"].bandwidth == 160e9 and links["NVLink-H800"].bidirectional == 400e9
    for lk in links.values():
        assert lk.bidirectional == 2 * lk.ceiling
        assert lk.bandwidth <= lk.ceiling
        assert lk.effective_source is None or lk.effective_source in SOURCES
        assert lk.topology in comm.TOPOLOGIES
        assert lk.source in SOURCES
        assert lk.alpha > 0
        assert (lk.alpha_source in SOURCES) if lk.alpha_cited else "assum" in lk.note
    assert hardware.link("nvlink4") is links["NVLink4"]
    with pytest.raises(ValueError, match="NVLink4"):
        hardware.link("nvlink9")
    assert hardware.node("H100").intra == "NVLink4" and hardware.node("h100").size == 8
    with pytest.raises(ValueError, match="V100"):
        hardware.node("V100")


def bib_keys() -> set[str]:
    text = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    return set(re.findall(r"^@\w+\{([^,\s]+),", text, flags=re.M))


def test_sources_and_the_bibliography_hold_the_same_keys():
    assert set(SOURCES) == bib_keys()
    cited = {h.source for h in hardware.HARDWARE.values()}
    cited |= {lk.source for lk in hardware.LINKS.values()}
    cited |= {lk.alpha_source for lk in hardware.LINKS.values() if lk.alpha_source}
    assert cited <= set(SOURCES)


# --- NCCL's cost model: protocols, and groups that span nodes ---------------------------------

def test_nccl_protocol_constants_match_tuning_cc():
    # NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc: baseLat ring {6.6, 14.0, 8.4} us; hwLat ring
    # NVLink {0.6, 1.9, 3.4}, PCI {1.0, 2.5, 5.7}, NET {2.7, 4.0, 14.0} us
    assert comm.NCCL_VERSION == "v2.27.7-1"
    assert [p.base_latency * 1e6 for p in comm.PROTOCOLS.values()] == pytest.approx([6.6, 14, 8.4])
    # LL: min(llMaxBw, busBw * .5); LL128: busBw * 0.92 (since 2.21.5; LL was 1/4 before)
    assert [p.efficiency for p in comm.PROTOCOLS.values()] == pytest.approx([0.5, 0.92, 1.0])
    us = {k: [x * 1e6 for x in hardware.link(k).step_latency]
          for k in ("NVLink4", "PCIe5x16", "IB-NDR")}
    assert us == {"NVLink4": pytest.approx([0.6, 1.9, 3.4]),
                  "PCIe5x16": pytest.approx([1.0, 2.5, 5.7]),
                  "IB-NDR": pytest.approx([2.7, 4.0, 14.0])}
    # alpha is Simple's: the protocol of bandwidth-bound messages
    assert all(lk.alpha == lk.step_latency[2] for lk in hardware.LINKS.values() if lk.step_latency)


def test_links_are_nccl_effective_with_the_line_rate_as_ceiling():
    # topo.h SM90_NVLINK_BW 20.6 GB/s x 18 links; the line rate 25 GB/s x 18 (nccl-tests #212)
    nv = hardware.link("NVLink4")
    assert nv.bandwidth == pytest.approx(370.8e9) and nv.ceiling == 450e9
    assert nv.bidirectional == 900e9 and nv.effective_source == "nccl-topo"
    assert hardware.link("NVLink5").bandwidth == pytest.approx(721.8e9)  # SM100: 40.1 x 18
    # PCIe 5.0 x16: 16 lanes x 24 Gb/s (kvDictPciGen "32.0 GT/s PCIe" -> 240 x 100 Mb/s) / 8
    pcie = hardware.link("PCIe5x16")
    assert pcie.bandwidth == pytest.approx(48e9) and pcie.ceiling == 64e9
    # a 400 Gb/s NIC: 50 GB/s line rate, no Hopper ring channel faster than 48 GB/s
    ib = hardware.link("IB-NDR")
    assert ib.bandwidth == pytest.approx(48e9) and ib.ceiling == 50e9
    # a link without an effective figure: its bandwidth is its ceiling
    ici = hardware.link("ICI-v5e")
    assert ici.line_rate is None and ici.ceiling == ici.bandwidth
    for lk in hardware.LINKS.values():
        assert lk.bandwidth <= lk.ceiling <= lk.bidirectional


def test_one_gb_all_reduce_on_8_h100_is_priced_at_the_effective_bandwidth():
    # by hand: Simple, 8.4 us + 14 steps x 3.4 us + 2 x 7/8 x 1e9 B / 370.8e9 B/s = 4.78 ms
    # (at the 450 GB/s line rate it was 3.94 ms)
    by_hand = 8.4e-6 + 14 * 3.4e-6 + 1.75e9 / 370.8e9
    t = comm.nccl_time("all_reduce", 1e9, 8, intra="NVLink4")
    assert t == pytest.approx(by_hand)
    assert round(t * 1e3, 2) == 4.78


def test_nccl_time_one_node_by_hand():
    n, v, w = 8, 64e6, 370.8e9
    t = comm.nccl_times("all_reduce", v, n, intra="NVLink4")
    load = 2 * 7 / 8 * v
    assert t["Simple"] == pytest.approx(8.4e-6 + 14 * 3.4e-6 + load / w)
    # LL: min(llMaxBw = 141 GB/s on Hopper, 370.8 / 2 = 185.4 GB/s) = 141 GB/s
    assert t["LL"] == pytest.approx(6.6e-6 + 14 * 0.6e-6 + load / 141e9)
    assert t["LL128"] == pytest.approx(14e-6 + 14 * 1.9e-6 + load / (0.92 * w))
    assert comm.nccl_time("all_reduce", v, n, intra="NVLink4") == min(t.values())
    # one rule for every collective now: the one-node all-gather's LL is capped the same way
    ag = comm.nccl_times("all_gather", v, n, intra="NVLink4")["LL"]
    assert ag == pytest.approx(6.6e-6 + 7 * 0.6e-6 + 7 / 8 * v / 141e9)
    # on PCIe half the bus bandwidth is below the cap: 24 GB/s
    pc = comm.nccl_times("all_reduce", v, n, intra="PCIe5x16")["LL"]
    assert pc == pytest.approx(6.6e-6 + 14 * 1.0e-6 + load / 24e9)


def test_ll_bandwidth_crossover_batch_is_41_sequences():
    # LL on 8 H100s: alpha 0.6 us, W = 141 GB/s; B* = n alpha W / (D b) for D = 8192, bf16
    ll = comm.PROTOCOLS["LL"]
    w = ll.bus_bandwidth(hardware.link("NVLink4").bandwidth, intra="NVLink4")
    assert w == 141e9
    assert 8 * 0.6e-6 * w / (8192 * 2) == pytest.approx(41.308, abs=1e-3)
    # across nodes LL's cap is the CPU's: 39.0 GB/s on 2 Intel nodes, 20.4 on more
    assert ll.bus_bandwidth(370.8e9, nodes=2) == 39.0e9
    assert ll.bus_bandwidth(370.8e9, nodes=3) == 20.4e9


def test_nccl_time_picks_ll_when_small_simple_when_large():
    small = comm.nccl_times("all_reduce", 1e3, 8, intra="NVLink4")
    large = comm.nccl_times("all_reduce", 1e9, 8, intra="NVLink4")
    assert min(small, key=small.get) == "LL"
    assert min(large, key=large.get) == "Simple"


def test_group_spanning_nodes_uses_one_nic_per_member():
    # 64 GPUs on 8 nodes, 8 per node: the node's 8 NICs carry 8 x 48 = 384 GB/s, more than
    # NVLink's effective 370.8: NVLink sets the bus bandwidth
    assert comm.group_bandwidth(64, intra="NVLink4", inter="IB-NDR", per_node=8) == 370.8e9
    assert comm.group_bandwidth(64, intra="NVLink4", inter="IB-NDR", per_node=1) == 48e9
    assert comm.group_bandwidth(8, intra="NVLink4") == 370.8e9
    t = comm.nccl_times("all_reduce", 1e9, 64, intra="NVLink4", inter="IB-NDR", per_node=8)
    # 2(nodes-1) = 14 steps on the network; the other 112 pay max(3.4 us, 3 x 1 us net overhead)
    lat = 8.4e-6 + (126 - 14) * 3.4e-6 + 14 * 14e-6
    assert t["Simple"] == pytest.approx(lat + 2 * 63 / 64 * 1e9 / 370.8e9)
    # LL128 on the same group: intra steps pay max(1.9, 1.0) us
    assert t["LL128"] == pytest.approx(14e-6 + 112 * 1.9e-6 + 14 * 4.0e-6
                                       + 2 * 63 / 64 * 1e9 / (0.92 * 370.8e9))
    # one member per node: every step crosses the network at Tree's latency ("ppn=1")
    one = comm.nccl_times("all_reduce", 1e9, 64, intra="NVLink4", inter="IB-NDR", per_node=1)
    assert one["Simple"] == pytest.approx(8.4e-6 + 126 * 14e-6 + 2 * 63 / 64 * 1e9 / 48e9)
    assert one["LL"] == pytest.approx(6.6e-6 + 126 * 5.0e-6 + 2 * 63 / 64 * 1e9 / 20.4e9)
    # all-to-all across nodes: (n - g)/n of the input leaves through the GPU's own NIC
    a2a = comm.nccl_times("all_to_all", 64e6, 16, intra="NVLink4", inter="IB-NDR", per_node=8)
    assert a2a["Simple"] == pytest.approx(8.4e-6 + 15 * 14e-6 + 8 / 16 * 64e6 / 48e9)


@pytest.mark.parametrize("call, exc, word", [
    (lambda: comm.nccl_time("all_reduce", 1e6, 16, intra="NVLink4", per_node=8), ValueError,
     "inter"),
    (lambda: comm.nccl_time("all_reduce", 1e6, 16, intra="NVLink4", inter="IB-NDR",
                            per_node=3), ValueError, "per_node"),
    (lambda: comm.nccl_time("all_reduce", 1e6, 8, intra="NVLink4", per_node=9), ValueError,
     "per_node"),
    (lambda: comm.nccl_time("all_reduce", 1e6, 8, intra="ICI-v5e"), ValueError, "collective_time"),
    (lambda: comm.nccl_time("all_reduce", 1e6, 8, intra="NVLink4", protocol="LL64"), ValueError,
     "protocol"),
])
def test_nccl_time_errors(call, exc, word):
    with pytest.raises(exc, match=word):
        call()

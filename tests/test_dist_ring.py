"""Ring attention's backward in a real gloo group (issue 32 item 7): bytes sent per GPU,
recorded and measured on the wire, against tmath.layout's convention.

The backward is ring-flash-attention's (zhuzilin/ring-flash-attention,
ring_flash_attn.py): K and V go round the ring again, n − 1 hops, and the dK, dV of the
chunk each GPU holds are accumulated in fp32 on the way and passed n hops, one more than
K and V, so that the last hop brings them back to their owner.  K and V travel in bf16 here,
as in training, so the two messages differ in size as they do on a GPU.  One small run
(4 ranks, a few hundred KB per rank), to stay within seconds on a loaded machine.
"""

from __future__ import annotations

import pytest

from tmath import dist
from tmath.layout import build_layout

WORLD = 4
RING = {"batch": 1, "heads": 4, "kv_heads": 2, "head_dim": 64, "seq": 512, "causal": True,
        "backward": True, "kv_dtype": "bf16"}


@pytest.fixture(scope="module")
def ring():
    res = dist.run([("ring_attention", RING)], world=WORLD, timeout=60)
    return res["scenarios"][0]


def by_hand():
    """Bytes one GPU sends, from the shapes alone: its K, V chunk in bf16, dK, dV in fp32."""
    c = RING["seq"] // WORLD
    kv = 2 * RING["batch"] * c * RING["kv_heads"] * RING["head_dim"] * 2  # K and V, bf16
    dkv = 2 * kv  # the same elements in fp32
    return {"forward": (WORLD - 1) * kv, "backward": (WORLD - 1) * kv + WORLD * dkv}


def test_ring_backward_is_exact(ring):
    for rank in ring["ranks"]:
        assert rank["max_err_output"] < 1e-5  # against full causal attention
        assert rank["max_err_grad"] < 1e-5  # dQ, dK, dV of this rank's chunk, after n hops


def test_ring_backward_sends_what_the_layout_counts(ring):
    want = by_hand()
    assert want["backward"] == 11 * want["forward"] // 3  # 3 hops of K, V + 4 of dK, dV (x2)
    cfg = dist.tiny_config(d=RING["heads"] * RING["head_dim"], heads=RING["heads"],
                           kv_heads=RING["kv_heads"], ffn=64, layers=1)
    lay = build_layout(cfg, cp=WORLD, seq_len=RING["seq"], micro_batch=RING["batch"],
                       act_bytes=2)  # cp_grad_bytes: 4 by default
    formula = {}
    for c in lay.collectives():
        if c.axis == "cp":
            formula[c.phase] = formula.get(c.phase, 0) + c.total_bytes_sent
    assert formula == want
    # what the ranks dispatched, priced as sends
    assert dist.bytes_by_phase(ring) == [want] * WORLD


def test_ring_backward_on_the_wire(ring):
    """Each rank's wchar (/proc/self/io) around each phase: gloo's sends, as measured.  A
    message costs a header of its own (144 bytes here): within 1 % of the formula, and the
    backward is the formula's 11/3 times the forward, not 2 times (the old n − 1 count)."""
    want = by_hand()
    for rank in ring["ranks"]:
        wrote = rank["wchar"]
        if wrote["forward"] is None:
            pytest.skip("/proc/self/io cannot be read here")
        for phase in ("forward", "backward"):
            assert want[phase] <= wrote[phase] <= 1.01 * want[phase], (phase, wrote)
        assert wrote["backward"] / wrote["forward"] == pytest.approx(11 / 3, rel=0.01)
        assert wrote["backward"] > 3 * wrote["forward"]  # 2(n − 1) hops of K, V would be 2x

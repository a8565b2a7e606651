"""tmath.roofline: FLOPs/bytes of basic ops, the roofline, the CPU probe; tmath.crosscheck input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tmath
from tmath import crosscheck, roofline


def test_dot_matvec_matmul_by_hand():
    # Counted by hand: dot of length 5 -> 10 FLOPs, 11 values; bf16 = 2 bytes each.
    c = roofline.op_cost("dot", 5)
    assert (c.flops, c.bytes) == (10, 22)
    c = roofline.op_cost("matvec", 3, 4, bytes_per_value=4)
    assert (c.flops, c.bytes) == (24, (12 + 4 + 3) * 4)
    c = roofline.op_cost("matmul", 2, 3, 5)
    assert (c.flops, c.bytes) == (60, (6 + 15 + 10) * 2)
    c = roofline.op_cost("add", 7, bytes_per_value=4)
    assert (c.flops, c.bytes) == (7, 84)


def test_matmul_flops_equal_a_literal_loop():
    n, p, m = 3, 4, 2
    mults = adds = 0
    for _ in range(n):
        for _ in range(m):
            for _ in range(p):  # one multiply and one accumulate per term
                mults += 1
                adds += 1
    assert roofline.op_cost("matmul", n, p, m).flops == mults + adds


def test_square_matmul_intensity_grows_linearly_and_add_is_constant():
    # 2N^3 / (3 N^2 * 2 bytes) = N / 3 in bf16; x + y: 1 / (3 * 2) = 1/6.
    for n in (16, 256, 4096):
        assert roofline.op_cost("matmul", n, n, n).intensity == pytest.approx(n / 3)
        assert roofline.op_cost("add", n * n).intensity == pytest.approx(1 / 6)


def test_attainable_flops_is_min_of_the_two_roofs():
    h = tmath.get_hardware("H100")
    ridge = 989e12 / 3.35e12
    assert roofline.attainable_flops(ridge / 2, h.dense_flops, h.hbm_bandwidth) == pytest.approx(989e12 / 2)
    assert roofline.attainable_flops(10 * ridge, h.dense_flops, h.hbm_bandwidth) == 989e12
    arr = roofline.attainable_flops(np.array([0.0, 1.0, 1e6]), 100.0, 10.0)
    assert arr.tolist() == [0.0, 10.0, 100.0]


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: roofline.op_cost("conv", 3), "op must be one of"),
        (lambda: roofline.op_cost("matmul", 3, 4), "needs the output width m"),
        (lambda: roofline.op_cost("matvec", 3), "needs the inner dimension p"),
        (lambda: roofline.op_cost("dot", 0), "n must be a positive int"),
        (lambda: roofline.op_cost("dot", 3, bytes_per_value=0), "bytes_per_value"),
        (lambda: roofline.attainable_flops(-1.0, 1.0, 1.0), "intensity"),
        (lambda: roofline.attainable_flops(1.0, 0.0, 1.0), "peak_flops"),
        (lambda: roofline.measure_matmul_flops(8, dtype="int8"), "dtype"),
        (lambda: crosscheck.hf_config({"hidden_size": 8}), "model_type"),
    ],
)
def test_bad_input_raises_value_error_naming_the_field(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_op_cost_rejects_float_sizes():
    with pytest.raises(TypeError, match="n must be a positive int"):
        roofline.op_cost("dot", 2.5)


def test_probe_returns_finite_positive_numbers():
    # A measurement: only its form is checked, never its speed.
    p = roofline.probe_cpu(matmul_n=32, copy_bytes=2**16, repeats=1)
    for v in (p.peak_flops, p.bandwidth, p.ridge_intensity):
        assert math.isfinite(v) and v > 0
    assert p.ridge_intensity == p.peak_flops / p.bandwidth


def test_preset_to_hf_maps_gpt2_fields():
    d = crosscheck.preset_to_hf(tmath.preset("gpt2"))
    assert d == dict(model_type="gpt2", n_embd=768, n_layer=12, n_head=12, n_positions=1024,
                     n_inner=3072, vocab_size=50257, tie_word_embeddings=True)
    with pytest.raises(TypeError, match="tmath.ModelConfig"):
        crosscheck.preset_to_hf({"model_type": "gpt2"})


def test_crosscheck_imports_without_torch_at_module_level():
    import sys

    src = open(crosscheck.__file__, encoding="utf-8").read()
    top = src.split("\ndef ", 1)[0]
    assert "import torch" not in top and "import transformers" not in top
    assert "tmath.crosscheck" in sys.modules


def test_gpu_hours_and_implied_mfu_by_hand():
    # 6 x 70.55e9 x 15e12 FLOPs at 40% of 989 TFLOP/s: 6.3495e24 / 3.956e14 / 3600 s per hour.
    flops = 6 * 70.55e9 * 15e12
    assert roofline.gpu_hours(flops, 989e12, 0.4) == pytest.approx(4_458_417.6, rel=1e-7)
    # 1e18 FLOPs in 1 GPU-hour on a 1e15 FLOP/s chip: 1e18 / 3.6e18.
    assert roofline.implied_mfu(1e18, 1.0, 1e15) == pytest.approx(1 / 3.6)
    with pytest.raises(ValueError, match="mfu is a fraction"):
        roofline.gpu_hours(1e18, 1e15, 40)
    with pytest.raises(ValueError, match="gpu_hours"):
        roofline.implied_mfu(1e18, 0, 1e15)


def test_reported_runs_cite_registered_sources_and_known_presets():
    for name, run in roofline.REPORTED_RUNS.items():
        assert run.source in tmath.SOURCES, name
        assert run.preset in tmath.presets(), name
        tmath.get_hardware(run.gpu)
    assert roofline.reported_run("llama3-70b").gpu_hours == 6.4e6
    with pytest.raises(ValueError, match="llama3-70b"):
        roofline.reported_run("llama-2")


def test_measured_h100_fraction_agrees_with_the_datasheet_peak():
    # Llama 3 paper, Table 4: TFLOP/s per GPU and BF16 MFU are two columns of one table; MFU is
    # the first over the H100's dense bf16 peak, so the two must agree to the paper's rounding.
    from tmath.roofline import MEASURED_H100_BF16 as m

    peak = tmath.get_hardware("H100").dense_flops
    for flops, mfu in zip(m["flops_per_gpu"], m["mfu"], strict=True):
        assert abs(flops / peak - mfu) < 0.006

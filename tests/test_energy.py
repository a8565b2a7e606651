"""Tests of tmath.energy and tmath.hardware: the chain, the seed's GPT-3 figures, Patterson et al."""

import dataclasses

import pytest

from tmath.energy import (
    J_PER_KWH,
    check_units,
    device_energy_kwh,
    energy_chain,
    training_time_seconds,
)
from tmath.hardware import HARDWARE, hardware
from tmath.sources import SOURCES


def test_hardware_entries_cite_registered_sources():
    for h in HARDWARE.values():
        assert h.source in SOURCES, h.name
        assert h.dense_flops > 0 and h.hbm_bytes > 0 and h.hbm_bandwidth > 0
        if h.fp8_flops is not None:
            # fp8 dense = 2x bf16 dense on Hopper (datasheets round 1,978.9 and 989.4 separately)
            assert h.fp8_flops == pytest.approx(2 * h.dense_flops, rel=1e-3)


def test_hardware_lookup():
    assert hardware("h100").name == "H100"
    assert hardware("A100-SXM").name == "A100"
    with pytest.raises(ValueError, match="未知硬件"):
        hardware("B900")
    with pytest.raises(TypeError):
        hardware(100)
    with pytest.raises(ValueError, match="TDP"):
        _ = HARDWARE["TPUv5e"].flops_per_watt


def test_flops_per_watt_by_hand():
    assert HARDWARE["H100"].flops_per_watt == pytest.approx(
        989e12 / 700
    )  # 1.41e12: the seed's "1.4e12" for H100
    assert HARDWARE["V100"].flops_per_watt == pytest.approx(125e12 / 300)  # 4.17e11, not the seed's 4.7e11
    assert HARDWARE["H100"].ridge_intensity == pytest.approx(295.2, abs=0.1)


def test_chain_steps_by_hand():
    c = energy_chain(
        3.6e18, flops_per_watt=1e12, pue=1.5, utilization=0.5, grid_kgco2_per_kwh=0.4, water_l_per_kwh=2.0
    )
    assert c.joules == pytest.approx(3.6e6)
    assert c.kwh_ideal == pytest.approx(1.0)
    assert c.kwh_facility == pytest.approx(1.5)
    assert c.kwh == pytest.approx(3.0)
    assert c.kgco2 == pytest.approx(1.2)
    assert c.water_l == pytest.approx(6.0)
    names = [s.unit for s in c.steps()]
    assert names == ["FLOP", "FLOP/J", "J", "kWh", "kWh", "kWh", "kgCO2e", "L"]
    assert J_PER_KWH == 3_600_000


def test_chain_bad_input():
    with pytest.raises(ValueError, match="exactly one"):
        energy_chain(1e20)
    with pytest.raises(ValueError, match="exactly one"):
        energy_chain(1e20, gpu="H100", flops_per_watt=1e12)
    with pytest.raises(ValueError, match="pue"):
        energy_chain(1e20, gpu="H100", pue=0.9)
    with pytest.raises(ValueError, match="utilization"):
        energy_chain(1e20, gpu="H100", utilization=0)
    with pytest.raises(ValueError, match="utilization"):
        energy_chain(1e20, gpu="H100", utilization=1.5)
    with pytest.raises(ValueError, match="flops"):
        energy_chain(float("nan"), gpu="H100")
    with pytest.raises(ValueError, match="TDP"):
        energy_chain(1e20, gpu="TPUv5e")


def test_seed_gpt3_chain():
    # seed 000: V100 "1.4e14 FLOP/s at 300 W = 4.7e11 FLOP/s/W"
    assert 1.4e14 / 300 == pytest.approx(4.667e11, rel=1e-3)
    steps = 3e11 / 3.2e6
    assert steps == 93_750
    step_s = training_time_seconds(1.67e18, 1024, 1.4e14)
    assert step_s == pytest.approx(11.65, abs=0.01)
    kwh_per_step = device_energy_kwh(1024, step_s / 3600, 300)
    assert kwh_per_step == pytest.approx(0.994, abs=1e-3)
    c = energy_chain(1.67e18 * steps, flops_per_watt=1.4e14 / 300)
    assert c.kwh / 1e3 == pytest.approx(93.19, abs=0.01)  # the seed's "93 MWh"
    assert c.kwh == pytest.approx(steps * kwh_per_step)  # GPU count cancels
    # the seed's per-step FLOPs count the two FFN matmuls as D x D; with D x 4D:
    fwd = 96 * 2 * 3.2e6 * (4 * 12288**2 + 2 * 4 * 12288**2)
    assert fwd == pytest.approx(1.113e18, rel=1e-3)
    assert 3 * fwd == pytest.approx(2 * 1.67e18, rel=2e-3)  # twice the seed's figure


def test_gpt3_lower_bound_with_datasheet_v100():
    # GPT-3 paper compute 3.14e23 FLOPs at the V100 datasheet's 125 TFLOP/s / 300 W
    c = energy_chain(3.14e23, gpu="V100")
    assert c.kwh / 1e3 == pytest.approx(3.14e23 / (125e12 / 300) / 3.6e9, rel=1e-12)
    assert 209 < c.kwh / 1e3 < 210


def test_patterson_gpt3_figures_are_consistent():
    # Patterson et al. 2021, Table 4: 10,000 V100, 14.8 days, 330 W, PUE 1.10 -> 1,287 MWh; x 0.429 -> 552 t
    kwh = device_energy_kwh(10_000, 14.8 * 24, 330, pue=1.10)
    assert kwh / 1e3 == pytest.approx(1287, rel=0.005)
    assert 1287e3 * 0.429 / 1e3 == pytest.approx(552, abs=0.5)
    assert "1,287 MWh" in SOURCES["patterson2021carbon"].note


def test_units():
    out = check_units()
    assert out["energy"] == "joule"
    assert "kgCO2e" in out["co2"] and "liter" in out["water"]


def test_chain_is_frozen():
    c = energy_chain(1e20, gpu="H100")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.kwh = 0  # type: ignore[misc]


# --- energy chapter additions (engineer F) -----------------------------------
import math  # noqa: E402

from tmath.energy import (  # noqa: E402
    chain_quantities,
    doubling_years,
    fit_trend,
    inference_energy_share,
)


def test_chain_quantities_carry_units():
    c = energy_chain(
        3.6e18, flops_per_watt=1e12, pue=1.5, utilization=0.5, grid_kgco2_per_kwh=0.4, water_l_per_kwh=2.0
    )
    q = dict((f"{i}:{name}", str(v)) for i, (name, v) in enumerate(chain_quantities(c)))
    # by hand: 3.6e18 FLOP / 1e12 FLOP/J = 3.6e6 J = 1 kWh; x1.5 / 0.5 = 3 kWh; x0.4 = 1.2 kg; x2 = 6 L
    assert q["2:峰值能效下的电能"] == "3600000.0*joule"
    assert q["3:峰值能效下的电能（换成千瓦时）"] == "1.0*kWh"
    assert q["5:计入利用率"] == "3.0*kWh"
    assert q["6:排放"] == "1.2*kgCO2e"
    assert q["7:用水"] == "6.0*liter"


def test_doubling_years_by_hand():
    assert doubling_years(2.0) == pytest.approx(1.0)
    assert doubling_years(math.sqrt(2)) == pytest.approx(2.0)
    assert doubling_years(1.28) == pytest.approx(2.8079, abs=1e-4)
    with pytest.raises(ValueError, match="annual_factor"):
        doubling_years(1.0)


def test_fit_trend_recovers_exact_exponential():
    years = [2000, 2003, 2004, 2010]
    vals = [5.0 * 1.5 ** (y - 2000) for y in years]
    t = fit_trend(years, vals)
    assert t.annual_factor == pytest.approx(1.5, rel=1e-12)
    assert t.doubling_years == pytest.approx(math.log(2) / math.log(1.5), rel=1e-12)
    assert t(2007) == pytest.approx(5.0 * 1.5**7, rel=1e-9)
    # two points: the line through them, by hand
    t2 = fit_trend([2017, 2022], [125e12 / 300, 989e12 / 700])
    assert t2.annual_factor == pytest.approx(((989 / 700) / (125 / 300)) ** (1 / 5), rel=1e-12)


def test_fit_trend_bad_input():
    with pytest.raises(ValueError, match="same length"):
        fit_trend([1, 2], [1.0])
    with pytest.raises(ValueError, match="two distinct years"):
        fit_trend([2020, 2020], [1.0, 2.0])
    with pytest.raises(ValueError, match="values"):
        fit_trend([2020, 2021], [1.0, -2.0])
    with pytest.raises(ValueError, match="sequences of numbers"):
        fit_trend(["a", 2021], [1.0, 2.0])


def test_inference_energy_share_by_hand():
    # training 6 FLOP, serving 3 tokens x 2 FLOP = 6 FLOP at equal utilization -> one half
    assert inference_energy_share(6.0, 3.0, 2.0) == pytest.approx(0.5)
    # serving at half the utilization doubles its energy: 12 / (6 + 12)
    assert inference_energy_share(6.0, 3.0, 2.0, infer_utilization=0.5) == pytest.approx(2 / 3)
    assert inference_energy_share(6.0, 0.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="infer_utilization"):
        inference_energy_share(6.0, 3.0, 2.0, infer_utilization=0.0)
    with pytest.raises(ValueError, match="tokens_served"):
        inference_energy_share(6.0, -1.0, 2.0)


def test_patterson_table4_internal_consistency():
    # Appendix A: 14.8 days = 3.14e23 FLOPs / (10,000 V100 x 24.6 TFLOP/s measured)
    days = 3.14e23 / (10_000 * 24.6e12) / 86_400
    assert round(days, 1) == 14.8
    # measured utilization of the V100's 125 TFLOP/s peak
    assert 24.6 / 125 == pytest.approx(0.1968)
    note = SOURCES["patterson2021carbon"].note
    for s in ("24.6", "330 W", "1.10", "0.429", "10,000", "14.8 days", "552.1"):
        assert s in note, s


def test_llama31_model_card_totals_add_up():
    note = SOURCES["meta2024llama31_modelcard"].note
    assert "30.84M / 8,930" in note and "39.3M / 11,390" in note
    # the card's per-model rows add up to its totals (published numbers, not tmath's)
    assert 1.46 + 7.0 + 30.84 == pytest.approx(39.3)
    assert 420 + 2040 + 8930 == 11_390
    assert 2664 + 119 + 5 == 2788  # DeepSeek-V3 report, Table 1 (thousand H800 hours)
    assert "2,788K" in SOURCES["deepseek2024v3report"].note


def test_energy_errata_by_hand():
    from tmath.errata import erratum

    assert erratum("efficiency-doubling").recomputed() == pytest.approx(math.log(2) / math.log(1.28))
    assert erratum("efficiency-2030s").recomputed() == pytest.approx(1.28**15)
    assert erratum("v100-flops-per-watt").recomputed() == pytest.approx(125e12 / 300)
    assert erratum("gpt3-water-olympic-pool").recomputed() == pytest.approx(700 / 2500)
    lb = erratum("gpt3-energy-lower-bound").recomputed()
    # 6 N T with N = 174.6e9 gives 3.14e23 -> 209 MWh; exact counting adds attention (~+3%)
    assert 1.02 * 209.3 < lb < 1.04 * 209.3
    assert erratum("gpt3-energy-gap").recomputed() == pytest.approx(1287 / lb)

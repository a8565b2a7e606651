"""From FLOPs to joules, kWh, CO2 and water, with every step and its unit.

The chain (:func:`energy_chain`)::

    FLOPs
      / (FLOP/s per W)      = joules at peak efficiency   [J]   (1 W = 1 J/s)
      / 3.6e6               = kWh at peak efficiency      [kWh] (1 kWh = 3.6e6 J)
      x PUE                 = facility kWh                [kWh]
      / utilization (MFU)   = facility kWh, real          [kWh]
      x grid intensity      = emissions                   [kgCO2e]
      x water intensity     = water                       [L]

Conventions: "FLOP/s per W" is the chip's dense peak over its TDP, so the
first step assumes the chip runs at full power and full speed.  Dividing by
the utilization (model FLOPs utilization) assumes the chip still draws its TDP
while it is not doing useful FLOPs.  PUE multiplies the IT energy by the
facility overhead (cooling, power conversion).  The water factor is applied to
the final (facility) kWh; give a litres-per-kWh that matches that scope.

Units are carried as strings on each :class:`Step`; :func:`check_units`
verifies the chain dimensionally with :mod:`sympy.physics.units`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from tmath.hardware import Hardware, hardware

__all__ = [
    "J_PER_KWH",
    "Step",
    "EnergyChain",
    "energy_chain",
    "device_energy_kwh",
    "training_time_seconds",
    "check_units",
]

#: joules in one kilowatt-hour.
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Step:
    """One step of the chain: what it is, its value and its unit."""

    name: str
    value: float
    unit: str
    op: str  # how it was obtained from the previous step


@dataclass(frozen=True)
class EnergyChain:
    """Every intermediate of :func:`energy_chain` (units in the field comments)."""

    flops: float  # FLOP
    flops_per_watt: float  # FLOP/s/W = FLOP/J
    joules: float  # J, at peak efficiency
    kwh_ideal: float  # kWh, at peak efficiency
    pue: float  # 1
    kwh_facility: float  # kWh, x PUE
    utilization: float  # 1
    kwh: float  # kWh, / utilization
    grid_kgco2_per_kwh: float  # kgCO2e/kWh
    kgco2: float  # kgCO2e
    water_l_per_kwh: float  # L/kWh
    water_l: float  # L

    @property
    def mwh(self) -> float:
        return self.kwh / 1e3

    @property
    def tco2(self) -> float:
        return self.kgco2 / 1e3

    def steps(self) -> list[Step]:
        """The chain as printable steps, in order (names and operations in Chinese)."""
        from tmath import fmt

        values = (self.flops, self.flops_per_watt, self.joules, self.kwh_ideal,
                  self.kwh_facility, self.kwh, self.kgco2, self.water_l)
        ops = (
            "给定",
            "峰值 FLOP/s ÷ TDP",
            "FLOP ÷ (FLOP/J)",
            f"÷ {fmt.sci(3.6e6, 2)} J/kWh",
            f"× PUE {_plain(self.pue)}",
            f"÷ 利用率 {_plain(self.utilization)}",
            f"× {_plain(self.grid_kgco2_per_kwh)} kg CO₂e/kWh",
            f"× {_plain(self.water_l_per_kwh)} L/kWh",
        )
        return [Step(n, v, unit, op) for n, v, unit, op
                in zip(STEP_NAMES, values, _STEP_UNITS, ops, strict=True)]


#: The names of the chain's steps, as the book prints them.
STEP_NAMES: tuple[str, ...] = (
    "训练计算量", "硬件能效", "峰值能效下的电能", "峰值能效下的电能（换成千瓦时）",
    "计入机房开销", "计入利用率", "排放", "用水",
)
_STEP_UNITS = ("FLOP", "FLOP/J", "J", "kWh", "kWh", "kWh", "kgCO2e", "L")
#: How a unit of :func:`chain_quantities` or :meth:`EnergyChain.steps` is printed.
UNIT_TEXT: dict[str, str] = {
    "FLOP": "FLOP", "FLOP/J": "FLOP/J", "FLOP/(second*watt)": "FLOP/(s·W)", "joule": "J",
    "J": "J", "kWh": "kWh", "kgCO2e": "kg CO₂e", "liter": "L", "L": "L",
}


def quantity_text(q: Any, digits: int = 4) -> str:
    """A SymPy quantity of :func:`chain_quantities` as a textbook writes it.

    ``3.6e18*FLOP`` -> ``"3.600 × 10¹⁸ FLOP"`` (number through :func:`tmath.fmt.num`,
    unit as :data:`UNIT_TEXT` writes it).
    """
    from tmath import fmt

    coeff, unit = q.as_coeff_Mul()
    text, x = str(unit), float(coeff)
    number = fmt.sci(x, digits) if x != 0 and not 1e-3 <= abs(x) < 1e6 else fmt.num(x, digits)
    return f"{number} {UNIT_TEXT.get(text, text)}"


def _plain(x: float) -> str:
    """An input of the chain (PUE 1.1, utilization 0.4) as typed: ``1.1``, ``0.4``."""
    from tmath import fmt

    return f"{x:g}" if x == 0 or 1e-3 <= abs(x) < 1e6 else fmt.sci(x, 3)


def _num(name: str, v: Any, *, lo: float = 0.0, lo_open: bool = True, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    if (v <= lo) if lo_open else (v < lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {v!r}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi:g}, got {v!r}")
    return float(v)


def energy_chain(
    flops: float,
    *,
    gpu: str | Hardware | None = None,
    flops_per_watt: float | None = None,
    pue: float = 1.0,
    utilization: float = 1.0,
    grid_kgco2_per_kwh: float = 0.0,
    water_l_per_kwh: float = 0.0,
) -> EnergyChain:
    """Run the chain FLOPs -> J -> kWh -> x PUE -> / utilization -> CO2 -> water.

    Give exactly one of ``gpu`` (uses its dense FLOP/s / TDP) or
    ``flops_per_watt``.  ``pue`` >= 1; 0 < ``utilization`` <= 1.
    """
    _num("flops", flops, lo=0.0, lo_open=False)
    if (gpu is None) == (flops_per_watt is None):
        raise ValueError("give exactly one of gpu= (a hardware name) or flops_per_watt=")
    eff = hardware(gpu).flops_per_watt if gpu is not None else _num("flops_per_watt", flops_per_watt)
    _num("pue", pue, lo=1.0, lo_open=False)
    _num("utilization", utilization, hi=1.0)
    _num("grid_kgco2_per_kwh", grid_kgco2_per_kwh, lo_open=False)
    _num("water_l_per_kwh", water_l_per_kwh, lo_open=False)
    joules = flops / eff
    kwh_ideal = joules / J_PER_KWH
    kwh_facility = kwh_ideal * pue
    kwh = kwh_facility / utilization
    return EnergyChain(
        flops=float(flops),
        flops_per_watt=eff,
        joules=joules,
        kwh_ideal=kwh_ideal,
        pue=float(pue),
        kwh_facility=kwh_facility,
        utilization=float(utilization),
        kwh=kwh,
        grid_kgco2_per_kwh=float(grid_kgco2_per_kwh),
        kgco2=kwh * grid_kgco2_per_kwh,
        water_l_per_kwh=float(water_l_per_kwh),
        water_l=kwh * water_l_per_kwh,
    )


def device_energy_kwh(n_devices: float, hours: float, watts: float, pue: float = 1.0) -> float:
    """Facility kWh of ``n_devices`` drawing ``watts`` each for ``hours`` (x PUE).

    The form of a measured or reported estimate (e.g. GPU-hours x TDP x PUE).
    """
    _num("n_devices", n_devices)
    _num("hours", hours, lo_open=False)
    _num("watts", watts)
    _num("pue", pue, lo=1.0, lo_open=False)
    return n_devices * hours * watts * pue / 1e3


def training_time_seconds(
    flops: float, n_devices: float, peak_flops: float, utilization: float = 1.0
) -> float:
    """Wall-clock seconds to run ``flops`` on ``n_devices`` at ``utilization`` of ``peak_flops`` each."""
    _num("flops", flops, lo_open=False)
    _num("n_devices", n_devices)
    _num("peak_flops", peak_flops)
    _num("utilization", utilization, hi=1.0)
    return flops / (n_devices * peak_flops * utilization)


def check_units() -> dict[str, str]:
    """Dimensional check of the chain with sympy.physics.units.

    Returns each step's quantity expressed in its target unit; raises
    ``AssertionError`` if a step does not reduce to that unit.
    """
    import sympy as sp
    from sympy.physics import units as u

    flop = sp.Symbol("FLOP", positive=True)  # a count, carried symbolically
    kg_co2 = sp.Symbol("kgCO2e", positive=True)
    litre = u.liter
    flops = 1 * flop
    eff = flop / u.second / u.watt
    joules = u.convert_to(flops / eff, u.joule)
    kwh = u.convert_to(joules, u.kilo * u.watt * u.hour)
    co2 = kwh * (kg_co2 / (u.kilo * u.watt * u.hour))
    water = kwh * (litre / (u.kilo * u.watt * u.hour))
    out = {"energy": joules, "kwh": kwh, "co2": sp.simplify(co2), "water": sp.simplify(water)}
    assert out["energy"].free_symbols <= {u.joule}, out["energy"]
    assert not (sp.simplify(out["co2"] / kg_co2)).has(u.joule, u.watt, u.hour, u.second), out["co2"]
    assert sp.simplify(out["water"] / litre).is_number, out["water"]
    return {k: str(v) for k, v in out.items()}


# --- additions for the energy chapter (book/energy/energy) -------------------


@functools.lru_cache(maxsize=1)
def _kwh_quantity() -> Any:
    """The SymPy quantity ``kWh`` (energy, 1000 W*h) in the SI unit system."""
    from sympy.physics import units as u
    from sympy.physics.units.systems.si import SI

    kwh = u.Quantity("kWh", abbrev="kWh")
    SI.set_quantity_dimension(kwh, u.energy)
    SI.set_quantity_scale_factor(kwh, 1000 * u.watt * u.hour)
    return kwh


def chain_quantities(c: EnergyChain) -> list[tuple[str, Any]]:
    """Replay an :class:`EnergyChain` with units attached, in SymPy.

    Each step is computed from the previous one by multiplying or dividing
    *quantities with units* (``FLOP``, ``FLOP/(s*W)``, ``kWh``, ``kgCO2e/kWh``,
    ``L/kWh``) and converting with :func:`sympy.physics.units.convert_to`; a step
    that combined the wrong units would not reduce to its target unit.  Returns
    ``(name, quantity)`` pairs; raises ``AssertionError`` if a quantity does not
    carry its target unit or disagrees with the float chain (rel. 1e-9).
    """
    import sympy as sp
    from sympy.physics import units as u

    flop = sp.Symbol("FLOP", positive=True)
    kgco2e = sp.Symbol("kgCO2e", positive=True)
    kwh_unit = _kwh_quantity()

    def q(x: float) -> sp.Float:
        return sp.Float(x, 15)

    flops = q(c.flops) * flop
    eff = q(c.flops_per_watt) * flop / (u.second * u.watt)
    joules = u.convert_to(flops / eff, u.joule)
    kwh_ideal = u.convert_to(joules, kwh_unit)
    kwh_facility = kwh_ideal * q(c.pue)
    kwh = kwh_facility / q(c.utilization)
    co2 = sp.expand(kwh * q(c.grid_kgco2_per_kwh) * kgco2e / kwh_unit)
    water = sp.expand(kwh * q(c.water_l_per_kwh) * u.liter / kwh_unit)
    out = list(zip(STEP_NAMES, (flops, eff, joules, kwh_ideal, kwh_facility, kwh, co2, water),
                   strict=True))
    targets = [flop, flop / (u.second * u.watt), u.joule, kwh_unit, kwh_unit, kwh_unit, kgco2e, u.liter]
    floats = [c.flops, c.flops_per_watt, c.joules, c.kwh_ideal, c.kwh_facility, c.kwh, c.kgco2, c.water_l]
    for (name, val), target, ref in zip(out, targets, floats, strict=True):
        ratio = sp.simplify(val / target)
        assert ratio.is_number, f"step {name!r} does not reduce to {target}: {val}"
        assert math.isclose(float(ratio), ref, rel_tol=1e-9, abs_tol=1e-300), (name, ratio, ref)
    return out


def doubling_years(annual_factor: float) -> float:
    """Years to double at a constant ``annual_factor`` (> 1): ``ln 2 / ln f``."""
    _num("annual_factor", annual_factor, lo=1.0)
    return math.log(2.0) / math.log(annual_factor)


@dataclass(frozen=True)
class Trend:
    """A fitted exponential trend ``value = exp(intercept + slope * year)``."""

    slope: float  # natural-log units per year
    intercept: float
    n_points: int

    @property
    def annual_factor(self) -> float:
        """Growth factor per year, ``exp(slope)``."""
        return math.exp(self.slope)

    @property
    def doubling_years(self) -> float:
        """Years per doubling, ``ln 2 / slope`` (``inf`` if the trend is flat or falling)."""
        return math.log(2.0) / self.slope if self.slope > 0 else math.inf

    def __call__(self, year: float) -> float:
        return math.exp(self.intercept + self.slope * year)


def fit_trend(years: Any, values: Any) -> Trend:
    """Least-squares line through ``(year, ln value)``: an exponential trend.

    ``years`` and ``values`` are equal-length sequences of numbers, at least two
    distinct years, every value > 0.
    """
    try:
        ys = [float(y) for y in years]
        vs = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError("years and values must be sequences of numbers") from None
    if len(ys) != len(vs):
        raise ValueError(f"years and values must have the same length, got {len(ys)} and {len(vs)}")
    if len(set(ys)) < 2:
        raise ValueError("years must contain at least two distinct years to fit a trend")
    for v in vs:
        _num("values (each)", v)
    logs = [math.log(v) for v in vs]
    ym = sum(ys) / len(ys)
    lm = sum(logs) / len(logs)
    sxx = sum((y - ym) ** 2 for y in ys)
    sxy = sum((y - ym) * (lg - lm) for y, lg in zip(ys, logs, strict=True))
    slope = sxy / sxx
    return Trend(slope=slope, intercept=lm - slope * ym, n_points=len(ys))


def inference_energy_share(
    train_flops: float,
    tokens_served: float,
    flops_per_token: float,
    *,
    train_utilization: float = 1.0,
    infer_utilization: float = 1.0,
) -> float:
    """Inference's share of lifetime (training + inference) energy.

    Assumes training and serving run on the same hardware in the same data
    centre (same FLOP/s per W and PUE, which therefore cancel), each drawing
    TDP whether busy or not, so energy is proportional to FLOPs / utilization.
    ``flops_per_token`` is the forward FLOPs per served token (about 2 x active
    parameters).  Returns a number in [0, 1).
    """
    _num("train_flops", train_flops)
    _num("tokens_served", tokens_served, lo_open=False)
    _num("flops_per_token", flops_per_token)
    _num("train_utilization", train_utilization, hi=1.0)
    _num("infer_utilization", infer_utilization, hi=1.0)
    e_train = train_flops / train_utilization
    e_infer = tokens_served * flops_per_token / infer_utilization
    return e_infer / (e_train + e_infer)


__all__ += [
    "chain_quantities",
    "doubling_years",
    "Trend",
    "fit_trend",
    "inference_energy_share",
]

"""tmath.fmt: hand-computed examples, bad input, and round-trip properties."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from tmath import fmt

# --- an independent parser of the book's number forms ---------------------------------

_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_SCI = re.compile(r"^(−?)(\d)(?:\.(\d+))? × 10([⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")
_PLAIN = re.compile(r"^(−?)(\d{1,3}(?:,\d{3})*)(?:\.(\d+))?$")


def parse(text: str) -> tuple[Fraction, int]:
    """The exact value a textbook string states, and its count of significant digits."""
    m = _SCI.match(text)
    if m:
        sign, lead, frac, exp = m.groups()
        frac = frac or ""
        value = Fraction(int(lead + frac), 10 ** len(frac)) * Fraction(10) ** int(exp.translate(_SUP))
        return (-value if sign else value), 1 + len(frac)
    m = _PLAIN.match(text)
    assert m, f"not a textbook number: {text!r}"
    sign, whole, frac = m.groups()
    frac = frac or ""
    digits = (whole.replace(",", "") + frac).lstrip("0")
    value = Fraction(int(whole.replace(",", "") + frac), 10 ** len(frac))
    return (-value if sign else value), len(digits)


def within_half_ulp(shown: Fraction, exact: Fraction, digits: int) -> bool:
    """``shown`` is ``exact`` rounded to ``digits`` significant digits (half a unit in the last)."""
    if exact == 0:
        return shown == 0
    e = math.floor(math.log10(abs(float(shown)))) if shown else 0
    ulp = Fraction(10) ** (e - digits + 1)
    return abs(shown - exact) <= ulp / 2


# --- hand-computed examples -----------------------------------------------------------

@pytest.mark.parametrize(
    ("x", "digits", "expected"),
    [
        (3.2288e23, 4, "3.229 × 10²³"),
        (3.14e23, 3, "3.14 × 10²³"),
        (1e6, 4, "1.000 × 10⁶"),  # trailing zeros kept
        (-1e-6, 2, "−1.0 × 10⁻⁶"),
        (5.8e15, 2, "5.8 × 10¹⁵"),
        (4.2, 4, "4.200"),  # 1 <= |x| < 10: no "× 10⁰"
        (9.9996, 4, "1.000 × 10¹"),  # the carry moves the exponent
        (0.5, 1, "5 × 10⁻¹"),
        (12345, 4, "1.234 × 10⁴"),  # an exact tie rounds to even
        (12355, 4, "1.236 × 10⁴"),
        (10**24 + 5, 4, "1.000 × 10²⁴"),  # exact integer beyond float precision
        (175_181_291_520, 4, "1.752 × 10¹¹"),
        (0, 4, "0"),
    ],
)
def test_sci_examples(x, digits, expected):
    assert fmt.sci(x, digits) == expected


@pytest.mark.parametrize(
    ("x", "digits", "expected"),
    [
        (3.2288e23, 4, r"3.229\times10^{23}"),
        (-1e-6, 2, r"-1.0\times10^{-6}"),
        (4.2, 2, "4.2"),
        (0, 4, "0"),
        (float("inf"), 4, r"\infty"),
    ],
)
def test_sci_tex_examples(x, digits, expected):
    assert fmt.sci_tex(x, digits) == expected


@pytest.mark.parametrize(
    ("x", "digits", "expected"),
    [
        (70_553_706_496, 4, "70,553,706,496"),
        (70_553_706_496.0, 4, "70,553,706,496"),  # integer-valued float below 10^15
        (999, 4, "999"),
        (1000, 4, "1,000"),
        (-1234567, 4, "−1,234,567"),
        (10**24, 4, "1,000,000,000,000,000,000,000,000"),  # ints stay exact
        (np.int64(12288), 4, "12,288"),
        (sp.Integer(96), 4, "96"),
        (41.4912, 4, "41.49"),
        (0.025771, 4, "0.02577"),
        (0.001, 4, "0.001000"),
        (2.5, 4, "2.500"),
        (123456.7, 4, "123,500"),
        (1234.5678, 6, "1,234.57"),
        (999999.7, 4, "1.000 × 10⁶"),  # rounds up out of the fixed range
        (2.5e-5, 4, "2.500 × 10⁻⁵"),
        (5.8e15, 2, "5.8 × 10¹⁵"),  # integer-valued but above 10^15
        (Fraction(1, 3), 4, "0.3333"),
        (sp.Rational(7, 2), 3, "3.50"),
        (sp.sqrt(2), 4, "1.414"),
        (Decimal("0.125"), 2, "0.12"),  # exact tie to even
        (np.float32(0.1), 4, "0.1000"),
        (0.0, 4, "0"),
        (float("-inf"), 4, "−∞"),
    ],
)
def test_num_examples(x, digits, expected):
    assert fmt.num(x, digits) == expected


def test_num_tex_examples():
    assert fmt.num_tex(70_553_706_496) == "70{,}553{,}706{,}496"
    assert fmt.num_tex(1234.5678) == "1{,}235"
    assert fmt.num_tex(41.4912) == "41.49"
    assert fmt.num_tex(-2.5e-5, 2) == r"-2.5\times10^{-5}"


@pytest.mark.parametrize(
    ("x", "digits", "expected"),
    [
        (0.1214, 3, "12.1%"),
        (0.5, 3, "50.0%"),
        (1, 3, "100%"),
        (0.9996, 3, "100%"),
        (0.00123, 3, "0.123%"),
        (-0.0525, 2, "−5.2%"),  # 5.25 (binary slightly below) rounds down
        (12.3, 3, "1,230%"),
        (0, 3, "0%"),
    ],
)
def test_pct_examples(x, digits, expected):
    assert fmt.pct(x, digits) == expected


@pytest.mark.parametrize(
    ("x", "expected"), [(2, "2.00×"), (12.34, "12.3×"), (0.5, "0.500×"), (float("inf"), "∞×")]
)
def test_ratio_examples(x, expected):
    assert fmt.ratio(x) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((140e9,), {}, "140.0 GB"),
        ((140_000_000_000,), {}, "140.0 GB"),
        ((999.96e9,), {}, "1.0 TB"),  # rounding carries into the next unit
        ((999.94e9,), {}, "999.9 GB"),
        ((512,), {}, "512 B"),
        ((1500,), {}, "1.5 kB"),
        ((16_065_000_000,), {"decimals": 2}, "16.06 GB"),  # tie to even
        ((1_600_000,), {"unit": "GB", "decimals": 4}, "0.0016 GB"),
        ((1.4e15,), {"unit": "GB"}, "1,400,000.0 GB"),
        ((0,), {}, "0 B"),
    ],
)
def test_bytes_si_examples(args, kwargs, expected):
    assert fmt.bytes_si(*args, **kwargs) == expected


# --- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("func", [fmt.sci, fmt.sci_tex, fmt.num, fmt.num_tex, fmt.pct, fmt.ratio])
@pytest.mark.parametrize("bad", ["3.2", None, True, 1 + 2j, [1.0], sp.Symbol("x")])
def test_non_numbers_raise_type_error_naming_x(func, bad):
    with pytest.raises(TypeError, match=r"\bx must be a real number"):
        func(bad)


@pytest.mark.parametrize("bad", ["140e9", None, False])
def test_bytes_si_names_n(bad):
    with pytest.raises(TypeError, match=r"\bn must be a real number"):
        fmt.bytes_si(bad)


@pytest.mark.parametrize("func", [fmt.sci, fmt.sci_tex, fmt.num, fmt.num_tex, fmt.pct, fmt.ratio])
def test_digits_is_checked(func):
    with pytest.raises(TypeError, match="digits must be an int"):
        func(1.0, 2.5)
    with pytest.raises(ValueError, match="digits=0"):
        func(1.0, 0)


@pytest.mark.parametrize("func", [fmt.sci, fmt.sci_tex, fmt.num, fmt.num_tex, fmt.pct, fmt.ratio])
def test_nan_raises(func):
    with pytest.raises(ValueError, match="nan"):
        func(float("nan"))
    with pytest.raises(ValueError, match="nan"):
        func(np.float64("nan"))


def test_sympy_infinities_nan_and_complex():
    assert fmt.sci(sp.oo) == "∞" and fmt.num(-sp.oo) == "−∞"
    with pytest.raises(ValueError, match="nan"):
        fmt.num(sp.nan)
    with pytest.raises(TypeError, match="x must be a real number"):
        fmt.num(sp.I + 1)
    assert fmt.sci(sp.pi * 10**30, 5) == "3.1416 × 10³⁰"


def test_inf_is_a_symbol_or_an_error():
    assert fmt.sci(float("inf")) == "∞"
    assert fmt.sci(-math.inf) == "−∞"
    assert fmt.num(np.inf) == "∞"
    with pytest.raises(ValueError, match="infinite"):
        fmt.pct(math.inf)
    with pytest.raises(ValueError, match="infinite"):
        fmt.bytes_si(math.inf)
    with pytest.raises(ValueError, match="nan"):
        fmt.bytes_si(math.nan)


def test_bytes_si_checks_its_options():
    with pytest.raises(ValueError, match="unit='GiB'"):
        fmt.bytes_si(1e9, unit="GiB")
    with pytest.raises(TypeError, match="decimals must be an int"):
        fmt.bytes_si(1e9, decimals=1.0)
    with pytest.raises(ValueError, match="decimals=-1"):
        fmt.bytes_si(1e9, decimals=-1)


# --- properties -------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
nonzero = finite.filter(lambda v: v != 0 and abs(v) > 1e-300)
digit_counts = st.integers(min_value=1, max_value=12)


@settings(max_examples=300, deadline=None)
@given(nonzero, digit_counts)
def test_sci_round_trips_within_its_digits(x, digits):
    text = fmt.sci(x, digits)
    assert "e" not in text and "E" not in text
    value, shown = parse(text)
    assert shown == digits
    assert within_half_ulp(value, Fraction(x), digits)
    exponent = re.search(r"10([⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)$", text)
    assert (exponent is None) == (1 <= abs(value) < 10)


@settings(max_examples=300, deadline=None)
@given(nonzero, digit_counts)
def test_sci_tex_agrees_with_sci(x, digits):
    unicode_form = fmt.sci(x, digits)
    tex = fmt.sci_tex(x, digits)
    m = re.fullmatch(r"(-?)(\d(?:\.\d+)?)(?:\\times10\^\{(-?\d+)\})?", tex)
    assert m, tex
    sign, mantissa, exp = m.groups()
    again = ("−" if sign else "") + mantissa
    if exp is not None:
        again += " × 10" + exp.translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))
    assert again == unicode_form


@settings(max_examples=300, deadline=None)
@given(nonzero, digit_counts)
def test_num_round_trips(x, digits):
    text = fmt.num(x, digits)
    value, _ = parse(text)
    if x == int(x) and abs(x) < 1e15:
        assert value == Fraction(x)  # exact
        assert "." not in text and "×" not in text
    else:
        assert within_half_ulp(value, Fraction(x), digits)
        plain = "×" not in text
        assert plain == (Fraction(1, 1000) <= abs(value) < 10**6)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**40), max_value=10**40))
def test_num_of_an_int_is_exact(n):
    text = fmt.num(n)
    assert parse(text)[0] == n
    assert re.fullmatch(r"−?\d{1,3}(,\d{3})*", text)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), st.integers(1, 6))
def test_pct_round_trips(x, digits):
    text = fmt.pct(x, digits)
    assert text.endswith("%") and not text.endswith(" %")
    value, _ = parse(text[:-1])
    assert within_half_ulp(value, Fraction(x) * 100, digits)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**20), st.integers(0, 3))
def test_bytes_si_round_trips(n, decimals):
    text = fmt.bytes_si(n, decimals=decimals)
    number, unit = text.split(" ")
    value, _ = parse(number)
    k = fmt.BYTE_UNITS.index(unit)
    places = 0 if k == 0 else decimals
    assert abs(value - Fraction(n, 1000**k)) <= Fraction(1, 2 * 10**places)
    assert value < 1000 or unit == fmt.BYTE_UNITS[-1]
    assert value >= 1 or unit == "B" or n == 0

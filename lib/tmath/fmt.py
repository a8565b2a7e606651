"""The book's one number formatter: numbers in prose, tables, errata rows and captions.

Every number a reader sees outside code goes through this module, so that each
choice of significant digits and each typographic convention is made once.

Conventions (the book's house style):

- **Significant digits are kept, trailing zeros included.** ``sci(1e6)`` is
  ``"1.000 × 10⁶"``: the digits printed state the precision, as a textbook does.
  Pass a smaller ``digits`` for a shorter figure.
- **Rounding is exact and half-to-even** (GB/T 8170 "四舍六入五成双", which is
  also what Python's ``format`` does): integers, fractions and SymPy rationals
  are rounded from their exact value, floats from their exact binary value, so
  a 24-digit integer FLOP count rounds correctly.
- **The minus sign is U+2212 "−"** (as printed in a book), in the mantissa, and
  ``"⁻"`` (U+207B) in a superscript exponent.  :func:`sci_tex` uses TeX's ``-``.
- **Scientific form** is ``"3.229 × 10²³"``: U+00D7 with a space on each side, a
  Unicode superscript exponent; for ``1 ≤ |x| < 10`` (after rounding) no
  ``"× 10⁰"`` is written.
- **Thousands separators** are commas: ``"70,553,706,496"``.
- **Percentages** follow the book's existing ``{x:.1%}`` style: no space before
  ``%`` (``"12.1%"``).
- **Bytes** are decimal SI units (1 GB = 10⁹ bytes, as on the notation page;
  GiB is never produced here).
- **Zero** is ``"0"`` (no digits to state).  **nan** raises :class:`ValueError`
  (a nan in prose is always a bug upstream); **±inf** is ``"∞"``/``"−∞"`` in
  :func:`sci`, :func:`num` and :func:`ratio` (``r"\\infty"`` in TeX), and a
  :class:`ValueError` in :func:`pct` and :func:`bytes_si`.
- Accepted numbers: ``int``, ``float``, NumPy scalars, ``fractions.Fraction``,
  ``decimal.Decimal`` and SymPy numbers (``sp.Integer``, ``sp.Rational``,
  ``sp.Float``, and numeric expressions such as ``sp.sqrt(2)``).  ``bool``,
  strings, complex numbers and symbolic expressions raise :class:`TypeError`
  naming the argument.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "sci", "sci_tex", "num", "num_tex", "pct", "ratio", "bytes_si", "BYTE_UNITS",
    "MINUS", "TIMES",
]

MINUS = "\u2212"  # − : the printed minus sign
TIMES = "\u00d7"  # ×
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
#: Decimal byte units, 1000 apart (kB with a lower-case k, as SI writes it).
BYTE_UNITS: tuple[str, ...] = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
#: Below this bound an integer-valued float is written as an exact integer.
_EXACT_FLOAT_BOUND = 10**15
#: num() writes plain fixed notation for 10^-3 <= |x| < 10^6 (after rounding).
_FIXED_LOW = Fraction(1, 1000)
_FIXED_HIGH = 10**6


# --- input checking ---------------------------------------------------------------

def _exact(x: object, name: str, func: str) -> Fraction | float:
    """``x`` as an exact Fraction, or a float for nan/inf; TypeError for non-numbers."""
    if isinstance(x, bool) or isinstance(x, (str, bytes)):
        raise TypeError(f"{func}(): {name} must be a real number, got {type(x).__name__} {x!r}")
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, numbers.Rational):
        return Fraction(int(x.numerator), int(x.denominator))
    if isinstance(x, Decimal):
        if not x.is_finite():
            return float(x)
        return Fraction(x)
    if isinstance(x, numbers.Real):
        v = float(x)
        return v if not math.isfinite(v) else Fraction(v)
    if type(x).__module__.split(".")[0] == "sympy" and getattr(x, "is_number", False):
        if x.is_extended_real is False:  # type: ignore[attr-defined]
            raise TypeError(f"{func}(): {name} must be a real number, got complex {x!r}")
        value = x.evalf(40)  # type: ignore[attr-defined]
        import sympy  # already imported: x is a SymPy object

        if value.is_infinite or value is sympy.nan:  # sp.oo, -sp.oo, sp.nan
            return float(value)
        if value.is_real:
            return Fraction(str(value))
    raise TypeError(f"{func}(): {name} must be a real number, got {type(x).__name__} {x!r}")


def _check_digits(digits: object, func: str, name: str = "digits") -> int:
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral):
        raise TypeError(f"{func}(): {name} must be an int, got {type(digits).__name__} {digits!r}")
    if digits < 1:
        raise ValueError(f"{func}(): {name}={digits} must be at least 1")
    return int(digits)


def _nonfinite(v: float, func: str, name: str, *, allow_inf: bool) -> None:
    if math.isnan(v):
        raise ValueError(f"{func}(): {name} is nan; a number in the prose cannot be nan")
    if not allow_inf:
        raise ValueError(f"{func}(): {name}={v} is infinite; pass a finite number")


# --- exact rounding ---------------------------------------------------------------

def _round_half_even(q: Fraction) -> int:
    """``q`` rounded to an integer, ties to even (``round`` on a Fraction does exactly this)."""
    return round(q)


def _decompose(q: Fraction, digits: int) -> tuple[bool, int, int]:
    """``(negative, n, e)`` with ``|q| ≈ n × 10^(e - digits + 1)`` and ``10^(digits-1) ≤ n < 10^digits``.

    ``e`` is the decimal exponent of the leading digit *after* rounding, so a
    carry (9.9996 → 10.00) moves ``e`` up.  ``q`` must be non-zero.
    """
    neg = q < 0
    a = -q if neg else q
    # first guess of floor(log10 a) from the digit counts, then correct it
    e = len(str(a.numerator)) - len(str(a.denominator))
    while Fraction(10) ** e > a:
        e -= 1
    while Fraction(10) ** (e + 1) <= a:
        e += 1
    n = _round_half_even(a / Fraction(10) ** (e - digits + 1))
    if n == 10**digits:
        n //= 10
        e += 1
    return neg, n, e


def _group(int_digits: str) -> str:
    """Thousands separators: ``"70553706496"`` → ``"70,553,706,496"``."""
    head = len(int_digits) % 3 or 3
    parts = [int_digits[:head]] + [int_digits[i:i + 3] for i in range(head, len(int_digits), 3)]
    return ",".join(parts)


def _fixed(n: int, e: int, digits: int, sep: str = ",") -> str:
    """The unsigned fixed-notation string of ``n × 10^(e - digits + 1)``."""
    s = str(n)
    if e >= 0:
        if e + 1 >= digits:
            int_part, frac = s + "0" * (e + 1 - digits), ""
        else:
            int_part, frac = s[: e + 1], s[e + 1:]
    else:
        int_part, frac = "0", "0" * (-e - 1) + s
    int_part = _group(int_part).replace(",", sep) if sep else int_part
    return int_part + ("." + frac if frac else "")


def _mantissa(n: int, digits: int) -> str:
    s = str(n)
    return s[0] + ("." + s[1:] if digits > 1 else "")


# --- the public formatters -----------------------------------------------------------

def sci(x: object, digits: int = 4) -> str:
    """``x`` in scientific form with ``digits`` significant digits: ``"3.229 × 10²³"``.

    >>> sci(3.2288e23)
    '3.229 × 10²³'
    >>> sci(-1e-6, 2)
    '−1.0 × 10⁻⁶'
    >>> sci(4.2)
    '4.200'
    """
    digits = _check_digits(digits, "sci")
    q = _exact(x, "x", "sci")
    if isinstance(q, float):
        _nonfinite(q, "sci", "x", allow_inf=True)
        return "∞" if q > 0 else MINUS + "∞"
    if q == 0:
        return "0"
    neg, n, e = _decompose(q, digits)
    body = _mantissa(n, digits)
    if e != 0:
        body += f" {TIMES} 10" + str(e).translate(_SUPERSCRIPT)
    return (MINUS if neg else "") + body


def sci_tex(x: object, digits: int = 4) -> str:
    r"""``x`` in scientific form for use inside ``$…$``: ``r"3.229\times10^{23}"``.

    >>> sci_tex(3.2288e23)
    '3.229\\times10^{23}'
    >>> sci_tex(-1e-6, 2)
    '-1.0\\times10^{-6}'
    """
    digits = _check_digits(digits, "sci_tex")
    q = _exact(x, "x", "sci_tex")
    if isinstance(q, float):
        _nonfinite(q, "sci_tex", "x", allow_inf=True)
        return r"\infty" if q > 0 else r"-\infty"
    if q == 0:
        return "0"
    neg, n, e = _decompose(q, digits)
    body = _mantissa(n, digits)
    if e != 0:
        body += r"\times10^{" + str(e) + "}"
    return ("-" if neg else "") + body


def _num_classify(x: object, digits: int, func: str):
    """``("inf", neg)``, ``("zero",)``, ``("int", neg, value)``, ``("fixed"|"sci", neg, n, e)``."""
    digits = _check_digits(digits, func)
    q = _exact(x, "x", func)
    if isinstance(q, float):
        _nonfinite(q, func, "x", allow_inf=True)
        return ("inf", q < 0)
    if q == 0:
        return ("zero",)
    is_int_type = isinstance(x, numbers.Integral) or (
        type(x).__module__.split(".")[0] == "sympy" and getattr(x, "is_Integer", False)
    )
    if q.denominator == 1 and (is_int_type or abs(q) < _EXACT_FLOAT_BOUND):
        return ("int", q < 0, abs(q.numerator))
    neg, n, e = _decompose(q, digits)
    rounded = Fraction(n) * Fraction(10) ** (e - digits + 1)
    if _FIXED_LOW <= rounded < _FIXED_HIGH:
        return ("fixed", neg, n, e)
    return ("sci", neg, n, e)


def num(x: object, digits: int = 4) -> str:
    """The general textbook form of a number in prose or a table.

    - integers (``int``, NumPy and SymPy integers, any size) and integer-valued
      floats and fractions below 10¹⁵: exact, with thousands separators,
      ``"70,553,706,496"``;
    - other values with ``10⁻³ ≤ |x| < 10⁶`` (after rounding to ``digits``
      significant digits): plain fixed notation, ``"41.49"``, ``"0.02577"``,
      ``"123,500"``;
    - everything else: :func:`sci`.

    >>> num(70553706496)
    '70,553,706,496'
    >>> num(41.4912)
    '41.49'
    >>> num(2.5e-5)
    '2.500 × 10⁻⁵'
    """
    c = _num_classify(x, digits, "num")
    if c[0] == "inf":
        return MINUS + "∞" if c[1] else "∞"
    if c[0] == "zero":
        return "0"
    sign = MINUS if c[1] else ""
    if c[0] == "int":
        return sign + _group(str(c[2]))
    _, neg, n, e = c
    if c[0] == "fixed":
        return sign + _fixed(n, e, digits)
    return sci(x, digits)


def num_tex(x: object, digits: int = 4) -> str:
    r""":func:`num` for use inside ``$…$``: ``"70{,}553{,}706{,}496"``, ``"41.49"``, or :func:`sci_tex`.

    >>> num_tex(70553706496)
    '70{,}553{,}706{,}496'
    """
    c = _num_classify(x, digits, "num_tex")
    if c[0] == "inf":
        return r"-\infty" if c[1] else r"\infty"
    if c[0] == "zero":
        return "0"
    sign = "-" if c[1] else ""
    if c[0] == "int":
        return sign + _group(str(c[2])).replace(",", "{,}")
    _, neg, n, e = c
    if c[0] == "fixed":
        return sign + _fixed(n, e, digits, sep="{,}")
    return sci_tex(x, digits)


def _sig_plain(q: Fraction, digits: int) -> str:
    """Signed fixed notation with ``digits`` significant digits, sci outside [10⁻³, 10⁶)."""
    if q == 0:
        return "0"
    neg, n, e = _decompose(q, digits)
    rounded = Fraction(n) * Fraction(10) ** (e - digits + 1)
    if _FIXED_LOW <= rounded < _FIXED_HIGH:
        body = _fixed(n, e, digits)
    else:
        body = _mantissa(n, digits) + f" {TIMES} 10" + str(e).translate(_SUPERSCRIPT)
    return (MINUS if neg else "") + body


def pct(x: object, digits: int = 3) -> str:
    """A fraction as a percentage with ``digits`` significant digits: ``0.1214`` → ``"12.1%"``.

    No space before ``%`` (the book's ``{x:.1%}`` style).  ``1`` is ``"100%"``.

    >>> pct(0.1214)
    '12.1%'
    >>> pct(0.5)
    '50.0%'
    """
    digits = _check_digits(digits, "pct")
    q = _exact(x, "x", "pct")
    if isinstance(q, float):
        _nonfinite(q, "pct", "x", allow_inf=False)
    return _sig_plain(q * 100, digits) + "%"


def ratio(x: object, digits: int = 3) -> str:
    """A ratio ("how many times") with ``digits`` significant digits: ``2`` → ``"2.00×"``.

    >>> ratio(2)
    '2.00×'
    >>> ratio(12.34)
    '12.3×'
    """
    digits = _check_digits(digits, "ratio")
    q = _exact(x, "x", "ratio")
    if isinstance(q, float):
        _nonfinite(q, "ratio", "x", allow_inf=True)
        return ("∞" if q > 0 else MINUS + "∞") + TIMES
    return _sig_plain(q, digits) + TIMES


def bytes_si(n: object, decimals: int = 1, unit: str | None = None) -> str:
    """A byte count in decimal SI units (1 GB = 10⁹ bytes): ``140e9`` → ``"140.0 GB"``.

    ``unit=None`` picks the largest unit of :data:`BYTE_UNITS` the value reaches
    (after rounding, so 999.96 GB is ``"1.0 TB"``); pass ``unit="GB"`` to put a
    table's column in one unit.  Plain bytes are written without decimals when
    the count is whole (``"512 B"``).  ``decimals`` digits follow the point.

    >>> bytes_si(140e9)
    '140.0 GB'
    >>> bytes_si(1_600_000, unit="GB", decimals=4)
    '0.0016 GB'
    """
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
        raise TypeError(
            f"bytes_si(): decimals must be an int, got {type(decimals).__name__} {decimals!r}"
        )
    if decimals < 0:
        raise ValueError(f"bytes_si(): decimals={decimals} must be at least 0")
    if unit is not None and unit not in BYTE_UNITS:
        raise ValueError(f"bytes_si(): unit={unit!r}: use one of {', '.join(BYTE_UNITS)}")
    q = _exact(n, "n", "bytes_si")
    if isinstance(q, float):
        _nonfinite(q, "bytes_si", "n", allow_inf=False)
    neg, a = q < 0, abs(q)
    if unit is None:
        k = 0
        while k + 1 < len(BYTE_UNITS) and a >= 1000 ** (k + 1):
            k += 1
        # a carry in rounding (999.96 GB -> "1000.0 GB") moves to the next unit
        if k + 1 < len(BYTE_UNITS) and round(a / 1000**k * 10**decimals) >= 1000 * 10**decimals:
            k += 1
    else:
        k = BYTE_UNITS.index(unit)
    scaled = a / 1000**k
    places = 0 if (k == 0 and scaled.denominator == 1) else int(decimals)
    m = _round_half_even(scaled * 10**places)
    s = str(m).rjust(places + 1, "0")
    int_part, frac = (s[:-places], s[-places:]) if places else (s, "")
    body = _group(int_part) + ("." + frac if frac else "")
    sign = MINUS if neg and m != 0 else ""
    return f"{sign}{body} {BYTE_UNITS[k]}"

"""Answer keys for the book's exercises, and a checker that does not reveal them.

A student types ``tmath.check(value, "ex-tour-1")`` in a cell and learns
whether the answer is right within the exercise's stated tolerance; the key
itself is never printed.  In an answer cell of the student notebooks the same
check is ``my_answer("ex-tour-1", value)`` (``from tmath.exercises import
my_answer``), which also records the value in the cell's output, where
``python -m tmath grade`` reads it.

Keys are computed by tmath, by the same functions the chapters use, so a key
cannot drift from the book.  Each chapter's solution cell asserts that its
worked answer passes :func:`check`, which ties the registry to the notebooks
(nbval re-runs those asserts).

**What counts as right: one grid rule, three places.**  Every key has one kind
of tolerance, and the check is a comparison of grid cells, not of numbers:

- ``count=True`` (a number of parameters, GPUs, sequences, heads ...): the answer
  must be an integer (an integer-valued float such as ``8.0`` is fine; ``0.5``
  heads is not), and it is right when ``|x - key| <= abs_tol`` (0 unless the
  exercise allows a slack).  The grid is the integers: this is exact.
- ``abs_tol=a``: the grid has cells of width ``a / GRID_STEPS`` and ``x`` is
  right when its cell is at most ``GRID_STEPS`` cells from the key's cell.
- ``rel_tol=r``: the same on ``log|x|`` (cells of width ``-log(1 - r) / GRID_STEPS``,
  and the sign must agree).

For ``abs_tol`` and ``rel_tol`` this accepts **every** value within the stated
tolerance (``|x - key| <= a``; for ``r``: ``|x - key| <= r * max(|x|, |key|)``,
which is ``math.isclose``), and **nothing** beyond ``1 + 1/GRID_STEPS`` = 1.25
times it; in between, the verdict depends on where the key falls in its cell.
The full edition, the course kit (which holds no key, only a salted hash of the
key's grid cell, see :func:`hash_table`) and the teacher's grader all apply this
same rule, so a student who sees ✓ in the kit gets the point from the grader.

**The hashes cost time on purpose.**  A kit's hash is PBKDF2-HMAC-SHA256 of the cell,
salted per key, with :data:`KDF_ITERATIONS` iterations (about 1.3 s on one core): an
honest check hashes the answer's cell and its neighbours, nearest first and as many at a
time as there are cores (one hash for an answer in the key's cell, ``2 × window + 1`` for a
wrong one), while recovering a key means hashing every cell of the range it may lie in, one
by one: more than an hour for a typical practice key on one core, a few minutes for one
who knows its order of magnitude (``benchmarks/bench_kdf.py`` measures both).  No setting
makes both cheap: the guesser's work is the honest check's times the number of tolerance
widths the key may lie in, a few hundred for a key of 1 %.  The hashes are stored in
:data:`HASH_STORE` and only a changed key is hashed again.  PBKDF2 rather than a memory-hard
KDF because the website checks answers in the reader's browser, whose Web Crypto API offers
PBKDF2 and no scrypt or Argon2 (:mod:`tmath.web`); a GPU attacker is faster than one core.
Exercises a teacher grades carry no hash at all.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import numbers
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

#: Grid cells per tolerance: the check accepts every value within the tolerance and
#: none beyond (1 + 1/GRID_STEPS) times it.
GRID_STEPS = 4
#: Significant digits a careful hand calculation carries, unless the exercise asks
#: for more (``digits=``) or for decimal places (``decimals=``).
HAND_DIGITS = 4
#: PBKDF2-HMAC-SHA256 iterations of a kit's hashes: about 1.3 s a hash on one core, so that
#: guessing a typical practice key cell by cell takes more than an hour there
#: (``benchmarks/bench_kdf.py``). The table records the count it used, so a kit built with
#: another count still checks.
KDF_ITERATIONS = 6_000_000
#: Output MIME type of an answer cell's record (``my_answer``), read by the grader.
ANSWER_MIME = "application/vnd.tmath.answer+json"

#: Units written as symbols (SI, bytes, FLOPs, and the book's letters); every other
#: unit a reader sees in a verdict is Chinese (``个 token``, ``条序列``, ``天`` ...).
UNIT_SYMBOLS: frozenset[str] = frozenset({
    "%", "B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "ms", "s", "kWh", "MWh",
    "FLOP", "FLOPs", "GFLOP", "FLOP/s", "FLOP/字节", "FLOPs/token", "t CO₂e", "kg CO₂e/kWh", "D",
})


def unit_is_readable(unit: str) -> bool:
    """Whether ``unit`` may be shown to a reader: empty, a symbol of :data:`UNIT_SYMBOLS`,
    or Chinese (a measure word such as ``个``, with an English term such as token allowed)."""
    return not unit or unit in UNIT_SYMBOLS or bool(re.search(r"[\u4e00-\u9fff]", unit))


def _with_unit(number: str, unit: str) -> str:
    """``"0.5 个 token"``, ``"0.05%"``: a space before a unit, none before ``%``."""
    if not unit:
        return number
    return number + unit if unit == "%" else f"{number} {unit}"


def plain_number(x: float) -> str:
    """``0.0005`` → ``"0.0005"``, ``1e-05`` → ``"0.00001"``, ``2.0`` → ``"2"``: the shortest
    decimal that is ``x``, never in exponent form and never rounded to zero."""
    text = format(Decimal(repr(float(x))).normalize(), "f")
    return text[:-2] if text.endswith(".0") else text


def _percent(r: float) -> str:
    """``0.001`` → ``"0.1%"``, exactly (decimal arithmetic, no float noise)."""
    text = format((Decimal(repr(float(r))) * 100).normalize(), "f")
    return f"{text}%"


def pbkdf2_sha256(password: bytes, salt: bytes, iterations: int) -> bytes:
    """PBKDF2-HMAC-SHA256, 32 bytes: :func:`hashlib.pbkdf2_hmac` where Python has it (OpenSSL),
    else the same function in pure Python (RFC 8018; Pyodide's hashlib has no
    ``pbkdf2_hmac``: the website uses the browser's Web Crypto instead, see :mod:`tmath.web`)."""
    try:
        from hashlib import pbkdf2_hmac
    except ImportError:
        inner, outer = hashlib.sha256(), hashlib.sha256()
        key = password if len(password) <= 64 else hashlib.sha256(password).digest()
        key = key.ljust(64, b"\0")
        inner.update(bytes(b ^ 0x36 for b in key))
        outer.update(bytes(b ^ 0x5C for b in key))

        def prf(msg: bytes) -> bytes:
            i, o = inner.copy(), outer.copy()
            i.update(msg)
            o.update(i.digest())
            return o.digest()

        u = prf(salt + b"\x00\x00\x00\x01")
        out = int.from_bytes(u, "big")
        for _ in range(iterations - 1):
            u = prf(u)
            out ^= int.from_bytes(u, "big")
        return out.to_bytes(32, "big")
    return pbkdf2_hmac("sha256", password, salt, iterations)


@dataclass(frozen=True)
class AnswerKey:
    """One exercise's key: how to compute it (full edition) or its hash (course kit),
    and its tolerance."""

    label: str
    compute: Callable[[], float] | None
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    unit: str = ""
    count: bool = False
    digits: int | None = None
    decimals: int | None = None
    salt: str = field(default="", repr=False)
    digest: str = field(default="", repr=False)
    iterations: int = KDF_ITERATIONS

    # --- the grid ------------------------------------------------------------------
    @property
    def window(self) -> int:
        """How many grid cells away from the key's cell an answer may fall."""
        return int(self.abs_tol) if self.count else GRID_STEPS

    def _cell(self, x: float) -> tuple[str, int] | None:
        """The grid cell of ``x``: (sign, index); None when no cell of ``x`` can be right (a
        count that is not an integer, zero under a relative tolerance, a value so large
        that its cell index overflows)."""
        if self.count:
            n = round(x)
            # float noise (0.1 * 3 * 10 / 3) is an integer; 617558016.5 is not
            return None if abs(x - n) > 1e-12 * max(1.0, abs(x)) else ("", n)
        if self.abs_tol:
            index = x / (self.abs_tol / GRID_STEPS)
            return ("", math.floor(index)) if math.isfinite(index) else None
        if x == 0:
            return None
        step = -math.log1p(-self.rel_tol) / GRID_STEPS
        return ("+" if x > 0 else "-"), math.floor(math.log(abs(x)) / step)

    def _near(self, cell: tuple[str, int]) -> list[str]:
        """``cell`` and its neighbours within :attr:`window`, as the strings that are hashed."""
        sign, index = cell
        return [f"{sign}{index + j}" for j in range(-self.window, self.window + 1)]

    def hash_input(self, cell: str) -> tuple[bytes, bytes]:
        """(password, salt) that :meth:`digest_of` hashes for ``cell``."""
        return f"{self.label}:{cell}".encode(), bytes.fromhex(self.salt)

    def digest_of(self, cell: str) -> str:
        password, salt = self.hash_input(cell)
        return pbkdf2_sha256(password, salt, self.iterations).hex()

    def candidates(self, x: float) -> list[str] | None:
        """The cells whose hash may be the key's when ``x`` is right, nearest first; None when
        no cell of ``x`` can be right."""
        mine = self._cell(x)
        if mine is None:
            return None
        near = self._near(mine)
        return sorted(near, key=lambda c: abs(int(c.lstrip("+-")) - mine[1]))

    def key_digest(self) -> str:
        """The salted hash of the key's own cell (computed from the key: full edition only)."""
        return self.digest_of(_key_cell(self))

    def accepts(self, x: float) -> bool | None:
        """Is ``x`` right? None when the answer is a count and ``x`` is not an integer."""
        mine = self._cell(x)
        if mine is None:
            return None if self.count else False
        if self.compute is not None:
            key = self._cell(float(self.compute()))
            return key is not None and key[0] == mine[0] and abs(key[1] - mine[1]) <= self.window
        # nearest cells first, as many at a time as there are cores (an answer in the key's
        # own cell costs one hash; a wrong one costs them all)
        cells = self.candidates(x)
        wave = os.cpu_count() or 1
        return any(self.digest in _parallel(self.digest_of, cells[i:i + wave])
                   for i in range(0, len(cells), wave))

    # --- what the reader sees -----------------------------------------------------
    def tolerance_text(self) -> str:
        if self.count:
            text = (f"精确整数（{self.unit}）" if self.unit else "精确整数") if not self.abs_tol else (
                f"整数，绝对误差 ≤ {_with_unit(plain_number(self.abs_tol), self.unit)}")
        elif self.rel_tol:
            text = f"相对误差 ≤ {_percent(self.rel_tol)}"
        else:
            text = f"绝对误差 ≤ {_with_unit(plain_number(self.abs_tol), self.unit)}"
        if self.digits:
            text += f"，约需 {self.digits} 位有效数字"
        if self.decimals:
            text += f"，保留 {self.decimals} 位小数即可"
        return text

    def hand_value(self, value: float) -> float:
        """``value`` as a careful hand calculation writes it: exact for a count, else
        rounded to ``decimals`` places or to ``digits`` (default :data:`HAND_DIGITS`)
        significant digits."""
        if self.count:
            return value
        if self.decimals is not None:
            return round(value, self.decimals)
        return float(f"{value:.{self.digits or HAND_DIGITS}g}")


@dataclass(frozen=True)
class CheckResult:
    label: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return self.message

    def _repr_markdown_(self) -> str:
        return self.message


_KEYS: dict[str, AnswerKey] = {}
#: The course kit's graded exercise parts: their keys left no hash in the kit (the grader alone
#: checks them); an answer to one is recorded, not checked.
_GRADED: set[str] = set()


def graded_exercises() -> list[str]:
    """The exercises a teacher marked as graded (``BOOK_GRADED``, comma-separated labels) for
    the course kit and the student site being built: they get no hash, so no self-check."""
    import os

    return sorted({x.strip() for x in os.environ.get("BOOK_GRADED", "").split(",") if x.strip()})


def answer(label: str, *, rel_tol: float | None = None, abs_tol: float = 0.0, unit: str = "",
           count: bool = False, digits: int | None = None, decimals: int | None = None):
    """Register the function below as the answer key of exercise ``label``.

    Give exactly one tolerance: ``count=True`` (an exact integer; ``abs_tol`` then
    allows a slack of that many units), ``abs_tol=`` or ``rel_tol=`` (default 0.1 %).
    ``digits`` / ``decimals``: the precision the exercise asks for, when a careful
    hand calculation must carry more than :data:`HAND_DIGITS` significant digits.
    """
    if rel_tol is None:
        rel_tol = 0.0 if (count or abs_tol) else 1e-3
    if rel_tol < 0 or abs_tol < 0:
        raise ValueError(f"{label}：rel_tol 和 abs_tol 不能为负（现在是 {rel_tol}、{abs_tol}）")
    if count:
        if rel_tol or abs_tol != int(abs_tol):
            raise ValueError(f"{label}：count=True 的答案是整数，只能用整数 abs_tol，不能用 rel_tol")
    elif (rel_tol > 0) == (abs_tol > 0):
        raise ValueError(
            f"{label}：rel_tol 与 abs_tol 恰好给一个大于 0 的值（现在是 {rel_tol}、{abs_tol}）；"
            "整数答案用 count=True"
        )

    def register(fn: Callable[[], float]) -> Callable[[], float]:
        if label in _KEYS:
            raise ValueError(f"练习 {label!r} 的答案登记了两次")
        _KEYS[label] = AnswerKey(label, fn, rel_tol, abs_tol, unit, count, digits, decimals)
        return fn

    return register


def labels() -> list[str]:
    """Labels of every exercise that has an answer key."""
    _load()
    return sorted(_KEYS)


def keys_of(exercise: str) -> list[AnswerKey]:
    """The keys of one exercise (``ex-tour-1`` and its parts ``ex-tour-1/share`` ...),
    in the order the key modules register them."""
    _load()
    return [k for name, k in _KEYS.items() if name == exercise or name.startswith(exercise + "/")]


def has_keys() -> bool:
    """True in the full edition (keys computed by tmath), False in the course kit (hashes only)."""
    _load()
    return any(k.compute is not None for k in _KEYS.values())


def _number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Number) and not hasattr(value, "__float__"):
        raise TypeError(f"答案必须是一个数（int 或 float），收到的是 {type(value).__name__}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"答案必须是一个实数，收到的是 {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"答案必须是有限的数，收到的是 {value!r}")
    return x


def key_and_value(value, label: str) -> tuple[AnswerKey, float]:
    """The key of exercise ``label`` and ``value`` as a float; a Chinese error for a label that
    has no key or a value that is not a finite number."""
    _load()
    if not isinstance(label, str) or label not in _KEYS:
        raise ValueError(f"没有练习 {label!r} 的答案：请用练习旁边写明的编号，例如 "
                         f"{'、'.join(_nearby_labels(label))}")
    return _KEYS[label], _number(value)


def _nearby_labels(label: object, n: int = 5) -> list[str]:
    """Up to ``n`` labels to suggest for a label that has no key: those of the same chapter
    (``ex-tour-9`` → ``ex-tour-1`` ...; ``ex-tour-1/shares`` → ``ex-tour-1/share`` first), then
    the closest spellings, then the first ones alphabetically."""
    import difflib

    def order(name: str) -> tuple:
        return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))

    names = sorted(_KEYS, key=order)
    text = label if isinstance(label, str) else ""
    exercise = text.split("/")[0]
    chapter = re.sub(r"-\d+$", "", exercise)
    picks = [k for k in names if k.split("/")[0] == exercise]
    picks += [k for k in names if chapter and re.sub(r"-\d+$", "", k.split("/")[0]) == chapter]
    picks += difflib.get_close_matches(text, names, n=n, cutoff=0.6)
    picks += names
    return list(dict.fromkeys(picks))[:n]


def verdict(key: AnswerKey, ok: bool | None) -> CheckResult:
    """What :func:`check` says once it knows whether the answer is right (None: a count
    answered with a number that is not an integer)."""
    tolerance = key.tolerance_text()
    if ok is None:
        return CheckResult(key.label, False,
                           f"{key.label}：✗ 还不对（答案是个数，应为整数；容差：{tolerance}）")
    return CheckResult(key.label, ok, f"{key.label}：{'✓ 正确' if ok else '✗ 还不对'}（容差：{tolerance}）")


def check(value, label: str) -> CheckResult:
    """Is ``value`` the answer to exercise ``label``, within its tolerance?

    Returns a :class:`CheckResult` that is truthy when correct and prints a
    short verdict in Chinese, never the key.  See the module docstring for exactly
    which values are accepted.
    """
    key, x = key_and_value(value, label)
    return verdict(key, key.accepts(x))


def answer_record(label: str, value) -> tuple[str, dict]:
    """The verdict an answer cell shows, and the record of the answer it leaves for the grader."""
    if value is None:
        return f"{label}：尚未作答（把 None 换成你的答案，再运行本单元格）", {"label": label, "value": None}
    _load()
    # The kit holds nothing of this key (a graded exercise), or the grader runs the notebook
    # (TMATH_GRADING, set in its sandbox: it checks the answer itself, without the slow hashes):
    # record the answer, check nothing.
    grading = _KIT and os.environ.get("TMATH_GRADING") == "1"
    if label in _GRADED or grading:
        try:
            x = _number(value)
        except (TypeError, ValueError) as e:
            return f"{label}：✗ {e}", {"label": label, "value": None, "error": str(e)}
        exact = isinstance(value, numbers.Integral) or hasattr(value, "__index__")
        why = "评分时不自查，由评分程序核对" if grading else "这道题由老师评分，课程包里没有它的自查"
        return (f"{label}：已记下你的答案 {plain_number(x) if not exact else int(value)}（{why}）",
                {"label": label, "value": int(value) if exact else float(value)})
    try:
        message = repr(check(value, label))
    except (TypeError, ValueError) as e:
        return f"{label}：✗ {e}", {"label": label, "value": None, "error": str(e)}
    exact = isinstance(value, numbers.Integral) or hasattr(value, "__index__")
    return message, {"label": label, "value": int(value) if exact else float(value)}


def my_answer(label: str, value) -> None:
    """State your answer to exercise ``label`` (the answer cells call this).

    Shows ✓ / ✗ with the tolerance, like :func:`check`, and leaves a record of
    ``value`` in the cell's output: the teacher's grader re-runs the notebook and
    reads it from there.  Returns nothing, so several calls in one cell each print.
    """
    message, record = answer_record(label, value)
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: just print
        get_ipython = None  # noqa: N806
    if get_ipython is None or get_ipython() is None:
        print(message)
        return
    from IPython.display import display

    display({"text/plain": message, ANSWER_MIME: record}, raw=True)


# --- the course kit: keys as salted hashes of their grid cells -----------------------------


def kdf_iterations() -> int:
    """:data:`KDF_ITERATIONS`, or ``TMATH_KDF_ITERATIONS`` where set (the test suite builds its
    sites and kits with fewer, to spare minutes of CPU; the count is stored with each hash)."""
    import os

    text = os.environ.get("TMATH_KDF_ITERATIONS", "")
    return int(text) if text.isdigit() and int(text) > 0 else KDF_ITERATIONS


#: The stored hashes of every key at :data:`KDF_ITERATIONS` (``make answer-hashes`` writes it):
#: hashing all keys anew costs minutes of CPU, so the builds read them from here. Inside
#: ``answer_keys``, so neither the course kit nor the website carries it.
HASH_STORE = Path(__file__).parent / "answer_keys" / "hashes.json"


def _key_cell(key: AnswerKey) -> str:
    cell = key._cell(float(key.compute()))
    if cell is None:
        raise ValueError(f"{key.label}：count=True 的答案必须是整数，钥匙算出的是 {key.compute()!r}")
    return f"{cell[0]}{cell[1]}"


def _fingerprint(key: AnswerKey, cell: str, salt: str, iterations: int) -> str:
    """What a stored hash was made from (the key's cell, its grid, salt and cost), hashed fast: a
    store entry is current when this matches. The repository holds the keys themselves, so a
    fast hash of them there reveals nothing; the store never leaves the repository."""
    text = f"{key.label}|{cell}|{key.rel_tol!r}|{key.abs_tol!r}|{key.count}|{salt}|{iterations}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _stored() -> dict[str, dict]:
    try:
        return json.loads(HASH_STORE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _parallel(fn: Callable, items: list) -> list:
    """``map(fn, items)`` over threads, one per core: hashlib's PBKDF2 releases the GIL."""
    if len(items) < 2:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(items), os.cpu_count() or 1)) as pool:
        return list(pool.map(fn, items))


def _entries(labels: list[str] | None, iterations: int, store: dict) -> dict[str, dict]:
    """Per key: salt, iterations, digest and fingerprint, from ``store`` where current, else
    computed with a fresh salt (in parallel)."""
    _load()
    if _KIT:
        raise ValueError("hash_table() 需要完整版的答案，课程包里只有哈希")
    chosen = [key for label, key in _KEYS.items()
              if labels is None or label in labels or label.split("/")[0] in labels]
    out, todo = {}, []
    for key in chosen:
        cell = _key_cell(key)
        entry = store.get(key.label)
        if entry and entry.get("iterations") == iterations and entry.get("check") == _fingerprint(
                key, cell, entry.get("salt", ""), iterations):
            out[key.label] = entry
        else:
            todo.append((key, cell, secrets.token_hex(16)))

    def make(item: tuple[AnswerKey, str, str]) -> dict:
        key, cell, salt = item
        salted = AnswerKey(key.label, None, key.rel_tol, key.abs_tol, salt=salt, iterations=iterations)
        return {"salt": salt, "iterations": iterations, "digest": salted.digest_of(cell),
                "check": _fingerprint(key, cell, salt, iterations)}

    for (key, _, _), entry in zip(todo, _parallel(make, todo), strict=True):
        out[key.label] = entry
    return {key.label: out[key.label] for key in chosen}


def hash_table(labels: list[str] | None = None, iterations: int | None = None) -> dict[str, dict]:
    """For the course kit and the website: per key, its tolerance and a salted hash of its
    grid cell (PBKDF2-HMAC-SHA256, ``iterations``, default :func:`kdf_iterations`).

    Computed from the real keys (so the table cannot drift from the book). At
    :data:`KDF_ITERATIONS` the hashes come from :data:`HASH_STORE` wherever the key's cell,
    grid and salt are still those it was made from; a key that changed, or another count of
    iterations, is hashed anew with a fresh random salt.  Holds no key value and no
    computation.  ``labels``: only these keys (and the parts of these exercises), e.g. the
    practice exercises of a release.
    """
    iterations = kdf_iterations() if iterations is None else iterations
    store = _stored() if iterations == KDF_ITERATIONS else {}
    table = {}
    for label, entry in _entries(labels, iterations, store).items():
        key = _KEYS[label]
        table[label] = {
            "rel_tol": key.rel_tol, "abs_tol": key.abs_tol, "unit": key.unit, "count": key.count,
            "digits": key.digits, "decimals": key.decimals, "salt": entry["salt"],
            "iterations": iterations, "digest": entry["digest"],
        }
    return table


def write_hash_store() -> tuple[int, int]:
    """Bring :data:`HASH_STORE` up to date with the keys (``make answer-hashes``): keep every
    current entry, hash the new and changed keys, drop the keys that are gone.  Returns (kept,
    hashed)."""
    store = _stored()
    entries = _entries(None, KDF_ITERATIONS, store)
    kept = sum(store.get(label) == entry for label, entry in entries.items())
    HASH_STORE.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return kept, len(entries) - kept


_KIT: bool | None = None  # None: not loaded yet; True: the course kit's hashes


def _load() -> None:
    global _KIT
    if _KIT:
        return
    try:
        # Importing the package registers the keys (one module per part of the book).
        importlib.import_module("tmath.answer_keys")
    except ModuleNotFoundError as e:
        if e.name != "tmath.answer_keys":
            raise
        # The course kit: no keys, only their hashes (written by scripts/student_kit.py).
        from tmath import _answer_hashes

        for label, entry in _answer_hashes.KEYS.items():
            _KEYS[label] = AnswerKey(label, None, **entry)
        _GRADED.update(getattr(_answer_hashes, "GRADED", ()))
        _KIT = True
    else:
        _KIT = False


def main() -> None:
    """``make answer-hashes``: bring :data:`HASH_STORE` up to date after a key changed."""
    kept, made = write_hash_store()
    print(f"{HASH_STORE}: {kept} hashes kept, {made} made ({KDF_ITERATIONS:,} PBKDF2 iterations each)")


if __name__ == "__main__":  # python -m tmath.exercises: the keys register in the package's module
    importlib.import_module("tmath.exercises").main()

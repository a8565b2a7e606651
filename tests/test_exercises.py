"""tmath.check: right answers pass, wrong ones fail, the key is never shown, bad input is refused."""

import dataclasses
import math
import re
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmath
from tmath.exercises import labels


def test_right_answer_passes_and_wrong_fails():
    # GPT-3 Small outside its embedding tables, by hand: 12 layers of 12*768^2 + 13*768, final LN.
    by_hand = 12 * (12 * 768**2 + 13 * 768) + 2 * 768
    assert tmath.check(by_hand, "ex-tour-1")
    assert not tmath.check(by_hand + 768, "ex-tour-1")
    assert tmath.check(108, "ex-tour-2") and not tmath.check(107, "ex-tour-2")


def test_verdict_does_not_reveal_the_key():
    result = tmath.check(1, "ex-tour-1")
    assert "85" not in repr(result) and "还不对" in repr(result)


def test_tolerance_is_stated():
    assert "绝对误差" in repr(tmath.check(40.0, "ex-tour-1/share"))


@pytest.mark.parametrize("bad", ["12", None, [1, 2]])
def test_non_numbers_are_refused(bad):
    with pytest.raises(TypeError, match="答案必须是一个数"):
        tmath.check(bad, "ex-tour-1")


def test_unknown_label_names_the_fix():
    with pytest.raises(ValueError, match="没有练习 'ex-nope' 的答案"):
        tmath.check(1.0, "ex-nope")
    with pytest.raises(ValueError, match="有限"):
        tmath.check(float("nan"), "ex-tour-1")


def test_every_key_computes_a_finite_number():
    assert len(labels()) >= 3
    for label in labels():
        assert math.isfinite(float(tmath.exercises._KEYS[label].compute())), label


def test_every_key_belongs_to_an_exercise_in_the_book():
    import re

    from conftest import ROOT

    labels_in_book = set()
    for path in (ROOT / "book").rglob("*.ipynb"):
        labels_in_book |= set(re.findall(r":label: (ex-[\w.-]+)", path.read_text(encoding="utf-8")))
    orphans = [k for k in labels() if k.split("/")[0] not in labels_in_book]
    assert not orphans, f"answer keys without an exercise: {orphans}"


def test_every_check_hint_in_the_book_has_a_key():
    import re

    from conftest import ROOT

    hinted = set()
    for path in (ROOT / "book").rglob("*.ipynb"):
        text = path.read_text(encoding="utf-8")
        hinted |= set(re.findall(r'tmath\.check\([^,()]+, \\?"(ex-[\w./-]+)\\?"\)', text))
    missing = sorted(hinted - set(labels()))
    assert hinted and not missing, f"exercises that point to tmath.check but have no key: {missing}"


def test_verdicts_state_units_in_chinese():
    # an exact count with a measure word, and a percentage with no space before %
    assert "精确整数（条序列）" in repr(tmath.check(0, "ex-llama3-70b-1"))
    assert "绝对误差 ≤ 0.05%" in repr(tmath.check(0, "ex-tour-1/share"))
    assert "精确整数（个参数）" in repr(tmath.check(0, "ex-tour-1"))
    assert "整数，绝对误差 ≤ 1 个 token" in repr(tmath.check(0, "ex-fails-1"))


def test_every_unit_a_reader_sees_is_chinese_or_a_symbol():
    from tmath.exercises import _KEYS, unit_is_readable

    labels()
    english = {k: key.unit for k, key in _KEYS.items() if not unit_is_readable(key.unit)}
    assert not english, f"units in English: {english}"


@pytest.mark.parametrize(
    ("unit", "ok"),
    [("sequences", False), ("tokens", False), ("FLOPs per token", False), ("GPUs", False),
     ("条序列", True), ("个 token", True), ("GB", True), ("ms", True), ("%", True), ("", True)],
)
def test_unit_is_readable(unit, ok):
    from tmath.exercises import unit_is_readable

    assert unit_is_readable(unit) is ok


def test_verdict_words_are_chinese():
    result = tmath.check(1, "ex-tour-1")
    text = repr(result)
    assert text.startswith("ex-tour-1：✗ 还不对（容差：")
    assert not re.search(r"[A-Za-z]{3,}", text.replace("ex-tour-1", ""))


# --- counts are integers; tolerances are readable and met by a careful hand calculation -----------


def test_a_count_must_be_an_integer():
    heads = tmath.exercises._KEYS["ex-llama3-70b-4/heads"].compute()
    assert heads == 1
    half = tmath.check(0.5, "ex-llama3-70b-4/heads")  # the mistake the exercise targets
    assert not half and "答案是个数，应为整数" in repr(half)
    assert tmath.check(1, "ex-llama3-70b-4/heads") and tmath.check(1.0, "ex-llama3-70b-4/heads")
    assert tmath.check(np.int64(1), "ex-llama3-70b-4/heads")
    assert tmath.check(0.1 * 3 * 10 / 3, "ex-llama3-70b-4/heads"), "float noise is still an integer"
    assert not tmath.check(2, "ex-llama3-70b-4/heads") and not tmath.check(1.001, "ex-llama3-70b-4/heads")
    big = tmath.exercises._KEYS["ex-tour-3/extra"].compute()  # 257,315,840: half a parameter is no count
    assert tmath.check(big, "ex-tour-3/extra") and not tmath.check(big + 0.5, "ex-tour-3/extra")
    # a count with a slack of one token: exactly |x - key| <= 1
    key = tmath.exercises._KEYS["ex-fails-1"].compute()
    assert all(tmath.check(key + d, "ex-fails-1") for d in (-1, 0, 1))
    assert not tmath.check(key + 2, "ex-fails-1") and not tmath.check(key + 0.5, "ex-fails-1")


def test_every_count_key_is_an_integer():
    labels()
    for label, key in tmath.exercises._KEYS.items():
        if key.count:
            value = key.compute()
            assert float(value).is_integer(), f"{label}: count=True but the key is {value!r}"


def _printed_tolerance(key) -> Decimal | None:
    """The number a verdict prints as the tolerance (None for an exact count)."""
    text = key.tolerance_text()
    m = re.search(r"≤ ([0-9.]+)(%?)", text)
    if m is None:
        return None
    number = Decimal(m.group(1))
    return number / 100 if m.group(2) and key.rel_tol else number


def test_every_tolerance_prints_readably_with_a_nonzero_digit():
    """No "0.00%": the printed tolerance is exactly the tolerance the check applies."""
    labels()
    for label, key in tmath.exercises._KEYS.items():
        text = key.tolerance_text()
        assert "e-" not in text and "e+" not in text, f"{label}: {text}"
        printed = _printed_tolerance(key)
        if key.count and not key.abs_tol:
            assert text.startswith("精确整数"), f"{label}: {text}"
            continue
        assert printed is not None and printed > 0 and re.search(r"[1-9]", text), f"{label}: {text}"
        stated = Decimal(repr(key.rel_tol or key.abs_tol))
        assert printed == stated, f"{label}: prints {text!r} for a tolerance of {stated}"


def test_tolerance_printer_fails_on_the_old_format():
    """The readability test above can fail: the old formatter printed 1e-6 as "0.00%"."""
    old = f"相对误差 ≤ {1e-6:.2%}"
    assert old == "相对误差 ≤ 0.00%" and not re.search(r"[1-9]", old.split("≤")[1])


def test_every_key_accepts_a_careful_hand_calculation():
    """The key written as a careful hand calculation writes it passes: 4 significant digits
    (HAND_DIGITS), or what the exercise asks (``digits=``, ``decimals=``); counts exactly."""
    from tmath.exercises import HAND_DIGITS

    assert HAND_DIGITS == 4
    failing = {}
    for label in labels():
        key = tmath.exercises._KEYS[label]
        hand = key.hand_value(float(key.compute()))
        if not tmath.check(hand, label):
            failing[label] = (hand, key.tolerance_text())
    assert not failing, (
        "keys whose tolerance a careful hand calculation misses (widen the tolerance, or declare "
        f"count=True, digits= or decimals= as the exercise asks): {failing}"
    )


def test_the_tour_ratio_still_tells_four_from_the_answer():
    """ex-tour-4 asks why the ratio is a little under 4: 4 itself must stay wrong."""
    assert not tmath.check(4, "ex-tour-4") and not tmath.check(4.0, "ex-tour-4")
    assert tmath.check(3.9998, "ex-tour-4") and tmath.check(3.99982, "ex-tour-4")


# --- the grid rule: every value within the tolerance, nothing beyond 1.25 times it -------------------


def _key(value: float, **tol):
    from tmath.exercises import AnswerKey

    return AnswerKey("ex-test", lambda: value, **tol)


@settings(max_examples=300, deadline=None)
@given(
    key=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
    tol=st.sampled_from([1e-4, 5e-4, 0.005, 0.05, 0.5, 1.0, 2.5]),
    frac=st.floats(min_value=-3.0, max_value=3.0),
)
def test_absolute_grid_accepts_the_tolerance_and_nothing_beyond(key, tol, frac):
    from tmath.exercises import GRID_STEPS

    x = key + frac * tol
    ok = _key(key, abs_tol=tol).accepts(x)
    err = abs(x - key)
    if err <= tol * (1 - 1e-9):
        assert ok, (key, tol, x)
    if err >= tol * (1 + 1 / GRID_STEPS) * (1 + 1e-9):
        assert not ok, (key, tol, x)


@settings(max_examples=300, deadline=None)
@given(
    key=st.floats(min_value=1e-6, max_value=1e15),
    sign=st.sampled_from([1, -1]),
    tol=st.sampled_from([1e-5, 1e-3, 0.005, 0.01]),
    frac=st.floats(min_value=-3.0, max_value=3.0),
)
def test_relative_grid_accepts_isclose_and_nothing_beyond(key, sign, tol, frac):
    from tmath.exercises import GRID_STEPS

    key *= sign
    x = key * (1 + frac * tol)
    ok = _key(key, rel_tol=tol).accepts(x)
    if math.isclose(x, key, rel_tol=tol * (1 - 1e-9)):
        assert ok, (key, tol, x)
    if not math.isclose(x, key, rel_tol=tol * (1 + 1 / GRID_STEPS) * (1 + 1e-9)):
        assert not ok, (key, tol, x)
    assert not _key(key, rel_tol=tol).accepts(-x) and not _key(key, rel_tol=tol).accepts(0.0)


def _hashed(key):
    from dataclasses import replace

    salted = replace(key, salt="0123abcd", iterations=2)  # the KDF's cost is the benchmark's
    return replace(salted, compute=None, digest=salted.key_digest())


def test_the_hashed_check_agrees_with_the_full_check_on_every_key():
    """The course kit's check (a salted hash of the key's grid cell) gives the full check's verdict."""
    from tmath.exercises import GRID_STEPS

    labels()
    compared = 0
    for label, key in tmath.exercises._KEYS.items():
        hashed = _hashed(key)
        e = float(key.compute())
        tol = key.abs_tol or 1.0
        steps = [0, 0.5, -0.5, 1, -1, 2, -2] if key.count else [0]
        if not key.count:
            span = key.abs_tol if key.abs_tol else abs(e) * key.rel_tol
            steps = [f * span for f in (0, 0.3, -0.3, 0.99, -0.99, 1.1, -1.1, 1.2, -1.2, 1.3, -1.3, 3)]
        for d in steps:
            assert hashed.accepts(e + d) == key.accepts(e + d), (label, e, d, tol)
            compared += 1
        assert hashed.accepts(e) and not hashed.accepts(e + (2 if key.count else 3 * span))
    assert compared > 1000
    assert GRID_STEPS == 4


def test_the_hash_table_holds_no_key():
    from tmath.exercises import hash_table

    table = hash_table(iterations=10)
    assert set(table) == set(labels())
    for entry in table.values():
        assert set(entry) == {"rel_tol", "abs_tol", "unit", "count", "digits", "decimals", "salt",
                              "iterations", "digest"}
        assert re.fullmatch(r"[0-9a-f]{64}", entry["digest"]) and re.fullmatch(r"[0-9a-f]{32}", entry["salt"])
    salts = [e["salt"] for e in table.values()]
    assert len(set(salts)) == len(salts), "one salt per key"
    again = hash_table(["ex-tour-1"], iterations=10)
    assert set(again) == {"ex-tour-1", "ex-tour-1/share"}
    assert again["ex-tour-1"]["salt"] != table["ex-tour-1"]["salt"], "fresh salts per build"


def test_the_hashes_are_pbkdf2_at_the_book_s_cost(monkeypatch):
    """A kit's hash is PBKDF2-HMAC-SHA256 of ``label:cell`` with the key's salt, at
    KDF_ITERATIONS unless TMATH_KDF_ITERATIONS says otherwise; the pure-Python PBKDF2 (what
    Pyodide falls back on) gives hashlib's bytes."""
    import hashlib

    from tmath.exercises import KDF_ITERATIONS, AnswerKey, hash_table, pbkdf2_sha256

    monkeypatch.delenv("TMATH_KDF_ITERATIONS", raising=False)
    assert KDF_ITERATIONS >= 100_000
    entry = hash_table(["ex-tour-2"])["ex-tour-2"]
    assert entry["iterations"] == KDF_ITERATIONS
    key = AnswerKey("ex-tour-2", None, **entry)
    cell = key.candidates(float(tmath.exercises._KEYS["ex-tour-2"].compute()))[0]
    want = hashlib.pbkdf2_hmac("sha256", f"ex-tour-2:{cell}".encode(), bytes.fromhex(entry["salt"]),
                               KDF_ITERATIONS).hex()
    assert want == entry["digest"]
    monkeypatch.setenv("TMATH_KDF_ITERATIONS", "7")
    assert hash_table(["ex-tour-2"])["ex-tour-2"]["iterations"] == 7
    monkeypatch.delattr(hashlib, "pbkdf2_hmac")
    # RFC 7914, section 11: PBKDF2-HMAC-SHA-256, P = "passwd", S = "salt", c = 1 (first 32 bytes)
    assert pbkdf2_sha256(b"passwd", b"salt", 1).hex() == (
        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
    # OpenSSL's bytes (hashlib.pbkdf2_hmac, printed once) for more than one iteration
    assert pbkdf2_sha256(b"ex-1:+3", b"salt", 5).hex() == (
        "ffcda05bd014bb004121d33a3cda374a6da9fff144584aba854a3efb39f68219")


def test_the_stored_hashes_are_current():
    """The builds read the slow hashes from lib/tmath/answer_keys/hashes.json: every key has one,
    made from its present cell, grid and salt at KDF_ITERATIONS (``make answer-hashes``), one
    salt per key; and two of them, recomputed here at full cost, are the hashes of their
    key's cell (a count and an absolute tolerance; ex-tour-2, a relative one, is recomputed in
    the test above)."""
    import hashlib
    import json

    from tmath.exercises import HASH_STORE, KDF_ITERATIONS, _fingerprint, _key_cell

    tmath.exercises._load()
    store = json.loads(HASH_STORE.read_text(encoding="utf-8"))
    keys = tmath.exercises._KEYS
    stale = sorted(label for label, key in keys.items()
                   if label not in store or store[label]["iterations"] != KDF_ITERATIONS
                   or store[label]["check"] != _fingerprint(key, _key_cell(key), store[label]["salt"],
                                                            KDF_ITERATIONS))
    assert not stale, f"answer_keys/hashes.json is out of date for {stale}: run `make answer-hashes`"
    assert set(store) == set(keys), "hashes of keys that are gone: run `make answer-hashes`"
    salts = [entry["salt"] for entry in store.values()]
    assert len(set(salts)) == len(salts) and all(re.fullmatch(r"[0-9a-f]{32}", s) for s in salts)
    count = next(label for label, key in sorted(keys.items()) if key.count and key.compute() > 100)
    absolute = next(label for label, key in sorted(keys.items()) if key.abs_tol and not key.count)
    for label in (count, absolute):
        key = keys[label]
        value = float(key.compute())
        if key.count:
            cell = f"{round(value)}"
        else:
            cell = f"{math.floor(value / (key.abs_tol / 4))}"
        want = hashlib.pbkdf2_hmac("sha256", f"{label}:{cell}".encode(),
                                   bytes.fromhex(store[label]["salt"]), KDF_ITERATIONS).hex()
        assert store[label]["digest"] == want, label


def test_the_store_rehashes_only_what_changed(monkeypatch, tmp_path):
    """``make answer-hashes`` keeps the current hashes, hashes a key whose value moved to another
    cell with a fresh salt, and a table built at another iteration count ignores the store."""
    import json

    import tmath.exercises as ex

    ex._load()
    monkeypatch.setattr(ex, "HASH_STORE", tmp_path / "hashes.json")
    monkeypatch.setattr(ex, "KDF_ITERATIONS", 50)
    assert ex.write_hash_store() == (0, len(ex._KEYS))
    first = json.loads(ex.HASH_STORE.read_text(encoding="utf-8"))
    assert ex.write_hash_store() == (len(ex._KEYS), 0)
    key = ex._KEYS["ex-tour-2"]
    moved = float(key.compute()) * 1.5
    monkeypatch.setitem(ex._KEYS, "ex-tour-2", dataclasses.replace(key, compute=lambda: moved))
    assert ex.write_hash_store() == (len(ex._KEYS) - 1, 1)
    second = json.loads(ex.HASH_STORE.read_text(encoding="utf-8"))
    assert second["ex-tour-2"]["salt"] != first["ex-tour-2"]["salt"]
    assert {k: v for k, v in second.items() if k != "ex-tour-2"} == {
        k: v for k, v in first.items() if k != "ex-tour-2"}
    hashed = ex.AnswerKey("ex-tour-2", None, **ex.hash_table(["ex-tour-2"], iterations=50)["ex-tour-2"])
    assert hashed.accepts(moved) and not hashed.accepts(moved / 1.5)
    assert ex.hash_table(["ex-tour-2"], iterations=51)["ex-tour-2"]["salt"] != second["ex-tour-2"]["salt"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rel_tol": 0.01, "abs_tol": 0.5}, "恰好给一个"), ({"count": True, "rel_tol": 0.01}, "整数"),
     ({"count": True, "abs_tol": 0.5}, "整数"), ({"abs_tol": -1.0}, "不能为负")],
)
def test_answer_refuses_an_ambiguous_tolerance(kwargs, match):
    from tmath.exercises import answer

    with pytest.raises(ValueError, match=match):
        answer("ex-bad", **kwargs)


# --- answer cells: my_answer ------------------------------------------------------------------------


def test_answer_record_keeps_the_value_for_the_grader():
    import sympy as sp

    from tmath.exercises import answer_record

    by_hand = 12 * (12 * 768**2 + 13 * 768) + 2 * 768
    message, record = answer_record("ex-tour-1", by_hand)
    assert message.startswith("ex-tour-1：✓ 正确") and record == {"label": "ex-tour-1", "value": by_hand}
    assert answer_record("ex-tour-1", sp.Integer(by_hand))[1]["value"] == by_hand
    assert type(answer_record("ex-tour-1", np.int64(3))[1]["value"]) is int
    assert answer_record("ex-tour-4", np.float64(3.9998))[1] == {"label": "ex-tour-4", "value": 3.9998}
    message, record = answer_record("ex-tour-1", None)
    assert "尚未作答" in message and record["value"] is None
    message, record = answer_record("ex-tour-1", "125")
    assert "答案必须是一个数" in message and record["value"] is None and record["error"]
    message, record = answer_record("ex-nope", 1)
    assert "没有练习" in message and record["value"] is None


def test_my_answer_prints_outside_jupyter(capsys):
    from tmath.exercises import my_answer

    assert my_answer("ex-tour-2", 108) is None
    assert capsys.readouterr().out.strip() == "ex-tour-2：✓ 正确（容差：精确整数）"


# --- the precision a key needs is stated in its exercise ---------------------------------------------

_NUMERALS = {2: "两", 3: "三", 4: "四", 5: "五", 6: "六"}


def _statements() -> dict[str, str]:
    """Exercise label → its statement (the markdown between exercise-start and exercise-end)."""
    import json

    from conftest import ROOT

    found = {}
    for path in (ROOT / "book").rglob("*.ipynb"):
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        pattern = r"```\{exercise-start\}\n:label: (ex-[\w.-]+)\n```\n(.*?)```\{exercise-end\}"
        for m in re.finditer(pattern, text, re.S):
            found[m.group(1)] = m.group(2)
    return found


def _states_precision(statement: str, key) -> bool:
    def written(n: int) -> str:
        return rf"(?:{n}|{_NUMERALS.get(n, n)}) ?"

    if key.digits and not re.search(written(key.digits) + "位有效数字", statement):
        return False
    return not key.decimals or bool(re.search(written(key.decimals) + "位小数", statement))


def test_an_exercise_states_the_precision_its_key_needs():
    """A key that a careful 4-digit hand value misses needs digits= or decimals= (the test above),
    and then its exercise says so: without it, ex-tour-4's 4.000 is ✗ with no warning."""
    from tmath.exercises import HAND_DIGITS

    statements = _statements()
    labels()
    unstated, undeclared = {}, []
    for label, key in tmath.exercises._KEYS.items():
        value = float(key.compute())
        plain = float(f"{value:.{HAND_DIGITS}g}")
        if not key.count and not key.accepts(plain) and not (key.digits or key.decimals):
            undeclared.append(label)
        if (key.digits or key.decimals) and not _states_precision(statements[label.split("/")[0]], key):
            unstated[label] = key.tolerance_text()
    assert not undeclared, f"keys a {HAND_DIGITS}-digit hand value misses, no digits=/decimals=: {undeclared}"
    assert not unstated, f"exercises that do not state the precision their key needs: {unstated}"


def test_the_precision_check_can_fail():
    from tmath.exercises import AnswerKey

    key = AnswerKey("ex-x", lambda: 3.99982, rel_tol=1e-5, digits=5)
    assert not _states_precision("每层参数变为原来的多少倍？", key)
    assert _states_precision("（保留 5 位有效数字）", key) and _states_precision("保留五位有效数字", key)
    two = AnswerKey("ex-x", lambda: 0.35, abs_tol=0.005, decimals=2)
    assert _states_precision("保留两位小数", two) and not _states_precision("保留 3 位小数", two)


def test_a_wrong_label_suggests_its_own_chapter_first():
    """Not the first labels of the alphabet (ex-arch-1/layer ...): those of the chapter asked."""
    def hint(label):
        with pytest.raises(ValueError, match="没有练习") as e:
            tmath.check(1.0, label)
        return str(e.value).split("例如 ")[1].split("、")

    assert hint("ex-tour-9")[:3] == ["ex-tour-1", "ex-tour-1/share", "ex-tour-2"]
    assert hint("ex-flash-naive-9")[0] == "ex-flash-naive-1"
    assert all(x.startswith("ex-flash-naive-") for x in hint("ex-flash-naive-9"))
    assert hint("ex-mh-6/alpha-3")[:3] == ["ex-mh-6/a2", "ex-mh-6/alpha-1", "ex-mh-6/alpha-2"]
    assert hint("ex-tuor-1")[0] == "ex-tour-1", "a misspelt chapter: the closest spelling"
    assert len(hint(3)) == 5 and len(hint("ex-nope")) == 5

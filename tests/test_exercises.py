"""tmath.check: right answers pass, wrong ones fail, the key is never shown, bad input is refused."""

import math
import re

import pytest

import tmath
from tmath.exercises import labels


def test_right_answer_passes_and_wrong_fails():
    # GPT-3 Small by hand: 12 layers of 12*768^2 + 13*768, embeddings (50257 + 2048) * 768, final LN.
    by_hand = 12 * (12 * 768**2 + 13 * 768) + (50257 + 2048) * 768 + 2 * 768
    assert tmath.check(by_hand, "ex-tour-1")
    assert not tmath.check(by_hand + 768, "ex-tour-1")
    assert tmath.check(108, "ex-tour-2") and not tmath.check(107, "ex-tour-2")


def test_verdict_does_not_reveal_the_key():
    result = tmath.check(1, "ex-tour-1")
    assert "125" not in repr(result) and "还不对" in repr(result)


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
    assert "绝对误差 ≤ 0.5 条序列" in repr(tmath.check(0, "ex-llama3-70b-1"))
    assert "绝对误差 ≤ 0.05%" in repr(tmath.check(0, "ex-tour-1/share"))
    assert "绝对误差 ≤ 0.5 个参数" in repr(tmath.check(0, "ex-tour-1"))


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

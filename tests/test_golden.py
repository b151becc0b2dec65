"""The comparator of committed results (``tests/golden.py``): tolerant where floats drift, exact elsewhere."""

from __future__ import annotations

import math

import pytest
from golden import assert_recomputes, mismatches


def test_a_float64_fit_moved_in_its_12th_digit_recomputes() -> None:
    # The label-bias payload's MEMM marginal: committed on one CPU, recomputed on another.
    assert mismatches(0.7482449798998272, 0.7482449799002393) == []


def test_a_float_off_in_its_6th_digit_does_not() -> None:
    (found,) = mismatches({"p": [0.748245]}, {"p": [0.748246]})
    assert found.startswith("$.p[0]: 0.748245 != 0.748246")


def test_rounded_floats_may_differ_by_one_unit_of_the_last_decimal_not_two() -> None:
    assert mismatches(0.748245, 0.748246, digits=6) == []
    assert mismatches(0.748245, 0.748247, digits=6) != []
    assert mismatches(1.5e-05, 1.6e-05, digits=6) == []
    assert mismatches(1.5e-05, 1.6e-05) != []  # relative 7%: no unit without digits


def test_exact_things_are_compared_exactly() -> None:
    assert mismatches({"viterbi": [1, 2]}, {"viterbi": [1, 3]}) == ["$.viterbi[1]: 2 != 3"]
    assert mismatches({"label": "B-DATE"}, {"label": "I-DATE"}) != []
    assert mismatches({"ok": True}, {"ok": False}) != []
    assert mismatches(True, 1) != []  # a bool is not a number here
    assert mismatches(None, 0.0) != []
    assert mismatches({"a": 1, "b": 2}, {"a": 1}) == ["$: keys ['b'] on one side only"]
    assert mismatches([1, 2, 3], [1, 2]) == ["$: length 3 != 2"]


def test_ints_and_floats_compare_as_numbers_and_nan_only_equals_nan() -> None:
    assert mismatches(2, 2.0) == []
    assert mismatches(math.nan, math.nan) == []
    assert mismatches(math.nan, 0.0) != []
    assert mismatches(math.inf, math.inf) == []


def test_assert_recomputes_lists_the_paths() -> None:
    with pytest.raises(AssertionError, match=r"2 differences:\n  \$\.a: 1 != 2\n  \$\.b\[0\]"):
        assert_recomputes({"a": 1, "b": [0.5]}, {"a": 2, "b": [0.6]})
    assert_recomputes({"a": [0.1, "x"]}, {"a": [0.1 + 1e-13, "x"]})


def test_loose_paths_get_their_own_tolerance_and_only_they() -> None:
    committed = {"acc": [0.7671], "loss": [0.5]}
    loose = {r"\.acc\[": 5e-4}
    assert mismatches(committed, {"acc": [0.7673], "loss": [0.5]}, loose=loose) == []
    assert mismatches(committed, {"acc": [0.7681], "loss": [0.5]}, loose=loose) != []
    assert mismatches(committed, {"acc": [0.7671], "loss": [0.5002]}, loose=loose) != []

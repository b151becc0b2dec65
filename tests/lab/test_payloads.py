"""The lab's payloads: every committed ``crfhead/lab/static/data/<tab>.json`` equals its generating function.

Cheap tabs (trellis, perceptron, label bias) are recomputed with the committed arguments. The slow
ones (learning curves, finance, higher order) are recomputed at a tiny configuration for their
schema and invariants (and, where a cell is independent of the rest, that cell); their full
recompute runs only in the full suite (``--full``). "Equal" is :func:`golden.assert_recomputes`:
the structure, strings, integers and booleans exactly, floats to a relative 1e-9 and one unit in
their sixth (last) decimal, since the fits round differently on another CPU or thread count.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from golden import assert_recomputes
from helpers import needs_data

from crfhead.lab.payloads import (
    DIGITS,
    MEMM_SPREAD_BOUND,
    PAYLOADS,
    SCHEMA,
    finance_payload,
    higher_order_payload,
    label_bias_payload,
    learning_curves_payload,
    perceptron_payload,
    rounded,
    trellis_payload,
)

DATA = Path(__file__).resolve().parents[2] / "crfhead" / "lab" / "static" / "data"
ENVELOPE = {"tab", "schema", "title", "note", "function", "arguments"}


def committed(tab: str) -> dict[str, Any]:
    """The committed payload without ``command`` (the one key the script adds; the finance tab is
    written by ``scripts/finance_table.py --lab``, with the Results table, from one computation)."""
    payload: dict[str, Any] = json.loads((DATA / f"{tab}.json").read_text())
    command = payload.pop("command")
    assert command.startswith("python scripts/lab_payloads.py") or (
        tab == "finance" and command.startswith("python scripts/finance_table.py")
    ), command
    return payload


def recomputed(tab: str) -> dict[str, Any]:
    """The generating function called with the committed arguments, through a JSON round trip."""
    out: dict[str, Any] = json.loads(json.dumps(PAYLOADS[tab](**committed(tab)["arguments"])))
    return out


def check_envelope(payload: dict[str, Any], tab: str) -> None:
    assert payload.keys() >= ENVELOPE
    assert payload["tab"] == tab and payload["schema"] == SCHEMA
    assert payload["function"] == f"crfhead.lab.payloads.{tab}_payload"


def probability(x: float) -> bool:
    return 0.0 <= x <= 1.0


class TestFiles:
    @pytest.mark.parametrize("tab", list(PAYLOADS))
    def test_committed_with_envelope(self, tab: str) -> None:
        check_envelope(committed(tab), tab)

    def test_schema_documented(self) -> None:
        text = (DATA / "SCHEMA.md").read_text()
        for tab in PAYLOADS:
            assert f"{tab}.json" in text

    def test_rounded(self) -> None:
        assert rounded({"a": (0.1234567891, -0.0000001), "b": [True, None, 2]}) == {
            "a": [0.123457, 0.0],
            "b": [True, None, 2],
        }
        with pytest.raises(ValueError, match="non-finite"):
            rounded(math.nan)
        with pytest.raises(TypeError, match="set"):
            rounded({1})


class TestTrellis:
    def test_equal_to_function(self) -> None:
        assert_recomputes(committed("trellis"), recomputed("trellis"), digits=DIGITS)

    def test_invariants(self) -> None:
        p = trellis_payload()
        K, T = p["num_states"], p["length"]
        assert (K, T) == (8, 24)
        for t in range(T):
            assert math.isclose(sum(p["marginals"][t]), 1.0, abs_tol=1e-5)
            assert all(probability(v) for v in p["max_marginals_relative"][t])
            assert p["max_marginals_relative"][t][p["viterbi"][t]] == pytest.approx(1.0, abs=1e-6)
        assert p["disagree_at"] == [t for t in range(T) if p["viterbi"][t] != p["posterior"][t]]
        assert p["correct_viterbi"] == sum(
            a == b for a, b in zip(p["viterbi"], p["gold"], strict=True)
        )
        # Posterior decoding maximises the expected number of right tags (Theorem 4 (b)).
        assert p["expected_correct_posterior"] >= p["expected_correct_viterbi"]


class TestPerceptron:
    def test_equal_to_function(self) -> None:
        assert_recomputes(committed("perceptron"), recomputed("perceptron"), digits=DIGITS)

    def test_theorem_5(self) -> None:
        p = committed("perceptron")
        rows = p["margins"]
        assert len(rows) == 6
        for r in rows:
            assert r["converged"] and r["mistakes_per_epoch"][-1] == 0
            assert r["gamma"] >= r["target_gamma"]
            assert r["mistakes"] <= r["R"] ** 2 / r["gamma"] ** 2
            assert r["bound"] == pytest.approx(r["R"] ** 2 / r["gamma"] ** 2, rel=1e-5)
            assert r["mistakes"] == sum(r["mistakes_per_epoch"])
        gammas = [r["gamma"] for r in rows]
        assert gammas == sorted(gammas, reverse=True)

    def test_tiny(self) -> None:
        p = perceptron_payload(margins=[0.3, 0.1], n=20, length=4, num_tags=2, vocab_size=4)
        check_envelope(p, "perceptron")
        assert all(r["mistakes"] <= r["bound"] for r in p["margins"])


@pytest.fixture(scope="module")
def payload() -> dict[str, Any]:
    """The label-bias payload recomputed once (its two fits take seconds)."""
    return recomputed("label_bias")


class TestLabelBias:
    def test_equal_to_function(self, payload: dict[str, Any]) -> None:
        assert_recomputes(committed("label_bias"), payload, digits=DIGITS)

    def test_proposition_2(self, payload: dict[str, Any]) -> None:
        conts = payload["continuations"]
        f, k = payload["focus_index"], payload["labels"].index(payload["focus_label"])
        assert len(conts) == 5
        memm = [c["memm"]["focus_probability"] for c in conts]
        # The MEMM's marginal of "the" ignores what follows: the same to every printed digit (the
        # float64 values agree up to rounding of the backward pass: memm_identical holds them to
        # MEMM_SPREAD_BOUND before rounding).
        assert len(set(memm)) == 1 and payload["summary"]["memm_identical"]
        assert payload["summary"]["memm_spread_bound"] == f"{MEMM_SPREAD_BOUND:g}"
        assert payload["summary"]["memm_spread"] == 0.0
        crf = [c["crf"]["focus_probability"] for c in conts]
        assert max(crf) - min(crf) > 0.5
        for c in conts:
            assert c["tokens"][: f + 1] == payload["prefix"]
            assert len(c["tokens"]) == len(c["crf"]["marginals"]) == len(c["memm"]["viterbi"])
            assert c["count_in_training"] > 0
            for name in ("crf", "memm"):
                m = c[name]["marginals"]
                assert m[f][k] == c[name]["focus_probability"]
                assert all(probability(v) for row in m for v in row)
                assert all(math.isclose(sum(row), 1.0, abs_tol=1e-5) for row in m)


class TestLearningCurves:
    @pytest.mark.filterwarnings("ignore:L-BFGS stopped:RuntimeWarning")
    def test_tiny(self) -> None:
        p = learning_curves_payload(ns=(10,), test_n=50, tol=1e-4, max_iter=50)
        check_envelope(p, "learning_curves")
        keys = {t["key"] for t in p["taggers"]}
        assert [w["key"] for w in p["worlds"]] == ["well_specified", "next_state"]
        for w in p["worlds"]:
            assert w["n"] == [10]
            assert set(w["acc"]) == set(w["exp"]) == keys
            assert set(w["loss"]) == keys - {"bayes_viterbi"}
            assert all(probability(v) for vs in w["acc"].values() for v in vs)
            assert all(v > 0 for vs in w["loss"].values() for v in vs)

    def test_committed_shape(self) -> None:
        p = committed("learning_curves")
        for w in p["worlds"]:
            assert w["n"] == p["arguments"]["ns"]
            assert all(len(v) == len(w["n"]) for v in w["acc"].values())
            # Bayes is the true model: no learned tagger beats its log-loss.
            assert all(b <= h for b, h in zip(w["loss"]["bayes"], w["loss"]["hmm"], strict=True))

    @pytest.mark.slow
    def test_equal_to_function(self) -> None:
        """The log-losses to 1e-9; the accuracies to 5e-4 (24 of the 48,000 test tokens): where
        Viterbi paths tie (words the fit never saw score alike), float64 rounding of the fit picks
        the path, and the fused kernel built for another CPU rounds another way (AVX2 against
        AVX-512: accuracies apart by up to 1.9e-4, about 9 tokens, with every log-loss equal)."""
        assert_recomputes(
            committed("learning_curves"),
            recomputed("learning_curves"),
            digits=DIGITS,
            loose={r"\.(acc|exp)(\.|_)": 5e-4},
        )


class TestFinance:
    def test_tiny_cell_equals_committed(self) -> None:
        """One cell (the HMM at 3 documents) recomputed: the same numbers as the committed one."""
        p = json.loads(json.dumps(finance_payload(docs=(3,), taggers=("hmm",))))
        check_envelope(p, "finance")
        cell = p["cells"]["hmm"][0]
        assert_recomputes(committed("finance")["cells"]["hmm"][0], cell, digits=DIGITS)
        assert all(probability(cell[k]) for k in ("accuracy", "f1", "unseen_accuracy"))

    def test_committed_shape(self) -> None:
        p = committed("finance")
        for t in p["taggers"]:
            cells = p["cells"][t["key"]]
            assert [c["docs"] for c in cells] == p["docs"]
            assert all(probability(c["unseen_accuracy"]) for c in cells)

    def test_unknown_tagger(self) -> None:
        with pytest.raises(ValueError, match="unknown taggers"):
            finance_payload(taggers=("svm",))

    @pytest.mark.slow
    def test_equal_to_function(self) -> None:
        assert_recomputes(committed("finance"), recomputed("finance"), digits=DIGITS)


def check_higher_order(p: dict[str, Any]) -> None:
    check_envelope(p, "higher_order")
    its = p["iterations"]
    assert p["certified"] and p["certificate_iteration"] == len(its)
    assert len(its) >= p["arguments"]["min_iterations"]
    assert 2 <= p["group"]["size"] == len(p["sentences"]) <= p["arguments"]["max_size"]
    for a, b in itertools.pairwise(its):
        assert b["best_dual"] <= a["best_dual"] and b["best_primal"] >= a["best_primal"]
    for h in its:
        assert h["best_dual"] >= h["best_primal"] - 1e-5 * abs(h["best_dual"])
    assert p["changed"] and p["dd_primal"] >= p["chain_score"] - 1e-6
    assert p["dd_primal"] == pytest.approx(its[-1]["best_primal"], abs=1e-5)
    for c in p["changed"]:
        s = p["sentences"][c["sentence"]]
        assert s["chain"][c["position"]] == c["chain"] != c["dd"] == s["dd"][c["position"]]


class TestHigherOrder:
    def test_committed(self) -> None:
        check_higher_order(committed("higher_order"))

    @pytest.mark.filterwarnings("ignore:L-BFGS stopped:RuntimeWarning")
    def test_tiny(self) -> None:
        """A chain fit on 300 tweets, loosely: a group of the test split still certifies."""
        needs_data("msm2013")
        tiny = higher_order_payload(train_docs=300, weight=2.0, tol=1e-3, max_iter=30)
        check_higher_order(tiny)

    @pytest.mark.slow
    def test_equal_to_function(self) -> None:
        needs_data("msm2013")
        assert_recomputes(committed("higher_order"), recomputed("higher_order"), digits=DIGITS)


def test_label_bias_tiny_refuses_unseen_ending() -> None:
    with pytest.raises(ValueError, match="outside the training vocabulary"):
        label_bias_payload(train_docs=3)

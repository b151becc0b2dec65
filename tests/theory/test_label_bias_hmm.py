"""The HMM of the label-bias demonstration (the paper's third point): counted on the taggers' sentences."""

from __future__ import annotations

import math

import pytest
import torch

from crfhead.theory.label_bias import (
    FinanceTaggers,
    fit_finance_hmm,
    polyseme_contexts,
    polyseme_rows,
    tag_counts,
    train_finance_taggers,
)

WORD = "drovine"  # in the first 3 documents of run 0: B-ORG 5 times, I-PRODUCT 4 times


@pytest.fixture(scope="module")
def taggers() -> FinanceTaggers:
    return train_finance_taggers(3, 0, tol=1e-4, max_iter=50)


def test_fit_finance_hmm_is_a_distribution_with_alpha_from_the_grid(
    taggers: FinanceTaggers,
) -> None:
    hmm, info = fit_finance_hmm(taggers, 0, dev_docs=2)
    assert info["alpha"] in info["alphas"] == [1.0, 0.1, 0.01]
    assert info["alpha"] == info["alphas"][min(range(3), key=info["dev_losses"].__getitem__)]
    assert float(hmm.alpha) == info["alpha"]
    assert float(hmm.length_law()) == pytest.approx(1.0, abs=1e-9)
    assert hmm.vocab_size == len(taggers.vocab) + 1
    # the counts are the training sentences' tokens, and id 0 (rare and unseen words) is a symbol
    assert float(hmm.word_counts.sum()) == taggers.info["tokens"]
    assert float(hmm.word_counts[0]) > 0


def test_fit_finance_hmm_refuses_another_run(taggers: FinanceTaggers) -> None:
    with pytest.raises(ValueError, match="not on run 1"):
        fit_finance_hmm(taggers, 1)


def test_polyseme_rows_read_the_word_in_each_context(taggers: FinanceTaggers) -> None:
    hmm, _ = fit_finance_hmm(taggers, 0, dev_docs=2)
    assert tag_counts(taggers.train, WORD) == {"B-ORG": 5, "I-PRODUCT": 4}
    assert tag_counts(taggers.train, "kestrel") == {}
    rows = polyseme_rows(taggers, hmm, WORD)
    assert [r["context"] for r in rows] == [name for name, _ in polyseme_contexts(WORD)]
    for r in rows:
        assert r["tokens"][r["position"]] == WORD
        for model in ("hmm", "crf", "memm"):
            m = r[model]
            row = m["marginals"][r["position"]]
            assert torch.allclose(
                m["marginals"].sum(-1), torch.ones(len(r["tokens"]), dtype=torch.float64)
            )
            assert m["probability"] == float(row.max())
            assert m["reading"] == taggers.labels[int(row.argmax())]
            assert math.isclose(sum(m["entity_probabilities"].values()), 1.0, abs_tol=1e-9)
            assert len(m["viterbi"]) == len(r["tokens"])
    company, product = rows[0], rows[1]
    assert company["hmm"]["reading"] == "B-ORG"
    assert product["hmm"]["reading"] == "I-PRODUCT"  # after "the", opening the product


def test_polyseme_rows_refuse_unknown_words_and_missing_contexts(taggers: FinanceTaggers) -> None:
    hmm, _ = fit_finance_hmm(taggers, 0, dev_docs=2)
    with pytest.raises(ValueError, match="'kestrel' is not a training word"):
        polyseme_rows(taggers, hmm, "kestrel")
    with pytest.raises(ValueError, match="context 'x' does not contain 'drovine'"):
        polyseme_rows(taggers, hmm, WORD, [("x", ["the", "company"])])

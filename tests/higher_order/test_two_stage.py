"""The two-stage baseline (``crfhead.higher_order.two_stage``): majority features, folds, the pipeline.

Hand-made groups with first-stage tags whose features are worked out by hand; the jackknife folds
partition the data and no fold model sees the sentences it tags; extra features reach the indicator
encoder (a second stage fed an oracle feature learns it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.higher_order import two_stage
from crfhead.higher_order.fold_training import predict_tags, train_tagger
from crfhead.higher_order.two_stage import (
    COLUMN,
    TwoStageCollator,
    extend_vocabs,
    jackknife_folds,
    jackknife_tags,
    majority,
    majority_features,
    with_features,
)


def _features(
    sentences: list[tuple[str, str]], groups: list[list[int]] | None = None, corpus: bool = False
) -> list[list[list[str]]]:
    """Features of sentences written as ``("w1 w2 ...", "t1 t2 ...")``, BIOES, one group by default."""
    tokens = [s.split() for s, _ in sentences]
    tags = [t.split() for _, t in sentences]
    if groups is None:
        groups = [list(range(len(sentences)))]
    return majority_features(tokens, tags, groups, "BIOES", corpus_level=corpus)


def test_majority_counts_then_entity_over_o_then_alphabet() -> None:
    assert majority(Counter({"PER": 2, "LOC": 1})) == "PER"
    assert majority(Counter({"O": 3, "PER": 2})) == "O"
    assert majority(Counter({"O": 2, "PER": 2})) == "PER"  # a tie: the entity type wins over O
    assert majority(Counter({"PER": 1, "LOC": 1, "O": 1})) == "LOC"  # then alphabetically
    assert majority(Counter({"PER": 0, "O": -1})) is None
    assert majority(Counter()) is None


def test_token_majority_leaves_the_occurrence_itself_out() -> None:
    feats = _features(
        [
            ("Paris is nice", "S-LOC O O"),
            ("Paris again", "S-PER O"),
            ("in Paris", "O S-LOC"),
        ]
    )
    # Paris (LOC) sees {PER, LOC}: a tie, LOC first alphabetically; Paris (PER) sees {LOC, LOC}.
    assert feats[0][0] == ["tm=LOC", "em=LOC"]
    assert feats[1][0][0] == "tm=LOC"
    assert feats[2][1][0] == "tm=LOC"
    # Tokens seen once in the group get no token-majority feature (a token never votes for itself).
    assert feats[0][1] == [] and feats[0][2] == [] and feats[1][1] == [] and feats[2][0] == []


def test_token_majority_reads_types_not_scheme_tags() -> None:
    feats = _features(
        [("John Smith", "B-PER E-PER"), ("Smith", "S-PER"), ("Smith said", "O O")],
    )
    # The O occurrence sees E-PER and S-PER: both PER, 2 against 0.
    assert "tm=PER" in feats[2][0]
    # The S-PER occurrence sees one PER and one O: a tie, the entity type wins.
    assert "tm=PER" in feats[1][0]


def test_entity_majority_reaches_the_occurrences_the_first_stage_missed() -> None:
    feats = _features(
        [
            ("New York is big", "B-LOC E-LOC O O"),
            ("New York again", "B-LOC E-LOC O"),
            ("visit New York", "O O O"),
            ("York alone", "S-ORG O"),
        ]
    )
    # The missed occurrence: the longest phrase that is an entity elsewhere is "New York" (LOC x2),
    # which wins over "York" (ORG) for both tokens.
    assert "em=LOC" in feats[2][1] and "em=LOC" in feats[2][2]
    assert not any(f.startswith("em=") for f in feats[2][0])
    # A tagged entity does not vote for itself: the other "New York" is LOC.
    assert "em=LOC" in feats[0][0] and "em=LOC" in feats[1][1]
    # "York" alone: its own ORG left out, no other "York" entity; "New York" does not match here.
    assert not any(f.startswith("em=") for f in feats[3][0])
    # Entity-majority never says O.
    assert not any(f == "em=O" for s in feats for tok in s for f in tok)


def test_an_entity_seen_once_gives_nothing() -> None:
    feats = _features([("Acme rose", "S-ORG O"), ("shares fell", "O O")])
    assert feats == [[[], []], [[], []]]


def test_groups_are_separate_and_the_corpus_level_spans_them() -> None:
    sentences = [("Acme rose", "S-ORG O"), ("Acme fell", "O O"), ("Acme Acme", "S-PER S-PER")]
    feats = _features(sentences, groups=[[0], [1], [2]], corpus=True)
    # Sentences 0 and 1 are alone in their groups: no document-level feature, only corpus-level.
    assert feats[0][0] == ["ctm=PER", "cem=PER"]  # others: O, PER, PER; entities: PER, PER
    assert feats[1][0] == ["ctm=PER", "cem=PER"]  # others: ORG, PER, PER; entities the same
    # Sentence 2 has two occurrences: each sees the other in its group; over the corpus ORG, O and
    # PER tie at one each (ORG: an entity type, first alphabetically), entities ORG and PER tie.
    assert feats[2][0] == ["tm=PER", "em=PER", "ctm=ORG", "cem=ORG"]
    assert feats[1][1] == [] and feats[0][1] == []


def test_lowercase_compares_tokens_case_insensitively() -> None:
    tokens = [["apple", "pie"], ["Apple", "shares"]]
    tags = [["O", "O"], ["S-ORG", "O"]]
    assert majority_features(tokens, tags, [[0, 1]], "BIOES", corpus_level=False)[0][0] == []
    low = majority_features(tokens, tags, [[0, 1]], "BIOES", corpus_level=False, lowercase=True)
    assert low[0][0] == ["tm=ORG", "em=ORG"] and low[1][0] == ["tm=O"]


def test_bad_groups_and_lengths_are_refused() -> None:
    tokens, tags = [["a"], ["b"]], [["O"], ["O"]]
    with pytest.raises(ValueError, match="exactly one group"):
        majority_features(tokens, tags, [[0]], "BIOES")
    with pytest.raises(ValueError, match="exactly one group"):
        majority_features(tokens, tags, [[0, 1], [1]], "BIOES")
    with pytest.raises(ValueError, match="out of range"):
        majority_features(tokens, tags, [[0, 1, 2]], "BIOES")
    with pytest.raises(ValueError, match="tokens but"):
        majority_features(tokens, [["O"], ["O", "O"]], [[0, 1]], "BIOES")


@pytest.mark.parametrize(("n", "k"), [(10, 2), (10, 3), (10, 10), (7, 5), (946, 10)])
def test_jackknife_folds_partition_the_items(n: int, k: int) -> None:
    folds = jackknife_folds(n, k, seed=3)
    assert len(folds) == k
    flat = [i for fold in folds for i in fold]
    assert sorted(flat) == list(range(n))  # every item once: disjoint and covering
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    assert all(f == sorted(f) for f in folds)
    assert folds == jackknife_folds(n, k, seed=3)  # deterministic


def test_jackknife_folds_depend_on_the_seed_and_refuse_bad_k() -> None:
    assert jackknife_folds(20, 4, seed=0) != jackknife_folds(20, 4, seed=1)
    for k in (0, 1, 6):
        with pytest.raises(ValueError, match="2 <= k <= n"):
            jackknife_folds(5, k)


def _tiny() -> TaggingDataModule:
    return TaggingDataModule(
        corpus=FinanceCorpus(train_docs=3, dev_docs=1, test_docs=1), scheme="BIOES"
    )


HPARAMS: dict[str, Any] = {
    "encoder": {"class_path": "crfhead.encoders.IndicatorEncoder"},
    "lr": 0.05,
}


def test_jackknife_tags_never_tag_a_sentence_the_model_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _tiny()
    train = data.splits["train"]
    groups = [list(range(i, min(i + 3, len(train)))) for i in range(0, len(train), 3)]
    seen: list[set[int]] = []
    real_train = two_stage.train_tagger

    def spy(hparams: Any, vocabs: Any, collate: Any, sentences: Any, epochs: int, **kw: Any) -> Any:
        seen.append({id(s) for s in sentences})
        return real_train(hparams, vocabs, collate, sentences, epochs, **kw)

    tagged: list[set[int]] = []
    real_predict = two_stage.predict_tags

    def spy_predict(model: Any, collate: Any, sentences: Any, batch_size: int = 128) -> Any:
        tagged.append({id(s) for s in sentences})
        return real_predict(model, collate, sentences, batch_size)

    monkeypatch.setattr(two_stage, "train_tagger", spy)
    monkeypatch.setattr(two_stage, "predict_tags", spy_predict)
    tags = jackknife_tags(HPARAMS, data.vocabs, train, groups, k=3, epochs=1)
    assert len(tags) == len(train) and all(
        len(t) == len(s) for t, s in zip(tags, train, strict=True)
    )
    assert len(seen) == 3 and len(tagged) == 3
    for trained_on, tagged_now in zip(seen, tagged, strict=True):
        assert not trained_on & tagged_now
        assert len(trained_on) + len(tagged_now) == len(train)
    assert set().union(*tagged) == {id(s) for s in train}
    # A group is never split between folds.
    for g in groups:
        assert sum(any(id(train[i]) in t for i in g) for t in tagged) == 1


def test_extra_features_reach_the_encoder() -> None:
    data = _tiny()
    train = data.splits["train"]
    oracle = with_features(train, [[[f"gold={t}"] for t in s.tags or []] for s in train])
    assert oracle[0].columns[COLUMN][0] == f"gold={train[0].tags[0]}"  # type: ignore[index]
    assert COLUMN not in train[0].columns  # copies: the corpus is untouched
    vocabs = extend_vocabs(data.vocabs, oracle)
    base = data.vocabs["features"]["items"]
    assert vocabs["features"]["items"][: len(base)] == base  # the local features keep their ids
    collate = TwoStageCollator(vocabs)
    batch = collate(oracle[:4])
    plain = TwoStageCollator(vocabs)(train[:4])
    assert batch.features is not None and plain.features is not None
    assert batch.features.shape[2] == plain.features.shape[2] + 1
    assert torch.equal(batch.features[..., :-1], plain.features)
    model, history = train_tagger(HPARAMS, vocabs, collate, oracle, epochs=3, dev=oracle)
    assert len(history) == 3
    pred = predict_tags(model, collate, oracle)
    right = sum(
        p == g
        for s, ps in zip(oracle, pred, strict=True)
        for p, g in zip(ps, s.tags or [], strict=True)
    )
    assert right / sum(len(s) for s in oracle) > 0.99  # it learned the oracle feature


def test_with_features_refuses_whitespace_and_bad_counts() -> None:
    s = Sentence(["a", "b"], ["O", "O"])
    with pytest.raises(ValueError, match="whitespace"):
        with_features([s], [[["x y"], []]])
    with pytest.raises(ValueError, match="tokens but"):
        with_features([s], [[[]]])

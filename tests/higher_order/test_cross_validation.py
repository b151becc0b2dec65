"""Nested cross-validation of joint decoding: folds of whole groups, the protocols, the pooled report.

Run on a tiny finance corpus, whose sentences share words (so tweet grouping links some and the
consistency factors fire); the MSM2013 run is ``scripts/higher_order_cv.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
import torch

from crfhead.data.corpora import FinanceCorpus, InMemoryCorpus
from crfhead.data.datamodule import TaggingDataModule, collator_for
from crfhead.data.grouping import TweetGroups
from crfhead.data.sentence import Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order.builders import consistency_patterns
from crfhead.higher_order.cross_validation import (
    CHAIN,
    TWO_STAGE,
    Fold,
    Perceptron,
    Pipeline,
    Setup,
    compare,
    cross_validate,
    decode_grid,
    decode_groups,
    joint_groups,
    linked_phrases,
    plan_folds,
)
from crfhead.higher_order.factors import Consistency
from crfhead.higher_order.fold_training import train_tagger
from crfhead.schemes import allowed_transitions, labels_for

GROUPING = TweetGroups(threshold=4, ignore=["stopwords"])  # 55 groups of the 90 sentences
ENCODER = {"class_path": "crfhead.encoders.IndicatorEncoder"}


@pytest.fixture(scope="module")
def pool() -> list[Sentence]:
    """Every sentence of a tiny finance corpus, BIO tags."""
    splits = TaggingDataModule(FinanceCorpus(train_docs=4, dev_docs=2, test_docs=2)).splits
    return [s for name in ("train", "dev", "test") for s in splits[name]]


def _setup(**changes: Any) -> Setup:
    base = Setup(hparams={"encoder": ENCODER, "lr": 0.05}, scheme="BIO", epochs=1, batch_size=8)
    return dataclasses.replace(base, **changes)


# ----------------------------------------------------------------------------------- folds
def test_folds_keep_groups_whole_and_nest_dev_inside_the_training_part() -> None:
    groups = [[0, 1, 2], [3], [4, 5], [6], [7, 8, 9, 10], [11], [12, 13], [14], [15], [16, 17]]
    plan = plan_folds(groups, k=3, seed=5)
    everything = set(range(18))
    assert sorted(i for f in plan for i in f.test) == sorted(everything)  # each tested once
    for fold in plan:
        parts = [set(fold.train), set(fold.dev), set(fold.test)]
        assert set().union(*parts) == everything
        assert sum(map(len, parts)) == 18  # disjoint
        assert parts[1], "a nested dev part"
        for g in groups:  # no group straddles two parts
            assert sum(1 for p in parts if p & set(g)) == 1
    assert plan == plan_folds(groups, k=3, seed=5)  # seeded
    assert plan != plan_folds(groups, k=3, seed=6)


def test_too_few_groups_for_the_folds_is_an_error() -> None:
    with pytest.raises(ValueError, match="folds need"):
        plan_folds([[0], [1]], k=3)


def test_in_memory_corpus_names_a_missing_split() -> None:
    with pytest.raises(ValueError, match="missing \\['test'\\]"):
        InMemoryCorpus({"train": [], "dev": []})
    with pytest.raises(ValueError):
        InMemoryCorpus({"train": [], "dev": [], "test": []}).load()


# ---------------------------------------------------------------------------- the feature
def test_all_readings_are_every_label_sequence_the_scheme_allows() -> None:
    labels = labels_for(["A", "B"], "BIOES")
    group = [["x", "big", "apple"], ["big", "apple", "y"]]
    got = consistency_patterns(group, labels, "BIOES", 1.0, max_length=2, readings="all")
    allowed = allowed_transitions(labels, "BIOES")[0]
    K = len(labels)
    # Enumerated: every pair of identical phrases, every n-label sequence with allowed steps.
    want = set()
    for b1, t1, b2, t2, n in [(0, 1, 1, 0, 2), (0, 1, 1, 0, 1), (0, 2, 1, 1, 1)]:
        for seq in itertools.product(range(K), repeat=n):
            if all(allowed[a, b] for a, b in itertools.pairwise(seq)):
                cells = [(b1, t1 + i, k) for i, k in enumerate(seq)]
                cells += [(b2, t2 + i, k) for i, k in enumerate(seq)]
                want.add(tuple(cells))
    assert {p.cells for p in got} == want
    assert all(p.score == 1.0 for p in got)
    entities = consistency_patterns(group, labels, "BIOES", 1.0, max_length=2)
    assert {p.cells for p in entities} < want  # the default is a subset of the readings


def test_a_reading_of_several_entities_is_of_its_first_entity_type() -> None:
    labels = labels_for(["A", "B"], "BIO")
    factors = Consistency(max_length=2, readings="all")
    patterns = factors.build([["p", "q"], ["p", "q"]], labels, "BIO")
    index = {lab: k for k, lab in enumerate(labels)}
    for p in patterns:
        first = next((labels[k] for _, _, k in p.cells if labels[k] != "O"), "O")
        assert factors.kind(p, labels) == (first if first == "O" else first[2:])
    seq = (index["O"], index["B-B"])
    assert any(tuple(k for _, _, k in p.cells[:2]) == seq for p in patterns)
    with pytest.raises(ValueError, match="readings must be one of"):
        Consistency(readings="any")


def test_linked_phrases_counts_occurrence_pairs_not_readings() -> None:
    labels = labels_for(["A"], "BIO")
    sentences = [Sentence(["big", "apple"]), Sentence(["big", "apple"]), Sentence(["z"])]
    # "big apple", "big", "apple": three linked pairs, whatever the readings.
    for readings in ("entities", "all"):
        assert linked_phrases(
            sentences, [[0, 1], [2]], Consistency(readings=readings), labels, "BIO"
        ) == [3, 0]


# ---------------------------------------------------------------------------- training loop
def test_the_average_is_the_mean_of_the_parameters_after_each_update(pool: list[Sentence]) -> None:
    train = pool[:6]
    setup = _setup()
    vocabs = setup.vocabs(train, pool[6:8])
    collate = collator_for(vocabs, frozenset({"features"}))
    hp = {"encoder": ENCODER, "lr": 0.05}

    def params(epochs: int, average: bool) -> dict[str, torch.Tensor]:
        m, _ = train_tagger(hp, vocabs, collate, train, epochs, batch_size=6, average=average)
        return {k: v.detach().clone() for k, v in m.named_parameters()}

    one, two, mean = params(1, False), params(2, False), params(2, True)
    for name in one:  # one update per epoch: the average of two updates is their mean
        torch.testing.assert_close(mean[name], (one[name] + two[name]) / 2)


def test_groups_must_cover_the_training_sentences(pool: list[Sentence]) -> None:
    setup = _setup()
    vocabs = setup.vocabs(pool[:4], pool[4:6])
    collate = collator_for(vocabs, frozenset({"features"}))
    with pytest.raises(ValueError, match="exactly once"):
        train_tagger({"encoder": ENCODER}, vocabs, collate, pool[:4], 1, groups=[[0, 1], [1, 2]])


# ---------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def pipeline_run(pool: list[Sentence]) -> Any:
    protocol = Pipeline(_setup(), Consistency(min_sentences=2), grid=(0.0, 2.0), max_iterations=50)
    context = [Sentence(list(pool[0].tokens), None, id="ctx-0")]
    return protocol, cross_validate(pool, protocol, GROUPING, k=2, seed=3, context=context)


def test_every_pooled_sentence_is_tested_once_by_every_system(
    pool: list[Sentence], pipeline_run: Any
) -> None:
    protocol, outcomes = pipeline_run
    assert sorted(i for o in outcomes for i in o.fold.test) == list(range(len(pool)))
    for o in outcomes:
        assert list(o.systems) == protocol.systems() == [CHAIN, "naive DD", "2-slave DD", "ILP"]
        for run in o.systems.values():
            assert [len(t) for t in run.tags] == [len(pool[i]) for i in o.fold.test]
            assert run.seconds > 0
        weights = {r.weight for n, r in o.systems.items() if n != CHAIN}
        assert len(weights) == 1 and weights <= {0.0, 2.0}  # one weight, chosen on dev


def test_the_report_pools_the_folds_and_compares_with_the_chain(
    pool: list[Sentence], pipeline_run: Any
) -> None:
    _, outcomes = pipeline_run
    table = compare(pool, outcomes, GROUPING, "BIO", samples=200)
    order = [i for o in outcomes for i in o.fold.test]
    for name, row in table.items():
        metrics = TaggingMetrics("BIO")
        metrics.update(
            [pool[i].tags or [] for i in order], [t for o in outcomes for t in o.systems[name].tags]
        )
        assert row["f1"] == pytest.approx(metrics.compute()["f1"])
        assert len(row["fold_f1"]) == 2
        if name == CHAIN:
            assert row["delta"] is None and row["certified"] is None
        else:
            lo, hi = row["delta"].micro_interval
            assert lo <= row["delta"].micro <= hi or lo == hi
            assert row["delta"].micro == pytest.approx(row["f1"] - table[CHAIN]["f1"])
    assert table["ILP"]["certified"] == 1.0
    if table["2-slave DD"]["certified"] == 1.0:  # certified: the exact optimum's labels
        assert table["2-slave DD"]["f1"] == pytest.approx(table["ILP"]["f1"])


def test_context_is_decoded_with_its_group_and_never_scored(pool: list[Sentence]) -> None:
    setup = _setup()
    fold = Fold(0, list(range(8)), list(range(8, 10)), list(range(10, len(pool))))
    model, _, _ = setup.train([pool[i] for i in fold.train], [pool[i] for i in fold.dev], 0)
    labelled = [pool[i] for i in fold.test]
    context = [Sentence(list(s.tokens), None, id=f"c{j}") for j, s in enumerate(labelled[:2])]
    decoder = Pipeline(setup, Consistency(min_sentences=2), max_iterations=20).decoder(
        model, "dd2slave", 1.0
    )
    alone = decode_groups(model, labelled, decoder, GROUPING)
    joint = decode_groups(model, labelled, decoder, GROUPING, context)
    assert len(joint.tags) == len(labelled)
    assert [len(t) for t in joint.tags] == [len(s) for s in labelled]
    _, groups = joint_groups(labelled, context, GROUPING)
    assert all(any(i < len(labelled) for i in g) for g in groups)
    # A duplicate of a tested sentence links it to the context: more coupled groups, never fewer.
    assert joint.with_patterns >= alone.with_patterns
    with pytest.raises(ValueError, match="context sentences must be unlabelled"):
        cross_validate(pool, Pipeline(setup, Consistency()), GROUPING, context=[pool[0]])


def test_the_perceptron_protocol_learns_the_factor_weights(pool: list[Sentence]) -> None:
    setup = _setup(
        hparams={
            "encoder": ENCODER,
            "head": {"class_path": "crfhead.heads.StructuredPerceptron"},
            "optimizer": "sgd",
            "lr": 1.0,
        },
        epochs=2,
        batch_size=1,
        average=True,
        clip=float("inf"),
    )
    spec = {
        "class_path": "crfhead.higher_order.FactorDecoder",
        "init_args": {
            "factors": {"class_path": "crfhead.higher_order.Consistency"},
            "max_iterations": 10,
            "grid": None,
        },
    }
    protocol = Perceptron(setup, spec)
    outcomes = cross_validate(pool, protocol, GROUPING, k=2, seed=3, folds=[1])
    assert [o.fold.index for o in outcomes] == [1]
    run = outcomes[0].systems["2-slave DD"]
    types = sorted({t[2:] for s in pool for t in s.tags or [] if t != "O"})
    assert list(run.dev["weights"]) == [*types, "O"]  # one learned weight per kind
    assert len(run.dev["epochs"]) == 2  # dev F1 of the joint decoder after each epoch
    assert [len(t) for t in run.tags] == [len(pool[i]) for i in outcomes[0].fold.test]


def test_the_two_stage_baseline_runs_beside_the_decoders(pool: list[Sentence]) -> None:
    protocol = Pipeline(
        _setup(), Consistency(min_sentences=2), grid=(0.0,), methods=("dd2slave",), two_stage=2
    )
    fold = Fold(0, list(range(10)), list(range(10, 13)), list(range(13, len(pool))))
    outcome = protocol.run(pool, fold, GROUPING, [])
    assert list(outcome.systems) == [CHAIN, TWO_STAGE, "2-slave DD"]
    two = outcome.systems[TWO_STAGE]
    assert [len(t) for t in two.tags] == [len(pool[i]) for i in fold.test]
    assert two.train_seconds > outcome.systems[CHAIN].train_seconds
    table = compare([pool[i] for i in range(len(pool))], [outcome], GROUPING, "BIO", samples=50)
    assert table[TWO_STAGE]["certified"] is None  # it proves nothing
    assert table[TWO_STAGE]["delta"] is not None


def test_a_grid_decodes_as_each_weight_alone(pool: list[Sentence]) -> None:
    setup = _setup()
    model, _, _ = setup.train(pool[:10], pool[10:13], 0)
    labelled = pool[13:]
    protocol = Pipeline(setup, Consistency(min_sentences=2))
    grid = decode_grid(model, labelled, protocol.decoder(model, "ilp", 0.0), (0.0, 1.0), GROUPING)
    for w in (0.0, 1.0):
        alone = decode_groups(model, labelled, protocol.decoder(model, "ilp", w), GROUPING)
        assert grid[w].tags == alone.tags
        assert (grid[w].groups, grid[w].with_patterns) == (alone.groups, alone.with_patterns)
    assert grid[0.0].with_patterns == 0 < grid[1.0].with_patterns

"""The whole two-stage tagger of Krishnan & Manning (ACL 2006) over a corpus: first stage, features, second.

Krishnan & Manning, "An effective two-stage model for exploiting non-local dependencies in named
entity recognition", section 4: the first stage is a trained chain CRF (a checkpoint); its majority
labels over the group and the split (:func:`~crfhead.higher_order.two_stage.majority_features`)
become extra features of a second chain CRF, which is trained on jackknifed first-stage tags of the
training split (:func:`~crfhead.higher_order.two_stage.jackknife_tags`, 10 folds in the paper) and
keeps its best dev epoch. Groups and token comparison follow the corpus
(:mod:`~crfhead.higher_order.corpus_setup`). It certifies nothing; its time per group is the whole
pipeline's (first stage, features, second stage) over the split.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from crfhead.data.datamodule import collator_for
from crfhead.data.sentence import Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order.corpus_setup import group_sentences, lowercases
from crfhead.higher_order.fold_training import predict_tags, train_tagger
from crfhead.higher_order.two_stage import (
    TwoStageCollator,
    extend_vocabs,
    jackknife_tags,
    majority_features,
    with_features,
)
from crfhead.training.module import TaggerModule

__all__ = ["TwoStage"]


class TwoStage:
    """Krishnan & Manning's two-stage tagger: the first-stage checkpoint, then a second CRF.

    Args:
        first: the trained chain model (the first stage).
        corpus: ``msm2013`` or ``conll2003`` (tokens are compared lowercased on tweets, exactly on
            CoNLL, as the corpus's factors compare them).
        threshold: the tweet-grouping threshold.

    Attributes:
        second: the second stage once :meth:`fit` ran.
        collate: its collator (the majority features' ids after the local ones).
        history: the second stage's dev F1 after each epoch.
        fit_seconds: the wall time of :meth:`fit`.
    """

    def __init__(self, first: TaggerModule, corpus: str, threshold: int = 4) -> None:
        self.first, self.corpus, self.threshold = first.eval(), corpus, threshold
        self.lowercase = lowercases(corpus)
        self.scheme = first.tagger.labels.scheme
        self.first_collate = collator_for(first.hparams["vocabs"], first.tagger.needs)
        self.second: TaggerModule | None = None
        self.collate: TwoStageCollator | None = None
        self.history: list[float] = []
        self.fit_seconds = 0.0

    def featurise(
        self,
        sentences: Sequence[Sentence],
        tags: Sequence[Sequence[str]],
        groups: Sequence[Sequence[int]],
    ) -> list[Sentence]:
        """Copies of ``sentences`` carrying the majority features of ``tags`` over ``groups``."""
        feats = majority_features(
            [s.tokens for s in sentences], tags, groups, self.scheme, lowercase=self.lowercase
        )
        return with_features(sentences, feats)

    def stage_one(
        self, sentences: Sequence[Sentence], groups: Sequence[Sequence[int]]
    ) -> list[Sentence]:
        """The sentences with features from the first stage's own tags (dev, test)."""
        return self.featurise(
            sentences, predict_tags(self.first, self.first_collate, sentences), groups
        )

    def fit(
        self,
        splits: Mapping[str, Sequence[Sentence]],
        folds: int,
        first_epochs: int,
        second_epochs: int,
        min_feature_count: int = 1,
        batch_size: int = 32,
        clip: float = 5.0,
        seed: int = 0,
    ) -> None:
        """Jackknife the training tags, featurise train and dev, train the second stage.

        Args:
            splits: ``train`` and ``dev`` sentences.
            folds: jackknife folds.
            first_epochs: epochs of each fold's first-stage model (as the checkpoint's).
            second_epochs: epochs of the second stage (its best dev epoch is kept).
            min_feature_count: the fold models' feature cut-off (as the first stage's data).
            batch_size: training batch size.
            clip: gradient norm clipping.
            seed: the folds' and the training's seed.
        """
        began = time.perf_counter()
        hparams = dict(self.first.hparams)
        vocabs = hparams["vocabs"]
        train = splits["train"]
        groups = group_sentences(train, self.corpus, self.threshold)
        tags = jackknife_tags(
            hparams,
            vocabs,
            train,
            groups,
            folds,
            first_epochs,
            min_feature_count=min_feature_count,
            batch_size=batch_size,
            clip=clip,
            seed=seed,
        )
        train2 = self.featurise(train, tags, groups)
        dev = splits["dev"]
        dev2 = self.stage_one(dev, group_sentences(dev, self.corpus, self.threshold))
        vocabs2 = extend_vocabs(vocabs, train2)
        self.collate = TwoStageCollator(vocabs2)
        self.second, self.history = train_tagger(
            hparams,
            vocabs2,
            self.collate,
            train2,
            second_epochs,
            dev=dev2,
            batch_size=batch_size,
            clip=clip,
            seed=seed,
        )
        self.fit_seconds = time.perf_counter() - began

    def predict(
        self, sentences: Sequence[Sentence], groups: Sequence[Sequence[int]]
    ) -> list[list[str]]:
        """The second stage's tags of every sentence of ``groups`` (ascending sentence order).

        Raises:
            RuntimeError: :meth:`fit` has not run.
        """
        if self.second is None or self.collate is None:
            raise RuntimeError("fit the second stage first")
        picked = sorted(i for g in groups for i in g)
        where = {i: j for j, i in enumerate(picked)}
        subset = [sentences[i] for i in picked]
        local = [[where[i] for i in g] for g in groups]
        return predict_tags(self.second, self.collate, self.stage_one(subset, local))

    def evaluate(
        self, sentences: Sequence[Sentence], groups: Sequence[Sequence[int]]
    ) -> dict[str, float]:
        """F1 micro/macro and the pipeline's milliseconds per group on the ``groups`` of ``sentences``.

        Raises:
            RuntimeError: :meth:`fit` has not run.
        """
        picked = sorted(i for g in groups for i in g)
        began = time.perf_counter()
        pred = self.predict(sentences, groups)
        seconds = time.perf_counter() - began
        metrics = TaggingMetrics(self.scheme)
        metrics.update([sentences[i].tags or [] for i in picked], pred)
        out = metrics.compute()
        return {
            "f1": out["f1"],
            "macro_f1": out["macro_f1"],
            "groups": len(groups),
            "ms_per_group": 1e3 * seconds / max(len(groups), 1),
        }

"""Nested k-fold cross-validation of joint (higher-order) decoding against the chain, with intervals.

The experiment of Qian & Liu (TACL 2014, Table 2: chain / naive DD / 2-slave DD / ILP, F micro,
F macro, train + test seconds), made able to tell a gain from noise on a corpus as small as #MSM2013:

* **Folds of whole groups.** The pool (all labelled sentences) is grouped once (a
  :class:`~crfhead.data.grouping.Grouping`: tweet clusters, documents) and cut into ``k`` test folds
  keeping every group whole (:func:`~crfhead.data.grouping.group_folds`). Inside each outer training
  part the same cut picks a dev fold (**nested**): the fold's model, its best epoch and the factors'
  weight are chosen on that dev alone, never on the test fold.
* **Two protocols** (:class:`Pipeline`, :class:`Perceptron`):

  - ``pipeline``: a chain model trained alone (best dev epoch), then one non-local weight chosen on
    dev by 2-slave DD among a grid, then the test fold decoded at that weight by every method;
  - ``perceptron``: the seed's training: the averaged perceptron for a number of epochs, one update
    per (uncut) group, with the higher-order decoder in the loop and one weight per factor kind
    learned, beside the same perceptron with the chains alone.

* **Context.** Unlabelled sentences (the 1,526 official #MSM2013 test tweets) may join every dev and
  test fold's grouping as context: they are decoded jointly with the labelled sentences they link
  to and never scored.
* **Report.** Every system's out-of-fold labels of every pooled sentence are kept, so the pooled F1
  and the per-fold F1 come from the same run, and :func:`compare` gives the paired-bootstrap 95%
  interval of each system's difference to the chain, resampling whole groups
  (:func:`~crfhead.evaluation.bootstrap.paired_bootstrap`).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from crfhead.data.corpora import InMemoryCorpus
from crfhead.data.datamodule import TaggingDataModule, collator_for
from crfhead.data.grouping import Grouping, group_folds
from crfhead.data.sentence import Sentence
from crfhead.data.tokenize import Tokenizer
from crfhead.evaluation.bootstrap import BootstrapResult, paired_bootstrap
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order.decoder import FactorDecoder
from crfhead.higher_order.factors import Factors
from crfhead.higher_order.fold_training import predict_tags, train_tagger
from crfhead.training.module import TaggerModule

__all__ = [
    "CHAIN",
    "TWO_STAGE",
    "Decoded",
    "Fold",
    "FoldOutcome",
    "Perceptron",
    "Pipeline",
    "Protocol",
    "Setup",
    "SystemRun",
    "compare",
    "cross_validate",
    "decode_grid",
    "decode_groups",
    "joint_groups",
    "linked_phrases",
    "plan_folds",
    "usable_context",
]

CHAIN = "chain"
"""The name of the baseline system every other is compared with."""

TWO_STAGE = "two-stage (K&M)"
"""The name of Krishnan & Manning's two-stage baseline in a :class:`Pipeline`'s table."""


@dataclass(frozen=True)
class Fold:
    """One outer fold: indices into the pool, each part a union of whole groups.

    Attributes:
        index: the fold's number (0-based).
        train: the sentences the fold's models are trained on.
        dev: the inner dev part (best epoch, the factors' weight).
        test: the held-out test fold.
    """

    index: int
    train: list[int]
    dev: list[int]
    test: list[int]


def plan_folds(groups: Sequence[Sequence[int]], k: int = 5, seed: int = 13) -> list[Fold]:
    """``k`` outer folds of the pool's ``groups``, each with a nested dev part of whole groups.

    Fold ``i`` tests on the ``i``-th part of :func:`~crfhead.data.grouping.group_folds`; its dev is
    the first of ``k`` parts the same function cuts from the remaining groups (seed ``seed + 1 + i``),
    so dev is about ``1/k`` of the training part.

    Raises:
        ValueError: fewer than ``k`` groups outside a test fold, or groups repeating a sentence.
    """
    test_folds = group_folds(groups, k, seed)
    where = {i: g for g, members in enumerate(groups) for i in members}
    out = []
    for f, test in enumerate(test_folds):
        held = {where[i] for i in test}
        rest = [list(groups[g]) for g in range(len(groups)) if g not in held]
        dev = group_folds(rest, k, seed + 1 + f)[0]
        dev_set = set(dev)
        train = sorted(i for g in rest for i in g if i not in dev_set)
        out.append(Fold(f, train, dev, sorted(test)))
    return out


@dataclass
class Decoded:
    """A system's labels of some labelled sentences, and what decoding them cost.

    Attributes:
        tags: per labelled sentence given, its labels (in the order given).
        seconds: wall time of the decoding (features and factors built included).
        groups: the groups decoded jointly (with at least one labelled sentence).
        with_patterns: those the factors coupled.
        certified: those the decoder proved optimal.
        iterations: dual-decomposition iterations, summed.
        certifies: whether the system proves anything (a joint decoder; not the chain's batched
            Viterbi nor the two-stage baseline).
    """

    tags: list[list[str]]
    seconds: float
    groups: int = 0
    with_patterns: int = 0
    certified: int = 0
    iterations: int = 0
    certifies: bool = True


def joint_groups(
    labelled: Sequence[Sentence], context: Sequence[Sentence], grouping: Grouping
) -> tuple[list[Sentence], list[list[int]]]:
    """The labelled sentences then the context, and their groups holding a labelled sentence."""
    pool = [*labelled, *context]
    n = len(labelled)
    return pool, [g for g in grouping(pool) if any(i < n for i in g)]


def decode_groups(
    model: TaggerModule,
    labelled: Sequence[Sentence],
    decoder: FactorDecoder,
    grouping: Grouping,
    context: Sequence[Sentence] = (),
) -> Decoded:
    """Decode ``labelled`` (with ``context``) group by group under ``model``'s chains and ``decoder``.

    Args:
        model: the trained model (its tagger's head gives the chain potentials).
        labelled: the sentences to label.
        decoder: the joint decoder (its factors, weights, method, scale).
        grouping: how the sentences (labelled and context together) fall into groups.
        context: unlabelled sentences decoded with the groups they join, never returned.
    """
    return _decode(model, labelled, decoder, grouping, context, None)[None]


def decode_grid(
    model: TaggerModule,
    labelled: Sequence[Sentence],
    decoder: FactorDecoder,
    weights: Sequence[float],
    grouping: Grouping,
    context: Sequence[Sentence] = (),
) -> dict[float, Decoded]:
    """:func:`decode_groups` at each scale of ``weights``, each group's structure built once.

    Each group's potentials are computed once and its decomposition kept from one scale to the next
    (rescaled and warm-started by the decoder; :meth:`~crfhead.higher_order.decoder.FactorDecoder.
    forget` once the group is done); every scale's seconds count the shared potentials.
    """
    got = _decode(model, labelled, decoder, grouping, context, [float(w) for w in weights])
    return {w: d for w, d in got.items() if w is not None}


def _decode(
    model: TaggerModule,
    labelled: Sequence[Sentence],
    decoder: FactorDecoder,
    grouping: Grouping,
    context: Sequence[Sentence],
    weights: list[float] | None,
) -> dict[float | None, Decoded]:
    tagger = model.tagger
    collate = collator_for(model.hparams["vocabs"], tagger.needs)
    labels = tagger.labels.labels
    pool, groups = joint_groups(labelled, context, grouping)
    scales: list[float | None] = [None] if weights is None else list(weights)
    tags: dict[float | None, list[list[str]]] = {w: [[] for _ in labelled] for w in scales}
    seconds = dict.fromkeys(scales, 0.0)
    counts = {w: dict.fromkeys(("with_patterns", "certified", "iterations"), 0) for w in scales}
    for group in groups:
        began = time.perf_counter()
        batch = collate([pool[i] for i in group])
        batch = dataclasses.replace(batch, groups=[list(range(len(group)))])
        with torch.inference_mode():
            pot = tagger.head.potentials(tagger(batch), batch.mask)
        shared = time.perf_counter() - began  # the potentials, counted for every scale
        for w in scales:
            if w is not None:
                decoder.use(w)
            decoder.reset_stats()
            began = time.perf_counter()
            with torch.inference_mode():
                rows = decoder.decode(pot, batch).tolist()
            seconds[w] += shared + time.perf_counter() - began
            for name in counts[w]:
                counts[w][name] += int(decoder.stats[name])
            for i, row in zip(group, rows, strict=True):
                if i < len(labelled):
                    tags[w][i] = [labels[k] for k in row if k >= 0]
        decoder.forget()
    return {
        w: Decoded(
            tags[w],
            seconds[w],
            len(groups),
            counts[w]["with_patterns"],
            counts[w]["certified"],
            counts[w]["iterations"],
        )
        for w in scales
    }


def _f1(scheme: str, gold: Sequence[Sentence], tags: Sequence[Sequence[str]]) -> dict[str, float]:
    metrics = TaggingMetrics(scheme)
    metrics.update([s.tags or [] for s in gold], [list(t) for t in tags])
    out = metrics.compute()
    return {"f1": float(out["f1"]), "macro_f1": float(out["macro_f1"])}


@dataclass
class SystemRun:
    """One system on one fold.

    Attributes:
        tags: its labels of the fold's test sentences (in fold order).
        train_seconds: training its model (shared models count for each system using them).
        select_seconds: choosing its weight on dev (0 where nothing is chosen).
        decoded: the test decoding.
        weight: the non-local weight it decoded with (``None``: learned or none).
        dev: what chose the weight (weight → dev F1) or the dev F1 per epoch.
    """

    tags: list[list[str]]
    train_seconds: float
    select_seconds: float
    decoded: Decoded
    weight: float | None = None
    dev: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """Train + weight selection + test decoding."""
        return self.train_seconds + self.select_seconds + self.decoded.seconds


@dataclass
class FoldOutcome:
    """Every system's run on one fold."""

    fold: Fold
    systems: dict[str, SystemRun]


@dataclass(frozen=True)
class Setup:
    """How a fold's model is built and trained: the config's model and data sections, in code.

    Attributes:
        hparams: :class:`~crfhead.training.module.TaggerModule` arguments (``encoder``, ``head``,
            ``lr``, ``optimizer``, ``decoder``...).
        scheme: the scheme the model trains in (the pool's tags must already be in it).
        data: the vocabulary arguments of :class:`~crfhead.data.datamodule.TaggingDataModule`
            (``templates``, ``min_feature_count``, ``lowercase``, ``min_word_count``).
        epochs: training epochs.
        batch_size: sentences (or groups, for the perceptron) per update.
        clip: gradient norm clip (``inf``: none).
        average: average the weights (the averaged perceptron).
        tokenizer: the source corpus's tokenizer (saved with the vocabularies).
        seed: the training's seed (each fold adds its index).
    """

    hparams: dict[str, Any]
    scheme: str
    data: dict[str, Any] = field(default_factory=dict)
    epochs: int = 15
    batch_size: int = 32
    clip: float = 5.0
    average: bool = False
    tokenizer: Tokenizer | None = None
    seed: int = 0

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], tokenizer: Tokenizer | None = None, seed: int = 0
    ) -> Setup:
        """The setup a ``train.py`` config states: its ``model``, ``data`` and ``trainer`` sections.

        ``trainer.max_epochs`` (default 15), ``trainer.gradient_clip_val`` (default none),
        ``data.batch_size`` (default 32), and averaging when ``trainer.callbacks`` holds
        :class:`~crfhead.training.callbacks.WeightAveraging`; the corpus and grouping are the
        experiment's own.
        """
        data = dict(config.get("data", {}))
        trainer = dict(config.get("trainer", {}))
        callbacks = trainer.get("callbacks") or []
        average = any(
            isinstance(c, Mapping) and str(c.get("class_path", "")).endswith("WeightAveraging")
            for c in callbacks
        )
        kept = ("templates", "min_feature_count", "lowercase", "min_word_count")
        return cls(
            hparams=dict(config.get("model", {})),
            scheme=str(data.get("scheme", "BIO")),
            data={k: data[k] for k in kept if k in data},
            epochs=int(trainer.get("max_epochs", 15)),
            batch_size=int(data.get("batch_size", 32)),
            clip=float(trainer.get("gradient_clip_val") or float("inf")),
            average=average,
            tokenizer=tokenizer,
            seed=seed,
        )

    def vocabs(self, train: Sequence[Sentence], dev: Sequence[Sentence]) -> dict[str, Any]:
        """The vocabularies built from ``train`` (labels from every sentence given)."""
        corpus = InMemoryCorpus(
            {"train": train, "dev": dev, "test": dev}, self.scheme, self.tokenizer
        )
        return TaggingDataModule(corpus, scheme=self.scheme, **self.data).vocabs

    def train(
        self,
        train: Sequence[Sentence],
        dev: Sequence[Sentence],
        fold: int,
        *,
        hparams: Mapping[str, Any] | None = None,
        groups: Sequence[Sequence[int]] | None = None,
        dev_f1: Callable[[TaggerModule], float] | None = None,
    ) -> tuple[TaggerModule, list[float], float]:
        """Train one fold's model; returns it, its dev F1 per epoch and the seconds it took."""
        began = time.perf_counter()
        vocabs = self.vocabs(train, dev)
        args = dict(self.hparams if hparams is None else hparams)
        needs = TaggerModule(vocabs=vocabs, **_module_args(args)).tagger.needs
        collate = collator_for(vocabs, needs)
        model, history = train_tagger(
            args,
            vocabs,
            collate,
            train,
            self.epochs,
            dev=dev,
            batch_size=self.batch_size,
            clip=self.clip,
            seed=self.seed + fold,
            groups=groups,
            average=self.average,
            dev_f1=dev_f1,
        )
        return model, history, time.perf_counter() - began


def _module_args(hparams: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("encoder", "head", "constrained", "decoder")
    return {k: hparams[k] for k in keep if k in hparams}


class Protocol:
    """How each fold's systems are trained and decoded (:class:`Pipeline`, :class:`Perceptron`)."""

    def systems(self) -> list[str]:
        """The systems' names, the chain first."""
        raise NotImplementedError

    def run(
        self,
        pool: Sequence[Sentence],
        fold: Fold,
        grouping: Grouping,
        context: Sequence[Sentence],
    ) -> FoldOutcome:
        """Train and decode every system on ``fold``."""
        raise NotImplementedError


def _chain_run(
    model: TaggerModule, test: Sequence[Sentence], train_seconds: float, history: list[float]
) -> SystemRun:
    """The chain system: the head's Viterbi tags, batched (no group, no factor)."""
    collate = collator_for(model.hparams["vocabs"], model.tagger.needs)
    began = time.perf_counter()
    tags = predict_tags(model, collate, test)
    decoded = Decoded(tags, time.perf_counter() - began, certifies=False)
    return SystemRun(tags, train_seconds, 0.0, decoded, dev={"epochs": history})


class Pipeline(Protocol):
    """The chain trained alone, then one weight chosen on dev, then each method at that weight.

    Args:
        setup: the chain model's training.
        factors: the non-local factors (unit scores; the weight multiplies them).
        grid: the weights tried on dev (include 0: the chain alone).
        methods: the joint decoders of :data:`~crfhead.higher_order.decode.METHODS` compared with
            the chain (default: naive per-factor DD, 2-slave DD, the ILP), in the table's order.
        select_method: the decoder the weight is chosen with (2-slave DD).
        max_iterations: the dual decompositions' iteration cap.
        names: the table's name of each method.
        two_stage: also run Krishnan & Manning's two-stage baseline
            (:class:`~crfhead.higher_order.two_stage_pipeline.TwoStage`) on the fold's chain, with
            this many jackknife folds (``None``: not run); its first-stage fold models train as many
            epochs as the chain's best, its second stage ``setup.epochs`` (best dev epoch kept).
        corpus: the two-stage baseline's corpus setup (``msm2013`` or ``conll2003``: how it groups
            and compares tokens).
    """

    NAMES: Mapping[str, str] = {
        "dd_factor": "naive DD",
        "dd2slave": "2-slave DD",
        "ilp": "ILP",
        "viterbi": "viterbi",
    }

    def __init__(
        self,
        setup: Setup,
        factors: Factors,
        grid: Sequence[float] = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0),
        methods: Sequence[str] = ("dd_factor", "dd2slave", "ilp"),
        select_method: str = "dd2slave",
        max_iterations: int = 300,
        names: Mapping[str, str] | None = None,
        two_stage: int | None = None,
        corpus: str = "msm2013",
    ) -> None:
        if not grid or any(w < 0 for w in grid):
            raise ValueError(f"grid must be a non-empty list of weights >= 0, got {list(grid)}")
        self.setup, self.factors = setup, factors
        self.grid, self.methods = tuple(float(w) for w in grid), tuple(methods)
        self.select_method, self.max_iterations = select_method, max_iterations
        self.names = dict(self.NAMES if names is None else names)
        self.two_stage, self.corpus = two_stage, corpus

    def systems(self) -> list[str]:  # noqa: D102
        two = [TWO_STAGE] if self.two_stage else []
        return [CHAIN, *two, *(self.names[m] for m in self.methods)]

    def decoder(self, model: TaggerModule, method: str, weight: float) -> FactorDecoder:
        """A tuned decoder of ``model``'s labels at ``weight``."""
        labels = model.tagger.labels
        decoder = FactorDecoder(
            labels.labels,
            labels.scheme,
            factors=self.factors,
            method=method,
            max_iterations=self.max_iterations,
            grid=(weight,),
        ).double()  # the scale in float64: the weight exactly as given
        decoder.use(weight)
        return decoder

    def run(  # noqa: D102
        self,
        pool: Sequence[Sentence],
        fold: Fold,
        grouping: Grouping,
        context: Sequence[Sentence],
    ) -> FoldOutcome:
        train = [pool[i] for i in fold.train]
        dev = [pool[i] for i in fold.dev]
        test = [pool[i] for i in fold.test]
        model, history, train_seconds = self.setup.train(train, dev, fold.index)
        scheme = model.tagger.labels.scheme
        began = time.perf_counter()
        decoder = self.decoder(model, self.select_method, self.grid[0])
        on_dev = decode_grid(model, dev, decoder, self.grid, grouping, context)
        grid_f1 = {w: _f1(scheme, dev, on_dev[w].tags) for w in self.grid}
        weight = max(grid_f1, key=lambda w: (grid_f1[w]["f1"], grid_f1[w]["macro_f1"]))
        select_seconds = time.perf_counter() - began
        systems = {CHAIN: _chain_run(model, test, train_seconds, history)}
        if self.two_stage:
            systems[TWO_STAGE] = self._two_stage(model, train, dev, test, history, train_seconds)
        for method in self.methods:
            got = decode_groups(model, test, self.decoder(model, method, weight), grouping, context)
            systems[self.names[method]] = SystemRun(
                got.tags,
                train_seconds,
                select_seconds,
                got,
                weight,
                {"grid": {str(w): r for w, r in grid_f1.items()}, "epochs": history},
            )
        return FoldOutcome(fold, systems)

    def _two_stage(
        self,
        model: TaggerModule,
        train: list[Sentence],
        dev: list[Sentence],
        test: list[Sentence],
        history: list[float],
        train_seconds: float,
    ) -> SystemRun:
        from crfhead.higher_order.corpus_setup import group_sentences
        from crfhead.higher_order.two_stage_pipeline import TwoStage

        assert self.two_stage is not None
        two = TwoStage(model, self.corpus)
        best_epoch = 1 + max(range(len(history)), key=history.__getitem__) if history else 1
        two.fit(
            {"train": train, "dev": dev},
            self.two_stage,
            best_epoch,
            self.setup.epochs,
            min_feature_count=int(self.setup.data.get("min_feature_count", 1)),
            batch_size=self.setup.batch_size,
            clip=self.setup.clip,
            seed=self.setup.seed,
        )
        groups = group_sentences(test, self.corpus)
        began = time.perf_counter()
        predicted = two.predict(test, groups)
        decoded = Decoded(predicted, time.perf_counter() - began, len(groups), certifies=False)
        # predict() orders by sentence index, the fold's order.
        return SystemRun(
            predicted,
            train_seconds + two.fit_seconds,
            0.0,
            decoded,
            dev={"epochs": two.history, "first_epochs": best_epoch},
        )


class Perceptron(Protocol):
    """The seed's training: the averaged perceptron with the higher-order decoder in the loop.

    Args:
        setup: the perceptron's training (``average`` true; ``batch_size`` counts groups); its
            ``hparams`` without a decoder train the chain system.
        decoder: the learned decoder's spec (``class_path`` of
            :class:`~crfhead.higher_order.decoder.FactorDecoder` with ``grid: null``).
        name: the table's name of the higher-order system.
    """

    def __init__(self, setup: Setup, decoder: Mapping[str, Any], name: str = "2-slave DD") -> None:
        self.setup, self.spec, self.name = setup, dict(decoder), name

    def systems(self) -> list[str]:  # noqa: D102
        return [CHAIN, self.name]

    def run(  # noqa: D102
        self,
        pool: Sequence[Sentence],
        fold: Fold,
        grouping: Grouping,
        context: Sequence[Sentence],
    ) -> FoldOutcome:
        train = [pool[i] for i in fold.train]
        dev = [pool[i] for i in fold.dev]
        test = [pool[i] for i in fold.test]
        groups = grouping(train)
        chain_args = {k: v for k, v in self.setup.hparams.items() if k != "decoder"}
        chain, chain_history, chain_seconds = self.setup.train(
            train, dev, fold.index, hparams=chain_args, groups=groups
        )
        scheme = chain.tagger.labels.scheme

        def joint_f1(model: TaggerModule) -> float:
            decoder = model.tagger.decoder
            assert isinstance(decoder, FactorDecoder)
            return _f1(scheme, dev, decode_groups(model, dev, decoder, grouping, context).tags)[
                "f1"
            ]

        joint, history, seconds = self.setup.train(
            train,
            dev,
            fold.index,
            hparams={**self.setup.hparams, "decoder": self.spec},
            groups=groups,
            dev_f1=joint_f1,
        )
        decoder = joint.tagger.decoder
        assert isinstance(decoder, FactorDecoder)
        got = decode_groups(joint, test, decoder, grouping, context)
        learned = dict(zip(decoder.kinds, (decoder.scale * decoder.weights).tolist(), strict=True))
        systems = {
            CHAIN: _chain_run(chain, test, chain_seconds, chain_history),
            self.name: SystemRun(
                got.tags, seconds, 0.0, got, None, {"epochs": history, "weights": learned}
            ),
        }
        return FoldOutcome(fold, systems)


def usable_context(pool: Sequence[Sentence], context: Sequence[Sentence]) -> list[Sentence]:
    """``context`` without the sentences whose id is a pooled sentence's (a labelled duplicate)."""
    ids = {s.id for s in pool if s.id is not None}
    return [s for s in context if s.id is None or s.id not in ids]


def linked_phrases(
    sentences: Sequence[Sentence],
    groups: Sequence[Sequence[int]],
    factors: Factors,
    labels: Sequence[str],
    scheme: str,
) -> list[int]:
    """Per group, how many occurrence pairs (of a repeated phrase, of a skip edge) its factors link.

    A pair is a set of token positions some pattern covers, counted once whatever its readings.
    """
    out = []
    for g in groups:
        patterns = factors.build([sentences[i].tokens for i in g], labels, scheme)
        out.append(len({frozenset((b, t) for b, t, _ in p.cells) for p in patterns}))
    return out


def cross_validate(
    pool: Sequence[Sentence],
    protocol: Protocol,
    grouping: Grouping,
    *,
    k: int = 5,
    seed: int = 13,
    context: Sequence[Sentence] = (),
    folds: Sequence[int] | None = None,
    progress: Callable[[FoldOutcome], None] | None = None,
) -> list[FoldOutcome]:
    """Run ``protocol`` on every outer fold of ``pool`` (:func:`plan_folds` of its groups).

    Args:
        pool: every labelled sentence (tags in the protocol's scheme).
        protocol: what each fold trains and decodes.
        grouping: the groups folds keep whole, and the groups decoded jointly.
        k: outer folds.
        seed: the folds' seed.
        context: unlabelled sentences joining every dev and test fold's groups (never scored;
            sentences whose id is in the pool are left out, as a duplicate of a labelled one).
        folds: run only these fold indices (default: all).
        progress: called with each fold's outcome as it is done.

    Raises:
        ValueError: a pool sentence without tags, or a context sentence with them.
    """
    if any(s.tags is None for s in pool):
        raise ValueError("every pooled sentence needs tags (unlabelled text goes in context)")
    if any(s.tags is not None for s in context):
        raise ValueError("context sentences must be unlabelled (tags None): they are never scored")
    context = usable_context(pool, context)
    plan = plan_folds(grouping(pool), k, seed)
    out = []
    for fold in plan:
        if folds is not None and fold.index not in folds:
            continue
        outcome = protocol.run(pool, fold, grouping, context)
        if progress is not None:
            progress(outcome)
        out.append(outcome)
    return out


def compare(
    pool: Sequence[Sentence],
    outcomes: Sequence[FoldOutcome],
    grouping: Grouping,
    scheme: str,
    *,
    context: Sequence[Sentence] = (),
    samples: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Per system: pooled and per-fold F1, mean seconds, and its paired-bootstrap difference to the chain.

    The pooled labels are every fold's test labels together (each pooled sentence once); the
    bootstrap resamples whole groups of the pool (``grouping``, with the ``context`` the run was
    given) and compares each system with :data:`CHAIN` on the same draws.

    Returns:
        system → ``f1``, ``macro_f1`` (pooled), ``fold_f1``, ``fold_macro_f1`` (lists),
        ``mean_f1``, ``mean_macro_f1``, ``seconds`` (mean train + test per fold), ``certified``
        (fraction of the decoded groups with patterns that were certified; ``None`` for a system
        that certifies nothing: the chain, the two-stage baseline),
        ``delta`` (a :class:`~crfhead.evaluation.bootstrap.BootstrapResult`, ``None`` for the
        chain).
    """
    order = [i for o in outcomes for i in o.fold.test]
    gold = [pool[i].tags or [] for i in order]
    # The units are the groups the sentences were decoded in (context links included), restricted
    # to the scored sentences: a draw keeps or drops a jointly decoded group whole.
    n = len(order)
    _, groups = joint_groups([pool[i] for i in order], usable_context(pool, context), grouping)
    units = [[i for i in g if i < n] for g in groups]
    names = list(outcomes[0].systems)
    tags = {n: [t for o in outcomes for t in o.systems[n].tags] for n in names}
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        folds = [
            _f1(scheme, [pool[i] for i in o.fold.test], o.systems[name].tags) for o in outcomes
        ]
        pooled = _f1(scheme, [pool[i] for i in order], tags[name])
        runs = [o.systems[name] for o in outcomes]
        coupled = sum(r.decoded.with_patterns for r in runs)
        delta: BootstrapResult | None = None
        if name != CHAIN:
            delta = paired_bootstrap(
                gold, tags[CHAIN], tags[name], scheme, units=units, samples=samples, seed=seed
            )
        out[name] = {
            **pooled,
            "fold_f1": [f["f1"] for f in folds],
            "fold_macro_f1": [f["macro_f1"] for f in folds],
            "mean_f1": statistics.mean(f["f1"] for f in folds),
            "mean_macro_f1": statistics.mean(f["macro_f1"] for f in folds),
            "seconds": statistics.mean(r.seconds for r in runs),
            "certified": (
                None
                if not all(r.decoded.certifies for r in runs)
                else sum(
                    r.decoded.certified - r.decoded.groups + r.decoded.with_patterns for r in runs
                )
                / coupled
                if coupled
                else 1.0
            ),
            "delta": delta,
        }
    return out

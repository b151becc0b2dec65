"""The Lightning data module: a corpus (chosen by config), its vocabularies, and the data loaders.

Samplers shard the data themselves under DDP (set ``trainer.use_distributed_sampler: false``, as every
shipped config does): training shards one epoch-seeded permutation, evaluation reads disjoint shards
without the padding ``DistributedSampler`` adds, so gathered metrics count every sentence once.

The vocabularies are built from the training split when the module is created and exposed as
:attr:`TaggingDataModule.vocabs`, a JSON-able dict that ``train.py`` links into the model's
hyper-parameters, so a checkpoint decodes strings without the data module. The data module knows
nothing of the model: it builds every vocabulary and batch field unless told which fields the model
reads (``needs``, which ``train.py`` computes from the configured encoder's and head's declared needs
before the data is loaded; :meth:`TaggingDataModule.set_needs` afterwards). Only the vocabularies of
those fields are built: a BiLSTM or a transformer gets no indicator-feature vocabulary (on WNUT 2017
about 100,000 feature strings, over 80 % of the hyper-parameters every checkpoint and
``hparams.yaml`` carried), a transformer no word or character vocabulary.

With pretrained word vectors (``word_vectors``, which ``train.py`` links from the encoder's
``word_vectors``) the word vocabulary is the training words followed by the other words of the
corpus (dev, test) that the vector source covers, in the order first seen: the embedding then holds
the pretrained rows of the evaluation words, as a pretrained vocabulary would (Lample et al. 2016).
Words without a vector stay unknown, the training words keep their ids, no tag is read, and
``seen_words`` (what unseen-word accuracy counts against) stays the training words.

With a ``grouping`` (:mod:`crfhead.data.grouping`: tweet clusters, documents) every split is cut into
groups once, batches hold whole groups (``batch_size`` then counts groups, not sentences) and
:attr:`~crfhead.data.batching.Batch.groups` says which rows form each, so a higher-order decoder never
decodes across groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Sampler

from crfhead.data.batching import Batch, Collator, collator_for
from crfhead.data.corpora import Corpus, FinanceCorpus
from crfhead.data.features import FeatureTemplates
from crfhead.data.grouping import Grouping
from crfhead.data.partial import ANY, convert_partial
from crfhead.data.samplers import EpochSeededSampler, LengthGroupedSampler, ShardSampler
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.data.vocab import Vocab, WordCoverage, word_coverage
from crfhead.schemes import canonical_scheme, entity_types

__all__ = [
    "BATCH_FIELDS",
    "EpochSeededSampler",
    "GroupCollator",
    "LengthGroupedSampler",
    "ResumableLoader",
    "ShardSampler",
    "TaggingDataModule",
    "collator_for",
]


_LOG = logging.getLogger("crfhead")

BATCH_FIELDS = frozenset({"words", "chars", "features"})
"""The batch fields built from a vocabulary (``mask``, ``tags`` and ``sentences`` are always there)."""

_FIELD_VOCABS = {"words": ("words",), "chars": ("chars",), "features": ("templates", "features")}
"""The ``vocabs`` keys each batch field is encoded with."""


def _word_counts(sentences: Sequence[Sentence]) -> list[int]:
    return [len(s.tokens) for s in sentences]


def _rank_and_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class ResumableLoader(DataLoader[Batch]):
    """The training loader, which Lightning can resume mid-epoch exactly.

    Lightning (>= 2.2) saves the ``state_dict`` of a training loader that has one in every checkpoint
    and hands it back through ``load_state_dict`` on resume. The state is the epoch and the number of
    batches whose optimizer step is done (``progress()``, read from the trainer when the checkpoint is
    written), so a run interrupted inside an epoch continues with the next batch of the same
    permutation, not from the epoch's start.
    """

    def __init__(self, *args: Any, progress: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._progress = progress

    def state_dict(self) -> dict[str, int]:
        """``{"epoch": e, "batches": n}``: the loader's position when the checkpoint is written."""
        sampler = self.sampler
        epoch = sampler.epoch if isinstance(sampler, EpochSeededSampler) else 0
        return {"epoch": epoch, "batches": int(self._progress())}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Start the next pass over ``state["epoch"]`` after its first ``state["batches"]`` batches."""
        if isinstance(self.sampler, EpochSeededSampler) and self.batch_size is not None:
            epoch, batches = int(state["epoch"]), int(state["batches"])
            self.sampler.resume_at(epoch, batches * self.batch_size)


class GroupCollator:
    """``collate_fn`` over groups of sentences: one :class:`Batch` of all their sentences, in order.

    :attr:`~crfhead.data.batching.Batch.groups` holds each group's rows.
    """

    def __init__(self, collator: Collator) -> None:
        self.collator = collator

    def __call__(self, groups: Sequence[Sequence[Sentence]]) -> Batch:
        """Flatten ``groups`` and collate."""
        rows: list[list[int]] = []
        sentences: list[Sentence] = []
        for group in groups:
            rows.append(list(range(len(sentences), len(sentences) + len(group))))
            sentences.extend(group)
        batch = self.collator(sentences)
        batch.groups = rows
        return batch


class TaggingDataModule(pl.LightningDataModule):
    """Loads a corpus, converts its tags to ``scheme``, builds vocabularies and serves batches.

    Args:
        corpus: the corpus (``class_path`` in the config).
        scheme: the tagging scheme the model is trained in (``"BIO"``, ``"BIOES"``, ...).
        batch_size: training batch size (sentences).
        eval_batch_size: validation / test batch size.
        min_word_count: words seen fewer times in training map to ``<unk>``.
        lowercase: lowercase words for the word vocabulary.
        templates: indicator feature templates (see :class:`~crfhead.data.features.FeatureTemplates`).
        min_feature_count: features seen fewer times in training are dropped.
        seed: the shuffling seed.
        num_workers: data loader processes that collate batches (``0``: in the training process, the
            default): the batches, with their sentences, are pickled back from the workers, which
            costs more than collating in the training process on a machine of few cores. Workers
            are kept across epochs (``persistent_workers``).
        grouping: batch whole groups of sentences (``class_path`` of a
            :class:`~crfhead.data.grouping.Grouping`); ``batch_size`` and ``eval_batch_size`` then
            count groups.
        word_vectors: the encoder's pretrained word vector source (linked by ``train.py`` from
            ``model.encoder``'s ``word_vectors``; not set in a config); when its
            :attr:`~crfhead.encoders.vectors.WordVectors.extend_vocab` is true, the words of the
            other splits it :meth:`~crfhead.encoders.vectors.WordVectors.covers` join the word
            vocabulary after the training words.
        needs: the batch fields the model reads, a subset of :data:`BATCH_FIELDS` (``train.py`` links
            it from the model's encoder and head; not set in a config); only their vocabularies are
            built. ``None``: every field.
        length_window: ``0`` (the default): training batches are drawn from a plain shuffle. ``w >
            0``: batches of similar length (:class:`~crfhead.data.samplers.LengthGroupedSampler`,
            windows of ``w`` batches sorted by length), each sentence's length as the model
            counts it (:meth:`set_lengths`; ``train.py`` passes the model's
            :meth:`~crfhead.model.tagger.Tagger.lengths`, subword pieces for a transformer; words
            without one). Less padding, a less random batch; evaluation order is unchanged.

    Attributes:
        added_words: the words added to the vocabulary for ``word_vectors`` (vocabulary keys, in
            id order after the training words); empty without.
    """

    def __init__(
        self,
        corpus: Corpus | None = None,
        scheme: str = "BIO",
        batch_size: int = 32,
        eval_batch_size: int = 128,
        min_word_count: int = 1,
        lowercase: bool = False,
        templates: Sequence[str] = ("bias", "word", "prefix3", "suffix3", "shape", "window2"),
        min_feature_count: int = 1,
        seed: int = 0,
        num_workers: int = 0,
        grouping: Grouping | None = None,
        word_vectors: dict[str, Any] | WordCoverage | None = None,
        needs: Sequence[str] | None = None,
        length_window: int = 0,
    ) -> None:
        super().__init__()
        if length_window < 0:
            raise ValueError(f"length_window must be >= 0 (0: plain shuffle), got {length_window}")
        fields = BATCH_FIELDS if needs is None else frozenset(needs) & BATCH_FIELDS
        if batch_size < 1 or eval_batch_size < 1:
            raise ValueError(
                f"batch sizes must be >= 1, got batch_size={batch_size}, "
                f"eval_batch_size={eval_batch_size}"
            )
        self.grouping = grouping
        self.corpus = corpus if corpus is not None else FinanceCorpus()
        self.scheme = canonical_scheme(scheme)
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.seed, self.num_workers = seed, num_workers
        self.length_window = length_window
        self._lengths: Callable[[Sequence[Sentence]], list[int]] = _word_counts
        self.splits = self.corpus.load()
        source = canonical_scheme(self.corpus.scheme)
        if source != self.scheme:
            for sentences in self.splits.values():
                for s in sentences:
                    # Partial sentences convert exactly (BIO -> BIOES) or are refused, by name.
                    convert_partial(s, source, self.scheme)
        train = self.splits["train"]
        types = sorted(
            {
                t
                for split in self.splits.values()
                for s in split
                for t in entity_types(
                    [
                        *(s.tags or []),
                        *(lab for a in s.allowed or () if a and a != ANY for lab in a),
                    ],
                    self.scheme,
                )
            }
        )
        self.added_words: tuple[str, ...] = ()
        self.vocabs: dict[str, Any] = {
            "labels": LabelVocab.from_types(types, self.scheme).to_dict()
        }
        if "words" in fields:
            words = Vocab.build(
                (w for s in train for w in s.tokens), min_count=min_word_count, lower=lowercase
            )
            if word_vectors is not None:
                vectors = word_coverage(word_vectors)
                if vectors.extend_vocab:
                    self.added_words = self._add_covered(words, vectors)
            self.vocabs["words"] = words.to_dict()
        if "chars" in fields:
            self.vocabs["chars"] = Vocab.build(
                c for s in train for w in s.tokens for c in w
            ).to_dict()
        if "features" in fields:
            feature_templates = FeatureTemplates(list(templates))
            self.vocabs["templates"] = list(feature_templates.templates)
            self.vocabs["features"] = feature_templates.build_vocab(
                train, min_count=min_feature_count
            ).to_dict()
        self.vocabs["seen_words"] = sorted({w for s in train for w in s.tokens})
        self.vocabs["tokenizer"] = self.corpus.tokenizer.to_dict()
        self.needs: frozenset[str] = fields
        self.groups: dict[str, list[list[int]]] = (
            {name: grouping(split) for name, split in self.splits.items()}
            if grouping is not None
            else {}
        )

    def _add_covered(self, words: Vocab, source: WordCoverage) -> tuple[str, ...]:
        """Add to ``words`` the corpus words outside it that ``source`` covers; return them."""
        candidates: dict[str, None] = {}  # vocabulary keys, first seen first
        for split in ("train", "dev", "test", *sorted(set(self.splits) - {"train", "dev", "test"})):
            for sentence in self.splits.get(split, ()):
                for token in sentence.tokens:
                    key = token.lower() if words.lower else token
                    if key not in words.stoi:
                        candidates.setdefault(key)
        keys = list(candidates)
        covered = source.covers(keys).tolist() if keys else []
        added = tuple(k for k, hit in zip(keys, covered, strict=True) if hit)
        for key in added:
            words.add(key)
        _LOG.info(
            "word vocabulary: %d training words + %d words of the other splits with a vector "
            "(%d without one stay unknown)",
            len(words) - 2 - len(added),
            len(added),
            len(keys) - len(added),
        )
        return added

    def set_needs(self, needs: frozenset[str]) -> None:
        """Build only the batch fields in ``needs`` (``train.py`` passes the model's ``Tagger.needs``).

        Raises:
            ValueError: a field whose vocabulary was not built (the module was created with
                ``needs`` that left it out).
        """
        missing = sorted(
            field
            for field in needs & BATCH_FIELDS
            if any(key not in self.vocabs for key in _FIELD_VOCABS[field])
        )
        if missing:
            raise ValueError(
                f"the model reads the batch fields {missing}, whose vocabularies were not built "
                f"(the data module was created with needs={sorted(self.needs)})"
            )
        self.needs = needs

    def set_lengths(self, lengths: Callable[[Sequence[Sentence]], list[int]]) -> None:
        """How long each sentence is in a padded batch, for ``length_window`` (default: its words).

        ``train.py`` passes the model's :meth:`~crfhead.model.tagger.Tagger.lengths`.
        """
        self._lengths = lengths

    def _item_lengths(self, split: str) -> list[int]:
        """The length of every item of ``split``: a sentence's, or a group's longest sentence's."""
        sentences = self.splits[split]
        lengths = self._lengths(sentences)
        if len(lengths) != len(sentences):
            raise ValueError(
                f"the length function gave {len(lengths)} lengths for {len(sentences)} sentences"
            )
        if self.grouping is None:
            return lengths
        return [max((lengths[i] for i in g), default=0) for g in self.groups[split]]

    def _loader(self, split: str, train: bool) -> DataLoader[Batch]:
        sentences = self.splits[split]
        base = collator_for(self.vocabs, self.needs)
        collate: Collator | GroupCollator = base
        items: list[Sentence] | list[list[Sentence]] = sentences
        if self.grouping is not None:
            items = [[sentences[i] for i in g] for g in self.groups[split]]
            collate = GroupCollator(base)
        rank, world = _rank_and_world()
        sampler: Sampler[int]
        if not train:
            sampler = ShardSampler(len(items), rank, world)
        elif self.length_window:
            lengths = self._item_lengths(split)
            sampler = LengthGroupedSampler(
                lengths, self.batch_size, self.length_window, self.seed, rank, world
            )
        else:
            sampler = EpochSeededSampler(len(items), self.seed, rank, world)
        if train:
            return ResumableLoader(
                items,
                batch_size=self.batch_size,
                sampler=sampler,
                collate_fn=collate,
                num_workers=self.num_workers,
                persistent_workers=self.num_workers > 0,
                progress=self._batches_done,
            )
        return DataLoader(
            items,  # type: ignore[arg-type]
            batch_size=self.eval_batch_size,
            sampler=sampler,
            collate_fn=collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def _batches_done(self) -> int:
        """Training batches of the current epoch whose optimizer step is done (0 without a trainer)."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 0
        return int(trainer.fit_loop.epoch_loop.batch_progress.current.processed)

    def train_dataloader(self) -> DataLoader[Batch]:  # noqa: D102
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader[Batch]:  # noqa: D102
        return self._loader("dev", train=False)

    def test_dataloader(self) -> DataLoader[Batch]:  # noqa: D102
        return self._loader("test", train=False)

    def predict_dataloader(self) -> DataLoader[Batch]:
        """The test split (``train.py predict --ckpt_path ...`` tags it; its gold tags are ignored)."""
        return self._loader("test", train=False)

"""Corpus specifications chosen by config (``class_path``): each loads train / dev / test sentences.

* :class:`FinanceCorpus` -- the synthetic finance corpus: the first ``train_docs`` documents of run
  ``seed`` for training, the next ``dev_docs`` for validation, ``test_docs`` of run ``test_seed`` for test.
* :class:`MSM2013Corpus` -- #MSM2013 tweets with the fixed seeded split (the official test gold was
  never published).
* :class:`CoNLLCorpus` -- any three column files (CoNLL-2003, WNUT 2017, your own); relative paths
  are resolved under ``$CRFHEAD_DATA``.

Each corpus names the :mod:`~crfhead.data.tokenize` rule its text was tokenized with
(:attr:`Corpus.tokenizer`); the data module stores it with the vocabularies, so a trained model
tokenizes raw text as its training data was.

Every ``load()`` refuses a split with no sentences (:func:`require_sentences`): an empty training
file, a path to the wrong file, or a held-out fraction of a tiny corpus that rounds to nothing would
otherwise surface later as Lightning's messages about empty data loaders or an empty vocabulary,
which name neither the file nor the split. The check is here, where the file names are known, and
so runs when the data module loads its corpus, before any trainer exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from crfhead.data.conll import read_conll
from crfhead.data.finance import generate_documents
from crfhead.data.finance.profile import profile as resolve_profile
from crfhead.data.msm2013 import read_msm2013, split_msm2013
from crfhead.data.partial import mark_unknown
from crfhead.data.paths import data_path
from crfhead.data.sentence import Sentence
from crfhead.data.tokenize import LetterTokenizer, RegexTokenizer, Tokenizer

__all__ = [
    "CoNLLCorpus",
    "Corpus",
    "FinanceCorpus",
    "InMemoryCorpus",
    "MSM2013Corpus",
    "require_sentences",
]

Splits = dict[str, list[Sentence]]


def require_sentences(splits: Splits, sources: Mapping[str, str]) -> Splits:
    """``splits`` itself, once every split is known to hold at least one sentence.

    Args:
        splits: the loaded splits, by name.
        sources: what each split was read from, by split name (a file, or a corpus and its
            arguments), for the message.

    Raises:
        ValueError: a split with no sentences, naming its source and the split.
    """
    for split, sentences in splits.items():
        if not sentences:
            raise ValueError(f"{sources[split]}: the {split} split has no sentences")
    return splits


class Corpus:
    """A source of ``{"train", "dev", "test"}`` sentences.

    Attributes:
        scheme: the scheme of its tags.
        tokenizer: the rule that splits raw text into its tokens (applied to raw text at tagging).
    """

    scheme: str = "BIO"
    tokenizer: Tokenizer = RegexTokenizer("words")

    def load(self) -> Splits:
        """The three splits."""
        raise NotImplementedError


class FinanceCorpus(Corpus):
    """The synthetic finance corpus (the finance case study of *Sequence Labeling: From HMMs to Linear-Chain CRFs*); tokens are lowercase letters.

    Args:
        seed: the training run.
        train_docs: training documents (the first ones of the run).
        dev_docs: validation documents (the next ones of the same run).
        test_seed: the test run.
        test_docs: test documents.
        profile: the generator's profile (:mod:`crfhead.data.finance.profile`): ``"default"``, or
            ``"seed"``, calibrated to the seed's statistics (most unseen tokens are ordinary words
            outside entities, not names).
        unknown_tags: tags made "any label" (partial labels, issue 29) in every split, as
            :class:`CoNLLCorpus` does; the metrics ignore those positions in dev and test.

    Raises:
        ValueError: ``seed == test_seed``; a document count below 1; an unknown profile.
    """

    def __init__(
        self,
        seed: int = 0,
        train_docs: int = 30,
        dev_docs: int = 20,
        test_seed: int = 1,
        test_docs: int = 200,
        profile: str = "default",
        unknown_tags: Sequence[str] = (),
    ) -> None:
        self.unknown_tags = tuple(unknown_tags)
        if seed == test_seed:
            raise ValueError(f"seed and test_seed must differ (both {seed}): test on another run")
        # Counts, refused here rather than sliced: train_docs=-1 would train on all but the last
        # of train_docs + dev_docs documents, without a word; 0 leaves a split empty.
        for name, value, split in (
            ("train_docs", train_docs, "train"),
            ("dev_docs", dev_docs, "dev"),
            ("test_docs", test_docs, "test"),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                empty = f": the {split} split has no sentences" if value == 0 else ""
                raise ValueError(
                    f"FinanceCorpus: {name} must be a whole number of documents >= 1, "
                    f"got {value!r}{empty}"
                )
        self.seed, self.train_docs, self.dev_docs = seed, train_docs, dev_docs
        self.test_seed, self.test_docs = test_seed, test_docs
        self.profile = resolve_profile(profile).name  # unknown names fail here, before loading
        self.tokenizer = LetterTokenizer()

    def load(self) -> Splits:  # noqa: D102
        docs = generate_documents(self.seed, self.train_docs + self.dev_docs, self.profile)
        flat = [
            [s for d in part for s in d]
            for part in (docs[: self.train_docs], docs[self.train_docs :])
        ]
        test = [
            s for d in generate_documents(self.test_seed, self.test_docs, self.profile) for s in d
        ]
        splits = {"train": flat[0], "dev": flat[1], "test": test}
        for split in splits.values():
            mark_unknown(split, self.unknown_tags)
        return require_sentences(
            splits,
            {
                "train": f"FinanceCorpus(seed={self.seed}, train_docs={self.train_docs})",
                "dev": f"FinanceCorpus(seed={self.seed}, dev_docs={self.dev_docs})",
                "test": f"FinanceCorpus(test_seed={self.test_seed}, test_docs={self.test_docs})",
            },
        )


class MSM2013Corpus(Corpus):
    """#MSM2013 tweets, seeded split of the training file (default 2,251 / 282 / 282).

    Args:
        split_seed: the split's seed.
        path: the training file (default ``$CRFHEAD_DATA/msm2013/TweetsTrainingSetCH.tsv``).
    """

    def __init__(self, split_seed: int = 13, path: str | None = None) -> None:
        self.split_seed, self.path = split_seed, path
        self.tokenizer = RegexTokenizer("tweets")

    def load(self) -> Splits:  # noqa: D102
        sentences, report = read_msm2013(self.path, scheme=self.scheme)
        train, dev, test = split_msm2013(sentences, seed=self.split_seed)
        # One file, three splits: the message says how many tweets the file gave, so a tiny or
        # empty file is told apart from a split whose fraction rounds to nothing.
        source = f"{report.source} ({len(sentences)} tweets, split seed {self.split_seed})"
        return require_sentences(
            {"train": train, "dev": dev, "test": test},
            dict.fromkeys(("train", "dev", "test"), source),
        )


class CoNLLCorpus(Corpus):
    """Three CoNLL-style column files.

    Args:
        train: training file (relative paths are under ``$CRFHEAD_DATA``).
        dev: validation file.
        test: test file.
        scheme: the scheme of the files' tags.
        separator: column separator (default: whitespace; a tab for WNUT 2017).
        tokenizer: the :data:`~crfhead.data.tokenize.RULES` rule the files' text was tokenized with:
            ``"words"`` (CoNLL-2003 and most corpora), ``"tweets"`` (WNUT 2017) or ``"whitespace"``.
        unknown_tags: tags read as "any label" (partial labels, issue 29), e.g. ``["O"]`` when
            only some entities were annotated; cells ``B-PER|B-ORG`` and ``*`` are read as label
            sets whatever this is (:mod:`crfhead.data.partial`).
    """

    def __init__(
        self,
        train: str,
        dev: str,
        test: str,
        scheme: str = "BIO",
        separator: str | None = None,
        tokenizer: str = "words",
        unknown_tags: Sequence[str] = (),
    ) -> None:
        self.files = {"train": train, "dev": dev, "test": test}
        self.scheme, self.separator = scheme, separator
        self.unknown_tags = tuple(unknown_tags)
        self.tokenizer = RegexTokenizer(tokenizer)

    def load(self) -> Splits:  # noqa: D102
        out: Splits = {}
        sources: dict[str, str] = {}
        for split, name in self.files.items():
            path = Path(name) if Path(name).is_absolute() else data_path(name)
            out[split], _ = read_conll(
                path, scheme=self.scheme, separator=self.separator, unknown_tags=self.unknown_tags
            )
            sources[split] = f"CoNLL file {path}"
            # Checked per file as read, so an empty train file is named before dev and test are
            # even opened (and before a bad line in them could be the first error reported).
            require_sentences({split: out[split]}, sources)
        return out


class InMemoryCorpus(Corpus):
    """Splits already in memory: one fold of a cross-validation, sentences built by code.

    Args:
        splits: ``train``, ``dev`` and ``test`` sentences (not copied: the data module converts tags
            in place only when ``scheme`` differs from the one it trains in).
        scheme: the scheme of their tags.
        tokenizer: the rule raw text is split by at tagging (the source corpus's).
        unknown_tags: tags made "any label" (partial labels) in every split, in place.

    Raises:
        ValueError: a split missing or empty.
    """

    def __init__(
        self,
        splits: Mapping[str, Sequence[Sentence]],
        scheme: str = "BIO",
        tokenizer: Tokenizer | None = None,
        unknown_tags: Sequence[str] = (),
    ) -> None:
        missing = [name for name in ("train", "dev", "test") if name not in splits]
        if missing:
            raise ValueError(f"InMemoryCorpus needs train, dev and test splits; missing {missing}")
        self._splits = {name: list(split) for name, split in splits.items()}
        if unknown_tags:
            for split in self._splits.values():
                mark_unknown(split, unknown_tags)
        self.scheme = scheme
        if tokenizer is not None:
            self.tokenizer = tokenizer

    def load(self) -> Splits:  # noqa: D102
        return require_sentences(
            {name: list(split) for name, split in self._splits.items()},
            dict.fromkeys(self._splits, "the in-memory splits"),
        )

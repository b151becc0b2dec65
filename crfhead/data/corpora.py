"""Corpus specifications chosen by config (``class_path``): each loads train / dev / test sentences.

* :class:`FinanceCorpus` -- the synthetic finance corpus: the first ``train_docs`` documents of run
  ``seed`` for training, the next ``dev_docs`` for validation, ``test_docs`` of run ``test_seed`` for test.
* :class:`MSM2013Corpus` -- #MSM2013 tweets with the fixed seeded split (the official test gold was
  never published).
* :class:`CoNLLCorpus` -- any three column files (CoNLL-2003, WNUT 2017, your own); relative paths
  are resolved under ``$CRFHEAD_DATA``.
"""

from __future__ import annotations

from pathlib import Path

from crfhead.data.conll import read_conll
from crfhead.data.finance import generate_documents
from crfhead.data.msm2013 import read_msm2013, split_msm2013
from crfhead.data.paths import data_dir
from crfhead.data.sentence import Sentence

__all__ = ["CoNLLCorpus", "Corpus", "FinanceCorpus", "MSM2013Corpus"]

Splits = dict[str, list[Sentence]]


class Corpus:
    """A source of ``{"train", "dev", "test"}`` sentences; ``scheme`` is the scheme of its tags."""

    scheme: str = "BIO"

    def load(self) -> Splits:
        """The three splits."""
        raise NotImplementedError


class FinanceCorpus(Corpus):
    """The synthetic finance corpus (seed ``000``'s finance case study).

    Args:
        seed: the training run.
        train_docs: training documents (the first ones of the run).
        dev_docs: validation documents (the next ones of the same run).
        test_seed: the test run.
        test_docs: test documents.
    """

    def __init__(
        self,
        seed: int = 0,
        train_docs: int = 30,
        dev_docs: int = 20,
        test_seed: int = 1,
        test_docs: int = 200,
    ) -> None:
        if seed == test_seed:
            raise ValueError(f"seed and test_seed must differ (both {seed}): test on another run")
        self.seed, self.train_docs, self.dev_docs = seed, train_docs, dev_docs
        self.test_seed, self.test_docs = test_seed, test_docs

    def load(self) -> Splits:  # noqa: D102
        docs = generate_documents(self.seed, self.train_docs + self.dev_docs)
        flat = [
            [s for d in part for s in d]
            for part in (docs[: self.train_docs], docs[self.train_docs :])
        ]
        test = [s for d in generate_documents(self.test_seed, self.test_docs) for s in d]
        return {"train": flat[0], "dev": flat[1], "test": test}


class MSM2013Corpus(Corpus):
    """#MSM2013 tweets, seeded split of the training file (default 2,251 / 282 / 282).

    Args:
        split_seed: the split's seed.
        path: the training file (default ``$CRFHEAD_DATA/msm2013/TweetsTrainingSetCH.tsv``).
    """

    def __init__(self, split_seed: int = 13, path: str | None = None) -> None:
        self.split_seed, self.path = split_seed, path

    def load(self) -> Splits:  # noqa: D102
        sentences, _ = read_msm2013(self.path, scheme=self.scheme)
        train, dev, test = split_msm2013(sentences, seed=self.split_seed)
        return {"train": train, "dev": dev, "test": test}


class CoNLLCorpus(Corpus):
    """Three CoNLL-style column files.

    Args:
        train: training file (relative paths are under ``$CRFHEAD_DATA``).
        dev: validation file.
        test: test file.
        scheme: the scheme of the files' tags.
        separator: column separator (default: whitespace; a tab for WNUT 2017).
    """

    def __init__(
        self, train: str, dev: str, test: str, scheme: str = "BIO", separator: str | None = None
    ) -> None:
        self.files = {"train": train, "dev": dev, "test": test}
        self.scheme, self.separator = scheme, separator

    def load(self) -> Splits:  # noqa: D102
        out: Splits = {}
        for split, name in self.files.items():
            path = Path(name) if Path(name).is_absolute() else data_dir() / name
            out[split], _ = read_conll(path, scheme=self.scheme, separator=self.separator)
        return out

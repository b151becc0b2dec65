"""A HuggingFace ``datasets`` corpus chosen by config: ``class_path: crfhead.data.hf_corpus.HFCorpus``.

``path`` is, tried in this order: a folder written by ``DatasetDict.save_to_disk`` (read with
``datasets.load_from_disk``); a local folder or file of data files (``datasets.load_dataset``:
JSON lines, CSV, Parquet...); a Hub dataset id (``datasets.load_dataset(path, name)``; offline,
``HF_DATASETS_OFFLINE=1`` reads only the cache). A relative path that does not exist here is looked
for under ``$CRFHEAD_DATA`` too, as :class:`~crfhead.data.corpora.CoNLLCorpus` does.

Rows become sentences with :func:`crfhead.data.hf.from_dataset`'s rules: ``ClassLabel`` tag ids are
mapped to their names, string tags are kept, integer tags without a ``ClassLabel`` are refused. Each
tag is checked in ``scheme`` and invalid sequences are repaired (counted, as the CoNLL reader does);
the data module converts them to the scheme it trains in. ``-DOCSTART-`` rows (CoNLL-2003 on the
Hub) are document boundaries, not sentences: the sentences after one share a ``doc_id``; empty rows
are skipped. Only the tokens, tags, ``id`` and ``doc_id`` columns (and ``columns``, if given) are
read, so a dataset's other columns (of any type) never get in the way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crfhead.data.corpora import Corpus, Splits, require_sentences
from crfhead.data.hf import from_dataset
from crfhead.data.paths import data_dir
from crfhead.data.sentence import ReadReport, Sentence, repair_sentences
from crfhead.data.tokenize import RegexTokenizer
from crfhead.schemes import canonical_scheme, split_label

if TYPE_CHECKING:
    import datasets

__all__ = ["DOCSTART", "HFCorpus"]

DOCSTART = "-DOCSTART-"
"""A row whose only token this is marks a new document."""


class HFCorpus(Corpus):
    """Train / dev / test splits of a HuggingFace dataset (see the module docstring).

    Args:
        path: a ``save_to_disk`` folder, a local data files folder or file, or a Hub dataset id.
        name: the dataset configuration (``load_dataset``'s ``name``), if it has several.
        train_split: the split trained on.
        dev_split: the split validated on.
        test_split: the split tested on.
        tokens_column: the column of token lists.
        tags_column: the column of tag lists (``ClassLabel`` ids or strings).
        scheme: the scheme of the dataset's tags (``"BIO"`` for the Hub's IOB2 NER datasets).
        tokenizer: the :data:`~crfhead.data.tokenize.RULES` rule the dataset was tokenized with.
        columns: other per-token columns to keep as :attr:`Sentence.columns` (``["pos_tags"]``).
        revision: the Hub dataset's revision (Hub ids only).

    Raises:
        ValueError: an unknown scheme (at construction); at :meth:`load`, a missing split (the
            available ones named), a missing column (the columns named), integer tags without a
            ``ClassLabel``, a tag outside ``scheme``, or an empty split.
        FileNotFoundError: at :meth:`load`, a path that is neither local nor a dataset the Hub (or
            its cache, offline) has.
    """

    def __init__(
        self,
        path: str,
        name: str | None = None,
        train_split: str = "train",
        dev_split: str = "validation",
        test_split: str = "test",
        tokens_column: str = "tokens",
        tags_column: str = "ner_tags",
        scheme: str = "BIO",
        tokenizer: str = "words",
        columns: Sequence[str] = (),
        revision: str | None = None,
    ) -> None:
        self.path, self.name, self.revision = path, name, revision
        self.splits = {"train": train_split, "dev": dev_split, "test": test_split}
        self.tokens_column, self.tags_column = tokens_column, tags_column
        self.scheme = canonical_scheme(scheme)
        self.columns = list(columns)
        self.tokenizer = RegexTokenizer(tokenizer)

    def __repr__(self) -> str:
        name = "" if self.name is None else f", name={self.name!r}"
        return f"HFCorpus({self.path!r}{name})"

    def _local(self) -> Path | None:
        path = Path(self.path).expanduser()
        if path.exists():
            return path
        if not path.is_absolute() and (data_dir() / path).exists():
            return data_dir() / path
        return None

    def _dataset_dict(self) -> datasets.DatasetDict:
        import datasets  # heavy: imported on use

        local = self._local()
        if local is not None and (local / "dataset_dict.json").is_file():
            return datasets.load_from_disk(str(local))
        if local is not None and (local / "state.json").is_file():
            raise ValueError(
                f"{self!r}: {local} holds a single Dataset, not its splits: save a "
                "datasets.DatasetDict({'train': ..., 'validation': ..., 'test': ...})"
            )
        source = str(local) if local is not None else self.path
        try:
            loaded = datasets.load_dataset(source, self.name, revision=self.revision)
        except (
            FileNotFoundError,
            ConnectionError,
            datasets.exceptions.DatasetNotFoundError,
        ) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            raise FileNotFoundError(
                f"{self!r}: not a local dataset folder or file, and not a dataset the Hub (or "
                f"its cache, offline) has: {first}"
            ) from None
        if not isinstance(loaded, datasets.DatasetDict):
            raise ValueError(f"{self!r}: expected splits, got a {type(loaded).__name__}")
        return loaded

    def _sentences(self, dataset: datasets.Dataset, split: str) -> list[Sentence]:
        where = f"{self!r} split {split!r}"
        columns = list(dataset.column_names)
        for column in (self.tokens_column, self.tags_column, *self.columns):
            if column not in columns:
                raise ValueError(f"{where} has no column {column!r} (columns: {columns})")
        keep = {self.tokens_column, self.tags_column, *self.columns}
        keep |= {c for c in ("id", "doc_id") if c in columns}
        dataset = dataset.remove_columns([c for c in columns if c not in keep])
        if self.tokens_column != "tokens":
            if "tokens" in dataset.column_names:
                dataset = dataset.remove_columns("tokens")
            dataset = dataset.rename_column(self.tokens_column, "tokens")
        try:
            rows = from_dataset(dataset, tags=self.tags_column)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        out: list[Sentence] = []
        document = 0
        has_docs = any(s.tokens == [DOCSTART] for s in rows)
        for i, sentence in enumerate(rows):
            if sentence.tokens == [DOCSTART]:
                document += 1
                continue
            if not sentence.tokens:
                continue
            for tag in dict.fromkeys(sentence.tags or ()):
                try:
                    split_label(tag, self.scheme)
                except ValueError as err:
                    raise ValueError(f"{where} row {i}: {err} (scheme {self.scheme})") from None
            if sentence.id is None:
                sentence.id = f"{split}:{i}"
            if has_docs and sentence.doc_id is None:
                sentence.doc_id = f"{split}-{document}"
            out.append(sentence)
        report = ReadReport(where)
        out = repair_sentences(out, self.scheme, report)
        report.sentences, report.tokens, report.documents = len(out), sum(map(len, out)), document
        report.warn_if_changed()
        return out

    def load(self) -> Splits:  # noqa: D102
        found: Any = self._dataset_dict()
        available = list(found.keys())
        for role, split in self.splits.items():
            if split not in found:
                raise ValueError(
                    f"{self!r} has no split {split!r} for {role} (splits: {available}); set "
                    f"{role}_split"
                )
        out = {role: self._sentences(found[split], split) for role, split in self.splits.items()}
        return require_sentences(
            out, {role: f"{self!r} split {split!r}" for role, split in self.splits.items()}
        )

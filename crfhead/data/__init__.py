"""Data: sentences and label vocabularies, corpus readers, the finance corpus, batching, subwords.

Readers return ``(sentences, report)``: the report counts what was read, repaired and skipped.
Heavy optional imports (``datasets``, ``transformers``) happen inside the functions that need them.
"""

from crfhead.data.batching import Batch, Collator
from crfhead.data.conll import CoNLLFormatError, read_conll, write_conll
from crfhead.data.features import FeatureTemplates, word_shape
from crfhead.data.finance import ENTITY_TYPES as FINANCE_ENTITY_TYPES
from crfhead.data.finance import LABELS as FINANCE_LABELS
from crfhead.data.finance import (
    FinanceDocument,
    corpus_statistics,
    generate_corpus,
    generate_documents,
    generate_finance_documents,
    unseen_rate,
    unseen_rates,
)
from crfhead.data.hf import from_dataset, to_dataset
from crfhead.data.msm2013 import (
    MSM2013FormatError,
    kfold_msm2013,
    read_msm2013,
    read_msm2013_test,
    split_msm2013,
)
from crfhead.data.partial import ANY, convert_partial, mark_unknown, parse_cell
from crfhead.data.paths import data_dir, data_path
from crfhead.data.sentence import (
    LabelVocab,
    ReadReport,
    Sentence,
    gold_or_none,
    repair_sentences,
)
from crfhead.data.subwords import DEFAULT_MAX_LENGTH, POOLINGS, SubwordAligner, SubwordBatch
from crfhead.data.vocab import Vocab

__all__ = [
    "ANY",
    "DEFAULT_MAX_LENGTH",
    "FINANCE_ENTITY_TYPES",
    "FINANCE_LABELS",
    "POOLINGS",
    "Batch",
    "CoNLLFormatError",
    "Collator",
    "FeatureTemplates",
    "FinanceDocument",
    "LabelVocab",
    "MSM2013FormatError",
    "ReadReport",
    "Sentence",
    "SubwordAligner",
    "SubwordBatch",
    "Vocab",
    "convert_partial",
    "corpus_statistics",
    "data_dir",
    "data_path",
    "from_dataset",
    "generate_corpus",
    "generate_documents",
    "generate_finance_documents",
    "gold_or_none",
    "kfold_msm2013",
    "mark_unknown",
    "parse_cell",
    "read_conll",
    "read_msm2013",
    "read_msm2013_test",
    "repair_sentences",
    "split_msm2013",
    "to_dataset",
    "unseen_rate",
    "unseen_rates",
    "word_shape",
    "write_conll",
]

"""Data: sentences and label vocabularies, corpus readers, the finance corpus, batching.

Readers return ``(sentences, report)``: the report counts what was read, repaired and skipped.
Heavy optional imports (``datasets``, ``transformers``) happen inside the functions that need them.
"""

from crfhead.data.batching import Batch, Collator, FeatureTemplates, Vocab, word_shape
from crfhead.data.conll import CoNLLFormatError, read_conll, write_conll
from crfhead.data.hf import from_dataset, to_dataset
from crfhead.data.msm2013 import (
    MSM2013FormatError,
    kfold_msm2013,
    read_msm2013,
    read_msm2013_test,
    split_msm2013,
)
from crfhead.data.paths import data_dir, data_path
from crfhead.data.sentence import LabelVocab, ReadReport, Sentence, repair_sentences

__all__ = [
    "Batch",
    "CoNLLFormatError",
    "Collator",
    "FeatureTemplates",
    "LabelVocab",
    "MSM2013FormatError",
    "ReadReport",
    "Sentence",
    "Vocab",
    "data_dir",
    "data_path",
    "from_dataset",
    "kfold_msm2013",
    "read_conll",
    "read_msm2013",
    "read_msm2013_test",
    "repair_sentences",
    "split_msm2013",
    "to_dataset",
    "word_shape",
    "write_conll",
]

"""Data: sentences and label vocabularies, corpus readers, the finance corpus, batching.

Readers return ``(sentences, report)``: the report counts what was read, repaired and skipped.
Heavy optional imports (``datasets``, ``transformers``) happen inside the functions that need them.
"""

from crfhead.data.batching import Batch, Collator, FeatureTemplates, Vocab, word_shape
from crfhead.data.conll import CoNLLFormatError, read_conll, write_conll
from crfhead.data.hf import from_dataset, to_dataset
from crfhead.data.paths import data_dir, data_path
from crfhead.data.sentence import LabelVocab, ReadReport, Sentence, repair_sentences

__all__ = [
    "Batch",
    "CoNLLFormatError",
    "Collator",
    "FeatureTemplates",
    "LabelVocab",
    "ReadReport",
    "Sentence",
    "Vocab",
    "data_dir",
    "data_path",
    "from_dataset",
    "read_conll",
    "repair_sentences",
    "to_dataset",
    "word_shape",
    "write_conll",
]

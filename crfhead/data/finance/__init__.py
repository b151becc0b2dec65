"""The synthetic finance corpus: company filings and earnings-call transcripts tagged with entities.

The corpus of the seed text's section "Tagging entities in filings"
(*Sequence Labeling: From HMMs to Linear-Chain CRFs*): documents generated from sentence templates with slot
fillers, every entity encoded in BIO over 8 :data:`ENTITY_TYPES` (17 :data:`LABELS`). A corpus run
is a seed, and the same seed gives the same documents byte for byte on any machine.

* :mod:`~crfhead.data.finance.lexicon` -- the word lists, read from ``lexicon.json``.
* :mod:`~crfhead.data.finance.templates` -- the sentence templates of filings and calls.
* :mod:`~crfhead.data.finance.generator` -- the documents: companies, people, periods, amounts.
* :mod:`~crfhead.data.finance.stats` -- unseen-token rates and corpus statistics.

Write a run with ``python scripts/make_finance_corpus.py --seed 0 --docs 30 --out DIR``.
"""

from crfhead.data.finance.generator import (
    ENTITY_TYPES,
    LABELS,
    FinanceDocument,
    generate_corpus,
    generate_documents,
    generate_finance_documents,
    tokenize,
)
from crfhead.data.finance.stats import corpus_statistics, unseen_rate, unseen_rates

__all__ = [
    "ENTITY_TYPES",
    "LABELS",
    "FinanceDocument",
    "corpus_statistics",
    "generate_corpus",
    "generate_documents",
    "generate_finance_documents",
    "tokenize",
    "unseen_rate",
    "unseen_rates",
]

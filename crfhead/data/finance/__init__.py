"""The synthetic finance corpus: company filings and earnings-call transcripts tagged with entities.

The corpus of the seed text's section "Tagging entities in filings"
(``shared/seeds/000_7c5bc3c5795a6d4c.txt``). The module ``crfhead/data/finance.py`` moved to
:mod:`crfhead.data.finance.generator` unchanged; this package re-exports its public names.
"""

from crfhead.data.finance.generator import (
    ENTITY_TYPES,
    LABELS,
    FinanceDocument,
    corpus_statistics,
    generate_corpus,
    generate_documents,
    generate_finance_documents,
    tokenize,
    unseen_rate,
    unseen_rates,
)

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

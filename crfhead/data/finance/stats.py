"""Statistics of the synthetic finance corpus: unseen-token rates and per-split counts.

Moved here from ``crfhead/data/finance.py``. The unseen-token rate (the fraction of test tokens
whose word never occurs in training) is the number the seed's finance case study is about
(*Sequence Labeling: From HMMs to Linear-Chain CRFs*, "Tagging entities in filings"); :func:`unseen_rates`
measures it over training prefixes of one run against another run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from crfhead.data.finance.generator import ENTITY_TYPES, generate_corpus, generate_documents
from crfhead.data.finance.profile import DEFAULT, Profile
from crfhead.data.sentence import Sentence
from crfhead.schemes import tags_to_spans

__all__ = ["corpus_statistics", "unseen_composition", "unseen_rate", "unseen_rates"]


def _flatten(items: Iterable[Sentence | Sequence[Sentence]]) -> list[Sentence]:
    """The sentences of ``items``, each a sentence or a document (a sequence of sentences)."""
    out: list[Sentence] = []
    for item in items:
        if isinstance(item, Sentence):
            out.append(item)
        else:
            out.extend(item)
    return out


def _vocabulary(sentences: Iterable[Sentence]) -> set[str]:
    """The distinct tokens of ``sentences``."""
    return {tok for s in sentences for tok in s.tokens}


def unseen_rate(
    train: Iterable[Sentence | Sequence[Sentence]], test: Iterable[Sentence | Sequence[Sentence]]
) -> float:
    """The fraction of test tokens (occurrences) whose word never occurs in the training text.

    Args:
        train: training sentences, or documents (lists of sentences).
        test: test sentences or documents.

    Returns:
        A fraction in ``[0, 1]`` (0 for an empty test set).
    """
    vocab = _vocabulary(_flatten(train))
    total = unseen = 0
    for s in _flatten(test):
        total += len(s.tokens)
        unseen += sum(tok not in vocab for tok in s.tokens)
    return unseen / total if total else 0.0


def unseen_rates(
    train_seed: int = 0,
    test_seed: int = 1,
    sizes: Sequence[int] = (3, 10, 30),
    test_docs: int = 200,
    profile: str | Profile = DEFAULT,
) -> dict[int, float]:
    """:func:`unseen_rate` after the first ``n`` documents of ``train_seed``, ``n`` in ``sizes``.

    Args:
        train_seed: the training run.
        test_seed: the test run (should differ from ``train_seed``).
        sizes: training sizes in documents.
        test_docs: test size in documents.
        profile: the generator's profile (:mod:`crfhead.data.finance.profile`).

    Returns:
        ``{n: rate}`` in the order of ``sizes``.
    """
    train = generate_documents(train_seed, max(sizes, default=0), profile)
    test = generate_corpus(test_seed, test_docs, profile)
    return {n: unseen_rate(train[:n], test) for n in sizes}


def unseen_composition(
    train: Iterable[Sentence | Sequence[Sentence]], test: Iterable[Sentence | Sequence[Sentence]]
) -> dict[str, float]:
    """What the unseen test tokens are: the fraction of them whose gold tag has each entity type.

    The seed reports accuracies on unseen tokens of 0.911 to 0.958: that is only possible when most
    of them are easy, and an unseen word that is always ``O`` is easier than an unseen name.

    Args:
        train: training sentences or documents.
        test: tagged test sentences or documents.

    Returns:
        ``{"O": f, "ORG": f, ...}`` over ``"O"`` and every entity type met, largest first, summing
        to 1 (empty when no test token is unseen).
    """
    vocab = _vocabulary(_flatten(train))
    counts: Counter[str] = Counter()
    for s in _flatten(test):
        for tok, tag in zip(s.tokens, s.tags or ["O"] * len(s), strict=True):
            if tok not in vocab:
                counts["O" if tag == "O" else tag.split("-", 1)[1]] += 1
    total = sum(counts.values())
    return {k: v / total for k, v in counts.most_common()} if total else {}


def _split_statistics(sentences: Sequence[Sentence]) -> dict[str, Any]:
    """The sizes and entity counts of one split (see :func:`corpus_statistics`)."""
    entities: Counter[str] = Counter()
    multi: Counter[str] = Counter()
    entity_tokens = 0
    for s in sentences:
        for span in tags_to_spans(s.tags or ["O"] * len(s), "BIO"):
            entities[span.label] += 1
            multi[span.label] += span.end > span.start
            entity_tokens += span.end - span.start + 1
    types = [*ENTITY_TYPES, *sorted(set(entities) - set(ENTITY_TYPES))]
    tokens = sum(len(s) for s in sentences)
    documents = len({s.doc_id for s in sentences})
    return {
        "documents": documents,
        "sentences": len(sentences),
        "tokens": tokens,
        "tokens_per_document": tokens / documents if documents else 0.0,
        "tokens_per_sentence": tokens / len(sentences) if sentences else 0.0,
        "vocabulary": len(_vocabulary(sentences)),
        "entity_tokens": entity_tokens,
        "entities": {t: entities[t] for t in types},
        "multi_token_entities": {t: multi[t] for t in types},
    }


def corpus_statistics(train: Sequence[Sentence], test: Sequence[Sentence]) -> dict[str, Any]:
    """Sizes, entity counts and the unseen-token rate of a train/test pair.

    Args:
        train: training sentences.
        test: test sentences.

    Returns:
        ``{"train": {...}, "test": {...}, "unseen_rate": r, "unseen_type_rate": q}``. Each split has
        ``documents`` (distinct ``doc_id``), ``sentences``, ``tokens``, ``tokens_per_document``,
        ``tokens_per_sentence``, ``vocabulary``, ``entity_tokens``, ``entities`` and
        ``multi_token_entities`` (per type, in :data:`ENTITY_TYPES` order). ``unseen_rate`` is the
        fraction of test tokens never seen in training (:func:`unseen_rate`), ``unseen_type_rate``
        the fraction of test word types.
    """
    train_vocab = _vocabulary(train)
    test_vocab = _vocabulary(test)
    return {
        "train": _split_statistics(train),
        "test": _split_statistics(test),
        "unseen_rate": unseen_rate(train, test),
        "unseen_type_rate": len(test_vocab - train_vocab) / len(test_vocab) if test_vocab else 0.0,
    }

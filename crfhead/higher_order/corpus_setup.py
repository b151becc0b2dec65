"""Each evaluation corpus's higher-order setup: its groups, its factors and its dev grid.

Qian & Liu (TACL 2014) decode tweets grouped by shared words under consistency factors; on
CoNLL-2003 the non-local factors of Finkel et al. (ACL 2005) and Krishnan & Manning (ACL 2006) link
identical capitalised tokens of one document (skip chains). One table here says, per corpus:

* ``msm2013``: groups by single linkage of tweets sharing more than ``threshold`` words
  (:class:`~crfhead.data.grouping.TweetGroups`), :class:`~crfhead.higher_order.factors.Consistency`
  factors between tweets (a group of one tweet gets none), tokens compared lowercased;
* ``conll2003``: the documents (:class:`~crfhead.data.grouping.DocumentGroups`),
  :class:`~crfhead.higher_order.factors.SkipChain` factors, tokens compared exactly.

:data:`GRIDS` holds the non-local weights tried on dev (0 first: the chain alone, so the choice never
does worse on dev than the chain).
"""

from __future__ import annotations

from collections.abc import Sequence

from crfhead.data.grouping import DocumentGroups, TweetGroups
from crfhead.data.sentence import Sentence
from crfhead.higher_order.factors import Consistency, Factors, SkipChain

__all__ = [
    "CORPORA",
    "CORPUS_CLASSES",
    "GRIDS",
    "check_corpus",
    "corpus_of_class",
    "factors_for",
    "group_sentences",
    "lowercases",
]

CORPORA = ("msm2013", "conll2003")
"""The corpora with a higher-order setup."""

GRIDS: dict[str, tuple[float, ...]] = {
    "msm2013": (0.0, 0.5, 1.0, 2.0, 4.0, 8.0),
    "conll2003": (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
}
"""The non-local weights tried on dev, per corpus."""

CORPUS_CLASSES = {"MSM2013Corpus": "msm2013", "CoNLLCorpus": "conll2003"}
"""A config's corpus class name (``data.corpus.class_path``'s last part) → its corpus here."""


def check_corpus(corpus: str) -> str:
    """``corpus`` itself.

    Raises:
        ValueError: a corpus without a higher-order setup.
    """
    if corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}, got {corpus!r}")
    return corpus


def corpus_of_class(class_path: str) -> str:
    """The corpus of a config's ``data.corpus.class_path`` (``crfhead.data.corpora.CoNLLCorpus``).

    Raises:
        ValueError: a corpus class without a higher-order setup.
    """
    cls = class_path.rsplit(".", 1)[-1]
    if cls not in CORPUS_CLASSES:
        raise ValueError(
            f"no higher-order evaluation for corpus class {cls}; known {list(CORPUS_CLASSES)}"
        )
    return CORPUS_CLASSES[cls]


def group_sentences(
    sentences: Sequence[Sentence], corpus: str, threshold: int = 4
) -> list[list[int]]:
    """The groups decoded jointly: tweet groups (``msm2013``) or documents (``conll2003``).

    Documents are the runs of one ``doc_id`` in order of first appearance; a sentence without one
    is a group of its own.

    Raises:
        ValueError: an unknown corpus.
    """
    if check_corpus(corpus) == "msm2013":
        return TweetGroups(threshold=threshold).groups(sentences)
    return DocumentGroups().groups(sentences)


def factors_for(corpus: str) -> Factors:
    """The corpus's non-local factors, each pattern of unit score (weighted by the decoder).

    Raises:
        ValueError: an unknown corpus.
    """
    if check_corpus(corpus) == "conll2003":
        return SkipChain()
    return Consistency(min_sentences=2)


def lowercases(corpus: str) -> bool:
    """Whether the corpus's factors compare tokens lowercased (tweets: yes; CoNLL: no).

    Raises:
        ValueError: an unknown corpus.
    """
    return check_corpus(corpus) == "msm2013"

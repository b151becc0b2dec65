"""Label bias on trained taggers: Proposition 2 of *Sequence Labeling: From HMMs to Linear-Chain CRFs* on the synthetic finance corpus.

*Sequence Labeling: From HMMs to Linear-Chain CRFs*, "Local normalization and label bias", Proposition 2 (an MEMM's past
ignores its future): under a locally normalised chain whose factors read words up to ``t + w``, the
marginal of ``z_t`` is a function of ``x_{1:t+w}`` alone. The seed's finance demonstration takes the
opening "solenne power guided to percent growth in the" and completes it with words seen in training
("first quarter", "prior year", ...): the CRF's probability that "the" opens a DATE moves with the
continuation, the causal MEMM's (``w = 0``) is the same to every digit.

Both taggers here read the *same* causal word window (:func:`~crfhead.theory.experiments.memm_offsets`
``(0)``: two words to the left and the current word, a
:class:`~crfhead.encoders.WordWindowEncoder`) under the corpus's BIO constraints, and are fit as the
seed fits its simulated-world taggers (:func:`~crfhead.theory.experiments.fit_lbfgs`: float64, full
batch, L-BFGS, ``λ = 1/n``): only the normalisation differs, global (:class:`~crfhead.heads.CRF`) or
local (:class:`~crfhead.heads.MEMM`), so any dependence of "the" on the continuation is the CRF's
global normalisation reaching back through the transitions.

* :func:`train_finance_taggers` fits both on the first ``train_docs`` documents of a corpus run;
* :func:`continuation_rows` tags each continuation with both and reads the focus token's marginals;
* :func:`fit_finance_hmm` counts an HMM on the same documents and vocabulary (the seed's third point:
  the HMM's reading of a polyseme, a company whose name is also its product line), and
  :func:`polyseme_rows` reads one word's marginals under the HMM, the CRF and the MEMM in each of
  several contexts.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.finance.generator import LABELS
from crfhead.data.sentence import Sentence
from crfhead.encoders.window import WordWindowEncoder
from crfhead.heads.base import ChainHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.schemes import split_label
from crfhead.theory.experiments import fit_window_model, memm_offsets
from crfhead.theory.window_data import encode, encode_tagged, word_vocab

__all__ = [
    "DEFAULT_ENDINGS",
    "DEFAULT_POLYSEME",
    "DEFAULT_POLYSEME_CONTEXTS",
    "DEFAULT_PREFIX",
    "SCHEME",
    "FinanceTaggers",
    "continuation_rows",
    "fit_finance_hmm",
    "polyseme_contexts",
    "polyseme_rows",
    "tag_counts",
    "train_finance_taggers",
]

SCHEME = "BIO"
"""The finance corpus's scheme: both taggers' constraints, and how a label's entity type is read."""

DEFAULT_PREFIX: tuple[str, ...] = tuple("solenne power guided to percent growth in the".split())
"""The seed's opening; its last token, "the", is the one whose tag depends on what follows."""

DEFAULT_ENDINGS: tuple[tuple[str, ...], ...] = (
    ("first", "quarter"),
    ("fiscal", "year"),
    ("same", "quarter", "last", "year"),
    ("thombon", "inverter"),
    ("company",),
)
"""Five continuations whose words occur in training run 0's first 30 documents: three DATEs (the seed's
"first quarter" and two of ours), a PRODUCT and "the company" (``O``). The seed's "prior year" and
"kestrel platform" cannot be used: neither "prior" nor "kestrel" occurs in our run's 30 documents."""

DEFAULT_POLYSEME = "thombon"
"""The seed's polyseme is "kestrel", a company that is also a product line; it never occurs in our run's
30 documents. "thombon" plays its part there: ``B-ORG`` 5 times (``thombon will host a conference
call``) and inside a PRODUCT 5 times (``the thombon inverter``), and it is the product of the
continuation "thombon inverter"."""


def polyseme_contexts(word: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Three invented sentences around ``word``, ``(name, tokens)``; two on the seed's opening.

    ``company``: ``word`` in the company's slot ("thombon guided to percent growth in the first
    quarter"); ``product``: in the product's ("solenne power guided to percent growth in the thombon
    inverter"); ``company after "the"``: "the thombon board approved the plan", where "the" usually
    opens a PRODUCT before a brand but the next word says the company's board.
    """
    return (
        ("company", (word, *DEFAULT_PREFIX[2:], "first", "quarter")),
        ("product", (*DEFAULT_PREFIX, word, "inverter")),
        ('company after "the"', ("the", word, "board", "approved", "the", "plan")),
    )


DEFAULT_POLYSEME_CONTEXTS = polyseme_contexts(DEFAULT_POLYSEME)
"""The contexts of :func:`polyseme_rows` for :data:`DEFAULT_POLYSEME`."""


@dataclass
class FinanceTaggers:
    """A CRF and a causal MEMM fit on the same finance training documents with the same features.

    Attributes:
        vocab: word → id for the training words seen at least ``min_count`` times (id 0 is the
            unknown word: the rarer training words, so that its weights are learned, and any word
            never seen).
        labels: the BIO labels, index = tag id.
        crf: ``(encoder, head)`` of the CRF.
        memm: ``(encoder, head)`` of the MEMM.
        train: the training sentences.
        info: JSON-able facts of the fit (sizes, offsets, ``λ``, L-BFGS iterations).
    """

    vocab: dict[str, int]
    labels: list[str]
    crf: tuple[WordWindowEncoder, CRF]
    memm: tuple[WordWindowEncoder, MEMM]
    train: list[Sentence] = field(repr=False)
    info: dict[str, Any]


def train_finance_taggers(
    train_docs: int = 30,
    seed: int = 0,
    offsets: Sequence[int] = memm_offsets(0),
    min_count: int = 2,
    *,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> FinanceTaggers:
    """Fit the CRF and the causal MEMM on the first ``train_docs`` documents of finance run ``seed``.

    Deterministic (zero start, full-batch L-BFGS, float64, one intra-op thread during the fit).

    Args:
        train_docs: training documents.
        seed: the corpus run.
        offsets: the word window both taggers read (default: two words to the left and the current
            word; keep ``max(offsets) <= 0`` for the MEMM to be causal).
        min_count: training words seen fewer times share the unknown word's id 0.
        tol: L-BFGS gradient-norm target.
        max_iter: L-BFGS iteration cap.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        corpus = FinanceCorpus(seed=seed, train_docs=train_docs, dev_docs=1, test_seed=seed + 1)
        train = corpus.load()["train"]
        vocab = word_vocab((s.tokens for s in train), min_count)
        labels = list(LABELS)
        words, tags, mask = encode_tagged(train, vocab, labels)
        l2 = 1.0 / len(train)
        V, K = len(vocab) + 1, len(labels)
        crf_enc, crf = WordWindowEncoder(K, V, offsets), CRF(K, labels=labels, scheme=SCHEME)
        memm_enc, memm = WordWindowEncoder(K, V, offsets), MEMM(K, labels=labels, scheme=SCHEME)
        fit = functools.partial(fit_window_model, tol=tol, max_iter=max_iter)
        crf_iter = fit(crf_enc, crf, words, tags, l2, mask)
        memm_iter = fit(memm_enc, memm, words, tags, l2, mask)
    finally:
        torch.set_num_threads(threads)
    info: dict[str, Any] = {
        "corpus": f"FinanceCorpus(seed={seed}, train_docs={train_docs})",
        "train_docs": train_docs,
        "sentences": len(train),
        "tokens": int(mask.sum()),
        "vocab_size": V,
        "min_count": min_count,
        "offsets": list(offsets),
        "l2": l2,
        "tol": tol,
        "crf_iterations": crf_iter,
        "memm_iterations": memm_iter,
    }
    return FinanceTaggers(vocab, labels, (crf_enc, crf), (memm_enc, memm), train, info)


def _bigram_count(train: Sequence[Sentence], words: Sequence[str]) -> int:
    """How often ``the`` followed by ``words`` occurs in ``train``."""
    pattern = ["the", *words]
    n = len(pattern)
    return sum(s.tokens[i : i + n] == pattern for s in train for i in range(len(s.tokens) - n + 1))


def continuation_rows(
    taggers: FinanceTaggers,
    prefix: Sequence[str] = DEFAULT_PREFIX,
    endings: Sequence[Sequence[str]] = DEFAULT_ENDINGS,
    focus_label: str = "B-DATE",
) -> list[dict[str, Any]]:
    """Tag ``prefix + ending`` for every ending with both taggers; the focus is the prefix's last token.

    Returns:
        One row per ending: ``ending``, ``tokens``, ``count_in_training`` (occurrences of "the" +
        ending in training), ``unknown_tokens`` (positions read as the unknown word), and per model (``crf``, ``memm``): ``marginals`` ``(T, K)`` float64 as a
        tensor, ``viterbi`` (label strings) and ``focus_probability`` (the float64 marginal of
        ``focus_label`` at the focus token, unrounded).

    Raises:
        ValueError: an ending's token outside the vocabulary, or an unknown ``focus_label``.
    """
    if focus_label not in taggers.labels:
        raise ValueError(f"focus_label {focus_label!r} is not one of {taggers.labels}")
    k = taggers.labels.index(focus_label)
    focus = len(prefix) - 1
    rows: list[dict[str, Any]] = []
    for ending in endings:
        tokens = [*prefix, *ending]
        unseen = [w for w in ending if w not in taggers.vocab]
        if unseen:
            raise ValueError(f"ending tokens outside the training vocabulary: {unseen}")
        words, mask = encode([tokens], taggers.vocab)
        row: dict[str, Any] = {
            "ending": list(ending),
            "tokens": tokens,
            "count_in_training": _bigram_count(taggers.train, ending),
            "unknown_tokens": [i for i, w in enumerate(tokens) if w not in taggers.vocab],
        }
        models: dict[str, tuple[WordWindowEncoder, ChainHead]] = {
            "crf": taggers.crf,
            "memm": taggers.memm,
        }
        for name, (enc, head) in models.items():
            with torch.no_grad():
                em = enc.emissions(words, mask)
                gamma = head.marginals(em, mask)[0]
                path = head.decode(em, mask)[0]
            row[name] = {
                "marginals": gamma,
                "viterbi": [taggers.labels[int(t)] for t in path],
                "focus_probability": float(gamma[focus, k]),
            }
        rows.append(row)
    return rows


def tag_counts(train: Sequence[Sentence], word: str) -> dict[str, int]:
    """How often ``word`` carries each gold tag in ``train`` (tags it never carries left out)."""
    counts = Counter(
        t for s in train for w, t in zip(s.tokens, s.tags or [], strict=True) if w == word
    )
    return dict(sorted(counts.items()))


def fit_finance_hmm(
    taggers: FinanceTaggers,
    seed: int = 0,
    dev_docs: int = 20,
    alphas: Sequence[float] = (1.0, 0.1, 0.01),
) -> tuple[HMM, dict[str, Any]]:
    """An HMM counted on the taggers' training sentences, reading words through the same vocabulary.

    Id 0 (the training words seen fewer than ``min_count`` times, and every unseen word) is one
    emission symbol, so the unknown word's emissions are those of the rare training words, as
    ``configs/finance/hmm.yaml`` does with its singletons. Add-α is chosen from ``alphas`` by the
    conditional log-loss of the next ``dev_docs`` documents of the same run (the config's validation
    split), under the corpus's BIO constraints and with an end state.

    Args:
        taggers: from :func:`train_finance_taggers` (its sentences and vocabulary are reused).
        seed: the corpus run ``taggers`` was fit on.
        dev_docs: validation documents.
        alphas: the smoothing grid.

    Returns:
        ``(hmm, info)``: the fitted head (float64, ``alpha`` set) and JSON-able facts (``alpha``,
        ``alphas``, ``dev_docs``, ``dev_sentences``, ``dev_losses``: summed conditional log-loss per
        α).

    Raises:
        ValueError: ``seed`` is not the run the taggers were fit on.
    """
    train_docs = int(taggers.info["train_docs"])
    if taggers.info["corpus"] != f"FinanceCorpus(seed={seed}, train_docs={train_docs})":
        raise ValueError(f"the taggers were fit on {taggers.info['corpus']}, not on run {seed}")

    def tagged(sentences: Sequence[Sentence]) -> tuple[Tensor, Tensor, Tensor]:
        return encode_tagged(sentences, taggers.vocab, taggers.labels)

    corpus = FinanceCorpus(seed=seed, train_docs=train_docs, dev_docs=dev_docs, test_seed=seed + 1)
    dev = corpus.load()["dev"]
    hmm = HMM(
        len(taggers.labels),
        len(taggers.vocab) + 1,
        labels=taggers.labels,
        scheme=SCHEME,
        alphas=alphas,
        unknown_singletons=False,  # the vocabulary already maps rare words to id 0
        padding_index=None,  # id 0 is the unknown word, a symbol; padding is masked
    )
    hmm.fit(*tagged(taggers.train))
    losses = hmm.held_out_losses(*tagged(dev))
    alpha = hmm.choose(losses)
    hmm.eval()
    info: dict[str, Any] = {
        "alpha": alpha,
        "alphas": list(hmm.alphas),
        "dev_docs": dev_docs,
        "dev_sentences": len(dev),
        "dev_losses": [float(x) for x in losses],
    }
    return hmm, info


def polyseme_rows(
    taggers: FinanceTaggers,
    hmm: HMM,
    word: str = DEFAULT_POLYSEME,
    contexts: Sequence[tuple[str, Sequence[str]]] | None = None,
) -> list[dict[str, Any]]:
    """How the HMM, the CRF and the MEMM read ``word`` in each context (its first occurrence there).

    ``contexts`` defaults to :func:`polyseme_contexts` of ``word``; their other words may be unknown.

    Returns:
        One row per context: ``context`` (its name), ``tokens``, ``position``, ``unknown_tokens``, and
        per model (``hmm``, ``crf``, ``memm``): ``marginals`` ``(T, K)`` float64 tensor, ``viterbi``
        (labels), ``reading`` (the most probable label at ``position``), ``probability`` (its
        marginal) and ``entity_probabilities`` (entity type → marginal mass of its ``B-``/``I-`` tags
        at ``position``, and ``O``).

    Raises:
        ValueError: ``word`` is outside the vocabulary or missing from a context.
    """
    if word not in taggers.vocab:
        raise ValueError(f"{word!r} is not a training word seen {taggers.info['min_count']}+ times")
    models: dict[str, tuple[WordWindowEncoder | None, ChainHead]] = {
        "hmm": (None, hmm),
        "crf": taggers.crf,
        "memm": taggers.memm,
    }
    rows: list[dict[str, Any]] = []
    for name, context in polyseme_contexts(word) if contexts is None else contexts:
        tokens = list(context)
        if word not in tokens:
            raise ValueError(f"context {name!r} does not contain {word!r}: {tokens}")
        at = tokens.index(word)
        words, mask = encode([tokens], taggers.vocab)
        row: dict[str, Any] = {
            "context": name,
            "tokens": tokens,
            "position": at,
            "unknown_tokens": [i for i, w in enumerate(tokens) if w not in taggers.vocab],
        }
        for key, (enc, head) in models.items():
            with torch.no_grad():
                em = hmm.emit(words) if enc is None else enc.emissions(words, mask)
                gamma = head.marginals(em, mask)[0]
                path = head.decode(em, mask)[0]
            at_word = gamma[at]
            best = int(at_word.argmax())
            types: dict[str, float] = {}
            for k, label in enumerate(taggers.labels):
                kind = split_label(label, SCHEME)[1] or "O"
                types[kind] = types.get(kind, 0.0) + float(at_word[k])
            row[key] = {
                "marginals": gamma,
                "viterbi": [taggers.labels[int(t)] for t in path],
                "reading": taggers.labels[best],
                "probability": float(at_word[best]),
                "entity_probabilities": types,
            }
        rows.append(row)
    return rows

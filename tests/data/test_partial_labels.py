"""Partial labels in the data (issue 29): ``|`` and ``*`` cells, their errors (file:line),
``unknown_tags``, the collator's ``allowed`` against hand-built tensors, and the exactness of the
BIO -> BIOES/BIOUL conversion of label sets (against enumeration of every labelling)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
import torch

from crfhead.data.batching import PAD_LABEL, Collator
from crfhead.data.conll import CoNLLFormatError, read_conll
from crfhead.data.corpora import CoNLLCorpus, InMemoryCorpus
from crfhead.data.partial import ANY, convert_partial
from crfhead.data.sentence import LabelVocab, Sentence, gold_or_none
from crfhead.schemes import convert_tags, is_valid, labels_for

__all__: list[str] = []

TEXT = "John B-PER|B-ORG\nSmith I-PER\nsaid *\nhi O\n\nParis B-LOC\n"


def _write(tmp_path: Path, text: str, name: str = "a.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sets_and_any_are_read_into_allowed(tmp_path: Path) -> None:
    sentences, report = read_conll(_write(tmp_path, TEXT), warn=False)
    first, second = sentences
    assert first.allowed == [("B-PER", "B-ORG"), None, ANY, None]
    assert first.tags == ["O", "I-PER", "O", "O"]  # placeholders at the partial positions
    assert gold_or_none(first) == [None, "I-PER", None, "O"]
    assert second.allowed is None and not second.is_partial
    assert report.notes["partial sentences (not repaired)"] == 1
    vocab = LabelVocab.from_sentences(sentences, "BIO")
    assert "B-ORG" in vocab  # seen only inside a set


@pytest.mark.parametrize(
    ("cell", "needle"),
    [
        ("B-PER|", "empty member"),
        ("|", "empty member"),
        ("|B-PER", "empty member"),
        ("**", "'**'"),
        ("*|O", "cannot be part of a set"),
        ("B-PER|Q-X", "'Q-X'"),
    ],
)
def test_malformed_cells_name_file_and_line(tmp_path: Path, cell: str, needle: str) -> None:
    path = _write(tmp_path, f"a O\nb {cell}\n")
    with pytest.raises(CoNLLFormatError, match="line 2") as err:
        read_conll(path)
    assert needle in str(err.value) and "a.txt" in str(err.value)


def test_a_set_label_outside_a_known_vocabulary_names_sentence_and_token(tmp_path: Path) -> None:
    sentences, _ = read_conll(_write(tmp_path, "a B-PER|B-ORG\n"), warn=False)
    with pytest.raises(ValueError, match=r"a.txt:1, token 1: unknown tag 'B-ORG'"):
        Collator(LabelVocab.from_types(["PER"], "BIO"))(sentences)


def test_unknown_tags_become_any_label(tmp_path: Path) -> None:
    path = _write(tmp_path, "a B-PER\nb O\nc O\n\nd O\n")
    sentences, _ = read_conll(path, unknown_tags=["O"], warn=False)
    assert sentences[0].allowed == [None, ANY, ANY]
    assert sentences[1].allowed == [ANY]
    corpus = CoNLLCorpus(str(path), str(path), str(path), unknown_tags=["O"])
    assert corpus.load()["train"][0].allowed == [None, ANY, ANY]
    memory = InMemoryCorpus(
        {k: [Sentence(["x", "y"], ["B-PER", "O"])] for k in ("train", "dev", "test")},
        unknown_tags=["O"],
    )
    assert memory.load()["dev"][0].allowed == [None, ANY]


def test_collator_allowed_against_hand_built_tensors() -> None:
    vocab = LabelVocab(["O", "B-PER", "I-PER", "B-ORG", "I-ORG"], "BIO")
    s1 = Sentence(["a", "b", "c"], ["O", "I-PER", "O"], allowed=[("B-PER", "B-ORG"), None, ANY])
    s2 = Sentence(["d"], ["B-ORG"])
    batch = Collator(vocab)([s1, s2])
    P = PAD_LABEL
    assert batch.tags is not None and batch.tags.tolist() == [[P, 2, P], [3, P, P]]
    expected = torch.tensor(
        [
            [[0, 1, 0, 1, 0], [0, 0, 1, 0, 0], [1, 1, 1, 1, 1]],
            [[0, 0, 0, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]],
        ],
        dtype=torch.bool,
    )
    assert batch.allowed is not None and torch.equal(batch.allowed, expected)
    assert batch.to("cpu").allowed is not None
    # A fully labelled batch pays nothing.
    assert Collator(vocab)([s2]).allowed is None


def _consistent(
    labels: list[str], sets: list[set[str] | None], scheme: str
) -> set[tuple[str, ...]]:
    """Every valid labelling of ``scheme`` whose labels lie in ``sets`` (None: any)."""
    return {
        path
        for path in itertools.product(labels, repeat=len(sets))
        if all(a is None or y in a for y, a in zip(path, sets, strict=True))
        and is_valid(list(path), scheme)
    }


@pytest.mark.parametrize("target", ["BIOES", "BIOUL"])
def test_bio_to_bioes_preimage_is_exact(target: str) -> None:
    rng = random.Random(29)
    bio = labels_for(["A", "B"], "BIO")
    out = labels_for(["A", "B"], target)
    for _ in range(60):
        n = rng.randint(1, 4)
        tags, allowed = [], []
        for _ in range(n):
            r = rng.random()
            if r < 0.4:
                tags.append(rng.choice(bio))
                allowed.append(None)
            elif r < 0.6:
                tags.append("O")
                allowed.append(ANY)
            else:
                tags.append("O")
                allowed.append(tuple(rng.sample(bio, rng.randint(1, 3))))
        if all(a is None for a in allowed):
            continue  # a fully labelled sentence converts (and repairs) through its spans
        s = Sentence([str(i) for i in range(n)], list(tags), allowed=list(allowed))
        sets_bio = [
            {t} if a is None else (None if a == ANY else set(a))
            for t, a in zip(tags, allowed, strict=True)
        ]
        want = {
            tuple(convert_tags(list(p), "BIO", target)) for p in _consistent(bio, sets_bio, "BIO")
        }
        convert_partial(s, "BIO", target)
        assert s.tags is not None
        new_allowed = s.allowed or [None] * n
        sets_out = [
            {t} if a is None else (None if a == ANY else set(a))
            for t, a in zip(s.tags, new_allowed, strict=True)
        ]
        assert _consistent(out, sets_out, target) == want, (tags, allowed, s.allowed)


def test_other_conversions_of_partial_sentences_are_refused() -> None:
    s = Sentence(["a"], ["O"], allowed=[ANY], id="f.txt:3")
    with pytest.raises(ValueError, match=r"f.txt:3 has partial labels.*BIOES to BIO"):
        convert_partial(s, "BIOES", "BIO")
    full = Sentence(["a", "b"], ["B-X", "I-X"])
    convert_partial(full, "BIO", "BIOES")
    assert full.tags == ["B-X", "E-X"] and full.allowed is None


def test_out_scheme_converts_sets_when_reading(tmp_path: Path) -> None:
    sentences, _ = read_conll(_write(tmp_path, TEXT), out_scheme="BIOES", warn=False)
    assert sentences[0].allowed == [("B-PER", "S-ORG"), ("E-PER", "I-PER"), ANY, None]
    assert sentences[1].tags == ["S-LOC"]


def test_finance_corpus_unknown_tags() -> None:
    from crfhead.data.corpora import FinanceCorpus

    plain = FinanceCorpus(train_docs=1, dev_docs=1, test_docs=1).load()["train"]
    marked = FinanceCorpus(train_docs=1, dev_docs=1, test_docs=1, unknown_tags=["O"]).load()
    n_o = sum(t == "O" for s in plain for t in s.tags or [])
    n_any = sum(a == ANY for s in marked["train"] for a in s.allowed or [])
    assert n_o > 0 and n_any == n_o

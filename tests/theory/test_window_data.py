"""Tagged sentences as window-tagger tensors, and the one L-BFGS fit of a built window tagger."""

from __future__ import annotations

import pytest
import torch

from crfhead.data.sentence import Sentence
from crfhead.encoders.window import WordWindowEncoder
from crfhead.heads.crf import CRF
from crfhead.heads.memm import MEMM
from crfhead.theory.experiments import fit_crf, fit_window_model
from crfhead.theory.window_data import encode, encode_tagged, word_vocab


def test_word_vocab_keeps_frequent_words_alphabetically_from_one() -> None:
    vocab = word_vocab([["b", "a", "c"], ["b", "a"], ["d"]], min_count=2)
    assert vocab == {"a": 1, "b": 2}
    assert word_vocab([["b", "a"]], min_count=1) == {"a": 1, "b": 2}


def test_encode_pads_with_the_unknown_id_outside_the_mask() -> None:
    words, mask = encode([["a", "zz", "b"], ["b"]], {"a": 1, "b": 2})
    assert words.tolist() == [[1, 0, 2], [2, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    for bad in ([], [["a"], []]):
        with pytest.raises(ValueError, match="none of them empty"):
            encode(bad, {"a": 1})


def test_encode_tagged_reads_tags_by_index_and_words_lowercased_on_request() -> None:
    sentences = [
        Sentence(["Paris", "is"], tags=["B-LOC", "O"]),
        Sentence(["paris"], tags=["B-LOC"]),
    ]
    vocab = {"paris": 1}
    words, tags, mask = encode_tagged(sentences, vocab, ["O", "B-LOC"], lowercase=True)
    assert words.tolist() == [[1, 0], [1, 0]] and tags.tolist() == [[1, 0], [1, 0]]
    assert mask.tolist() == [[True, True], [True, False]]
    words, _, _ = encode_tagged(sentences, vocab, ["O", "B-LOC"])
    assert words.tolist() == [[0, 0], [1, 0]]
    with pytest.raises(KeyError):
        encode_tagged(sentences, vocab, ["O"])


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 4, (12, 5), generator=g), torch.randint(0, 3, (12, 5), generator=g)


def test_fit_window_model_is_the_fit_of_fit_window_head() -> None:
    words, tags = _data()
    enc, crf = fit_crf(words, tags, (0,), 3, 4)
    enc2, crf2 = WordWindowEncoder(3, 4, (0,)), CRF(3)
    iterations = fit_window_model(enc2, crf2, words, tags, 1.0 / 12)
    assert iterations > 0 and not enc2.training and not crf2.training
    fitted = [*enc2.parameters(), *crf2.parameters()]
    for a, b in zip([*enc.parameters(), *crf.parameters()], fitted, strict=True):
        assert b.dtype == torch.float64 and torch.equal(a, b)


@pytest.mark.parametrize("head_class", [CRF, MEMM])
def test_a_full_mask_fits_as_no_mask(head_class: type[CRF] | type[MEMM]) -> None:
    words, tags = _data()
    fits = []
    for mask in (None, torch.ones_like(words, dtype=torch.bool)):
        enc, head = WordWindowEncoder(3, 4, (-1, 0)), head_class(3)
        fit_window_model(enc, head, words, tags, 0.1, mask, tol=1e-6)
        fits.append(torch.cat([p.flatten() for m in (enc, head) for p in m.parameters()]))
    torch.testing.assert_close(fits[0], fits[1], rtol=0, atol=1e-7)

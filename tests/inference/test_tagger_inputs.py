"""What ``TextTagger.tag``/``annotate`` take: any iterable of texts (read lazily, batch by batch, by
``iter_tag``/``iter_annotate``), and what they refuse, by index and type.

The tagger is an untrained indicator CRF with random weights (seconds; see ``test_documents``).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator

import pytest
import torch

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.higher_order import FactorDecoder
from crfhead.inference import Tagged, TextTagger, scoring, text_tagger
from crfhead.inference.text_tagger import BATCH_SIZE
from crfhead.model.tagger import Tagger

TEXTS = [
    "said aiko ridora",
    "Solenne Power guided to 4 percent growth. Said CEO Mara Voss.",
    "",
    "2025 3.5",  # no letter token: no token at all
    "the gruler platform in march",
]


@pytest.fixture(scope="module")
def tagger() -> TextTagger:
    torch.manual_seed(0)
    dm = TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=1, test_docs=1))
    model = Tagger.build(dm.vocabs)
    with torch.no_grad():
        model.encoder.weight.normal_(0.0, 1.5)
    return TextTagger(model, dm.vocabs, {})


class Recorder:
    """A generator of texts that records how many it has handed out."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.taken = texts, 0

    def __iter__(self) -> Iterator[str]:
        for t in self.texts:
            self.taken += 1
            yield t


def test_any_iterable_gives_what_a_list_gives(tagger: TextTagger) -> None:
    want = tagger.tag(TEXTS)
    assert len(want) == len(TEXTS) and want[2] == [] and want[3] == []
    assert tagger.tag(t for t in TEXTS) == want
    assert tagger.tag(tuple(TEXTS)) == want
    assert tagger.tag(io.StringIO("\n".join(TEXTS))) == [
        tagger.tag(line) for line in io.StringIO("\n".join(TEXTS))
    ]
    assert list(tagger.iter_tag(iter(TEXTS))) == want
    assert [t.entities for t in tagger.annotate(t for t in TEXTS)] == want
    # A generator of one text gives one list (it gave [] before).
    assert tagger.tag(t for t in ["said aiko ridora"]) == [tagger.tag("said aiko ridora")]
    assert (
        tagger.annotate(iter([["said", "aiko"]]))[0].tags
        == tagger.annotate([["said", "aiko"]])[0].tags
    )


def test_batching_never_changes_a_result(tagger: TextTagger) -> None:
    many = TEXTS * 7
    one = tagger.annotate(many, batch_size=1)
    assert tagger.annotate(many, batch_size=3) == one
    assert tagger.annotate(many, batch_size=64) == one
    assert one[: len(TEXTS)] == [tagger.annotate([t])[0] for t in TEXTS]


def test_a_stream_is_read_a_batch_at_a_time(tagger: TextTagger) -> None:
    one_sentence = ["said aiko ridora", "marek novak said", "the first quarter", "a b"] * 5
    source = Recorder(one_sentence)
    stream = tagger.iter_tag(source, batch_size=2)
    assert source.taken == 0  # nothing read before the first result is asked for
    first = next(stream)
    assert source.taken == 2  # one batch: two one-sentence texts
    second = next(stream)
    assert source.taken == 2  # the second result was decoded with the first
    next(stream)
    assert source.taken == 4
    assert [first, second] == tagger.tag(one_sentence[:2])
    # A text of several sentences makes several chains: it fills a batch alone.
    source = Recorder(["One. Two. Three.", "said aiko", "x"])
    stream = tagger.iter_tag(source, batch_size=3)
    next(stream)
    assert source.taken == 1


def test_the_default_batch_is_the_encoders_own(
    tagger: TextTagger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batch_size=None reads TextTagger.batch_size: the encoder's tag_batch_size (the indicator
    # encoder's 256), else BATCH_SIZE; what a stream reads and how many chains a batch holds.
    assert tagger.batch_size == 256 == type(tagger.model.encoder).tag_batch_size
    one_sentence = ["said aiko ridora", "marek novak said"] * 200
    source = Recorder(one_sentence)
    stream = tagger.iter_tag(source)
    next(stream)
    assert source.taken == 256
    monkeypatch.setattr(type(tagger.model.encoder), "tag_batch_size", 3, raising=True)
    assert tagger.batch_size == 3
    source = Recorder(one_sentence)
    next(tagger.iter_tag(source))
    assert source.taken == 3
    monkeypatch.delattr(type(tagger.model.encoder), "tag_batch_size")
    assert tagger.batch_size == BATCH_SIZE == 64
    source = Recorder(one_sentence)
    next(tagger.iter_tag(source))
    assert source.taken == BATCH_SIZE
    assert tagger.tag(one_sentence[:5]) == tagger.tag(one_sentence[:5], batch_size=1)


def test_the_default_batch_holds_at_most_batch_tokens(
    tagger: TextTagger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With batch_size=None a batch of long chains is cut to BATCH_TOKENS padded tokens (chains
    # times the batch's longest); an explicit batch_size is taken as given; results never change.
    texts = ["said aiko ridora and marek novak of the gruler platform"] * 9  # 10 tokens each
    texts += ["said aiko"] * 30
    want = tagger.annotate(texts, batch_size=1)
    sizes: list[tuple[int, int]] = []
    decode = tagger._decode

    def recording(rows: list, *args: object, **kwargs: object) -> object:
        sizes.append((len(rows), max(len(r) for r in rows)))
        return decode(rows, *args, **kwargs)

    monkeypatch.setattr(tagger, "_decode", recording)
    monkeypatch.setattr(text_tagger, "BATCH_TOKENS", 25)
    assert tagger.annotate(texts) == want
    assert sizes[:5] == [(2, 10)] * 5  # 25 // 10 chains a batch led by a chain of 10 tokens
    assert sizes[5:] == [(12, 2), (12, 2), (5, 2)]  # then 25 // 2 chains of 2 tokens
    assert sum(n for n, _ in sizes) == len(texts)
    sizes.clear()
    assert tagger.annotate(texts, batch_size=8) == want
    assert [n for n, _ in sizes] == [8, 8, 8, 8, 7]


def test_scoring_batches_by_the_models_size_and_batch_tokens(
    tagger: TextTagger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # score_sentences cuts labelled sentences in order: at most batch_size each and, by default,
    # at most BATCH_TOKENS padded tokens (a longer sentence alone); the report never changes.
    assert scoring._chunks([3, 3, 3, 3, 3], 2, None) == [[0, 1], [2, 3], [4]]
    assert scoring._chunks([2, 2, 5, 2, 9, 1], 10, 10) == [[0, 1], [2, 3], [4], [5]]
    assert scoring._chunks([], 4, 8) == []
    sentences = FinanceCorpus(train_docs=1, dev_docs=1, test_docs=2).load()["test"]
    want = scoring.score_sentences(tagger, sentences, batch_size=1).report
    monkeypatch.setattr(text_tagger, "BATCH_TOKENS", 30)
    sizes: list[tuple[int, int]] = []
    collate = tagger.collate

    def recording(chunk: list) -> object:
        sizes.append((len(chunk), max(len(s.tokens) for s in chunk)))
        return collate(chunk)

    monkeypatch.setattr(tagger, "collate", recording)
    assert scoring.score_sentences(tagger, sentences).report == pytest.approx(want)
    assert sum(n for n, _ in sizes) == len(sentences)
    assert all(n * longest <= 30 or n == 1 for n, longest in sizes)
    assert max(n for n, _ in sizes) > 1


def test_an_unbounded_stream_yields_in_order(tagger: TextTagger) -> None:
    endless = itertools.cycle(TEXTS)
    got = list(itertools.islice(tagger.iter_annotate(endless, batch_size=4), 12))
    assert [t.text for t in got] == [TEXTS[i % len(TEXTS)] for i in range(12)]
    assert all(isinstance(t, Tagged) for t in got)


def test_a_text_with_no_tokens_is_an_empty_tagged(tagger: TextTagger) -> None:
    for text in ["", "   \n", "2025 3.5 !!"]:
        assert tagger.annotate([text]) == [Tagged(text, [], [], [])]


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (None, r"^texts is None: give a str, or an iterable of str"),
        (42, r"^texts is an int: give a str"),
        (b"said aiko", r"^texts is a bytes: give a str"),
        (["fine", None], r"^texts\[1\] is None: tag\(\) takes str$"),
        (["a", "b", "c", 5], r"^texts\[3\] is an int: tag\(\) takes str$"),
        (["fine", b"bytes"], r"^texts\[1\] is a bytes: tag\(\) takes str$"),
        (["fine", ["a", "list"]], r"^texts\[1\] is a list: tag\(\) takes str; use annotate\(\)"),
    ],
)
def test_tag_refuses_what_is_not_text_naming_index_and_type(
    tagger: TextTagger, texts: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        tagger.tag(texts)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (None, r"^texts is None"),
        ("said aiko", r"^annotate\(\) takes an iterable of texts, got one str \('said aiko'\)"),
        (
            ["a", "b", "c", None],
            r"^texts\[3\] is None: cannot tag it; give a str or a list of str$",
        ),
        ([b"raw"], r"^texts\[0\] is a bytes: cannot tag it.*decode bytes first"),
        ([3.5], r"^texts\[0\] is a float: cannot tag it"),
        ([["ok", 7]], r"^texts\[0\]\[1\] is an int: a pre-tokenised text must be a list of str"),
    ],
)
def test_annotate_refuses_what_is_not_text_naming_index_and_type(
    tagger: TextTagger, items: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        tagger.annotate(items)  # type: ignore[arg-type]


def test_a_stream_raises_when_it_reaches_the_bad_item(tagger: TextTagger) -> None:
    stream = tagger.iter_tag(iter(["said aiko", None, "x"]), batch_size=1)  # type: ignore[list-item]
    assert next(stream) == tagger.tag("said aiko")
    with pytest.raises(ValueError, match=r"texts\[1\] is None"):
        next(stream)
    # The options are checked at once, before anything is read.
    source = Recorder(TEXTS)
    with pytest.raises(ValueError, match="split must be one of"):
        tagger.iter_tag(source, split="paragraphs")
    assert source.taken == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"split": "paragraphs"},
            r"split must be one of \('sentences', 'none'\), got 'paragraphs'",
        ),
        ({"max_length": 0}, "max_length must be an int >= 1, got 0"),
        (
            {"max_length": 8, "overlap": 5},
            r"overlap must be an int in \[0, max_length // 2\] = \[0, 4\], got 5",
        ),
        ({"batch_size": 0}, "batch_size must be an int >= 1 or None, got 0"),
        ({"batch_size": True}, "batch_size must be an int >= 1 or None, got True"),
        ({"batch_size": 2.0}, r"batch_size must be an int >= 1 or None, got 2\.0"),
        ({"k": 0}, "k must be an int >= 1, got 0"),
    ],
)
def test_each_bad_option_is_named(
    tagger: TextTagger, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        tagger.annotate(TEXTS, **options)  # type: ignore[arg-type]


def test_a_group_decoder_takes_texts_whole(tagger: TextTagger) -> None:
    assert tagger.scheme is not None
    decoder = FactorDecoder(tagger.labels, tagger.scheme, grid=[3.0], scale=3.0)
    tagger.model.decoder = decoder
    try:
        texts = ["Mara Voss said. Solenne Power grew.", "Mara Voss left."]
        joint = tagger.annotate(texts, group="all")
        assert [t.certified for t in joint] in ([True, True], [False, False])
        assert joint[0].tokens == tagger.annotate(texts)[0].tokens
        with pytest.raises(
            ValueError,
            match="split='sentences' with group=: a group decoder decodes each text whole",
        ):
            tagger.annotate(texts, group="all", split="sentences")
        with pytest.raises(ValueError, match=r"texts\[0\] has 6 tokens > max_length=4"):
            tagger.annotate(texts, group="all", max_length=4)
        with pytest.raises(ValueError, match="marginals= and k= are the chain's"):
            tagger.annotate(texts, group="all", marginals=True)
        # Each text alone (no group=): the decoder decodes each chain, sentences split as usual.
        alone = tagger.annotate(texts)
        assert [len(t.tags) for t in alone] == [6, 3]
    finally:
        tagger.model.decoder = None

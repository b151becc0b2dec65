"""Readers, vocabularies, batching and the datasets round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from crfhead.data import (
    Collator,
    CoNLLFormatError,
    FeatureTemplates,
    LabelVocab,
    Sentence,
    Vocab,
    data_dir,
    data_path,
    from_dataset,
    read_conll,
    to_dataset,
    word_shape,
    write_conll,
)
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.schemes import is_valid

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "conll"


def test_conll_reader_keeps_documents_columns_and_repairs() -> None:
    with pytest.warns(UserWarning, match="1 sentences repaired"):
        sents, report = read_conll(FIX / "good.txt", columns={"pos": 1, "chunk": 2})
    assert [s.tokens for s in sents] == [
        ["EU", "rejects", "German"],
        ["Peter", "Blackburn"],
        ["the", "European", "Commission"],
    ]
    assert [s.doc_id for s in sents] == ["good:0", "good:0", "good:1"]
    assert sents[0].columns == {"pos": ["NNP", "VBZ", "JJ"], "chunk": ["B-NP", "B-VP", "B-NP"]}
    assert sents[0].id == "good.txt:3"
    # O I-ORG I-ORG is invalid BIO: repaired to O B-ORG I-ORG, counted, not lost.
    assert sents[2].tags == ["O", "B-ORG", "I-ORG"]
    assert report.repaired_sentences == 1 and report.repaired_tags == 1
    assert report.documents == 2 and report.sentences == 3 and report.tokens == 8
    assert report.skipped_empty == 1  # the double blank line
    assert "repaired" in report.summary()


def test_conll_reader_converts_schemes() -> None:
    sents, _ = read_conll(FIX / "good.txt", out_scheme="BIOES", warn=False)
    assert sents[1].tags == ["B-PER", "E-PER"]
    assert sents[0].tags == ["S-ORG", "O", "S-MISC"]
    assert all(is_valid(s.tags or [], "BIOES") for s in sents)


def test_conll_reader_reads_tabs_and_crlf() -> None:
    sents, _ = read_conll(FIX / "tabs.tsv", separator="\t")
    assert [s.tokens for s in sents] == [["@paul", "It"], ["New", "York"]]
    assert sents[1].tags == ["B-location", "I-location"]


def test_error_conll_short_line_names_file_and_line() -> None:
    with pytest.raises(
        CoNLLFormatError, match=r"short_line\.txt, line 2: expected 4 columns as on line 1, got 2"
    ):
        read_conll(FIX / "short_line.txt", columns={"pos": 1, "chunk": 2})
    with pytest.raises(
        CoNLLFormatError, match=r"short_line\.txt, line 1: expected at least 6 columns, got 4"
    ):
        read_conll(FIX / "short_line.txt", columns={"pos": 5})


def test_error_conll_unknown_tag_names_tag_file_and_line() -> None:
    with pytest.raises(
        CoNLLFormatError,
        match=r"bad_tag\.txt, line 2: label 'X-FOO' is not valid in the BIO scheme",
    ):
        read_conll(FIX / "bad_tag.txt")


def test_error_conll_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"CoNLL file not found: .*nope\.txt"):
        read_conll(tmp_path / "nope.txt")


def test_conll_write_read_round_trip(tmp_path: Path) -> None:
    sents, _ = read_conll(FIX / "good.txt", columns={"pos": 1}, warn=False)
    write_conll(sents, tmp_path / "out.txt", columns=["pos"])
    back, report = read_conll(tmp_path / "out.txt", columns={"pos": 1}, warn=False)
    assert [(s.tokens, s.tags, s.columns) for s in back] == [
        (s.tokens, s.tags, s.columns) for s in sents
    ]
    assert report.documents == 2 and report.repaired_sentences == 0


def test_error_write_conll_token_with_space(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be written to a column file"):
        write_conll([Sentence(["new york"], ["O"], id="s1")], tmp_path / "x.txt")


def test_sentence_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="has 2 tokens but 1 tags"):
        Sentence(["a", "b"], ["O"])


@pytest.mark.parametrize(
    ("folder", "files", "counts", "kw"),
    [
        ("conll2003", ["train.txt", "valid.txt", "test.txt"], [14041, 3250, 3453], {}),
        (
            "wnut17",
            ["wnut17train.conll", "emerging.dev.conll", "emerging.test.annotated"],
            [3394, 1009, 1287],
            {"separator": "\t"},
        ),
    ],
)
def test_shared_corpora_read_unchanged(
    folder: str, files: list[str], counts: list[int], kw: dict[str, str]
) -> None:
    if not (data_dir() / folder).is_dir():
        pytest.skip(f"shared data not found under {data_dir()}")
    for name, count in zip(files, counts, strict=True):
        sents, report = read_conll(data_path(folder, name), warn=False, **kw)  # type: ignore[arg-type]
        assert len(sents) == count, (name, report.summary())
        assert all(is_valid(s.tags or [], "BIO") for s in sents)


def test_error_data_path_names_missing_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match=r"msm2013.*does not exist.*set CRFHEAD_DATA"):
        data_path("msm2013", "x.tsv")


# ----------------------------------------------------------------------------- vocabularies


def test_label_vocab_round_trip_and_unknown_tag() -> None:
    vocab = LabelVocab.from_types(["PER", "ORG"], "BIO")
    assert vocab.labels == ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
    assert vocab.encode(["B-ORG", "O"]) == [3, 0]
    assert vocab.decode([3, 0, -1]) == ["B-ORG", "O"]
    assert LabelVocab.from_dict(vocab.to_dict()) == vocab
    with pytest.raises(ValueError, match="unknown tag 'B-LOC'"):
        vocab.encode(["B-LOC"])
    sents = [Sentence(["a", "b"], ["B-ORG", "B-PER"])]
    assert LabelVocab.from_sentences(sents, "BIOES").labels[:5] == [
        "O",
        "B-ORG",
        "I-ORG",
        "E-ORG",
        "S-ORG",
    ]


def test_error_label_vocab_duplicates_and_foreign_labels() -> None:
    with pytest.raises(ValueError, match="duplicate labels"):
        LabelVocab(["O", "O"], "BIO")
    with pytest.raises(ValueError, match="label 'S-PER' is not valid in the BIO scheme"):
        LabelVocab(["O", "S-PER"], "BIO")


def test_vocab_counts_lowercases_and_round_trips() -> None:
    vocab = Vocab.build(["The", "the", "cat", "dog", "dog", "dog"], min_count=2, lower=True)
    assert vocab.itos == ["<pad>", "<unk>", "dog", "the"]  # most frequent first
    assert vocab.encode(["THE", "cat"]) == [3, 1]
    assert Vocab.from_dict(vocab.to_dict()).itos == vocab.itos


def test_feature_templates() -> None:
    assert (
        word_shape("Kestrel") == "Xx" and word_shape("Q3") == "Xd" and word_shape("$12.5") == "$d.d"
    )
    feats = FeatureTemplates()(["solenne", "power", "guided"])
    assert feats[0] == [
        "bias",
        "w=solenne",
        "p3=sol",
        "s3=nne",
        "sh=x",
        "w-2=<s>",
        "w-1=<s>",
        "w+1=power",
        "w+2=guided",
    ]
    assert "w-1=power" in feats[2] and "w+1=</s>" in feats[2]
    with pytest.raises(ValueError, match="unknown feature templates"):
        FeatureTemplates(["word", "gazetteer"])


def test_collator_pads_and_encodes() -> None:
    sents = [
        Sentence(["solenne", "power", "rose"], ["B-ORG", "I-ORG", "O"]),
        Sentence(["kestrel"], ["B-ORG"]),
    ]
    labels = LabelVocab.from_types(["ORG"], "BIO")
    words = Vocab.build(w for s in sents for w in s.tokens)
    chars = Vocab.build(c for s in sents for w in s.tokens for c in w)
    templates = FeatureTemplates(["bias", "word"])
    batch = Collator(labels, words, chars, (templates, templates.build_vocab(sents)))(sents)
    assert batch.mask.tolist() == [[True, True, True], [True, False, False]]
    assert batch.tags is not None and batch.tags.tolist() == [[1, 2, 0], [1, -100, -100]]
    assert batch.words is not None and batch.words[1].tolist() == [words.id("kestrel"), 0, 0]
    assert batch.chars is not None and batch.chars.shape == (2, 3, 7)
    assert batch.chars[1, 0, :7].tolist() == chars.encode("kestrel")
    assert batch.features is not None and batch.features.shape == (2, 3, 2)
    assert (batch.features[1, 1:] == 0).all()
    # Unseen features are id 0 (ignored by the indicator encoder).
    unseen = Collator(labels, features=(templates, templates.build_vocab(sents)))(
        [Sentence(["zzz"], ["O"])]
    )
    assert unseen.features is not None and unseen.features[0, 0, 1].item() == 0
    assert batch.to("cpu").mask.dtype == torch.bool


def test_collator_without_tags_gives_none() -> None:
    batch = Collator(LabelVocab.from_types(["ORG"], "BIO"))([Sentence(["a"])])
    assert batch.tags is None


def test_datasets_round_trip() -> None:
    sents, _ = read_conll(FIX / "good.txt", columns={"pos": 1}, warn=False)
    sents.append(Sentence(["unlabelled", "text"]))
    dataset = to_dataset(sents)
    assert dataset.num_rows == 4 and "pos" in dataset.column_names
    upper = dataset.map(lambda row: {"tokens": [t.upper() for t in row["tokens"]]})
    back = from_dataset(upper)
    assert back[0].tokens == ["EU", "REJECTS", "GERMAN"]
    assert [(s.tags, s.doc_id, s.id) for s in back] == [(s.tags, s.doc_id, s.id) for s in sents]
    assert back[0].columns == {"pos": ["NNP", "VBZ", "JJ"]}
    assert back[3].tags is None and back[3].columns == {}


def test_a_corpus_file_missing_under_the_data_root_says_how_to_set_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crfhead.data.corpora import CoNLLCorpus

    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"nope/train\.txt does not exist.*CRFHEAD_DATA"):
        CoNLLCorpus("nope/train.txt", "nope/dev.txt", "nope/test.txt").load()


def test_data_module_builds_only_the_vocabularies_of_the_needed_fields() -> None:
    corpus = FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1)
    every = TaggingDataModule(corpus=corpus)
    assert {"words", "chars", "templates", "features"} <= set(every.vocabs)
    bilstm = TaggingDataModule(corpus=corpus, needs=["words", "chars"])
    assert "features" not in bilstm.vocabs and "templates" not in bilstm.vocabs
    assert bilstm.vocabs["words"] == every.vocabs["words"]
    assert bilstm.vocabs["chars"] == every.vocabs["chars"]
    transformer = TaggingDataModule(corpus=corpus, needs=["sentences"])
    assert set(transformer.vocabs) == {"labels", "seen_words", "tokenizer"}
    indicator = TaggingDataModule(corpus=corpus, needs=["features"])
    assert indicator.vocabs["features"] == every.vocabs["features"]
    assert "words" not in indicator.vocabs and "chars" not in indicator.vocabs
    batch = next(iter(indicator.train_dataloader()))
    assert batch.features is not None and batch.words is None and batch.chars is None


def test_error_set_needs_asks_for_a_vocabulary_not_built() -> None:
    dm = TaggingDataModule(
        corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1), needs=["words"]
    )
    with pytest.raises(ValueError, match=r"reads the batch fields \['features'\], whose vocab"):
        dm.set_needs(frozenset({"words", "features"}))


def test_loader_workers_are_kept_across_epochs() -> None:
    corpus = FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1)
    assert not TaggingDataModule(corpus=corpus).train_dataloader().persistent_workers
    dm = TaggingDataModule(corpus=corpus, num_workers=1)
    for loader in (dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()):
        assert loader.persistent_workers and loader.num_workers == 1


def _collate_one_by_one(collator: Collator, sents: list[Sentence]) -> dict[str, torch.Tensor]:
    """The oracle: every field filled sentence by sentence, word by word."""
    assert collator.words is not None and collator.chars is not None
    assert collator.labels is not None
    B, T = len(sents), max((len(s) for s in sents), default=0)
    C = max((min(len(w), collator.max_word_len) for s in sents for w in s.tokens), default=1)
    out = {
        "mask": torch.zeros(B, T, dtype=torch.bool),
        "words": torch.zeros(B, T, dtype=torch.long),
        "chars": torch.zeros(B, T, max(C, 1), dtype=torch.long),
        "tags": torch.full((B, T), -100, dtype=torch.long),
    }
    for i, s in enumerate(sents):
        assert s.tags is not None
        for j, (w, t) in enumerate(zip(s.tokens, s.tags, strict=True)):
            out["mask"][i, j] = True
            out["words"][i, j] = collator.words.id(w)
            ids = collator.chars.encode(w[: collator.max_word_len])
            out["chars"][i, j, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            out["tags"][i, j] = collator.labels.encode([t])[0]
    return out


def test_collator_equals_filling_one_by_one() -> None:
    """Random batches with empty sentences, repeated, unknown and over-long words."""
    gen = torch.Generator().manual_seed(0)
    pool = ["a", "bb", "ccc", "solenne", "x" * 40, "unseen", "ÿø", "a"]
    labels = LabelVocab.from_types(["ORG"], "BIO")
    words = Vocab.build(pool[:4])
    chars = Vocab.build("abcsolen")
    collator = Collator(labels, words, chars, max_word_len=24)
    for _ in range(20):
        sents = []
        for _ in range(int(torch.randint(1, 6, (1,), generator=gen))):
            n = int(torch.randint(0, 7, (1,), generator=gen))
            picks = torch.randint(0, len(pool), (n,), generator=gen).tolist()
            sents.append(Sentence([pool[k] for k in picks], ["O"] * n))
        batch = collator(sents)
        oracle = _collate_one_by_one(collator, sents)
        got = {"mask": batch.mask, "words": batch.words, "chars": batch.chars, "tags": batch.tags}
        for name, value in oracle.items():
            assert torch.equal(got[name], value), name  # type: ignore[arg-type]
    empty = collator([])
    assert empty.mask.shape == (0, 0) and empty.chars is not None and empty.chars.shape[0] == 0
    with pytest.raises(ValueError, match="unknown tag 'B-PER'"):
        collator([Sentence(["a"], ["B-PER"])])

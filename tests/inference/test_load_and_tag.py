"""From a trained model to tagged text: ``crfhead.load(...).tag(...)`` with character offsets and exact
span probabilities, the tokenizer that travels with the model, save/load equality without Lightning,
and the errors for what is not a model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import letter_bert, train_tiny_finance

import crfhead
from crfhead.data.finance.generator import generate_finance_documents
from crfhead.data.tokenize import LetterTokenizer, RegexTokenizer, tokenizer_from_dict
from crfhead.evaluation.spans import span_probabilities
from crfhead.inference import Entity, TextTagger
from crfhead.schemes import Span, entity_types

_train = train_tiny_finance


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("tiny"))


TEXT = "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss."


def test_tag_returns_entities_with_character_offsets_into_the_raw_text(checkpoint: Path) -> None:
    tagger = crfhead.load(checkpoint)
    assert isinstance(tagger, TextTagger)
    entities = tagger.tag(TEXT)
    assert all(isinstance(e, Entity) for e in entities)
    for e in entities:
        assert TEXT[e.start : e.end] == e.text
        assert e.label in {lab.split("-", 1)[1] for lab in tagger.labels if "-" in lab}
        assert e.probability is not None and 0.0 <= e.probability <= 1.0
    # The finance tokenizer: lowercase letter runs, digits and punctuation dropped, offsets kept.
    tagged = tagger.annotate([TEXT])[0]
    assert [t.text for t in tagged.tokens][:5] == ["solenne", "power", "guided", "to", "percent"]
    assert all(TEXT[t.start : t.end].lower() == t.text for t in tagged.tokens)
    assert "quarter," not in [t.text for t in tagged.tokens]
    # A list of texts gives one list per text; empty text gives no entity.
    batch = tagger.tag([TEXT, "", "the company said"])
    assert len(batch) == 3 and batch[0] == entities and batch[1] == []


def test_probabilities_are_the_exact_span_marginals(checkpoint: Path) -> None:
    tagger = crfhead.load(checkpoint)
    tagged = tagger.annotate([TEXT])[0]
    sentence = [t.text for t in tagged.tokens]
    batch = tagger.collate([crfhead.data.sentence.Sentence(sentence)])
    with torch.no_grad():
        emissions = tagger.model(batch)
    spans = [Span(e.label, e.token_start, e.token_end - 1) for e in tagged.entities]
    want = span_probabilities(
        tagger.model.head, emissions, batch.mask, [spans], tagger.labels, "BIO"
    )[0]
    assert [e.probability for e in tagged.entities] == pytest.approx(want, abs=1e-6)
    # ... and equal to the total probability of the paths that contain the span, by sampling.
    if tagged.entities:
        e = tagged.entities[0]
        draws = tagger.model.head.sample(emissions, 4000, batch.mask)[:, 0]  # (S, T)
        from crfhead.schemes import tags_to_spans

        span = Span(e.label, e.token_start, e.token_end - 1)
        hits = sum(
            span in tags_to_spans([tagger.labels[k] for k in row if k >= 0], "BIO")
            for row in draws.tolist()
        )
        assert hits / 4000 == pytest.approx(e.probability, abs=0.03)


def test_pre_tokenised_input_and_sentences(checkpoint: Path) -> None:
    tagger = crfhead.load(checkpoint)
    tokens = ["solenne", "power", "guided", "to", "percent", "growth"]
    (tagged,) = tagger.annotate([tokens])
    assert tagged.text == " ".join(tokens)
    assert [t.text for t in tagged.tokens] == tokens
    assert len(tagged.tags) == len(tokens)
    for e in tagged.entities:
        assert tagged.text[e.start : e.end] == e.text
    with pytest.raises(ValueError, match="cannot tag"):
        tagger.annotate([42])  # type: ignore[list-item]


def test_save_then_load_without_lightning_gives_identical_output(
    checkpoint: Path, tmp_path: Path
) -> None:
    tagger = crfhead.load(checkpoint)
    folder = tagger.save(tmp_path / "my-model")
    assert {p.name for p in folder.iterdir()} == {
        "config.json",
        "vocabs.json",
        "model.safetensors",
        "README.md",
    }
    config = json.loads((folder / "config.json").read_text())
    assert config["format"] == "crfhead-tagger" and config["tokenizer"]["kind"] == "letters"
    card = (folder / "README.md").read_text()
    assert "entity types:" in card and "crfhead.load" in card
    reloaded = crfhead.load(folder)
    assert reloaded.tag(TEXT) == tagger.tag(TEXT)
    # In a fresh interpreter: loading a folder and tagging imports no Lightning.
    code = (
        "import sys, crfhead\n"
        f"t = crfhead.load({str(folder)!r})\n"
        f"print(len(t.tag({TEXT!r})))\n"
        "assert 'pytorch_lightning' not in sys.modules and 'lightning' not in sys.modules, "
        "sorted(m for m in sys.modules if 'lightning' in m)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) == len(tagger.tag(TEXT))


def test_save_never_overwrites_unless_asked(checkpoint: Path, tmp_path: Path) -> None:
    tagger = crfhead.load(checkpoint)
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        tagger.save(dest)
    assert (dest / "notes.txt").read_text() == "mine"
    # overwrite=True replaces only a saved model, never a folder of the user's files.
    with pytest.raises(FileExistsError, match="not a crfhead model folder"):
        tagger.save(dest, overwrite=True)
    assert (dest / "notes.txt").read_text() == "mine"
    model = tmp_path / "model"
    tagger.save(model)
    tagger.save(model, overwrite=True)
    assert (model / "config.json").is_file()
    assert not list(tmp_path.glob(".taken*")) and not list(tmp_path.glob(".model*"))


def test_what_is_not_a_model_gets_one_clear_error(checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no model at"):
        crfhead.load(tmp_path / "missing.ckpt")
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"\x00\x01 not a checkpoint")
    with pytest.raises(ValueError, match=r"junk\.ckpt"):
        crfhead.load(junk)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"config\.json is missing"):
        crfhead.load(empty)
    folder = crfhead.load(checkpoint).save(tmp_path / "ok")
    (folder / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(ValueError, match=r"model\.safetensors.*(truncated|corrupt)"):
        crfhead.load(folder)


def test_a_checkpoint_without_a_tokenizer_refuses_raw_text_but_tags_tokens(
    checkpoint: Path, tmp_path: Path
) -> None:
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    del ckpt["hyper_parameters"]["vocabs"]["tokenizer"]
    old = tmp_path / "old.ckpt"
    torch.save(ckpt, old)
    tagger = crfhead.load(old)
    assert tagger.tokenizer is None
    with pytest.raises(ValueError, match="tokenizer is unknown"):
        tagger.tag(TEXT)
    assert len(tagger.annotate([["solenne", "power"]])[0].tags) == 2


def test_the_perceptron_has_no_probabilities(tmp_path: Path) -> None:
    tagger = crfhead.load(_train(tmp_path, "crfhead.heads.StructuredPerceptron"))
    tagged = tagger.annotate([TEXT])[0]
    assert all(e.probability is None for e in tagged.entities)


def test_progress_bar_for_many_texts(checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tagger = crfhead.load(checkpoint)
    tagger.tag(["the company said"] * 30, batch_size=8, progress=True)
    assert "tagging" in capsys.readouterr().err
    tagger.tag(["the company said"] * 30, batch_size=8)  # below PROGRESS_FROM: quiet
    assert "tagging" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------ tokenizers
def test_the_letter_tokenizer_reproduces_the_finance_corpus_tokens() -> None:
    tok = LetterTokenizer()
    for doc in generate_finance_documents(3, 5):
        for sentence, text in zip(doc.sentences, doc.texts, strict=True):
            got = tok.tokenize(text)
            assert [t.text for t in got] == sentence.tokens
            assert all(text[t.start : t.end].lower() == t.text for t in got)


@pytest.mark.parametrize(
    ("rule", "text", "want"),
    [
        (
            "words",
            "Germany's GDP rose 2.5% in 2024, said U.S. officials.",
            [
                "Germany's",
                "GDP",
                "rose",
                "2.5%",
                "in",
                "2024",
                ",",
                "said",
                "U.S.",
                "officials",
                ".",
            ],
        ),
        ("words", "state-owned (SOE) firms", ["state-owned", "(", "SOE", ")", "firms"]),
        (
            "tweets",
            "@bob loves #NLP :) see https://x.co/a?b=1 now!",
            ["@bob", "loves", "#NLP", ":)", "see", "https://x.co/a?b=1", "now", "!"],
        ),
        ("whitespace", "a  b\tc.", ["a", "b", "c."]),
    ],
)
def test_regex_tokenizers_keep_offsets(rule: str, text: str, want: list[str]) -> None:
    got = RegexTokenizer(rule).tokenize(text)
    assert [t.text for t in got] == want
    assert all(text[t.start : t.end] == t.text for t in got)


def test_tokenizers_round_trip_through_their_dicts_and_refuse_unknown_ones() -> None:
    for tok in (LetterTokenizer(), RegexTokenizer("tweets", lowercase=True)):
        assert tokenizer_from_dict(json.loads(json.dumps(tok.to_dict()))) == tok
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        tokenizer_from_dict({"kind": "sentencepiece"})
    with pytest.raises(ValueError, match="unknown tokenizer rule"):
        RegexTokenizer("ptb")


_tiny_bert = letter_bert


def test_a_saved_transformer_model_needs_neither_its_original_folder_nor_the_hub(
    tmp_path: Path,
) -> None:
    pytest.importorskip("transformers")
    bert = _tiny_bert(tmp_path / "bert")
    encoder = (
        "  encoder:\n"
        "    class_path: crfhead.encoders.TransformerEncoder\n"
        f"    init_args:\n      model: {bert}\n"
    )
    tagger = crfhead.load(_train(tmp_path / "run", encoder=encoder))
    want = tagger.annotate([TEXT])[0]
    folder = tagger.save(tmp_path / "saved")
    assert (folder / "backbone" / "config.json").is_file()
    assert not list((folder / "backbone").glob("*.safetensors"))  # the weights are stored once
    import shutil

    shutil.rmtree(bert)  # the original folder is gone
    moved = folder.rename(tmp_path / "moved")  # and the saved folder may move
    got = crfhead.load(moved).annotate([TEXT])[0]
    assert got.tags == want.tags and got.entities == want.entities


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_device_the_machine_lacks_is_one_clear_error(checkpoint: Path) -> None:
    with pytest.raises(ValueError, match="CUDA is not available"):
        crfhead.load(checkpoint, device="cuda")


def test_a_saved_model_with_word_vectors_loads_after_the_vectors_file_is_gone(
    tmp_path: Path,
) -> None:
    vectors = tmp_path / "vectors.txt"
    words = ["the", "company", "said", "quarter", "growth"]
    vectors.write_text("".join(f"{w} " + " ".join(["0.5"] * 8) + "\n" for w in words))
    encoder = (
        "  encoder:\n"
        "    class_path: crfhead.encoders.BiLSTMEncoder\n"
        "    init_args:\n"
        "      word_dim: 8\n"
        "      hidden_size: 8\n"
        "      word_vectors:\n"
        "        class_path: crfhead.encoders.TextVectors\n"
        f"        init_args:\n          path: {vectors}\n"
    )
    tagger = crfhead.load(_train(tmp_path / "run", encoder=encoder))
    folder = tagger.save(tmp_path / "saved")
    vectors.unlink()
    assert crfhead.load(folder).annotate([TEXT])[0].tags == tagger.annotate([TEXT])[0].tags


def test_one_pass_gives_what_the_heads_methods_give(checkpoint: Path) -> None:
    # tag() and trellis() read the path, span probabilities, marginals and k best paths from one
    # build of the potentials: each equals the head's own method on the same emissions.
    tagger = crfhead.load(checkpoint)
    assert tagger.entity_types == entity_types(tagger.labels, "BIO")
    assert repr(tagger).count("types=") == 1
    texts = [TEXT, "marek novak said", "the first quarter"]
    tagged = tagger.annotate(texts, batch_size=2)
    head = tagger.model.head
    for text, record in zip(texts, tagged, strict=True):
        batch = tagger.collate([crfhead.data.sentence.Sentence([t.text for t in record.tokens])])
        with torch.inference_mode():
            emissions = tagger.model(batch)
            assert tagger.model.decode_labels(emissions, batch) == [record.tags]
            spans = [Span(e.label, e.token_start, e.token_end - 1) for e in record.entities]
            probs = span_probabilities(head, emissions, batch.mask, [spans], tagger.labels, "BIO")
            gamma = head.marginals(emissions, batch.mask)[0].float().tolist()
            scores, paths = head.topk(emissions, 3, batch.mask)
            log_z = float(head.log_partition(emissions, batch.mask)[0])
        assert [e.probability for e in record.entities] == [round(p, 6) for p in probs[0]]
        trellis = tagger.trellis(text, 3)
        assert trellis.tagged == record
        assert trellis.marginals == gamma
        assert trellis.best == list(zip(scores[0].tolist(), paths[0].tolist(), strict=True))
        assert trellis.log_partition == log_z
    empty = tagger.trellis("", 2)
    assert (empty.tagged.tokens, empty.marginals, empty.best) == ([], [], [])
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        tagger.trellis(TEXT, 0)


@pytest.mark.parametrize("decoder", ["posterior", "posterior_valid"])
def test_one_pass_decodes_with_the_heads_decoder(checkpoint: Path, decoder: str) -> None:
    tagger = crfhead.load(checkpoint)
    tagger.model.head.decoder = decoder
    texts = [TEXT, "marek novak said"]
    tagged = tagger.annotate(texts)
    batch = tagger.collate(
        [crfhead.data.sentence.Sentence([t.text for t in r.tokens]) for r in tagged]
    )
    with torch.inference_mode():
        assert tagger.model.predict(batch) == [r.tags for r in tagged]

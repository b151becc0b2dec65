"""The model card (README.md of a saved folder): its YAML front matter parsed by ``yaml.safe_load``
and by ``huggingface_hub.ModelCard`` against exact expected metadata, the training config block read
back, what each corpus contributes, and a save → load → save round trip of the card metadata and
training config (a tagger built from a tiny in-memory corpus, untrained: no training needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from crfhead.data.corpora import InMemoryCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.inference import saved
from crfhead.inference.saved import model_card, read_model, save_folder
from crfhead.inference.text_tagger import TextTagger
from crfhead.model.tagger import Tagger

__all__: list[str] = []

CONLL = {
    "seed_everything": 0,
    "model": {"head": {"class_path": "crfhead.heads.CRF"}, "lr": 0.05},
    "trainer": {"max_epochs": 20},
    "data": {
        "corpus": {
            "class_path": "crfhead.data.corpora.CoNLLCorpus",
            "init_args": {"train": "conll2003/train.txt", "dev": "conll2003/valid.txt"},
        },
        "scheme": "BIOES",
    },
}
REPORT = {"f1": 0.912345, "precision": 0.9, "recall": 0.925, "accuracy": 0.98}


def _config(**extra: Any) -> dict[str, Any]:
    return {
        "head": {"class_path": "crfhead.heads.CRF"},
        "encoder": {"class_path": "crfhead.encoders.IndicatorEncoder"},
        "labels": ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"],
        "scheme": "BIO",
        "tokenizer": {"kind": "words"},
        "crfhead_version": "9.9",
        **extra,
    }


def _front(card: str) -> dict[str, Any]:
    assert card.startswith("---\n")
    block = card.split("---\n")[1]
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def _training_block(card: str) -> Any:
    found = re.search(r"```yaml\n(.*?)```", card, re.S)
    assert found is not None
    return yaml.safe_load(found.group(1))


def test_front_matter_of_a_conll_model_with_scores_and_card_metadata() -> None:
    card = model_card(
        _config(training=CONLL, card={"name": "org/ner", "license": "mit", "tags": ["finance"]}),
        REPORT,
    )
    assert _front(card) == {
        "library_name": "crfhead",
        "tags": ["token-classification", "ner", "crf", "sequence-labeling", "finance"],
        "pipeline_tag": "token-classification",
        "datasets": ["conll2003"],
        "language": ["en"],
        "license": "mit",
        "metrics": ["seqeval"],
        "model-index": [
            {
                "name": "org/ner",
                "results": [
                    {
                        "task": {"type": "token-classification", "name": "Token Classification"},
                        "dataset": {"name": "conll2003", "type": "conll2003", "split": "test"},
                        "metrics": [
                            {"type": "f1", "value": 0.9123, "name": "test span F1"},
                            {"type": "precision", "value": 0.9, "name": "test span precision"},
                            {"type": "recall", "value": 0.925, "name": "test span recall"},
                        ],
                    }
                ],
            }
        ],
    }
    assert _training_block(card) == CONLL
    assert "# org/ner" in card and 'crfhead.load("org/ner")' in card
    assert "- f1: 0.9123" in card  # the body's scores as before


def test_huggingface_modelcard_parses_it() -> None:
    hf = pytest.importorskip("huggingface_hub")
    card = hf.ModelCard(model_card(_config(training=CONLL, card={"license": "apache-2.0"}), REPORT))
    assert card.data.library_name == "crfhead"
    assert card.data.license == "apache-2.0"
    assert card.data.pipeline_tag == "token-classification"
    (result, *_) = card.data.eval_results
    assert (result.metric_type, result.metric_value) == ("f1", 0.9123)
    assert (result.dataset_type, result.dataset_split) == ("conll2003", "test")


def test_nothing_known_gives_the_minimal_front_matter() -> None:
    card = model_card(_config(head={"class_path": "crfhead.heads.MEMM"}), None)
    assert _front(card) == {
        "library_name": "crfhead",
        "tags": ["token-classification", "ner", "crf", "sequence-labeling", "memm"],
        "pipeline_tag": "token-classification",
    }
    assert "```yaml" not in card and 'crfhead.load("path/to/this/folder")' in card


@pytest.mark.parametrize(
    ("corpus", "datasets", "language", "dataset"),
    [
        ({"class_path": "crfhead.data.corpora.FinanceCorpus"}, None, ["en"], "crfhead-finance"),
        ({"class_path": "crfhead.data.corpora.MSM2013Corpus"}, None, ["en"], "msm2013"),
        (
            {
                "class_path": "crfhead.data.corpora.CoNLLCorpus",
                "init_args": {"train": "wnut17/wnut17train.conll"},
            },
            ["wnut_17"],
            ["en"],
            "wnut_17",
        ),
        (
            {
                "class_path": "crfhead.data.corpora.CoNLLCorpus",
                "init_args": {"train": "mine/train.txt"},
            },
            None,
            None,
            "conll",
        ),
        (
            {
                "class_path": "crfhead.data.hf_corpus.HFCorpus",
                "init_args": {"path": "eriktks/conll2003"},
            },
            ["eriktks/conll2003"],
            None,
            "eriktks/conll2003",
        ),
        (
            {"class_path": "crfhead.data.hf_corpus.HFCorpus", "init_args": {"path": "./data/ner"}},
            None,
            None,
            "local",
        ),
    ],
)
def test_what_each_corpus_tells_the_card(
    corpus: dict[str, Any], datasets: list[str] | None, language: list[str] | None, dataset: str
) -> None:
    front = _front(model_card(_config(training={"data": {"corpus": corpus}}), {"f1": 0.5}))
    assert front.get("datasets") == datasets
    assert front.get("language") == language
    assert front["model-index"][0]["results"][0]["dataset"]["type"] == dataset


def test_card_metadata_overrides_the_corpus() -> None:
    config = _config(training=CONLL, card={"datasets": ["my/ner"], "language": "de"})
    front = _front(model_card(config, None))
    assert (front["datasets"], front["language"]) == (["my/ner"], ["de"])


def test_values_that_need_quoting_stay_valid_yaml() -> None:
    name = 'we: "quote" #this\nand: [that]'
    card = model_card(_config(card={"name": name, "license": "other"}), {"f1": 1.0})
    assert _front(card)["model-index"][0]["name"] == name


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"licence": "mit"}, r"unknown model card keys \['licence'\]; allowed: \['name', "),
        ({"license": 3}, r"model card license must be a str, got 3"),
        ({"tags": ["a", 1]}, r"model card tags must be a str or a list of str, got \['a', 1\]"),
    ],
)
def test_error_bad_card_metadata(meta: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        saved._card_meta(meta)


# A saved folder ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tagger() -> TextTagger:
    sentences = [Sentence(["Ada", "met", "Acme"], ["B-PER", "O", "B-ORG"])]
    corpus = InMemoryCorpus({"train": sentences, "dev": sentences, "test": sentences})
    data = TaggingDataModule(corpus=corpus)
    config = {"head": {"class_path": "crfhead.heads.CRF"}, "training": CONLL}
    return TextTagger(Tagger.build(data.vocabs), data.vocabs, config, report=REPORT)


def test_save_writes_the_card_and_keeps_its_metadata_through_a_reload(
    tagger: TextTagger, tmp_path: Path
) -> None:
    first = save_folder(
        tmp_path / "a",
        tagger.model,
        tagger.config,
        tagger.vocabs,
        tagger.report,
        card={"license": "mit"},
    )
    card = (first / "README.md").read_text()
    front = _front(card)
    assert front["license"] == "mit" and front["datasets"] == ["conll2003"]
    assert front["model-index"][0]["results"][0]["metrics"][0]["value"] == 0.9123
    config = json.loads((first / "config.json").read_text())
    assert config["card"] == {"license": "mit"} and config["training"] == CONLL
    files = read_model(first)
    again = save_folder(tmp_path / "b", files.build(), files.config, files.vocabs, files.report)
    assert (again / "README.md").read_text() == card


def test_error_save_with_bad_card_metadata_writes_nothing(
    tagger: TextTagger, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="unknown model card keys"):
        save_folder(tmp_path / "x", tagger.model, tagger.config, tagger.vocabs, card={"x": 1})
    assert not (tmp_path / "x").exists()


# The training config beside a checkpoint ---------------------------------------------------------

RUN_CONFIG = """# pytorch_lightning==2.6.6
seed_everything: 7
trainer:
  accelerator: cpu
  max_epochs: 12
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
model:
  encoder: null
  head:
    class_path: crfhead.heads.CRF
  vocabs: {labels: {labels: [O]}}
  lr: 0.1
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
    init_args: {train_docs: 8}
  batch_size: 8
"""


def test_training_config_beside_a_checkpoint(tmp_path: Path) -> None:
    version = tmp_path / "runs" / "x" / "version_0"
    (version / "checkpoints").mkdir(parents=True)
    (version / "config.yaml").write_text(RUN_CONFIG)
    ckpt = version / "checkpoints" / "last.ckpt"  # only its place is read here
    hparams = {"head": {"class_path": "crfhead.heads.CRF"}, "encoder": None}
    assert saved._training_beside(ckpt, hparams) == {
        "seed_everything": 7,
        "model": {"encoder": None, "head": {"class_path": "crfhead.heads.CRF"}, "lr": 0.1},
        "trainer": {"max_epochs": 12},
        "data": {
            "corpus": {
                "class_path": "crfhead.data.corpora.FinanceCorpus",
                "init_args": {"train_docs": 8},
            },
            "batch_size": 8,
        },
    }
    other = {"head": {"class_path": "crfhead.heads.MEMM"}}
    assert saved._training_beside(ckpt, other) is None  # another run's config
    (version / "config.yaml").write_text("model: [unclosed")
    assert saved._training_beside(ckpt, hparams) is None
    (version / "config.yaml").unlink()
    assert saved._training_beside(ckpt, hparams) is None


def test_a_config_without_constrained_saves_what_the_head_is(
    tagger: TextTagger, tmp_path: Path
) -> None:
    assert "constrained" not in tagger.config and tagger.model.head.constrained
    folder = save_folder(tmp_path / "c", tagger.model, tagger.config, tagger.vocabs)
    assert json.loads((folder / "config.json").read_text())["constrained"] is True
    assert read_model(folder).build().head.constrained

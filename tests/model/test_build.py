"""The one builder: nested specs are built from plain data, the same from a config and from a saved model."""

from __future__ import annotations

import json

import pytest

from crfhead.data.sentence import LabelVocab
from crfhead.model.build import DATA_OWNED, build_decoder, build_head

LABELS = LabelVocab(["O", "B-PER", "I-PER"], "BIO")


def test_a_nested_spec_is_built_and_its_arguments_checked() -> None:
    from crfhead.higher_order import Consistency, FactorDecoder

    spec = {
        "class_path": "crfhead.higher_order.FactorDecoder",
        "init_args": {
            "factors": {
                "class_path": "crfhead.higher_order.Consistency",
                "init_args": {"max_length": 2},
            },
            "grid": [0.0, 1.0],
        },
    }
    decoder = build_decoder(json.loads(json.dumps(spec)), LABELS)  # a spec as JSON holds it
    assert isinstance(decoder, FactorDecoder) and isinstance(decoder.factors, Consistency)
    assert decoder.factors.max_length == 2
    spec["init_args"]["factors"]["init_args"] = {"no_such": 1}  # type: ignore[index]
    with pytest.raises(
        ValueError, match=r"unknown init_args \['no_such'\] for crfhead.higher_order.Consistency"
    ):
        build_decoder(spec, LABELS)


def test_data_owned_arguments_are_refused_in_a_spec() -> None:
    for key in ("num_tags", "labels", "scheme"):
        assert key in DATA_OWNED
        with pytest.raises(ValueError, match=rf"init_args \['{key}'\] are set from the data"):
            build_head({"class_path": "crfhead.heads.CRF", "init_args": {key: 3}}, LABELS)


def test_the_config_parser_hands_the_model_plain_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonargparse instantiates a nested class_path under an ``Any`` type; under :data:`Spec` it stays data."""
    from jsonargparse import ArgumentParser

    from crfhead.training.module import TaggerModule

    captured: dict[str, object] = {}

    def init(self: TaggerModule, **kwargs: object) -> None:
        captured.update(kwargs)

    parser = ArgumentParser()
    parser.add_class_arguments(TaggerModule, "model", skip={"vocabs"})
    decoder = {
        "class_path": "crfhead.higher_order.FactorDecoder",
        "init_args": {
            "factors": {"class_path": "crfhead.higher_order.Consistency"},
            "grid": [0.0, 1.0],
        },
    }
    cfg = parser.parse_args(
        [
            f"--model.decoder={json.dumps(decoder)}",
            "--model.encoder.class_path=crfhead.encoders.BiLSTMEncoder",
            "--model.encoder.init_args.word_dim=16",
        ]
    )
    monkeypatch.setattr(TaggerModule, "__init__", init)
    parser.instantiate(cfg)
    assert captured["decoder"] == decoder
    assert json.loads(json.dumps(captured["decoder"])) == decoder  # serialisable as it is
    assert captured["encoder"] == {"class_path": "crfhead.encoders.BiLSTMEncoder", "word_dim": 16}

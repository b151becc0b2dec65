"""``spec_needs``: the batch fields a model reads, from its specs alone (before any data is loaded)."""

from __future__ import annotations

from typing import Any

import pytest

from crfhead.model.build import spec_needs


@pytest.mark.parametrize(
    ("encoder", "head", "expected"),
    [
        (None, None, ["features"]),  # the defaults: the indicator CRF
        ({"class_path": "crfhead.encoders.IndicatorEncoder"}, None, ["features"]),
        ({"class_path": "crfhead.encoders.BiLSTMEncoder"}, None, ["chars", "words"]),
        (
            {"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {"char_encoder": None}},
            None,
            ["words"],
        ),
        # A flattened override (--model.encoder.init_args.char_encoder=null arrives like this).
        ({"class_path": "crfhead.encoders.BiLSTMEncoder", "char_encoder": None}, None, ["words"]),
        ({"class_path": "crfhead.encoders.TransformerEncoder"}, None, ["sentences"]),
        ({"class_path": "crfhead.encoders.WordWindowEncoder"}, None, ["words"]),
        # A head that scores words itself adds its own fields (the encoder is still built).
        (
            {"class_path": "crfhead.encoders.IndicatorEncoder"},
            {"class_path": "crfhead.heads.HMM"},
            ["features", "words"],
        ),
        (
            {"class_path": "crfhead.encoders.TransformerEncoder"},
            {"class_path": "crfhead.heads.HMM"},
            ["sentences", "words"],
        ),
        ({"class_path": "torch.nn.Identity"}, None, None),  # declares nothing: every field
        ({"class_path": "no.such.Encoder"}, None, None),  # build_encoder names the error
    ],
)
def test_spec_needs(
    encoder: dict[str, Any] | None, head: dict[str, Any] | None, expected: list[str] | None
) -> None:
    assert spec_needs(encoder, head) == expected

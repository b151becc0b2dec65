"""``POST /api/tag`` with ``"spans"`` and ``"forbid"``: the "Your model" tab's pins, without a browser.

The lab's tiny finance CRF (BIO; ``lab_model_path``) served as in ``test_server.py``. A pinned
answer must be the tagger's own constrained decoding (``TextTagger.trellis``/``tag`` with
``spans=``/``forbid=``, called directly), its extra keys must say what the pins changed, every bad
pin must come back as a JSON 4xx whose message names the problem (and the server must go on
serving), a request without pins (or with empty lists) must be answered exactly as before pins, and
the page must carry the pin control and send the pins.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import post_json, serving

from crfhead.lab.server import MAX_PINS, STATIC, LabServer, load_model

TEXT = "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss."
OLD_KEYS = {"text", "tokens", "labels", "tags", "entities", "marginals", "topk", "calibrated"}
"""The keys of an answer before pins (and of one without them still)."""
PIN_KEYS = {"spans", "forbid", "pinned", "free", "changed"}


def at(word: str, label: str) -> list[Any]:
    """``[start, end, label]`` of ``word``'s first occurrence in :data:`TEXT`."""
    start = TEXT.index(word)
    return [start, start + len(word), label]


@pytest.fixture(scope="module")
def tagger(lab_model_path: Path) -> Any:
    return load_model(lab_model_path)


@pytest.fixture(scope="module")
def loaded(tagger: Any, lab_model_path: Path) -> Iterator[LabServer]:
    with serving(tagger=tagger, model_path=str(lab_model_path)) as server:
        yield server


def ok(server: LabServer, payload: dict[str, Any]) -> dict[str, Any]:
    status, reply = post_json(server, payload)
    assert status == 200, reply
    out: dict[str, Any] = reply
    return out


def expected(tagger: Any, k: int, spans: Any = None, forbid: Any = None) -> Any:
    """The tagger's own trellis under the constraints, as tuples (what the server must return)."""
    return tagger.trellis(
        TEXT,
        k,
        spans=None if spans is None else [tuple(s) for s in spans],
        forbid=None if forbid is None else [f if isinstance(f, str) else tuple(f) for f in forbid],
    )


# ------------------------------------------------------------------------------ conditioned
class TestPinned:
    def test_a_pin_is_the_taggers_constrained_decoding(
        self, loaded: LabServer, tagger: Any
    ) -> None:
        pin = at("Solenne Power", "ORG")
        r = ok(loaded, {"text": TEXT, "k": 4, "spans": [pin]})
        assert set(r) == OLD_KEYS | PIN_KEYS
        want = expected(tagger, 4, spans=[pin])
        assert r["tags"] == list(want.tagged.tags)
        assert r["entities"] == [e.to_dict() for e in want.tagged.entities]
        # tag() with spans= (one sentence: the same chain) gives the same entities.
        assert r["entities"] == [e.to_dict() for e in tagger.tag(TEXT, spans=[tuple(pin)])]
        assert r["marginals"] == [[round(v, 6) for v in row] for row in want.marginals]
        probs = [math.exp(s - want.log_partition) for s, _ in want.best]
        assert [p["probability"] for p in r["topk"]] == pytest.approx(probs, abs=1e-12)
        assert r["topk"][0]["tags"] == r["tags"]
        assert 0.0 < sum(probs) <= 1.0 + 1e-9  # exp(score - log Z_allowed): given the pin

    def test_the_pinned_span_is_an_entity_with_probability_one(self, loaded: LabServer) -> None:
        pin = at("Solenne Power", "ORG")
        r = ok(loaded, {"text": TEXT, "spans": [pin]})
        assert r["spans"] == [pin] and r["forbid"] == []
        (i,) = r["pinned"]
        e = r["entities"][i]
        assert (e["start"], e["end"], e["label"], e["probability"]) == (pin[0], pin[1], "ORG", 1.0)
        assert r["tags"][:2] == ["B-ORG", "I-ORG"]
        b_org, i_org = r["labels"].index("B-ORG"), r["labels"].index("I-ORG")
        assert r["marginals"][0][b_org] == pytest.approx(1.0, abs=1e-6)
        assert r["marginals"][1][i_org] == pytest.approx(1.0, abs=1e-6)
        for path in r["topk"]:  # every best path keeps the pin
            assert path["tags"][:2] == ["B-ORG", "I-ORG"]
            assert path["tags"][2] != "I-ORG"  # BIO: the token after does not continue it

    def test_free_and_changed_are_the_decoding_without_the_pins(
        self, loaded: LabServer, tagger: Any
    ) -> None:
        pin = at("Solenne Power", "ORG")
        r = ok(loaded, {"text": TEXT, "spans": [pin]})
        free = ok(loaded, {"text": TEXT})
        assert r["free"] == {"tags": free["tags"], "entities": free["entities"]}
        assert r["changed"] == [
            t for t, (a, b) in enumerate(zip(r["tags"], free["tags"], strict=True)) if a != b
        ]
        if free["tags"][:2] != ["B-ORG", "I-ORG"]:
            assert {0, 1} & set(r["changed"])

    def test_a_span_with_whitespace_around_it_pins_its_tokens(self, loaded: LabServer) -> None:
        start, end, _ = at("Mara Voss", "PERSON")
        r = ok(loaded, {"text": TEXT, "spans": [[start - 1, end, "PERSON"]]})
        (i,) = r["pinned"]
        assert r["entities"][i]["text"] == "Mara Voss"
        assert r["entities"][i]["probability"] == 1.0

    def test_two_pins_and_a_forbid(self, loaded: LabServer, tagger: Any) -> None:
        spans = [at("Solenne Power", "ORG"), at("Mara Voss", "PERSON")]
        forbid = ["PERCENT", at("first", "O")]
        r = ok(loaded, {"text": TEXT, "k": 3, "spans": spans, "forbid": forbid})
        want = expected(tagger, 3, spans, forbid)
        assert r["tags"] == list(want.tagged.tags)
        assert r["forbid"] == forbid and len(r["pinned"]) == 2
        assert not any(t.endswith("-PERCENT") for t in r["tags"])
        cols = [k for k, lab in enumerate(r["labels"]) if lab.endswith("-PERCENT")]
        assert all(row[k] == 0.0 for row in r["marginals"] for k in cols)
        first = next(j for j, t in enumerate(r["tokens"]) if t["text"] == "first")
        assert r["tags"][first] != "O"
        assert r["marginals"][first][r["labels"].index("O")] == 0.0

    def test_a_forbid_alone_is_conditioned_too(self, loaded: LabServer, tagger: Any) -> None:
        r = ok(loaded, {"text": TEXT, "forbid": ["B-PERCENT"]})
        assert r["spans"] == [] and r["pinned"] == []
        assert r["tags"] == list(expected(tagger, 5, forbid=["B-PERCENT"]).tagged.tags)
        assert "B-PERCENT" not in r["tags"]


# ------------------------------------------------------------------------------ without pins
class TestWithoutPins:
    def test_the_answer_is_as_before(self, loaded: LabServer, tagger: Any) -> None:
        r = ok(loaded, {"text": TEXT, "k": 3})
        assert set(r) == OLD_KEYS
        assert r["entities"] == [e.to_dict() for e in tagger.tag(TEXT)]
        assert r["tags"] == list(tagger.trellis(TEXT, 3).tagged.tags)

    @pytest.mark.parametrize(
        "extra", [{"spans": []}, {"forbid": []}, {"spans": [], "forbid": []}, {"spans": None}]
    )
    def test_empty_pins_are_no_pins(self, loaded: LabServer, extra: dict[str, Any]) -> None:
        assert ok(loaded, {"text": TEXT, "k": 3, **extra}) == ok(loaded, {"text": TEXT, "k": 3})


# ------------------------------------------------------------------------------ errors
N = len(TEXT)


class TestErrors:
    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            ({"spans": "0 13 ORG"}, '"spans" must be a list'),
            ({"spans": {"start": 0}}, '"spans" must be a list'),
            ({"forbid": "PERCENT"}, '"forbid" must be a list'),
            ({"spans": [[0, 13]]}, '"spans"[0] must be [start, end, type]'),
            ({"spans": [[0, 13, 5]]}, '"spans"[0] must be [start, end, type]'),
            ({"spans": [[True, 13, "ORG"]]}, '"spans"[0] must be [start, end, type]'),
            ({"spans": [[0, 13.0, "ORG"]]}, '"spans"[0] must be [start, end, type]'),
            ({"spans": [[0, 13, "ORG"], "ORG"]}, '"spans"[1] must be [start, end, type]'),
            ({"spans": [[70, N + 5, "PERSON"]]}, f"end <= {N} (the text's length"),
            ({"spans": [[-1, 4, "ORG"]]}, "outside the text or empty"),
            ({"spans": [[5, 5, "ORG"]]}, "outside the text or empty"),
            ({"forbid": [[0, N + 1, "O"]]}, '"forbid"[0]'),
            ({"forbid": [3]}, '"forbid"[0] must be a label or type'),
            ({"spans": [[0, 13, "COMPANY"]]}, "not an entity type of the model"),
            ({"spans": [[0, 13, "B-ORG"]]}, "give the type 'ORG', not a label"),
            ({"spans": [[0, 10, "ORG"]]}, "cuts token"),
            ({"spans": [[0, 13, "ORG"], [8, 20, "ORG"]]}, "overlap"),
            ({"forbid": ["NOPE"]}, "is neither a label"),
            ({"spans": [[0, 13, "ORG"]], "forbid": ["ORG"]}, "no label"),
        ],
    )
    def test_bad_pins_are_400_with_a_message(
        self, loaded: LabServer, extra: dict[str, Any], message: str
    ) -> None:
        status, reply = post_json(loaded, {"text": TEXT, **extra})
        assert status == 400, reply
        assert message in reply["error"], reply["error"]
        assert "Traceback" not in reply["error"]

    def test_constraints_that_leave_no_valid_path_are_400(
        self, loaded: LabServer, tagger: Any
    ) -> None:
        # Only I- labels left: BIO cannot start with one, nor follow O with one.
        forbid = [lab for lab in tagger.labels if not lab.startswith("I-")]
        status, reply = post_json(loaded, {"text": "the first quarter", "forbid": forbid})
        assert status == 400, reply
        assert "no valid tag path" in reply["error"]
        status, _ = post_json(loaded, {"text": TEXT})  # and the model serves on
        assert status == 200

    def test_too_many_pins_are_413(self, loaded: LabServer) -> None:
        status, reply = post_json(loaded, {"text": TEXT, "forbid": ["O"] * (MAX_PINS + 1)})
        assert status == 413 and str(MAX_PINS) in reply["error"]

    def test_texts_take_no_pins(self, loaded: LabServer) -> None:
        status, reply = post_json(loaded, {"texts": [TEXT], "group": "none", "spans": []})
        assert status == 400 and '"spans"' in reply["error"] and "unknown fields" in reply["error"]

    def test_no_model_is_still_a_409(self) -> None:
        with serving() as bare:
            status, reply = post_json(bare, {"text": TEXT, "spans": [at("Mara Voss", "PERSON")]})
        assert status == 409 and "--model" in reply["error"]


# ------------------------------------------------------------------------------ the page
class TestPage:
    def test_the_model_tab_has_the_pin_control(self) -> None:
        js = (STATIC / "lab.js").read_text(encoding="utf-8")
        for needle in ("pin-start", "pin-end", "pin-type", "pin-add", "pin-forbid", "pins-clear"):
            assert f"id: '{needle}'" in js, needle
        # The pins travel as the API's fields, and only when there are some.
        assert "out.spans = spans.map((p) => [p.start, p.end, p.label])" in js
        assert "out.forbid = forbid.map((p) => [p.start, p.end, p.label])" in js
        assert "pins.fields()" in js
        # The answer's own keys are read back: the pinned entities, the free decoding, an error.
        for key in ("r.pinned", "r.free.tags", "r.changed", "body.error"):
            assert key in js, key

    def test_the_page_still_parses_as_json_the_server_sends(self, loaded: LabServer) -> None:
        # What the page does with an error: res.json() then body.error, so errors must be JSON.
        status, reply = post_json(loaded, {"text": TEXT, "spans": [[0, 10, "ORG"]]})
        assert status == 400 and json.dumps(reply)
        assert set(reply) == {"error"}

"""``POST /api/tag`` with ``"texts"``: several texts decoded together by a higher-order model.

A tiny finance CRF with a group decoder (``lab_higher_order_path``) and the lab's chain model
(``lab_model_path``), served as in ``test_server.py``: the validation errors and their messages, a
chain model refusing a group, the reply's shape, which texts were decoded together, and the
comparison with the chain alone, each checked against ``TextTagger`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import post_json, request, serving

from crfhead.lab.server import GROUPS, MAX_BODY, MAX_CHARS, MAX_TEXTS, LabServer, load_model

TEXTS = [
    "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.",
    "Mara Voss said Solenne Power grew.",
    "nothing to see here",
    "  ",
]
"""The first two share words (one group under the saved grouping), the third shares none, the
fourth has no tokens."""
ENTRY = {"text", "tokens", "tags", "entities", "certified", "group", "chain_tags", "changed"}


@pytest.fixture(scope="module")
def joint_tagger(lab_higher_order_path: Path) -> Any:
    return load_model(lab_higher_order_path)


@pytest.fixture(scope="module")
def joint(joint_tagger: Any, lab_higher_order_path: Path) -> Iterator[LabServer]:
    with serving(tagger=joint_tagger, model_path=str(lab_higher_order_path)) as server:
        yield server


@pytest.fixture(scope="module")
def chain(lab_model_path: Path) -> Iterator[LabServer]:
    with serving(tagger=load_model(lab_model_path), model_path=str(lab_model_path)) as server:
        yield server


def ok(server: LabServer, texts: list[str], group: str) -> dict[str, Any]:
    status, reply = post_json(server, {"texts": texts, "group": group})
    assert status == 200, reply
    out: dict[str, Any] = reply
    return out


# ------------------------------------------------------------------------------------ the model
class TestModelInfo:
    def test_a_higher_order_model_says_it_decodes_groups(self, joint: LabServer) -> None:
        info = json.loads(request(joint, "GET", "/api/model")[2])
        assert (info["decoder"], info["group_decoder"]) == ("FactorDecoder", True)
        assert info["grouping"].startswith("TweetGroups(")

    def test_a_chain_model_does_not(self, chain: LabServer) -> None:
        info = json.loads(request(chain, "GET", "/api/model")[2])
        assert (info["group_decoder"], info["grouping"]) == (False, None)


# ------------------------------------------------------------------------------------ errors
class TestErrors:
    @pytest.mark.parametrize(
        ("payload", "message"),
        [
            ({"texts": "a b", "group": "all"}, '"texts" must be a list of strings, got a str'),
            ({"texts": None, "group": "all"}, '"texts" must be a list of strings'),
            ({"texts": [], "group": "all"}, '"texts" is empty'),
            ({"texts": ["a", 3], "group": "all"}, '"texts"[1] must be a string, got a int'),
            ({"texts": ["a"]}, 'missing "group"'),
            ({"texts": ["a"], "group": "document"}, '"group" must be one of'),
            ({"texts": ["a"], "group": True}, "got true"),
            ({"texts": ["a"], "group": "all", "k": 3}, "unknown fields ['k']"),
            ({"texts": ["a"], "group": "all", "text": "a"}, "unknown fields ['text']"),
        ],
    )
    def test_bad_requests_are_400_with_a_message(
        self, joint: LabServer, payload: dict[str, Any], message: str
    ) -> None:
        status, reply = post_json(joint, payload)
        assert status == 400
        assert message in reply["error"], reply["error"]

    @pytest.mark.parametrize(
        ("payload", "message"),
        [
            ({"texts": ["a"] * (MAX_TEXTS + 1), "group": "all"}, f"at most {MAX_TEXTS} at once"),
            (
                {"texts": ["a" * (MAX_CHARS // 2 + 1)] * 2, "group": "all"},
                f"{MAX_CHARS + 2} characters; the lab tags at most {MAX_CHARS}",
            ),
        ],
    )
    def test_too_much_text_is_413_with_the_limit_and_the_size(
        self, joint: LabServer, payload: dict[str, Any], message: str
    ) -> None:
        status, reply = post_json(joint, payload)
        assert status == 413
        assert message in reply["error"], reply["error"]

    def test_the_group_values_are_named(self, joint: LabServer) -> None:
        _, reply = post_json(joint, {"texts": ["a"], "group": "tweets"})
        assert str(list(GROUPS)) in reply["error"]

    def test_the_body_limit_still_holds(self, joint: LabServer) -> None:
        status, reply = post_json(joint, {"texts": ["a " * (MAX_BODY // 2)], "group": "all"})
        assert status == 413 and str(MAX_BODY) in reply["error"]

    def test_no_model_is_a_409(self) -> None:
        with serving() as bare:
            status, reply = post_json(bare, {"texts": ["a"], "group": "none"})
        assert status == 409 and "--model" in reply["error"]

    @pytest.mark.parametrize("group", ["all", "auto"])
    def test_a_model_without_a_group_decoder_refuses_a_group(
        self, chain: LabServer, group: str
    ) -> None:
        status, reply = post_json(chain, {"texts": TEXTS, "group": group})
        assert status == 400
        assert (
            f'"group": "{group}" needs a group decoder, and this model has none' in (reply["error"])
        )
        assert '"group": "none"' in reply["error"]

    def test_a_model_without_a_group_decoder_tags_each_text_alone(self, chain: LabServer) -> None:
        r = ok(chain, TEXTS, "none")
        assert r["groups"] == [] and [t["group"] for t in r["texts"]] == [None] * len(TEXTS)

    def test_auto_without_a_saved_grouping_is_refused(self, lab_higher_order_path: Path) -> None:
        tagger = load_model(lab_higher_order_path)
        tagger.grouping = None  # a model saved before groupings were
        with serving(tagger=tagger) as server:
            status, reply = post_json(server, {"texts": TEXTS, "group": "auto"})
            assert status == 400 and "this model saved none" in reply["error"]
            assert ok(server, TEXTS, "all")["groups"][0]["texts"] == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------ replies
class TestReply:
    def test_the_shape(self, joint: LabServer, joint_tagger: Any) -> None:
        r = ok(joint, TEXTS, "all")
        assert set(r) == {"group", "labels", "calibrated", "groups", "texts"}
        assert (r["group"], r["labels"], r["calibrated"]) == ("all", joint_tagger.labels, True)
        assert len(r["texts"]) == len(TEXTS)
        for text, entry in zip(TEXTS, r["texts"], strict=True):
            assert set(entry) == ENTRY and entry["text"] == text
            assert len(entry["tags"]) == len(entry["tokens"]) == len(entry["chain_tags"])
            for tok in entry["tokens"]:
                assert text[tok["start"] : tok["end"]].lower() == tok["text"]
            for e in entry["entities"]:
                assert text[e["start"] : e["end"]] == e["text"]
        assert r["texts"][3]["tokens"] == [] and r["texts"][3]["certified"] is None

    @pytest.mark.parametrize("group", ["all", "auto"])
    def test_the_joint_decoding_is_the_taggers(
        self, joint: LabServer, joint_tagger: Any, group: str
    ) -> None:
        r = ok(joint, TEXTS, group)
        want = joint_tagger.annotate(TEXTS, group=group)
        assert [t["tags"] for t in r["texts"]] == [t.tags for t in want]
        assert [t["entities"] for t in r["texts"]] == [
            [e.to_dict() for e in t.entities] for t in want
        ]
        assert [t["certified"] for t in r["texts"]] == [t.certified for t in want]

    def test_which_texts_were_decoded_together(self, joint: LabServer) -> None:
        r = ok(joint, TEXTS, "all")
        assert [g["texts"] for g in r["groups"]] == [[0, 1, 2, 3]]
        assert [t["group"] for t in r["texts"]] == [0, 0, 0, 0]
        assert isinstance(r["groups"][0]["certified"], bool)
        r = ok(joint, TEXTS, "auto")  # tweets sharing more than one word
        assert [g["texts"] for g in r["groups"]] == [[0, 1], [2], [3]]
        assert [t["group"] for t in r["texts"]] == [0, 0, 1, 2]
        assert [g["certified"] is None for g in r["groups"]] == [False, False, True]
        for g in r["groups"]:
            assert all(r["texts"][i]["certified"] == g["certified"] for i in g["texts"])
        r = ok(joint, TEXTS, "none")
        assert r["groups"] == [] and [t["certified"] for t in r["texts"]] == [None] * 4

    def test_the_chain_alone_and_what_changed(self, joint: LabServer, joint_tagger: Any) -> None:
        alone = [t.tags for t in joint_tagger.annotate(TEXTS, group="none")]
        for group in GROUPS:
            r = ok(joint, TEXTS, group)
            assert [t["chain_tags"] for t in r["texts"]] == alone
            for t in r["texts"]:
                diff = [
                    i
                    for i, (a, b) in enumerate(zip(t["tags"], t["chain_tags"], strict=True))
                    if a != b
                ]
                assert t["changed"] == diff
        assert all(t["changed"] == [] for t in ok(joint, TEXTS, "none")["texts"])
        # The factors tie "solenne power" in the first two texts: the joint decoding moves some
        # label, so the comparison is not vacuous for this model.
        assert any(t["changed"] for t in ok(joint, TEXTS, "all")["texts"])

    def test_one_text_is_answered_as_before(self, joint: LabServer) -> None:
        status, r = post_json(joint, {"text": TEXTS[0], "k": 2})
        assert status == 200
        assert set(r) == {
            "text",
            "tokens",
            "labels",
            "tags",
            "entities",
            "marginals",
            "topk",
            "calibrated",
        }
        assert len(r["topk"]) == 2

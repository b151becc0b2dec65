"""Evaluation metrics: agreement with seqeval, accumulation, merging, reports."""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seqeval.metrics import classification_report, f1_score

from crfhead.evaluation.metrics import TaggingMetrics, seqeval_scheme
from crfhead.evaluation.report import format_report, write_report_json
from crfhead.schemes import labels_for, repair_tags

Batch = list[list[str]]

# Hand-made cases. Per sentence: what the prediction gets right or wrong.
BIO_GOLD: Batch = [
    ["B-PER", "I-PER", "O", "B-LOC"],  # 0: exact match
    ["B-ORG", "B-ORG", "I-ORG", "O"],  # 1: adjacent same-type entities
    ["O", "B-PER", "I-PER", "I-PER"],  # 2: boundary error
    ["B-LOC", "O", "B-MISC"],  # 3: type error on LOC; MISC missed
    [],  # 4: empty sentence
    ["O", "O", "O"],  # 5: no entities; a spurious prediction
    ["B-MISC", "I-MISC", "B-PER"],  # 6: adjacent entities of different types
]
BIO_PRED: Batch = [
    ["B-PER", "I-PER", "O", "B-LOC"],
    ["B-ORG", "I-ORG", "I-ORG", "O"],  # the two ORG merged into one
    ["O", "B-PER", "I-PER", "O"],
    ["B-ORG", "O", "O"],
    [],
    ["O", "B-LOC", "O"],
    ["B-MISC", "I-MISC", "B-PER"],
]

BIOES_GOLD: Batch = [
    ["B-PER", "E-PER", "O", "S-LOC"],  # 0: exact match
    ["S-ORG", "B-ORG", "E-ORG", "O"],  # 1: adjacent same-type entities
    ["O", "B-PER", "I-PER", "E-PER"],  # 2: boundary error
    ["S-LOC", "O", "S-MISC"],  # 3: type error on LOC; MISC missed
    [],  # 4: empty sentence
    ["O", "O", "O"],  # 5: no entities; a spurious prediction
    ["B-MISC", "E-MISC", "S-PER"],  # 6: adjacent entities of different types
]
BIOES_PRED: Batch = [
    ["B-PER", "E-PER", "O", "S-LOC"],
    ["B-ORG", "I-ORG", "E-ORG", "O"],
    ["O", "B-PER", "E-PER", "O"],
    ["S-ORG", "O", "O"],
    [],
    ["O", "S-LOC", "O"],
    ["B-MISC", "E-MISC", "S-PER"],
]

CASES = {"BIO": (BIO_GOLD, BIO_PRED), "BIOES": (BIOES_GOLD, BIOES_PRED)}


def seqeval_report(gold: Batch, pred: Batch, scheme: str) -> dict[str, Any]:
    cls = seqeval_scheme(scheme)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if cls is None:
            report: dict[str, Any] = classification_report(gold, pred, output_dict=True)
        else:
            report = classification_report(gold, pred, output_dict=True, mode="strict", scheme=cls)
    return report


def assert_equals_seqeval(ours: dict[str, float], gold: Batch, pred: Batch, scheme: str) -> None:
    report = seqeval_report(gold, pred, scheme)
    types = sorted(k for k in report if not k.endswith(" avg"))
    assert sorted(k[: -len("/f1")] for k in ours if k.endswith("/f1")) == types
    for t in types:
        assert ours[f"{t}/precision"] == report[t]["precision"]
        assert ours[f"{t}/recall"] == report[t]["recall"]
        assert ours[f"{t}/f1"] == report[t]["f1-score"]
        assert ours[f"{t}/support"] == report[t]["support"]
    micro = report["micro avg"]
    assert (ours["precision"], ours["recall"], ours["f1"]) == (
        micro["precision"],
        micro["recall"],
        micro["f1-score"],
    )
    assert ours["support"] == micro["support"]
    if types:  # seqeval's macro average over no type is NaN; ours is 0.0
        macro = report["macro avg"]
        assert (ours["macro_precision"], ours["macro_recall"], ours["macro_f1"]) == (
            macro["precision"],
            macro["recall"],
            macro["f1-score"],
        )


def scored(scheme: str, gold: Batch, pred: Batch, **kwargs: Any) -> dict[str, float]:
    m = TaggingMetrics(scheme, **kwargs)
    m.update(gold, pred)
    return m.compute()


# --- agreement with seqeval ------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_fixtures_agree_with_seqeval_exactly(scheme: str) -> None:
    gold, pred = CASES[scheme]
    ours = scored(scheme, gold, pred)
    assert_equals_seqeval(ours, gold, pred, scheme)
    cls = seqeval_scheme(scheme)
    assert ours["f1"] == f1_score(gold, pred, mode="strict", scheme=cls)
    assert ours["macro_f1"] == f1_score(gold, pred, mode="strict", scheme=cls, average="macro")


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_fixture_numbers_by_hand(scheme: str) -> None:
    # gold: PER×3, LOC×2, ORG×2, MISC×2 = 9; pred: PER×3, LOC×2, ORG×2, MISC×1 = 8.
    # correct: PER (s0, s6), LOC (s0), MISC (s6) = 4.
    ours = scored(scheme, *CASES[scheme])
    assert ours["precision"] == pytest.approx(4 / 8)
    assert ours["recall"] == pytest.approx(4 / 9)
    assert ours["f1"] == pytest.approx(2 * 4 / (8 + 9))
    assert ours["ORG/f1"] == 0.0  # the merged pair and the LOC-as-ORG are both wrong
    assert ours["PER/precision"] == pytest.approx(2 / 3)
    assert ours["MISC/recall"] == pytest.approx(1 / 2)
    assert ours["MISC/precision"] == 1.0
    assert ours["support"] == 9.0
    assert ours["sentences"] == 7.0
    assert ours["tokens"] == 21.0


def test_small_case_by_hand() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-LOC"]]  # PER 0-1, LOC 3, LOC 5
    pred = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]]  # PER 0-1 ✓, LOC 3-4 ✗
    m = scored("BIO", gold, pred)
    # micro: tp 1, pred 2, gold 3 -> P 1/2, R 1/3, F1 2·(1/2)(1/3)/(1/2+1/3) = 2/5.
    assert (m["precision"], m["recall"]) == pytest.approx((1 / 2, 1 / 3))
    assert m["f1"] == pytest.approx(2 / 5)
    # macro: PER (1, 1, 1), LOC (0, 0, 0).
    assert (m["macro_precision"], m["macro_recall"], m["macro_f1"]) == (0.5, 0.5, 0.5)
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["LOC/support"] == 2.0


def test_io_uses_default_mode_and_agrees_with_seqeval() -> None:
    gold = [["I-PER", "I-PER", "O", "I-LOC", "I-ORG"], [], ["O"]]
    pred = [["I-PER", "I-PER", "O", "I-LOC", "I-LOC"], [], ["I-PER"]]
    m = TaggingMetrics("io")
    assert not m.strict
    m.update(gold, pred)
    out = m.compute()
    assert_equals_seqeval(out, gold, pred, "IO")
    # a run of I-PER is one entity: found once, predicted twice; I-LOC I-LOC is one (wrong) entity
    assert (out["PER/precision"], out["PER/recall"]) == (0.5, 1.0)
    assert out["LOC/f1"] == 0.0
    assert out["ORG/support"] == 1.0


def label_batches(scheme: str) -> st.SearchStrategy[tuple[Batch, Batch]]:
    labels = labels_for(["A", "B"], scheme)
    sizes = st.lists(st.integers(0, 6), min_size=1, max_size=4)

    def pairs(lengths: list[int]) -> st.SearchStrategy[tuple[Batch, Batch]]:
        seqs = st.tuples(
            *(st.lists(st.sampled_from(labels), min_size=n, max_size=n) for n in lengths)
        )
        return st.tuples(seqs.map(list), seqs.map(list))

    return sizes.flatmap(pairs)


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES", "BIOUL", "IO"])
@given(data=st.data())
def test_any_sequences_agree_with_seqeval(scheme: str, data: st.DataObject) -> None:
    """Invalid sequences included: with repair_gold off we score exactly what seqeval does."""
    gold, pred = data.draw(label_batches(scheme))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without gold repair
        ours = scored(scheme, gold, pred, repair_gold=False)
    assert_equals_seqeval(ours, gold, pred, scheme)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
@given(data=st.data())
def test_gold_repair_equals_seqeval_on_repaired_gold(scheme: str, data: st.DataObject) -> None:
    gold, pred = data.draw(label_batches(scheme))
    repaired = [repair_tags(g, scheme)[0] for g in gold]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = scored(scheme, gold, pred)
    assert_equals_seqeval(ours, repaired, pred, scheme)
    assert ours["gold_repaired_tags"] == sum(repair_tags(g, scheme)[1] for g in gold)


# --- invalid sequences -----------------------------------------------------------------------


def test_seqeval_strict_drops_malformed_bioes_entities() -> None:
    """What seqeval does by itself: an unclosed B-PER I-PER is no entity, silently."""
    gold = [["B-PER", "I-PER", "O"]]
    report = seqeval_report(gold, gold, "BIOES")
    assert "PER" not in report


def test_invalid_gold_is_repaired_counted_and_warned() -> None:
    gold = [["B-PER", "I-PER", "O"], ["S-LOC"]]  # sentence 0 unclosed
    pred = [["B-PER", "E-PER", "O"], ["S-LOC"]]
    with pytest.warns(UserWarning, match="gold tag sequences that are invalid in the BIOES"):
        out = scored("BIOES", gold, pred)
    assert out["f1"] == 1.0
    assert out["PER/support"] == 1.0
    assert (out["gold_invalid_sentences"], out["gold_repaired_tags"]) == (1.0, 1.0)
    assert out["accuracy"] == 1.0  # against the repaired gold


def test_invalid_gold_without_repair_is_dropped_as_seqeval_does() -> None:
    gold = [["B-PER", "I-PER", "O"], ["S-LOC"]]
    pred = [["B-PER", "E-PER", "O"], ["S-LOC"]]
    out = scored("BIOES", gold, pred, repair_gold=False)
    assert out["support"] == 1.0
    assert out["PER/precision"] == 0.0
    assert (out["gold_invalid_sentences"], out["gold_repaired_tags"]) == (1.0, 0.0)


def test_invalid_prediction_is_strict_by_default_and_lenient_on_request() -> None:
    gold = [["O", "B-PER", "I-PER"]]
    pred = [["O", "I-PER", "I-PER"]]  # conlleval would read PER 1-2; strict reads nothing
    strict = scored("BIO", gold, pred)
    assert (strict["recall"], strict["pred_invalid_sentences"]) == (0.0, 1.0)
    lenient = scored("BIO", gold, pred, repair_pred=True)
    assert lenient["f1"] == 1.0
    assert (lenient["pred_invalid_sentences"], lenient["pred_repaired_tags"]) == (1.0, 1.0)


def test_seqeval_iob1_quirk_on_invalid_prediction() -> None:
    """seqeval's strict IOB1 reads `O B-A I-A` (invalid) as A on token 2 alone; we agree with it."""
    gold = [["O", "I-A", "I-A"]]
    pred = [["O", "B-A", "I-A"]]
    out = scored("IOB1", gold, pred)
    assert (out["precision"], out["recall"]) == (0.0, 0.0)
    assert out["A/support"] == 1.0
    assert_equals_seqeval(out, gold, pred, "IOB1")


def test_label_outside_the_scheme_is_named() -> None:
    m = TaggingMetrics("BIO")
    with pytest.raises(ValueError, match="label 'E-PER' is not valid in the BIO scheme"):
        m.update([["B-PER", "E-PER"]], [["B-PER", "I-PER"]])
    assert m.compute()["sentences"] == 0.0


# --- tokens, unseen words, log-loss ----------------------------------------------------------


def test_unseen_accuracy_by_hand() -> None:
    seen = {"the", "bank", "of", "rose", "in"}
    tokens = [["the", "Acme", "bank", "rose"], ["Zorg", "of", "Xylo", "in", "May"]]
    gold = [["O", "B-ORG", "O", "O"], ["B-PER", "O", "B-ORG", "O", "O"]]
    pred = [["O", "B-ORG", "O", "O"], ["B-LOC", "O", "B-ORG", "O", "B-PER"]]
    m = TaggingMetrics("BIO", seen_words=seen)
    m.update(gold, pred, tokens=tokens)
    out = m.compute()
    # unseen: Acme ✓, Zorg ✗, Xylo ✓, May ✗ -> 2 / 4; 4 of 9 tokens unseen.
    assert out["unseen_accuracy"] == 0.5
    assert out["unseen_rate"] == pytest.approx(4 / 9)
    assert out["accuracy"] == pytest.approx(7 / 9)


def test_unseen_keys_only_with_seen_words_and_tokens() -> None:
    gold = [["O", "B-PER"]]
    no_words = TaggingMetrics("BIO", seen_words={"a"})
    no_words.update(gold, gold)
    no_vocab = TaggingMetrics("BIO")
    no_vocab.update(gold, gold, tokens=[["a", "b"]])
    for m in (no_words, no_vocab):
        assert "unseen_accuracy" not in m.compute()
        assert "unseen_rate" not in m.compute()


def test_log_loss_is_nll_per_token() -> None:
    m = TaggingMetrics("BIO")
    assert "log_loss" not in m.compute()
    m.update([["O", "B-PER", "I-PER"]], [["O", "B-PER", "I-PER"]], log_loss=1.5)
    m.update([["O"]], [["O"]], log_loss=2.5, num_tokens=5)
    assert m.compute()["log_loss"] == pytest.approx(4.0 / 8)


def test_num_tokens_without_log_loss_is_refused() -> None:
    with pytest.raises(ValueError, match="num_tokens was given without log_loss"):
        TaggingMetrics("BIO").update([["O"]], [["O"]], num_tokens=1)


# --- errors ----------------------------------------------------------------------------------


def test_length_mismatch_names_the_sentence_and_both_lengths() -> None:
    m = TaggingMetrics("BIO")
    m.update([["O"]] * 3, [["O"]] * 3)
    gold = [["O", "O"], ["B-PER", "I-PER", "O"]]
    pred = [["O", "O"], ["B-PER", "I-PER"]]
    with pytest.raises(
        ValueError, match=r"sentence 1 of the batch \(4 overall\): gold has 3 labels but pred has 2"
    ):
        m.update(gold, pred)
    assert m.compute()["sentences"] == 3.0  # nothing of the bad batch was counted


def test_token_length_mismatch_names_the_sentence() -> None:
    with pytest.raises(ValueError, match=r"sentence 0 of the batch .*2 labels but 1 tokens"):
        TaggingMetrics("BIO").update([["O", "O"]], [["O", "O"]], tokens=[["a"]])


def test_sentence_count_mismatch() -> None:
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted sentences"):
        TaggingMetrics("BIO").update([["O"], ["O"]], [["O"]])


def test_unknown_scheme() -> None:
    with pytest.raises(ValueError, match="unknown tagging scheme"):
        TaggingMetrics("BILOU-X")


# --- accumulation and merging ----------------------------------------------------------------


def test_accumulation_equals_one_update() -> None:
    gold, pred = CASES["BIOES"]
    whole = scored("BIOES", gold, pred)
    m = TaggingMetrics("BIOES")
    for lo, hi in [(0, 2), (2, 3), (3, 3), (3, 7)]:
        m.update(gold[lo:hi], pred[lo:hi])
    assert m.compute() == whole


def test_merge_equals_one_accumulator() -> None:
    gold, pred = CASES["BIO"]
    tokens = [[f"w{i}" for i in range(len(g))] for g in gold]
    seen = {"w0", "w2"}
    one = TaggingMetrics("BIO", seen_words=seen)
    one.update(gold, pred, tokens=tokens, log_loss=3.0)
    a = TaggingMetrics("BIO", seen_words=seen)
    b = TaggingMetrics("BIO", seen_words=seen)
    a.update(gold[:4], pred[:4], tokens=tokens[:4], log_loss=1.0)
    b.update(gold[4:], pred[4:], tokens=tokens[4:], log_loss=2.0)
    assert a.copy().merge(b).compute() == one.compute()
    # through the wire: states survive pickle and JSON, into an accumulator without seen_words
    merged = TaggingMetrics("bio")
    merged.merge(pickle.loads(pickle.dumps(a.state_dict())))
    merged.merge(json.loads(json.dumps(b.state_dict())))
    assert merged.compute() == one.compute()


def test_state_dict_round_trip_and_reset() -> None:
    gold, pred = CASES["BIO"]
    m = TaggingMetrics("BIO")
    m.update(gold, pred, log_loss=2.0)
    other = TaggingMetrics("BIO")
    other.load_state_dict(m.state_dict())
    assert other.compute() == m.compute()
    m.reset()
    assert m.compute() == TaggingMetrics("BIO").compute()


def test_merge_refuses_another_scheme() -> None:
    with pytest.raises(ValueError, match="cannot merge metrics of the BIOES scheme into BIO"):
        TaggingMetrics("BIO").merge(TaggingMetrics("BIOES"))


def test_gather_outside_distributed_is_a_copy() -> None:
    m = TaggingMetrics("BIO")
    m.update(*CASES["BIO"])
    g = m.gather()
    assert g is not m
    assert g.compute() == m.compute()


def test_gather_in_a_one_process_group(tmp_path: Path) -> None:
    dist = pytest.importorskip("torch.distributed")
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("no gloo backend")
    m = TaggingMetrics("BIO")
    m.update(*CASES["BIO"])
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        g = m.gather()
    finally:
        dist.destroy_process_group()
    assert g.compute() == m.compute()


def test_empty_accumulator_is_all_zeros() -> None:
    out = TaggingMetrics("BIOES").compute()
    assert out["f1"] == out["macro_f1"] == out["accuracy"] == 0.0
    assert not any(k.endswith("/f1") for k in out)


# --- reports ---------------------------------------------------------------------------------


def test_report_lists_every_type_and_the_summary_rows() -> None:
    m = TaggingMetrics("BIO", seen_words={"w0"})
    gold, pred = CASES["BIO"]
    tokens = [[f"w{i}" for i in range(len(g))] for g in gold]
    m.update(gold, pred, tokens=tokens, log_loss=4.2)  # 21 tokens
    out = m.compute()
    text = format_report(out)
    lines = text.splitlines()
    for t in ("LOC", "MISC", "ORG", "PER"):
        assert any(line.startswith(t) for line in lines), t
    assert any(line.startswith("micro avg") for line in lines)
    assert any(line.startswith("macro avg") for line in lines)
    assert f"{out['f1']:.4f}" in text
    assert "accuracy" in text
    assert "unseen accuracy" in text
    assert "log-loss          0.2000" in text
    # an extra requested type gets a row of zeros
    assert any(
        line.startswith("DATE") and line.split()[1:] == ["0.0000", "0.0000", "0.0000", "0"]
        for line in format_report(out, types=["PER", "DATE"]).splitlines()
    )


def test_report_mentions_invalid_sequences() -> None:
    out = scored("BIO", [["O", "B-A"]], [["O", "I-A"]])
    assert "pred sequences invalid in the scheme: 1" in format_report(out)


def test_report_json_round_trips(tmp_path: Path) -> None:
    m = TaggingMetrics("BIO")
    m.update(*CASES["BIO"], log_loss=1.0)
    out = m.compute()
    path = write_report_json(out, tmp_path / "ckpt" / "metrics.json")
    text = path.read_text()
    loaded = json.loads(text)
    assert loaded == out
    assert list(loaded) == sorted(out)
    assert all(isinstance(v, float) for v in loaded.values())
    assert format_report(loaded) == format_report(out)

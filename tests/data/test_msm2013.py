"""The #MSM2013 reader: alignment, type normalisation, malformed lines, the test file, splits."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

from crfhead.data import Sentence, data_dir
from crfhead.data.msm2013 import (
    ALIGNED_CASE_INSENSITIVE,
    ALIGNED_EXACT,
    ALIGNED_HASH_STRIPPED,
    BLANK_LINES,
    DRAFT_ANNOTATIONS_IGNORED,
    EMPTY_MENTION,
    NO_TYPE,
    RECOVERED_FROM_TEXT,
    TYPE_NORMALISED,
    UNBALANCED_QUOTE,
    UNKNOWN_TYPE,
    UNMATCHED,
    MSM2013FormatError,
    kfold_msm2013,
    read_msm2013,
    read_msm2013_test,
    split_msm2013,
)
from crfhead.schemes import is_valid, tags_to_spans

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "msm2013"


def _ids(sentences: list[Sentence]) -> list[str]:
    return [s.id or "" for s in sentences]


def _synthetic(n: int) -> list[Sentence]:
    return [Sentence(tokens=["x"], tags=["O"], id=str(i)) for i in range(1, n + 1)]


# --- fixtures -----------------------------------------------------------------------------------


def test_small_file_tokens_tags_and_ids() -> None:
    with pytest.warns(UserWarning, match="mentions matching no token span"):
        sents, report = read_msm2013(FIX / "train_small.tsv")
    got = {s.id: list(zip(s.tokens, s.tags or [], strict=True)) for s in sents}
    assert list(got) == ["101", "102", "103", "104", "105", "106", "107", "109"]
    assert all(s.doc_id is None for s in sents)
    # CSV unquoting: outer quotes dropped, "" -> "; exact, then case-insensitive alignment.
    assert got["101"] == [
        ("Ann", "B-PER"), ("Lee", "I-PER"), (",", "O"), ("live", "O"), ("in", "O"),
        ("Paris", "B-LOC"), (",", "O"), ('"', "O"), ("wow", "O"), ('"', "O"), ("!", "O"),
    ]  # fmt: skip
    # '#' stripped (and case folded); Org/ normalised.
    assert got["102"] == [
        ("RT", "O"), ("#WikiLeaks", "B-ORG"), ("and", "O"), ("Acme", "B-ORG"), ("news", "O")
    ]  # fmt: skip
    # MISRC/ and MISC: normalised; no type, unknown type, empty mention skipped.
    assert got["103"] == [
        ("Star", "B-MISC"), ("Wars", "I-MISC"), ("and", "O"), ("Dune", "B-MISC"), ("tonight", "O")
    ]  # fmt: skip
    # a repeated mention takes the next free occurrence; the third Ann has none left.
    assert got["104"] == [("Ann", "B-PER"), ("met", "O"), ("Ann", "B-PER")]
    # "York" may not overlap "New York"; "Gaza" is glued into "Gaza-bound".
    assert got["105"] == [("New", "B-LOC"), ("York", "I-LOC"), (",", "O"), ("Gaza-bound", "O")]
    # an annotation item that spilled into the text field is moved back.
    assert got["106"] == [("MS", "B-ORG"), ("rocks", "O"), (",", "O"), ("Ric", "B-PER")]
    # a quote at one end only: kept verbatim.
    assert got["107"] == [("Bob", "B-PER"), ("said", "O"), ('hi"', "O")]
    assert got["109"] == [("Just", "O"), ("text", "O")]

    assert report.sentences == 8 and report.tokens == 37
    assert report.skipped_empty == 1  # tweet 108, text ""
    assert dict(report.notes) == {
        ALIGNED_EXACT: 10,
        ALIGNED_CASE_INSENSITIVE: 1,
        ALIGNED_HASH_STRIPPED: 1,
        UNMATCHED: 4,
        NO_TYPE: 1,
        UNKNOWN_TYPE: 1,
        EMPTY_MENTION: 1,
        f"{TYPE_NORMALISED}: Org/ -> ORG/": 1,
        f"{TYPE_NORMALISED}: MISRC/ -> MISC/": 1,
        f"{TYPE_NORMALISED}: MISC: -> MISC/": 1,
        RECOVERED_FROM_TEXT: 1,
        UNBALANCED_QUOTE: 1,
        BLANK_LINES: 1,
    }
    assert report.examples[UNMATCHED] == [
        "104: PER/Ann",
        "105: LOC/York",
        "105: LOC/Gaza",
        "108: PER/Nobody",
    ]
    assert report.examples[ALIGNED_CASE_INSENSITIVE] == ["101: LOC/paris ~ 'Paris'"]
    assert report.examples[ALIGNED_HASH_STRIPPED] == ["102: ORG/wikileaks ~ '#WikiLeaks'"]
    assert report.examples[NO_TYPE] == ["103: 'championship'"]
    assert report.examples[UNKNOWN_TYPE] == ["103: 'FOO/bar'"]
    assert report.examples[EMPTY_MENTION] == ["103: 'PER/'"]
    assert report.examples[f"{TYPE_NORMALISED}: Org/ -> ORG/"] == ["102: 'Org/Acme' -> ORG/Acme"]
    assert report.examples[f"{TYPE_NORMALISED}: MISC: -> MISC/"] == [
        "103: 'MISC:Dune' -> MISC/Dune"
    ]
    assert report.examples[RECOVERED_FROM_TEXT] == ["106: PER/Ric"]
    assert report.examples[UNBALANCED_QUOTE] == ["107: 'Bob said hi\"'"]
    summary = report.summary()
    assert "4 mentions matching no token span" in summary and "105: LOC/Gaza" in summary


@pytest.mark.parametrize("scheme", ["BIOES", "BIOUL", "IOB1", "IO"])
def test_small_file_other_schemes(scheme: str) -> None:
    bio, _ = read_msm2013(FIX / "train_small.tsv", warn=False)
    other, _ = read_msm2013(FIX / "train_small.tsv", scheme=scheme, warn=False)
    for a, b in zip(bio, other, strict=True):
        assert b.tags is not None and a.tags is not None
        assert is_valid(b.tags, scheme)
        if scheme != "IO":  # IO merges adjacent same-type entities by design
            assert tags_to_spans(b.tags, scheme) == tags_to_spans(a.tags, "BIO")
    first = other[0].tags
    expected = {
        "BIOES": ["B-PER", "E-PER", "S-LOC"],
        "BIOUL": ["B-PER", "L-PER", "U-LOC"],
        "IOB1": ["I-PER", "I-PER", "I-LOC"],
        "IO": ["I-PER", "I-PER", "I-LOC"],
    }[scheme]
    assert first is not None and [first[0], first[1], first[5]] == expected


def test_unknown_scheme_is_named() -> None:
    with pytest.raises(ValueError, match="unknown tagging scheme 'BILOU-X'"):
        read_msm2013(FIX / "train_small.tsv", scheme="BILOU-X")


def test_cr_line_endings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all exact: nothing to warn about
        sents, report = read_msm2013(FIX / "train_cr.tsv")
    assert [(s.id, s.tokens, s.tags) for s in sents] == [
        ("1", ["Ann", "here"], ["B-PER", "O"]),
        ("2", ["In", "Rome"], ["O", "B-LOC"]),
        ("3", ["mixed", "endings"], ["O", "O"]),
    ]
    assert dict(report.notes) == {ALIGNED_EXACT: 2}


def test_bad_field_count_names_file_and_line() -> None:
    with pytest.raises(MSM2013FormatError, match=r"bad_fields\.tsv, line 2: expected 3 tab-sep"):
        read_msm2013(FIX / "bad_fields.tsv")
    assert issubclass(MSM2013FormatError, ValueError)


def test_empty_id_names_file_and_line() -> None:
    with pytest.raises(MSM2013FormatError, match=r"empty_id\.tsv, line 2: empty tweet id"):
        read_msm2013(FIX / "empty_id.tsv")


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.tsv"):
        read_msm2013(tmp_path / "nope.tsv")
    with pytest.raises(FileNotFoundError, match=r"nope\.tsv"):
        read_msm2013_test(tmp_path / "nope.tsv")


def test_default_path_goes_through_crfhead_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"TweetsTrainingSetCH\.tsv does not exist"):
        read_msm2013()
    (tmp_path / "msm2013").mkdir()
    (tmp_path / "msm2013" / "TweetsTestSetCH.tsv").write_bytes(
        (FIX / "test_small.tsv").read_bytes()
    )
    sents, _ = read_msm2013_test(warn=False)
    assert len(sents) == 4


def test_test_file_reader() -> None:
    with pytest.warns(UserWarning, match="1 empty sentences skipped"):
        sents, report = read_msm2013_test(FIX / "test_small.tsv")
    assert [(s.id, s.tokens, s.tags, s.doc_id) for s in sents] == [
        ("201", ["Hello", ",", "world"], None, None),
        ("202", ["Ann", "says", "hi"], None, None),
        ("203", ["no", "draft", "here"], None, None),
        ("205", ["plain", "text"], None, None),
    ]
    assert report.skipped_empty == 1
    assert dict(report.notes) == {DRAFT_ANNOTATIONS_IGNORED: 2}
    assert report.examples[DRAFT_ANNOTATIONS_IGNORED] == ["202: 'PER/Ann;'", "203: ''"]


def test_test_file_bad_field_count_names_file_and_line() -> None:
    with pytest.raises(MSM2013FormatError, match=r"test_bad\.tsv, line 2: expected 2 or 3 tab-sep"):
        read_msm2013_test(FIX / "test_bad.tsv")


# --- splits (synthetic ids 1..2815, the same ids as the real training file) -----------------------


def test_split_sizes_partition_and_pinned_ids() -> None:
    sents = _synthetic(2815)
    train, dev, test = split_msm2013(sents)
    assert (len(train), len(dev), len(test)) == (2251, 282, 282)
    ids = [set(_ids(part)) for part in (train, dev, test)]
    assert ids[0].isdisjoint(ids[1]) and ids[0].isdisjoint(ids[2]) and ids[1].isdisjoint(ids[2])
    assert ids[0] | ids[1] | ids[2] == set(_ids(sents))
    for part in (train, dev, test):  # each part in tweet-id order
        assert [int(i) for i in _ids(part)] == sorted(int(i) for i in _ids(part))
    # Pinned: the split must not change across machines or Python versions.
    assert _ids(dev)[:5] == ["20", "21", "45", "59", "65"]
    assert _ids(test)[:5] == ["4", "6", "13", "15", "19"]


def test_split_is_deterministic_and_seeded() -> None:
    sents = _synthetic(500)
    shuffled = sents[:]
    random.Random(0).shuffle(shuffled)
    a = [_ids(p) for p in split_msm2013(sents, seed=13)]
    b = [_ids(p) for p in split_msm2013(shuffled, seed=13)]  # input order does not matter
    c = [_ids(p) for p in split_msm2013(sents, seed=14)]
    assert a == b
    assert a[1] != c[1] and a[2] != c[2]
    train, dev, test = split_msm2013(sents, dev=0.2, test=0.0)
    assert (len(train), len(dev), len(test)) == (400, 100, 0)


def test_split_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="sum to less than 1"):
        split_msm2013(_synthetic(10), dev=0.5, test=0.5)
    with pytest.raises(ValueError, match="duplicate sentence id '1'"):
        split_msm2013(_synthetic(3) + _synthetic(1))
    with pytest.raises(ValueError, match="needs an id"):
        split_msm2013([Sentence(tokens=["x"])])


def test_kfold_partitions() -> None:
    sents = _synthetic(2815)
    folds = kfold_msm2013(sents)
    assert len(folds) == 5
    all_ids = set(_ids(sents))
    seen: list[str] = []
    for train, test in folds:
        assert (len(train), len(test)) == (2252, 563)
        assert set(_ids(train)).isdisjoint(_ids(test))
        assert set(_ids(train)) | set(_ids(test)) == all_ids
        seen += _ids(test)
    assert sorted(seen) == sorted(all_ids) and len(seen) == len(all_ids)
    # uneven sizes differ by at most one; seeded and deterministic
    sizes = [len(test) for _, test in kfold_msm2013(_synthetic(12), k=5)]
    assert sizes == [3, 3, 2, 2, 2]
    again = [_ids(t) for _, t in kfold_msm2013(sents)]
    other = [_ids(t) for _, t in kfold_msm2013(sents, seed=1)]
    assert again == [_ids(t) for _, t in folds] and again != other
    with pytest.raises(ValueError, match="k=1 folds"):
        kfold_msm2013(sents, k=1)


# --- the shared copy ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> tuple[list[Sentence], dict[str, int]]:
    if not (data_dir() / "msm2013").is_dir():
        pytest.skip(f"shared data not found under {data_dir()}")
    sents, report = read_msm2013(warn=False)
    return sents, dict(report.notes)


def test_real_training_file_counts(real: tuple[list[Sentence], dict[str, int]]) -> None:
    sents, notes = real
    assert len(sents) == 2815
    assert _ids(sents) == [str(i) for i in range(1, 2816)]
    exact, case = notes[ALIGNED_EXACT], notes[ALIGNED_CASE_INSENSITIVE]
    hashed, unmatched = notes[ALIGNED_HASH_STRIPPED], notes[UNMATCHED]
    # Measured (spans may not be reused; tweet 217's spilled PER/Ric counted too).
    assert (exact, case, hashed, unmatched) == (3125, 3, 2, 73)
    assert notes[RECOVERED_FROM_TEXT] == 1 and notes[NO_TYPE] == 1
    assert exact + case + hashed + unmatched == 3202 + 1
    # The README: 3,127 of 3,202 exact, "a few" otherwise, "about 70" unmatched.
    assert abs(exact - 3127) <= 5 and 1 <= case + hashed <= 10 and abs(unmatched - 70) <= 5
    assert {k: v for k, v in notes.items() if k.startswith(TYPE_NORMALISED)} == {
        f"{TYPE_NORMALISED}: Org/ -> ORG/": 1,
        f"{TYPE_NORMALISED}: MISRC/ -> MISC/": 1,
        f"{TYPE_NORMALISED}: MISC: -> MISC/": 1,
    }
    entities = sum(len(tags_to_spans(s.tags or [], "BIO")) for s in sents)
    assert entities == exact + case + hashed
    assert all(s.tags is not None and is_valid(s.tags, "BIO") for s in sents)


def test_real_training_file_bioes_and_split(real: tuple[list[Sentence], dict[str, int]]) -> None:
    sents, _ = real
    bioes, _ = read_msm2013(scheme="BIOES", warn=False)
    assert all(s.tags is not None and is_valid(s.tags, "BIOES") for s in bioes)
    train, dev, test = split_msm2013(sents)
    assert (len(train), len(dev), len(test)) == (2251, 282, 282)
    synthetic = split_msm2013(_synthetic(2815))
    assert [_ids(p) for p in (train, dev, test)] == [_ids(p) for p in synthetic]


def test_real_test_file() -> None:
    if not (data_dir() / "msm2013").is_dir():
        pytest.skip(f"shared data not found under {data_dir()}")
    sents, report = read_msm2013_test(warn=False)
    assert len(sents) == 1526 and report.skipped_empty == 0
    assert all(s.tags is None for s in sents)
    assert dict(report.notes) == {DRAFT_ANNOTATIONS_IGNORED: 28}
    assert sents[0].id == "2560" and sents[0].tokens[:3] == ["Plans", "of", "rattled"]

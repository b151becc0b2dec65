"""Readers on hostile input: a byte-order mark, bytes that are not UTF-8, megabyte lines, empty
splits, a file without a tag column, ``-DOCSTART-`` inside a sentence.

Each case goes through every reader it applies to (CoNLL, #MSM2013, ``predict.py``'s input, the
corpora the data module loads), since they share :mod:`crfhead.data.textfile`.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from crfhead.data import CoNLLFormatError, read_conll, read_msm2013, read_msm2013_test
from crfhead.data.corpora import CoNLLCorpus, FinanceCorpus, MSM2013Corpus
from crfhead.data.msm2013 import MSM2013FormatError
from crfhead.data.textfile import quote, read_lines

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from predict import read_input

BOM = "\ufeff"
CONLL = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
MSM = "1\tPER/Ann;\tAnn is here\n2\t\tnothing here\n3\tLOC/Rome;\tIn Rome\n"


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


# --- a UTF-8 byte-order mark is stripped ---------------------------------------------------------


def test_bom_is_stripped_by_the_conll_reader(tmp_path: Path) -> None:
    path = _write(tmp_path / "bom.txt", BOM + CONLL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sents, report = read_conll(path)
    assert [s.tokens for s in sents] == [["EU", "rejects"], ["Peter"]]
    assert report.documents == 1
    assert sents[0].id == "bom.txt:3"


def test_bom_is_stripped_by_predict_input(tmp_path: Path) -> None:
    text = _write(tmp_path / "in.txt", BOM + "Ann is here\nIn Rome\n")
    assert [s.tokens for s in read_input(text, "text")] == [["Ann", "is", "here"], ["In", "Rome"]]
    conll = _write(tmp_path / "in.conll", BOM + "-DOCSTART-\n\nAnn\nis\n")
    assert [s.tokens for s in read_input(conll, "conll")] == [["Ann", "is"]]


def test_bom_is_stripped_by_the_msm2013_reader(tmp_path: Path) -> None:
    sents, _ = read_msm2013(_write(tmp_path / "t.tsv", BOM + MSM), warn=False)
    assert [s.id for s in sents] == ["1", "2", "3"]


# --- a byte that is not UTF-8 names the file and line ---------------------------------------------

_LATIN1 = "caf\u00e9".encode("latin-1")


@pytest.mark.parametrize(
    ("name", "content", "where", "read"),
    [
        (
            "bad.txt",
            b"EU B-ORG\n\nPeter B-PER\n" + _LATIN1 + b" O\n",
            "line 4, column 4",
            read_conll,
        ),
        (
            "bad.tsv",
            b"1\tPER/Ann;\tAnn\r\n2\t\t" + _LATIN1 + b"\r\n3\t\tx y\r\n",
            "line 2, column 7",
            read_msm2013,
        ),
        (
            "bad_test.tsv",
            b"1\tAnn\r2\tx\r3\t" + _LATIN1 + b"\r",
            "line 3, column 6",
            read_msm2013_test,
        ),
        (
            "bad_in.txt",
            b"Ann is here\n\n" + _LATIN1 + b" is open\n",
            "line 3, column 4",
            lambda p: read_input(p, "text"),
        ),
        (
            "bad_in.conll",
            b"Ann\n\nis\n" + _LATIN1 + b"\n",
            "line 4, column 4",
            lambda p: read_input(p, "conll"),
        ),
    ],
)
def test_non_utf8_byte_names_file_and_line(
    tmp_path: Path, name: str, content: bytes, where: str, read: Callable[[Path], object]
) -> None:
    path = _write(tmp_path / name, content)
    with pytest.raises(ValueError, match=rf"{name}, {where}: not UTF-8 \(byte 0xe9\)") as info:
        read(path)
    assert not isinstance(info.value, UnicodeDecodeError)
    assert "caf\\\\xe9" in str(info.value)  # the line is quoted, the bad byte escaped


def test_utf16_file_is_named_as_such(tmp_path: Path) -> None:
    path = _write(tmp_path / "wide.txt", "EU B-ORG\n".encode("utf-16"))
    with pytest.raises(ValueError, match=r"wide\.txt, line 1, column 1: not UTF-8.*UTF-16"):
        read_conll(path)


def test_read_lines_ends_lines_as_the_readers_did(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.txt", BOM + "a\r\nb\rc\n\nd\u2028e\n")
    assert read_lines(path) == ["a", "b", "c", "", "d\u2028e"]
    assert read_lines(_write(tmp_path / "empty.txt", b"")) == []


# --- an error quotes at most ~200 characters of the line ------------------------------------------

HUGE = "x" * 1_000_000


@pytest.mark.parametrize(
    ("content", "error", "read"),
    [
        # a line with another column count than the first
        (f"EU B-ORG\n{HUGE} a B-ORG\n", CoNLLFormatError, read_conll),
        # a 1 MB tag outside the scheme
        (f"EU B-ORG\nrejects {HUGE}\n", CoNLLFormatError, read_conll),
        # a 1 MB line that has no tab at all
        (f"1\tPER/Ann;\tAnn\n{HUGE}\n", MSM2013FormatError, read_msm2013),
    ],
)
def test_error_quotes_at_most_200_characters_of_a_huge_line(
    tmp_path: Path, content: str, error: type[Exception], read: Callable[[Path], object]
) -> None:
    path = _write(tmp_path / "huge.txt", content)
    with pytest.raises(error, match=r"huge\.txt, line 2") as info:
        read(path)
    message = str(info.value)
    assert len(message) < 200 + len(str(path)) + 200, len(message)
    assert "characters in all)" in message


def test_non_utf8_error_quotes_at_most_200_characters(tmp_path: Path) -> None:
    path = _write(tmp_path / "huge.txt", b"EU B-ORG\n" + HUGE.encode() + b"\xff\n")
    with pytest.raises(ValueError, match=r"huge\.txt, line 2, column 1000001") as info:
        read_conll(path)
    assert len(str(info.value)) < 600


def test_quote() -> None:
    assert quote("abc") == "'abc'"
    assert quote("a" * 201) == repr("a" * 200) + "... (201 characters in all)"
    assert quote("abcdef", limit=3) == "'abc'... (6 characters in all)"


# --- an empty training file or split is an error naming it ---------------------------------------


@pytest.mark.filterwarnings("ignore:.*empty sentences skipped")
@pytest.mark.parametrize("empty", ["train", "dev", "test"])
@pytest.mark.parametrize("content", ["", "\n\n", "-DOCSTART- -X- -X- O\n\n"])
def test_empty_conll_split_is_named(tmp_path: Path, empty: str, content: str) -> None:
    files = {
        split: str(_write(tmp_path / f"{split}.txt", content if split == empty else CONLL))
        for split in ("train", "dev", "test")
    }
    with pytest.raises(ValueError, match=rf"{empty}\.txt.*the {empty} split has no sentences"):
        CoNLLCorpus(**files).load()


def test_empty_msm2013_file_or_split_is_named(tmp_path: Path) -> None:
    empty = _write(tmp_path / "empty.tsv", "")
    with pytest.raises(ValueError, match=r"empty\.tsv.*the train split has no sentences"):
        MSM2013Corpus(path=str(empty)).load()
    three = _write(tmp_path / "three.tsv", MSM)  # 10 % of 3 tweets is no dev tweet
    with pytest.raises(ValueError, match=r"three\.tsv.*the dev split has no sentences"):
        MSM2013Corpus(path=str(three)).load()


def test_empty_finance_split_is_named() -> None:
    with pytest.raises(ValueError, match=r"FinanceCorpus.*the train split has no sentences"):
        FinanceCorpus(train_docs=0, dev_docs=1, test_docs=1).load()


def test_empty_training_file_fails_before_lightning(tmp_path: Path) -> None:
    from crfhead.data.datamodule import TaggingDataModule

    files = {s: str(_write(tmp_path / f"{s}.txt", CONLL)) for s in ("dev", "test")}
    files["train"] = str(_write(tmp_path / "train.txt", ""))
    with pytest.raises(ValueError, match=r"train\.txt.*the train split has no sentences"):
        TaggingDataModule(corpus=CoNLLCorpus(**files))


# --- a one-column file has no tag column; -DOCSTART- inside a sentence warns ----------------------


@pytest.mark.parametrize("tokens", ["EU\nrejects\n", "O\nO\n", "-DOCSTART-\n\nB-PER\nO\n"])
def test_one_column_file_has_no_tag_column(tmp_path: Path, tokens: str) -> None:
    path = _write(tmp_path / "tokens.txt", tokens)
    first = 3 if tokens.startswith("-DOCSTART-") else 1
    with pytest.raises(CoNLLFormatError, match=rf"tokens\.txt, line {first}: no tag column"):
        read_conll(path)


def test_one_column_corpus_file_has_no_tag_column(tmp_path: Path) -> None:
    files = {s: str(_write(tmp_path / f"{s}.txt", CONLL)) for s in ("train", "dev")}
    files["test"] = str(_write(tmp_path / "test.txt", "EU\nrejects\n"))
    with pytest.raises(CoNLLFormatError, match=r"test\.txt, line 1: no tag column"):
        CoNLLCorpus(**files).load()


def test_one_column_file_is_fine_unlabelled_and_for_predict(tmp_path: Path) -> None:
    path = _write(tmp_path / "tokens.txt", "EU\nrejects\n\nPeter\n")
    sents, _ = read_conll(path, tag_col=None)
    assert [(s.tokens, s.tags) for s in sents] == [(["EU", "rejects"], None), (["Peter"], None)]
    assert [s.tokens for s in read_input(path, "conll")] == [["EU", "rejects"], ["Peter"]]
    # a labelled file given to predict: the tags are ignored, not an error
    labelled = _write(tmp_path / "labelled.txt", CONLL)
    assert [s.tokens for s in read_input(labelled, "conll")] == [["EU", "rejects"], ["Peter"]]


def test_docstart_inside_a_sentence_warns(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.txt", "EU B-ORG\nrejects O\n-DOCSTART- -X- -X- O\nPeter B-PER\n")
    with pytest.warns(UserWarning, match=r"(?s)-DOCSTART- inside a sentence.*doc\.txt, line 3"):
        sents, report = read_conll(path)
    assert [s.tokens for s in sents] == [["EU", "rejects"], ["Peter"]]
    assert report.documents == 1


def test_docstart_inside_a_sentence_warns_in_predict(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.conll", "EU\nrejects\n-DOCSTART-\nPeter\n")
    with pytest.warns(UserWarning, match=r"(?s)-DOCSTART- inside a sentence.*doc\.conll, line 3"):
        sents = read_input(path, "conll")
    assert [s.tokens for s in sents] == [["EU", "rejects"], ["Peter"]]


def test_docstart_after_a_blank_line_does_not_warn(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.txt", CONLL + "\n" + CONLL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sents, report = read_conll(path)
    assert len(sents) == 4 and report.documents == 2


# --- end to end: train.py and predict.py --------------------------------------------------------


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 1
  default_root_dir: {tmp_path}
  accelerator: cpu
  logger: false
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {tmp_path}/ckpt
        save_last: true
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
    init_args:
      train_docs: 2
      dev_docs: 1
      test_docs: 1
  batch_size: 8
"""
    )
    return config


def test_train_on_an_empty_training_file_names_it(tmp_path: Path) -> None:
    from train import main as train  # type: ignore[attr-defined]

    dev = _write(tmp_path / "dev.txt", CONLL)
    empty = _write(tmp_path / "train.txt", "-DOCSTART- -X- -X- O\n\n")
    with pytest.raises(ValueError, match=r"train\.txt: the train split has no sentences"):
        train(
            [
                "--config",
                str(_config(tmp_path)),
                "--data.corpus=crfhead.data.corpora.CoNLLCorpus",
                f"--data.corpus.init_args.train={empty}",
                f"--data.corpus.init_args.dev={dev}",
                f"--data.corpus.init_args.test={dev}",
            ]
        )


def test_predict_drops_the_bom_and_names_a_bad_byte(tmp_path: Path) -> None:
    import json

    from predict import main as predict
    from train import main as train  # type: ignore[attr-defined]

    train(["--config", str(_config(tmp_path))])
    ckpt = str(tmp_path / "ckpt" / "last.ckpt")
    out = tmp_path / "out.jsonl"
    for fmt, text in (("text", "marek novak said\n"), ("conll", "marek\nnovak\nsaid\n")):
        source = _write(tmp_path / f"in.{fmt}", BOM + text)
        args = ["--checkpoint", ckpt, "--input", str(source), "--input-format", fmt]
        predict([*args, "--output", str(out)])
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["tokens"] for r in records] == [["marek", "novak", "said"]]
    bad = _write(tmp_path / "bad.txt", b"marek novak said\n" + _LATIN1 + b"\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 2, column 4: not UTF-8"):
        predict(["--checkpoint", ckpt, "--input", str(bad)])

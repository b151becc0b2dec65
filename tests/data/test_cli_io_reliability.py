"""The command line's input and output on hostile input, and the column readers' splitting.

``crfhead predict`` in-process (:func:`crfhead.cli.main`) on a tiny model: JSON nested 100,000 deep
and lone surrogates are one-line errors naming the file and line (status 2, as every other input
error); a FIFO (``--input <(cmd)``) and ``/dev/null`` are read as files, a missing path and a folder
are still refused; JSON lines out stay one record a line under :meth:`str.splitlines`. The CoNLL
and #MSM2013 readers split columns on spaces and tabs only: a no-break space stays in its token.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from helpers import train_tiny_finance

from crfhead.cli import main
from crfhead.data import CoNLLFormatError, read_conll, read_msm2013
from crfhead.data.conll import echo_conll, split_columns, token_lines, write_conll
from crfhead.data.inputs import read_input
from crfhead.data.jsonl import parse_record
from crfhead.data.outputs import json_line
from crfhead.data.sentence import Sentence

# Every character str.splitlines() ends a line at, but "\n" and "\r".
LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_finance(tmp_path_factory.mktemp("tiny"))


def _predict(model: Path, *args: str) -> int:
    return main(["predict", "--model", str(model), *args])


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("crfhead: error:")]
    assert len(lines) == 1, err
    return lines[0]


# --- deep nesting and lone surrogates: one line naming the file and line, status 2 ---------------


def test_deeply_nested_json_is_an_input_error_naming_file_and_line() -> None:
    with pytest.raises(ValueError, match=r"^in\.jsonl:2: JSON nested too deeply") as info:
        parse_record("[" * 100_000, "in.jsonl:2")
    assert len(str(info.value)) < 400


def test_deeply_nested_json_line_exits_2_in_one_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "deep.jsonl"
    source.write_text('{"text": "marek novak said"}\n' + "[" * 100_000 + "\n", encoding="utf-8")
    assert _predict(model, "--input", str(source)) == 2
    line = _error(capsys)
    assert f"{source}:2: JSON nested too deeply" in line and "RecursionError" not in line


@pytest.mark.parametrize(
    ("record", "key"),
    [
        ('{"text": "marek \\ud800 said"}', "text"),
        ('{"tokens": ["marek", "\\udfff"]}', "tokens"),
        ('{"id": "x\\ud800", "text": "marek"}', "id"),
    ],
)
def test_a_lone_surrogate_escape_names_file_line_and_key(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], record: str, key: str
) -> None:
    source = tmp_path / "surrogate.jsonl"
    source.write_text('{"text": "marek novak said"}\n\n' + record + "\n", encoding="utf-8")
    assert _predict(model, "--input", str(source), "--output", str(tmp_path / "out.jsonl")) == 2
    line = _error(capsys)
    assert f"{source}:3: " in line and f'"{key}" holds a lone surrogate' in line
    # Streaming: the lines before the bad one were tagged and written (the blank one as empty).
    written = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["tokens"] for line in written] == [["marek", "novak", "said"], []]


def test_a_surrogate_pair_escape_is_one_character() -> None:
    assert parse_record('{"text": "\\ud83d\\ude00"}', "x:1") == ("\U0001f600", None)


@pytest.mark.parametrize("fmt", ["text", "jsonl", "conll"])
def test_surrogate_bytes_name_file_and_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    source = tmp_path / f"bytes.{fmt}"
    good = '{"text": "said"}' if fmt == "jsonl" else "said"
    source.write_bytes(good.encode() + b"\nmarek \xed\xa0\x80 novak\n")
    assert _predict(model, "--input", str(source), "--input-format", fmt) == 2
    assert f"{source}, line 2, column 7: not UTF-8" in _error(capsys)


# --- what --input accepts: anything readable that is not a folder ---------------------------------


def test_dev_null_is_an_empty_input(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert _predict(model, "--input", os.devnull, "--output", str(out)) == 0
    assert out.read_text(encoding="utf-8") == ""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_read_like_a_file(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w", encoding="utf-8") as pipe:
            pipe.write('{"text": "marek novak said", "id": "a"}\n')

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    out = tmp_path / "out.jsonl"
    assert (
        _predict(model, "--input", str(fifo), "--input-format", "jsonl", "--output", str(out)) == 0
    )
    writer.join(timeout=30)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["tokens"]) for r in records] == [("a", ["marek", "novak", "said"])]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_missing_paths_and_folders_are_still_refused(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _predict(model, "--input", str(tmp_path / "none.txt")) == 2
    assert f"input file not found: {tmp_path / 'none.txt'}" in _error(capsys)
    assert _predict(model, "--input", str(tmp_path)) == 2
    assert f"input is a folder, not a file: {tmp_path}" in _error(capsys)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    assert _predict(model, "--input", str(dangling)) == 2
    assert "input file not found" in _error(capsys)


def test_the_readers_accept_a_character_device() -> None:
    assert read_input(os.devnull, "conll").sentences == []
    assert read_conll(os.devnull, warn=False)[0] == []


# --- JSON lines out: one record a line, whatever the text holds -----------------------------------


def test_json_line_escapes_every_line_break_of_splitlines() -> None:
    text = "a" + "b".join(LINE_BREAKS) + "\n\r"
    line = json_line({"text": text}, f"id{LINE_BREAKS}")
    assert len(line.splitlines()) == 1 and not any(c in line for c in LINE_BREAKS)
    assert json.loads(line) == {"id": f"id{LINE_BREAKS}", "text": text}
    assert json_line({"text": "café"}, None) == '{"text": "café"}'  # still not ASCII-escaped


def test_predict_writes_one_record_per_line(model: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    texts = [f"marek{c}novak said" for c in LINE_BREAKS]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert _predict(model, "--input", str(source), "--output", str(out)) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(texts)
    assert [json.loads(line)["text"] for line in lines] == texts


# --- the column readers split on spaces and tabs only ---------------------------------------------


def test_split_columns_splits_on_spaces_and_tabs_only() -> None:
    assert split_columns(" New\u00a0York \t B-LOC\t") == ["New\u00a0York", "B-LOC"]
    assert split_columns("a\u2028b\x1cc\x0bd O") == ["a\u2028b\x1cc\x0bd", "O"]
    assert split_columns("a\tb c", "\t") == ["a", "b c"]
    assert split_columns(" \t ") == []


def test_a_no_break_space_stays_inside_its_token(tmp_path: Path) -> None:
    path = tmp_path / "nbsp.txt"
    path.write_text("New\u00a0York B-LOC\nrose O\n\nx\u2028y O\n", encoding="utf-8")
    sents, _ = read_conll(path)
    assert [(s.tokens, s.tags) for s in sents] == [
        (["New\u00a0York", "rose"], ["B-LOC", "O"]),
        (["x\u2028y"], ["O"]),
    ]


def test_a_one_column_file_keeps_the_whole_token(tmp_path: Path) -> None:
    path = tmp_path / "one.conll"
    path.write_text("New\u00a0York\n", encoding="utf-8")
    assert [s.tokens for s in read_conll(path, tag_col=None, warn=False)[0]] == [["New\u00a0York"]]
    assert [s.tokens for s in read_input(str(path), "conll").sentences] == [["New\u00a0York"]]


def test_a_wrong_column_count_names_the_line_that_has_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("New\u00a0York B-LOC\nrose O\nfell O extra\n", encoding="utf-8")
    with pytest.raises(
        CoNLLFormatError, match=r"bad\.txt, line 3: expected 2 columns as on line 1"
    ):
        read_conll(path)
    # A no-break space does not add a column: the first line sets the width at 2, not 3.
    path.write_text("rose O\nNew\u00a0York B-LOC\n", encoding="utf-8")
    assert [s.tokens for s in read_conll(path)[0]] == [["rose", "New\u00a0York"]]


def test_a_line_of_other_space_is_a_token_not_a_blank_line(tmp_path: Path) -> None:
    lines = ["a", "\u00a0", "", "b"]  # a no-break space alone is a token (str.strip() drops it)
    assert token_lines(lines) == [0, 1, 3]
    assert echo_conll(lines, [0, 1, 3], ["X", "Y", "Z"], None) == ["a X", "\u00a0 Y", "", "b Z"]
    path = tmp_path / "one.conll"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [s.tokens for s in read_input(str(path), "conll").sentences] == [["a", "\u00a0"], ["b"]]


def test_write_conll_round_trips_a_no_break_space(tmp_path: Path) -> None:
    sents = [Sentence(["New\u00a0York", "rose"], ["B-LOC", "O"], id="s1")]
    write_conll(sents, tmp_path / "out.txt", docstart=False)
    back, _ = read_conll(tmp_path / "out.txt")
    assert [(s.tokens, s.tags) for s in back] == [(sents[0].tokens, sents[0].tags)]
    with pytest.raises(ValueError, match="cannot be written to a column file"):
        write_conll([Sentence(["a\tb"], ["O"], id="s2")], tmp_path / "tab.txt")


def test_msm2013_tokens_keep_a_no_break_space(tmp_path: Path) -> None:
    path = tmp_path / "tweets.tsv"
    path.write_text("1\tLOC/New\u00a0York;\tI love New\u00a0York\n", encoding="utf-8")
    sents, _ = read_msm2013(path, warn=False)
    assert [(s.tokens, s.tags) for s in sents] == [
        (["I", "love", "New\u00a0York"], ["O", "O", "B-LOC"])
    ]

"""Text to tag read in its three formats (:mod:`crfhead.data.inputs`), and tagged text written out
(:mod:`crfhead.data.outputs`, :func:`crfhead.data.conll.echo_conll`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from crfhead.data.conll import echo_conll, parse_conll, read_conll, token_lines
from crfhead.data.inputs import input_format, read_input
from crfhead.data.jsonl import parse_record
from crfhead.data.outputs import json_line, token_tag_lines, write_lines
from crfhead.data.textfile import TextEncodingError, decode_lines, read_lines
from crfhead.data.tokenize import Token

CONLL = "-DOCSTART- -X- O\n\nEU\tNNP\tB-ORG\nrejects  VBZ O \n\nPeter NNP B-PER\n"


class TestReadInput:
    def test_the_format_follows_the_suffix(self) -> None:
        assert [input_format(p) for p in ("a.conll", "a.IOB", "a.jsonl", "a.json", "a.txt")] == [
            "conll",
            "conll",
            "jsonl",
            "jsonl",
            "text",
        ]
        assert input_format("-") == "text" and input_format("a.conll", "jsonl") == "jsonl"

    def test_conll_keeps_its_lines_and_finds_the_token_lines(self, tmp_path: Path) -> None:
        path = tmp_path / "in.conll"
        path.write_text(CONLL, encoding="utf-8")
        read = read_input(str(path), "conll")
        assert [s.tokens for s in read.sentences] == [["EU", "rejects"], ["Peter"]]
        assert read.lines == read_lines(path) and read.token_lines == [2, 3, 5]
        assert read.ids == [s.id for s in read.sentences]
        # The same sentences as the training reader's, without tags.
        sentences, _ = read_conll(path, tag_col=None)
        assert [s.tokens for s in sentences] == [s.tokens for s in read.sentences]

    def test_text_and_json_lines_skip_blank_lines(self, tmp_path: Path) -> None:
        text = tmp_path / "in.txt"
        text.write_text("Ann is here\n\n  \nIn Rome\n", encoding="utf-8")
        read = read_input(str(text), "text")
        assert read.items == ["Ann is here", "In Rome"]
        assert read.ids == [f"{text}:1", f"{text}:4"]
        assert read_input(str(text), "text", tokenized=True).items[1] == ["In", "Rome"]
        jsonl = tmp_path / "in.jsonl"
        jsonl.write_text('{"id": 7, "text": "a b"}\n\n{"tokens": ["c"]}\n', encoding="utf-8")
        read = read_input(str(jsonl), "jsonl")
        assert (read.items, read.ids) == (["a b", ["c"]], ["7", None])

    def test_stdin_is_read_as_a_file_is(self, monkeypatch: pytest.MonkeyPatch) -> None:
        data = "\ufeffone\r\ntwo\n".encode()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        read = read_input("-", "text")
        assert (read.name, read.items) == ("<stdin>", ["one", "two"])

    def test_what_is_not_a_file_is_named(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match="input file not found"):
            read_input(str(tmp_path / "none.txt"), "text")
        with pytest.raises(IsADirectoryError, match="input is a folder, not a file"):
            read_input(str(tmp_path), "text")


class TestRecords:
    def test_a_record_gives_text_or_tokens_and_its_id(self) -> None:
        assert parse_record('{"text": "a", "id": 3}', "f:1") == ("a", "3")
        assert parse_record('{"tokens": ["a"], "text": "b"}', "f:1") == (["a"], None)

    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ("{", "f:2: not JSON"),
            ("[1]", 'f:2: expected an object with "text" or "tokens"'),
            ('{"tokens": [""]}', 'f:2: "tokens" must be a list of non-empty strings'),
            ('{"text": 1}', 'f:2: expected "text" \\(a string\\) or "tokens"'),
        ],
    )
    def test_a_bad_record_names_where_it_is(self, line: str, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            parse_record(line, "f:2")


class TestLines:
    def test_decode_lines_follows_read_lines(self, tmp_path: Path) -> None:
        data = b"\xef\xbb\xbfa\rb\r\nc\n"
        path = tmp_path / "f.txt"
        path.write_bytes(data)
        assert decode_lines(data, "x") == read_lines(path) == ["a", "b", "c"]
        with pytest.raises(TextEncodingError, match="<stdin>, line 2, column 1: not UTF-8"):
            decode_lines(b"ok\n\xff\n", "<stdin>")

    def test_parse_conll_names_its_source(self) -> None:
        sentences, report = parse_conll(["a B-X", "", "b O"], name="dir/src.conll")
        assert [s.id for s in sentences] == ["src.conll:1", "src.conll:3"]
        assert [s.doc_id for s in sentences] == ["src:0", "src:0"]
        assert report.source == "dir/src.conll"


class TestWriters:
    def test_the_echo_appends_one_column_to_each_token_line(self) -> None:
        lines = CONLL.splitlines()
        at = token_lines(lines)
        assert at == [2, 3, 5]
        out = echo_conll(lines, at, ["B-ORG", "O", "B-PER"], None)
        assert out[:2] == lines[:2] and out[4] == ""
        assert out[2] == "EU\tNNP\tB-ORG\tB-ORG"  # a tab-separated line gets a tab
        assert out[3] == "rejects  VBZ O O"  # trailing whitespace dropped, a space added
        assert echo_conll(["a b"], [0], ["O"], "|") == ["a b|O"]
        with pytest.raises(AssertionError, match="1 tags for 3 token lines"):
            echo_conll(lines, at, ["O"], None)

    def test_json_lines_and_token_tag_lines(self, tmp_path: Path) -> None:
        assert json.loads(json_line({"text": "é"}, "7")) == {"id": "7", "text": "é"}
        assert "é" in json_line({"text": "é"}, None) and '"id"' not in json_line({}, None)
        tokens = [Token("new", 0, 3), Token("york", 4, 8)]
        assert token_tag_lines([("New York", tokens, ["B-LOC", "I-LOC"])]) == [
            "New B-LOC",
            "York I-LOC",
            "",
        ]
        out = tmp_path / "sub" / "out.txt"
        write_lines(str(out), ["a", "b"])
        assert out.read_text(encoding="utf-8") == "a\nb\n"

"""``crfhead predict`` streams: each line of a slow pipe is answered before the next is written.

A real subprocess is fed through a pipe that writes one line, waits until the line's output has been
read (up to 60 s, the model load), and only then writes the next: a reader that waited for a full
batch or the end of the input would never answer, so the test proves streaming. Also: one output line
per input line (blank lines give an empty record, or an empty sentence in ``token tag`` output), the
``read N lines, wrote M lines`` count on stderr, CoNLL sentence by sentence, and a malformed line in
the middle exits 2 naming the file and line after every line before it was written. The oracle of
each record is the same text tagged alone by ``crfhead predict`` on a file.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import train_tiny_finance

from crfhead.cli import main
from crfhead.data.inputs import InputRecord, batches
from crfhead.data.textfile import LineStream

TIMEOUT = 60.0
TEXTS = ["marek novak said", "", "the gruler platform in march 2025", "   ", "aiko ridora"]
EMPTY = {"text": "", "tokens": [], "tags": [], "entities": []}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_finance(tmp_path_factory.mktemp("tiny"))


def _alone(model: Path, tmp_path: Path, text: str) -> dict[str, object]:
    """The oracle: ``text`` tagged by ``crfhead predict`` on a file of that one line."""
    source, out = tmp_path / "one.txt", tmp_path / "one.jsonl"
    source.write_text(text + "\n", encoding="utf-8")
    assert (
        main(["predict", "--model", str(model), "--input", str(source), "--output", str(out)]) == 0
    )
    record: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    record.pop("id")
    return record


class _Process:
    """``crfhead predict ARGS`` with stdin and stdout pipes; stdout lines read by a thread."""

    def __init__(self, model: Path, *args: str) -> None:
        command = [sys.executable, "-m", "crfhead", "predict", "--model", str(model), *args]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "0"},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()

    def receive(self) -> str:
        """The next output line, waiting at most :data:`TIMEOUT` seconds (the input stays open)."""
        try:
            return self.lines.get(timeout=TIMEOUT).decode("utf-8").rstrip("\n")
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(
                "no output line while the input stays open: not streaming"
            ) from None

    def finish(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=TIMEOUT)
        return code, self.proc.stderr.read().decode("utf-8")


def test_each_line_is_answered_before_the_next_is_written(model: Path, tmp_path: Path) -> None:
    process = _Process(model)
    got = []
    for text in TEXTS:
        process.send(text)
        got.append(json.loads(process.receive()))
    code, err = process.finish()
    assert code == 0, err
    assert f"crfhead: read {len(TEXTS)} lines, wrote {len(TEXTS)} lines" in err.splitlines()
    for i, (text, record) in enumerate(zip(TEXTS, got, strict=True)):
        if text.strip():
            assert record.pop("id") == f"<stdin>:{i + 1}"
            assert record == _alone(model, tmp_path, text)
        else:
            assert record == EMPTY


def test_token_tag_output_has_an_empty_sentence_per_blank_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = tmp_path / "in.txt", tmp_path / "out.conll"
    source.write_text("marek novak\n\n\naiko\n", encoding="utf-8")
    args = ["--input", str(source), "--output", str(out), "--output-format", "conll"]
    assert main(["predict", "--model", str(model), *args]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == ["marek B-PERSON", "novak I-PERSON", "", "", "", lines[5], ""]
    assert lines[5].startswith("aiko ")
    assert "crfhead: read 4 lines, wrote 7 lines" in capsys.readouterr().err


def test_conll_streams_sentence_by_sentence(model: Path) -> None:
    process = _Process(model, "--input-format", "conll")
    for line in ("marek B-PER", "novak I-PER", ""):
        process.send(line)
    assert [process.receive() for _ in range(3)] == [
        "marek B-PER B-PERSON",
        "novak I-PER I-PERSON",
        "",
    ]
    process.send("said O")
    code, err = process.finish()
    assert code == 0, err
    assert process.receive() == "said O O"
    assert "crfhead: read 4 lines, wrote 4 lines" in err


def test_a_malformed_line_exits_2_after_writing_every_line_before_it(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = ['{"text": "marek novak said"}', "", '{"tokens": ["aiko", "ridora"], "id": 7}']
    source.write_text("\n".join([*lines, "{bad", '{"text": "said"}']) + "\n", encoding="utf-8")
    code = main(["predict", "--model", str(model), "--input", str(source), "--output", str(out)])
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    # One line; the counts are said on success only.
    assert len(err) == 1 and err[0].startswith(f"crfhead: error: {source}:4: not JSON"), err
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(written) == 3 and written[1] == EMPTY and written[2]["id"] == "7"
    assert written[0]["tokens"] == ["marek", "novak", "said"]


def test_batches_end_at_the_size_or_when_nothing_is_ready() -> None:
    ready = iter([True, False, True, True, True, True])
    assert list(batches(range(6), 3, lambda: next(ready))) == [[0, 1], [2, 3, 4], [5]]
    assert list(batches(range(5), 2)) == [[0, 1], [2, 3], [4]]

    def failing() -> object:
        yield InputRecord("a")
        yield InputRecord("b")
        raise ValueError("line 3")

    got = batches(failing(), 64)
    assert next(got) == [InputRecord("a"), InputRecord("b")]  # given before the error
    with pytest.raises(ValueError, match="line 3"):
        next(got)


def test_a_pipe_is_ready_only_while_it_holds_a_line() -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as source:
        lines = LineStream(source, "<pipe>")  # type: ignore[arg-type]
        os.write(write_end, b"one\ntwo\n")
        assert lines.ready() and next(lines) == "one"
        assert lines.ready() and next(lines) == "two"
        assert not lines.ready()  # the writer has not written more, nor closed the pipe
        os.write(write_end, b"thr")
        assert lines.ready()  # bytes to read (not yet a whole line)
        os.write(write_end, b"ee")
        os.close(write_end)
        assert list(lines) == ["three"] and lines.ready() and lines.count == 3


def test_in_memory_stdin_is_read_in_chunks() -> None:
    lines = LineStream(io.BytesIO(b"\xef\xbb\xbfa\r\nb\rc"), "<stdin>")
    assert list(lines) == ["a", "b", "c"]

"""The ``crfhead`` command (:mod:`crfhead.cli`) on a tiny model trained here, offline.

One model is trained once for the module through ``crfhead train`` (the pass-through to
``train.py``'s LightningCLI); the tests then tag stdin through a real subprocess, round-trip a
multi-column CoNLL file into crfhead's own scorer, check JSON lines offsets, compare ``crfhead
evaluate`` with the report training wrote, reload exported decoders, and check that errors are one
line and a non-zero exit status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from crfhead.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "finance" / "indicator_crf.yaml"
CORPUS = {"train_docs": 4, "dev_docs": 2, "test_docs": 2}
TEXT = "Solenne Power guided to 4 percent growth in the first quarter.\n\nmarek novak said\n"


def _train_args(root: Path) -> list[str]:
    return [
        "--config",
        str(CONFIG),
        "--trainer.max_epochs=3",
        f"--trainer.default_root_dir={root}",
        f"--trainer.logger.init_args.save_dir={root}/runs",
        "--trainer.enable_progress_bar=false",
        *(f"--data.corpus.init_args.{k}={v}" for k, v in CORPUS.items()),
    ]


class Run:
    """The trained model: its folder, best and last checkpoints, test split and test report."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ckpts = sorted(root.rglob("*.ckpt"))
        self.last = next(p for p in self.ckpts if p.name == "last.ckpt")
        self.best = next(p for p in self.ckpts if p.name != "last.ckpt")
        self.report = json.loads(next(root.rglob("test_report.json")).read_text())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("console")
    cwd = Path.cwd()
    os.chdir(root)  # whatever the run writes lands in the temporary folder
    try:
        assert main(["train", *_train_args(root)]) == 0
    finally:
        os.chdir(cwd)
    yield Run(root)


@pytest.fixture(scope="module")
def test_conll(run: Run) -> Path:
    """The run's test split as a 3-column CoNLL file (token, a made-up POS column, gold tag)."""
    from crfhead.data.corpora import FinanceCorpus

    split = FinanceCorpus(**CORPUS).load()["test"]
    lines, doc = ["-DOCSTART- -X- O", ""], split[0].doc_id
    for s in split:
        if s.doc_id != doc:
            lines += ["-DOCSTART- -X- O", ""]
            doc = s.doc_id
        assert s.tags is not None
        lines += [f"{w}\tP{len(w) % 3}\t{t}" for w, t in zip(s.tokens, s.tags, strict=True)]
        lines.append("")
    path = run.root / "test.conll"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cli(
    *args: str, stdin: str | None = None, script: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, script] if script else [sys.executable, "-m", "crfhead"]
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("crfhead: error: "), err
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------- entry points
def test_python_m_crfhead_help_lists_the_subcommands() -> None:
    done = _cli("--help")
    assert done.returncode == 0, done.stderr
    for name in ("train", "test", "predict", "evaluate", "export", "configs"):
        assert name in done.stdout


@pytest.mark.parametrize("command", ["predict", "evaluate", "export", "configs", "plot"])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert f"usage: crfhead {command}" in capsys.readouterr().out


def test_no_subcommand_prints_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: crfhead" in capsys.readouterr().err


def test_importing_the_console_imports_neither_lightning_nor_transformers() -> None:
    code = (
        "import sys, crfhead.cli\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('pytorch_lightning', 'lightning', 'transformers')]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_configs_lists_the_shipped_configs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["configs"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in out]
    assert "finance/indicator_crf.yaml" in names and "base.yaml" in names
    finance = next(line for line in out if line.startswith("finance/indicator_crf.yaml"))
    assert "linear-chain CRF" in finance  # the config's first comment line describes it


def test_train_passthrough_ran_fit_then_test(run: Run) -> None:
    assert run.report["f1"] > 0.0 and "log_loss" in run.report


def test_test_passthrough_tests_a_checkpoint(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    args = [*_train_args(run.root / "again"), f"--ckpt_path={run.best}"]
    assert main(["test", *args]) == 0
    assert "micro avg" in capsys.readouterr().out


# --------------------------------------------------------------------------- predict
def test_predict_reads_stdin_and_writes_entities_with_offsets(run: Run) -> None:
    done = _cli("predict", "--model", str(run.last), stdin=TEXT)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    # one record per input line: a blank line gives an empty one
    assert [r["text"] for r in records] == [line.strip() and line for line in TEXT.splitlines()]
    for r in records:
        assert set(r) >= {"text", "tokens", "tags", "entities"}
        assert len(r["tags"]) == len(r["tokens"])
        for e in r["entities"]:
            assert r["text"][e["start"] : e["end"]] == e["text"]
            assert 0.0 <= e["probability"] <= 1.0
    # the finance rule: lowercase letter runs, no digits or punctuation
    assert records[0]["tokens"][:2] == ["solenne", "power"] and "4" not in records[0]["tokens"]


def test_predict_text_to_conll_is_token_and_tag(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.conll"
    argv = ["predict", "--model", str(run.last), "--input", str(source), "--output", str(out)]
    assert main([*argv, "--output-format", "conll"]) == 0
    blocks = out.read_text(encoding="utf-8").split("\n\n")
    first = [line.split() for line in blocks[0].splitlines()]
    assert [w for w, _ in first][:2] == ["Solenne", "Power"]  # as written in the text
    assert all(len(row) == 2 for row in first)


def test_predict_conll_round_trip_keeps_every_column_and_scores(
    run: Run, test_conll: Path, tmp_path: Path
) -> None:
    from crfhead.data.conll import read_conll
    from crfhead.evaluation.metrics import TaggingMetrics

    out = tmp_path / "pred.conll"
    assert (
        main(
            ["predict", "--model", str(run.best), "--input", str(test_conll), "--output", str(out)]
        )
        == 0
    )
    given = test_conll.read_text(encoding="utf-8").splitlines()
    got = out.read_text(encoding="utf-8").splitlines()
    assert len(got) == len(given)
    for before, after in zip(given, got, strict=True):
        if not before.strip() or before.startswith("-DOCSTART-"):
            assert after == before  # blank and -DOCSTART- lines exactly
        else:
            assert after.rsplit("\t", 1)[0] == before  # every column kept, one appended
    # conlleval-style: gold is the second-to-last column, the prediction the last
    gold, _ = read_conll(out, tag_col=-2, warn=False)
    pred, _ = read_conll(out, tag_col=-1, warn=False)
    metrics = TaggingMetrics("BIO")
    metrics.update([s.tags or [] for s in gold], [s.tags or [] for s in pred])
    scores = metrics.compute()
    # the same entities the training run's test pass scored, on the same checkpoint
    assert scores["f1"] == pytest.approx(run.report["f1"])
    assert scores["accuracy"] == pytest.approx(run.report["accuracy"])


def test_predict_jsonl_in_keeps_ids_and_indexes_joined_tokens(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps({"id": "a", "text": "marek novak said the company grew"})
        + "\n\n"
        + json.dumps({"id": 7, "tokens": ["solenne", "power", "rose"]})
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert (
        main(["predict", "--model", str(run.last), "--input", str(source), "--output", str(out)])
        == 0
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("id") for r in records] == ["a", None, "7"]  # the blank line's empty record
    assert records[2]["text"] == "solenne power rose" and records[2]["tokens"] == [
        "solenne",
        "power",
        "rose",
    ]
    for r in records:
        for e in r["entities"]:
            assert r["text"][e["start"] : e["end"]] == e["text"]


def test_predict_tokenized_text_splits_on_whitespace(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("Q4 revenue rose 12%\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    argv = ["predict", "--model", str(run.last), "--input", str(source), "--output", str(out)]
    assert main([*argv, "--tokenized"]) == 0
    assert json.loads(out.read_text())["tokens"] == ["Q4", "revenue", "rose", "12%"]


def test_predict_py_is_a_thin_wrapper_with_its_old_flags(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text(TEXT, encoding="utf-8")
    done = _cli("--checkpoint", str(run.last), "--input", str(source), script="predict.py")
    assert done.returncode == 0, done.stderr
    assert [len(json.loads(line)["tokens"]) for line in done.stdout.splitlines()] == [10, 0, 3]
    done = _cli(
        "--checkpoint", str(tmp_path / "none.ckpt"), "--input", str(source), script="predict.py"
    )
    assert done.returncode == 2
    assert "checkpoint not found" in _error_line(done.stderr)


# --------------------------------------------------------------------------- evaluate
def test_evaluate_prints_training_s_report(
    run: Run, test_conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    argv = ["evaluate", "--model", str(run.best), "--input", str(test_conll)]
    assert main([*argv, "--output-json", str(report)]) == 0
    out = capsys.readouterr().out
    for row in ("micro avg", "macro avg", "accuracy", "unseen accuracy", "log-loss", "ORG"):
        assert row in out
    got = json.loads(report.read_text())
    for key in ("f1", "precision", "recall", "accuracy", "unseen_accuracy", "macro_f1"):
        assert got[key] == pytest.approx(run.report[key]), key
    assert got["log_loss"] == pytest.approx(run.report["log_loss"], rel=1e-5)


def test_evaluate_in_another_scheme_and_column(
    run: Run, test_conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crfhead.schemes import convert_tags

    # gold in BIOES in the middle column, the POS column last
    lines = []
    block: list[list[str]] = []
    given = test_conll.read_text().splitlines()
    for line in [*given, ""]:
        if line.strip() and not line.startswith("-DOCSTART-"):
            block.append(line.split("\t"))
            continue
        if block:
            tags = convert_tags([row[2] for row in block], "BIO", "BIOES")
            lines += [f"{w} {t} {p}" for (w, p, _), t in zip(block, tags, strict=True)]
            block = []
        lines.append(line)
    path = tmp_path / "bioes.conll"
    assert lines.pop() == ""  # the sentinel
    path.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.json"
    argv = ["evaluate", "--model", str(run.best), "--input", str(path), "--tag-column", "1"]
    assert main([*argv, "--scheme", "BIOES", "--output-json", str(report)]) == 0
    assert json.loads(report.read_text())["f1"] == pytest.approx(run.report["f1"])


# --------------------------------------------------------------------------- export
def _emissions(
    run: Run, batch: int, length: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random emissions padded to ``length``, their mask, and what the model's head decodes."""
    import crfhead

    head = crfhead.load(run.last).model.head
    K = head.num_tags
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    emissions = torch.randn(batch, length, K, generator=g) * 3
    want = head.predict(emissions, mask)
    # padding changes nothing: each row alone, at its own length
    for i, n in enumerate(lengths.tolist()):
        alone = head.predict(emissions[i : i + 1, :n], mask[i : i + 1, :n])
        assert torch.equal(want[i, :n], alone[0])
    return emissions, mask, want


def test_export_torch_program_reloads_and_decodes_the_same(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "decoder.pt2"
    argv = ["export", "--model", str(run.last), "--output", str(out), "--decoder-only"]
    assert main([*argv, "--length", "6"]) == 0
    extra = {"labels.json": ""}
    program = torch.export.load(out, extra_files=extra).module()
    meta = json.loads(extra["labels.json"])
    assert meta["labels"][0] == "O" and meta["scheme"] == "BIO" and meta["length"] == 6
    for batch in (3, 5):  # the batch dimension is dynamic
        emissions, mask, want = _emissions(run, batch, 6)
        assert torch.equal(program(emissions, mask), want)


def test_export_onnx_runs_in_onnxruntime(run: Run, tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    out = tmp_path / "decoder.onnx"
    argv = ["export", "--model", str(run.last), "--output", str(out), "--decoder-only"]
    assert main([*argv, "--length", "5"]) == 0
    session = ort.InferenceSession(str(out))
    meta = json.loads(session.get_modelmeta().custom_metadata_map["crfhead"])
    assert meta["length"] == 5
    emissions, mask, want = _emissions(run, 4, 5)
    (got,) = session.run(None, {"emissions": emissions.numpy(), "mask": mask.numpy()})
    assert torch.equal(torch.from_numpy(got), want)


def test_export_onnx_without_onnxscript_is_one_line(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # import fails
    argv = ["export", "--model", str(run.last), "--output", str(tmp_path / "d.onnx")]
    assert main(argv) == 2
    assert "pip install 'crfhead[onnx]'" in _error_line(capsys.readouterr().err)
    assert not (tmp_path / "d.onnx").exists()


# --------------------------------------------------------------------------- errors
def test_error_missing_model_is_one_line_in_a_real_process(tmp_path: Path) -> None:
    done = _cli("predict", "--model", str(tmp_path / "missing.ckpt"), stdin="a b\n")
    assert done.returncode == 2
    assert "missing.ckpt" in _error_line(done.stderr)


def test_error_not_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"\x00" * 100)
    assert main(["evaluate", "--model", str(bad), "--input", str(bad)]) == 2
    assert str(bad) in _error_line(capsys.readouterr().err)


def test_error_bad_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "--model", "m", "--input-format", "xml"]) == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "content", "fmt", "match"),
    [
        ("bad.jsonl", '{"text": "a"}\n{"txt": 1}\n', "jsonl", r'bad\.jsonl:2: expected "text"'),
        ("bad2.jsonl", "{oops\n", "jsonl", r"bad2\.jsonl:1: not JSON"),
        ("bad.conll", "a X O\nb O\n", "conll", r"bad\.conll, line 2: expected 3 columns"),
        ("bad.txt", b"caf\xe9\n", "text", r"bad\.txt, line 1, column 4: not UTF-8"),
    ],
)
def test_error_malformed_input_names_file_and_line(
    run: Run,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str | bytes,
    fmt: str,
    match: str,
) -> None:
    import re

    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "out"
    argv = ["predict", "--model", str(run.last), "--input", str(path), "--output", str(out)]
    assert main([*argv, "--input-format", fmt]) == 2
    assert re.search(match, _error_line(capsys.readouterr().err))
    # predict streams: the lines before the bad one are written, nothing else
    # (tests/data/test_cli_streaming.py); the file is created at the first write.
    written = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    assert len(written) == (1 if name == "bad.jsonl" else 0), written


def test_error_missing_input_and_verbose_traceback(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["predict", "--model", str(run.last), "--input", str(tmp_path / "none.txt")]
    assert main(argv) == 2
    assert "input file not found" in _error_line(capsys.readouterr().err)
    assert main(["--verbose", *argv]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_plot_draws_the_run_s_learning_curves(run: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    # The training run's metrics (the test passes of other tests log no epochs).
    version = max(run.root.rglob("metrics.csv"), key=lambda p: p.stat().st_size).parent
    out = tmp_path / "curves.png"
    assert main(["plot", str(version), "--output", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

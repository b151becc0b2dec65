"""Configuration errors stop a run before training, in one line naming the key.

A learning rate too large to step with (``lr=1e38`` overflowed inside the optimizer and left a
crash checkpoint to "resume"), a document count below 1 (``train_docs=-1`` trained on all but one
document, silently), any value a constructor refuses (``train.py``: a 47-line traceback, exit 1)
and a key typo (70 lines of usage naming ``fit`` where the user typed ``crfhead train``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from crfhead.cli import main as crfhead_main
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.training import cli as cli_module
from crfhead.training.cli import ConfigError, main, script
from crfhead.training.module import MAX_LR, TaggerModule

ROOT = Path(__file__).resolve().parents[2]
# A packaged config on a tiny corpus, one batch per loop: nothing runs long even if a check fails.
ARGS = [
    "--config",
    "crfhead:finance/indicator_crf.yaml",
    "--trainer.fast_dev_run=true",
    "--data.corpus.init_args.train_docs=2",
    "--data.corpus.init_args.dev_docs=1",
    "--data.corpus.init_args.test_docs=1",
]


def _one_error_line(err: str, prefix: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix), err
    return lines[0]


# --- the values refused, and where ------------------------------------------------------------


@pytest.mark.parametrize("lr", ["1e38", "3e38", f"{MAX_LR * 10:g}"])
def test_a_learning_rate_too_large_to_step_with_is_refused_before_training(lr: str) -> None:
    got = re.escape(f"got {float(lr):g}")
    with pytest.raises(ConfigError, match=rf"^model\.lr: lr must be at most 1e\+10, {got}"):
        main([*ARGS, f"--model.lr={lr}"])


def test_the_largest_learning_rate_is_accepted_and_the_backbone_rate_is_checked_too() -> None:
    with pytest.raises(ConfigError, match=r"^model\.backbone_lr: backbone_lr must be at most"):
        main([*ARGS, "--model.backbone_lr=1e20"])
    data = TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1))
    assert TaggerModule(vocabs=data.vocabs, lr=MAX_LR).hparams["lr"] == MAX_LR


@pytest.mark.parametrize("key", ["train_docs", "dev_docs", "test_docs"])
@pytest.mark.parametrize("value", [-1, 0])
def test_a_document_count_below_one_is_refused(key: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"FinanceCorpus: {key} must be a whole number"):
        FinanceCorpus(**{key: value})
    with pytest.raises(ConfigError, match=rf"^data\.corpus\.init_args\.{key}: FinanceCorpus"):
        main([*ARGS, f"--data.corpus.init_args.{key}={value}"])


def test_a_refused_value_names_its_component_when_the_argument_is_ambiguous() -> None:
    with pytest.raises(ConfigError, match=r"^data: batch sizes must be >= 1") as info:
        main([*ARGS, "--data.batch_size=0"])
    assert isinstance(info.value.__cause__, ValueError)  # the constructor's own error
    with pytest.raises(ConfigError, match=r"^model\.optimizer: optimizer must be one of"):
        main([*ARGS, "--model.optimizer=adam"])


def test_an_error_below_a_constructor_keeps_its_own_message_not_jsonargparse_summary() -> None:
    with pytest.raises(ConfigError, match=r"^unknown finance profile 'nope'; known:") as info:
        main([*ARGS, "--data.corpus.init_args.profile=nope"])
    assert "\n" not in str(info.value)


# --- how they are reported ----------------------------------------------------------------------


def test_train_py_reports_a_config_error_in_one_line_with_status_2() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *ARGS, "--model.lr=1e38"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("train.py")]
    assert lines == [lines[0]] and lines[0].startswith("train.py: error: model.lr: lr must be")
    assert "Traceback" not in proc.stderr and "resume" not in proc.stderr


def test_script_status_and_verbose_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert script([*ARGS, "--data.corpus.init_args.train_docs=-1"]) == 2
    line = _one_error_line(capsys.readouterr().err, "train.py: error: data.corpus.init_args")
    assert "train_docs must be a whole number of documents >= 1, got -1" in line
    with pytest.raises(ConfigError):  # --verbose: the traceback
        script([*ARGS, "--data.corpus.init_args.train_docs=-1", "--verbose"])


def test_script_does_not_shorten_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: list[str], prog: str) -> None:
        raise ValueError("a bug, not a config error")

    monkeypatch.setattr(cli_module, "main", broken)
    with pytest.raises(ValueError, match="a bug"):
        script(list(ARGS))


def test_crfhead_train_reports_a_config_error_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert crfhead_main(["train", *ARGS, "--data.corpus.init_args.train_docs=-1"]) == 2
    line = _one_error_line(capsys.readouterr().err, "crfhead: error: data.corpus.init_args")
    assert "train_docs" in line


@pytest.mark.parametrize(
    ("command", "typed"), [(["train"], "crfhead train"), (["fit"], "crfhead fit")]
)
def test_a_key_typo_is_short_and_names_the_command_typed(
    capsys: pytest.CaptureFixture[str], command: list[str], typed: str
) -> None:
    assert crfhead_main([*command, *ARGS, "--model.lrr=3"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [
        f"{typed}: error: unrecognized arguments: --model.lrr=3",
        f"{typed}: every option: {typed} --help",
    ], err


def test_train_py_names_itself_in_a_key_typo(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*ARGS, "--model.lrr=3"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("train.py: error: unrecognized arguments: --model.lrr=3")
    assert "usage" not in err and " fit" not in err and len(err.splitlines()) == 2


def test_script_reports_a_missing_data_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "train.txt"
    corpus = [
        "--data.corpus=crfhead.data.corpora.CoNLLCorpus",
        *(f"--data.corpus.init_args.{split}={missing}" for split in ("train", "dev", "test")),
    ]
    args = [
        "--config",
        "crfhead:finance/indicator_crf.yaml",
        "--trainer.fast_dev_run=true",
        *corpus,
    ]
    assert script(args) == 2
    line = _one_error_line(capsys.readouterr().err, "train.py: error:")
    assert "nope/train.txt" in line

"""What ``train.py`` shows and where it writes: the run folder, ``val/f1`` on the progress bar, the best
checkpoint and the report path, without the libraries' noise (``--verbose`` shows it); packaged configs
by name; runs named after the chosen head and encoder; a ``fast_dev_run`` that writes nothing; the
TensorBoard logger or one line saying it is missing; a resumed run continuing its own log folder."""

from __future__ import annotations

import csv
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crfhead.training import cli as cli_module
from crfhead.training import quiet as quiet_console
from crfhead.training import runs
from crfhead.training.cli import main
from crfhead.training.configs import BASE_CONFIG, packaged_config, packaged_configs
from crfhead.training.loggers import CSVLogger

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--data.corpus.init_args.train_docs=2",
    "--data.corpus.init_args.dev_docs=2",
    "--data.corpus.init_args.test_docs=2",
]
PACKAGED = "crfhead:finance/indicator_crf.yaml"
TENSORBOARD = "--trainer.logger=crfhead.training.loggers.TensorBoardLogger"
NO_BAR = "--trainer.enable_progress_bar=false"
NOISE = (
    "💡",
    "litlogger",
    "GPU available",
    "TPU available",
    "deprecated",
    "Deprecation",
    "does not have many workers",
    "smaller than the logging interval",
    "Seed set to",
    "Restoring states",
    "Loaded model weights",
    "`Trainer.fit` stopped",
    "exists and is not empty",
)


def _val_rows(version: Path) -> list[dict[str, str]]:
    with (version / "metrics.csv").open(newline="") as file:
        return [row for row in csv.DictReader(file) if row.get("val/f1")]


def test_a_run_prints_its_folder_progress_best_checkpoint_and_report_and_no_noise(
    tmp_path: Path,
) -> None:
    """train.py as a user runs it (a fresh process, a real terminal's streams), from any folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "--config",
            PACKAGED,
            "--trainer.max_epochs=2",
            *TINY,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out, err = run.stdout, run.stderr
    version = Path("runs") / "finance_indicator_crf" / "version_0"
    assert err.splitlines()[0] == f"run folder: {version}"
    assert f"best checkpoint: {version / 'checkpoints'}/epoch=" in err and "(val/f1 0." in err
    assert f"test report: {version / 'test_report.json'}" in err
    assert "val/f1" in out and "train/loss" in out and "v_num" not in out  # the progress bar
    assert "micro avg" in out  # the report table
    for noise in NOISE:
        assert noise not in out + err, noise
    assert (tmp_path / version / "test_report.json").is_file()


def test_verbose_shows_the_library_messages_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["--config", PACKAGED, "--trainer.fast_dev_run=true", *TINY]
    caplog.set_level(logging.INFO)
    main(args)
    quiet = caplog.text
    caplog.clear()
    main([*args, "--verbose"])
    for line in ("GPU available", "Seed set to", "💡 Tip", "`Trainer.fit` stopped"):
        assert line not in quiet and line in caplog.text, line
    # The filters are gone once a run ends: nothing leaks into the rest of the process.
    for name in quiet_console.NOISE_LOGGERS:
        logger = logging.getLogger(name)
        attached = [*logger.filters, *(f for h in logger.handlers for f in h.filters)]
        assert not any(isinstance(f, quiet_console.NoiseFilter) for f in attached), name


NOISY_WARNINGS = [
    ("The 'train_dataloader' does not have many workers which may be a bottleneck.", UserWarning),
    ("The number of training batches (1) is smaller than the logging interval", UserWarning),
    ("Checkpoint directory runs/x/version_0/checkpoints exists and is not empty.", UserWarning),
    (
        "GPU available but not used. You can set it by doing `Trainer(accelerator='gpu')`.",
        UserWarning,
    ),
    ("`LightningCLI.add_instantiator` was deprecated", DeprecationWarning),
    ("a library's future change", FutureWarning),
    ("`LightningModule.configure_optimizers` returned `None`, this fit will run", UserWarning),
]


@pytest.mark.parametrize("verbose", [False, True])
def test_the_warnings_a_user_cannot_act_on_are_filtered_unless_verbose(verbose: bool) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_console.QuietConsole(verbose=verbose).session():
            for message, category in NOISY_WARNINGS:
                warnings.warn_explicit(message, category, "lib.py", 1, module="pytorch_lightning.x")
            warnings.warn_explicit(
                "crfhead's own", DeprecationWarning, "m.py", 1, module="crfhead.x"
            )
            warnings.warn_explicit("a warning that matters", UserWarning, "lib.py", 2, module="lib")
        after = len(seen)
        warnings.warn_explicit(*NOISY_WARNINGS[0], "lib.py", 3, module="pytorch_lightning.x")
    shown = [str(w.message) for w in seen[:after]]
    assert "crfhead's own" in shown and "a warning that matters" in shown
    assert len(shown) == (2 + len(NOISY_WARNINGS) if verbose else 2)
    assert len(seen) == after + 1  # outside a run nothing is filtered


def test_packaged_configs_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "finance/indicator_crf.yaml" in packaged_configs()
    assert "base.yaml" not in packaged_configs()
    path = packaged_config("crfhead:finance/indicator_crf")
    assert path == ROOT / "crfhead" / "configs" / "finance" / "indicator_crf.yaml"
    assert (ROOT / "configs" / "finance" / "indicator_crf.yaml").resolve() == path.resolve()
    assert BASE_CONFIG.parent == ROOT / "crfhead" / "configs"
    with pytest.raises(SystemExit) as exit_:
        main(["--config=crfhead:finance/nope.yaml"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "no packaged config crfhead:finance/nope.yaml; packaged: " in err
    assert "finance/indicator_crf.yaml" in err and "\n" not in err.strip()
    with pytest.raises(FileNotFoundError):
        packaged_config("../../pyproject.toml")


@pytest.mark.parametrize(
    ("config", "extra", "name"),
    [
        ("finance/indicator_crf.yaml", [], "finance_indicator_crf"),
        ("finance/memm.yaml", [], "finance_memm"),
        (
            "finance/indicator_crf.yaml",
            ["--model.head.class_path=crfhead.heads.MEMM"],
            "finance_indicator_crf-MEMM",
        ),
        ("finance/memm.yaml", ["--model.head.class_path=crfhead.heads.memm.MEMM"], "finance_memm"),
        (
            "finance/memm.yaml",
            ["--model.encoder.class_path=crfhead.encoders.BiLSTMEncoder"],
            "finance_memm-BiLSTMEncoder",
        ),
    ],
)
def test_a_run_is_named_after_what_was_chosen_and_fast_dev_run_writes_nothing(
    config: str, extra: list[str], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cli = main(["--config", f"crfhead:{config}", "--trainer.fast_dev_run=true", *TINY, *extra])
    assert cli.config["fit"]["trainer"]["logger"]["init_args"]["name"] == name
    assert sorted(os.listdir(tmp_path)) == []  # no runs/, lightning_logs/, checkpoints/, report
    assert not Path(cli.trainer.default_root_dir).exists()  # its temporary folder is removed


def test_without_tensorboard_one_line_says_so_and_the_run_logs_to_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module, "tensorboard_available", lambda: False)
    cli = main(["--config", PACKAGED, "--trainer.max_epochs=1", *TINY, TENSORBOARD, NO_BAR])
    err = capfd.readouterr().err
    line = "TensorBoard is not installed (pip install 'crfhead[tensorboard]'): logging to CSV"
    assert err.count(line) == 1
    assert isinstance(cli.trainer.logger, CSVLogger)
    assert (tmp_path / "runs" / "finance_indicator_crf" / "version_0" / "metrics.csv").is_file()


def test_tensorboard_logs_into_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tensorboard")
    monkeypatch.chdir(tmp_path)
    main(["--config", PACKAGED, "--trainer.max_epochs=1", *TINY, TENSORBOARD, NO_BAR])
    version = tmp_path / "runs" / "finance_indicator_crf" / "version_0"
    assert list(version.glob("events.out.tfevents.*"))
    assert (version / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize(
    "config", ["wnut17/bilstm_crf_vectors.yaml", "msm2013/transformer_crf.yaml"]
)
def test_a_config_whose_default_weights_are_missing_fails_in_one_line_naming_the_install(
    config: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The default MiniLM (nested in ``word_vectors``, or the encoder itself) without its package:
    one line, the command that installs it, exit 2, nothing built or written (no data is read)."""
    import importlib.util

    from crfhead.encoders.transformer import DEFAULT_MODEL_INSTALL, DEFAULT_MODEL_PACKAGE

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == DEFAULT_MODEL_PACKAGE else find_spec(name, *a),
    )
    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["--config", f"crfhead:{config}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("train.py: error: the default transformer")
    assert DEFAULT_MODEL_INSTALL in err
    assert list(tmp_path.iterdir()) == []


def test_a_resumed_run_continues_its_own_log_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["fit", "--config", "crfhead:finance/indicator_crf.yaml", *TINY]
    args.append("--trainer.enable_progress_bar=false")
    main([*args, "--trainer.max_epochs=2"])
    version = Path("runs") / "finance_indicator_crf" / "version_0"
    assert [r["epoch"] for r in _val_rows(version)] == ["0", "1"]
    capfd.readouterr()
    cli = main([*args, "--trainer.max_epochs=3", f"--ckpt_path={version}/checkpoints/last.ckpt"])
    err = capfd.readouterr().err
    assert Path(cli.trainer.log_dir) == version
    assert sorted(p.name for p in version.parent.iterdir()) == ["version_0"]
    assert f"run folder: {version}" in err and "exists and is not empty" not in err
    rows = _val_rows(version)
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]  # the old rows kept, each epoch once
    with (version / "metrics.csv").open(newline="") as file:
        steps = [r["step"] for r in csv.DictReader(file) if r.get("train/loss")]
    assert len(steps) == len(set(steps))
    best = cli.trainer.checkpoint_callback
    assert best is not None and Path(best.best_model_path).parent == version / "checkpoints"


def test_the_version_folder_of_a_checkpoint() -> None:
    folder = runs.version_folder
    assert folder("runs/a/version_3/checkpoints/last.ckpt") == Path("runs/a/version_3")
    assert folder("runs/a/version_3/on_exception.ckpt") == Path("runs/a/version_3")
    assert folder("somewhere/ckpt/last.ckpt") is None


@pytest.mark.parametrize(
    ("argv", "verbose", "passed"),
    [
        (["fit"], False, ["fit"]),
        (["fit", "--verbose"], True, ["fit", "--verbose"]),
        (["fit", "--verbose", "--no_verbose"], False, ["fit", "--verbose", "--no_verbose"]),
        # test/validate have Lightning's --verbose BOOL: a bare one is ours and is taken out.
        (["test", "--verbose", "--x=1"], True, ["test", "--x=1"]),
        (["test", "--verbose", "false"], True, ["test", "--verbose", "false"]),
    ],
)
def test_the_verbose_flag_is_read_before_parsing(
    argv: list[str], verbose: bool, passed: list[str]
) -> None:
    assert quiet_console.split_verbose(argv) == (verbose, passed)


def test_component_help_shows_a_class_config_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--model.head.help", "MEMM"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert out.startswith("--model.head.class_path=crfhead.heads.MEMM\n")
    assert "--model.head.init_args.decoder" in out and "init_args.num_tags" not in out
    assert "set from the data (never in a config): labels, num_tags, scheme" in out
    with pytest.raises(SystemExit):
        main(["--config", PACKAGED, "--model.encoder.help=crfhead.encoders.BiLSTMEncoder"])
    out = capsys.readouterr().out
    assert "--model.encoder.init_args.hidden_size" in out and "init_args.vocab_size" not in out
    with pytest.raises(SystemExit):
        main(["--model.head.help"])
    assert "CRF, HMM, MEMM, StructuredPerceptron" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["--model.encoder.help", "NoSuchEncoder"])
    assert exit_.value.code == 2
    assert "no model.encoder class 'NoSuchEncoder'; on offer: " in capsys.readouterr().err

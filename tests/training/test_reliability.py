"""Runs that never lose or mix up work: no silent resume, atomic checkpoints, distinct versions,
``last.ckpt`` is the last epoch, SIGTERM exits non-zero, foreign or mismatched checkpoints refused,
divergence stopped, bad learning rates refused."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_training import _args

from crfhead.model.checkpoints import read_checkpoint
from crfhead.training.callbacks import AtomicCheckpointIO
from crfhead.training.cli import SIGTERM_EXIT
from crfhead.training.loggers import CSVLogger
from train import main

ROOT = Path(__file__).resolve().parents[2]


def _with_crash_checkpoint(args: list[str]) -> list[str]:
    """``args`` whose config also has our OnExceptionCheckpoint (dirpath left to the run)."""
    config = Path(args[1])
    config.write_text(
        config.read_text().replace(
            "        save_last: true\n",
            "        save_last: true\n"
            "    - class_path: crfhead.training.callbacks.OnExceptionCheckpoint\n",
        )
    )
    return args


def test_a_crash_checkpoint_is_kept_in_its_version_folder_and_never_resumed_silently(
    tmp_path: Path,
) -> None:
    args = _with_crash_checkpoint(_args(tmp_path, **{"trainer.max_epochs": 3}))
    with pytest.raises(FloatingPointError, match=r"diverged|non-finite"):
        main([*args, "--model.lr=1e9", "--model.divergence=10"])
    crashed = list((tmp_path / "runs" / "tiny").glob("version_*/on_exception.ckpt"))
    assert [p.parent.name for p in crashed] == ["version_0"]
    # The same command again, fixed: a fresh run in a new version folder, from epoch 0.
    cli = main([*args, "--trainer.max_epochs=1"])
    assert Path(cli.trainer.logger.log_dir).name == "version_1"
    assert cli.trainer.current_epoch == 1
    steps_per_epoch = len(cli.datamodule.train_dataloader())
    assert cli.trainer.global_step == steps_per_epoch  # nothing carried over from the crash
    assert crashed[0].is_file()  # and the crash checkpoint is left alone


def test_last_ckpt_is_the_last_epoch_even_when_the_best_is_earlier(tmp_path: Path) -> None:
    args = _args(tmp_path, **{"trainer.max_epochs": 3})
    config = Path(args[1])
    # mode: min on F1 keeps the first epoch as "best" (F1 rises), so top-k saves stop early.
    config.write_text(config.read_text().replace("mode: max", "mode: min"))
    config.write_text(
        config.read_text().replace(
            "pytorch_lightning.callbacks.ModelCheckpoint",
            "crfhead.training.callbacks.ModelCheckpoint",
        )
    )
    cli = main(["fit", *args])
    last = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)
    best = torch.load(cli.trainer.checkpoint_callback.best_model_path, weights_only=False)
    assert last["epoch"] == 2
    assert best["epoch"] < last["epoch"]


def test_atomic_checkpoint_io_never_leaves_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "model.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"a": torch.arange(3)}, target)
    before = target.read_bytes()

    def full_disk(obj: object, handle: object) -> None:
        handle.write(b"partial")  # type: ignore[attr-defined]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="No space"):
        io.save_checkpoint({"a": torch.arange(5)}, target)
    assert target.read_bytes() == before  # the old checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt"]  # no temporary left
    with pytest.raises(OSError, match="No space"):
        io.save_checkpoint({"a": 1}, tmp_path / "new.ckpt")
    assert not (tmp_path / "new.ckpt").exists()


def test_two_loggers_started_together_claim_distinct_versions(tmp_path: Path) -> None:
    a = CSVLogger(save_dir=str(tmp_path), name="run")
    b = CSVLogger(save_dir=str(tmp_path), name="run")
    assert {a.version, b.version} == {0, 1}
    assert Path(a.log_dir) != Path(b.log_dir)


def test_sigterm_exits_143_without_the_test_pass(tmp_path: Path) -> None:
    args = _with_crash_checkpoint(_args(tmp_path, **{"trainer.max_epochs": 1_000_000}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not any((tmp_path / "ckpt").glob("*.ckpt")):
        assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("no exit 300 s after SIGTERM") from None
    assert proc.returncode == SIGTERM_EXIT, err[-3000:]
    assert "SIGTERM" in err and "--ckpt_path=" in err
    assert not list(tmp_path.rglob("test_report.json"))
    assert list((tmp_path / "runs" / "tiny").glob("version_0/on_exception.ckpt"))


def test_resuming_a_checkpoint_of_another_head_is_refused_naming_both(tmp_path: Path) -> None:
    cli = main(["fit", *_args(tmp_path / "crf", **{"trainer.max_epochs": 1})])
    ckpt = cli.trainer.checkpoint_callback.best_model_path
    with pytest.raises(ValueError, match=r"head crfhead\.heads\.CRF.*crfhead\.heads\.MEMM"):
        main(
            [
                "fit",
                *_args(tmp_path / "memm", **{"trainer.max_epochs": 2}),
                "--model.head.class_path=crfhead.heads.MEMM",
                f"--ckpt_path={ckpt}",
            ]
        )
    with pytest.raises(ValueError, match=r"head crfhead\.heads\.CRF.*crfhead\.heads\.HMM"):
        main(
            [
                "test",
                *_args(tmp_path / "hmm"),
                "--model.head.class_path=crfhead.heads.HMM",
                f"--ckpt_path={ckpt}",
            ]
        )


def test_foreign_checkpoint_files_get_one_clear_line(tmp_path: Path) -> None:
    cli = main(["fit", *_args(tmp_path / "run", **{"trainer.max_epochs": 1})])
    good = Path(cli.trainer.checkpoint_callback.best_model_path)
    read_checkpoint(good)
    data = good.read_bytes()
    cases = {
        "empty.ckpt": (b"", "empty file"),
        "truncated.ckpt": (data[: len(data) // 2], "truncated or not a torch file"),
        "random.ckpt": (bytes(range(256)) * 40, "truncated or not a torch file"),
    }
    for name, (content, _) in cases.items():
        (tmp_path / name).write_bytes(content)
    torch.save({"weight": torch.zeros(2)}, tmp_path / "plain.ckpt")
    cases["plain.ckpt"] = (b"", "not a crfhead checkpoint")
    for name, (_, match) in cases.items():
        path = tmp_path / name
        with pytest.raises(ValueError, match=match) as info:
            read_checkpoint(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)
        with pytest.raises(ValueError, match=match):
            main(["test", *_args(tmp_path / "t"), f"--ckpt_path={path}"])
    with pytest.raises(FileNotFoundError, match=r"missing\.ckpt"):
        main(["fit", *_args(tmp_path / "t"), f"--ckpt_path={tmp_path / 'missing.ckpt'}"])


def test_a_diverging_run_is_stopped_with_a_message(tmp_path: Path) -> None:
    with pytest.raises(FloatingPointError, match=r"diverged|non-finite") as info:
        main([*_args(tmp_path, **{"trainer.max_epochs": 50}), "--model.lr=1e9"])
    assert "learning rate" in str(info.value)


@pytest.mark.parametrize("lr", ["0", "-0.1"])  # jsonargparse refuses nan and inf itself
def test_a_non_positive_learning_rate_is_refused_at_start(tmp_path: Path, lr: str) -> None:
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        main([*_args(tmp_path), f"--model.lr={lr}"])


def test_predict_refuses_a_foreign_checkpoint_in_one_line(tmp_path: Path) -> None:
    from predict import main as predict

    text = tmp_path / "in.txt"
    text.write_text("Apple rose\n")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="not a readable checkpoint") as info:
        predict(["--checkpoint", str(bad), "--input", str(text)])
    assert str(bad) in str(info.value)
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        predict(["--checkpoint", str(tmp_path / "none.ckpt"), "--input", str(text)])


@pytest.mark.parametrize("damage", ["huge", "nan"])
def test_predict_with_damaged_weights_stays_valid_or_refuses(tmp_path: Path, damage: str) -> None:
    """Emissions far beyond any real score still decode valid tags (forbidden is exact, -inf); NaN
    scores are an error, not output."""
    import json

    from crfhead.schemes import repair_tags
    from predict import main as predict

    cli = main(["fit", *_args(tmp_path / "run", **{"trainer.max_epochs": 1})])
    good = Path(cli.trainer.checkpoint_callback.best_model_path)
    ckpt = torch.load(good, weights_only=False)
    labels = ckpt["hyper_parameters"]["vocabs"]["labels"]["labels"]
    inside = next(i for i, lab in enumerate(labels) if lab.startswith("I-"))
    state = ckpt["state_dict"]
    if damage == "huge":
        state["tagger.encoder.weight"][:, inside] = 1e5  # I-X everywhere, by far
    else:
        state["tagger.head.transitions"][0, 0] = float("nan")
    broken = tmp_path / "broken.ckpt"
    torch.save(ckpt, broken)
    text = tmp_path / "in.txt"
    text.write_text("the company said sales rose in the quarter\n")
    out = tmp_path / "o.jsonl"
    if damage == "nan":
        with pytest.raises(ValueError, match="transitions is NaN"):
            predict(["--checkpoint", str(broken), "--input", str(text), "--output", str(out)])
        return
    predict(["--checkpoint", str(broken), "--input", str(text), "--output", str(out)])
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert labels[inside][2:] in {t[2:] for t in record["tags"]}  # the damage shows ...
    assert not repair_tags(record["tags"], "BIO")[1]  # ... and the tags are still valid BIO

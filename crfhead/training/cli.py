"""``train.py``'s command line: LightningCLI over the tagger module and the tagging data module.

``fit`` runs by default and is followed by ``test`` on the best checkpoint. Every run reads
``configs/base.yaml`` (the shared trainer settings) first, then the ``--config`` given, which states only
what differs. The orchestration is here and only here: the data module's vocabularies are linked into
the model's hyper-parameters, the model's needs are passed to the data module, and a run without a
logger name is named after its config file (``configs/finance/indicator_crf.yaml`` →
``runs/finance_indicator_crf``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from pytorch_lightning.cli import LightningArgumentParser, LightningCLI

from crfhead.data.datamodule import TaggingDataModule
from crfhead.training.module import TaggerModule

__all__ = ["BASE_CONFIG", "SUBCOMMANDS", "TaggerCLI", "main"]

BASE_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "base.yaml"
"""The trainer settings every config shares (read before the ``--config`` files)."""
SUBCOMMANDS = ("fit", "validate", "test", "predict")


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
        if logger is None:
            return
        if logger.get("name", "") is None:
            logger["name"] = _run_name(config.get("config")) or "default"
        run_dir = str(Path(str(logger.get("save_dir") or ".")) / str(logger["name"]))
        for callback in trainer.get("callbacks") or ():
            is_ours = (
                getattr(callback, "class_path", "")
                == f"{__package__}.callbacks.OnExceptionCheckpoint"
            )
            if is_ours and callback.init_args.get("dirpath") is None:
                callback.init_args["dirpath"] = run_dir

    def instantiate_classes(self) -> None:  # noqa: D102
        super().instantiate_classes()
        if isinstance(self.datamodule, TaggingDataModule) and isinstance(self.model, TaggerModule):
            self.datamodule.set_needs(self.model.tagger.needs)


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
    cli = TaggerCLI(
        TaggerModule,
        TaggingDataModule,
        args=argv,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={sub: defaults for sub in SUBCOMMANDS},
    )
    if run_test_after_fit:
        best = None if getattr(cli.trainer, "fast_dev_run", False) else "best"
        cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=best, verbose=False)
    return cli

"""Train, validate and test a tagger: ``python train.py --config configs/finance/indicator_crf.yaml``.

LightningCLI over :class:`crfhead.module.TaggerModule` and :class:`crfhead.datamodule.TaggingDataModule`:
``fit`` runs by default and is followed by ``test`` on the best checkpoint, printing the span F1 table and
writing ``test_report.json`` next to the logs. Command-line overrides: ``--trainer.max_epochs=3``,
``--model.lr=0.01``, ``--data.corpus.init_args.train_docs=10``. An unknown key fails before training.
"""

from __future__ import annotations

import sys
import warnings

from pytorch_lightning.cli import LightningArgumentParser, LightningCLI

from crfhead.datamodule import TaggingDataModule
from crfhead.module import TaggerModule


class TaggerCLI(LightningCLI):
    """Links the data module's vocabularies into the model's hyper-parameters."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:  # noqa: D102
        parser.link_arguments("data.vocabs", "model.vocabs", apply_on="instantiate")


def main(args: list[str] | None = None) -> TaggerCLI:
    """Run ``fit`` then ``test`` (or the subcommand given first)."""
    argv = list(sys.argv[1:] if args is None else args)
    subcommands = {"fit", "validate", "test", "predict"}
    run_test_after_fit = not argv or argv[0] not in subcommands
    if run_test_after_fit:
        argv = ["fit", *argv]
    warnings.filterwarnings(
        "ignore", message=".*args parameter is intended to run from within Python"
    )
    cli = TaggerCLI(
        TaggerModule, TaggingDataModule, args=argv, save_config_kwargs={"overwrite": True}
    )
    if run_test_after_fit:
        best = None if cli.trainer.fast_dev_run else "best"
        cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=best, verbose=False)
    return cli


if __name__ == "__main__":
    main()

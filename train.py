"""Train, validate and test a tagger: ``python train.py --config configs/finance/indicator_crf.yaml``.

LightningCLI (:mod:`crfhead.training.cli`) over :class:`crfhead.training.module.TaggerModule` and
:class:`crfhead.data.datamodule.TaggingDataModule`: ``fit`` runs by default and is followed by ``test``
on the best checkpoint, printing the span F1 table and writing ``test_report.json`` next to the logs.
``configs/base.yaml`` is read first. Command-line overrides: ``--trainer.max_epochs=3``,
``--model.lr=0.01``, ``--data.corpus.init_args.train_docs=10``. An unknown key fails before training,
and so does a value a component refuses (one line naming the key, exit status 2;
:func:`crfhead.training.cli.script`).
"""

from crfhead.training.cli import main, script

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(script())

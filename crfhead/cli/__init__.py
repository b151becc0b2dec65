"""The ``crfhead`` command: train, test, tag, score and export models from the shell.

One module per subcommand, each with its options (``add_parser``) and its action (``run``):

* :mod:`~crfhead.cli.train`: ``crfhead train | test | fit | validate ARGS`` hand ``ARGS`` untouched
  to the LightningCLI of ``train.py`` (``train`` is fit then test, as ``train.py`` runs);
* :mod:`~crfhead.cli.predict`: tag raw text, CoNLL or JSON lines, from a file or stdin (readers in
  :mod:`crfhead.data.inputs`, writers in :mod:`crfhead.data.outputs` and
  :func:`crfhead.data.conll.echo_conll`);
* :mod:`~crfhead.cli.evaluate`: score a model on a labelled CoNLL file, the table training prints
  (:mod:`crfhead.inference.scoring`);
* :mod:`~crfhead.cli.export`: the model's decoder as a ``torch.export`` program or ONNX
  (:mod:`crfhead.inference.export`);
* :mod:`~crfhead.cli.configs`: the configs shipped with crfhead;
* :mod:`~crfhead.cli.plot`: a run's learning curves;
* :mod:`~crfhead.cli.lab`: the interactive lab on 127.0.0.1 (:mod:`crfhead.lab`).

The models are a training checkpoint or a folder written by ``TextTagger.save`` (:func:`crfhead.load`).
:mod:`~crfhead.cli.parser` assembles the parser, :mod:`~crfhead.cli.main` runs a command line and
reports its errors in one line. Importing this package imports neither Lightning nor transformers:
each subcommand imports what it needs when it runs, so ``crfhead --help`` and ``crfhead configs``
answer at once.
"""

from crfhead.cli.main import main, run
from crfhead.cli.parser import build_parser

__all__ = ["build_parser", "main", "run"]

"""Training: the Lightning module that fits a :class:`~crfhead.model.tagger.Tagger`, its callbacks and ``train.py``.

* :mod:`~crfhead.training.module`: the ``LightningModule`` (steps, metrics, optimisers);
* :mod:`~crfhead.training.callbacks`, :mod:`~crfhead.training.loggers`,
  :mod:`~crfhead.training.cli` (``train.py``), :mod:`~crfhead.training.plot` (learning curves);
* :mod:`~crfhead.training.lbfgs`: full-batch L-BFGS on one flat parameter vector (no Lightning).

The model itself (:mod:`crfhead.model`) is plain ``nn.Module``s; Lightning is imported only by the
modules here that need it.
"""

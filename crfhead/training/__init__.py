"""Training: the tagger as a plain module, its Lightning module, callbacks, and config-built components.

* :mod:`~crfhead.training.model`: :class:`~crfhead.training.model.Tagger`, encoder → emissions → head
  (plain ``nn.Module``, no Lightning);
* :mod:`~crfhead.training.build`: encoders and heads from ``class_path`` specs;
* :mod:`~crfhead.training.module`: the ``LightningModule`` (steps, metrics, optimisers);
* :mod:`~crfhead.training.callbacks`, :mod:`~crfhead.training.cli` (``train.py``).

Lightning is imported only by the modules that need it.
"""

"""The model: the tagger as a plain ``nn.Module``, built from plain-data specs, below training and inference.

* :mod:`~crfhead.model.tagger`: :class:`~crfhead.model.tagger.Tagger`, encoder → emissions → head
  (no Lightning);
* :mod:`~crfhead.model.build`: encoders, heads and group decoders from ``class_path`` specs (the one
  builder: ``train.py``, ``crfhead.load``, the command line, the lab and the scripts use it);
* :mod:`~crfhead.model.group_decoder`: the contract of a decoder of whole groups (higher-order CRFs);
* :mod:`~crfhead.model.checkpoints`: reading a checkpoint the user names.

Training (:mod:`crfhead.training`) fits it and inference (:mod:`crfhead.inference`) loads it; it
imports neither.
"""

from crfhead.model.group_decoder import GroupDecoder
from crfhead.model.tagger import Tagger

__all__ = ["GroupDecoder", "Tagger"]

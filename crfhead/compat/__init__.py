"""Drop-in replacements for other CRF libraries' APIs, on crfhead's engine.

- :mod:`crfhead.compat.torchcrf`: pytorch-crf's ``CRF`` (``batch_first`` honoured by every method,
  parameters registered in pytorch-crf's order so its model and optimizer checkpoints load).

Submodules are imported explicitly (``from crfhead.compat.torchcrf import CRF``), so nothing is
exported here.
"""

__all__: list[str] = []

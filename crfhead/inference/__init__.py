"""Using a trained model: load it, tag raw text (entities with offsets and exact probabilities), save it.

* :mod:`~crfhead.inference.text_tagger`: :func:`load` (``crfhead.load``) and :class:`TextTagger`;
* :mod:`~crfhead.inference.entities`: :class:`Entity`, :class:`Tagged` and :class:`Trellis`, what
  tagging returns;
* :mod:`~crfhead.inference.saved`: the saved-folder format (safetensors + JSON) and checkpoint reading;
* :mod:`~crfhead.inference.scoring`: a model scored on labelled sentences (training's report);
* :mod:`~crfhead.inference.export`: the decoder as a ``torch.export`` program or ONNX.

Above :mod:`crfhead.model` (the tagger, its builder); never imports training or Lightning for a saved
folder.
"""

from crfhead.data.tokenize import Token
from crfhead.inference.entities import Entity, Tagged, Trellis
from crfhead.inference.text_tagger import TextTagger, load

__all__ = ["Entity", "Tagged", "TextTagger", "Token", "Trellis", "load"]

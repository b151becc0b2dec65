"""Using a trained model: load it, tag raw text (entities with offsets and exact probabilities), save it.

* :mod:`~crfhead.inference.text_tagger`: :func:`load` (``crfhead.load``) and :class:`TextTagger`;
* :mod:`~crfhead.inference.entities`: :class:`Entity`, :class:`Tagged` and :class:`Trellis`, what
  tagging returns;
* :mod:`~crfhead.inference.documents`: sentence ranges of raw text, windows over long chains and
  their merge;
* :mod:`~crfhead.inference.pins`: what the user knows (``tag(text, spans=..., forbid=...)``):
  pinned spans and forbidden labels as the chains' ``allowed`` label sets;
* :mod:`~crfhead.inference.saved`: the saved-folder format (safetensors + JSON, a model card with
  the Hub's metadata) and checkpoint reading;
* :mod:`~crfhead.inference.hub` and :mod:`~crfhead.inference.hub_push`: models on the Hugging Face
  Hub (``load("org/name")``, :func:`push_to_hub`);
* :mod:`~crfhead.inference.spacy_doc`: tagged text as a spaCy ``Doc`` or displaCy's input;
* :mod:`~crfhead.inference.scoring`: a model scored on labelled sentences (training's report);
* :mod:`~crfhead.inference.export`: the model (encoder + head) as a ``torch.export`` program or
  ONNX, and :func:`load_exported` to run one in any process (:mod:`~crfhead.inference.exported`).

Above :mod:`crfhead.model` (the tagger, its builder); never imports training or Lightning for a saved
folder.
"""

from crfhead.data.tokenize import Token
from crfhead.inference.entities import Entity, Tagged, Trellis
from crfhead.inference.export import load_exported
from crfhead.inference.exported import ExportedTagger
from crfhead.inference.hub_push import push_to_hub
from crfhead.inference.spacy_doc import to_displacy, to_spacy
from crfhead.inference.text_tagger import TextTagger, load

__all__ = [
    "Entity",
    "ExportedTagger",
    "Tagged",
    "TextTagger",
    "Token",
    "Trellis",
    "load",
    "load_exported",
    "push_to_hub",
    "to_displacy",
    "to_spacy",
]

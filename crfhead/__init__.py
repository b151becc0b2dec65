"""crfhead: neural sequence tagging with structured heads.

Tensor conventions, once for the whole package (``B`` batch, ``T`` time, ``K`` tags):

* batch first: ``emissions`` are ``(B, T, K)``, ``tags`` ``(B, T)`` int64, ``mask`` ``(B, T)`` bool;
* ``transitions[i, j]`` scores tag ``i`` followed by tag ``j`` (**from, to**), shared ``(K, K)`` or
  per edge ``(B, T-1, K, K)`` (entry ``t-1`` enters position ``t``);
* ``allowed`` ``(B, T, K)`` bool (optional) holds the labels each position may take: a partial
  annotation to train from, or what is known at decoding; every head method takes it, and every
  quantity is then conditioned on the sets (:func:`crfhead.engine.potentials.restrict`);
* masks may have holes: the chain links consecutive unmasked positions; a fully masked row has
  ``log Z = 0``, score 0 and path all ``-1``;
* recursions run in float32 (float64 when given float64), even for bf16/fp16 emissions or under
  autocast; "forbidden" is :data:`crfhead.numerics.IMPOSSIBLE` (``-inf``), excluded exactly by every
  dynamic program at any magnitude of the other scores.

Every docstring in the package refers to these conventions instead of restating them.

The rooms, top to bottom (imports point down): :mod:`crfhead.inference` (:func:`load` a trained
model, tag raw text, save it); :mod:`crfhead.training` and :mod:`crfhead.theory`
(the seed's harness, which the library never imports); :mod:`crfhead.evaluation`;
:mod:`crfhead.encoders` and :mod:`crfhead.data`; :mod:`crfhead.heads` (:class:`CRF`, the layer users
import, and :class:`MEMM`, :class:`StructuredPerceptron`, :class:`HMM` on one contract,
:class:`ChainHead`); :mod:`crfhead.engine` (the one dynamic program: pure tensor functions over
:class:`ChainPotentials`, three backends); :mod:`crfhead.schemes`, :mod:`crfhead.checks`,
:mod:`crfhead.numerics`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crfhead.engine.potentials import ChainPotentials, make_potentials, restrict
from crfhead.heads.base import ChainHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron
from crfhead.numerics import IMPOSSIBLE

if TYPE_CHECKING:
    import torch

    from crfhead.inference.exported import ExportedTagger
    from crfhead.inference.text_tagger import TextTagger

__all__ = [
    "CRF",
    "HMM",
    "IMPOSSIBLE",
    "MEMM",
    "ChainHead",
    "ChainPotentials",
    "StructuredPerceptron",
    "__version__",
    "load",
    "load_exported",
    "make_potentials",
    "register_component",
    "restrict",
]


def _installed_version() -> str:
    """The installed distribution's version; ``0+unknown`` in a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crfhead")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()


def load(
    path: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> TextTagger:
    """A trained model ready to tag text: a checkpoint, a saved folder, or a Hub id (``org/name``).

    See :func:`crfhead.inference.load` (imported on first use: loading pulls in the encoders).
    """
    from crfhead.inference import load as load_model

    return load_model(path, device=device, dtype=dtype, revision=revision, cache_dir=cache_dir)


def load_exported(path: str | Path) -> ExportedTagger:
    """Run a ``crfhead export`` file (``.pt2`` or ONNX) in any process: the ops it needs registered.

    See :func:`crfhead.inference.export.load_exported` (imported on first use).
    """
    from crfhead.inference.export import load_exported as load_program

    program: ExportedTagger = load_program(path)
    return program


def register_component(cls: type) -> type:
    """Allow a class of your own in saved models you load (usable as a decorator).

    Loading a saved folder or checkpoint imports only crfhead's classes; see
    :func:`crfhead.model.build.register_component` (imported on first use).
    """
    from crfhead.model.build import register_component as register

    return register(cls)

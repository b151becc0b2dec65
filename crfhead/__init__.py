"""crfhead: neural sequence tagging with structured heads.

Tensor conventions, once for the whole package (``B`` batch, ``T`` time, ``K`` tags):

* batch first: ``emissions`` are ``(B, T, K)``, ``tags`` ``(B, T)`` int64, ``mask`` ``(B, T)`` bool;
* ``transitions[i, j]`` scores tag ``i`` followed by tag ``j`` (**from, to**), shared ``(K, K)`` or
  per edge ``(B, T-1, K, K)`` (entry ``t-1`` enters position ``t``);
* masks may have holes: the chain links consecutive unmasked positions; a fully masked row has
  ``log Z = 0``, score 0 and path all ``-1``;
* recursions run in float32 (float64 when given float64), even for bf16/fp16 emissions or under
  autocast; "impossible" is the one finite constant :data:`crfhead.numerics.IMPOSSIBLE`.

The core is pure tensor functions (:mod:`crfhead.engine.semiring`, :mod:`crfhead.engine`,
:mod:`crfhead.engine`, :mod:`crfhead.schemes`); :class:`CRF` is the layer users import, and
:class:`MEMM`, :class:`StructuredPerceptron` and :class:`HMM` are the other heads on the same
potentials (:class:`ChainHead`).
"""

from crfhead.engine.potentials import ChainPotentials, make_potentials
from crfhead.heads.base import ChainHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron
from crfhead.numerics import IMPOSSIBLE

__all__ = [
    "CRF",
    "HMM",
    "IMPOSSIBLE",
    "MEMM",
    "ChainHead",
    "ChainPotentials",
    "StructuredPerceptron",
    "make_potentials",
]
__version__ = "0.1.0"

"""The structured heads: each is chain potentials plus a loss on one contract (:mod:`crfhead.heads.base`).

* :class:`CRF`: global normalisation, conditional log-likelihood (Definition 3).
* :class:`MEMM`: local softmax per position, trained on the gold previous tag (Definition 4).
* :class:`StructuredPerceptron`: Viterbi-vs-gold perceptron loss or Hamming hinge (Algorithm 1).
* :class:`HMM`: the generative tagger fitted by counting (Definition 2), a :class:`CountingHead`.
* :mod:`~crfhead.heads.hmm_crf`: Theorem 3's converters between the HMM and the indicator CRF.

In a config: ``model.head.class_path: crfhead.heads.MEMM`` (or ``...StructuredPerceptron``,
``crfhead.heads.HMM``, ``crfhead.heads.CRF``).
"""

from crfhead.heads.base import ChainHead, CountingHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron

__all__ = ["CRF", "HMM", "MEMM", "ChainHead", "CountingHead", "StructuredPerceptron"]

"""The structured heads: each is chain potentials plus a loss; decoding is shared (:mod:`crfhead.heads.base`).

* :class:`~crfhead.heads.crf.CRF`: global normalisation, conditional log-likelihood (Definition 3).
* :class:`MEMM`: local softmax per position, trained on the gold previous tag (Definition 4).
* :class:`StructuredPerceptron`: Viterbi-vs-gold perceptron loss or Hamming hinge (Algorithm 1).
* :class:`~crfhead.heads.hmm.HMM`: the generative tagger fitted by counting (Definition 2).

In a config: ``model.head.class_path: crfhead.heads.MEMM`` (or ``...StructuredPerceptron``,
``crfhead.heads.hmm.HMM``, ``crfhead.heads.crf.CRF``).
"""

from crfhead.heads.base import ChainHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron

__all__ = ["CRF", "HMM", "MEMM", "ChainHead", "StructuredPerceptron"]

"""The structured heads: each is chain potentials plus a loss; decoding is shared (:mod:`crfhead.head`).

* :class:`~crfhead.crf.CRF`: global normalisation, conditional log-likelihood (Definition 3).
* :class:`MEMM`: local softmax per position, trained on the gold previous tag (Definition 4).
* :class:`StructuredPerceptron`: Viterbi-vs-gold perceptron loss or Hamming hinge (Algorithm 1).
* :class:`~crfhead.hmm.HMM`: the generative tagger fitted by counting (Definition 2).

In a config: ``model.head.class_path: crfhead.heads.MEMM`` (or ``...StructuredPerceptron``,
``crfhead.hmm.HMM``, ``crfhead.crf.CRF``).
"""

from crfhead.crf import CRF
from crfhead.head import ChainHead
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron
from crfhead.hmm import HMM

__all__ = ["CRF", "HMM", "MEMM", "ChainHead", "StructuredPerceptron"]

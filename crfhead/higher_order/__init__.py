"""Higher-order CRFs: chains plus non-local patterns over a group of sentences (Qian & Liu, TACL 2014).

Qian & Liu (TACL 2014) decode *generalized higher-order CRFs* (the linear chain of each sentence plus
sparse patterns: skip edges between identical words, consistency factors over identical phrases) by
dual decomposition with two slaves: Viterbi on the chains and one minimum cut for all the patterns.

* :class:`Pattern`, :func:`decode` (methods ``viterbi``, ``dd2slave``, ``dd_factor``, ``ilp``), its
  :class:`DecodeResult` (labelling, score, bound, certificate, history);
* builders: :func:`group_tweets`, :func:`consistency_patterns`, :func:`skip_patterns`;
* for ``train.py``: :class:`FactorDecoder` (``model.decoder`` in a config) over the factor kinds
  :class:`Consistency` and :class:`SkipChain`, on groups from :mod:`crfhead.data.grouping`;
* for a trained chain model (``scripts/higher_order_eval.py``): each corpus's groups, factors and dev
  grid (:mod:`~crfhead.higher_order.corpus_setup`), its evaluation per group and the weight chosen
  on dev (:mod:`~crfhead.higher_order.evaluation`), and the two-stage baseline of Krishnan & Manning
  (:mod:`~crfhead.higher_order.two_stage`, :mod:`~crfhead.higher_order.two_stage_pipeline`).

The rest of the library does not import this package; scipy is imported by the min-cut and ILP
solvers when they run.
"""

from crfhead.higher_order.builders import consistency_patterns, group_tweets, skip_patterns
from crfhead.higher_order.decode import METHODS, decode
from crfhead.higher_order.decoder import FactorDecoder
from crfhead.higher_order.factors import Consistency, Factors, SkipChain
from crfhead.higher_order.patterns import Pattern
from crfhead.higher_order.result import DecodeResult

__all__ = [
    "METHODS",
    "Consistency",
    "DecodeResult",
    "FactorDecoder",
    "Factors",
    "Pattern",
    "SkipChain",
    "consistency_patterns",
    "decode",
    "group_tweets",
    "skip_patterns",
]

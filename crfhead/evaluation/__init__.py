"""Evaluation: span metrics (seqeval, strict), the test report, and exact span probabilities.

* :mod:`~crfhead.evaluation.metrics`: :class:`~crfhead.evaluation.metrics.TaggingMetrics`, counts that
  add up exactly over batches and processes;
* :mod:`~crfhead.evaluation.report`: the counts as a text table and as JSON;
* :mod:`~crfhead.evaluation.spans`: the marginal probability of each entity span under a chain head.
"""

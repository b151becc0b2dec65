"""The seed's research harness: simulated worlds with exact Bayes taggers, experiments and figure payloads.

*Sequence Labeling: From HMMs to Linear-Chain CRFs*: :mod:`~crfhead.theory.worlds` (the well-specified and next-state
worlds), :mod:`~crfhead.theory.experiments` (learning curves, MEMM ceilings),
:mod:`~crfhead.theory.payload` (the "Decoding risk" trellis). It uses the library; the library never
imports it.
"""

"""Backends of the chain engine: which implementation runs ``log Z``, the loss, marginals and Viterbi.

* ``portable`` (:mod:`~crfhead.engine.backends.portable`): the PyTorch scans of
  :mod:`crfhead.engine.scan` (any device, always available, differentiable to any order; the reference
  the others are tested against).
* ``cpu`` (:mod:`~crfhead.engine.backends.cpu`): a fused native kernel, the whole forward-backward or
  Viterbi in one call, the batch split over threads; compiled from ``csrc/chain_cpu.cpp`` with the
  system C++ compiler on first use and cached.
* ``triton`` (:mod:`~crfhead.engine.backends.triton`): fused GPU kernels, one launch per operation, a
  program per sequence looping over time; CUDA tensors (and CPU ones under ``TRITON_INTERPRET=1``).

Each is a :class:`~crfhead.engine.backends.autograd.Kernel` behind the one autograd function
(:mod:`~crfhead.engine.backends.autograd`); :mod:`~crfhead.engine.backends.select` chooses. Backends
import the scan, never the dispatcher (:mod:`crfhead.engine`).
"""

from crfhead.engine.backends.select import BACKENDS, available, kernel, resolve, use_backend

__all__ = ["BACKENDS", "available", "kernel", "resolve", "use_backend"]

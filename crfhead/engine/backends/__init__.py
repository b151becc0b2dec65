"""Backends of the chain engine: which implementation runs each op.

The ops: ``log Z``, the loss, marginals, edge and max-marginals, entropy, Viterbi, k-best, samples.

* ``portable`` (:mod:`~crfhead.engine.backends.portable`): the PyTorch scans of
  :mod:`crfhead.engine.scan` (any device, always available, differentiable to any order; the reference
  the others are tested against).
* ``cpu`` (:mod:`~crfhead.engine.backends.cpu`): a fused native kernel, every op in one call (or
  two), the batch split over threads; compiled from ``csrc/chain_cpu.cpp`` with the system C++
  compiler on first use and cached; the loss, ``log Z``, marginals and Viterbi also as dispatcher ops
  with a C++ gradient rule (:mod:`~crfhead.engine.backends.cpu.dispatcher`, ``csrc/chain_ops.cpp``),
  the same op in eager calls and while ``torch.compile``/``torch.export`` trace.
* ``triton`` (:mod:`~crfhead.engine.backends.triton`): fused GPU kernels, one launch per operation, a
  program per sequence looping over time; CUDA tensors (and CPU ones under ``TRITON_INTERPRET=1``);
  every op of the table, k-best past a ``k x K`` state of 4,096 by the portable scan on the device.

Each fused backend registers the ops of the op table (:mod:`crfhead.engine.table`) it fuses, by name;
the table falls back to the portable scan for the others and differentiates by each op's rule
(:mod:`~crfhead.engine.backends.autograd`); :mod:`~crfhead.engine.backends.select` chooses. Backends
import the scan, never the table or the dispatcher (:mod:`crfhead.engine`).
"""

from crfhead.engine.backends.select import BACKENDS, available, kernel, resolve, use_backend

__all__ = ["BACKENDS", "available", "kernel", "resolve", "use_backend"]

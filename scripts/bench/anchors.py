"""One adapter per library: the calls the benchmark times, on one case's data.

An adapter is a function ``Inputs -> Adapter`` (:mod:`bench.adapter`); :data:`ADAPTERS` lists them
in table order, so a new library is one function and one entry. The ops and their outputs:

* ``loss``: forward + backward of the summed negative log-likelihood, gradients with respect to
  the emissions and the CRF parameters (transitions, start, end). crfhead: ``CRF.nll``;
  pytorch-crf: ``-CRF.forward``; torch-struct: ``LinearChainCRF(...).partition`` minus the
  gold-path score, read off the edge potentials.
* ``decode``: Viterbi paths. crfhead: ``CRF.decode``; pytorch-crf: ``CRF.decode`` (lists);
  torch-struct: ``.argmax`` (edge indicators) turned into ``(B, T)`` paths.
* ``marginals``: node marginals ``p(z_t = k | x)``. crfhead: ``CRF.marginals``; torch-struct:
  ``.marginals`` (edge marginals, summed into node marginals).
* ``edge_marginals``: crfhead: ``CRF.edge_marginals``; torch-struct: ``.marginals`` (a ``[to,
  from]`` view of it transposed to ``[from, to]``).
* ``entropy``: crfhead: ``CRF.entropy``; torch-struct: ``.entropy``.
* ``topk``: the 5 best paths. crfhead: ``CRF.topk`` (scores and paths); torch-struct:
  ``.topk(5)`` (edge indicators) and the scores of those paths, read off the edge potentials.
* ``sample``: 10 samples per chain. crfhead: ``CRF.sample``; torch-struct: ``.sample((10,))``.
* ``max_marginals``: crfhead only (``CRF.max_marginals``), compared with crfhead-portable.

pytorch-crf has only ``loss`` and ``decode`` ("—" elsewhere), as has ``crfhead-kernel``: the fused
CPU kernel's native entry points alone (:func:`crfhead_kernel_adapter`), the floor of the eager calls. ``crfhead`` runs the engine's backend
for the device (``--backend``, default ``auto``: the fused C++ kernel on CPU, the Triton kernels on
CUDA); ``crfhead-portable`` the same layer on the portable PyTorch backend. crfhead and pytorch-crf
calls other than ``loss`` run under ``torch.no_grad()``. torch-struct is in
:mod:`bench.struct_anchor`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from bench.adapter import K_BEST, NUM_SAMPLES, OPS, Adapter, loss_op, no_grad_op, on_backend
from bench.cases import Inputs
from bench.engine import CRF, available, native, threads_for
from bench.struct_anchor import HAS_TORCH_STRUCT, struct_adapter

try:
    import torchcrf
except ImportError:  # pragma: no cover - the benchmark needs it
    sys.exit("pytorch-crf is missing: pip install pytorch-crf==0.7.2")

__all__ = ["ADAPTERS", "HAS_TORCH_STRUCT", "LIBS", "OPS", "torchcrf_float64"]


# --------------------------------------------------------------------------- crfhead
def crfhead_adapter(inp: Inputs) -> Adapter:
    crf = CRF(inp.emissions.shape[2])
    crf.load_state_dict(inp.params)
    crf.to(inp.emissions.device)
    em, tags, mask = inp.emissions, inp.tags, inp.mask

    def log_partition() -> Tensor:
        with torch.no_grad():
            return crf.log_partition(em, mask)

    def topk() -> dict[str, Any]:
        scores, paths = crf.topk(em, K_BEST, mask)
        return {"topk_scores": scores, "topk_paths": paths}

    calls = {
        "loss": loss_op(crf, inp, lambda e: {"nll": crf.nll(e, tags, mask, reduction="none")}),
        "decode": lambda: {"paths": crf.decode(em, mask)},
        "marginals": lambda: {"marginals": crf.marginals(em, mask)},
        "edge_marginals": lambda: {"edge_marginals": crf.edge_marginals(em, mask)},
        "entropy": lambda: {"entropy": crf.entropy(em, mask)},
        "topk": topk,
        "sample": lambda: {"samples": crf.sample(em, NUM_SAMPLES, mask)},
        "max_marginals": lambda: {"max_marginals": crf.max_marginals(em, mask)},
    }
    return Adapter(
        calls={op: fn if op == "loss" else no_grad_op(fn) for op, fn in calls.items()},
        extra={"logz": log_partition},
    )


def crfhead_portable_adapter(inp: Inputs) -> Adapter:
    ours = crfhead_adapter(inp)
    return Adapter(calls={op: on_backend("portable", fn) for op, fn in ours.calls.items()})


def crfhead_kernel_adapter(inp: Inputs) -> Adapter:
    """The fused CPU kernel's own time: its native entry points on preallocated outputs.

    ``loss``: the forward entry (log Z, gold score and the gradient's parts) and the backward one
    (the parts scaled by a gradient of ones); ``decode``: the Viterbi entry. The same potentials as
    the ``crfhead`` column's layer builds (unconstrained, float32), the same thread count as the
    backend chooses; no validation, no autograd, no allocation: the floor the ``crfhead`` column's
    eager calls are measured against (``crfhead / kernel``). CPU only.
    """
    if inp.emissions.device.type != "cpu" or not available("cpu")[0]:
        return Adapter(calls={})
    entry = native.entries()
    em = inp.emissions.contiguous()
    B, T, K = em.shape
    chain = (
        em,
        *(
            inp.params[k].contiguous()
            for k in ("transitions", "start_transitions", "end_transitions")
        ),
        inp.mask.contiguous(),
    )
    tags = torch.where(inp.mask, inp.tags, 0).long().contiguous()
    threads = threads_for(B, T, K, dtype=em.dtype)
    value, gold = em.new_empty(B), em.new_empty(B)
    node, edge, first, last = (
        em.new_empty(B, T, K),
        em.new_empty(B, K, K),
        em.new_empty(B, K),
        em.new_empty(B, K),
    )
    ones = em.new_ones(B)
    d_em, d_tr, d_start, d_end = (
        em.new_empty(B, T, K),
        em.new_empty(K, K),
        em.new_empty(K),
        em.new_empty(K),
    )
    scores, paths = em.new_empty(B), torch.empty(B, T, dtype=torch.long)

    def loss() -> dict[str, Any]:
        entry["nll_grad"](chain, tags, value, gold, node, edge, first, last, threads)
        entry["scale_grads"](ones, node, edge, first, last, B, T, K, 0, d_em, d_tr, d_start, d_end)
        return {}

    def decode() -> dict[str, Any]:
        entry["viterbi"](chain, scores, paths, threads)
        return {}

    return Adapter(calls={"loss": loss, "decode": no_grad_op(decode)})


# --------------------------------------------------------------------------- pytorch-crf
def torchcrf_module(inp: Inputs) -> torchcrf.CRF:
    crf = torchcrf.CRF(inp.emissions.shape[2], batch_first=True)
    crf.load_state_dict(inp.params)
    return crf.to(inp.emissions.device)


def torchcrf_adapter(inp: Inputs) -> Adapter:
    crf = torchcrf_module(inp)
    em, tags, mask = inp.emissions, inp.tags, inp.mask
    return Adapter(
        calls={
            "loss": loss_op(crf, inp, lambda e: {"nll": -crf(e, tags, mask, reduction="none")}),
            "decode": no_grad_op(lambda: {"paths": crf.decode(em, mask)}),
        }
    )


def torchcrf_float64(inp: Inputs) -> dict[str, Any]:
    """The arbiter of a disagreement: pytorch-crf's own code in float64, on the same data (CPU)."""
    K = inp.emissions.shape[2]
    ref = torchcrf.CRF(K, batch_first=True).double()
    ref.load_state_dict({k: v.cpu() for k, v in inp.params.items()})
    tags, mask = inp.tags.cpu(), inp.mask.cpu()
    em = inp.emissions.cpu().double().requires_grad_(True)
    llh = ref(em, tags, mask, reduction="none")
    (grad,) = torch.autograd.grad(-llh.sum(), em)
    em = inp.emissions.cpu().double().requires_grad_(True)
    logz = ref._compute_normalizer(em.transpose(0, 1), mask.transpose(0, 1))
    (marginals,) = torch.autograd.grad(logz.sum(), em)  # d log Z / d emissions
    with torch.no_grad():
        paths = ref.decode(em.detach(), mask)
    return {
        "nll": -llh.detach(),
        "grad": grad,
        "logz": logz.detach(),
        "marginals": marginals,
        "paths": paths,
    }


ADAPTERS: dict[str, Callable[[Inputs], Adapter]] = {
    "crfhead": crfhead_adapter,
    "crfhead-portable": crfhead_portable_adapter,
    "crfhead-kernel": crfhead_kernel_adapter,
    "pytorch-crf": torchcrf_adapter,
    "torch-struct": struct_adapter,
}
"""Every library, in the tables' column order."""

LIBS = tuple(ADAPTERS)

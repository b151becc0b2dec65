"""One adapter per library: the calls the benchmark times, on one case's data.

An adapter is a function ``Inputs -> Adapter``; :data:`ADAPTERS` lists them in table order, so a
new library is one function and one entry. Each call returns its outputs by name for the agreement:
``loss`` gives ``nll`` ``(B,)`` and ``grad`` (of the emissions), ``decode`` gives ``paths`` (a
``(B, T)`` tensor with -1 where masked, or lists), ``marginals`` gives ``marginals`` ``(B, T, K)``.

* ``loss``: forward + backward of the summed negative log-likelihood, gradients with respect to
  the emissions and the CRF parameters (transitions, start, end). crfhead: ``CRF.nll``;
  pytorch-crf: ``-CRF.forward``; torch-struct: ``LinearChainCRF(...).partition`` minus the
  gold-path score, read off the edge potentials.
* ``decode``: Viterbi paths. crfhead: ``CRF.decode``; pytorch-crf: ``CRF.decode`` (lists);
  torch-struct: ``.argmax`` (edge indicators) turned into ``(B, T)`` paths.
* ``marginals``: node marginals ``p(z_t = k | x)``. crfhead: ``CRF.marginals``; torch-struct:
  ``.marginals`` (edge marginals, summed into node marginals); pytorch-crf has none.

``crfhead`` runs the engine's backend for the device (``--backend``, default ``auto``: the fused
C++ kernel on CPU, the Triton kernels on CUDA); ``crfhead-portable`` the same layer on the portable
PyTorch backend.

torch-struct's calls include building its ``(B, T-1, K, K)`` edge potentials from the emissions
and the transition/start/end parameters (start is folded into the first edge, end into the last
edge of each sequence), since that is what a user of it has to do. Its edge convention is
``log_potentials[b, n, z_{n+1}, z_n]`` ([to, from]); crfhead's and pytorch-crf's transitions are
``[from, to]``. crfhead and pytorch-crf decode / marginals run under ``torch.no_grad()``;
torch-struct needs autograd for them (they are gradients of its partition function).

torch-struct 0.5 imports and runs unchanged on torch 2.13; the only accommodation is silencing the
``UserWarning`` torch.distributions raises because its classes lack ``arg_constraints``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from bench.cases import Inputs
from bench.engine import CRF, use_backend
from bench.timing import Op

try:
    import torchcrf
except ImportError:  # pragma: no cover - the benchmark needs it
    sys.exit("pytorch-crf is missing: pip install pytorch-crf==0.7.2")

try:
    import torch_struct
except ImportError:  # pragma: no cover - optional with --skip-struct
    torch_struct = None
HAS_TORCH_STRUCT = torch_struct is not None

# torch-struct 0.5 predates ``Distribution.arg_constraints``; torch warns on every new class. Harmless.
warnings.filterwarnings("ignore", message=".*does not define `arg_constraints`")

OPS = ("loss", "decode", "marginals")


@dataclass(frozen=True)
class Adapter:
    """One library's calls on one case; an op the library lacks is ``None``."""

    loss: Op
    decode: Op
    marginals: Op | None = None
    extra: dict[str, Callable[[], Any]] = field(default_factory=dict)
    """Outputs the agreement needs that no timed call gives, computed (untimed) on demand."""

    def op(self, name: str) -> Op | None:
        return {"loss": self.loss, "decode": self.decode, "marginals": self.marginals}[name]


# --------------------------------------------------------------------------- shared pieces
def loss_op(module: nn.Module, inp: Inputs, nll: Callable[[Tensor], dict[str, Tensor]]) -> Op:
    """Forward + backward of ``nll(emissions)["nll"].sum()``, on a leaf copy of the emissions.

    ``nll`` may return more outputs (e.g. ``logz``); all come back detached, with ``grad``.
    """
    em = inp.emissions.clone().requires_grad_(True)

    def run() -> dict[str, Any]:
        for p in module.parameters():
            p.grad = None
        em.grad = None
        out = nll(em)
        torch.autograd.backward(out["nll"].sum())
        return {**{k: v.detach() for k, v in out.items()}, "grad": em.grad}

    return run


def no_grad_op(key: str, fn: Callable[[], Any]) -> Op:
    def run() -> dict[str, Any]:
        with torch.no_grad():
            return {key: fn()}

    return run


def on_backend(name: str, fn: Op) -> Op:
    """``fn`` run with crfhead's backend ``name`` selected."""

    def run() -> dict[str, Any]:
        with use_backend(name):
            return fn()

    return run


# --------------------------------------------------------------------------- crfhead
def crfhead_adapter(inp: Inputs) -> Adapter:
    crf = CRF(inp.emissions.shape[2])
    crf.load_state_dict(inp.params)
    crf.to(inp.emissions.device)
    em, tags, mask = inp.emissions, inp.tags, inp.mask

    def log_partition() -> Tensor:
        with torch.no_grad():
            return crf.log_partition(em, mask)

    return Adapter(
        loss=loss_op(crf, inp, lambda e: {"nll": crf.nll(e, tags, mask, reduction="none")}),
        decode=no_grad_op("paths", lambda: crf.decode(em, mask)),
        marginals=no_grad_op("marginals", lambda: crf.marginals(em, mask)),
        extra={"logz": log_partition},
    )


def crfhead_portable_adapter(inp: Inputs) -> Adapter:
    ours = crfhead_adapter(inp)
    assert ours.marginals is not None
    return Adapter(
        loss=on_backend("portable", ours.loss),
        decode=on_backend("portable", ours.decode),
        marginals=on_backend("portable", ours.marginals),
    )


# --------------------------------------------------------------------------- pytorch-crf
def torchcrf_module(inp: Inputs) -> torchcrf.CRF:
    crf = torchcrf.CRF(inp.emissions.shape[2], batch_first=True)
    crf.load_state_dict(inp.params)
    return crf.to(inp.emissions.device)


def torchcrf_adapter(inp: Inputs) -> Adapter:
    crf = torchcrf_module(inp)
    em, tags, mask = inp.emissions, inp.tags, inp.mask
    return Adapter(
        loss=loss_op(crf, inp, lambda e: {"nll": -crf(e, tags, mask, reduction="none")}),
        decode=no_grad_op("paths", lambda: crf.decode(em, mask)),
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


# --------------------------------------------------------------------------- torch-struct
def struct_log_potentials(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, lengths: Tensor
) -> Tensor:
    """torch-struct edge potentials ``(B, T-1, K_to, K_from)`` of a CRF with start/end scores.

    Edge ``n`` scores ``z_n -> z_{n+1}``: ``transitions[z_n, z_{n+1}] + emissions[n+1, z_{n+1}]``;
    edge 0 also carries ``start[z_0] + emissions[0, z_0]`` and edge ``length - 2`` carries
    ``end[z_{length-1}]``. Needs every length >= 2.
    """
    T = emissions.shape[1]
    edge = transitions.t()[None, None] + emissions[:, 1:, :, None]
    first = (start + emissions[:, 0])[:, None, None, :]
    edge = torch.cat([edge[:, :1] + first, edge[:, 1:]], dim=1)
    last = torch.arange(T - 1, device=emissions.device)[None, :] == (lengths - 2)[:, None]
    return edge + last.to(edge.dtype)[:, :, None, None] * end[None, None, :, None]


def struct_gold_score(log_potentials: Tensor, tags: Tensor, lengths: Tensor) -> Tensor:
    """Score of the gold paths under edge potentials, ``(B,)`` (vectorised ``.log_prob`` numerator)."""
    B, N1, K, _ = log_potentials.shape
    flat = log_potentials.reshape(B, N1, K * K)
    pair = flat.gather(2, (tags[:, 1:] * K + tags[:, :-1]).unsqueeze(-1)).squeeze(-1)
    valid = torch.arange(N1, device=tags.device)[None, :] < (lengths - 1)[:, None]
    return torch.where(valid, pair, torch.zeros_like(pair)).sum(1)


def struct_paths(edge_argmax: Tensor, mask: Tensor) -> Tensor:
    """``(B, T)`` tags from torch-struct's ``(B, T-1, K_to, K_from)`` argmax indicators, -1 masked."""
    first = edge_argmax[:, 0].sum(-2).argmax(-1)
    rest = edge_argmax.sum(-1).argmax(-1)
    path = torch.cat([first[:, None], rest], dim=1)
    return torch.where(mask, path, torch.full_like(path, -1))


def struct_node_marginals(edge_marginals: Tensor) -> Tensor:
    """``(B, T, K)`` node marginals from ``(B, T-1, K_to, K_from)`` edge marginals (0 where masked)."""
    first = edge_marginals[:, 0].sum(-2)
    return torch.cat([first[:, None], edge_marginals.sum(-1)], dim=1)


def struct_adapter(inp: Inputs) -> Adapter:
    assert torch_struct is not None
    sp = nn.ParameterDict({k: nn.Parameter(v.detach().clone()) for k, v in inp.params.items()})
    em, tags, mask, lengths = inp.emissions, inp.tags, inp.mask, inp.lengths

    def potentials(e: Tensor) -> Tensor:
        return struct_log_potentials(
            e, sp["transitions"], sp["start_transitions"], sp["end_transitions"], lengths
        )

    def nll(e: Tensor) -> dict[str, Tensor]:
        lp = potentials(e)
        partition = torch_struct.LinearChainCRF(lp, lengths=lengths).partition
        return {"nll": partition - struct_gold_score(lp, tags, lengths), "logz": partition}

    def no_grad_chain() -> Any:
        # The potentials are data here; torch-struct's argmax / marginals take their own gradients.
        with torch.no_grad():
            lp = potentials(em)
        return torch_struct.LinearChainCRF(lp, lengths=lengths)

    def decode() -> dict[str, Any]:
        return {"paths": struct_paths(no_grad_chain().argmax.detach(), mask)}

    def marginals() -> dict[str, Any]:
        return {"marginals": struct_node_marginals(no_grad_chain().marginals.detach())}

    return Adapter(loss=loss_op(sp, inp, nll), decode=decode, marginals=marginals)


ADAPTERS: dict[str, Callable[[Inputs], Adapter]] = {
    "crfhead": crfhead_adapter,
    "crfhead-portable": crfhead_portable_adapter,
    "pytorch-crf": torchcrf_adapter,
    "torch-struct": struct_adapter,
}
"""Every library, in the tables' column order."""

LIBS = tuple(ADAPTERS)

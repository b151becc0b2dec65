"""The torch-struct adapter: its ``LinearChainCRF`` distribution on the benchmark's CRF.

torch-struct's calls include building its ``(B, T-1, K, K)`` edge potentials from the emissions
and the transition/start/end parameters (start is folded into the first edge, end into the last
edge of each sequence), since that is what a user of it has to do. Its edge convention is
``log_potentials[b, n, z_{n+1}, z_n]`` ([to, from]); crfhead's and pytorch-crf's transitions are
``[from, to]``. Its decode, marginals, top-k and samples are gradients of a partition function in
some semiring, so they run with autograd on (the potentials themselves are built under
``torch.no_grad()``); its entropy is a forward pass in the entropy semiring.

torch-struct 0.5 imports and runs unchanged on torch 2.13; the only accommodation is silencing the
``UserWarning`` torch.distributions raises because its classes lack ``arg_constraints``.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor, nn

from bench.adapter import K_BEST, NUM_SAMPLES, Adapter, loss_op
from bench.cases import Inputs

try:
    import torch_struct
except ImportError:  # pragma: no cover - optional with --skip-struct
    torch_struct = None
HAS_TORCH_STRUCT = torch_struct is not None

# torch-struct 0.5 predates ``Distribution.arg_constraints``; torch warns on every new class. Harmless.
warnings.filterwarnings("ignore", message=".*does not define `arg_constraints`")

BYTES_PER_CUBE = {"topk": 240, "sample": 220}
"""Peak bytes per element of the first scan level's ``(B, N/2, K, K, K)`` products, measured (max
RSS at ``(64, 128, 17)``: 4.7 and 4.4 GiB): top-k keeps ``k^2 = 25`` candidates and their indices
per element, sampling draws 16 one-hot ``int64`` samples per element in its backward."""


def predicted_gib(op: str, B: int, T: int, K: int) -> float:
    """Predicted peak memory of torch-struct's ``op`` (0 for the ops that stay well under 8 GiB).

    Its scan pads the ``T - 1`` edges to a power of two ``N`` and first multiplies ``N / 2`` pairs of
    ``(K, K)`` matrices, materialising ``(B, N/2, K, K, K)`` products in the op's semiring.
    """
    n = 1 << max(T - 2, 0).bit_length()
    return BYTES_PER_CUBE.get(op, 0) * B * (n // 2) * K**3 / 2**30


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


def struct_path_scores(indicators: Tensor, log_potentials: Tensor) -> Tensor:
    """Scores ``(B, k)`` of the paths given as ``(k, B, T-1, K, K)`` edge indicators (``.topk``)."""
    return (indicators * log_potentials[None]).sum((-3, -2, -1)).t()


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

    def no_grad_potentials() -> Tensor:
        # The potentials are data here; torch-struct's argmax / marginals take their own gradients.
        with torch.no_grad():
            return potentials(em)

    def chain() -> Any:
        return torch_struct.LinearChainCRF(no_grad_potentials(), lengths=lengths)

    def decode() -> dict[str, Any]:
        return {"paths": struct_paths(chain().argmax.detach(), mask)}

    def marginals() -> dict[str, Any]:
        return {"marginals": struct_node_marginals(chain().marginals.detach())}

    def edge_marginals() -> dict[str, Any]:
        return {"edge_marginals": chain().marginals.detach().transpose(-1, -2)}

    def entropy() -> dict[str, Any]:
        with torch.no_grad():
            return {"entropy": chain().entropy.detach()}

    def topk() -> dict[str, Any]:
        lp = no_grad_potentials()
        paths = torch_struct.LinearChainCRF(lp, lengths=lengths).topk(K_BEST).detach()
        return {"topk_scores": struct_path_scores(paths, lp).detach()}

    def sample() -> dict[str, Any]:
        chain().sample((NUM_SAMPLES,))  # edge indicators; not compared (random), not kept
        return {}

    calls = {
        "loss": loss_op(sp, inp, nll),
        "decode": decode,
        "marginals": marginals,
        "edge_marginals": edge_marginals,
        "entropy": entropy,
        "topk": topk,
        "sample": sample,
    }
    B, T, K = em.shape
    return Adapter(calls=calls, peak_gib={op: predicted_gib(op, B, T, K) for op in BYTES_PER_CUBE})

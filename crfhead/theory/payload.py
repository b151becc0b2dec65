"""The payload of the seed's "Decoding risk" figure: a trellis where posterior decoding and Viterbi disagree.

:func:`viz_payload` is deterministic; ``docs/trellis.json`` is its output (a test keeps them equal, and
``scripts/trellis_payload.py`` rewrites the file).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import log_partition, marginals, max_marginals, viterbi
from crfhead.theory.worlds import World, well_specified_world

__all__ = ["trellis_example", "viz_payload"]


def _expected_correct(gamma: Tensor, tags: Tensor) -> Tensor:
    """``sum_t gamma_t(tags_t)``, ``(n,)``: the expected number of correct tags (Theorem 4 (b))."""
    return gamma.gather(2, tags.clamp(min=0).unsqueeze(-1)).squeeze(-1).sum(1)


def trellis_example(world: World, seed: int = 0, max_tries: int = 10000) -> dict[str, Any]:
    """The "Decoding risk" trellis: the first draw where the marginal argmax leaves the Viterbi path.

    Draws one sequence at a time from ``torch.Generator().manual_seed(seed)``.

    Returns:
        A JSON-able dict: ``world``, ``seed``, ``draw``, ``words``, ``gold``, ``marginals`` (T x K),
        ``max_marginals_relative`` (T x K, 1 along the Viterbi path), ``viterbi``, ``posterior``,
        ``disagree_at``, ``correct_viterbi``, ``correct_posterior``, ``expected_correct_viterbi``,
        ``expected_correct_posterior``, ``best_path_probability`` (floats rounded to 6 decimals).

    Raises:
        ValueError: if no draw in ``max_tries`` has a disagreement.
    """
    g = torch.Generator().manual_seed(seed)
    for draw in range(max_tries):
        words, gold = world.sample(1, g)
        pot = world.bayes_potentials(words)
        best, path = viterbi(pot)
        gamma = marginals(pot)
        post = gamma.argmax(-1)
        disagree = (post != path)[0].nonzero().flatten().tolist()
        if not disagree:
            continue
        log_best = float(best[0] - log_partition(pot)[0])
        relative = max_marginals(pot)[0] / math.exp(log_best)

        def r(x: Tensor) -> list[Any]:
            out: list[Any] = [[round(float(v), 6) for v in row] for row in x]
            return out

        return {
            "world": world.name,
            "seed": seed,
            "draw": draw,
            "words": words[0].tolist(),
            "gold": gold[0].tolist(),
            "marginals": r(gamma[0]),
            "max_marginals_relative": r(relative),
            "viterbi": path[0].tolist(),
            "posterior": post[0].tolist(),
            "disagree_at": disagree,
            "correct_viterbi": int((path == gold).sum()),
            "correct_posterior": int((post == gold).sum()),
            "expected_correct_viterbi": round(float(_expected_correct(gamma, path)[0]), 6),
            "expected_correct_posterior": round(float(_expected_correct(gamma, post)[0]), 6),
            "best_path_probability": round(math.exp(log_best), 6),
        }
    raise ValueError(f"no disagreement between Viterbi and posterior decoding in {max_tries} draws")


def viz_payload() -> dict[str, Any]:
    """The deterministic payload for plots: the well-specified world's trellis example."""
    return {"well_specified": trellis_example(well_specified_world(), 0)}

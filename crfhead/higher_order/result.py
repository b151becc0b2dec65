"""What every higher-order decoder returns: the labelling, its score, the best bound, the certificate."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

__all__ = ["DecodeResult", "certifies"]


def certifies(primal: float, dual: float, scale: float = 0.0) -> bool:
    """Whether ``primal`` is proven optimal by the upper bound ``dual``: up to 1e-9 relative.

    The tolerance is relative to ``max(1, |dual|, scale)``. Decoders pass the *coupled* part of a
    group (the sentences patterns touch, and the patterns; ``scale`` the patterns' summed magnitude),
    never the whole group's score, so that a large score of an uncoupled sentence cannot widen it.
    """
    return primal >= dual - 1e-9 * max(1.0, abs(dual), scale)


@dataclass
class DecodeResult:
    """A decoded group.

    Attributes:
        tags: ``(B, T)`` int64, ``-1`` where masked.
        primal: the full score of ``tags`` (chains plus patterns).
        dual: the best upper bound on the optimum found (``inf`` when the method has none).
        certified: ``primal`` is proven optimal: on the sentences patterns touch plus the patterns,
            the part the decoders bound, ``primal >= dual`` up to 1e-9 relative to that part (the
            other sentences are at their Viterbi optimum); see :func:`certifies`.
        iterations: dual-decomposition iterations run (1 for ``viterbi`` and ``ilp``).
        method: the decoder that produced it.
        seconds: wall time of the decoding.
        dual_history: the dual value at each iteration's multipliers.
        primal_history: the best primal found up to each iteration.
    """

    tags: Tensor
    primal: float
    dual: float
    certified: bool
    iterations: int
    method: str
    seconds: float = 0.0
    dual_history: list[float] = field(default_factory=list)
    primal_history: list[float] = field(default_factory=list)

    @property
    def gap(self) -> float:
        """``dual - primal`` (0 when certified)."""
        return 0.0 if self.certified else max(0.0, self.dual - self.primal)

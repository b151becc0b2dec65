"""Evaluation of taggers: span P/R/F1 (seqeval, strict), token accuracy, unseen-word accuracy, log-loss.

:class:`TaggingMetrics` accumulates label-string batches (``update``) and reports a flat
``dict[str, float]`` (``compute``) that the training loop logs each epoch;
:mod:`crfhead.evaluation.report` prints it as a table and saves it as JSON.

Spans are read by seqeval (1.2.x) in **strict** mode with the scheme of the labels: ``BIO`` → ``IOB2``,
``IOB1`` → ``IOB1``, ``BIOES`` → ``IOBES``, ``BIOUL`` → ``BILOU`` (seqeval also has ``IOE1``/``IOE2``,
which crfhead does not use). seqeval has no strict ``IO`` scheme (strict ``IOB2`` reads no entity at all
in ``I-X``/``O`` labels), so ``IO`` is scored in seqeval's default (conlleval) mode, which reads IO
exactly as :func:`crfhead.schemes.tags_to_spans` does: a run of ``I-X`` is one entity.

What seqeval's strict mode does with sequences that are *invalid* in the scheme (checked for every
sequence of up to 4 labels over 2 types): it never raises for labels of the scheme, and

* on valid sequences it reads the same entities as :func:`crfhead.schemes.tags_to_spans`;
* in BIO, BIOES and BIOUL it silently drops each malformed entity (``O I-PER``, an unclosed
  ``B-PER I-PER O``, ``B-PER S-PER``...): the entities it reads are a strict subset of the lenient ones;
* in IOB1 it may instead read a *shifted* entity: ``O B-PER I-PER`` gives ``PER`` on token 2 alone;
* labels whose prefix is not in the scheme make it raise (``ValueError`` or a bare ``KeyError``); we
  reject them first with :func:`crfhead.schemes.split_label`'s ``ValueError``, which names the label.

So :class:`TaggingMetrics` repairs invalid **gold** sequences with
:func:`crfhead.schemes.repair_tags` by default (no gold entity is lost; counted and warned about
once), and passes invalid **predictions** through: an ill-formed predicted entity is not an entity,
which is what strict scoring means (a constrained CRF never produces one). Both are counted in the
output (``gold_invalid_sentences``, ``gold_repaired_tags``, ``pred_invalid_sentences``,
``pred_repaired_tags``); ``repair_pred=True`` scores predictions leniently (conlleval-like) instead.

The state is a handful of integer counts (per entity type: true positives, predicted, gold), so batches
add up exactly: several ``update`` calls equal one, and accumulators merge across processes
(:meth:`TaggingMetrics.state_dict` / :meth:`TaggingMetrics.merge`, or :meth:`TaggingMetrics.gather`
under ``torch.distributed``). Every number equals seqeval's ``classification_report`` on the
concatenated batches, except that ratios with a zero denominator are 0.0 without a warning
(seqeval's ``zero_division`` default) and the macro average over no entity type at all is 0.0 (seqeval:
NaN).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import torch.distributed as dist
from seqeval.scheme import BILOU, IOB1, IOB2, IOBES, Tokens

from crfhead.schemes import canonical_scheme, is_valid, repair_tags, tags_to_spans

__all__ = ["TaggingMetrics", "seqeval_scheme"]

_SEQEVAL_SCHEMES: dict[str, Any] = {"BIO": IOB2, "IOB1": IOB1, "BIOES": IOBES, "BIOUL": BILOU}

# Scalar counts of the state, in state_dict order.
_COUNTS = (
    "sentences",
    "tokens",
    "correct",
    "word_tokens",
    "unseen_tokens",
    "unseen_correct",
    "nll_tokens",
    "gold_invalid_sentences",
    "gold_repaired_tags",
    "pred_invalid_sentences",
    "pred_repaired_tags",
    "ignored_tokens",
)

_GOLD_REPAIR_WARNING = (
    "gold tag sequences that are invalid in the {scheme} scheme were repaired before scoring "
    "(see gold_invalid_sentences and gold_repaired_tags in TaggingMetrics.compute())"
)


def seqeval_scheme(scheme: str) -> Any:
    """The seqeval scheme class for strict scoring of ``scheme``, or ``None`` for ``IO``.

    Returns:
        ``seqeval.scheme.IOB2`` for BIO, ``IOB1``, ``IOBES`` for BIOES, ``BILOU`` for BIOUL; ``None``
        for IO, which seqeval scores only in its default (conlleval) mode.
    """
    return _SEQEVAL_SCHEMES.get(canonical_scheme(scheme))


def _ratio(num: float, den: float) -> float:
    """``num / den``, or 0.0 when ``den`` is 0 (seqeval's ``zero_division=0``)."""
    return num / den if den else 0.0


def _prf(tp: int, pred: int, gold: int) -> tuple[float, float, float]:
    """Precision, recall and F1 with seqeval's arithmetic (same operations, same rounding)."""
    p = _ratio(tp, pred)
    r = _ratio(tp, gold)
    denom = p + r
    return p, r, (2.0 * p * r / denom if denom else 0.0)


class TaggingMetrics:
    """Accumulates gold and predicted label sequences; computes span, token and loss metrics.

    Usage in a training loop (one accumulator per split, reset each epoch)::

        metrics = TaggingMetrics(vocab.scheme, seen_words=train_words)
        for batch in loader:
            ...
            metrics.update(gold_tags, pred_tags, tokens=words,
                           log_loss=crf.nll(em, tags, mask, reduction="sum").item(),
                           num_tokens=int(mask.sum()))
        scores = metrics.gather().compute()   # gather: identity outside torch.distributed
        metrics.reset()

    Under DDP each rank accumulates its shard; :meth:`gather` all-gathers the states
    (``torch.distributed.all_gather_object``) and returns one merged accumulator, the same on every
    rank. By hand: gather each rank's :meth:`state_dict` (plain ints, floats, strings and dicts:
    picklable and JSON-able) and :meth:`merge` them into an empty accumulator.

    Args:
        scheme: the tagging scheme of the labels (any name :func:`crfhead.schemes.canonical_scheme`
            accepts).
        seen_words: the words seen in training; with ``tokens`` given to :meth:`update`, accuracy on
            the other tokens is reported. Compared as-is: pass them in the form ``tokens`` will have.
        repair_gold: repair gold sequences that are invalid in the scheme (the default) rather than
            let seqeval's strict mode drop their malformed entities. Counted either way.
        repair_pred: repair predicted sequences too, i.e. score them leniently. Off by default:
            strict scoring treats an ill-formed predicted entity as not predicted. Counted either way.
    """

    def __init__(
        self,
        scheme: str,
        seen_words: Collection[str] | None = None,
        *,
        repair_gold: bool = True,
        repair_pred: bool = False,
    ) -> None:
        self.scheme = canonical_scheme(scheme)
        self.seen_words: frozenset[str] | None = (
            None if seen_words is None else frozenset(seen_words)
        )
        self.repair_gold = repair_gold
        self.repair_pred = repair_pred
        self._seqeval = seqeval_scheme(self.scheme)
        self.reset()

    @property
    def strict(self) -> bool:
        """Whether spans are read in seqeval's strict mode (every scheme but IO)."""
        return self._seqeval is not None

    def reset(self) -> None:
        """Forget everything accumulated (the configuration stays)."""
        self._entities: dict[str, list[int]] = {}  # type -> [true positives, predicted, gold]
        self._counts: dict[str, int] = dict.fromkeys(_COUNTS, 0)
        self._nll_sum = 0.0

    def __repr__(self) -> str:
        return (
            f"TaggingMetrics(scheme={self.scheme!r}, sentences={self._counts['sentences']}, "
            f"tokens={self._counts['tokens']})"
        )

    def _spans(self, tags: list[str], valid: bool) -> set[tuple[str, int, int]]:
        """Entities ``(type, start, end inclusive)`` as seqeval reads them.

        A sequence ``valid`` in the scheme is read by :func:`~crfhead.schemes.tags_to_spans`,
        which reads the same entities there (see the module's notes) in a tenth of the time; seqeval
        reads the invalid ones, whose strict reading is its own.
        """
        if valid and self._seqeval is not None:
            return {(e.label, e.start, e.end) for e in tags_to_spans(tags, self.scheme)}
        if self._seqeval is None:
            # Imported here: importing ``seqeval.metrics`` imports scikit-learn (and pandas and
            # pyarrow beside it), ~100 MiB of resident memory every training would carry for IO alone.
            from seqeval.metrics.sequence_labeling import get_entities

            return {(t, s, e) for t, s, e in get_entities(tags)}
        return {(e.tag, e.start, e.end - 1) for e in Tokens(tags, self._seqeval).entities}

    def update(
        self,
        gold: Sequence[Sequence[str | None]],
        pred: Sequence[Sequence[str]],
        tokens: Sequence[Sequence[str]] | None = None,
        log_loss: float | None = None,
        num_tokens: int | None = None,
    ) -> None:
        """Add a batch of sentences. The batch is checked whole before anything is counted.

        Args:
            gold: the gold labels of each sentence (strings of the scheme, padding removed);
                ``None`` at a position whose gold is not a single label (partial labels, issue 29).
                Such positions are dropped from gold *and* predicted sequences before spans and
                token accuracy are read (a span through one is read as the labels around it
                give it, as seqeval reads any sequence) and counted as ``ignored_tokens``.
            pred: the predicted labels, as many per sentence as ``gold``.
            tokens: the words of each sentence, for unseen-word accuracy (used only with
                ``seen_words``).
            log_loss: the *sum* over the batch of the sequence negative log-likelihoods (nats), e.g.
                ``crf.nll(..., reduction="sum").item()``; not a mean.
            num_tokens: the tokens ``log_loss`` is spread over; defaults to the gold label count.

        Raises:
            ValueError: if the batches have different numbers of sentences, a sentence's gold,
                predicted and token lengths differ (the message names the sentence, by its index in
                the batch and overall, and both lengths), a label is not of the scheme (named), or
                ``num_tokens`` comes without ``log_loss``.
        """
        if len(gold) != len(pred):
            raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted sentences")
        if tokens is not None and len(tokens) != len(gold):
            raise ValueError(f"{len(gold)} gold sentences but {len(tokens)} token sentences")
        if num_tokens is not None and log_loss is None:
            raise ValueError("num_tokens was given without log_loss")
        offset = self._counts["sentences"]
        for i, (g0, p0) in enumerate(zip(gold, pred, strict=True)):
            where = f"sentence {i} of the batch ({offset + i} overall)"
            if len(g0) != len(p0):
                raise ValueError(f"{where}: gold has {len(g0)} labels but pred has {len(p0)}")
            if tokens is not None and len(tokens[i]) != len(g0):
                raise ValueError(f"{where}: gold has {len(g0)} labels but {len(tokens[i])} tokens")

        counts = dict.fromkeys(_COUNTS, 0)
        entities: dict[str, list[int]] = {}
        seen = self.seen_words if tokens is not None else None
        for i, (g_raw, p_raw) in enumerate(zip(gold, pred, strict=True)):
            keep = [j for j, t in enumerate(g_raw) if t is not None]
            counts["ignored_tokens"] += len(g_raw) - len(keep)
            g: list[str] = [t for t in g_raw if t is not None]
            p = [p_raw[j] for j in keep]
            words = [tokens[i][j] for j in keep] if tokens is not None else None
            g_valid = is_valid(g, self.scheme)  # also validates every label
            if not g_valid:
                counts["gold_invalid_sentences"] += 1
                if self.repair_gold:
                    g, changed = repair_tags(g, self.scheme)
                    counts["gold_repaired_tags"] += changed
                    g_valid = True
            p_valid = is_valid(p, self.scheme)
            if not p_valid:
                counts["pred_invalid_sentences"] += 1
                if self.repair_pred:
                    p, changed = repair_tags(p, self.scheme)
                    counts["pred_repaired_tags"] += changed
                    p_valid = True
            g_spans, p_spans = self._spans(g, g_valid), self._spans(p, p_valid)
            for typ, _, _ in p_spans:
                entities.setdefault(typ, [0, 0, 0])[1] += 1
            for span in g_spans:
                row = entities.setdefault(span[0], [0, 0, 0])
                row[2] += 1
                row[0] += span in p_spans
            hits = [a == b for a, b in zip(g, p, strict=True)]
            counts["sentences"] += 1
            counts["tokens"] += len(g)
            counts["correct"] += sum(hits)
            if seen is not None and words is not None:
                assert words is not None
                unseen = [w not in seen for w in words]
                counts["word_tokens"] += len(unseen)
                counts["unseen_tokens"] += sum(unseen)
                counts["unseen_correct"] += sum(u and h for u, h in zip(unseen, hits, strict=True))
        if log_loss is not None:
            counts["nll_tokens"] = counts["tokens"] if num_tokens is None else num_tokens

        if counts["gold_invalid_sentences"] and self.repair_gold:
            warnings.warn(_GOLD_REPAIR_WARNING.format(scheme=self.scheme), stacklevel=2)
        self._add(entities, counts, 0.0 if log_loss is None else float(log_loss))

    def _add(
        self, entities: Mapping[str, Sequence[int]], counts: Mapping[str, int], nll: float
    ) -> None:
        for typ, row in entities.items():
            mine = self._entities.setdefault(typ, [0, 0, 0])
            for j in range(3):
                mine[j] += int(row[j])
        for name in _COUNTS:
            self._counts[name] += int(counts.get(name, 0))
        self._nll_sum += nll

    def state_dict(self) -> dict[str, Any]:
        """The accumulated state: plain ints, a float, strings and dicts (picklable, JSON-able).

        Returns:
            ``{"scheme": str, "entities": {type: [true positives, predicted, gold]}, "nll_sum":
            float, <count name>: int, ...}``.
        """
        return {
            "scheme": self.scheme,
            "entities": {typ: list(row) for typ, row in self._entities.items()},
            "nll_sum": self._nll_sum,
            **self._counts,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the accumulated state by ``state`` (from :meth:`state_dict`)."""
        self.reset()
        self.merge(state)

    def merge(self, other: TaggingMetrics | Mapping[str, Any]) -> TaggingMetrics:
        """Add another accumulator (or its :meth:`state_dict`) to this one, in place.

        Returns:
            ``self``, for chaining.

        Raises:
            ValueError: if the other state is of another scheme.
        """
        state = other.state_dict() if isinstance(other, TaggingMetrics) else other
        if canonical_scheme(str(state["scheme"])) != self.scheme:
            raise ValueError(
                f"cannot merge metrics of the {state['scheme']} scheme into {self.scheme} metrics"
            )
        self._add(state["entities"], state, float(state["nll_sum"]))
        return self

    def copy(self) -> TaggingMetrics:
        """An independent copy (configuration and state)."""
        return copy.deepcopy(self)

    def gather(self, group: Any = None) -> TaggingMetrics:
        """All processes' states merged into a new accumulator (``self`` is unchanged).

        Outside an initialised ``torch.distributed`` process group this is a copy of ``self``. Inside
        one it is a collective: every rank of ``group`` must call it, and every rank gets the same
        result. Note that a ``DistributedSampler`` pads the evaluation set with repeated sentences
        to split it evenly; those are counted twice.

        Args:
            group: the process group (default: the whole world).
        """
        if not (dist.is_available() and dist.is_initialized()):
            return self.copy()
        states: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(states, self.state_dict(), group=group)
        merged = self.copy()
        merged.reset()
        for state in states:
            merged.merge(state)
        return merged

    def compute(self) -> dict[str, float]:
        """The metrics of everything accumulated since the last :meth:`reset`.

        Returns:
            A flat ``dict[str, float]``:

            * ``precision``, ``recall``, ``f1``: span scores, micro-averaged; ``support``: gold
              entities;
            * ``macro_precision``, ``macro_recall``, ``macro_f1``: unweighted means over the entity
              types seen in gold or predictions (as seqeval);
            * ``accuracy``: token accuracy; ``sentences``, ``tokens``: counts;
            * ``unseen_accuracy``, ``unseen_rate``: accuracy on tokens not in ``seen_words`` and their
              share, only if some tokens were given with ``seen_words`` set;
            * ``log_loss``: summed NLL per token, only if some ``log_loss`` was given; ``loss``: the
              same sum per sentence (the scale of the training loss);
            * ``gold_invalid_sentences``, ``gold_repaired_tags``, ``pred_invalid_sentences``,
              ``pred_repaired_tags``: invalid sequences met (see the module docstring);
            * ``ignored_tokens``: positions whose gold was not a single label (dropped before
              scoring), only if there were some;
            * ``{TYPE}/precision``, ``{TYPE}/recall``, ``{TYPE}/f1``, ``{TYPE}/support`` per type.

            A ratio with a zero denominator is 0.0.
        """
        c = self._counts
        types = sorted(self._entities)
        rows = [self._entities[t] for t in types]
        tp, pred, gold = (sum(row[j] for row in rows) for j in range(3))
        p, r, f = _prf(tp, pred, gold)
        per_type = [_prf(*row) for row in rows]
        if per_type:
            # np.mean, as seqeval's np.average: the same summation, hence the same last bit.
            macro = [
                float(np.mean(np.array(col, dtype=np.float64)))
                for col in zip(*per_type, strict=True)
            ]
        else:
            macro = [0.0, 0.0, 0.0]
        out: dict[str, float] = {
            "precision": p,
            "recall": r,
            "f1": f,
            "support": float(gold),
            "macro_precision": macro[0],
            "macro_recall": macro[1],
            "macro_f1": macro[2],
            "accuracy": _ratio(c["correct"], c["tokens"]),
            "sentences": float(c["sentences"]),
            "tokens": float(c["tokens"]),
        }
        if c["word_tokens"]:
            out["unseen_accuracy"] = _ratio(c["unseen_correct"], c["unseen_tokens"])
            out["unseen_rate"] = _ratio(c["unseen_tokens"], c["word_tokens"])
        if c["nll_tokens"]:
            out["log_loss"] = self._nll_sum / c["nll_tokens"]
            # Per sentence, as training's loss (reduction "mean") is: the two curves share a scale.
            out["loss"] = self._nll_sum / max(c["sentences"], 1)
        for name in (
            "gold_invalid_sentences",
            "gold_repaired_tags",
            "pred_invalid_sentences",
            "pred_repaired_tags",
        ):
            out[name] = float(c[name])
        if c["ignored_tokens"]:
            out["ignored_tokens"] = float(c["ignored_tokens"])
        for typ, row, (tp_, tr_, tf_) in zip(types, rows, per_type, strict=True):
            out[f"{typ}/precision"] = tp_
            out[f"{typ}/recall"] = tr_
            out[f"{typ}/f1"] = tf_
            out[f"{typ}/support"] = float(row[2])
        return out

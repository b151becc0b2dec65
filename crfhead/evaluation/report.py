"""The test report: :meth:`~crfhead.evaluation.metrics.TaggingMetrics.compute`'s output as a table and as JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["format_report", "write_report_json"]


def _types_of(metrics: Mapping[str, float]) -> list[str]:
    """The entity types a metrics dict has rows for (its ``TYPE/f1`` keys), sorted."""
    return sorted(key[: -len("/f1")] for key in metrics if key.endswith("/f1"))


def format_report(
    metrics: Mapping[str, float], types: Sequence[str] | None = None, digits: int = 4
) -> str:
    """A plain-text table of :meth:`~crfhead.evaluation.metrics.TaggingMetrics.compute` output, for the end of training.

    One row per entity type (precision, recall, F1, support), then the micro and macro averages,
    then token accuracy, unseen-word accuracy and log-loss where present, then the invalid
    sequences met, if any.

    Args:
        metrics: the output of :meth:`~crfhead.evaluation.metrics.TaggingMetrics.compute` (or its JSON round trip).
        types: the types to list, in order (default: every type in ``metrics``, sorted); a type
            absent from ``metrics`` (no gold nor predicted entity) gets a row of zeros.
        digits: decimals of the scores.

    Returns:
        The table, lines joined by newlines, without a trailing newline.
    """
    names = list(_types_of(metrics) if types is None else types)
    width = max([len("macro avg"), *(len(n) for n in names)])
    col = max(9, digits + 3)
    header = f"{'':<{width}}  " + "".join(
        f"{h:>{col}}" for h in ("precision", "recall", "f1", "support")
    )

    def row(name: str, p: float, r: float, f: float, support: float) -> str:
        scores = "".join(f"{v:>{col}.{digits}f}" for v in (p, r, f))
        return f"{name:<{width}}  {scores}{round(support):>{col}d}"

    lines = [header]
    for t in names:
        lines.append(
            row(
                t,
                metrics.get(f"{t}/precision", 0.0),
                metrics.get(f"{t}/recall", 0.0),
                metrics.get(f"{t}/f1", 0.0),
                metrics.get(f"{t}/support", 0.0),
            )
        )
    support = metrics.get("support", 0.0)
    lines.append("")
    lines.append(row("micro avg", metrics["precision"], metrics["recall"], metrics["f1"], support))
    lines.append(
        row(
            "macro avg",
            metrics["macro_precision"],
            metrics["macro_recall"],
            metrics["macro_f1"],
            support,
        )
    )
    lines.append("")
    label = 18
    tokens = metrics.get("tokens")
    suffix = "" if tokens is None else f"  ({round(tokens)} tokens)"
    lines.append(f"{'accuracy':<{label}}{metrics['accuracy']:.{digits}f}{suffix}")
    if "unseen_accuracy" in metrics:
        lines.append(
            f"{'unseen accuracy':<{label}}{metrics['unseen_accuracy']:.{digits}f}"
            f"  (unseen rate {metrics.get('unseen_rate', math.nan):.{digits}f})"
        )
    if "log_loss" in metrics:
        lines.append(f"{'log-loss':<{label}}{metrics['log_loss']:.{digits}f}  nats/token")
    ignored = round(metrics.get("ignored_tokens", 0.0))
    if ignored:
        lines.append(f"{ignored} tokens ignored: their gold is not a single label (partial)")
    for who in ("gold", "pred"):
        invalid = round(metrics.get(f"{who}_invalid_sentences", 0.0))
        if invalid:
            repaired = round(metrics.get(f"{who}_repaired_tags", 0.0))
            what = f"{repaired} tags repaired" if repaired else "not repaired; scored strictly"
            lines.append(f"{who} sequences invalid in the scheme: {invalid} ({what})")
    return "\n".join(lines)


def write_report_json(metrics: Mapping[str, float], path: str | Path) -> Path:
    """Write ``metrics`` as a JSON object of floats with sorted keys (parent folders are created).

    Non-finite values (a diverged log-loss) are written as ``NaN``/``Infinity``, which Python's
    ``json`` reads back.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {key: float(value) for key, value in metrics.items()}
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    return path

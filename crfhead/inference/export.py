"""A trained model's decoder as a ``torch.export`` program or ONNX: emissions and mask to paths.

The exported module maps emissions ``(B, T, K)`` float32 and a mask ``(B, T)`` bool to the head's
decoded paths ``(B, T)`` int64, ``-1`` where masked: the part of a tagger that is not an ordinary
network, so what a serving stack needs from crfhead. The batch size is dynamic. A torch program
whose decoder traces to the CPU kernel's custom ops serves every length ``T`` (``dynamic_length``
in its metadata); otherwise (ONNX, which has no such ops, and decoders that loop over time in
Python) ``T`` is the example's length, and shorter sequences are padded with mask ``False``.

The labels travel inside, with the scheme, the head, the decoder and the input shapes: a torch
program's extra file ``labels.json``, an ONNX model's metadata property ``crfhead``. A model's group
decoder (higher-order) is not exported: the program decodes each sentence alone.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.heads.base import ChainHead
from crfhead.inference.text_tagger import TextTagger

__all__ = ["EXPORT_FORMATS", "HeadDecoder", "export_decoder", "export_format", "require_onnx"]

EXPORT_FORMATS = ("torch", "onnx")
"""The formats :func:`export_decoder` writes."""


class HeadDecoder(nn.Module):
    """A head's decoder as a module: emissions ``(B, T, K)``, mask ``(B, T)`` → paths ``(B, T)``."""

    def __init__(self, head: ChainHead) -> None:
        super().__init__()
        self.head = head

    def forward(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """The head's decoded paths, ``-1`` where masked."""
        paths: Tensor = self.head.predict(emissions, mask)
        return paths


def export_format(path: str | Path, given: str | None = None) -> str:
    """``given``, else ``"onnx"`` for a ``.onnx`` path and ``"torch"`` for any other."""
    if given is not None:
        return given
    return "onnx" if Path(path).suffix.lower() == ".onnx" else "torch"


def require_onnx() -> None:
    """Check that ONNX export can run.

    Raises:
        ImportError: onnx or onnxscript is not installed (the message names the extra).
    """
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"ONNX export needs onnx and onnxscript ({err.name} is not installed): "
            "pip install 'crfhead[onnx]', or use --format torch"
        ) from None


def export_decoder(
    tagger: TextTagger,
    path: str | Path,
    *,
    fmt: str | None = None,
    length: int = 128,
    verbose: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write ``tagger``'s decoder to ``path`` (see the module docstring); returns its metadata.

    Args:
        tagger: the model (its head is exported from the CPU).
        path: the output file (its folder is created).
        fmt: ``"torch"`` or ``"onnx"`` (default: :func:`export_format` of ``path``).
        length: the example's sequence length ``T`` (the fixed one where ``T`` cannot vary).
        verbose: keep the exporters' own warnings and logs, and say why ``T`` is fixed.
        log: receives one-line progress messages (what is exported, what is not).

    Returns:
        The metadata written beside the program: labels, scheme, length, head, decoder, inputs
        (and, for torch, ``dynamic_length``).

    Raises:
        ImportError: ONNX asked for without onnx and onnxscript installed.
        IsADirectoryError: ``path`` is a folder.
    """
    say = log or (lambda _message: None)
    out = Path(path)
    fmt = export_format(out, fmt)
    if fmt == "onnx":
        require_onnx()
    if out.is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {out}")
    tagger.to("cpu")
    head = tagger.model.head.eval()
    module = HeadDecoder(head).eval()
    labels = list(tagger.labels)
    example = (
        torch.randn(2, length, len(labels)),
        torch.ones(2, length, dtype=torch.bool),
    )
    batch = torch.export.Dim("batch")
    dynamic: dict[str, dict[int, Any]] = {"emissions": {0: batch}, "mask": {0: batch}}
    # torch: the length is dynamic too where the decoder runs as the cpu kernel's custom ops (one
    # program for every T); ONNX (no such ops) and decoders that loop over time in Python fix it.
    varying: dict[str, dict[int, Any]] = dynamic
    if length > 1:  # an example of length 1 would specialise T
        T = torch.export.Dim("length", min=1)
        varying = {"emissions": {0: batch, 1: T}, "mask": {0: batch, 1: T}}
    meta: dict[str, Any] = {
        "labels": labels,
        "scheme": tagger.scheme,
        "length": length,
        "head": type(head).__name__,
        "decoder": getattr(head, "decoder", "viterbi"),
        "inputs": {"emissions": ["B", length, len(labels)], "mask": ["B", length]},
    }
    say(
        f"exporting the {meta['decoder']} decoder of the {meta['head']} head "
        f"(T = {length}, K = {len(labels)})"
    )
    if tagger.model.decoder is not None:
        say(
            f"note: the model's group decoder ({type(tagger.model.decoder).__name__}) is "
            "not exported; the program decodes each sentence alone"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        if fmt == "torch":
            _export_torch(module, example, varying, dynamic, out, meta, verbose, say)
        else:
            _export_onnx(module, example, dynamic, out, meta, verbose)
    return meta


def _export_torch(
    module: nn.Module,
    example: tuple[Tensor, Tensor],
    varying: dict[str, dict[int, Any]],
    dynamic: dict[str, dict[int, Any]],
    out: Path,
    meta: dict[str, Any],
    verbose: bool,
    say: Callable[[str], None],
) -> None:
    """A ``torch.export`` program, of dynamic length where the decoder allows it."""
    try:
        program = torch.export.export(module, example, dynamic_shapes=varying)
        meta["dynamic_length"] = varying is not dynamic
    except Exception as err:  # a decoder that loops over time in Python
        if verbose:
            say(f"fixed length T = {meta['length']}: {err}")
        program = torch.export.export(module, example, dynamic_shapes=dynamic)
        meta["dynamic_length"] = False
    if meta["dynamic_length"]:
        meta["inputs"] = {"emissions": ["B", "T", len(meta["labels"])], "mask": ["B", "T"]}
    torch.export.save(program, out, extra_files={"labels.json": json.dumps(meta)})


def _export_onnx(
    module: nn.Module,
    example: tuple[Tensor, Tensor],
    dynamic: dict[str, dict[int, Any]],
    out: Path,
    meta: dict[str, Any],
    verbose: bool,
) -> None:
    """An ONNX model (the dynamo exporter), quiet unless ``verbose``."""
    quiet = None if verbose else logging.getLogger("torch.onnx")
    level = quiet.level if quiet is not None else 0
    if quiet is not None:
        quiet.setLevel(logging.ERROR)  # "torchvision is not installed" and the like
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            onnx_program = torch.onnx.export(
                module,
                example,
                dynamo=True,
                dynamic_shapes=dynamic,
                input_names=["emissions", "mask"],
                output_names=["paths"],
                verbose=False,
            )
    finally:
        if quiet is not None:
            quiet.setLevel(level)
    if onnx_program is None:
        raise RuntimeError("torch.onnx.export returned no program")
    onnx_program.model.metadata_props["crfhead"] = json.dumps(meta)
    onnx_program.save(str(out))

"""A trained model as a ``torch.export`` program (``.pt2``) or ONNX, and :func:`load_exported` to run one.

:func:`export_model` writes the whole model, encoder and head (:class:`~crfhead.inference.
export_graph.ModelProgram`): the tensors of the model's own batch in (those of ``words``, ``chars``,
``features`` it reads, then the ``mask``; names, dtypes and shapes in the metadata), out the decoded
tags ``(B, T)`` int64 (``-1`` where masked) and, for a probability head, the node marginals
``(B, T, K)``, ``log Z`` ``(B,)`` and the chain potentials, from which the span probabilities of
the entities are computed exactly. Batch size and length are dynamic in both formats (``.pt2``: the
engine's custom ops; ONNX: ``Scan`` loops), up to ``max_length`` if one is given. The vocabularies,
tokenizer and labels travel inside (a torch program's extra files ``crfhead.json`` and
``vocabs.json``, an ONNX model's metadata properties ``crfhead`` and ``crfhead.vocabs``), so
:func:`load_exported` returns an :class:`~crfhead.inference.exported.ExportedTagger` whose
``tag(texts)`` gives the eager :meth:`~crfhead.inference.TextTagger.tag`'s entities and
probabilities, in a fresh process, with no checkpoint.

:func:`export_decoder` writes the head's decoder alone: emissions ``(B, T, K)`` float32 and a mask
``(B, T)`` bool to the decoded paths. The batch size is dynamic, and so is the length
(``dynamic_length`` in its metadata) for ONNX (the scan chain) and for a torch program whose
decoder traces to the CPU kernel's custom ops; otherwise ``T`` is the example's length, and
shorter sequences are padded with mask ``False``. Its labels travel in the extra file
``labels.json`` / the ONNX property ``crfhead``.

A ``.pt2`` holding crfhead's custom ops loads only where they are registered: :func:`register_ops`
(which :func:`load_exported` calls) imports the modules that define them. A model's group decoder
(higher-order) is not exported: the program decodes each sentence alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.engine.backends.select import available, use_backend
from crfhead.heads.base import ChainHead
from crfhead.inference.exported import register_ops
from crfhead.inference.text_tagger import TextTagger

__all__ = [
    "EXPORT_FORMATS",
    "EXPORT_VERSION",
    "HeadDecoder",
    "export_decoder",
    "export_format",
    "export_model",
    "load_exported",
    "register_ops",
    "require_onnx",
]

EXPORT_FORMATS = ("torch", "onnx")
"""The formats :func:`export_model` and :func:`export_decoder` write."""

EXPORT_VERSION = 1
"""The layout of :func:`export_model`'s metadata (``format_version``)."""

_INPUT_SHAPES = {
    "words": ["B", "T"],
    "chars": ["B", "T", "C"],
    "features": ["B", "T", "F"],
    "mask": ["B", "T"],
}
"""Each program input's shape (``C`` characters per word, ``F`` features per token)."""


class HeadDecoder(nn.Module):
    """A head's decoder as a module: emissions ``(B, T, K)``, mask ``(B, T)`` → paths ``(B, T)``.

    Args:
        head: the head.
        scan: decode with the scan chain (:func:`~crfhead.inference.export_graph.chain_scans`,
            what ONNX export takes, of any length) rather than the head's own decoder.
    """

    def __init__(self, head: ChainHead, scan: bool = False) -> None:
        super().__init__()
        self.head = head
        self.scan = scan

    def forward(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """The head's decoded paths, ``-1`` where masked."""
        if self.scan:
            from crfhead.inference.export_graph import scan_decode

            return scan_decode(self.head.potentials(emissions, mask), self.head.decoder)[2]
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
    module = HeadDecoder(head, scan=fmt == "onnx").eval()
    labels = list(tagger.labels)
    example = (
        torch.randn(2, length, len(labels)),
        torch.ones(2, length, dtype=torch.bool),
    )
    batch = torch.export.Dim("batch")
    dynamic: dict[str, dict[int, Any]] = {"emissions": {0: batch}, "mask": {0: batch}}
    # The length is dynamic too where the decoder runs as the cpu kernel's custom ops (torch) or
    # as scans (ONNX); a torch decoder that loops over time in Python fixes it.
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
            with _kernel_ops():
                _export_torch(module, example, varying, dynamic, out, meta, verbose, say)
        else:
            meta["dynamic_length"] = varying is not dynamic
            if meta["dynamic_length"]:
                meta["inputs"] = {"emissions": ["B", "T", len(labels)], "mask": ["B", "T"]}
            _export_onnx(module, example, varying, out, meta, verbose)
    return meta


def _kernel_ops() -> contextlib.AbstractContextManager[None]:
    """Trace the engine as the CPU kernel's custom ops (of any length) where the kernel loads.

    ``CRFHEAD_BACKEND=portable`` or a ``use_backend`` block would otherwise trace the portable scan,
    whose Python loop over time fixes the length; the kernel's ops give the same values.
    """
    return use_backend("cpu") if available("cpu")[0] else contextlib.nullcontext()


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
    example: tuple[Tensor, ...],
    dynamic: dict[str, Any],
    out: Path,
    meta: dict[str, Any],
    verbose: bool,
    names: tuple[list[str], list[str]] = (["emissions", "mask"], ["paths"]),
    vocabs: dict[str, Any] | None = None,
) -> None:
    """An ONNX model (the dynamo exporter), quiet unless ``verbose``; ``names``: inputs, outputs."""
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
                input_names=names[0],
                output_names=names[1],
                verbose=False,
            )
    finally:
        if quiet is not None:
            quiet.setLevel(level)
    if onnx_program is None:
        raise RuntimeError("torch.onnx.export returned no program")
    onnx_program.model.metadata_props["crfhead"] = json.dumps(meta)
    if vocabs is not None:
        onnx_program.model.metadata_props["crfhead.vocabs"] = json.dumps(vocabs)
    onnx_program.save(str(out))


def _example(model: Any, names: list[str], B: int, T: int) -> tuple[Tensor, ...]:
    """Example inputs ``names`` of ``B`` rows of length ``T`` (ids 1, every position unmasked)."""
    widths = {"chars": 3, "features": 4}  # sizes unlike B and T: no dimension is tied to another
    tensors = []
    for name in names:
        if name == "mask":
            tensors.append(torch.ones(B, T, dtype=torch.bool))
        else:
            shape = (B, T) if name == "words" else (B, T, widths[name])
            tensors.append(torch.ones(shape, dtype=torch.long))
    return tuple(tensors)


def export_model(
    tagger: TextTagger,
    path: str | Path,
    *,
    fmt: str | None = None,
    max_length: int | None = None,
    verbose: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write ``tagger``'s whole model, encoder and head, to ``path`` (see the module docstring).

    Args:
        tagger: the model (exported from the CPU).
        path: the output file (its folder is created).
        fmt: ``"torch"`` or ``"onnx"`` (default: :func:`export_format` of ``path``).
        max_length: the longest sentence the program is for (recorded in the metadata and
            enforced by :func:`load_exported`'s runner); ``None``: any length.
        verbose: keep the exporters' own warnings and logs.
        log: receives one-line progress messages.

    Returns:
        The metadata written inside (without the vocabularies): ``format_version``, ``kind``
        (``"model"``), labels, scheme, head, decoder, ``calibrated``, encoder, ``inputs`` and
        ``outputs`` (each ``{"name", "dtype", "shape"}``), ``dynamic_length``, ``max_length``.

    Raises:
        ImportError: ONNX asked for without onnx and onnxscript installed.
        IsADirectoryError: ``path`` is a folder.
        ValueError: an encoder that cannot be exported (one that tokenises in its forward, as the
            transformer), or ``max_length`` < 2.
    """
    from crfhead.inference.export_graph import ModelProgram

    say = log or (lambda _message: None)
    out = Path(path)
    fmt = export_format(out, fmt)
    if fmt == "onnx":
        require_onnx()
    if out.is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {out}")
    if max_length is not None and max_length < 2:
        raise ValueError(f"max_length must be >= 2 or None, got {max_length}")
    tagger.to("cpu")
    model = tagger.model.eval()
    # A .pt2 program calls the CPU kernel's custom ops, of any length, whatever backend the process
    # runs; without the kernel (or for ONNX, which has no such ops) the chain is the scan program.
    engine_chain = fmt == "torch" and available("cpu")[0]
    program = ModelProgram(model, "engine" if engine_chain else "scan").eval()
    names = program.inputs
    labels = list(tagger.labels)
    K = len(labels)
    # Sizes above 1 in the example, so that no dimension is specialised to it.
    example = _example(model, names, 2, min(5, max_length) if max_length else 5)
    with torch.no_grad():  # the shape of the transitions, from one eager run of the engine's chain
        per_edge = program.calibrated and ModelProgram(model)(*example)[4].dim() == 4
    out_shapes = {
        "tags": (["B", "T"], "int64"),
        "marginals": (["B", "T", "K"], "float32"),
        "log_z": (["B"], "float32"),
        "emissions": (["B", "T", "K"], "float32"),
        "transitions": (["B", "T-1", "K", "K"] if per_edge else ["K", "K"], "float32"),
        "start": (["K"], "float32"),
        "end": (["K"], "float32"),
    }
    meta: dict[str, Any] = {
        "format_version": EXPORT_VERSION,
        "kind": "model",
        "format": fmt,
        "labels": labels,
        "scheme": tagger.scheme,
        "num_tags": K,
        "head": type(model.head).__name__,
        "decoder": getattr(model.head, "decoder", "viterbi"),
        "calibrated": bool(model.head.calibrated),
        "encoder": type(model.encoder).__name__,
        "inputs": [
            {
                "name": name,
                "dtype": "bool" if name == "mask" else "int64",
                "shape": _INPUT_SHAPES[name],
            }
            for name in names
        ],
        "outputs": [
            {"name": name, "dtype": out_shapes[name][1], "shape": out_shapes[name][0]}
            for name in program.outputs
        ],
        "dynamic_length": True,
        "max_length": max_length,
    }
    say(
        f"exporting {meta['encoder']} + {meta['head']} ({meta['decoder']}, K = {K}) as {fmt}: "
        f"inputs {names}, outputs {program.outputs}"
    )
    if model.decoder is not None:
        say(
            f"note: the model's group decoder ({type(model.decoder).__name__}) is not exported; "
            "the program decodes each sentence alone"
        )
    batch = torch.export.Dim("batch", min=1)
    length = torch.export.Dim("length", min=1, max=max_length)
    dims = {
        "words": {0: batch, 1: length},
        "chars": {0: batch, 1: length, 2: torch.export.Dim("chars", min=1)},
        "features": {0: batch, 1: length, 2: torch.export.Dim("features", min=1)},
        "mask": {0: batch, 1: length},
    }
    vocabs = tagger.vocabs
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        if fmt == "torch":
            shapes = {"tensors": tuple(dims[name] for name in names)}
            with _kernel_ops():
                exported = torch.export.export(program, example, dynamic_shapes=shapes)
            extra = {"crfhead.json": json.dumps(meta), "vocabs.json": json.dumps(vocabs)}
            torch.export.save(exported, out, extra_files=extra)
        else:
            dynamic: dict[str, Any] = {"tensors": tuple(dims[name] for name in names)}
            _export_onnx(
                program,
                example,
                dynamic,
                out,
                meta,
                verbose,
                (names, program.outputs),
                vocabs,
            )
    return meta


def load_exported(path: str | Path) -> Any:
    """Load what :func:`export_model` (or :func:`export_decoder`) wrote, ready to run, in any process.

    Registers crfhead's custom ops first (:func:`register_ops`); a ``.onnx`` file runs in
    onnxruntime. ``crfhead.load_exported(path).tag(texts)`` tags raw text as the eager model does.

    Returns:
        An :class:`~crfhead.inference.exported.ExportedTagger`.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: a file that is not a crfhead export (named).
        ImportError: an ONNX file without onnxruntime installed.
    """
    from crfhead.inference.exported import read_exported

    return read_exported(path)

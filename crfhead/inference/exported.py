"""Run an exported model (``.pt2`` or ONNX) in any process: :class:`ExportedTagger` and :func:`read_exported`.

What :func:`crfhead.inference.export.load_exported` returns. :meth:`ExportedTagger.run` runs the
program on named tensors (torch: the ``torch.export`` program, crfhead's custom ops registered
first; ONNX: an onnxruntime session) and returns its outputs by name. For a whole-model export
(:func:`~crfhead.inference.export.export_model`), :meth:`ExportedTagger.tag` and
:meth:`ExportedTagger.annotate` tokenise and collate on the Python side with the vocabularies and
tokenizer saved inside, run the program, and read the entities from its tags and their exact
probabilities from the chain potentials it returns
(:func:`~crfhead.evaluation.spans.span_probabilities_from`): the eager
:meth:`~crfhead.inference.TextTagger.tag`'s result. Needs neither the checkpoint nor Lightning.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import torch
from torch import Tensor

from crfhead.data.batching import collator_for
from crfhead.data.sentence import Sentence
from crfhead.data.tokenize import Token, Tokenizer, tokenizer_from_dict
from crfhead.engine.potentials import ChainPotentials
from crfhead.evaluation.spans import span_probabilities_from
from crfhead.inference.entities import Entity, Tagged, entities_of
from crfhead.schemes import Span, tags_to_spans

__all__ = ["ExportedTagger", "read_exported", "register_ops"]

_DTYPES = {"bool": torch.bool, "int64": torch.int64, "float32": torch.float32}


class ExportedTagger:
    """An exported program with its metadata (build with :func:`read_exported`).

    Args:
        runner: maps the input tensors (in :attr:`input_names` order) to the output tensors.
        meta: the export's metadata (:func:`~crfhead.inference.export.export_model`'s).
        vocabs: the model's vocabularies (with its tokenizer); ``None`` for a decoder export.
        path: the file it was read from.

    Attributes:
        meta: the metadata.
        labels: the label list.
        scheme: the tagging scheme.
        max_length: the longest sentence the program takes (``None``: any).
        tokenizer: the model's tokenizer, or ``None`` (decoder exports, old vocabularies).
    """

    def __init__(
        self,
        runner: Any,
        meta: dict[str, Any],
        vocabs: dict[str, Any] | None,
        path: Path,
    ) -> None:
        self._runner = runner
        self.meta = meta
        self.vocabs = vocabs
        self.path = path
        self.labels: list[str] = list(meta["labels"])
        self.scheme: str | None = meta.get("scheme")
        self.max_length: int | None = meta.get("max_length")
        spec = None if vocabs is None else vocabs.get("tokenizer")
        self.tokenizer: Tokenizer | None = None if spec is None else tokenizer_from_dict(spec)
        self._collate = None
        if vocabs is not None:
            needs = {name for name in self.input_names if name != "mask"}
            self._collate = collator_for(vocabs, needs)

    @property
    def input_names(self) -> list[str]:
        """The program's inputs, in order."""
        return [i["name"] for i in self.meta["inputs"]]

    @property
    def output_names(self) -> list[str]:
        """The program's outputs, in order."""
        return [o["name"] for o in self.meta["outputs"]]

    def run(self, **inputs: Tensor) -> dict[str, Tensor]:
        """The program's outputs by name, for its inputs by name (``(B, T, ...)`` tensors).

        Raises:
            ValueError: a missing or unexpected input, a wrong dtype, or a length above
                :attr:`max_length` (the message prints the values).
        """
        names = self.input_names
        if sorted(inputs) != sorted(names):
            raise ValueError(f"the program takes inputs {names}, got {sorted(inputs)}")
        for spec in self.meta["inputs"]:
            x = inputs[spec["name"]]
            want = _DTYPES[spec["dtype"]]
            if not isinstance(x, Tensor) or x.dtype != want:
                got = x.dtype if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"input {spec['name']!r} must be a {want} tensor, got {got}")
        T = int(inputs["mask"].shape[1]) if inputs["mask"].dim() == 2 else -1
        if self.max_length is not None and self.max_length < T:
            raise ValueError(
                f"sequences of length T = {T} are longer than this export's max_length = "
                f"{self.max_length}: split them, or export again with a larger max_length"
            )
        outputs = self._runner([inputs[name] for name in names])
        return dict(zip(self.output_names, outputs, strict=True))

    # ------------------------------------------------------------------------------ tagging
    @overload
    def tag(self, texts: str, *, batch_size: int = ...) -> list[Entity]: ...  # type: ignore[overload-overlap]  # a str is a Sequence[str]: this one first

    @overload
    def tag(self, texts: Sequence[str], *, batch_size: int = ...) -> list[list[Entity]]: ...

    def tag(
        self, texts: str | Sequence[str], *, batch_size: int = 64
    ) -> list[Entity] | list[list[Entity]]:
        """The entities of a raw text, or of each of a list of texts, as ``TextTagger.tag`` gives them.

        Raises:
            ValueError: a decoder export (no vocabularies), a model without a saved tokenizer, or
                ``texts`` not text.
        """
        if isinstance(texts, str):
            return self.annotate([texts], batch_size=batch_size)[0].entities
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("tag() takes a str or a list of str; use annotate() for token lists")
        return [t.entities for t in self.annotate(list(texts), batch_size=batch_size)]

    def annotate(
        self, items: Sequence[str | Sequence[str]], *, batch_size: int = 64
    ) -> list[Tagged]:
        """Tag each item, a raw text or a list of tokens, as ``TextTagger.annotate`` does.

        Raises:
            ValueError: as :meth:`tag`; ``batch_size`` < 1.
        """
        if self._collate is None:
            raise ValueError(
                f"{self.path} is a decoder export (emissions in, paths out): it has no "
                "vocabularies to tag text with; use run(emissions=..., mask=...), or export the "
                "whole model with crfhead export"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        prepared = [self._prepare(item) for item in items]
        out: list[Tagged | None] = [
            Tagged(text, [], [], []) if not toks else None for text, toks in prepared
        ]
        todo = [i for i, (_, toks) in enumerate(prepared) if toks]
        for at in range(0, len(todo), batch_size):
            rows = todo[at : at + batch_size]
            for i, record in zip(rows, self._tag_batch([prepared[i] for i in rows]), strict=True):
                out[i] = record
        return [t for t in out if t is not None]

    def _prepare(self, item: str | Sequence[str]) -> tuple[str, list[Token]]:
        if isinstance(item, str):
            if self.tokenizer is None:
                raise ValueError(
                    "this export's tokenizer is unknown (its model predates saved tokenizers): "
                    "pass pre-tokenised input, lists of tokens"
                )
            return item, self.tokenizer.tokenize(item)
        if isinstance(item, Sequence):
            from crfhead.inference.text_tagger import _joined

            return _joined(list(item))
        raise ValueError(f"cannot tag a {type(item).__name__}: give a str or a list of str")

    def _tag_batch(self, prepared: Sequence[tuple[str, list[Token]]]) -> list[Tagged]:
        assert self._collate is not None
        batch = self._collate([Sentence([t.text for t in toks]) for _, toks in prepared])
        given = {
            "mask": batch.mask,
            "words": batch.words,
            "chars": batch.chars,
            "features": batch.features,
        }
        got = self.run(**{name: given[name] for name in self.input_names})  # type: ignore[arg-type]
        paths = got["tags"].tolist()
        tags = [[self.labels[k] for k in row if k >= 0] for row in paths]
        scheme = self.scheme
        spans: list[list[Span]] = [tags_to_spans(row, scheme) if scheme else [] for row in tags]
        probs: list[list[float]] | None = None
        if self.meta.get("calibrated") and scheme is not None:
            pot = ChainPotentials(
                emissions=got["emissions"],
                transitions=got["transitions"],
                start=got["start"],
                end=got["end"],
                mask=batch.mask,
            )
            probs = span_probabilities_from(pot, spans, self.labels, scheme)
        return [
            Tagged(
                text, toks, tags[j], entities_of(text, toks, spans[j], probs[j] if probs else None)
            )
            for j, (text, toks) in enumerate(prepared)
        ]

    def __repr__(self) -> str:
        return (
            f"ExportedTagger({self.path.name}, {self.meta.get('format')}, "
            f"encoder={self.meta.get('encoder')}, head={self.meta.get('head')}, "
            f"inputs={self.input_names}, outputs={self.output_names})"
        )


# ------------------------------------------------------------------------------ reading
def _is_onnx(path: Path) -> bool:
    """ONNX (a protobuf) rather than a ``.pt2`` (a zip archive)."""
    return path.suffix.lower() == ".onnx" or not zipfile.is_zipfile(path)


def _decoder_meta(meta: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """:func:`~crfhead.inference.export.export_decoder`'s metadata in the model export's terms."""
    out = dict(meta)
    T = "T" if meta.get("dynamic_length") else meta.get("length")
    out.update(
        kind="decoder",
        format=fmt,
        inputs=[
            {"name": "emissions", "dtype": "float32", "shape": ["B", T, len(meta["labels"])]},
            {"name": "mask", "dtype": "bool", "shape": ["B", T]},
        ],
        outputs=[{"name": "tags", "dtype": "int64", "shape": ["B", T]}],
        max_length=None if meta.get("dynamic_length") else meta.get("length"),
        calibrated=False,
    )
    return out


def read_exported(path: str | Path) -> ExportedTagger:
    """An :class:`ExportedTagger` for the export at ``path`` (see the module docstring).

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: not a crfhead export (the file is named).
        ImportError: an ONNX file without onnxruntime.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no exported model at {file}")
    if _is_onnx(file):
        return _read_onnx(file)
    return _read_torch(file)


def register_ops() -> None:
    """Register crfhead's custom ops (``torch.ops.crfhead.*``), which a ``.pt2`` program may call.

    The CPU kernel's dispatcher ops (``viterbi``, ``marginals``, ``fused_nll``, ...) load with their
    library, built first if not cached (a warning says why where it cannot be); importing the
    potentials registers the run-time check (``refuse_non_finite``).
    """
    import crfhead.engine.potentials  # noqa: F401
    from crfhead.engine.backends.cpu import dispatcher

    dispatcher.ops()


def _read_torch(file: Path) -> ExportedTagger:
    register_ops()
    extra = {"crfhead.json": "", "vocabs.json": "", "labels.json": ""}
    try:
        program = torch.export.load(file, extra_files=extra)
    except Exception as err:
        raise ValueError(f"{file} is not a torch.export program crfhead can load: {err}") from err
    if extra["crfhead.json"]:
        meta, vocabs = json.loads(extra["crfhead.json"]), json.loads(extra["vocabs.json"])
    elif extra["labels.json"]:
        meta, vocabs = _decoder_meta(json.loads(extra["labels.json"]), "torch"), None
    else:
        raise ValueError(f"{file} holds a torch.export program but no crfhead metadata")
    module = program.module()

    def run(tensors: list[Tensor]) -> list[Tensor]:
        with torch.no_grad():
            out = module(*tensors)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    return ExportedTagger(run, meta, vocabs, file)


def _read_onnx(file: Path) -> ExportedTagger:
    try:
        import onnxruntime as ort  # type: ignore[import-untyped]
    except ImportError as err:
        raise ImportError(
            f"running an ONNX export needs onnxruntime ({err.name} is not installed): "
            "pip install onnxruntime, or export with --format torch"
        ) from None
    try:
        session = ort.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    except Exception as err:
        raise ValueError(f"{file} is not an ONNX model onnxruntime can load: {err}") from err
    props = session.get_modelmeta().custom_metadata_map
    if "crfhead" not in props:
        raise ValueError(f"{file} is an ONNX model without crfhead metadata")
    meta = json.loads(props["crfhead"])
    vocabs = json.loads(props["crfhead.vocabs"]) if "crfhead.vocabs" in props else None
    if meta.get("kind") != "model":
        meta = _decoder_meta(meta, "onnx")
    names = [i.name for i in session.get_inputs()]

    def run(tensors: list[Tensor]) -> list[Tensor]:
        feed = {
            name: np.ascontiguousarray(x.numpy()) for name, x in zip(names, tensors, strict=True)
        }
        return [torch.from_numpy(np.asarray(y)) for y in session.run(None, feed)]

    return ExportedTagger(run, meta, vocabs, file)

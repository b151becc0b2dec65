"""A trained model on disk: a training checkpoint, or a folder written by :func:`save_folder`.

A saved folder holds everything needed to rebuild the model without Lightning:

* ``config.json``: the format marker, the crfhead version, the encoder / head / decoder specs
  (``class_path`` + ``init_args``, as in a training config), ``constrained``, the labels, scheme and
  tokenizer (also in the vocabularies; repeated here for a reader);
* ``vocabs.json``: the data module's vocabularies (labels, words, characters, feature templates and
  features, the training words, the tokenizer);
* ``model.safetensors``: the tagger's ``state_dict`` (``safetensors``: no pickle, so loading runs no
  code from the file);
* ``README.md``: a model card (what it tags, how it was configured, its test scores if known);
* ``backbone/`` (transformer encoders): the backbone's config and tokenizer, so the folder loads
  without the original model folder or the hub (its weights are in ``model.safetensors``, once).

A folder is written next to its destination and renamed into place, so an interrupted save leaves no
folder that looks complete, and an existing folder is never overwritten unless asked.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crfhead.model.checkpoints import read_checkpoint
from crfhead.model.tagger import Tagger
from crfhead.schemes import entity_types

__all__ = ["FORMAT", "ModelFiles", "read_model", "save_folder"]

FORMAT = "crfhead-tagger"
FORMAT_VERSION = 1
CONFIG, VOCABS, WEIGHTS, CARD = "config.json", "vocabs.json", "model.safetensors", "README.md"
BACKBONE = "backbone"
"""A transformer encoder's backbone config and tokenizer (its weights are in ``model.safetensors``)."""
_SPEC_KEYS = ("encoder", "head", "constrained", "decoder", "grouping")


@dataclass
class ModelFiles:
    """A model read from disk: its specs, vocabularies and weights, not yet built.

    Attributes:
        config: ``{"encoder", "head", "constrained", "decoder"}`` specs (and more from a folder).
        vocabs: the serialised vocabularies.
        state_dict: the :class:`~crfhead.model.tagger.Tagger`'s weights (CPU tensors).
        source: the path read.
        report: the test report beside a checkpoint (``test_report.json``), if any.
    """

    config: dict[str, Any]
    vocabs: dict[str, Any]
    state_dict: dict[str, Any]
    source: Path
    report: dict[str, Any] | None = None

    def build(self) -> Tagger:
        """The tagger, weights loaded (strictly: every key must match)."""
        c = self.config
        model = Tagger.build(
            self.vocabs,
            c.get("encoder"),
            c.get("head"),
            c.get("constrained", True),
            c.get("decoder"),
        )
        try:
            model.load_state_dict(self.state_dict, strict=True)
        except RuntimeError as err:
            first = str(err).splitlines()[0][:300]
            raise ValueError(
                f"{self.source}: weights do not fit the model they describe ({first})"
            ) from None
        return model.eval()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crfhead")
    except PackageNotFoundError:
        return "0+unknown"


def _report_beside(path: Path) -> dict[str, Any] | None:
    for folder in (path.parent, path.parent.parent):
        report = folder / "test_report.json"
        if report.is_file():
            try:
                loaded = json.loads(report.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            return loaded if isinstance(loaded, dict) else None
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"{path.parent}: not a saved crfhead model ({path.name} is missing)")
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: unreadable ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(loaded).__name__}")
    return loaded


def _read_folder(folder: Path) -> ModelFiles:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config = _read_json(folder / CONFIG)
    if config.get("format") != FORMAT:
        raise ValueError(
            f"{folder / CONFIG}: not a crfhead model config (format {config.get('format')!r}, "
            f"expected {FORMAT!r})"
        )
    if int(config.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(
            f"{folder}: saved by a newer crfhead (format version {config['format_version']}); "
            f"this one reads version {FORMAT_VERSION}: upgrade crfhead"
        )
    vocabs = _read_json(folder / VOCABS)
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise ValueError(f"{folder}: not a saved crfhead model ({WEIGHTS} is missing)")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{weights}: unreadable weights, truncated or corrupt ({err})") from None
    encoder = config.get("encoder") or {}
    init_args = encoder.get("init_args") or {}
    if init_args.get("model") == BACKBONE:  # relative to the folder, wherever it now is
        config["encoder"] = {**encoder, "init_args": {**init_args, "model": str(folder / BACKBONE)}}
    return ModelFiles(config, vocabs, dict(state), folder, config.get("report"))


def _read_checkpoint(path: Path) -> ModelFiles:
    ckpt = read_checkpoint(path)
    hparams: Mapping[str, Any] = ckpt["hyper_parameters"]
    config = {k: hparams.get(k) for k in _SPEC_KEYS if k in hparams}
    prefix = "tagger."
    state = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
    return ModelFiles(config, dict(hparams["vocabs"]), state, path, _report_beside(path))


def read_model(path: str | Path) -> ModelFiles:
    """Read a training checkpoint (``.ckpt``) or a saved folder.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: one line naming the file, for anything that is not a crfhead model (empty,
            truncated, foreign, or missing one of the folder's files).
    """
    p = Path(path)
    if p.is_dir():
        return _read_folder(p)
    if not p.exists():
        raise FileNotFoundError(f"no model at {p}: give a training checkpoint or a saved folder")
    return _read_checkpoint(p)


def _card(config: Mapping[str, Any], report: Mapping[str, Any] | None) -> str:
    """The folder's README.md: what the model tags and how to use it."""
    head = (config.get("head") or {}).get("class_path", "crfhead.heads.CRF")
    encoder = (config.get("encoder") or {}).get("class_path", "crfhead.encoders.IndicatorEncoder")
    types = sorted(entity_types(config["labels"], str(config["scheme"])))
    lines = [
        "# crfhead sequence tagger",
        "",
        f"- entity types: {', '.join(types) or '(none)'} ({config.get('scheme')} tags, "
        f"{len(config['labels'])} labels)",
        f"- encoder: `{encoder}`; head: `{head}`"
        + (
            f"; group decoder: `{config['decoder']['class_path']}`" if config.get("decoder") else ""
        ),
        f"- tokenizer: `{json.dumps(config.get('tokenizer'))}`",
        f"- saved by crfhead {config.get('crfhead_version')}",
    ]
    if report:
        keys = [k for k in ("f1", "precision", "recall", "macro_f1", "accuracy") if k in report]
        lines += ["", "Test scores of the run it comes from:", ""]
        lines += [f"- {k}: {float(report[k]):.4f}" for k in keys]
    lines += [
        "",
        "```python",
        "import crfhead",
        'tagger = crfhead.load("path/to/this/folder")',
        'tagger.tag("some text")  # entities with character offsets and exact probabilities',
        "```",
        "",
    ]
    return "\n".join(lines)


def save_folder(
    folder: str | Path,
    model: Tagger,
    config: Mapping[str, Any],
    vocabs: Mapping[str, Any],
    report: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` as a saved folder (see the module docstring); return its path.

    Raises:
        FileExistsError: ``folder`` exists and is not empty, and ``overwrite`` is False.
    """
    from safetensors.torch import save_model

    dest = Path(folder)
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not overwrite:
        raise FileExistsError(f"{dest} exists and is not empty: pass overwrite=True to replace it")
    specs = {k: config.get(k) for k in _SPEC_KEYS}
    encoder_spec = dict(specs.get("encoder") or {})
    encoder_args = dict(encoder_spec.get("init_args") or {})
    if encoder_args.pop("word_vectors", None) is not None:
        # The embedding rows are in the weights: loading must not need the vectors' file again.
        specs["encoder"] = {**encoder_spec, "init_args": encoder_args}
    full = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "crfhead_version": _version(),
        **specs,
        "labels": list(model.labels.labels),
        "scheme": model.labels.scheme,
        "tokenizer": vocabs.get("tokenizer"),
        "report": None if report is None else dict(report),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        save_architecture = getattr(model.encoder, "save_architecture", None)
        if callable(save_architecture):  # a transformer: its config and tokenizer travel along
            save_architecture(tmp / BACKBONE)
            encoder: dict[str, Any] = dict(specs.get("encoder") or {})
            encoder["init_args"] = {**dict(encoder.get("init_args") or {}), "model": BACKBONE}
            full["encoder"] = encoder
        (tmp / CONFIG).write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
        (tmp / VOCABS).write_text(json.dumps(dict(vocabs)) + "\n", encoding="utf-8")
        save_model(model, str(tmp / WEIGHTS))
        (tmp / CARD).write_text(_card(full, report), encoding="utf-8")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest

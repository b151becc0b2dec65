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

Loading runs no code from the folder: every class path is resolved strictly
(:func:`crfhead.model.build.strict_components`: crfhead's own classes and those the user registered
with :func:`crfhead.register_component`), and the weights are ``safetensors``.
``config.json`` is checked against the rest: an integer ``format_version``, a bool ``constrained``,
``labels`` and ``scheme`` equal to those in ``vocabs.json``, and (format version 2 on) the SHA-256
of ``model.safetensors`` (``weights_sha256``). Version 1 folders, without the checksum, still load.

Saving, decisions:

* the temporary folder is ``.NAME.tmp-PID-XXXX``; a later save of the same destination removes
  those whose process is dead (a save killed with ``kill -9``), never a live save's;
* ``overwrite=True`` replaces only a crfhead model folder (a ``config.json`` with the format marker
  and only the files a save writes), never a folder of other files;
* the replacement is atomic where the kernel can swap two folders (Linux ``renameat2`` with
  ``RENAME_EXCHANGE``); elsewhere the old folder is first renamed to ``.NAME.old``, and if the
  second rename fails it is renamed back; a ``.NAME.old`` left with no ``NAME`` (a crash between the
  two) is restored by the next save and named by the load error;
* files and folders follow the umask (``0o666`` / ``0o777`` less the umask), as ``open`` would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crfhead.model.build import resolve_saved, strict_components
from crfhead.model.checkpoints import read_checkpoint
from crfhead.model.tagger import Tagger
from crfhead.schemes import entity_types

__all__ = ["FORMAT", "ModelFiles", "model_card", "read_model", "save_folder"]

FORMAT = "crfhead-tagger"
FORMAT_VERSION = 2
"""2 adds ``weights_sha256``; version 1 folders (no checksum) still load."""
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
        with strict_components(self.source):  # a saved model's class paths: no foreign imports
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


def _training_beside(path: Path, hparams: Mapping[str, Any]) -> dict[str, Any] | None:
    """The training config LightningCLI wrote beside a checkpoint (``config.yaml``), if it is this run's.

    Kept: ``seed_everything``, ``trainer.max_epochs``, ``model`` and ``data`` (plain data, read
    with ``yaml.safe_load``); ``None`` when absent, unreadable, or naming another head or encoder
    than the checkpoint's.
    """
    for folder in (path.parent, path.parent.parent):
        file = folder / "config.yaml"
        if not file.is_file():
            continue
        import yaml  # a dependency of jsonargparse and datasets

        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None  # the card goes without it; the model itself is in the checkpoint
        if not isinstance(loaded, dict) or not isinstance(loaded.get("model"), dict):
            return None
        model = {k: v for k, v in loaded["model"].items() if k != "vocabs"}
        for key in ("encoder", "head"):
            ours, theirs = hparams.get(key), model.get(key)
            if (
                isinstance(ours, dict)
                and isinstance(theirs, dict)
                and ours.get("class_path") != theirs.get("class_path")
            ):
                return None
        out: dict[str, Any] = {"seed_everything": loaded.get("seed_everything"), "model": model}
        trainer = loaded.get("trainer")
        if isinstance(trainer, dict) and "max_epochs" in trainer:
            out["trainer"] = {"max_epochs": trainer["max_epochs"]}
        if isinstance(loaded.get("data"), dict):
            out["data"] = loaded["data"]
        return out
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_config(folder: Path, config: dict[str, Any], vocabs: dict[str, Any]) -> None:
    """Refuse a ``config.json`` whose values are ill-typed or disagree with ``vocabs.json``."""
    file = folder / CONFIG
    version = config.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{file}: format_version must be an integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{folder}: saved by a newer crfhead (format version {version}); "
            f"this one reads version {FORMAT_VERSION}: upgrade crfhead"
        )
    constrained = config.get("constrained", True)
    if constrained is not None and not isinstance(constrained, bool):
        raise ValueError(f"{file}: constrained must be true or false, got {constrained!r}")
    found = vocabs.get("labels")
    labels: dict[str, Any] = found if isinstance(found, dict) else {}
    for key in ("labels", "scheme"):
        if key in config and key in labels and config[key] != labels[key]:
            raise ValueError(
                f"{file} and {folder / VOCABS} disagree on {key}: {config[key]!r} in {CONFIG}, "
                f"{labels[key]!r} in {VOCABS} (edit neither by hand; save the model again)"
            )


def _read_folder(folder: Path) -> ModelFiles:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not (folder / CONFIG).exists() and _old(folder).is_dir():
        raise ValueError(
            f"{folder}: not a saved crfhead model, but {_old(folder)} holds the model an interrupted "
            f"save replaced: rename it to {folder.name} (the next save to {folder} restores it)"
        )
    config = _read_json(folder / CONFIG)
    if config.get("format") != FORMAT:
        raise ValueError(
            f"{folder / CONFIG}: not a crfhead model config (format {config.get('format')!r}, "
            f"expected {FORMAT!r})"
        )
    vocabs = _read_json(folder / VOCABS)
    _check_config(folder, config, vocabs)
    resolve_saved({k: config.get(k) for k in _SPEC_KEYS}, folder / CONFIG)
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise ValueError(f"{folder}: not a saved crfhead model ({WEIGHTS} is missing)")
    expected = config.get("weights_sha256")
    if expected is not None and _sha256(weights) != expected:
        raise ValueError(
            f"{weights}: corrupt weights (SHA-256 differs from weights_sha256 in {folder / CONFIG})"
        )
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
    resolve_saved(config, path)
    prefix = "tagger."
    state = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
    training = _training_beside(path, hparams)
    if training is not None:
        config["training"] = training
    return ModelFiles(config, dict(hparams["vocabs"]), state, path, _report_beside(path))


def read_model(
    path: str | Path, *, revision: str | None = None, cache_dir: str | Path | None = None
) -> ModelFiles:
    """Read a training checkpoint (``.ckpt``), a saved folder, or a Hub model (``org/name``).

    A path that does not exist and reads as a Hub model id (``org/name``, ``org/name@revision``)
    is resolved by :func:`crfhead.inference.hub.resolve_model_path` to the repository's snapshot,
    then read as any folder.

    Args:
        path: the checkpoint, the folder, or the Hub id.
        revision: the Hub revision (branch, tag, commit); only for a Hub id.
        cache_dir: the Hugging Face cache; only for a Hub id.

    Raises:
        FileNotFoundError: nothing at ``path``; for a Hub id, no such repository or revision, or
            offline and not in the cache.
        ValueError: one line naming the file, for anything that is not a crfhead model (empty,
            truncated, foreign, or missing one of the folder's files).
    """
    p = Path(path)
    if p.is_dir():
        return _read_folder(p)
    if not p.exists() and _old(p).is_dir():
        raise ValueError(
            f"no model at {p}, but {_old(p)} holds the model an interrupted save replaced: rename "
            f"it to {p.name} (the next save to {p} restores it)"
        )
    if not p.exists():
        from crfhead.inference.hub import resolve_model_path

        resolved = resolve_model_path(path, revision=revision, cache_dir=cache_dir)
        if resolved.is_dir():
            return _read_folder(resolved)
        raise FileNotFoundError(f"no model at {p}: give a training checkpoint or a saved folder")
    return _read_checkpoint(p)


_CARD_KEYS = ("name", "license", "language", "datasets", "tags")
_TAGS = ["token-classification", "ner", "crf", "sequence-labeling"]


def _card_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Card metadata checked: known keys; ``license``/``name`` str; the others a str or list of str.

    Raises:
        ValueError: an unknown key or a value of the wrong type (named).
    """
    bad = sorted(set(meta) - set(_CARD_KEYS))
    if bad:
        raise ValueError(f"unknown model card keys {bad}; allowed: {list(_CARD_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if value is None:
            continue
        if key in ("license", "name"):
            if not isinstance(value, str):
                raise ValueError(f"model card {key} must be a str, got {value!r}")
            out[key] = value
            continue
        values = [value] if isinstance(value, str) else value
        if not (isinstance(values, list | tuple) and all(isinstance(v, str) for v in values)):
            raise ValueError(f"model card {key} must be a str or a list of str, got {value!r}")
        out[key] = list(values)
    return out


def _corpus_meta(training: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the training config's corpus tells the card (empty when the corpus is unknown).

    ``datasets`` (Hub ids), ``language``, and ``dataset``: a name and type for the model index.
    """
    data = (training or {}).get("data")
    corpus = data.get("corpus") if isinstance(data, dict) else None
    if not isinstance(corpus, dict):
        return {}
    cls = str(corpus.get("class_path", "")).rpartition(".")[2]
    found = corpus.get("init_args")
    args: dict[str, Any] = found if isinstance(found, dict) else {}
    if cls == "FinanceCorpus":
        return {"language": ["en"], "dataset": ("synthetic finance (crfhead)", "crfhead-finance")}
    if cls == "MSM2013Corpus":
        return {"language": ["en"], "dataset": ("#MSM2013 tweets", "msm2013")}
    if cls == "CoNLLCorpus":
        train = str(args.get("train", "")).lower()
        for marker, hub_id in (("conll2003", "conll2003"), ("wnut17", "wnut_17")):
            if marker in train:
                return {"datasets": [hub_id], "language": ["en"], "dataset": (hub_id, hub_id)}
        return {"dataset": (str(args.get("train")), "conll")}
    if cls == "HFCorpus" and isinstance(args.get("path"), str):
        path = args["path"]
        hub = "/" in path and not Path(path).exists() and not path.startswith((".", "/", "~"))
        meta: dict[str, Any] = {"dataset": (path, path if hub else "local")}
        if hub:
            meta["datasets"] = [path]
        return meta
    return {"dataset": (cls, cls.lower())} if cls else {}


def _front_matter(config: Mapping[str, Any], report: Mapping[str, Any] | None) -> dict[str, Any]:
    meta = _card_meta(config.get("card") or {})
    corpus = _corpus_meta(config.get("training"))
    head = str((config.get("head") or {}).get("class_path", "crfhead.heads.CRF"))
    front: dict[str, Any] = {
        "library_name": "crfhead",
        "tags": list(
            dict.fromkeys([*_TAGS, head.rpartition(".")[2].lower(), *meta.get("tags", [])])
        ),
        "pipeline_tag": "token-classification",
    }
    datasets = meta.get("datasets") or corpus.get("datasets")
    if datasets:
        front["datasets"] = list(datasets)
    language = meta.get("language") or corpus.get("language")
    if language:
        front["language"] = list(language)
    if meta.get("license"):
        front["license"] = meta["license"]
    if report and "f1" in report:
        front["metrics"] = ["seqeval"]
        name, kind = corpus.get("dataset") or (
            (datasets[0], datasets[0]) if datasets else ("unknown", "unknown")
        )
        metrics = [
            {"type": key, "value": round(float(report[key]), 4), "name": f"test span {label}"}
            for key, label in (("f1", "F1"), ("precision", "precision"), ("recall", "recall"))
            if key in report
        ]
        front["model-index"] = [
            {
                "name": meta.get("name") or "crfhead-tagger",
                "results": [
                    {
                        "task": {"type": "token-classification", "name": "Token Classification"},
                        "dataset": {"name": name, "type": kind, "split": "test"},
                        "metrics": metrics,
                    }
                ],
            }
        ]
    return front


def model_card(config: Mapping[str, Any], report: Mapping[str, Any] | None) -> str:
    """The folder's README.md: the Hub's metadata, what the model tags, scores, config, usage.

    The front matter has ``library_name: crfhead``, ``tags``, ``pipeline_tag``, ``datasets`` and
    ``language`` (from ``config["card"]``, else the training config's corpus), ``license`` (if
    given), and with a test F1 in ``report`` the ``metrics`` and a ``model-index`` entry.
    """
    import yaml  # a dependency of jsonargparse and datasets

    head = (config.get("head") or {}).get("class_path", "crfhead.heads.CRF")
    encoder = (config.get("encoder") or {}).get("class_path", "crfhead.encoders.IndicatorEncoder")
    types = sorted(entity_types(config["labels"], str(config["scheme"])))
    name = (config.get("card") or {}).get("name")
    front = yaml.safe_dump(_front_matter(config, report), sort_keys=False, allow_unicode=True)
    lines = [
        "---",
        front.rstrip("\n"),
        "---",
        "",
        f"# {name or 'crfhead sequence tagger'}",
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
    training = config.get("training")
    if training:
        lines += ["", "Training config (`train.py`):", "", "```yaml"]
        lines += [yaml.safe_dump(training, sort_keys=False, allow_unicode=True).rstrip("\n")]
        lines += ["```"]
    lines += [
        "",
        "```python",
        "import crfhead",
        f"tagger = crfhead.load({json.dumps(name or 'path/to/this/folder')})",
        'tagger.tag("some text")  # entities with character offsets and exact probabilities',
        "```",
        "",
    ]
    return "\n".join(lines)


_card = model_card


def _old(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.old")


def _umask() -> int:
    mask = os.umask(0)  # the only portable way to read it; set back at once
    os.umask(mask)
    return mask


def _follow_umask(root: Path) -> None:
    """Give ``root`` and everything in it the modes ``open``/``mkdir`` would (mkdtemp gives 0o700)."""
    mask = _umask()
    for path in (root, *root.rglob("*")):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _clean_stale(dest: Path) -> None:
    """Remove ``.NAME.tmp-PID-*`` folders of ``dest`` whose saving process is dead."""
    prefix = f".{dest.name}.tmp-"
    for tmp in dest.parent.glob(f"{prefix}*"):
        pid = tmp.name[len(prefix) :].partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


_SAVED_FILES = frozenset({CONFIG, VOCABS, WEIGHTS, CARD, BACKBONE})


def _is_model_folder(dest: Path) -> bool:
    """A folder a save wrote: its ``config.json`` has the format marker and nothing else is there."""
    if not {p.name for p in dest.iterdir()} <= _SAVED_FILES:
        return False
    try:
        config = json.loads((dest / CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(config, dict) and config.get("format") == FORMAT


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    name = ctypes.util.find_library("c")
    if os.uname().sysname != "Linux" or name is None:
        return False
    libc = ctypes.CDLL(name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    done = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
    if not done and ctypes.get_errno() not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: fall back
        err = ctypes.get_errno()
        raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")
    return bool(done)


def _replace(tmp: Path, dest: Path) -> None:
    """Put ``tmp`` at ``dest`` (an existing model folder), leaving a model at ``dest`` throughout."""
    if _exchange(tmp, dest):
        shutil.rmtree(tmp, ignore_errors=True)  # now holds the old model
        return
    old = _old(dest)
    shutil.rmtree(old, ignore_errors=True)
    dest.rename(old)
    try:
        tmp.rename(dest)
    except BaseException:
        old.rename(dest)  # put the old model back
        raise
    shutil.rmtree(old, ignore_errors=True)


def save_folder(
    folder: str | Path,
    model: Tagger,
    config: Mapping[str, Any],
    vocabs: Mapping[str, Any],
    report: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    *,
    card: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``model`` as a saved folder (see the module docstring); return its path.

    Args:
        folder: the destination.
        model: the tagger.
        config: its specs; a ``training`` config (from the checkpoint's run) and ``card``
            metadata in it are kept.
        vocabs: its vocabularies.
        report: the test report of its run, if known.
        overwrite: replace an existing model folder.
        card: model card metadata (``license``, ``language``, ``datasets``, ``tags``, ``name``;
            see :func:`model_card`), merged over ``config["card"]`` and kept in ``config.json``.

    Raises:
        FileExistsError: ``folder`` exists and is not empty, and ``overwrite`` is False, or it is
            not a crfhead model folder (only those are ever replaced).
    """
    from safetensors.torch import save_model

    dest = Path(folder)
    if dest.parent.is_dir():
        _clean_stale(dest)
        if not dest.exists() and _old(dest).is_dir():  # a crash between the two renames
            _old(dest).rename(dest)
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not overwrite:
            raise FileExistsError(
                f"{dest} exists and is not empty: pass overwrite=True to replace it"
            )
        if not _is_model_folder(dest):
            raise FileExistsError(
                f"{dest} is not a crfhead model folder (files other than a save writes, or no "
                f"{CONFIG} with format {FORMAT!r}): overwrite=True replaces only a saved model; "
                "choose another folder"
            )
    specs = {k: config.get(k) for k in _SPEC_KEYS}
    if "constrained" not in config:  # the head knows; None would load unconstrained
        specs["constrained"] = bool(getattr(model.head, "constrained", True))
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
    if config.get("training") is not None:
        full["training"] = config["training"]
    meta = {**dict(config.get("card") or {}), **dict(card or {})}
    if meta:
        full["card"] = _card_meta(meta)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-{os.getpid()}-", dir=dest.parent))
    try:
        save_architecture = getattr(model.encoder, "save_architecture", None)
        if callable(save_architecture):  # a transformer: its config and tokenizer travel along
            save_architecture(tmp / BACKBONE)
            encoder: dict[str, Any] = dict(specs.get("encoder") or {})
            encoder["init_args"] = {**dict(encoder.get("init_args") or {}), "model": BACKBONE}
            full["encoder"] = encoder
        save_model(model, str(tmp / WEIGHTS))
        full["weights_sha256"] = _sha256(tmp / WEIGHTS)
        (tmp / CONFIG).write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
        (tmp / VOCABS).write_text(json.dumps(dict(vocabs)) + "\n", encoding="utf-8")
        (tmp / CARD).write_text(model_card(full, report), encoding="utf-8")
        _follow_umask(tmp)
        if dest.is_dir() and any(dest.iterdir()):
            _replace(tmp, dest)
        else:
            if dest.is_dir():
                dest.rmdir()  # empty: nothing to keep
            tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest

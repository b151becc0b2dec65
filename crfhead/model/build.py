"""Components from ``{"class_path": ..., "init_args": {...}}`` specs, with the sizes the data imposes.

Encoders, heads and group decoders (:mod:`crfhead.model.group_decoder`).

The one builder: ``train.py``, ``crfhead.load``, the command line, the lab and the scripts all build
a model from plain-data specs (:data:`Spec`: JSON values only, as a config file or a saved model's
``config.json`` holds them), never from objects a parser made. A config names an encoder, a head or
a group decoder by class path; :func:`build_encoder`, :func:`build_head` and :func:`build_decoder`
import it, check every ``init_args`` key against the constructor's signature, build any nested spec
among the arguments (a decoder's ``factors``, an encoder's ``word_vectors`` source) the same way,
and fill in what the data owns (:data:`DATA_OWNED`; :func:`data_sizes`: ``num_tags``,
``num_features``, ``vocab_size``, ``char_vocab_size``; for an encoder also ``word_vocab``, the word
:class:`~crfhead.data.vocab.Vocab` that pretrained word vectors are looked up for; ``labels`` and
``scheme`` for a head and a decoder). An unknown class or key, or a data-owned key set in the
config, raises ``ValueError`` naming it, before any training.

:func:`spec_needs` reads the batch fields a model will read from its specs alone, before anything is
built (``train.py`` hands them to the data module, which then builds only those vocabularies): an
encoder class declares them with a ``needs_for(init_args)`` class method where they depend on its
arguments (the BiLSTM's character encoder), else with its class attribute ``needs``; a head that
scores words itself (the HMM) reads its own ``needs`` instead.

Which class paths resolve (decision): a user's own training config is the user's code, so
``train.py`` (the default, lenient mode) imports any class path it names, e.g.
``--model.encoder.class_path=mypkg.MyEnc``. A saved folder or checkpoint is data from elsewhere:
loading one runs under :func:`strict_components` (as :func:`crfhead.load` does), where a class path
resolves only to a class registered with :func:`register_component` (by its ``module.QualName``), or
to a class *defined* in crfhead (``cls.__module__`` under ``crfhead.``, so a stdlib class re-exported
by a crfhead module is refused) reached by importing a module under ``crfhead.`` only. No other name
is ever imported while loading, so a module shipped in the model folder, or on ``sys.path``, never
runs. A saved model with a class of the user's loads once the user's code calls
``crfhead.register_component(MyEnc)`` before loading it, or, for processes the user's code does not
start (``crfhead predict``, the lab), once the user's installed package declares the class in the
:data:`ENTRY_POINTS` group (``[project.entry-points."crfhead.components"]`` with
``MyEnc = "mypkg.encoders:MyEnc"``): an entry point is matched by its value's ``module.QualName``
without loading any other, and loaded only when a saved model names it.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

from torch import nn

from crfhead.data.grouping import Grouping
from crfhead.data.sentence import LabelVocab
from crfhead.data.vocab import Vocab
from crfhead.heads.base import ChainHead
from crfhead.model.group_decoder import GroupDecoder

__all__ = [
    "DATA_OWNED",
    "DEFAULT_ENCODER",
    "DEFAULT_HEAD",
    "ENTRY_POINTS",
    "JSON",
    "Spec",
    "build_decoder",
    "build_encoder",
    "build_grouping",
    "build_head",
    "check_requirements",
    "data_sizes",
    "encoder_word_vectors",
    "plain_spec",
    "register_component",
    "resolve_saved",
    "spec_needs",
    "strict_components",
    "without_sources",
]

# Bare list and dict: a parameter typed with Any inside would have jsonargparse instantiate the
# nested class_path specs itself, so the model would receive objects from train.py and dicts from a
# saved model; with this type it receives plain data from both.
JSON = None | bool | int | float | str | list | dict  # type: ignore[type-arg]
"""A JSON value: what a spec holds."""
Spec = dict[str, JSON]
"""A component's ``{"class_path": ..., "init_args": {...}}`` as plain data."""

DATA_OWNED = frozenset(
    {"num_tags", "num_features", "vocab_size", "char_vocab_size", "word_vocab", "labels", "scheme"}
)
"""Constructor arguments the data fills in: never set in a config."""

DEFAULT_HEAD: dict[str, Any] = {"class_path": "crfhead.heads.CRF"}
DEFAULT_ENCODER: dict[str, Any] = {"class_path": "crfhead.encoders.IndicatorEncoder"}


ENTRY_POINTS = "crfhead.components"
"""The entry-point group whose classes saved models may name (an installed package's own opt-in)."""

_REGISTERED: dict[str, type] = {}
_STRICT: contextvars.ContextVar[str | None] = contextvars.ContextVar("crfhead_strict", default=None)
"""The file being loaded while :func:`strict_components` is active, else ``None`` (lenient)."""


def register_component(cls: type) -> type:
    """Allow ``cls`` in saved models: loading resolves its ``module.QualName`` class path to it.

    Usable as a class decorator. Needed only for a class outside crfhead that a saved folder or a
    checkpoint names; training from one's own config imports it without this.

    Raises:
        TypeError: ``cls`` is not a class.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_component takes a class, got {type(cls).__name__}")
    _REGISTERED[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


@contextlib.contextmanager
def strict_components(source: object) -> Iterator[None]:
    """Within this block, class paths resolve only to registered or crfhead classes (see the module).

    Args:
        source: the file being loaded, named in the error for a refused class path.
    """
    token = _STRICT.set(str(source))
    try:
        yield
    finally:
        _STRICT.reset(token)


def _refuse(class_path: str, what: str, source: str, why: str) -> ValueError:
    return ValueError(
        f"{source}: {what} class_path {class_path!r} refused ({why}): loading a saved model imports "
        "only crfhead's own classes; if you trust this class, import it and call "
        "crfhead.register_component(<class>) before loading, or declare it in your package's "
        f"{ENTRY_POINTS!r} entry points"
    )


def _entry_point_class(class_path: str, what: str, source: str) -> type | None:
    """The class an installed package declares under :data:`ENTRY_POINTS` as ``class_path``."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        module, _, attr = ep.value.partition(":")
        if f"{module.strip()}.{attr.strip()}" != class_path:
            continue
        try:
            cls = ep.load()
        except Exception as err:  # the package's own import failed: name it, not a traceback
            raise ValueError(
                f"{source}: {what} class_path {class_path!r}: entry point {ep.name!r} of group "
                f"{ENTRY_POINTS!r} cannot be loaded: {type(err).__name__}: {err}"
            ) from None
        if not isinstance(cls, type):
            raise _refuse(class_path, what, source, f"entry point {ep.name!r} is not a class")
        return cls
    return None


def _resolve_strict(class_path: str, what: str, base: type, source: str) -> type:
    cls = _REGISTERED.get(class_path)
    if cls is None and not class_path.startswith("crfhead."):
        cls = _entry_point_class(class_path, what, source)
    if cls is None:
        module_name, _, name = class_path.rpartition(".")
        if not module_name.startswith("crfhead.") and module_name != "crfhead":
            raise _refuse(class_path, what, source, "not a crfhead class nor registered")
        try:
            cls = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError, ValueError) as err:
            raise ValueError(
                f"{source}: {what} class_path {class_path!r} cannot be imported: {err}"
            ) from None
        module = getattr(cls, "__module__", "") or ""
        if not isinstance(cls, type) or not (module == "crfhead" or module.startswith("crfhead.")):
            raise _refuse(class_path, what, source, "not a class defined in crfhead")
    if not issubclass(cls, base):
        raise ValueError(
            f"{source}: {what} class_path {class_path!r} is not a {base.__name__} class"
        )
    return cls


def _resolve(class_path: str, what: str, base: type) -> type:
    source = _STRICT.get()
    if source is not None:
        return _resolve_strict(class_path, what, base, source)
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"{what} class_path {class_path!r} cannot be imported: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{what} class_path {class_path!r} is not a {base.__name__} class")
    return cls


def resolve_saved(config: Any, source: object) -> None:
    """Check every class path of a saved model's ``config`` strictly, importing nothing foreign.

    Run on reading a folder or checkpoint, so a refused class is one line before anything is built.

    Raises:
        ValueError: naming the class path, ``source`` and how to register it.
    """
    for spec in _specs(config):
        _resolve_strict(str(spec["class_path"]), "component", object, str(source))


def _build(spec: dict[str, Any], provided: dict[str, Any], what: str, base: type) -> Any:
    """Instantiate ``spec``'s class with its ``init_args`` plus the ``provided`` data-owned arguments."""
    if "class_path" not in spec:
        raise ValueError(f"{what} spec needs a 'class_path', got keys {sorted(spec)}")
    cls = _resolve(spec["class_path"], what, base)
    # Overrides such as --model.encoder.init_args.x=1 may arrive flattened next to class_path.
    init_args = dict(spec.get("init_args") or {})
    init_args.update({k: v for k, v in spec.items() if k not in ("class_path", "init_args")})
    params = inspect.signature(cls).parameters
    bad = [k for k in init_args if k not in params]
    if bad:
        allowed = [p for p in params if p not in provided]
        raise ValueError(f"unknown init_args {bad} for {spec['class_path']}; allowed: {allowed}")
    owned = [k for k in init_args if k in provided]
    if owned:
        raise ValueError(f"init_args {owned} are set from the data; remove them from the config")
    init_args = {
        k: _nested(v, f"{spec['class_path']} argument {k!r}") for k, v in init_args.items()
    }
    init_args.update({k: v for k, v in provided.items() if k in params})
    return cls(**init_args)


def _nested(value: Any, what: str) -> Any:
    """An argument with every ``{"class_path": ...}`` spec in it built (lists element by element)."""
    if isinstance(value, dict) and isinstance(value.get("class_path"), str):
        return _build(value, {}, what, object)
    if isinstance(value, list):
        return [_nested(v, what) for v in value]
    return value


_SIZES = {"num_features": "features", "vocab_size": "words", "char_vocab_size": "chars"}


def data_sizes(vocabs: dict[str, Any]) -> dict[str, int]:
    """The sizes the data imposes, from the data module's serialised ``vocabs``.

    A vocabulary the data module did not build (the model reads no such field) gives no size.
    """
    sizes = {"num_tags": len(vocabs["labels"]["labels"])}
    sizes.update({k: Vocab.size_of(vocabs[key]) for k, key in _SIZES.items() if key in vocabs})
    return sizes


def build_encoder(spec: dict[str, Any], vocabs: dict[str, Any]) -> nn.Module:
    """Instantiate an encoder from its spec, filling the data-dependent sizes from ``vocabs``.

    Args:
        spec: ``{"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {...}}``.
        vocabs: the data module's serialised vocabularies.

    Raises:
        ValueError: unknown class, unknown or data-owned ``init_args`` keys (named).
    """
    provided: dict[str, Any] = data_sizes(vocabs)
    if "words" in vocabs:
        provided["word_vocab"] = Vocab.from_dict(vocabs["words"])
    module: nn.Module = _build(spec, provided, "encoder", nn.Module)
    return module


SOURCES = ("word_vectors", "pretrained")
"""Encoder arguments that read the initial embedding from outside (a vectors source, a saved table):
a trained model's weights hold the rows, so rebuilding it needs neither (:func:`without_sources`)."""


def _encoder_args(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``init_args`` with any flattened overrides beside ``class_path`` merged in."""
    args = dict(spec.get("init_args") or {})
    args.update({k: v for k, v in spec.items() if k not in ("class_path", "init_args")})
    return args


def encoder_word_vectors(spec: dict[str, Any] | None) -> Any:
    """The ``word_vectors`` of an encoder spec (a source or its spec), ``None`` without.

    ``train.py`` links it into the data module (``data.word_vectors``), which adds the evaluation
    words the source covers to the word vocabulary.
    """
    if not isinstance(spec, dict):
        return None
    return _encoder_args(spec).get("word_vectors")


def plain_spec(value: Any) -> Any:
    """A parsed spec as plain data: a parser's namespaces (anything with ``as_dict``) become dicts."""
    as_dict = getattr(value, "as_dict", None)
    return as_dict() if callable(as_dict) else value


def spec_needs(
    encoder: dict[str, Any] | None, head: dict[str, Any] | None = None
) -> list[str] | None:
    """The batch fields the model of these specs is built from and reads, from the specs alone.

    ``train.py`` links it into the data module (``data.needs``), which builds only those fields'
    vocabularies. The encoder's class answers, by ``needs_for(init_args)`` where it has one, else by
    its class attribute ``needs``; a head that scores words itself adds its class's ``needs`` (the
    encoder is still built, so its fields stay). ``None`` (every field) for an encoder class that
    declares neither, or a spec that cannot be resolved (:func:`build_encoder` then says why).

    Args:
        encoder: the encoder's spec (default: :data:`DEFAULT_ENCODER`).
        head: the head's spec (default: :data:`DEFAULT_HEAD`).
    """
    try:
        head_spec = head if isinstance(head, dict) else DEFAULT_HEAD
        head_cls = _resolve(str(head_spec.get("class_path")), "head", ChainHead)
        spec = encoder if isinstance(encoder, dict) else DEFAULT_ENCODER
        cls = _resolve(str(spec.get("class_path")), "encoder", nn.Module)
    except ValueError:
        return None
    needs_for = getattr(cls, "needs_for", None)
    needs = needs_for(_encoder_args(spec)) if callable(needs_for) else getattr(cls, "needs", None)
    if not isinstance(needs, set | frozenset):
        return None
    if getattr(head_cls, "scores_words", False):
        needs = needs | frozenset(getattr(head_cls, "needs", ()))
    return sorted(needs)


def _specs(tree: Any) -> Iterator[dict[str, Any]]:
    """Every ``{"class_path": ...}`` spec in a configuration tree (dicts and lists), outermost first."""
    if isinstance(tree, dict):
        if isinstance(tree.get("class_path"), str):
            yield tree
        for value in tree.values():
            yield from _specs(value)
    elif isinstance(tree, list | tuple):
        for value in tree:
            yield from _specs(value)


def check_requirements(config: dict[str, Any]) -> None:
    """Ask every component of ``config`` whether the optional packages it needs are installed.

    A class answers by a ``check_requirements(init_args)`` static method (the encoders that load the
    default transformer model have one) that raises :class:`~crfhead.checks.MissingPackageError`;
    a class without one, or one that cannot be imported (the builder names it), is not asked.
    ``train.py`` calls this on the parsed configuration before anything is built, so a missing
    package is one line rather than the parser's errors for every type a nested spec could have.

    Raises:
        MissingPackageError: for the first component whose package is missing.
    """
    for spec in _specs(config):
        try:  # strict inside strict_components: a saved model's names are never imported
            cls = _resolve(str(spec["class_path"]), "component", object)
        except ValueError:
            continue
        check = getattr(cls, "check_requirements", None)
        if callable(check):
            check(_encoder_args(spec))


def without_sources(spec: dict[str, Any]) -> dict[str, Any]:
    """An encoder spec without ``word_vectors`` and ``pretrained`` (:data:`SOURCES`), unchanged else.

    What a checkpoint stores: the rows those arguments fill are in its weights, so loading it must not
    read (or distil) the source again, nor need its file.
    """
    args = _encoder_args(spec)
    if not any(args.get(k) is not None for k in SOURCES):
        return spec
    kept = {k: v for k, v in args.items() if k not in SOURCES}
    return {"class_path": spec.get("class_path"), "init_args": kept}


def build_head(
    spec: dict[str, Any],
    labels: LabelVocab,
    constrained: bool = True,
    vocab_size: int | None = None,
) -> ChainHead:
    """Instantiate a head (``crfhead.heads.CRF`` by default) with ``num_tags``, ``labels`` and ``scheme``.

    Any :class:`~crfhead.heads.base.ChainHead` slots in by ``class_path``: ``crfhead.heads.CRF``,
    ``crfhead.heads.MEMM``, ``crfhead.heads.StructuredPerceptron``, ``crfhead.heads.HMM`` (which also
    takes ``vocab_size``).

    Raises:
        ValueError: unknown class, not a chain head, unknown or data-owned ``init_args`` keys.
    """
    provided: dict[str, Any] = {
        "num_tags": len(labels),
        "labels": labels.labels,
        "scheme": labels.scheme if constrained else None,
    }
    if vocab_size is not None:
        provided["vocab_size"] = vocab_size
    head: ChainHead = _build(spec, provided, "head", ChainHead)
    return head


def build_grouping(spec: dict[str, Any] | None) -> Grouping | None:
    """The :class:`~crfhead.data.grouping.Grouping` a model was trained with (``None``: none saved).

    Raises:
        ValueError: unknown class, not a ``Grouping``, unknown ``init_args`` keys.
    """
    if spec is None:
        return None
    grouping: Grouping = _build(spec, {}, "grouping", Grouping)
    return grouping


def build_decoder(spec: dict[str, Any], labels: LabelVocab) -> GroupDecoder:
    """Instantiate a group decoder (e.g. ``crfhead.higher_order.FactorDecoder``) with ``labels``, ``scheme``.

    Raises:
        ValueError: unknown class, not a :class:`~crfhead.model.group_decoder.GroupDecoder`,
            unknown or data-owned ``init_args`` keys.
    """
    provided: dict[str, Any] = {"labels": labels.labels, "scheme": labels.scheme}
    decoder: GroupDecoder = _build(spec, provided, "decoder", GroupDecoder)
    return decoder

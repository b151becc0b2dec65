"""The LightningModule around :class:`~crfhead.model.tagger.Tagger`: steps, metrics, optimisers. Orchestration only.

Hyper-parameters (the encoder spec and the vocabularies linked from the data module) are saved in
every checkpoint, so ``TaggerModule.load_from_checkpoint(path)`` rebuilds a model that decodes strings
without the data module. The global torch RNG state is saved and restored too, so a run resumed
from an epoch-end checkpoint continues exactly (with :class:`~crfhead.data.datamodule.EpochSeededSampler`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor

from crfhead.checks import NonFiniteError
from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab, gold_or_none
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.evaluation.report import format_report, write_report_json
from crfhead.model.build import DEFAULT_ENCODER, DEFAULT_HEAD, Spec, without_sources
from crfhead.model.tagger import Tagger
from crfhead.schemes import entity_types

__all__ = ["MAX_LR", "OPTIMIZERS", "TaggerModule"]

OPTIMIZERS = ("adamw", "sgd")
MAX_LR = 1e10
"""The largest ``lr`` and ``backbone_lr`` accepted, refused when the model is built.

Far above any rate that trains (the configs use 5e-5 to 1; the perceptron's SGD step is 1), yet
small enough that a first step cannot overflow float32 (3.4e38): AdamW moves a weight by about
``lr`` a step (``lr / (1 - beta1)`` before bias correction, 10 times ``lr`` at step 1), so
``lr=1e38`` failed inside the optimizer ("cannot be converted to type float without overflow")
and left a crash checkpoint with advice to resume from it. Below the bound a rate too high is
stopped by ``divergence`` or the non-finite loss check, whose messages say to lower it.
"""


def _fused_adamw(groups: list[dict[str, Any]], precision: object) -> bool | None:
    """Whether AdamW runs fused: one kernel over every parameter instead of a loop of ops per tensor.

    The fused step is the same update (10 times faster on the CPU for a BiLSTM-CRF's parameters);
    it needs float parameters on the CPU or CUDA, and it unscales float16 gradients itself, so with
    ``precision="16-mixed"`` (a grad scaler) Lightning could not clip them first: not fused there.
    """
    params = [p for group in groups for p in group["params"]]
    fusable = bool(params) and all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
    )
    return True if fusable and precision != "16-mixed" else None


class TaggerModule(pl.LightningModule):
    """Train, validate and test a tagger.

    Args:
        encoder: ``{"class_path": ..., "init_args": {...}}`` of an encoder in :mod:`crfhead.encoders`
            (or any module with the same contract); sizes are filled in from ``vocabs``.
        head: ``{"class_path": ..., "init_args": {...}}`` of the structured head (default
            ``crfhead.heads.crf.CRF``); ``num_tags``, ``labels`` and ``scheme`` come from the data.
        vocabs: the data module's vocabularies (linked automatically by ``train.py``).
        constrained: constrain the CRF to the tagging scheme (training and decoding alike).
        lr: learning rate of the encoder (non-transformer part) and the CRF (finite, in
            ``(0, MAX_LR]``).
        backbone_lr: learning rate of a transformer backbone (as ``lr``).
        weight_decay: AdamW weight decay (not applied to the CRF transitions).
        warmup_ratio: fraction of the training steps with linear warm-up, then linear decay
            (0: constant learning rate).
        optimizer: ``"adamw"`` or ``"sgd"`` (plain SGD: with the perceptron head and ``lr: 1`` it is
            Collins' update).
        report_dir: where the test report (text and JSON) is written (default: the logger's folder).
        decoder: ``{"class_path": ..., "init_args": {...}}`` of a
            :class:`~crfhead.model.group_decoder.GroupDecoder` that decodes each group of a batch
            jointly (higher-order CRFs: ``crfhead.higher_order.FactorDecoder``; the data module
            needs a ``grouping``); ``labels`` and ``scheme`` come from the data. A decoder with a
            ``grid`` has its scale chosen on dev at every validation (logged as ``val/decoder_scale``,
            saved in the checkpoint); one that learns its weights trains them with the head.
        grouping: the data module's ``grouping`` spec (linked by ``train.py``), kept so that a
            loaded model groups texts as it was trained (``tag(..., group="auto")``).
        divergence: stop training with an error when the loss, smoothed, exceeds this many times its
            first non-zero value (a learning rate far too high); ``None``: never.
    """

    def __init__(
        self,
        encoder: Spec | None = None,
        head: Spec | None = None,
        vocabs: dict[str, Any] | None = None,
        constrained: bool = True,
        lr: float = 0.05,
        backbone_lr: float = 5e-5,
        weight_decay: float = 0.0,
        warmup_ratio: float = 0.0,
        optimizer: str = "adamw",
        report_dir: str | None = None,
        decoder: Spec | None = None,
        grouping: Spec | None = None,
        divergence: float | None = 1e3,
    ) -> None:
        super().__init__()
        for name, value in (("lr", lr), ("backbone_lr", backbone_lr)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
            if value > MAX_LR:
                raise ValueError(
                    f"{name} must be at most {MAX_LR:g}, got {value:g}: a step that large "
                    "overflows float32 weights (the rates that train are about 1 at most)"
                )
        if divergence is not None and not divergence > 1:
            raise ValueError(f"divergence must be > 1 or None, got {divergence!r}")
        if vocabs is None:
            raise ValueError("vocabs missing: train.py links them from the data module")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        encoder = encoder or dict(DEFAULT_ENCODER)
        head = head or dict(DEFAULT_HEAD)
        self.save_hyperparameters()
        labels = LabelVocab.from_dict(vocabs["labels"])
        self.tagger = Tagger.build(vocabs, encoder, head, constrained, decoder)
        # A fit without an optimiser (counting: the HMM) has no loss: training_step returns None
        # (Lightning still advances global_step with its mock optimizer, so checkpoints are
        # written as usual; train.py's quiet console hides Lightning's warnings about it).
        self.seen_words = set(vocabs.get("seen_words", ()))
        self.metrics = {
            stage: TaggingMetrics(labels.scheme, self.seen_words) for stage in ("val", "test")
        }
        grid = [] if self.tagger.decoder is None else list(self.tagger.decoder.grid)
        # One set of dev metrics per candidate scale of a tuned group decoder.
        self.grid_metrics = [TaggingMetrics(labels.scheme, self.seen_words) for _ in grid]
        self.report_dir = report_dir
        self.test_report: dict[str, float] = {}
        self._reference: float | None = None
        self._smoothed: float | None = None

    # ----------------------------------------------------------------------------- steps
    def training_step(self, batch: Batch, batch_idx: int) -> Tensor | None:  # noqa: D102
        try:
            loss = self.tagger.fit_step(batch, reduction="mean")
        except NonFiniteError as err:  # a NaN or +inf score reached the head
            raise FloatingPointError(
                f"non-finite scores {self._where(batch, batch_idx)}: {err}; lower the learning "
                "rate or check the inputs"
            ) from err
        if loss is None:  # the fit counts (the HMM): nothing to step on
            return None
        # The step's one read of a tensor on the host: the guards below and the logged value share
        # it (a tensor logged here would be read again by the progress bar at every refresh, and
        # by the logger; on an accelerator each read waits for the device). It stays before the
        # optimizer step, so a non-finite loss never reaches the weights (nor on_exception.ckpt).
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(
                f"non-finite loss {value} {self._where(batch, batch_idx)}; lower the learning "
                "rate or check the inputs"
            )
        self._check_divergence(value, batch_idx)
        self.log("train/loss", value, prog_bar=True, batch_size=len(batch.sentences))
        return loss

    def _where(self, batch: Batch, batch_idx: int) -> str:
        """Where a training error happened: step, epoch, batch and its first sentence ids."""
        return (
            f"at global step {self.global_step}, epoch {self.current_epoch}, batch {batch_idx} "
            f"(first sentence ids {[s.id for s in batch.sentences[:5]]})"
        )

    def _check_divergence(self, loss: float, batch_idx: int) -> None:
        """Raise when the smoothed loss has grown ``divergence`` times above its first non-zero value.

        The reference is the first loss above zero: a CRF's loss at initialisation, or a zero-initialised
        perceptron's loss after its first update (before it every path ties and the loss is 0).
        """
        factor = self.hparams.get("divergence", 1e3)
        if factor is None:
            return
        self._smoothed = loss if self._smoothed is None else 0.9 * self._smoothed + 0.1 * loss
        if self._reference is None:
            if loss > 0:
                self._reference = loss
            return
        if self._smoothed > factor * self._reference:
            raise FloatingPointError(
                f"training diverged: the smoothed loss {self._smoothed:.4g} at global step "
                f"{self.global_step}, epoch {self.current_epoch}, batch {batch_idx} is over "
                f"{factor:g} times its first value {self._reference:.4g}; lower the learning rate "
                f"(lr={self.hparams['lr']}) or set model.divergence"
            )

    def _eval_step(self, batch: Batch, stage: str) -> None:
        if stage == "val" and self.grid_metrics and not self.trainer.sanity_checking:
            self._grid_step(batch)
            return
        pred, nll = self.tagger.decode_with_loss(batch)
        # Partial positions are None: the metrics drop them and count them (ignored_tokens).
        gold = [gold_or_none(s) or [] for s in batch.sentences]
        tokens = [s.tokens for s in batch.sentences]
        self.metrics[stage].update(
            gold, pred, tokens, log_loss=nll, num_tokens=int(batch.mask.sum())
        )

    @torch.no_grad()
    def _grid_step(self, batch: Batch) -> None:
        """Decode the batch once per candidate scale of the group decoder (chosen on dev)."""
        decoder = self.tagger.decoder
        assert decoder is not None
        emissions = self.tagger(batch)
        nll = self.tagger.gold_nll(emissions, batch)
        gold = [gold_or_none(s) or [] for s in batch.sentences]
        tokens = [s.tokens for s in batch.sentences]
        kept = decoder.value
        for value, metrics in zip(decoder.grid, self.grid_metrics, strict=True):
            decoder.use(value)
            pred = self.tagger.decode_labels(emissions, batch)
            metrics.update(gold, pred, tokens, log_loss=nll, num_tokens=int(batch.mask.sum()))
        decoder.use(kept)

    def _choose_scale(self) -> dict[str, float]:
        """Set the group decoder's scale to the dev-best candidate; that candidate's metrics."""
        decoder = self.tagger.decoder
        assert decoder is not None
        results = []
        for metrics in self.grid_metrics:
            results.append(metrics.gather().compute())
            metrics.reset()
        best = max(
            range(len(results)),
            key=lambda i: (results[i].get("f1", 0.0), results[i].get("macro_f1", 0.0), -i),
        )
        decoder.use(decoder.grid[best])
        self.log("val/decoder_scale", float(decoder.grid[best]), sync_dist=False)
        return results[best]

    # ----------------------------------------------------------------------------- the head's fit
    def reduce_sum(self, tensor: Tensor) -> Tensor:
        """``tensor`` summed over the data-parallel ranks (the fit's :class:`~crfhead.heads.fit.FitLoop`)."""
        total: Tensor = self.trainer.strategy.reduce(tensor.to(self.device), reduce_op="sum")
        return total

    def validation_batches(self) -> Iterable[Any]:
        """The data module's validation batches (none without one)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        return () if datamodule is None else datamodule.val_dataloader()

    def _end_fit_epoch(self) -> None:
        for name, value in self.tagger.fit.end_epoch(self).items():
            self.log(f"val/{name}", value, sync_dist=False)

    def on_train_epoch_start(self) -> None:  # noqa: D102
        self.tagger.fit.start_epoch()

    def on_train_epoch_end(self) -> None:  # noqa: D102
        self._end_fit_epoch()

    def on_validation_epoch_start(self) -> None:  # noqa: D102
        if not self.trainer.sanity_checking:
            self._end_fit_epoch()  # a fit that counts sums and tunes before validating
        if self.tagger.decoder is not None:
            self.tagger.decoder.reset_stats()  # count this evaluation's groups only

    def on_test_epoch_start(self) -> None:  # noqa: D102
        if self.tagger.decoder is not None:
            self.tagger.decoder.reset_stats()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:  # noqa: D102
        self._eval_step(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:  # noqa: D102
        self._eval_step(batch, "test")

    def predict_step(self, batch: Batch, batch_idx: int) -> list[dict[str, Any]]:
        """The batch's decoded tags, one record per sentence (``train.py predict --ckpt_path ...``)."""
        with torch.no_grad():
            tags = self.tagger.predict(batch)
        return [
            {"id": s.id, "tokens": s.tokens, "tags": row}
            for s, row in zip(batch.sentences, tags, strict=True)
        ]

    def _eval_end(self, stage: str) -> dict[str, float]:
        if stage == "val" and self.grid_metrics and not self.trainer.sanity_checking:
            metrics = self._choose_scale()
        else:
            metrics = self.metrics[stage].gather().compute()
            self.metrics[stage].reset()
        decoder = self.tagger.decoder
        if decoder is not None and decoder.stats.get("groups", 0) > 0:
            # Over every group decoded in this evaluation (every candidate scale, on this rank).
            groups = decoder.stats["groups"]
            metrics["certified"] = decoder.stats.get("certified", 0) / groups
            metrics["decoder_iterations"] = decoder.stats.get("iterations", 0) / groups
        if decoder is not None:
            decoder.reset_stats()
        keep = {k: v for k, v in metrics.items() if isinstance(v, float) and math.isfinite(v)}
        self.log_dict({f"{stage}/{k}": v for k, v in keep.items()}, sync_dist=False)
        return metrics

    def on_validation_epoch_end(self) -> None:  # noqa: D102
        self._eval_end("val")

    def on_test_epoch_end(self) -> None:  # noqa: D102
        self.test_report = self._eval_end("test")
        # log_dir is a collective under DDP: every rank asks for it.
        folder = self.report_dir or self.trainer.log_dir or self.trainer.default_root_dir
        if self.trainer.is_global_zero:
            labels = LabelVocab.from_dict(self.hparams["vocabs"]["labels"])
            types = sorted(entity_types(labels.labels, labels.scheme))
            print(format_report(self.test_report, types))
            write_report_json(self.test_report, f"{folder}/test_report.json")

    # ----------------------------------------------------------------------------- optimisation
    def configure_optimizers(self) -> Any:  # noqa: D102
        hp = self.hparams
        if not self.tagger.fit.optimised:
            return None  # fitted by counting
        groups: list[dict[str, Any]] = []
        encoder = self.tagger.encoder
        parameter_groups: Callable[[], list[dict[str, Any]]] | None = getattr(
            encoder, "parameter_groups", None
        )
        if parameter_groups is not None:
            for group in parameter_groups():
                lr = hp["backbone_lr"] if group.get("name") == "backbone" else hp["lr"]
                groups.append({**group, "lr": lr, "weight_decay": hp["weight_decay"]})
        else:
            groups.append(
                {
                    "params": list(encoder.parameters()),
                    "lr": hp["lr"],
                    "weight_decay": hp["weight_decay"],
                }
            )
        head_params = list(self.tagger.head.parameters())
        if self.tagger.decoder is not None:
            head_params += [p for p in self.tagger.decoder.parameters() if p.requires_grad]
        groups.append(
            {
                "name": "head",
                "params": head_params,
                "lr": hp["lr"],
                "weight_decay": 0.0,
            }
        )
        optimizer: torch.optim.Optimizer
        if hp.get("optimizer", "adamw") == "sgd":
            optimizer = torch.optim.SGD(groups, lr=hp["lr"])
        else:
            precision = getattr(self._trainer, "precision", None)
            optimizer = torch.optim.AdamW(groups, fused=_fused_adamw(groups, precision))
        if hp["warmup_ratio"] <= 0:
            return optimizer
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warmup = max(int(total * hp["warmup_ratio"]), 1)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(total - warmup, 1))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    # ----------------------------------------------------------------------------- checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Save the RNG state; store the encoder spec without its embedding source.

        The ``word_vectors`` (or ``pretrained``) rows are in the state dict, so
        ``load_from_checkpoint`` rebuilds the encoder without reading the source (or its file).
        """
        checkpoint["torch_rng_state"] = torch.get_rng_state()
        hparams = checkpoint.get(self.CHECKPOINT_HYPER_PARAMS_KEY)
        if isinstance(hparams, dict) and isinstance(hparams.get("encoder"), dict):
            checkpoint[self.CHECKPOINT_HYPER_PARAMS_KEY] = {
                **hparams,
                "encoder": without_sources(hparams["encoder"]),
            }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:  # noqa: D102
        if "torch_rng_state" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng_state"])

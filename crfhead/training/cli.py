"""``train.py``'s command line: LightningCLI over the tagger module and the tagging data module.

``fit`` runs by default and is followed by ``test`` on the best checkpoint. Every run reads the
packaged ``crfhead/configs/base.yaml`` (the shared trainer settings; ``configs/`` in a checkout links
to it) first, then the ``--config`` given, which states only what differs. A packaged config can be
named from anywhere: ``--config crfhead:finance/indicator_crf.yaml`` (:func:`packaged_configs` lists
them). The orchestration is here and only here: the data module's vocabularies are linked into the
model's hyper-parameters, the model's needs are passed to the data module (from the specs, before
the data is loaded, so it builds only the vocabularies the model reads), and so is the encoder's
``word_vectors`` source (the vocabulary then covers the evaluation words it has vectors for).

**Run names.** A run without a logger name is named after its config file
(``configs/finance/indicator_crf.yaml`` → ``runs/finance_indicator_crf``) and after the encoder or
head chosen on top of it, when they differ from what the config files state
(``--model.head.class_path=crfhead.heads.MEMM`` → ``runs/finance_indicator_crf-MEMM``), so a swapped
component never logs under the old name.

**Component help.** The model takes its encoder, head and decoder as ``class_path``/``init_args``
specs (so that a checkpoint stores them as plain data), which LightningCLI cannot type;
``--model.encoder.help CLASS`` (``head``, ``decoder``; a name such as ``MEMM`` or a class path) prints
the class's config arguments, without those the data fills in; ``--model.head.help`` lists the classes.
An unknown ``init_args`` key is refused before training, naming the allowed ones
(:mod:`crfhead.model.build`).

**A quiet console.** Training prints the run folder, the progress bar with the epoch's ``val/f1``,
the best checkpoint, the test report and its path
(:class:`~crfhead.training.callbacks.RunConsole`); the lines a user cannot act on (Lightning's tips,
deprecation warnings of the libraries, GPU/TPU inventory, warnings about our own configuration such as
``num_workers=0`` or the logging interval of a tiny corpus) are filtered. ``--verbose`` shows them all.

**Logging.** CSV by default; ``--trainer.logger=crfhead.training.loggers.TensorBoardLogger`` when
TensorBoard is installed (the ``tensorboard`` extra; without it one line says so and the run logs
to CSV). A ``fast_dev_run`` writes nothing into the current folder (its checkpoint and report go to
a temporary folder, removed at the end).

Runs never lose or mix up work: a checkpoint is resumed only when ``--ckpt_path`` names it (checked to
be a crfhead checkpoint of the configured encoder, head and decoder; see
:mod:`crfhead.model.checkpoints`), and the resumed run continues the checkpoint's own version folder
(``runs/<name>/version_<n>``, its ``metrics.csv`` cut at the checkpoint's step) instead of starting a
new one. Every checkpoint is written atomically
(:class:`~crfhead.training.callbacks.AtomicCheckpointIO`), and a run stopped by SIGTERM exits with
status 143 instead of Lightning's 0, without the test pass.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from jsonargparse import ActionYesNo
from pytorch_lightning import Callback, Trainer
from pytorch_lightning.callbacks import ProgressBar
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI
from pytorch_lightning.utilities.exceptions import SIGTERMException

from crfhead.checks import MissingPackageError
from crfhead.data.datamodule import TaggingDataModule
from crfhead.model.build import (
    DATA_OWNED,
    DEFAULT_ENCODER,
    DEFAULT_HEAD,
    check_requirements,
    encoder_word_vectors,
    spec_needs,
)
from crfhead.model.checkpoints import check_same_model, read_checkpoint
from crfhead.training.callbacks import AtomicCheckpointIO, RunConsole, progress_bar
from crfhead.training.loggers import tensorboard_available
from crfhead.training.module import TaggerModule

__all__ = [
    "BASE_CONFIG",
    "CONFIG_PREFIX",
    "PACKAGED_CONFIGS",
    "SIGTERM_EXIT",
    "SUBCOMMANDS",
    "TaggerCLI",
    "main",
    "packaged_config",
    "packaged_configs",
]

PACKAGED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
"""The configs shipped inside the package (``crfhead/configs``)."""
BASE_CONFIG = PACKAGED_CONFIGS / "base.yaml"
"""The trainer settings every config shares (read before the ``--config`` files)."""
CONFIG_PREFIX = "crfhead:"
"""``--config crfhead:NAME`` names a packaged config: ``crfhead:finance/indicator_crf.yaml``."""
SUBCOMMANDS = ("fit", "validate", "test", "predict")
SIGTERM_EXIT = 143
"""The exit status of a run stopped by SIGTERM (128 + 15, as a shell reports it)."""

_CSV_LOGGER = "crfhead.training.loggers.CSVLogger"


# ----------------------------------------------------------------------------- packaged configs
def packaged_configs() -> list[str]:
    """The packaged configs by name (``finance/indicator_crf.yaml``, ...), ``base.yaml`` left out."""
    return sorted(
        path.relative_to(PACKAGED_CONFIGS).as_posix()
        for path in PACKAGED_CONFIGS.rglob("*.yaml")
        if path != BASE_CONFIG
    )


def packaged_config(name: str) -> Path:
    """The path of a packaged config: ``finance/indicator_crf.yaml`` (``.yaml`` may be left out).

    Raises:
        FileNotFoundError: naming the config and listing the packaged ones.
    """
    name = name.removeprefix(CONFIG_PREFIX)
    path = PACKAGED_CONFIGS / name
    if path.suffix != ".yaml":
        path = path.with_name(path.name + ".yaml")
    if not path.resolve().is_relative_to(PACKAGED_CONFIGS) or not path.is_file():
        raise FileNotFoundError(
            f"no packaged config {CONFIG_PREFIX}{name}; packaged: {', '.join(packaged_configs())}"
        )
    return path


def _resolve_configs(argv: list[str]) -> list[str]:
    """``--config crfhead:NAME`` (or ``--config=crfhead:NAME``) → the packaged file's path."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith(f"--config={CONFIG_PREFIX}"):
            arg = f"--config={packaged_config(arg.split('=', 1)[1])}"
        elif arg.startswith(CONFIG_PREFIX) and i > 0 and argv[i - 1] == "--config":
            arg = str(packaged_config(arg))
        out.append(arg)
    return out


# ----------------------------------------------------------------------------- the quiet console
_NOISE_LOG = re.compile(
    r"💡 Tip|litlogger|litmodels"
    r"|^(GPU|TPU|HPU|IPU) available:"
    r"|^Seed set to"
    r"|^`Trainer\.(fit|validate|test|predict)` stopped:"
    r"|^Restoring states from the checkpoint path|^Restored all states from the checkpoint"
    r"|^Loaded model weights from the checkpoint"
    r"|^Running in `fast_dev_run` mode"
    r"|^LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES"
    r"|^You are using a CUDA device .* Tensor Cores"
)
"""Lightning's log lines a user cannot act on (tips, device inventory, loop bookkeeping)."""

_NOISE_LOGGERS = (
    "pytorch_lightning",
    "pytorch_lightning.utilities.rank_zero",
    "pytorch_lightning.accelerators.cuda",
    "lightning_fabric",
    "lightning_fabric.utilities.rank_zero",
    "lightning_fabric.utilities.seed",
)
"""The loggers those lines come from (a filter on a logger sees only its own records)."""

_NOISE_WARNINGS = (
    # Caused by our own configuration: num_workers=0 is the default (tokenised data in memory), a
    # tiny corpus has fewer batches than the logging interval, a resumed run reuses its folder.
    r".*does not have many workers",
    r".*is smaller than the logging interval",
    r"Checkpoint directory .* exists and is not empty",
    r"The dirpath has changed from",
    r"Experiment logs directory .* exists and is not empty",
    r"You're resuming from a checkpoint that ended before the epoch ended",
    r".*GPU available but not used",
    # A counting head (the HMM) fits without a loss or an optimizer, on purpose.
    r".*configure_optimizers` returned `None`",
    r".*training_step` returned `None`",
    r"Starting from v1\.9\.0, `tensorboardX` has been removed",
    r".*`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"The `srun` command is available on your system but is not used",
)
"""Warnings a user cannot act on (matched at the start of the message)."""


class _NoiseFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _NOISE_LOG.search(record.getMessage())


class _Console:
    """The noise filters of a quiet run, the temporary folders of ``fast_dev_run`` runs."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.scratch: list[str] = []
        self._filter = _NoiseFilter()
        self._warning_filters: list[Any] = []

    @contextmanager
    def session(self) -> Iterator[_Console]:
        with warnings.catch_warnings():
            # main() hands LightningCLI the command line as args, by design: never a mistake here.
            warnings.filterwarnings(
                "ignore", message=".*args parameter is intended to run from within"
            )
            if not self.verbose:
                self._quiet()
            try:
                yield self
            finally:
                self.show_all()
                for folder in self.scratch:
                    shutil.rmtree(folder, ignore_errors=True)

    def _quiet(self) -> None:
        before = list(warnings.filters)
        for message in _NOISE_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        # The libraries' deprecations (Lightning, jsonargparse, torch): crfhead's own stay visible.
        for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", category=category, module=r"(?!crfhead(\.|$))")
        self._warning_filters = [f for f in warnings.filters if f not in before]
        for name in _NOISE_LOGGERS:
            logger = logging.getLogger(name)
            logger.addFilter(self._filter)
            for handler in logger.handlers:
                handler.addFilter(self._filter)

    def show_all(self) -> None:
        """Remove the filters (``--verbose``, or ``verbose: true`` found in a config file)."""
        filters = cast("list[Any]", warnings.filters)
        for entry in self._warning_filters:
            if entry in filters:
                filters.remove(entry)
        if self._warning_filters:
            warnings.filterwarnings("default", append=True)  # the default action; resets the cache
        self._warning_filters = []
        for name in _NOISE_LOGGERS:
            logger = logging.getLogger(name)
            logger.removeFilter(self._filter)
            for handler in logger.handlers:
                handler.removeFilter(self._filter)


_BOOLS = ("true", "false", "yes", "no", "1", "0", "on", "off")


def _verbose(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether ``--verbose`` is on the command line, and the command line for LightningCLI.

    ``fit`` and ``predict`` have crfhead's ``--verbose``/``--no_verbose``. ``test`` and ``validate``
    have Lightning's ``--verbose BOOL`` (print the results): there a bare ``--verbose`` is crfhead's
    and is taken out, one with a value is Lightning's and is left.
    """
    verbose = False
    lightning_owns = bool(argv) and argv[0] in ("test", "validate")
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg in ("--verbose", "--no_verbose"):
            verbose = arg == "--verbose"
            bare = i + 1 >= len(argv) or argv[i + 1].lower() not in _BOOLS
            if lightning_owns and arg == "--verbose" and bare:
                continue
        out.append(arg)
    return verbose, out


# ----------------------------------------------------------------------------- component help
_COMPONENT_PACKAGES = {
    "encoder": "crfhead.encoders",
    "head": "crfhead.heads",
    "decoder": "crfhead.higher_order",
}
_HELP = re.compile(r"--model\.(encoder|head|decoder)\.help(?:=(.*))?")


def _components(key: str) -> dict[str, type]:
    """The concrete classes a package offers for ``model.<key>``, by name."""
    import importlib
    import inspect

    from torch import nn

    from crfhead.heads.base import ChainHead, CountingHead
    from crfhead.model.group_decoder import GroupDecoder

    base = {"encoder": nn.Module, "head": ChainHead, "decoder": GroupDecoder}[key]
    package = importlib.import_module(_COMPONENT_PACKAGES[key])
    found = {}
    for name in getattr(package, "__all__", ()):
        value = getattr(package, name, None)
        if (
            isinstance(value, type)
            and issubclass(value, base)
            and value not in (base, CountingHead)
            and not inspect.isabstract(value)
        ):
            found[name] = value
    return found


def _component_help(argv: list[str]) -> str | None:
    """``--model.encoder.help CLASS`` (also ``head``, ``decoder``): the class's config arguments.

    The model takes these components as ``{"class_path": ..., "init_args": ...}`` specs, so
    LightningCLI has no ``--model.encoder.help`` of its own; this prints what it would, leaving out
    the arguments the data fills in. Without a class, the classes on offer.
    """
    for i, arg in enumerate(argv):
        match = _HELP.fullmatch(arg)
        if match is None:
            continue
        key, value = match[1], match[2]
        if value is None and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            value = argv[i + 1]
        offered = _components(key)
        if not value:
            return f"model.{key} classes ({_COMPONENT_PACKAGES[key]}): {', '.join(sorted(offered))}"
        return _class_help(key, value, offered)
    return None


def _class_help(key: str, value: str, offered: dict[str, type]) -> str:
    import importlib

    from jsonargparse import ArgumentParser

    cls: Any = offered.get(value)
    if cls is None and "." in value:
        module, _, name = value.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError):
            cls = None
    if not isinstance(cls, type):
        raise FileNotFoundError(
            f"no model.{key} class {value!r}; on offer: {', '.join(sorted(offered))} "
            "(or a full class path)"
        )
    path = f"{_COMPONENT_PACKAGES[key]}.{value}" if value in offered else value
    parser = ArgumentParser(prog="train.py", usage=argparse.SUPPRESS, add_help=False)
    parser.add_class_arguments(
        cls, f"model.{key}.init_args", skip=set(DATA_OWNED), fail_untyped=False
    )
    owned = sorted(p for p in _parameters(cls) if p in DATA_OWNED)
    text = f"--model.{key}.class_path={path}\n\n{parser.format_help().strip()}\n"
    if owned:
        text += f"\nset from the data (never in a config): {', '.join(owned)}\n"
    return text


def _parameters(cls: type) -> list[str]:
    import inspect

    return list(inspect.signature(cls).parameters)


# ----------------------------------------------------------------------------- run names and folders
def _class_name(spec: Any, default: dict[str, Any]) -> str:
    """The class name (last dotted part) of a ``{"class_path": ...}`` spec, or of the default."""
    path = None
    if spec is not None and hasattr(spec, "get"):
        path = spec.get("class_path")
    return str(path or default["class_path"]).rpartition(".")[2]


def _config_files(config: Any) -> list[Path]:
    return [Path(str(c)) for c in config.get("config") or () if str(c) != str(BASE_CONFIG)]


def _stated(files: list[Path], key: str) -> Any:
    """The ``model.<key>`` spec the config files state (the last one that states it), if any."""
    import yaml

    stated = None
    for path in files:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        model = data.get("model") if isinstance(data, dict) else None
        if isinstance(model, dict) and isinstance(model.get(key), dict):
            stated = model[key]
    return stated


def _run_name(config: Any) -> str | None:
    """``<folder>_<stem>`` of the last config file, plus the chosen encoder's and head's class names.

    A class name is added when it differs from what the config files state (or the default when
    they state none): ``--model.head.class_path=crfhead.heads.MEMM`` → ``finance_indicator_crf-MEMM``.
    """
    files = _config_files(config)
    if not files:
        return None
    name = f"{files[-1].parent.name}_{files[-1].stem}"
    model = config.get("model") or {}
    for key, default in (("encoder", DEFAULT_ENCODER), ("head", DEFAULT_HEAD)):
        chosen = _class_name(model.get(key), default)
        if chosen != _class_name(_stated(files, key), default):
            name += f"-{chosen}"
    return name


def _version_folder(ckpt_path: str) -> Path | None:
    """The ``.../<name>/version_<n>`` folder a checkpoint was written in (its own or its parent)."""
    path = Path(ckpt_path)
    for folder in (path.parent, path.parent.parent):
        if re.fullmatch(r"version_\d+", folder.name):
            return folder
    return None


class TaggerCLI(LightningCLI):
    """Links the data into the model; names runs; keeps the console quiet and resumed runs together."""

    def __init__(self, *args: Any, console: _Console | None = None, **kwargs: Any) -> None:
        self.console = console or _Console(verbose=True)
        self.resume_step: int | None = None
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:  # noqa: D102
        parser.link_arguments("data.vocabs", "model.vocabs", apply_on="instantiate")
        # The encoder's word vector source tells the data which evaluation words to give an id.
        parser.link_arguments(
            "model.encoder", "data.word_vectors", compute_fn=encoder_word_vectors, apply_on="parse"
        )
        # What the encoder (or a word-scoring head) reads: the data builds only those vocabularies.
        parser.link_arguments(
            ("model.encoder", "model.head"), "data.needs", compute_fn=spec_needs, apply_on="parse"
        )

    def _prepare_subcommand_parser(
        self, klass: type, subcommand: str, **kwargs: Any
    ) -> LightningArgumentParser:
        """Each subcommand's parser, with ``--verbose`` where the trainer method has none.

        ``test`` and ``validate`` have Lightning's own ``--verbose`` (print the results, default
        true); there ``main`` reads ``--verbose`` on the command line only.
        """
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        if "verbose" not in self._subcommand_method_arguments.get(subcommand, []):
            parser.add_argument(
                "--verbose",
                action=ActionYesNo,
                default=False,
                help="Show every library message: Lightning's tips, deprecations, device inventory.",
            )
        return parser

    def before_instantiate_classes(self) -> None:  # noqa: D102
        config = self.config[self.subcommand] if self.subcommand else self.config
        check_requirements(config.as_dict())  # a missing optional package: one line, nothing built
        ours = "verbose" not in self._subcommand_method_arguments.get(self.subcommand or "", [])
        if ours and config.get("verbose"):
            self.console.show_all()  # verbose: true in a config file
        trainer = config.get("trainer") or {}
        if trainer.get("fast_dev_run") and trainer.get("default_root_dir") is None:
            scratch = tempfile.mkdtemp(prefix="crfhead-fast-dev-run-")
            self.console.scratch.append(scratch)
            trainer["default_root_dir"] = scratch
        logger: Any = trainer.get("logger")
        init_args: Any = getattr(logger, "init_args", None)
        if init_args is None:
            return
        class_path = str(getattr(logger, "class_path", ""))
        if class_path.endswith("TensorBoardLogger") and not tensorboard_available():
            print(
                "TensorBoard is not installed (pip install 'crfhead[tensorboard]'): logging to CSV",
                file=sys.stderr,
            )
            keep = {k: init_args.get(k) for k in ("save_dir", "name", "version", "prefix")}
            logger["class_path"] = _CSV_LOGGER
            logger["init_args"] = type(init_args)(**keep)
            init_args = logger["init_args"]
        if init_args.get("name", "") is None:
            init_args["name"] = _run_name(config) or "default"
        self._continue_version_folder(config, init_args)

    def _continue_version_folder(self, config: Any, init_args: Any) -> None:
        """A resumed fit logs into the checkpoint's own version folder (a logger with no version)."""
        ckpt_path = config.get("ckpt_path")
        if self.subcommand != "fit" or self.resume_step is None or not ckpt_path:
            return
        folder = _version_folder(str(ckpt_path))
        if folder is None or "version" not in init_args or init_args.get("version") is not None:
            return
        init_args["save_dir"] = str(folder.parent.parent)
        init_args["name"] = folder.parent.name
        init_args["version"] = int(folder.name.split("_")[1])

    def instantiate_classes(self) -> None:  # noqa: D102
        super().instantiate_classes()
        if isinstance(self.datamodule, TaggingDataModule) and isinstance(self.model, TaggerModule):
            self.datamodule.set_needs(self.model.tagger.needs)
        self.trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        continue_run = getattr(self.trainer.logger, "continue_run", None)
        if self.resume_step is not None and self.subcommand == "fit" and continue_run is not None:
            version = getattr(self.trainer.logger, "version", None)
            folder = _version_folder(str(self.config[self.subcommand].get("ckpt_path")))
            if folder is not None and version == int(folder.name.split("_")[1]):
                continue_run(self.resume_step)

    def _instantiate_trainer(self, config: dict[str, Any], callbacks: list[Callback]) -> Trainer:
        """Every trainer gets :class:`RunConsole`, and the progress bar with ``val/f1``."""
        extra: list[Callback] = [*callbacks, RunConsole()]
        configured = config.get("callbacks") or []
        configured = configured if isinstance(configured, list) else [configured]
        if config.get("enable_progress_bar") is not False and not any(
            isinstance(c, ProgressBar) for c in [*configured, *callbacks]
        ):
            extra.append(progress_bar())
        return super()._instantiate_trainer(config, extra)

    def _parse_ckpt_path(self) -> None:
        """Check a ``--ckpt_path`` before anything is built; never let it rewrite the configuration.

        Lightning's ``LightningCLI`` replaces the configured model with the hyper-parameters stored in
        the checkpoint, so a checkpoint of another head silently became the model. Here the
        checkpoint must be a crfhead checkpoint of the configured encoder, head and decoder.
        """
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        path = self.config[subcommand].get("ckpt_path")
        if path is None or path in ("best", "last", "hpc"):
            return
        ckpt = read_checkpoint(path)
        model = self.config[subcommand].get("model")
        spec = model.as_dict() if hasattr(model, "as_dict") else dict(model or {})
        check_same_model(ckpt, spec, path)
        step = ckpt.get("global_step")
        self.resume_step = int(step) if isinstance(step, int) else None
        verb = "resuming from" if subcommand == "fit" else "using"
        print(f"{verb} {path} (epoch {ckpt.get('epoch')}, step {step})", file=sys.stderr)


def main(args: list[str] | None = None) -> TaggerCLI:
    """Run ``fit`` then ``test`` (or the subcommand given first).

    ``--config crfhead:NAME`` reads a packaged config; ``--verbose`` shows every library message.
    """
    argv = list(sys.argv[1:] if args is None else args)
    run_test_after_fit = not argv or argv[0] not in SUBCOMMANDS
    if run_test_after_fit:
        argv = ["fit", *argv]
    try:
        argv = _resolve_configs(argv)
    except FileNotFoundError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        component_help = _component_help(argv)
    except FileNotFoundError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    if component_help is not None:
        print(component_help)
        raise SystemExit(0)
    defaults = {"default_config_files": [str(BASE_CONFIG)]} if BASE_CONFIG.is_file() else {}
    verbose, argv = _verbose(argv)
    with _Console(verbose=verbose).session() as console:
        try:
            cli = TaggerCLI(
                TaggerModule,
                TaggingDataModule,
                args=argv,
                save_config_kwargs={"overwrite": True},
                parser_kwargs={sub: defaults for sub in SUBCOMMANDS},
                console=console,
            )
        except MissingPackageError as error:
            print(f"train.py: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        except SIGTERMException:
            print("train.py: stopped by SIGTERM; the test pass did not run", file=sys.stderr)
            raise SystemExit(SIGTERM_EXIT) from None
        if run_test_after_fit:
            best = None if getattr(cli.trainer, "fast_dev_run", False) else "best"
            cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=best, verbose=False)
    return cli

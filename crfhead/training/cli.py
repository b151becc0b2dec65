"""``train.py``'s command line: LightningCLI over the tagger module and the tagging data module.

``fit`` runs by default and is followed by ``test`` on the best checkpoint. Every run reads the
packaged ``crfhead/configs/base.yaml`` (the shared trainer settings; ``configs/`` in a checkout links
to it) first, then the ``--config`` given, which states only what differs. A packaged config can be
named from anywhere: ``--config crfhead:finance/indicator_crf.yaml`` (:func:`~crfhead.training.configs.packaged_configs`
lists them). The orchestration is here and only here: the data module's vocabularies are linked into the
model's hyper-parameters, the model's needs are passed to the data module (from the specs, before
the data is loaded, so it builds only the vocabularies the model reads), and so is the encoder's
``word_vectors`` source (the vocabulary then covers the evaluation words it has vectors for).

Beside it, one concern a module: :mod:`~crfhead.training.configs` (packaged configs by name),
:mod:`~crfhead.training.runs` (run names after the config and the components chosen on top of it;
a resumed fit's own version folder), :mod:`~crfhead.training.component_help`
(``--model.encoder.help CLASS``; an unknown ``init_args`` key is refused before training by
:mod:`crfhead.model.build`) and :mod:`~crfhead.training.quiet` (the lines a user cannot act on are
filtered; ``--verbose`` shows them all). Training prints the run folder, the progress bar with the
epoch's ``val/f1``, the best checkpoint, the test report and its path
(:class:`~crfhead.training.callbacks.RunConsole`).

**Logging.** CSV by default; ``--trainer.logger=crfhead.training.loggers.TensorBoardLogger`` when
TensorBoard is installed (the ``tensorboard`` extra; without it one line says so and the run logs
to CSV). A ``fast_dev_run`` writes nothing into the current folder (its checkpoint and report go to
a temporary folder, removed at the end).

**Errors in the configuration** are short. A value a component's constructor refuses (a
``ValueError`` while the classes are built: ``--model.lr=1e38``, ``--data.batch_size=0``,
``--data.corpus.init_args.train_docs=-1``) or a ``--ckpt_path`` of another model is raised as
:class:`ConfigError`, naming the config key when it can be told (the component whose constructor
raised, and the one argument of it the message names); :func:`script` (``train.py``) prints it in
one line, exit status 2, as ``crfhead train`` does (``--verbose``: the traceback). Everything else
raised while training keeps its traceback: it may be a bug. A key the parser refuses (a typo) is
one line too, naming the command the user typed (``crfhead train``, not the ``fit`` it runs), with
where to find the options, instead of the whole usage.

Runs never lose or mix up work: a checkpoint is resumed only when ``--ckpt_path`` names it (checked to
be a crfhead checkpoint of the configured encoder, head and decoder; see
:mod:`crfhead.model.checkpoints`), and the resumed run continues the checkpoint's own version folder
(``runs/<name>/version_<n>``, its ``metrics.csv`` cut at the checkpoint's step) instead of starting a
new one. Every checkpoint is written atomically
(:class:`~crfhead.training.callbacks.AtomicCheckpointIO`), and a run stopped by SIGTERM exits with
status 143 instead of Lightning's 0, without the test pass.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import tempfile
from types import TracebackType
from typing import Any, NoReturn

import torch
from jsonargparse import ActionYesNo
from pytorch_lightning import Callback, LightningDataModule, LightningModule, Trainer
from pytorch_lightning.callbacks import ProgressBar
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI
from pytorch_lightning.loggers import Logger
from pytorch_lightning.utilities.exceptions import SIGTERMException

from crfhead.checks import MissingPackageError
from crfhead.data.corpora import Corpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.model.build import (
    check_requirements,
    encoder_word_vectors,
    plain_spec,
    spec_needs,
)
from crfhead.model.checkpoints import check_same_model, read_checkpoint
from crfhead.training.callbacks import AtomicCheckpointIO, RunConsole, progress_bar
from crfhead.training.component_help import component_help
from crfhead.training.configs import BASE_CONFIG, resolve_configs
from crfhead.training.loggers import tensorboard_available
from crfhead.training.module import TaggerModule
from crfhead.training.quiet import QuietConsole, split_verbose
from crfhead.training.runs import run_name, version_folder

__all__ = [
    "SIGTERM_EXIT",
    "SUBCOMMANDS",
    "ConfigError",
    "TaggerCLI",
    "main",
    "script",
]

SUBCOMMANDS = ("fit", "validate", "test", "predict")
SIGTERM_EXIT = 143
"""The exit status of a run stopped by SIGTERM (128 + 15, as a shell reports it)."""

_CSV_LOGGER = "crfhead.training.loggers.CSVLogger"
# Where each kind of component sits in the configuration, to name the key a constructor refused
# (the first match wins: a corpus is built inside ``data``, a callback inside ``trainer``).
_CONFIG_KEYS: tuple[tuple[type, str], ...] = (
    (Corpus, "data.corpus.init_args"),
    (LightningDataModule, "data"),
    (LightningModule, "model"),
    (Callback, "trainer.callbacks"),
    (Logger, "trainer.logger"),
    (Trainer, "trainer"),
)


class ConfigError(ValueError):
    """A configured value refused before training started; the message names the key if it can.

    A :class:`ValueError` (what the constructor raised is its ``__cause__``), so callers of
    :func:`main` that catch ``ValueError`` keep working.
    """


def _config_key(exc: BaseException) -> str | None:
    """The config key of a value a constructor refused, from where ``exc`` was raised.

    Only an exception raised by an ``__init__`` itself counts (validation of its arguments); one
    raised deeper (reading a corpus file, building a head) names its own source. The key is the
    outermost component under construction (:data:`_CONFIG_KEYS`), then the one argument of that
    constructor the message names as a word, if exactly one is named.
    """
    frames = []
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    if not frames or frames[-1].f_code.co_name != "__init__":
        return None
    for frame in frames:
        obj = frame.f_locals.get("self") if frame.f_code.co_name == "__init__" else None
        key = next((k for kind, k in _CONFIG_KEYS if isinstance(obj, kind)), None)
        if obj is None or key is None:
            continue
        try:
            names = list(inspect.signature(type(obj).__init__).parameters)[1:]
        except (TypeError, ValueError):
            return key
        named = [n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", str(exc))]
        return f"{key}.{named[0]}" if len(named) == 1 else key
    return None


def _config_message(error: ValueError) -> str:
    """``error``'s message, led by the config key when a constructor in its chain names one.

    jsonargparse catches what a nested component's constructor raises (the corpus inside
    ``data``) and raises its own multi-line summary of every type it tried: the constructor's own
    message, found in the chain, is then the message.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        key = _config_key(seen)
        if key is not None:
            return f"{key}: {seen}"
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    # No constructor named: the deepest ValueError that jsonargparse did not raise itself (a
    # profile name, a file a corpus reads) says more than its summary of the types it tried.
    ours = [e for e in chain if isinstance(e, ValueError) and not _raised_by_jsonargparse(e)]
    return str(ours[-1] if ours else error)


def _raised_by_jsonargparse(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is jsonargparse's."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "jsonargparse" in tb.tb_frame.f_code.co_filename


def _jsonargparse_debug() -> bool:
    """Whether jsonargparse's debug mode (``JSONARGPARSE_DEBUG``) is on: parser errors are raised."""
    try:
        from jsonargparse._common import debug_mode_active  # private: read where it is
    except ImportError:
        return bool(os.environ.get("JSONARGPARSE_DEBUG"))
    return bool(debug_mode_active())


def _short_error_parser(display: str) -> type[LightningArgumentParser]:
    """A parser class whose usage errors are one line naming ``display`` (the command typed).

    jsonargparse prints the whole usage of the subcommand it runs (~70 lines) and names it
    (``fit``), where the user typed ``crfhead train``; the message itself names the key.
    """

    class ShortErrorParser(LightningArgumentParser):
        def error(self, message: str, ex: Exception | None = None) -> NoReturn:
            if not self.exit_on_error or _jsonargparse_debug():
                super().error(message, ex)  # raises: the caller asked for the exception
            print(
                f"{display}: error: {message.strip()}\n{display}: every option: {display} --help",
                file=sys.stderr,
            )
            self.exit(2)

    return ShortErrorParser


class TaggerCLI(LightningCLI):
    """Links the data into the model; names runs; keeps the console quiet and resumed runs together."""

    def __init__(self, *args: Any, console: QuietConsole | None = None, **kwargs: Any) -> None:
        self.console = console or QuietConsole(verbose=True)
        self.resume_step: int | None = None
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:  # noqa: D102
        parser.link_arguments("data.vocabs", "model.vocabs", apply_on="instantiate")
        # The encoder's word vector source tells the data which evaluation words to give an id.
        parser.link_arguments(
            "model.encoder", "data.word_vectors", compute_fn=encoder_word_vectors, apply_on="parse"
        )
        # The grouping the model is trained with travels with it (tag(..., group="auto")).
        parser.link_arguments(
            "data.grouping", "model.grouping", compute_fn=plain_spec, apply_on="parse"
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
            init_args["name"] = run_name(config) or "default"
        self._continueversion_folder(config, init_args)

    def _continueversion_folder(self, config: Any, init_args: Any) -> None:
        """A resumed fit logs into the checkpoint's own version folder (a logger with no version)."""
        ckpt_path = config.get("ckpt_path")
        if self.subcommand != "fit" or self.resume_step is None or not ckpt_path:
            return
        folder = version_folder(str(ckpt_path))
        if folder is None or "version" not in init_args or init_args.get("version") is not None:
            return
        init_args["save_dir"] = str(folder.parent.parent)
        init_args["name"] = folder.parent.name
        init_args["version"] = int(folder.name.split("_")[1])

    def instantiate_classes(self) -> None:
        """Build the components; a value one refuses is a :class:`ConfigError` naming its key."""
        try:
            super().instantiate_classes()
        except ConfigError:
            raise
        except ValueError as error:
            raise ConfigError(_config_message(error)) from error
        if isinstance(self.datamodule, TaggingDataModule) and isinstance(self.model, TaggerModule):
            self.datamodule.set_needs(self.model.tagger.needs)
            self.datamodule.set_lengths(self.model.tagger.lengths)
        self.trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        continue_run = getattr(self.trainer.logger, "continue_run", None)
        if self.resume_step is not None and self.subcommand == "fit" and continue_run is not None:
            version = getattr(self.trainer.logger, "version", None)
            folder = version_folder(str(self.config[self.subcommand].get("ckpt_path")))
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
        trainer = super()._instantiate_trainer(config, extra)
        # ``deterministic: true`` (configs/base.yaml) turns on torch's deterministic algorithms,
        # which also fill every new tensor with NaN, a debugging aid for kernels that read memory
        # they never wrote: 6 % of a CPU BiLSTM-CRF step in ``aten::fill_``. The algorithms stay
        # deterministic; only the fill is off (like the algorithms' switch, a process-wide one).
        torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
        return trainer

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
        try:
            check_same_model(ckpt, spec, path)
        except ValueError as error:
            raise ConfigError(f"ckpt_path: {error}") from error
        step = ckpt.get("global_step")
        self.resume_step = int(step) if isinstance(step, int) else None
        verb = "resuming from" if subcommand == "fit" else "using"
        print(f"{verb} {path} (epoch {ckpt.get('epoch')}, step {step})", file=sys.stderr)


def main(args: list[str] | None = None, prog: str = "train.py") -> TaggerCLI:
    """Run ``fit`` then ``test`` (or the subcommand given first).

    ``--config crfhead:NAME`` reads a packaged config; ``--verbose`` shows every library message.

    Args:
        args: the command line (default: ``sys.argv[1:]``).
        prog: what the user typed to run this, named in usage errors (``crfhead train``); the
            subcommand, when given first, is added.

    Raises:
        SystemExit: a usage error (one line, status 2), ``--help``, SIGTERM (143).
        ConfigError: a configured value a component refused (see the module docstring).
    """
    argv = list(sys.argv[1:] if args is None else args)
    display = f"{prog} {argv[0]}" if argv and argv[0] in SUBCOMMANDS else prog
    run_test_after_fit = not argv or argv[0] not in SUBCOMMANDS
    if run_test_after_fit:
        argv = ["fit", *argv]
    try:
        argv = resolve_configs(argv)
    except FileNotFoundError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        help_text = component_help(argv)
    except FileNotFoundError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    if help_text is not None:
        print(help_text)
        raise SystemExit(0)
    defaults = {"default_config_files": [str(BASE_CONFIG)]} if BASE_CONFIG.is_file() else {}
    verbose, argv = split_verbose(argv)
    with QuietConsole(verbose=verbose).session() as console:
        try:
            cli = TaggerCLI(
                TaggerModule,
                TaggingDataModule,
                args=argv,
                save_config_kwargs={"overwrite": True},
                parser_kwargs={sub: defaults for sub in SUBCOMMANDS},
                parser_class=_short_error_parser(display),
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


def script(args: list[str] | None = None, prog: str = "train.py") -> int:
    """``train.py`` run as a script: :func:`main`, a :class:`ConfigError` reported in one line.

    Only configuration errors and missing files (a data split, a ``--ckpt_path``: the message names
    the path) are shortened (status 2, as ``crfhead train`` reports them); any other exception keeps
    its traceback, and ``--verbose`` shows the traceback of those too.

    Returns:
        0, or 2 for a configuration error or a missing file.
    """
    argv = list(sys.argv[1:] if args is None else args)
    try:
        main(argv, prog=prog)
    except (ConfigError, FileNotFoundError) as error:
        if "--verbose" in argv:
            raise
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    return 0

"""crfhead against Flair on WNUT 2017: BiLSTM-CRF and transformer-CRF, same data, same splits.

    pip install -e '.[bench]'     # flair (see pyproject.toml)
    python scripts/flair_compare.py [--bilstm-epochs 5] [--transformer-epochs 1] [--out-dir docs/results]
    python scripts/flair_compare.py --tiny --out-dir /tmp/x      # smoke test: a few sentences, 1 epoch
    python scripts/flair_compare.py --only crfhead               # crfhead alone (no flair needed)

Both libraries read the official train / dev / test files of WNUT 2017 (``$CRFHEAD_DATA/wnut17``,
default ``../shared/data/wnut17``), read and repaired once by crfhead's CoNLL reader, train in BIOES,
keep the epoch with the best dev span F1, and are scored on test by the **same** scorer: crfhead's
:class:`~crfhead.evaluation.metrics.TaggingMetrics` (seqeval, strict, micro), against the same gold.
Flair's predicted spans are re-encoded in BIOES and scored there; crfhead's figure is the
``test_report.json`` its ``train.py`` writes.

The two models, on each side:

* **BiLSTM-CRF**: a trainable, randomly initialised word embedding (100, every training word;
  Flair ``OneHotEmbeddings``) and a character BiLSTM (30-dim characters, 2 x 25 units; Flair
  ``CharacterEmbeddings`` over the training characters), a word BiLSTM of 200 units per direction,
  dropout 0.5 before and after it, a linear layer and a CRF. AdamW at 0.005 with a constant rate,
  batches of 32 (64 to evaluate, on both sides), gradient norm clipped at 5. crfhead:
  ``configs/wnut17/bilstm_crf.yaml`` with its character CNN swapped for the character BiLSTM Flair
  has (``--char-encoder cnn`` keeps the config's).
* **transformer-CRF**: the local all-MiniLM-L6-v2 folder crfhead uses by default
  (:func:`crfhead.encoders.default_model_dir`), fine-tuned, first sub-token of each word, dropout 0.1,
  a linear layer and a CRF; AdamW, 5e-5 on the transformer and 1e-3 on the rest, linear warm-up over
  10% of the steps then linear decay, batches of 32. crfhead: ``configs/wnut17/transformer_crf.yaml``;
  Flair: ``TransformerWordEmbeddings`` + ``SequenceTagger(use_rnn=False)`` trained with
  ``ModelTrainer.fine_tune(decoder_learning_rate=...)``.

Every training runs in its own subprocess (``--worker``), so each peak resident memory (its
``ru_maxrss``, read by the parent with ``os.wait4``) is that run's alone. Reported per run: test
span P / R / F1, epochs, fit wall time per epoch (training plus the per-epoch dev evaluation, on
both sides), training tokens per second of that time, test-set prediction time, and peak RSS.
Written as Markdown and JSON (``flair_compare.md`` / ``flair_compare.json`` in ``--out-dir``).

Flair 0.15 asks for ``transformers<5``; it runs on transformers 5 once the one name it imports that
transformers 5 dropped (``LayoutLMv2FeatureExtractor``, used only for LayoutLM models) is supplied,
which the Flair worker does before importing it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LIBRARIES = ("crfhead", "flair")
MODELS = ("bilstm_crf", "transformer_crf")
MODEL_NAMES = {"bilstm_crf": "BiLSTM-CRF", "transformer_crf": "transformer-CRF"}
SPLITS = ("train", "dev", "test")
FILES = {
    "train": "wnut17/wnut17train.conll",
    "dev": "wnut17/emerging.dev.conll",
    "test": "wnut17/emerging.test.annotated",
}
SCHEME = "BIOES"  # what both sides train in (crfhead's wnut17 configs; Flair's default tag_format)
TINY = {"train": 24, "dev": 8, "test": 8}  # sentences per split for --tiny

# The shared hyper-parameters (crfhead's wnut17 configs; Flair is set to match).
BILSTM = {
    "word_dim": 100,
    "char_dim": 30,
    "char_out": 50,
    "hidden_size": 200,
    "dropout": 0.5,
    "lr": 0.005,
    "batch_size": 32,
    "clip": 5.0,
}
TRANSFORMER = {
    "dropout": 0.1,
    "lr": 1e-3,
    "backbone_lr": 5e-5,
    "warmup": 0.1,
    "batch_size": 32,
    "clip": 5.0,
}
SEED = 0
EVAL_BATCH_SIZE = 64  # dev and test batches, both sides (Flair's default; crfhead's is 128)


# ----------------------------------------------------------------------------- data
def read_split(path: Path) -> list[Any]:
    """A WNUT 2017 file read by crfhead (BIO, repaired), its tags re-encoded in BIOES."""
    from crfhead.data.conll import read_conll

    sentences, _ = read_conll(path, scheme="BIO", out_scheme=SCHEME, separator="\t", warn=False)
    return sentences


def data_files(data_dir: Path | None) -> dict[str, Path]:
    from crfhead.data.paths import data_dir as default_data_dir

    if data_dir is not None:
        return {split: data_dir / Path(name).name for split, name in FILES.items()}
    return {split: default_data_dir() / name for split, name in FILES.items()}


def first_sentences(path: Path, n: int) -> str:
    """The first ``n`` sentences of a column file, as written (WNUT's blank lines hold a tab)."""
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        lines.append(line)
        if not line.strip() and any(x.strip() for x in lines):
            n -= 1
            if n == 0:
                break
    return "\n".join(lines) + "\n"


def prepare_data(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The three files both sides train on (``--tiny``: the first sentences of each, rewritten)."""
    files = data_files(args.data_dir)
    for split, path in files.items():
        if not path.is_file():
            raise SystemExit(f"flair_compare: {split} file not found: {path} (set CRFHEAD_DATA)")
    if args.tiny:
        tiny_dir = work / "data"
        tiny_dir.mkdir(parents=True, exist_ok=True)
        for split, path in files.items():
            out = tiny_dir / path.name
            out.write_text(first_sentences(path, TINY[split]), encoding="utf-8")
            files[split] = out
    counts = {}
    for split, path in files.items():
        sentences = read_split(path)
        counts[split] = {"sentences": len(sentences), "tokens": sum(len(s) for s in sentences)}
    return {"files": {k: str(v) for k, v in files.items()}, "counts": counts}


def score(
    gold: list[list[str]], pred: list[list[str]], tokens: list[list[str]]
) -> dict[str, float]:
    """crfhead's scorer: seqeval strict micro span P / R / F1 in BIOES."""
    from crfhead.evaluation.metrics import TaggingMetrics

    metrics = TaggingMetrics(SCHEME)
    metrics.update(gold, pred, tokens)
    out = metrics.compute()
    return {k: float(out[k]) for k in ("precision", "recall", "f1", "accuracy")}


# ----------------------------------------------------------------------------- workers
def _threads(spec: dict[str, Any]) -> None:
    import torch

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))


def worker_crfhead(spec: dict[str, Any]) -> dict[str, Any]:
    """Train through ``train.py``'s command line (:func:`crfhead.training.cli.main`), in process."""
    _threads(spec)
    import torch
    from pytorch_lightning import Trainer

    from crfhead.training.cli import main

    model, files, epochs = spec["model"], spec["files"], spec["epochs"]
    run_dir = Path(spec["run_dir"])
    report_dir = run_dir / "report"
    argv = [
        "--config",
        str(ROOT / "configs" / "wnut17" / f"{model}.yaml"),
        f"--trainer.max_epochs={epochs}",
        "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false",
        f"--trainer.logger.init_args.save_dir={run_dir / 'runs'}",
        f"--data.corpus.init_args.train={files['train']}",
        f"--data.corpus.init_args.dev={files['dev']}",
        f"--data.corpus.init_args.test={files['test']}",
        f"--model.report_dir={report_dir}",
        f"--data.eval_batch_size={EVAL_BATCH_SIZE}",
    ]
    if model == "bilstm_crf" and spec["char_encoder"] == "lstm":
        argv.append("--model.encoder.init_args.char_encoder=lstm")
    timings: dict[str, float] = {}
    fit, test = Trainer.fit, Trainer.test

    def timed_fit(self: Trainer, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        out = fit(self, *a, **k)
        timings["fit_seconds"] = time.perf_counter() - start
        timings["epochs_run"] = int(self.current_epoch)
        return out

    def timed_test(self: Trainer, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        out = test(self, *a, **k)
        timings["test_seconds"] = time.perf_counter() - start
        return out

    Trainer.fit, Trainer.test = timed_fit, timed_test  # type: ignore[method-assign]
    try:
        main(argv)
    finally:
        Trainer.fit, Trainer.test = fit, test  # type: ignore[method-assign]
    report = json.loads((report_dir / "test_report.json").read_text(encoding="utf-8"))
    metrics = report.get("metrics", report)
    return {
        "test_f1": float(metrics["f1"]),
        "test_precision": float(metrics["precision"]),
        "test_recall": float(metrics["recall"]),
        "threads": torch.get_num_threads(),
        "command": "python train.py " + " ".join(argv),
        **timings,
    }


def _flair_compat() -> None:
    """Flair 0.15 imports ``LayoutLMv2FeatureExtractor``, which transformers 5 removed."""
    import transformers

    try:
        transformers.LayoutLMv2FeatureExtractor  # noqa: B018
    except (AttributeError, ImportError):

        class LayoutLMv2FeatureExtractor:  # a stand-in: only LayoutLM models would build one
            pass

        transformers.LayoutLMv2FeatureExtractor = LayoutLMv2FeatureExtractor


def _flair_sentences(sentences: list[Any]) -> list[Any]:
    from flair.data import Sentence

    from crfhead.schemes import tags_to_spans

    out = []
    for s in sentences:
        fs = Sentence(list(s.tokens))
        for span in tags_to_spans(s.tags, SCHEME):
            fs[span.start : span.end + 1].add_label("ner", span.label)
        out.append(fs)
    return out


def _flair_tags(sentence: Any, label_name: str) -> list[str]:
    from crfhead.schemes import Span, spans_to_tags

    index = {id(token): i for i, token in enumerate(sentence.tokens)}
    spans = []
    for span in sentence.get_spans(label_name):
        start, end = index[id(span.tokens[0])], index[id(span.tokens[-1])]
        spans.append(Span(span.get_label(label_name).value, start, end))
    return spans_to_tags(spans, len(sentence), SCHEME)


def worker_flair(spec: dict[str, Any]) -> dict[str, Any]:
    """Train Flair's SequenceTagger (CRF on) with the settings matched to crfhead's config."""
    _threads(spec)
    _flair_compat()
    import flair
    import torch
    from flair.data import Corpus, Dictionary
    from flair.datasets import FlairDatapointDataset
    from flair.embeddings import (
        CharacterEmbeddings,
        OneHotEmbeddings,
        StackedEmbeddings,
        TransformerWordEmbeddings,
    )
    from flair.models import SequenceTagger
    from flair.trainers import ModelTrainer

    flair.device = torch.device("cpu")
    flair.set_seed(SEED)
    model, epochs = spec["model"], spec["epochs"]
    run_dir = Path(spec["run_dir"])
    splits = {split: read_split(Path(path)) for split, path in spec["files"].items()}
    train, dev = _flair_sentences(splits["train"]), _flair_sentences(splits["dev"])
    # No test split in the corpus: Flair would evaluate on it inside train(), in the timed part.
    corpus = Corpus(
        train=FlairDatapointDataset(train),
        dev=FlairDatapointDataset(dev),
        test=None,
        sample_missing_splits=False,
    )
    labels = corpus.make_label_dictionary(label_type="ner", add_unk=False)
    trainer_kw: dict[str, Any] = {
        "base_path": str(run_dir / "flair"),
        "max_epochs": epochs,
        "mini_batch_size": BILSTM["batch_size"],
        "eval_batch_size": EVAL_BATCH_SIZE,
        "max_grad_norm": BILSTM["clip"],
        "optimizer": torch.optim.AdamW,
        "embeddings_storage_mode": "none",
        "use_final_model_for_eval": False,  # keep the best dev epoch, as crfhead does
        "shuffle": True,
    }
    if model == "bilstm_crf":
        chars = Dictionary(add_unk=True)
        for s in splits["train"]:
            for word in s.tokens:
                for c in word:
                    chars.add_item(c)
        embeddings = StackedEmbeddings(
            [
                OneHotEmbeddings.from_corpus(
                    corpus, min_freq=1, embedding_length=BILSTM["word_dim"]
                ),
                CharacterEmbeddings(
                    path_to_char_dict=chars,
                    char_embedding_dim=BILSTM["char_dim"],
                    hidden_size_char=BILSTM["char_out"] // 2,
                ),
            ]
        )
        tagger = SequenceTagger(
            embeddings=embeddings,
            tag_dictionary=labels,
            tag_type="ner",
            tag_format=SCHEME,
            use_crf=True,
            use_rnn=True,
            hidden_size=BILSTM["hidden_size"],
            reproject_embeddings=False,
            dropout=BILSTM["dropout"],
            word_dropout=0.0,
            locked_dropout=0.0,
        )
        trainer = ModelTrainer(tagger, corpus)
        train_call = trainer.train
        trainer_kw.update(learning_rate=BILSTM["lr"], attach_default_scheduler=False)
    else:
        from crfhead.encoders import default_model_dir

        embeddings = TransformerWordEmbeddings(
            model=default_model_dir(),
            layers="-1",
            subtoken_pooling="first",
            fine_tune=True,
            use_context=False,
            use_context_separator=False,  # no [FLERT] token: no context is used
            # transformers 5 makes LayoutLMTokenizer an alias of BertTokenizer, so Flair would
            # take MiniLM for a LayoutLM model that needs OCR boxes.
            needs_manual_ocr=False,
            allow_long_sentences=True,
        )
        tagger = SequenceTagger(
            embeddings=embeddings,
            tag_dictionary=labels,
            tag_type="ner",
            tag_format=SCHEME,
            use_crf=True,
            use_rnn=False,
            reproject_embeddings=False,
            dropout=TRANSFORMER["dropout"],
            word_dropout=0.0,
            locked_dropout=0.0,
        )
        trainer = ModelTrainer(tagger, corpus)
        train_call = trainer.fine_tune
        trainer_kw.update(
            learning_rate=TRANSFORMER["backbone_lr"],
            decoder_learning_rate=TRANSFORMER["lr"],
            warmup_fraction=TRANSFORMER["warmup"],
            mini_batch_size=TRANSFORMER["batch_size"],
            max_grad_norm=TRANSFORMER["clip"],
        )
    epochs_run = {"n": 0}

    # Epochs actually trained, counted from Flair's own per-epoch event.
    from flair.trainers.plugins import TrainerPlugin

    class _Count(TrainerPlugin):
        @TrainerPlugin.hook
        def after_training_epoch(self, epoch: int, **kw: Any) -> None:
            epochs_run["n"] += 1

    trainer_kw["plugins"] = [_Count()]
    start = time.perf_counter()
    train_call(**trainer_kw)
    fit_seconds = time.perf_counter() - start
    best = tagger  # the best dev epoch's weights (best-model.pt), loaded back by Flair

    test = _flair_sentences(splits["test"])
    start = time.perf_counter()
    best.predict(
        test, mini_batch_size=EVAL_BATCH_SIZE, label_name="predicted", embedding_storage_mode="none"
    )
    test_seconds = time.perf_counter() - start
    gold = [list(s.tags) for s in splits["test"]]
    pred = [_flair_tags(s, "predicted") for s in test]
    result = score(gold, pred, [list(s.tokens) for s in splits["test"]])
    return {
        "test_f1": result["f1"],
        "test_precision": result["precision"],
        "test_recall": result["recall"],
        "threads": torch.get_num_threads(),
        "fit_seconds": fit_seconds,
        "epochs_run": epochs_run["n"],
        "test_seconds": test_seconds,
        "flair_version": flair.__version__,
    }


# ----------------------------------------------------------------------------- the parent
def run_worker(library: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """One training in its own subprocess; its peak RSS is read with ``os.wait4``."""
    run_dir = work / f"{library}_{spec['model']}"
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "run_dir": str(run_dir)}
    spec_path, result_path = run_dir / "spec.json", run_dir / "result.json"
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    log_path = run_dir / "log.txt"
    env = {**os.environ, "FLAIR_CACHE_ROOT": str(work / "flair_cache"), "PYTHONUNBUFFERED": "1"}
    if spec.get("threads"):
        env["OMP_NUM_THREADS"] = str(spec["threads"])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", library, str(spec_path)]
    print(
        f"[{time.strftime('%H:%M:%S')}] {library} {spec['model']}: {spec['epochs']} epoch(s), log {log_path}",
        flush=True,
    )
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not result_path.is_file():
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(
            f"flair_compare: {library} {spec['model']} failed (exit {proc.returncode}):\n{tail}"
        )
    result = json.loads(result_path.read_text(encoding="utf-8"))
    rss_kib = usage.ru_maxrss if platform.system() != "Darwin" else usage.ru_maxrss / 1024
    epochs_run = max(int(result.get("epochs_run") or spec["epochs"]), 1)
    tokens = spec["train_tokens"]
    result.update(
        library=library,
        model=spec["model"],
        epochs=spec["epochs"],
        epochs_run=epochs_run,
        seconds_per_epoch=result["fit_seconds"] / epochs_run,
        train_tokens_per_second=tokens * epochs_run / result["fit_seconds"],
        peak_rss_mib=rss_kib / 1024,
        process_seconds=wall,
    )
    print(
        f"    test F1 {result['test_f1']:.4f}, {result['seconds_per_epoch']:.1f} s/epoch, "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB",
        flush=True,
    )
    return result


def settings_text(model: str, library: str, char_encoder: str) -> str:
    if model == "bilstm_crf":
        chars = (
            "char BiLSTM 2x25" if char_encoder == "lstm" or library == "flair" else "char CNN 50"
        )
        words = "OneHotEmbeddings(100)" if library == "flair" else "word emb 100"
        return f"{words} + {chars}, BiLSTM 2x200, dropout 0.5, AdamW 5e-3, batch 32"
    return "MiniLM-L6 first sub-token, dropout 0.1, AdamW 5e-5 / 1e-3, warm-up 10 %, batch 32"


def epochs_note(report: dict[str, Any]) -> list[str]:
    """The epochs line: a budget, not convergence (said wherever the table is shown)."""
    epochs = report.get("epochs") or {}
    if report["tiny"] or not epochs:
        return []
    parts = []
    for m, n in epochs.items():
        counts = sorted(set(n), reverse=True) if isinstance(n, list) else [n]
        parts.append(f"{MODEL_NAMES[m]} {' / '.join(map(str, counts))} epoch(s)")
    return [
        f"Epochs (the table's column): {', '.join(parts)}, capped by a CPU budget (2 shared "
        "cores): neither model is trained to convergence, so these F1s are early-training figures "
        "to compare the two libraries with each other, not either library's best on WNUT 2017.",
        "",
    ]


def markdown(report: dict[str, Any]) -> str:
    data = report["data"]["counts"]
    lines = [
        "# crfhead vs Flair on WNUT 2017"
        + (" (tiny smoke run)" if report["tiny"] else "")
        + ("" if report["complete"] else " (partial: the runs finished so far)"),
        "",
        ("The first sentences of the official splits" if report["tiny"] else "Official splits")
        + f": train {data['train']['sentences']} sentences / {data['train']['tokens']} tokens, "
        f"dev {data['dev']['sentences']}, test {data['test']['sentences']} "
        f"({data['test']['tokens']} tokens). Test span F1: seqeval strict micro (BIOES), the same "
        "scorer (crfhead's `TaggingMetrics`) and the same gold for both libraries; the epoch with "
        "the best dev F1 is kept on both sides. CPU only, "
        f"{report['threads']} torch thread(s), on a shared machine (timings are indicative).",
        "",
        *epochs_note(report),
        *([report["note"], ""] if report.get("note") else []),
        "| model | library | epochs | test P | test R | test F1 | s / epoch | train tokens / s "
        "| test predict s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {MODEL_NAMES[r['model']]} | {r['library']} | {r['epochs_run']} "
            f"| {r['test_precision']:.3f} | {r['test_recall']:.3f} | **{r['test_f1']:.3f}** "
            f"| {r['seconds_per_epoch']:.1f} | {r['train_tokens_per_second']:.0f} "
            f"| {r['test_seconds']:.1f} | {r['peak_rss_mib']:.0f} |"
        )
    lines += [
        "",
        "s / epoch: fit wall time / epochs, training plus the per-epoch dev evaluation (and, in "
        "crfhead, checkpointing) on both sides; train tokens / s: training tokens x epochs / fit "
        "time; peak RSS: the training subprocess's `ru_maxrss` (imports, data, model, test pass).",
        "",
        "Settings:",
        "",
    ]
    for r in report["runs"]:
        lines.append(f"- {MODEL_NAMES[r['model']]}, {r['library']}: {r['settings']}")
    lines += [
        "",
        "What differs: the CRF of crfhead is constrained to valid BIOES transitions (training and "
        "decoding), Flair's is not (its spans are read leniently from the tags); crfhead applies "
        "dropout to the character embeddings too; Flair's one-hot vocabulary adds `<unk>` and its "
        "character dictionary `<unk>`; the sub-token windowing of long sentences differs (WNUT "
        "tweets fit in one window on both sides); batches are shuffled by each library's own RNG.",
        "",
        f"Command: `{report['command']}`",
        "",
    ]
    return "\n".join(lines)


def render(paths: list[Path], out_dir: Path, note: str | None = None) -> dict[str, Any]:
    """Merge reports (their runs, in order) and write the Markdown and JSON again."""
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    report = dict(reports[0])
    for other in reports[1:]:
        if other["data"] != report["data"] or other["tiny"] != report["tiny"]:
            raise SystemExit(f"flair_compare: --render: {paths[0]} and the others used other data")
    report["runs"] = [run for r in reports for run in r["runs"]]
    epochs: dict[str, list[int]] = {}
    for run in report["runs"]:
        epochs.setdefault(run["model"], []).append(run["epochs"])
    report["epochs"] = {m: n[0] if len(set(n)) == 1 else n for m, n in epochs.items()}
    if note:
        report["note"] = note
    report["complete"] = all(r.get("complete", True) for r in reports)
    if len(reports) > 1:
        report["command"] = " ; ".join(r["command"] for r in reports)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "flair_compare.json").write_text(
        json.dumps(report, indent=2) + "\n", encoding="utf-8"
    )
    (out_dir / "flair_compare.md").write_text(markdown(report), encoding="utf-8")
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--bilstm-epochs", type=int, default=5, help="epochs of the BiLSTM-CRF (both sides)"
    )
    p.add_argument(
        "--transformer-epochs", type=int, default=1, help="epochs of the transformer-CRF"
    )
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {MODELS}")
    p.add_argument("--only", choices=LIBRARIES, help="run one library only")
    p.add_argument("--tiny", action="store_true", help="a few sentences per split, 1 epoch each")
    p.add_argument(
        "--char-encoder",
        choices=("lstm", "cnn"),
        default="lstm",
        help="crfhead's character encoder for the BiLSTM (lstm: Flair's; cnn: the config's)",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch threads per run (default: torch's)"
    )
    p.add_argument("--data-dir", type=Path, default=None, help="folder of the WNUT 2017 files")
    p.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    p.add_argument(
        "--work-dir", type=Path, default=None, help="runs and logs (default: a temp folder)"
    )
    p.add_argument(
        "--render",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="train nothing: write flair_compare.{md,json} to --out-dir from reports written "
        "before (several: their runs merged, in order, e.g. one invocation per model)",
    )
    p.add_argument("--note", help="with --render: a paragraph on how the runs were made")
    p.add_argument("--worker", nargs=2, metavar=("LIBRARY", "SPEC"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS]
    if bad or not models:
        p.error(f"--models: unknown {bad}; choose from {MODELS}")
    args.models = models
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.worker:
        library, spec_path = args.worker
        spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
        result = (worker_crfhead if library == "crfhead" else worker_flair)(spec)
        Path(spec["run_dir"], "result.json").write_text(
            json.dumps(result, indent=2), encoding="utf-8"
        )
        return result
    if args.render:
        return render(args.render, args.out_dir, args.note)
    libraries = [args.only] if args.only else list(LIBRARIES)
    if "flair" in libraries:
        import importlib.util

        if importlib.util.find_spec("flair") is None:
            raise SystemExit(
                "flair_compare: flair is not installed (pip install -e '.[bench]'), or pass --only crfhead"
            )
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="flair-compare-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    data = prepare_data(args, work)
    epochs = {"bilstm_crf": args.bilstm_epochs, "transformer_crf": args.transformer_epochs}
    if args.tiny:
        epochs = dict.fromkeys(MODELS, 1)
    runs = []
    for model in args.models:
        for library in libraries:
            spec = {
                "model": model,
                "epochs": epochs[model],
                "files": data["files"],
                "train_tokens": data["counts"]["train"]["tokens"],
                "threads": args.threads,
                "char_encoder": args.char_encoder,
            }
            result = run_worker(library, spec, work)
            result["settings"] = settings_text(model, library, args.char_encoder)
            runs.append(result)
            write_report(args, data, runs, argv, final=False)  # what finished, after every run
    return write_report(args, data, runs, argv, final=True)


def write_report(
    args: argparse.Namespace,
    data: dict[str, Any],
    runs: list[dict[str, Any]],
    argv: list[str] | None,
    final: bool,
) -> dict[str, Any]:
    import torch

    report = {
        "corpus": "wnut17",
        "tiny": bool(args.tiny),
        "scheme": SCHEME,
        "metric": "seqeval strict micro span F1 (crfhead.evaluation.metrics.TaggingMetrics)",
        "data": data,
        "threads": runs[0]["threads"] if runs else torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "command": "python scripts/flair_compare.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "epochs": {
            m: args.transformer_epochs if m == "transformer_crf" else args.bilstm_epochs
            for m in args.models
        }
        if not args.tiny
        else dict.fromkeys(args.models, 1),
        "complete": final,
        "runs": runs,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "flair_compare.json").write_text(
        json.dumps(report, indent=2) + "\n", encoding="utf-8"
    )
    (args.out_dir / "flair_compare.md").write_text(markdown(report), encoding="utf-8")
    if final:
        print(f"wrote {args.out_dir / 'flair_compare.md'} and flair_compare.json", flush=True)
    return report


if __name__ == "__main__":
    main()

"""Benchmark ``crfhead export`` of the whole model: export time, file size, latency eager vs exported.

For each format (``.pt2``, ONNX) the model is exported with
:func:`crfhead.inference.export.export_model` (wall-clock and CPU seconds of this process, file size),
loaded back with :func:`~crfhead.inference.export.load_exported`, and the sentences of finance test
documents are tagged one at a time (per-sentence latency) and in batches of 64 (throughput), by the
eager ``TextTagger.annotate`` and by the export's ``annotate``, whose entities are checked equal;
and the program alone (``*_program``: collated tensors to tags, marginals and ``log Z``, no span
probabilities) is timed against the same computation run eagerly (``eager_program``).
``--decoder-lengths`` also times the ONNX export of the decoder alone
(:func:`~crfhead.inference.export.export_decoder`) with examples of those lengths: constant in
``T`` now that it decodes by scans (it grew by about 2 s per step while the portable backend's loop
over ``T`` was unrolled into the graph).

The model is ``--model`` (a checkpoint or saved folder); by default the README Quickstart's
(``configs/finance/indicator_crf.yaml``) trained into a temporary folder first (about a minute).

    .venv/bin/python scripts/bench_export.py --model runs/.../last.ckpt
    .venv/bin/python scripts/bench_export.py --model M --decoder-lengths 8 16 32
"""

from __future__ import annotations

import argparse
import glob
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _quickstart(folder: Path) -> Path:
    """Train the Quickstart model into ``folder``; its ``last.ckpt``."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        "--config",
        str(ROOT / "configs/finance/indicator_crf.yaml"),
        "--trainer.default_root_dir",
        str(folder),
        "--trainer.logger.init_args.save_dir",
        str(folder),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return Path(sorted(glob.glob(str(folder / "**/last.ckpt"), recursive=True))[0])


def _sentences(docs: int) -> list[list[str]]:
    from crfhead.data.corpora import FinanceCorpus
    from crfhead.data.datamodule import TaggingDataModule

    dm = TaggingDataModule(corpus=FinanceCorpus(train_docs=1, dev_docs=1, test_docs=docs))
    return [list(s.tokens) for s in dm.splits["test"] if s.tokens]


def _latency(tag: Any, sentences: list[list[str]], batch: int) -> tuple[float, list[Any]]:
    """Milliseconds per sentence, and the tagged sentences."""
    start = time.perf_counter()
    out = []
    for at in range(0, len(sentences), batch):
        out.extend(tag(sentences[at : at + batch], batch_size=batch))
    return 1000 * (time.perf_counter() - start) / len(sentences), out


def _program_latency(run: Any, batches: list[dict[str, Any]]) -> float:
    """Milliseconds per sentence of ``run`` (the program alone, no span probabilities)."""
    start = time.perf_counter()
    rows = 0
    for batch in batches:
        run(batch)
        rows += int(batch["mask"].shape[0])
    return 1000 * (time.perf_counter() - start) / rows


def _key(tagged: list[Any]) -> list[list[tuple[str, int, int, float]]]:
    return [
        [(e.label, e.start, e.end, round(e.probability or 0.0, 5)) for e in t.entities]
        for t in tagged
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; prints a table and returns the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="checkpoint or saved folder (default: train the Quickstart)"
    )
    parser.add_argument("--formats", nargs="+", default=["torch", "onnx"])
    parser.add_argument("--docs", type=int, default=20, help="finance test documents to tag")
    parser.add_argument("--decoder-lengths", type=int, nargs="*", default=[])
    parser.add_argument("--output-json", help="write the numbers here too")
    args = parser.parse_args(argv)

    import torch

    import crfhead
    from crfhead.inference.export import export_decoder, export_model, load_exported

    torch.set_num_threads(2)
    work = Path(tempfile.mkdtemp(prefix="bench_export_"))
    model = Path(args.model) if args.model else _quickstart(work / "quickstart")
    tagger = crfhead.load(model)
    sentences = _sentences(args.docs)
    results: dict[str, Any] = {
        "model": str(model),
        "sentences": len(sentences),
        "tokens": sum(map(len, sentences)),
        "threads": torch.get_num_threads(),
    }
    from crfhead import engine
    from crfhead.data.batching import Batch
    from crfhead.data.sentence import Sentence

    def tensors(rows: list[list[str]]) -> dict[str, Any]:
        b = tagger.collate([Sentence(r) for r in rows])
        return {"mask": b.mask, "words": b.words, "chars": b.chars, "features": b.features}

    def eager_program(given: dict[str, Any]) -> None:
        """What the exported program computes, eagerly: tags, marginals, log Z."""
        batch = Batch(tags=None, sentences=[], **given)
        with torch.inference_mode():
            pot = tagger.model.head.potentials(tagger.model(batch), batch.mask)
            tagger.model.head.predict_from(pot), engine.marginals(pot), engine.log_partition(pot)

    singles = [tensors([s]) for s in sentences]
    batches = [tensors(sentences[at : at + 64]) for at in range(0, len(sentences), 64)]
    results["eager_program"] = {
        "ms_per_sentence_b1": _program_latency(eager_program, singles),
        "ms_per_sentence_b64": _program_latency(eager_program, batches),
    }
    eager_one, eager = _latency(tagger.annotate, sentences, 1)
    eager_batch, _ = _latency(tagger.annotate, sentences, 64)
    results["eager"] = {"ms_per_sentence_b1": eager_one, "ms_per_sentence_b64": eager_batch}
    for fmt in args.formats:
        path = work / f"model.{'pt2' if fmt == 'torch' else 'onnx'}"
        wall, cpu = time.perf_counter(), _cpu()
        export_model(tagger, path, fmt=fmt)
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        wall_load = time.perf_counter()
        exported = load_exported(path)
        wall_load = time.perf_counter() - wall_load

        def program(given: dict[str, Any], m: Any = exported) -> None:
            m.run(**{k: v for k, v in given.items() if k in m.input_names})

        results[f"{fmt}_program"] = {
            "ms_per_sentence_b1": _program_latency(program, singles),
            "ms_per_sentence_b64": _program_latency(program, batches),
        }
        one, got = _latency(exported.annotate, sentences, 1)
        batch, _ = _latency(exported.annotate, sentences, 64)
        results[fmt] = {
            "export_s": wall,
            "export_cpu_s": cpu,
            "load_s": wall_load,
            "size_mb": path.stat().st_size / 2**20,
            "ms_per_sentence_b1": one,
            "ms_per_sentence_b64": batch,
            "same_entities": _key(got) == _key(eager),
        }
    for T in args.decoder_lengths:
        wall, cpu = time.perf_counter(), _cpu()
        export_decoder(tagger, work / f"decoder{T}.onnx", fmt="onnx", length=T)
        results[f"decoder_onnx_T{T}"] = {
            "export_s": time.perf_counter() - wall,
            "export_cpu_s": _cpu() - cpu,
        }
    print(json.dumps(results, indent=2))
    if args.output_json:
        Path(args.output_json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()

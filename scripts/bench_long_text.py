"""Benchmark TextTagger on long texts and long streams: time, peak memory, and how windows agree.

Cases (each in a fresh process, so that its peak resident memory is its own):

* ``long``: one raw text of ``--tokens`` tokens (default 20,000: synthetic finance documents, test
  run, joined into one text) tagged by ``tagger.tag(text)``, once with sentence splitting (the
  default) and once as one chain cut into windows (``split="none"``, ``max_length=512``); both
  are compared with the path of the whole text decoded as one chain (the path only);
* ``stream``: ``--stream-tokens`` tokens (default 1,000,000) of finance documents, one text per
  document, drawn lazily from a generator through ``tagger.iter_tag``; resident memory is sampled
  every tenth of the stream, so constant memory shows as a flat line.

The model is ``--model`` (a checkpoint or saved folder), by default the tiny indicator CRF the tests
train (``tests/helpers.train_tiny_finance``: 8 finance documents, 3 epochs, about 30 s), trained
into a temporary folder. Span probabilities come from ``crfhead.evaluation.spans`` as it is in the
checkout. Threads: ``--threads`` (default 2). Each time is wall-clock seconds and the process's CPU
seconds (``cpu_s``, user + system: on a shared machine, ``cpu_s / threads`` bounds what an idle one
would take).

    .venv/bin/python scripts/bench_long_text.py               # both cases, one JSON line each
    .venv/bin/python scripts/bench_long_text.py --case long   # one case (what the parent runs)

Measured 2026-12-02 on this 2-core machine shared with four other jobs (load average 6-9), the
tiny model as a saved folder (``--model``), 20,094-token text, 3,101 entities with sentences:

* span probabilities of ``crfhead/evaluation/spans.py`` as of a59072c (before issue 28's
  rewrite): sentences 8.2 s (3.2 CPU s); 512-token windows 17.6 s (7.2 CPU s); peak resident
  memory of the case 846 MiB (240 MiB before tagging). The 1,000,568-token stream (6,463
  documents) through ``iter_tag``: 331 s (165 CPU s, about 3,000 tokens/s), resident memory
  243.3, 243.8, 243.7, 243.0, 242.0, 243.6, 243.3, 243.8, 243.9, 243.9, 243.7 MiB at each tenth;
* as of 19024c0 (the linear rewrite): sentences 22.5 s (14.6 CPU s; with ``batch_size=256`` 4.7
  CPU s, 1024: 3.8 CPU s: the new span probabilities cost much more per call on small batches of
  short chains); windows 15.3 s (12.1 CPU s); peak 418 MiB.

Both: tags agree with the whole-chain path on 94.1 % of tokens with sentences (the model was
trained on sentences) and 99.98 % with windows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss_mib() -> float:
    """Current resident memory of this process, MiB (Linux ``/proc/self/statm``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _cpu_s() -> float:
    """CPU seconds this process has used (user + system): robust to other processes' load."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _documents(n: int) -> list[str]:
    from crfhead.data.finance.generator import generate_finance_documents

    return [" ".join(d.texts) for d in generate_finance_documents(1, n)]


def _long_text(tokens: int, tokenize: object) -> str:
    parts: list[str] = []
    count, n = 0, 50
    docs = _documents(n)
    for text in itertools.cycle(docs):
        parts.append(text)
        count += len(tokenize(text))  # type: ignore[operator]
        if count >= tokens:
            break
    return "\n\n".join(parts)


def case_long(tagger: object, tokens: int) -> dict[str, object]:
    import torch

    text = _long_text(tokens, tagger.tokenizer.tokenize)  # type: ignore[attr-defined]
    n = len(tagger.tokenizer.tokenize(text))  # type: ignore[attr-defined]
    tagger.tag(text[:2000])  # type: ignore[attr-defined]  # warm-up (kernels, allocator)
    base = _rss_mib()
    out: dict[str, object] = {"tokens": n, "rss_before_mib": round(base, 1)}
    for name, opts in [
        ("sentences", {}),
        ("windows_512", {"split": "none", "max_length": 512}),
    ]:
        t0, c0 = time.perf_counter(), _cpu_s()
        (tagged,) = tagger.annotate([text], **opts)  # type: ignore[attr-defined]
        out[f"{name}_s"] = round(time.perf_counter() - t0, 2)
        out[f"{name}_cpu_s"] = round(_cpu_s() - c0, 2)
        out[f"{name}_entities"] = len(tagged.entities)
        out[f"{name}_tags"] = tagged.tags
        assert all(text[e.start : e.end] == e.text for e in tagged.entities)
    # The reference: the whole text one chain, its path only (no span probabilities).
    from crfhead.data.sentence import Sentence

    t0 = time.perf_counter()
    batch = tagger.collate([Sentence([t.text for t in tagged.tokens])])  # type: ignore[attr-defined]
    with torch.inference_mode():
        (whole,) = tagger.model.predict(batch)  # type: ignore[attr-defined]
    out["whole_chain_path_s"] = round(time.perf_counter() - t0, 2)
    for name in ("sentences", "windows_512"):
        tags = out.pop(f"{name}_tags")
        out[f"{name}_agree_whole"] = round(
            sum(a == b for a, b in zip(tags, whole, strict=True)) / n,
            5,  # type: ignore[arg-type]
        )
    out["peak_mib"] = round(_peak_mib(), 1)
    return out


def case_stream(tagger: object, tokens: int) -> dict[str, object]:
    docs = _documents(200)
    sizes = [len(tagger.tokenizer.tokenize(d)) for d in docs]  # type: ignore[attr-defined]
    texts = len(docs) * tokens // sum(sizes) + 1

    def stream() -> Iterator[str]:
        for i in range(texts):
            yield docs[i % len(docs)]

    tagger.tag(docs[:4])  # type: ignore[attr-defined]
    samples: list[float] = []
    done_tokens = 0
    t0, c0 = time.perf_counter(), _cpu_s()
    for i, ents in enumerate(tagger.iter_tag(stream())):  # type: ignore[attr-defined]
        done_tokens += sizes[i % len(docs)]
        if i % max(texts // 10, 1) == 0:
            samples.append(round(_rss_mib(), 1))
        del ents
    seconds = time.perf_counter() - t0
    return {
        "texts": texts,
        "tokens": done_tokens,
        "seconds": round(seconds, 1),
        "cpu_s": round(_cpu_s() - c0, 1),
        "tokens_per_s": round(done_tokens / seconds),
        "rss_every_tenth_mib": samples,
        "peak_mib": round(_peak_mib(), 1),
    }


def _tagger(model: str | None, threads: int) -> object:
    import torch

    torch.set_num_threads(threads)
    import crfhead

    if model is None:
        sys.path.insert(0, str(ROOT / "tests"))
        sys.path.insert(0, str(ROOT))
        from helpers import train_tiny_finance  # type: ignore[import-not-found]

        folder = Path(tempfile.mkdtemp(prefix="bench_long_text_"))
        model = str(crfhead.load(train_tiny_finance(folder)).save(folder / "saved"))
        print(f"trained the tiny model: {model}", file=sys.stderr)
    return crfhead.load(model)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=["long", "stream"], help="run one case in this process")
    ap.add_argument("--model", help="a checkpoint or saved folder (default: train the tiny one)")
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--stream-tokens", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ns = ap.parse_args(argv)
    if ns.case is not None:
        tagger = _tagger(ns.model, ns.threads)
        result = (
            case_long(tagger, ns.tokens)
            if ns.case == "long"
            else case_stream(tagger, ns.stream_tokens)
        )
        print(json.dumps(result))
        return
    model = ns.model
    if model is None:  # train once, for both cases
        import crfhead

        sys.path.insert(0, str(ROOT / "tests"))
        sys.path.insert(0, str(ROOT))
        from helpers import train_tiny_finance

        folder = Path(tempfile.mkdtemp(prefix="bench_long_text_"))
        model = str(crfhead.load(train_tiny_finance(folder)).save(folder / "saved"))
    results = {}
    for case in ("long", "stream"):
        cmd = [sys.executable, __file__, "--case", case, "--model", model]
        cmd += ["--tokens", str(ns.tokens), "--stream-tokens", str(ns.stream_tokens)]
        cmd += ["--threads", str(ns.threads)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results[case] = json.loads(run.stdout.strip().splitlines()[-1])
        print(case, json.dumps(results[case]), flush=True)


if __name__ == "__main__":
    main()

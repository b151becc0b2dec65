"""Tag text with a saved model: ``python predict.py --checkpoint runs/.../last.ckpt --input FILE``.

Input: a CoNLL file (``--input-format conll``; the first column is the token) or plain text, one
sentence per line, split on whitespace (``--input-format text``, e.g. tweets). Output (stdout or
``--output``): CoNLL lines ``token tag`` or JSON lines with the tokens, tags and every entity span
with its exact probability under the CRF (:func:`crfhead.evaluation.spans.decode_with_confidence`), not a softmax
of scores.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from crfhead.data.conll import read_conll
from crfhead.data.datamodule import collator_for
from crfhead.data.sentence import Sentence
from crfhead.evaluation.spans import decode_with_confidence
from crfhead.training.module import TaggerModule


def read_input(path: Path, fmt: str) -> list[Sentence]:
    """Sentences to tag."""
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    if fmt == "conll":
        sentences, _ = read_conll(path, tag_col=None, warn=False)
        return sentences
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n").replace("\r", "\n")
    return [
        Sentence(line.split(), id=f"{path.name}:{i}")
        for i, line in enumerate(text.split("\n"), 1)
        if line.split()
    ]


def tag(
    model: TaggerModule, sentences: list[Sentence], batch_size: int = 64
) -> Iterator[dict[str, object]]:
    """One record per sentence: tokens, tags, spans with probabilities."""
    vocabs = model.hparams["vocabs"]
    collate = collator_for(vocabs, model.tagger.needs)
    labels = model.tagger.labels
    for i in range(0, len(sentences), batch_size):
        batch = collate(sentences[i : i + batch_size])
        with torch.inference_mode():
            emissions = model.tagger(batch)
            mask = batch.mask.to(emissions.device)
            decoded = decode_with_confidence(
                model.tagger.head, emissions, mask, labels.labels, labels.scheme
            )
            tags = model.tagger.head.decode_labels(emissions, mask)
        for sentence, row_tags, spans in zip(batch.sentences, tags, decoded, strict=True):
            yield {
                "id": sentence.id,
                "tokens": sentence.tokens,
                "tags": row_tags,
                "spans": [
                    {
                        "type": span.label,
                        "start": span.start,
                        "end": span.end,
                        "text": " ".join(sentence.tokens[span.start : span.end + 1]),
                        "probability": round(p, 6),
                    }
                    for span, p in spans
                ],
            }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--input", required=True, type=Path)
    parser.add_argument("--input-format", choices=["conll", "text"], default="text")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--output-format", choices=["conll", "jsonl"], default="jsonl")
    args = parser.parse_args(argv)
    if not args.checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint not found: {args.checkpoint}")
    model = TaggerModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    out = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    try:
        for record in tag(model, read_input(args.input, args.input_format)):
            if args.output_format == "jsonl":
                out.write(json.dumps(record) + "\n")
            else:
                tokens, tags = record["tokens"], record["tags"]
                assert isinstance(tokens, list) and isinstance(tags, list)
                out.write("".join(f"{w} {t}\n" for w, t in zip(tokens, tags, strict=True)) + "\n")
    finally:
        if args.output:
            out.close()


if __name__ == "__main__":
    main()

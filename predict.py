"""Tag text with a saved model: ``python predict.py --checkpoint runs/.../last.ckpt --input FILE``.

Input: a CoNLL file (``--input-format conll``; the first column is the token) or plain text, one
sentence per line, split on whitespace (``--input-format text``, e.g. tweets). Output (stdout or
``--output``): CoNLL lines ``token tag`` or JSON lines with the tokens, tags and every entity span
with its exact probability under the CRF (:func:`crfhead.evaluation.spans.decode_with_confidence`), not a softmax
of scores.

Both input formats are read through :func:`crfhead.data.textfile.read_lines`, as training data is: a
UTF-8 byte-order mark is dropped (it would otherwise be part of the first token), bytes that are
not UTF-8 name the file and line. A CoNLL input is read without a tag column (``tag_col=None``): a
file of tokens alone is the usual input, and a labelled file's tags are ignored; a ``-DOCSTART-``
inside a sentence is warned about (it splits the sentence there).
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
from crfhead.data.textfile import read_lines
from crfhead.evaluation.spans import decode_with_confidence
from crfhead.schemes import repair_tags
from crfhead.training.checkpoints import read_checkpoint
from crfhead.training.module import TaggerModule

__all__ = ["main", "read_input", "tag"]


def read_input(path: Path, fmt: str) -> list[Sentence]:
    """Sentences to tag: ``fmt`` is ``"conll"`` (first column the token) or ``"text"``.

    Raises:
        FileNotFoundError: the file does not exist.
        TextEncodingError: the file is not UTF-8 (a :class:`ValueError` naming file and line).
        CoNLLFormatError: a CoNLL line whose column count differs from the first line's.
    """
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    if fmt == "conll":
        # warn=True: with no tags nothing is repaired, so what it reports is what changes the
        # output's sentences (a -DOCSTART- splitting one, empty sentences skipped).
        sentences, _ = read_conll(path, tag_col=None, warn=True)
        return sentences
    return [
        Sentence(line.split(), id=f"{path.name}:{i}")
        for i, line in enumerate(read_lines(path), 1)
        if line.split()
    ]


def _check_output(
    sentence: Sentence, tags: list[str], spans: list[tuple[object, float]], scheme: str | None
) -> None:
    """Refuse output that only broken weights produce: tags the scheme forbids, probabilities not in [0, 1].

    Raises:
        ValueError: naming the sentence and what is wrong.
    """
    name = sentence.id or " ".join(sentence.tokens)[:80]
    if scheme is not None and repair_tags(tags, scheme)[1]:
        raise ValueError(
            f"the model decoded tags that break the {scheme} scheme for sentence {name!r}: "
            f"{tags[:20]}; its weights exceed the constraint penalty or are corrupt"
        )
    bad = [p for _, p in spans if not 0.0 <= p <= 1.0 + 1e-6]  # NaN fails both comparisons
    if bad:
        raise ValueError(
            f"the model gave span probabilities {bad[:5]} (not in [0, 1]) for sentence {name!r}: "
            "its weights are corrupt"
        )


def tag(
    model: TaggerModule, sentences: list[Sentence], batch_size: int = 64
) -> Iterator[dict[str, object]]:
    """One record per sentence: tokens, tags, spans with probabilities.

    Raises:
        ValueError: decoded tags the model's scheme forbids, or a probability outside [0, 1].
    """
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
            _check_output(sentence, row_tags, spans, labels.scheme)
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
    read_checkpoint(
        args.checkpoint
    )  # one clear line for a missing, empty, truncated or foreign file
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

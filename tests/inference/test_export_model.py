"""The whole model exported (encoder + head, ``.pt2`` and ONNX) and run in a fresh process.

Oracle: the eager model on the same batch (``TextTagger.collate``): tags exactly, marginals and
``log Z`` to ``1e-5``, and ``ExportedTagger.tag`` against ``TextTagger.tag`` (same entities, span
probabilities to ``1e-5``). Each export is loaded in a new Python process through
``load_exported`` alone, at two lengths other than the export example's (``T = 3``), with batches of
one and of several sentences of different lengths. The models are untrained, with random weights
(seconds to build): the indicator CRF (the Quickstart's architecture), a BiLSTM CRF with a
character CNN, and a MEMM (per-edge transitions; its ONNX program is checked run eagerly). One
export runs in the default suite, the other formats and encoders under ``--full`` (``slow``).

The transformer encoder is not exported: its forward tokenises ``batch.sentences`` into subword
windows in Python (``SubwordAligner``), so a program would need the encoder to take subword ids and
the word alignment as tensors; :func:`input_names` refuses it with a message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from crfhead import engine
from crfhead.cli.main import main
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.engine.potentials import make_potentials
from crfhead.inference import TextTagger
from crfhead.inference.export import export_decoder, export_model, load_exported
from crfhead.inference.export_graph import ModelProgram, input_names, scan_decode
from crfhead.model.tagger import Tagger

TEXTS = [
    '"We launched the gruler platform in march and early orders have been firm," said aiko ridora.',
    "said aiko ridora",
    "Solenne Power guided to growth in the first quarter, said CEO Mara Voss of Gruler Corp "
    "and the board of Ridora Holdings agreed on the plan for the next year in london",
    "",
]
MAX_LENGTH = 40

BILSTM = {
    "class_path": "crfhead.encoders.BiLSTMEncoder",
    "init_args": {"word_dim": 8, "char_dim": 4, "char_out": 6, "hidden_size": 5, "num_layers": 2},
}


@pytest.fixture(scope="module")
def vocabs() -> dict[str, Any]:
    return TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=1, test_docs=1)).vocabs


def _tagger(vocabs: dict[str, Any], encoder: dict[str, Any] | None, head: str) -> TextTagger:
    torch.manual_seed(0)
    model = Tagger.build(vocabs, encoder=encoder, head={"class_path": head})
    with torch.no_grad():  # sharp random scores: entities of every probability
        for p in model.parameters():
            p.normal_(0.0, 1.5)
    return TextTagger(model, vocabs, {})


@pytest.fixture(scope="module")
def taggers(vocabs: dict[str, Any]) -> dict[str, TextTagger]:
    return {
        "indicator": _tagger(vocabs, None, "crfhead.heads.CRF"),
        "bilstm": _tagger(vocabs, BILSTM, "crfhead.heads.CRF"),
        "memm": _tagger(vocabs, None, "crfhead.heads.MEMM"),
        "charlstm": _tagger(
            vocabs,
            {
                "class_path": BILSTM["class_path"],
                "init_args": {**BILSTM["init_args"], "char_encoder": "lstm"},  # type: ignore[dict-item]
            },
            "crfhead.heads.CRF",
        ),
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exports")


def _exported(taggers: dict[str, TextTagger], folder: Path, model: str, fmt: str) -> Path:
    """``model`` exported as ``fmt`` with :data:`MAX_LENGTH` (once per module)."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    path = folder / f"{model}.{'pt2' if fmt == 'torch' else 'onnx'}"
    if not path.exists():
        meta = export_model(taggers[model], path, max_length=MAX_LENGTH)
        assert meta["format"] == fmt
    return path


def _batches(tagger: TextTagger) -> list[dict[str, torch.Tensor]]:
    """Two batches of lengths other than the example's: one sentence (T = 7), three (T = 32)."""
    toks = [[t.text for t in tagger.tokenizer.tokenize(text)] for text in TEXTS[:3]]  # type: ignore[union-attr]
    out = []
    for sentences in ([toks[0][:7]], toks[:3]):
        batch = tagger.collate([Sentence(s) for s in sentences])
        out.append(
            {
                "mask": batch.mask,
                "words": batch.words,
                "chars": batch.chars,
                "features": batch.features,
            }
        )
    assert [b["mask"].shape for b in out] == [(1, 7), (3, 32)]
    return out


def _eager(tagger: TextTagger, given: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The eager model's tags, marginals and log Z on a batch's tensors (the oracle)."""
    from crfhead.data.batching import Batch

    batch = Batch(
        mask=given["mask"],
        words=given["words"],
        chars=given["chars"],
        features=given["features"],
        tags=None,
        sentences=[],
    )
    with torch.no_grad():
        head = tagger.model.head
        pot = head.potentials(tagger.model(batch), batch.mask)
        return {
            "tags": head.predict_from(pot),
            "marginals": engine.marginals(pot),
            "log_z": engine.log_partition(pot),
        }


FRESH = textwrap.dedent(
    """
    import json, sys, torch
    from crfhead.inference.export import load_exported
    path, inputs, out = sys.argv[1:4]
    m = load_exported(path)
    runs = [m.run(**{k: v for k, v in b.items() if k in m.input_names})
            for b in torch.load(inputs)]
    texts = json.loads(sys.argv[4])
    tagged = [[[e.label, e.start, e.end, e.text, e.probability] for e in ents]
              for ents in m.tag(texts)]
    try:
        m.run(**{k: torch.ones(1, m.max_length + 1, *v.shape[2:], dtype=v.dtype)
                 for k, v in torch.load(inputs)[0].items() if k in m.input_names})
        refused = None
    except ValueError as err:
        refused = str(err)
    torch.save({"runs": runs, "tagged": tagged, "refused": refused}, out)
    """
)


def _fresh(path: Path, tagger: TextTagger, tmp: Path) -> dict[str, Any]:
    """Load ``path`` in a new Python process and run it on :func:`_batches` and :data:`TEXTS`."""
    inputs, out = tmp / f"{path.name}.in.pt", tmp / f"{path.name}.out.pt"
    torch.save(_batches(tagger), inputs)
    cmd = [sys.executable, "-c", FRESH, str(path), str(inputs), str(out), json.dumps(TEXTS)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = torch.load(out)
    return got


def _check_same_as_eager(tagger: TextTagger, got: dict[str, Any]) -> None:
    for given, run in zip(_batches(tagger), got["runs"], strict=True):
        want = _eager(tagger, given)
        assert torch.equal(run["tags"], want["tags"])
        mask = given["mask"]
        assert bool((run["tags"][~mask] == -1).all()) and bool((run["marginals"][~mask] == 0).all())
        torch.testing.assert_close(run["marginals"], want["marginals"], atol=1e-5, rtol=0)
        torch.testing.assert_close(run["log_z"], want["log_z"], atol=1e-5, rtol=1e-6)
    eager = [
        [[e.label, e.start, e.end, e.text, e.probability] for e in ents]
        for ents in tagger.tag(TEXTS)
    ]
    assert sum(len(ents) for ents in eager) >= 3  # the comparison sees entities
    assert [[e[:4] for e in ents] for ents in got["tagged"]] == [
        [e[:4] for e in ents] for ents in eager
    ]
    for ours, theirs in zip(got["tagged"], eager, strict=True):
        assert [e[4] for e in ours] == pytest.approx([e[4] for e in theirs], abs=1e-5)
    assert got["refused"] is not None
    assert (
        f"T = {MAX_LENGTH + 1}" in got["refused"] and f"max_length = {MAX_LENGTH}" in got["refused"]
    )


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        ("indicator", "torch"),
        # Each export takes 10-60 s on a busy 2-core machine: one in the default run.
        pytest.param("bilstm", "torch", marks=pytest.mark.slow),
        pytest.param("indicator", "onnx", marks=pytest.mark.slow),
        pytest.param("bilstm", "onnx", marks=pytest.mark.slow),
    ],
)
def test_export_loads_in_a_fresh_process_and_equals_the_eager_model(
    taggers: dict[str, TextTagger], folder: Path, model: str, fmt: str
) -> None:
    tagger = taggers[model]
    path = _exported(taggers, folder, model, fmt)
    meta = load_exported(path).meta
    assert meta["format"] == fmt and meta["max_length"] == MAX_LENGTH and meta["dynamic_length"]
    assert [i["name"] for i in meta["inputs"]] == input_names(tagger.model)
    assert meta["outputs"][0] == {"name": "tags", "dtype": "int64", "shape": ["B", "T"]}
    assert meta["outputs"][4] == {"name": "transitions", "dtype": "float32", "shape": ["K", "K"]}
    _check_same_as_eager(tagger, _fresh(path, tagger, folder))


def _with_holes(tagger: TextTagger) -> dict[str, torch.Tensor]:
    """The three-sentence batch with holes in its mask and a fully masked row."""
    given = _batches(tagger)[1]
    holes = given["mask"].clone()
    holes[0, 1:4] = False
    holes[1, 0] = False
    holes[2] = False  # a fully masked row: log Z = 0, no path
    return {**given, "mask": holes}


@pytest.mark.parametrize("fmt", ["torch", pytest.param("onnx", marks=pytest.mark.slow)])
def test_masks_with_holes_decode_as_the_engine(
    taggers: dict[str, TextTagger], folder: Path, fmt: str
) -> None:
    """The indicator CRF links the unmasked positions across holes, in both formats."""
    tagger = taggers["indicator"]
    given = _with_holes(tagger)
    want = _eager(tagger, given)
    assert float(want["log_z"][2]) == 0.0 and bool((want["tags"][2] == -1).all())
    m = load_exported(_exported(taggers, folder, "indicator", fmt))
    got = m.run(**{k: v for k, v in given.items() if k in m.input_names})
    assert torch.equal(got["tags"], want["tags"])
    torch.testing.assert_close(got["marginals"], want["marginals"], atol=1e-5, rtol=0)
    torch.testing.assert_close(got["log_z"], want["log_z"], atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("model", ["indicator", "bilstm", "charlstm", "memm"])
def test_the_onnx_program_runs_eagerly_as_the_engine(
    taggers: dict[str, TextTagger], model: str
) -> None:
    """The scan program ONNX is exported from (:class:`ModelProgram` ``"scan"``), run eagerly.

    Covers what the exports above do not in the default run: the BiLSTM's traced recurrence and
    the MEMM's per-edge transitions (whose ``torch.export`` is not supported: a guard on the batch
    size), against the eager model.
    """
    tagger = taggers[model]
    program = ModelProgram(tagger.model, "scan").eval()
    batches = _batches(tagger) + ([_with_holes(tagger)] if "lstm" not in model else [])
    for given in batches:
        want = _eager(tagger, given)
        with torch.no_grad():
            got = dict(
                zip(program.outputs, program(*(given[n] for n in program.inputs)), strict=True)
            )
        assert torch.equal(got["tags"], want["tags"])
        torch.testing.assert_close(got["marginals"], want["marginals"], atol=1e-5, rtol=0)
        torch.testing.assert_close(got["log_z"], want["log_z"], atol=1e-5, rtol=1e-6)
        assert got["transitions"].dim() == (4 if model == "memm" else 2)


@pytest.mark.parametrize("per_edge", [False, True])
@pytest.mark.parametrize("decoder", ["viterbi", "posterior", "posterior_valid"])
def test_chain_scans_equal_the_engine(per_edge: bool, decoder: str) -> None:
    """Random chains with forbidden transitions, holes, empty rows and lengths 1 to 9."""
    g = torch.Generator().manual_seed(1)
    for B, T, K in [(4, 9, 5), (1, 1, 3), (3, 6, 4)]:
        em = torch.randn(B, T, K, generator=g) * 3
        tr = (
            torch.randn(B, T - 1, K, K, generator=g) if per_edge else torch.randn(K, K, generator=g)
        )
        tr[..., 0, 2] = float("-inf")
        mask = torch.rand(B, T, generator=g) > 0.3
        mask[0] = False
        pot = make_potentials(
            em, tr, torch.randn(K, generator=g), torch.randn(K, generator=g), mask
        )
        gamma, log_z, paths = scan_decode(pot, decoder)
        want = (
            engine.viterbi(pot)[1]
            if decoder == "viterbi"
            else engine.posterior_decode(pot, valid_only=decoder == "posterior_valid")
        )
        assert torch.equal(paths, want)
        torch.testing.assert_close(gamma, engine.marginals(pot), atol=1e-6, rtol=0)
        torch.testing.assert_close(log_z, engine.log_partition(pot), atol=1e-5, rtol=1e-6)


def test_cli_exports_a_saved_model_that_tags_as_the_eager_one(
    taggers: dict[str, TextTagger], folder: Path
) -> None:
    tagger = taggers["indicator"]
    saved = tagger.save(folder / "saved")
    out = folder / "cli.pt2"
    assert main(["export", "--model", str(saved), "--output", str(out)]) == 0
    m = load_exported(out)
    assert m.max_length is None and m.meta["kind"] == "model"
    long = " ".join(["said aiko ridora of gruler corp"] * 12)  # T = 72: no maximum
    for ours, theirs in zip(m.tag([*TEXTS, long]), tagger.tag([*TEXTS, long]), strict=True):
        assert [(e.label, e.start, e.end) for e in ours] == [
            (e.label, e.start, e.end) for e in theirs
        ]
        assert [e.probability for e in ours] == pytest.approx(
            [e.probability for e in theirs], abs=1e-5
        )


@pytest.mark.parametrize("fmt", ["torch", pytest.param("onnx", marks=pytest.mark.slow)])
def test_a_decoder_export_runs_at_any_length_but_does_not_tag(
    taggers: dict[str, TextTagger], folder: Path, fmt: str
) -> None:
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    tagger = taggers["indicator"]
    path = folder / f"decoder.{'pt2' if fmt == 'torch' else 'onnx'}"
    assert export_decoder(tagger, path, length=6)["dynamic_length"]
    m = load_exported(path)
    assert m.input_names == ["emissions", "mask"] and m.output_names == ["tags"]
    emissions, mask = torch.randn(2, 9, len(tagger.labels)), torch.ones(2, 9, dtype=torch.bool)
    want = tagger.model.head.predict(emissions, mask)
    assert torch.equal(m.run(emissions=emissions, mask=mask)["tags"], want)
    with pytest.raises(ValueError, match="decoder export"):
        m.tag("said aiko ridora")


def test_run_refuses_wrong_inputs(taggers: dict[str, TextTagger], folder: Path) -> None:
    tagger = taggers["indicator"]
    m = load_exported(_exported(taggers, folder, "indicator", "torch"))
    given = _batches(tagger)[0]
    with pytest.raises(ValueError, match=r"takes inputs \['features', 'mask'\], got \['mask'\]"):
        m.run(mask=given["mask"])
    with pytest.raises(
        ValueError, match=r"input 'mask' must be a torch\.bool tensor, got torch\.int64"
    ):
        m.run(features=given["features"], mask=given["mask"].long())


def test_a_transformer_encoder_is_refused_by_name() -> None:
    model = SimpleNamespace(needs=frozenset({"sentences"}), encoder=SimpleNamespace())
    with pytest.raises(ValueError, match=r"reads \['sentences'\] \(not tensors\)"):
        input_names(model)  # type: ignore[arg-type]


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no exported model"):
        load_exported(tmp_path / "missing.pt2")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00" * 64)
    pytest.importorskip("onnxruntime")
    with pytest.raises(ValueError, match=r"bad\.onnx"):
        load_exported(bad)

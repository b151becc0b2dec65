"""What ``annotate`` can read from the chains beyond the path: node marginals (``marginals=True``)
and the ``k`` best labellings of a whole text (``k=``), each against enumeration of every labelling
of a two-sentence text; and the encoder in bf16/fp16 (``dtype=``) against float32.

The tagger is an untrained indicator CRF with random weights (seconds; see ``test_documents``).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from crfhead import engine
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.inference import Tagged, TextTagger
from crfhead.inference import load as load_model
from crfhead.inference.documents import merge_kbest
from crfhead.model.tagger import Tagger

CONFIG = {
    "encoder": None,
    "head": {"class_path": "crfhead.heads.CRF"},
    "constrained": True,
    "decoder": None,
    "grouping": None,
}
TWO = "Aiko said. Mara left."  # two sentences of two tokens: 17^4 labellings
LONG = " ".join(
    f"Solenne Power guided to {i} percent growth in the first quarter, said CEO Mara Voss."
    for i in range(8)
)


@pytest.fixture(scope="module")
def vocabs() -> dict[str, object]:
    return TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=1, test_docs=1)).vocabs


def _model(vocabs: dict[str, object], head: dict[str, object] | None = None) -> Tagger:
    torch.manual_seed(0)
    model = Tagger.build(vocabs, head=head)  # type: ignore[arg-type]
    with torch.no_grad():
        model.encoder.weight.normal_(0.0, 1.5)
        model.head.transitions.normal_(0.0, 1.0)
    return model


@pytest.fixture(scope="module")
def tagger(vocabs: dict[str, object]) -> TextTagger:
    return TextTagger(_model(vocabs), vocabs, dict(CONFIG))  # type: ignore[arg-type]


def _sentence_potentials(tagger: TextTagger, words: list[str]) -> engine.ChainPotentials:
    batch = tagger.collate([Sentence(words)])
    with torch.inference_mode():
        emissions = tagger.model(batch)
        return tagger.model.head.potentials(emissions, batch.mask)


def _brute(
    tagger: TextTagger, sentences: list[list[str]]
) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """Log-probability of every labelling of the sentences side by side, by enumeration."""
    tables = []
    for words in sentences:
        pot = _sentence_potentials(tagger, words)
        em, start, end = pot.emissions[0].double(), pot.start.double(), pot.end.double()
        trans = pot.transitions.double()
        K = em.shape[-1]
        scores = {}
        for z in itertools.product(range(K), repeat=len(words)):
            s = start[z[0]] + end[z[-1]] + sum(em[t, z[t]] for t in range(len(z)))
            s = s + sum(trans[z[t - 1], z[t]] for t in range(1, len(z)))
            scores[z] = float(s)
        tables.append(scores)
    paths, logits = [], []
    for combo in itertools.product(*(t.items() for t in tables)):
        paths.append(tuple(k for z, _ in combo for k in z))
        logits.append(sum(s for _, s in combo))
    x = torch.tensor(logits, dtype=torch.float64)
    return x - torch.logsumexp(x, 0), paths


@pytest.fixture(scope="module")
def brute(tagger: TextTagger) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    return _brute(tagger, [["aiko", "said"], ["mara", "left"]])


def test_k_best_of_a_two_sentence_text_is_the_enumerations(
    tagger: TextTagger, brute: tuple[torch.Tensor, list[tuple[int, ...]]]
) -> None:
    logp, paths = brute
    (t,) = tagger.annotate([TWO], k=5)
    assert [tok.text for tok in t.tokens] == ["aiko", "said", "mara", "left"]
    assert t.best is not None and len(t.best) == 5
    order = torch.argsort(logp, descending=True)[:5].tolist()
    labels = tagger.labels
    assert [tags for _, tags in t.best] == [[labels[k] for k in paths[i]] for i in order]
    assert [p for p, _ in t.best] == pytest.approx(
        [math.exp(float(logp[i])) for i in order], rel=1e-5
    )
    assert t.best[0][1] == t.tags  # the decoded path is the most probable labelling
    # More than there are: only the allowed labellings (finite probability) are listed.
    allowed = int(torch.isfinite(logp).sum())
    (everything,) = tagger.annotate([TWO], k=allowed + 50)
    assert everything.best is not None and len(everything.best) == allowed
    assert sum(p for p, _ in everything.best) == pytest.approx(1.0, abs=1e-5)  # float32 scores


def test_marginals_are_the_enumerations_and_the_engines(
    tagger: TextTagger, brute: tuple[torch.Tensor, list[tuple[int, ...]]]
) -> None:
    logp, paths = brute
    (t,) = tagger.annotate([TWO], marginals=True)
    assert t.marginals is not None
    K = len(tagger.labels)
    want = torch.zeros(4, K, dtype=torch.float64)
    p = logp.exp()
    for i, path in enumerate(paths):
        for pos, k in enumerate(path):
            want[pos, k] += p[i]
    torch.testing.assert_close(
        torch.tensor(t.marginals, dtype=torch.float64), want, atol=1e-5, rtol=0
    )
    # Each sentence's rows are engine.marginals of its own chain; each row sums to 1.
    (long,) = tagger.annotate([LONG], marginals=True)
    assert long.marginals is not None and len(long.marginals) == len(long.tokens)
    assert all(sum(row) == pytest.approx(1.0, abs=1e-5) for row in long.marginals)
    first = [tok.text for tok in long.tokens[:14]]  # the first sentence
    with torch.inference_mode():
        gamma = engine.marginals(_sentence_potentials(tagger, first))[0].float()
    torch.testing.assert_close(torch.tensor(long.marginals[:14]), gamma, atol=1e-6, rtol=0)
    # Windows: each token's row from its window, still a distribution.
    (cut,) = tagger.annotate([LONG], split="none", max_length=9, marginals=True)
    assert cut.marginals is not None and len(cut.marginals) == len(cut.tokens)
    assert all(sum(row) == pytest.approx(1.0, abs=1e-5) for row in cut.marginals)


def test_merge_kbest_is_the_best_of_all_sums() -> None:
    lists = [
        [(-0.1, [0]), (-1.0, [1]), (-3.0, [2])],
        [(-0.5, [3, 4]), (-0.6, [5, 6])],
        [(-0.2, [7]), (-2.0, [8]), (-2.5, [9])],
    ]
    every = sorted(
        ((a + b + c, pa + pb + pc) for (a, pa), (b, pb), (c, pc) in itertools.product(*lists)),
        key=lambda s: -s[0],
    )
    got = merge_kbest(lists, 4)
    assert [p for _, p in got] == [p for _, p in every[:4]]
    assert [s for s, _ in got] == pytest.approx([s for s, _ in every[:4]])
    assert merge_kbest([], 3) == [(0.0, [])]


def test_asking_without_a_probability_model_or_across_windows_is_refused(
    tagger: TextTagger, vocabs: dict[str, object]
) -> None:
    with pytest.raises(
        ValueError, match=r"k=2: texts\[0\] has a chain of 112 tokens > max_length=8"
    ):
        tagger.annotate([LONG], split="none", max_length=8, k=2)
    perceptron = TextTagger(
        _model(vocabs, {"class_path": "crfhead.heads.StructuredPerceptron"}),
        vocabs,  # type: ignore[arg-type]
        {},
    )
    with pytest.raises(
        ValueError, match="the StructuredPerceptron head is not a probability model"
    ):
        perceptron.annotate([TWO], marginals=True)
    assert perceptron.annotate([TWO])[0].entities is not None  # the path is still there


def test_empty_texts_and_dicts(tagger: TextTagger) -> None:
    (empty,) = tagger.annotate([""], marginals=True, k=3)
    assert empty == Tagged("", [], [], [], None, [], [(1.0, [])])
    (t,) = tagger.annotate([TWO], marginals=True, k=2)
    d = t.to_dict()
    assert d["marginals"] == t.marginals
    assert d["best"] == [{"probability": p, "tags": tags} for p, tags in t.best or []]
    assert "best" not in tagger.annotate([TWO])[0].to_dict()


def _agreement(a: list[Tagged], b: list[Tagged]) -> float:
    pairs = [(x, y) for s, t in zip(a, b, strict=True) for x, y in zip(s.tags, t.tags, strict=True)]
    return sum(x == y for x, y in pairs) / len(pairs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_encoder_tags_as_float32_does(
    tagger: TextTagger, vocabs: dict[str, object], dtype: torch.dtype
) -> None:
    try:
        half = TextTagger(_model(vocabs), vocabs, dict(CONFIG), dtype=dtype)  # type: ignore[arg-type]
    except ValueError as err:  # fp16 on a CPU that cannot
        assert dtype == torch.float16 and "float16 on this CPU" in str(err)
        return
    assert half.dtype == dtype and half.model.encoder.weight.dtype == dtype
    assert half.model.head.transitions.dtype == torch.float32
    texts = [LONG, TWO, "said aiko ridora", "marek novak said the first quarter"]
    full, low = tagger.annotate(texts, marginals=True), half.annotate(texts, marginals=True)
    assert _agreement(full, low) >= 0.9
    for f, h in zip(full, low, strict=True):
        assert f.marginals is not None and h.marginals is not None
        torch.testing.assert_close(
            torch.tensor(h.marginals), torch.tensor(f.marginals), atol=0.1, rtol=0
        )
        both = {(e.label, e.start, e.end): e.probability for e in f.entities}
        for e in h.entities:
            if (e.label, e.start, e.end) in both:
                assert e.probability == pytest.approx(both[(e.label, e.start, e.end)], abs=0.1)


def test_dtype_errors_and_load(
    tagger: TextTagger, vocabs: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=r"dtype must be a floating torch\.dtype"):
        TextTagger(_model(vocabs), vocabs, {}, dtype=torch.int64)  # type: ignore[arg-type]

    def no_half(*args: object, **kwargs: object) -> object:
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'")

    with monkeypatch.context() as m:
        m.setattr(torch.nn.functional, "linear", no_half)
        with pytest.raises(
            ValueError,
            match=r"dtype=torch.float16 on this CPU: torch cannot compute in it here \(.*Half.*\); use torch.bfloat16",
        ):
            TextTagger(_model(vocabs), vocabs, {}, dtype=torch.float16)  # type: ignore[arg-type]
    folder = tagger.save(tmp_path / "model")
    loaded = load_model(folder, dtype=torch.bfloat16)
    assert loaded.dtype == torch.bfloat16 and loaded.model.encoder.weight.dtype == torch.bfloat16
    direct = TextTagger(_model(vocabs), vocabs, dict(CONFIG), dtype=torch.bfloat16)  # type: ignore[arg-type]
    assert loaded.annotate([LONG]) == direct.annotate([LONG])

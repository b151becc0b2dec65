"""The synthetic finance corpus: determinism, prefixes, labels, tokenisation, the seed's phenomena."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from crfhead.data.conll import read_conll, write_conll
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.finance import (
    ENTITY_TYPES,
    LABELS,
    FinanceDocument,
    corpus_statistics,
    generate_corpus,
    generate_documents,
    generate_finance_documents,
    tokenize,
    unseen_rate,
    unseen_rates,
)
from crfhead.data.finance.lexicon import lexicon
from crfhead.data.finance.profile import DEFAULT, PROFILES, SEED, Profile
from crfhead.data.finance.stats import unseen_composition
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.schemes import is_valid, tags_to_spans

ROOT = Path(__file__).resolve().parents[2]

# sha256 of write_conll(generate_corpus(0, 3)). A corpus run is a contract: experiments cite
# "the first n documents of run s". If a change to the generator is meant to change the runs, update
# this digest and the measured unseen rates below, and say so in the changelog.
GOLDEN_RUN0_3DOCS = "b250a11be44da80cba879d8a24b58c1304998e720a521f633c94f36376cab0ed"

# Unseen-token rates of 200 test documents of run 1 after the first n documents of run 0, as measured
# (the seed text reports 0.369 at 3 and 0.138 at 30 documents).
MEASURED = {3: 0.371, 10: 0.217, 30: 0.124}
BAND = 0.02


@pytest.fixture(scope="module", params=["default", "seed"])
def docs(request: pytest.FixtureRequest) -> list[FinanceDocument]:
    """200 documents of run 1, in each profile: every phenomenon below holds in both."""
    return generate_finance_documents(1, 200, request.param)


@pytest.fixture(scope="module")
def corpus(docs: list[FinanceDocument]) -> list[Sentence]:
    return [s for d in docs for s in d.sentences]


def _spans(sentences: list[Sentence]) -> list[tuple[str, list[str]]]:
    out = []
    for s in sentences:
        assert s.tags is not None
        for span in tags_to_spans(s.tags, "BIO"):
            out.append((span.label, s.tokens[span.start : span.end + 1]))
    return out


def _conll_bytes(sentences: list[Sentence], path: Path) -> bytes:
    write_conll(sentences, path)
    return path.read_bytes()


# ---- labels ------------------------------------------------------------------------------------


def test_labels_are_the_17_bio_labels_in_type_order() -> None:
    assert ENTITY_TYPES == ("ORG", "PERSON", "GPE", "PRODUCT", "SECTOR", "DATE", "MONEY", "PERCENT")
    assert len(LABELS) == 17
    assert LABELS[0] == "O"
    assert list(LABELS[1:]) == [f"{p}-{t}" for t in ENTITY_TYPES for p in ("B", "I")]
    assert LabelVocab(LABELS, "BIO").labels == list(LABELS)


def test_every_label_and_type_occurs(corpus: list[Sentence]) -> None:
    seen = Counter(tag for s in corpus for tag in s.tags or [])
    assert set(seen) == set(LABELS)
    assert set(generate_corpus(0, 30)[0].tags or []) <= set(LABELS)


# ---- determinism and prefixes ----------------------------------------------------------------------


def test_same_seed_same_bytes_different_seed_different_bytes(tmp_path: Path) -> None:
    a = _conll_bytes(generate_corpus(5, 20), tmp_path / "a.txt")
    b = _conll_bytes(generate_corpus(5, 20), tmp_path / "b.txt")
    c = _conll_bytes(generate_corpus(6, 20), tmp_path / "c.txt")
    assert a == b
    assert a != c
    assert a.count(b"-DOCSTART-") == 20


def test_golden_digest(tmp_path: Path) -> None:
    digest = hashlib.sha256(_conll_bytes(generate_corpus(0, 3), tmp_path / "run0.txt")).hexdigest()
    assert digest == GOLDEN_RUN0_3DOCS, (
        f"run 0 changed (digest {digest}): update GOLDEN_RUN0_3DOCS and MEASURED only if the "
        "generator was meant to change"
    )


def test_independent_of_hash_seed(tmp_path: Path) -> None:
    code = (
        "import hashlib, sys; from crfhead.data.conll import write_conll; "
        "from crfhead.data.finance import generate_corpus; "
        "write_conll(generate_corpus(0, 3), sys.argv[1]); "
        "print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "x.txt")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == GOLDEN_RUN0_3DOCS


def test_documents_do_not_depend_on_how_many_are_asked_for() -> None:
    thirty = generate_documents(3, 30)
    assert thirty[:3] == generate_documents(3, 3)
    assert thirty[:10] == generate_documents(3, 10)
    assert generate_corpus(3, 10) == [s for d in thirty[:10] for s in d]
    assert generate_documents(3, 0) == []
    with pytest.raises(ValueError, match="n_docs"):
        generate_documents(3, -1)


def test_ids_and_document_sizes(docs: list[FinanceDocument]) -> None:
    for i, d in enumerate(docs):
        assert d.doc_id == f"finance-1-{i}"
        assert d.kind in ("filing", "transcript")
        assert 6 <= len(d.sentences) <= 15
        assert len(d.texts) == len(d.sentences)
        for n, s in enumerate(d.sentences):
            assert s.doc_id == d.doc_id
            assert s.id == f"{d.doc_id}:{n}"
    assert {d.kind for d in docs} == {"filing", "transcript"}


# ---- tokens and tags ---------------------------------------------------------------------------


def test_tags_are_valid_bio_and_tokens_lowercase_letters(corpus: list[Sentence]) -> None:
    for s in corpus:
        assert s.tags is not None and len(s.tags) == len(s.tokens) > 0
        assert is_valid(s.tags, "BIO"), s.id
        assert all(re.fullmatch("[a-z]+", tok) for tok in s.tokens), s.id


def test_tokens_are_the_tokenised_surface_text(docs: list[FinanceDocument]) -> None:
    assert tokenize("$12.4 million, up 4.5 percent in fiscal 2023") == [
        "million",
        "up",
        "percent",
        "in",
        "fiscal",
    ]
    for d in docs:
        for s, text in zip(d.sentences, d.texts, strict=True):
            assert tokenize(text) == s.tokens
            assert re.search("[0-9]", text) or "million" not in s.tokens


def test_vanished_entities_are_dropped_and_counted(docs: list[FinanceDocument]) -> None:
    dropped: Counter[str] = Counter()
    for d in docs:
        dropped.update(d.dropped)
    assert dropped["MONEY"] > 0 and dropped["DATE"] > 0 and dropped["PERCENT"] > 0
    assert set(dropped) <= set(ENTITY_TYPES)


def test_the_opens_dates_and_products_and_is_o_elsewhere(corpus: list[Sentence]) -> None:
    tags = Counter(
        t for s in corpus for w, t in zip(s.tokens, s.tags or [], strict=True) if w == "the"
    )
    assert set(tags) == {"O", "B-DATE", "B-PRODUCT"}
    assert min(tags.values()) > 100
    contexts = Counter(
        s.tokens[i + 1]
        for s in corpus
        for i, (w, t) in enumerate(zip(s.tokens, s.tags or [], strict=True))
        if w == "the" and t == "O" and i + 1 < len(s)
    )
    assert contexts["company"] > 0 and contexts["board"] > 0 and contexts["quarter"] > 0


def test_million_only_in_money_and_percent_only_in_percent(corpus: list[Sentence]) -> None:
    types: dict[str, Counter[str]] = defaultdict(Counter)
    for s in corpus:
        for w, t in zip(s.tokens, s.tags or [], strict=True):
            types[w][t[2:] or "O"] += 1
    assert set(types["million"]) == {"MONEY"} and types["million"]["MONEY"] > 100
    assert set(types["billion"]) == {"MONEY"}
    assert set(types["percent"]) == {"PERCENT"} and types["percent"]["PERCENT"] > 100


def test_polysemous_names(corpus: list[Sentence]) -> None:
    types: dict[str, set[str]] = defaultdict(set)
    for label, words in _spans(corpus):
        for w in words:
            types[w].add(label)
    brands = sorted(w for w, ts in types.items() if {"ORG", "PRODUCT"} <= ts)
    assert "kestrel" in brands and "solenne" in brands and len(brands) > 50
    places_in_orgs = [w for w, ts in types.items() if {"ORG", "GPE"} <= ts]
    assert len(places_in_orgs) > 5
    spans = {(label, " ".join(words)) for label, words in _spans(corpus)}
    assert ("ORG", "kestrel") in spans and ("PRODUCT", "the kestrel turbine") in spans


def test_multi_token_names_of_every_type(corpus: list[Sentence]) -> None:
    multi = Counter(label for label, words in _spans(corpus) if len(words) > 1)
    assert set(multi) == set(ENTITY_TYPES)
    spans = {(label, " ".join(words)) for label, words in _spans(corpus)}
    for expected in [
        ("GPE", "north carolina"),
        ("DATE", "the third quarter"),
        ("MONEY", "million"),
        ("PERCENT", "percent"),
        ("PERCENT", "basis points"),
        ("SECTOR", "cloud infrastructure"),
    ]:
        assert expected in spans, expected
    assert ("ORG", "solenne power") in spans or ("ORG", "solenne") in spans


def test_name_pools_are_large(docs: list[FinanceDocument], corpus: list[Sentence]) -> None:
    names: dict[str, Counter[str]] = defaultdict(Counter)
    for label, words in _spans(corpus):
        names[label][" ".join(words)] += 1
    if _profile_of(docs) == "default":
        assert len(names["ORG"]) > 500
        assert len(names["PERSON"]) > 500
        assert len(names["GPE"]) > 300
        assert len(names["PRODUCT"]) > 150
    else:  # the seed profile: names recur, but there are still hundreds
        assert len(names["ORG"]) > 200 and len(names["PERSON"]) > 200 and len(names["GPE"]) > 50
        assert len(names["PRODUCT"]) > 100


def _profile_of(docs: list[FinanceDocument]) -> str:
    """Which profile made ``docs`` (the seed profile opens most sentences with an aside)."""
    lex = lexicon()
    first = Counter(s.tokens[0] in lex.aside_connectives for d in docs for s in d.sentences)
    return "seed" if first[True] > first[False] else "default"


# ---- statistics ------------------------------------------------------------------------------


def test_unseen_rates_match_the_seed_regime() -> None:
    rates = unseen_rates(0, 1, sizes=(3, 10, 30), test_docs=200)
    for n, measured in MEASURED.items():
        assert abs(rates[n] - measured) <= BAND, (n, rates[n])
    assert abs(rates[3] - 0.369) <= 0.05
    assert abs(rates[30] - 0.138) <= 0.05
    assert rates[3] > rates[10] > rates[30]


SEED_MEASURED = {3: 0.341, 10: 0.227, 30: 0.141}
"""The seed profile's unseen rates, run 0 against run 1 (0.374 / 0.232 / 0.139 over 4 run pairs)."""


def test_seed_profile_unseen_rates_and_what_they_are() -> None:
    rates = unseen_rates(0, 1, sizes=(3, 10, 30), test_docs=200, profile="seed")
    for n, measured in SEED_MEASURED.items():
        assert abs(rates[n] - measured) <= BAND, (n, rates[n])
    pairs = [unseen_rates(2 * i, 2 * i + 1, sizes=(3, 30), profile="seed") for i in range(4)]
    assert abs(sum(p[3] for p in pairs) / 4 - 0.369) <= 0.02
    assert abs(sum(p[30] for p in pairs) / 4 - 0.138) <= 0.01
    # What differs from the default profile: the unseen tokens are mostly O, not names.
    seed = unseen_composition(generate_documents(0, 30, "seed"), generate_corpus(1, 200, "seed"))
    default = unseen_composition(generate_documents(0, 30), generate_corpus(1, 200))
    assert seed["O"] > 0.6 and default["O"] < 0.2
    assert sum(seed.values()) == pytest.approx(1.0) == sum(default.values())
    assert list(seed) == sorted(seed, key=lambda k: -seed[k])
    assert unseen_composition(generate_corpus(0, 3), generate_corpus(0, 3)) == {}


def test_profiles_are_their_own_runs_and_checked() -> None:
    seed = generate_finance_documents(0, 3, "seed")
    assert seed == generate_finance_documents(0, 3, SEED)
    assert [d.sentences for d in seed] != generate_documents(0, 3)
    assert generate_documents(0, 3, "default") == generate_documents(0, 3)
    assert generate_documents(0, 30, "seed")[:3] == [d.sentences for d in seed]
    with pytest.raises(ValueError, match=r"unknown finance profile 'nope'.*default.*seed"):
        generate_documents(0, 1, "nope")
    with pytest.raises(ValueError, match="unknown finance profile"):
        FinanceCorpus(profile="nope")
    with pytest.raises(ValueError, match="p_aside must be in"):
        Profile("x", p_aside=1.5)
    with pytest.raises(ValueError, match="name_zipf must be >= 0"):
        Profile("x", name_zipf=-1)
    with pytest.raises(ValueError, match="p_gpe_org \\+ p_surname_org"):
        Profile("x", p_gpe_org=0.7, p_surname_org=0.7)
    assert PROFILES["default"] == DEFAULT and PROFILES["seed"] == SEED


def test_asides_open_sentences_and_are_outside_entities() -> None:
    lex = lexicon()
    open_words = {*lex.aside_adjectives, *lex.aside_nouns}
    asides = 0
    for s in generate_corpus(2, 40, "seed"):
        if s.tokens[0] in lex.aside_connectives and s.tokens[1] in open_words:
            asides += 1
            assert s.tags is not None and s.tags[:4] == ["O"] * 4
    assert asides > 100
    names = {
        w
        for key in ("first_names", "last_names", "places", "brand_words")
        for e in getattr(lex, key)
        for w in e.split()
    }
    assert not open_words & names
    assert not open_words & {"the", "million", "billion", "percent", "quarter", "fiscal"}


def test_unseen_rate_accepts_documents_or_sentences() -> None:
    train = generate_documents(0, 3)
    test = generate_corpus(1, 5)
    flat = [s for d in train for s in d]
    assert unseen_rate(train, test) == unseen_rate(flat, test)
    assert unseen_rate(flat, flat) == 0.0
    assert unseen_rate(flat, []) == 0.0
    assert unseen_rate([], flat) == 1.0


def test_corpus_statistics(corpus: list[Sentence]) -> None:
    train = generate_corpus(0, 30)
    stats = corpus_statistics(train, corpus)
    assert stats["train"]["documents"] == 30 and stats["test"]["documents"] == 200
    assert stats["test"]["sentences"] == len(corpus)
    assert stats["test"]["tokens"] == sum(len(s) for s in corpus)
    assert list(stats["test"]["entities"]) == list(ENTITY_TYPES)
    assert sum(stats["test"]["entities"].values()) == len(_spans(corpus))
    assert stats["unseen_rate"] == unseen_rate(train, corpus)
    assert 100 < stats["test"]["tokens_per_document"] < 250
    assert 0 < stats["unseen_type_rate"] < 1


# ---- files -------------------------------------------------------------------------------------


def test_conll_round_trip(tmp_path: Path) -> None:
    docs = generate_documents(2, 10)
    sentences = [s for d in docs for s in d]
    path = tmp_path / "finance-2.txt"
    write_conll(sentences, path)
    back, report = read_conll(path, scheme="BIO")
    assert report.documents == 10 and report.repaired_sentences == 0
    assert [s.tokens for s in back] == [s.tokens for s in sentences]
    assert [s.tags for s in back] == [s.tags for s in sentences]
    by_doc = Counter(s.doc_id for s in back)
    assert list(by_doc.values()) == [len(d) for d in docs]


def test_script_writes_the_run_and_prints_statistics(tmp_path: Path) -> None:
    script = str(ROOT / "scripts" / "make_finance_corpus.py")
    argv = ["--seed", "0", "--docs", "3", "--out", str(tmp_path), "--test-seed", "1"]
    done = subprocess.run(
        [sys.executable, script, *argv, "--test-docs", "20", "--sizes", "1", "3", "--texts"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "n =   3" in out and "PERCENT" in out
    assert (tmp_path / "finance-0.txt").read_bytes() == _conll_bytes(
        generate_corpus(0, 3), tmp_path / "again.txt"
    )
    assert (tmp_path / "finance-1.txt").is_file()
    assert (tmp_path / "finance-0.text.txt").read_text(encoding="utf-8").count("# finance-0-") == 3

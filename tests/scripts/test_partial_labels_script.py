"""``scripts/partial_labels.py``, run as a command: the span removal, and the experiment on a tiny corpus.

``corrupt`` is checked line by line against the file it read: exactly ``round(f * spans)`` whole
spans (halves up) become ``*`` in one file and ``O`` in the other, the same spans in both, every other
cell unchanged, the same for one seed, nested across fractions. ``run`` trains the three methods
(full, unknown, read as ``O``) for one epoch on a tiny CoNLL-shaped corpus written here, and on a
few finance documents, and ``--resume`` skips what is written.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crfhead.schemes import tags_to_spans
from tests.helpers import script_process

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "partial_labels.py"

# Eight spans over four sentences: multi-token, adjacent (B-PER B-PER), at both ends of a sentence.
TRAIN = """-DOCSTART- O

John B-PER
Smith I-PER
visited O
Paris B-LOC

Ann B-PER
Bob B-PER
met O
in O
New B-LOC
York I-LOC

-DOCSTART- O

the O
UN B-ORG
said O
so O

Mary B-PER
left O
Acme B-ORG
Corp I-ORG
Ltd I-ORG
"""
SPANS = 8


def run(
    *args: str, cwd: Path, check: bool = True, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    done = script_process(SCRIPT.name, *args, cwd=cwd, timeout=timeout)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def cells(path: Path) -> list[list[tuple[str, str]]]:
    """``(token, tag)`` per line of each sentence; ``-DOCSTART-`` lines dropped (read as text)."""
    sentences: list[list[tuple[str, str]]] = [[]]
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if sentences[-1]:
                sentences.append([])
            continue
        token, tag = line.split()
        if token != "-DOCSTART-":
            sentences[-1].append((token, tag))
    return [s for s in sentences if s]


FRACTIONS = (0.0, 0.25, 0.3, 0.3125, 0.5, 0.75, 1.0)
SEEDS = tuple(range(6))


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``corrupt`` call for every fraction and seed: ``{"tmp", (fraction, seed): counts}``."""
    tmp = tmp_path_factory.mktemp("corrupt")
    train = tmp / "train.txt"
    train.write_text(TRAIN, encoding="utf-8")
    done = run(
        "corrupt",
        str(train),
        "--fraction",
        *map(str, FRACTIONS),
        "--seed",
        *map(str, SEEDS),
        "--out-dir",
        str(tmp / "out"),
        cwd=tmp,
    )
    out: dict[Any, Any] = {"tmp": tmp}
    for counts in json.loads(done.stdout)["runs"]:
        out[counts["fraction"], counts["seed"]] = counts
    return out


def removed_spans(tmp_path: Path, unknown: Path, as_o: Path) -> set[tuple[int, int, int]]:
    """The input spans removed, as ``(sentence, start, end)``; checks both files cell by cell."""
    original = cells(tmp_path / "train.txt")
    star, oh = cells(unknown), cells(as_o)
    assert [[t for t, _ in s] for s in star] == [[t for t, _ in s] for s in original]
    assert [[t for t, _ in s] for s in oh] == [[t for t, _ in s] for s in original]
    removed = set()
    for i, (orig, a, b) in enumerate(zip(original, star, oh, strict=True)):
        tags = [t for _, t in orig]
        marked = {j for j, (_, t) in enumerate(a) if t == "*"}
        for j, ((_, t0), (_, ta), (_, tb)) in enumerate(zip(orig, a, b, strict=True)):
            if j in marked:
                assert t0 != "O" and tb == "O", (i, j, t0, tb)  # an entity token, read as O in (b)
            else:
                assert ta == t0 and tb == t0, (i, j, t0, ta, tb)  # untouched elsewhere
        for span in tags_to_spans(tags, "BIO"):
            inside = set(range(span.start, span.end + 1))
            assert inside <= marked or not inside & marked, (i, span)  # whole spans only
            if inside <= marked:
                removed.add((i, span.start, span.end))
        assert marked == {j for (k, s, e) in removed if k == i for j in range(s, e + 1)}
    return removed


class TestCorrupt:
    @pytest.mark.parametrize(
        ("fraction", "expected"), [(0.0, 0), (0.25, 2), (0.3, 2), (0.3125, 3), (0.5, 4), (1.0, 8)]
    )
    def test_removes_exactly_round_half_up(
        self, corrupted: dict[Any, Any], fraction: float, expected: int
    ) -> None:
        for seed in SEEDS:
            counts = corrupted[fraction, seed]
            files = counts["files"]
            removed = removed_spans(corrupted["tmp"], Path(files["unknown"]), Path(files["as_o"]))
            assert counts["spans"] == SPANS
            assert counts["removed"] == len(removed) == expected
            assert counts["removed_tokens"] == sum(e - s + 1 for _, s, e in removed)
            assert counts["sentences_touched"] == len({i for i, _, _ in removed})

    def test_seeded_and_nested(self, corrupted: dict[Any, Any], tmp_path: Path) -> None:
        tmp = corrupted["tmp"]

        def spans(fraction: float, seed: int) -> set[tuple[int, int, int]]:
            files = corrupted[fraction, seed]["files"]
            return removed_spans(tmp, Path(files["unknown"]), Path(files["as_o"]))

        for seed in SEEDS:
            assert spans(0.25, seed) <= spans(0.5, seed) <= spans(0.75, seed) <= spans(1.0, seed)
        assert len({frozenset(spans(0.5, seed)) for seed in SEEDS}) > 1  # seeds differ
        # The same seed again (another call, another folder): the same files, byte for byte.
        done = run(
            "corrupt",
            str(tmp / "train.txt"),
            "--fraction",
            "0.5",
            "--seed",
            "2",
            "--out-dir",
            str(tmp_path),
            cwd=tmp_path,
        )
        (again,) = json.loads(done.stdout)["runs"]
        for method in ("unknown", "as_o"):
            first = Path(corrupted[0.5, 2]["files"][method]).read_bytes()
            assert Path(again["files"][method]).read_bytes() == first

    def test_fraction_outside_0_1_is_refused(self, tmp_path: Path) -> None:
        train = tmp_path / "train.txt"
        train.write_text(TRAIN, encoding="utf-8")
        done = run(
            "corrupt",
            str(train),
            "--fraction",
            "0.5",
            "1.5",
            "--seed",
            "0",
            "--out-dir",
            str(tmp_path),
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 2
        assert "must be in [0, 1], got 1.5" in done.stderr


# ----------------------------------------------------------------------------- end to end
NAMES = {"PER": ["John", "Mary", "Ann", "Peter"], "LOC": ["Paris", "Berlin", "Rome"]}
WORDS = ["the", "man", "went", "to", "and", "saw", "a", "city", "today"]


def tiny_split(n: int, seed: int) -> str:
    """``n`` sentences of filler words with one or two PER / LOC names, BIO, two columns."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- O", ""]
    for _ in range(n):
        for _ in range(rng.randint(1, 2)):
            lines += [f"{w} O" for w in rng.sample(WORDS, 3)]
            typ = rng.choice(sorted(NAMES))
            lines += [
                f"{w} {'B' if j == 0 else 'I'}-{typ}"
                for j, w in enumerate(rng.sample(NAMES[typ], rng.randint(1, 2)))
            ]
        lines.append("")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("partial_labels")
    data = tmp / "conll"
    data.mkdir()
    for name, n, seed in (("train", 40, 0), ("valid", 10, 1), ("test", 12, 2)):
        (data / f"{name}.txt").write_text(tiny_split(n, seed), encoding="utf-8")
    args = [
        "run",
        "--corpus",
        "conll2003",
        "--conll-dir",
        str(data),
        "--epochs",
        "conll2003=1",
        "--fractions",
        "0.5",
        "--seeds",
        "0",
        "--work-dir",
        str(tmp / "work"),
        "--out-dir",
        str(tmp / "out"),
        "--bootstrap-samples",
        "200",
    ]
    done = run(*args, cwd=tmp)
    return {"tmp": tmp, "args": args, "stdout": done.stdout, "data": data}


class TestRun:
    def test_every_method_trains_and_is_reported(self, tiny_run: dict[str, Any]) -> None:
        tmp = tiny_run["tmp"]
        results = json.loads((tmp / "out" / "results.json").read_text())
        res = results["corpora"]["conll2003"]
        rows = {(r["method"], r["fraction"]): r for r in res["rows"]}
        assert set(rows) == {("full", 0.0), ("unknown", 0.5), ("as_o", 0.5)}
        spans = sum(
            len(tags_to_spans([t for _, t in s], "BIO"))
            for s in cells(tiny_run["data"] / "train.txt")
        )
        assert res["train_spans"] == spans
        for (method, _), row in rows.items():
            assert row["seeds"] == [0]
            (one,) = row["runs"]
            assert 0.0 <= one["f1"] <= 1.0
            assert one["removal"]["removed"] == (0 if method == "full" else (spans + 1) // 2)
            assert one["epochs_run"] == 1 and one["best_epoch"] == 0
        diff = res["unknown_minus_as_o"]["0.5"]
        f1 = {m: rows[m, 0.5]["f1"]["mean"] for m in ("unknown", "as_o")}
        assert diff["mean"] == pytest.approx(f1["unknown"] - f1["as_o"], abs=1e-12)
        assert diff["interval"][0] <= diff["mean"] <= diff["interval"][1]
        assert diff["per_seed"][0]["difference"] == pytest.approx(diff["mean"], abs=1e-12)
        md = (tmp / "out" / "results.md").read_text()
        assert "| spans removed | full | (a) unknown `*` | (b) read as `O` |" in md
        assert "python scripts/partial_labels.py run --corpus conll2003" in md

    def test_run_files_hold_the_scored_predictions(self, tiny_run: dict[str, Any]) -> None:
        runs = tiny_run["tmp"] / "work" / "runs" / "conll2003"
        record = json.loads((runs / "unknown-f0.5-s0.json").read_text())
        assert record["test_report_f1"] == pytest.approx(record["test"]["f1"], abs=1e-12)
        assert record["scheme"] == "BIOES"  # the config's scheme
        assert len(record["dev_f1_by_epoch"]) == 1
        pred = json.loads((runs / "unknown-f0.5-s0.pred.json").read_text())
        assert len(pred["gold"]) == len(pred["pred"]) == 12
        assert not list(runs.rglob("*.ckpt"))  # deleted once scored
        train = cells(Path(record["train_file"]))
        stars = sum(t == "*" for s in train for _, t in s)
        assert stars == record["removal"]["removed_tokens"] > 0

    def test_resume_skips_only_when_asked(self, tiny_run: dict[str, Any]) -> None:
        tmp = tiny_run["tmp"]
        runs = tmp / "work" / "runs" / "conll2003"
        before = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")}
        done = run(*tiny_run["args"], "--resume", cwd=tmp)
        assert done.stdout.count("done, skipped") == 3
        assert {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")} == before

    def test_finance_corpus(self, tmp_path: Path) -> None:
        run(
            "run",
            "--corpus",
            "finance",
            "--finance-docs",
            "1",
            "1",
            "1",
            "--epochs",
            "finance=1",
            "--methods",
            "as_o",
            "--fractions",
            "0.5",
            "--seeds",
            "1",
            "--work-dir",
            str(tmp_path / "work"),
            "--out-dir",
            str(tmp_path / "out"),
            cwd=tmp_path,
        )
        results = json.loads((tmp_path / "out" / "results.json").read_text())
        (row,) = results["corpora"]["finance"]["rows"]
        assert (row["method"], row["fraction"], row["seeds"]) == ("as_o", 0.5, [1])
        assert (tmp_path / "work" / "data" / "finance" / "test.txt").is_file()

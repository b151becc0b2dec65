"""Random tiny chains for the tests; the suite's size (:func:`full`) and its shared data (:func:`needs_data`)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hypothesis import strategies as st


def full() -> bool:
    """Whether this is the full suite (``pytest --full`` or ``CRFHEAD_FULL=1``; see ``conftest.py``)."""
    return os.environ.get("CRFHEAD_FULL") == "1"


def script_process(
    name: str, *args: str, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``scripts/<name>`` run by this interpreter from ``cwd`` (another folder than the
    repository's: a script must find what it needs next to itself), its output captured."""
    script = Path(__file__).resolve().parents[1] / "scripts" / name
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_script(name: str, *args: str, cwd: Path, timeout: float = 300) -> str:
    """The stdout of :func:`script_process`, asserting that the script exited 0."""
    done = script_process(name, *args, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def needs_data(*parts: str) -> Path:
    """The shared corpus file or folder ``parts`` under the data root; skips the test without it.

    The corpora are licensed separately and never in the repository, so on a machine without them
    (no ``$CRFHEAD_DATA``, no ``../shared/data``) a test that reads one skips, naming the path.
    """
    from crfhead.data.paths import data_dir

    path = data_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found: {path} (set CRFHEAD_DATA)")
    return path


@dataclass
class Chain:
    emissions: torch.Tensor
    transitions: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor
    mask: torch.Tensor

    def args(self) -> tuple[torch.Tensor, ...]:
        return self.emissions, self.transitions, self.start, self.end, self.mask


def random_chain(
    seed: int,
    B: int,
    T: int,
    K: int,
    per_position: bool = False,
    holes: bool = True,
    dtype: torch.dtype = torch.float64,
    scale: float = 1.0,
) -> Chain:
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(B, T, K, generator=g, dtype=dtype) * scale
    shape = (B, max(T - 1, 0), K, K) if per_position else (K, K)
    Tr = torch.randn(*shape, generator=g, dtype=dtype) * scale
    s = torch.randn(K, generator=g, dtype=dtype)
    e = torch.randn(K, generator=g, dtype=dtype)
    if holes:
        mask = torch.rand(B, T, generator=g) < 0.7
        if B > 1 and T > 0:
            mask[0] = True  # at least one full row
    else:
        mask = torch.ones(B, T, dtype=torch.bool)
    return Chain(E, Tr, s, e, mask)


def constrained_chain(seed: int, B: int, T: int, K: int, per_position: bool) -> Chain:
    """:func:`random_chain` with about 30% of the transitions and starts forbidden (``-inf``)."""
    c = random_chain(seed, B, T, K, per_position=per_position)
    g = torch.Generator().manual_seed(seed + 1)
    forbid = torch.rand(c.transitions.shape, generator=g) < 0.3
    c.transitions = torch.where(forbid, torch.full_like(c.transitions, -math.inf), c.transitions)
    c.start = torch.where(torch.rand(K, generator=g) < 0.3, -math.inf, c.start)
    return c


def check_topk(rows: list, scores: torch.Tensor, paths: torch.Tensor, k: int, T: int) -> None:
    """``topk``'s ``(B, k)`` scores and ``(B, k, T)`` paths against enumerated ``rows``: the k best
    scores (``-inf`` past the last path), each path a real path of its score, all distinct."""
    for b, row in enumerate(rows):
        want = row.sorted_scores()[:k]
        want += [-math.inf] * (k - len(want))
        assert scores[b].tolist() == pytest.approx(want, abs=1e-10)
        seen = set()
        for r in range(k):
            path = paths[b, r].tolist()
            if want[r] == -math.inf:
                assert path == [-1] * T
                continue
            if row.positions:
                assert row.scores[row.paths.index(path)] == pytest.approx(want[r], abs=1e-10)
            seen.add(tuple(path))
        assert len(seen) == sum(w > -math.inf for w in want)  # distinct paths


@st.composite
def chains(draw: st.DrawFn, max_T: int = 5, max_K: int = 4) -> Chain:
    return random_chain(
        seed=draw(st.integers(0, 2**31 - 1)),
        B=draw(st.integers(1, 3)),
        T=draw(st.integers(0, max_T)),
        K=draw(st.integers(1, max_K)),
        per_position=draw(st.booleans()),
    )


TINY_FINANCE = """
seed_everything: 0
trainer:
  max_epochs: 3
  default_root_dir: {folder}
  accelerator: cpu
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {folder}/runs
      name: tiny
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {folder}/ckpt
        save_last: true
model:
  head:
    class_path: {head}
{encoder}  lr: 0.1
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
    init_args:
      train_docs: 8
      dev_docs: 2
      test_docs: 2
  batch_size: 8
"""


def train_tiny_finance(folder: Path, head: str = "crfhead.heads.CRF", encoder: str = "") -> Path:
    """Train a tiny model (8 finance documents, 3 epochs, seconds) with ``train.py``; its last.ckpt.

    ``encoder`` is YAML for ``model.encoder`` indented by two spaces (empty: the default encoder).
    """
    import sys

    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from train import main

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(TINY_FINANCE.format(folder=folder, head=head, encoder=encoder))
    main(["--config", str(config)])
    return folder / "ckpt" / "last.ckpt"


def letter_bert(folder: Path) -> Path:
    """A random 2-layer BERT whose WordPiece vocabulary spells any lowercase word letter by letter."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters)]
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    config = BertConfig(
        vocab_size=len(pieces),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder

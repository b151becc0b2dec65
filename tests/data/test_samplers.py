"""Training and evaluation samplers: seeded permutations, length-grouped batches, shards, resuming.

The oracle of :class:`LengthGroupedSampler` is its definition: its batches are exactly the cuts of
the seeded permutation's windows sorted by length, each batch once, the longest first, the short
one last.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch.utils.data import DataLoader

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.samplers import EpochSeededSampler, LengthGroupedSampler, ShardSampler


def _lengths(n: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [min(int(rng.expovariate(1 / 20)) + 1, 120) for _ in range(n)]


def _batches(sampler: LengthGroupedSampler | EpochSeededSampler, size: int) -> list[list[int]]:
    order = list(sampler)
    return [order[k : k + size] for k in range(0, len(order), size)]


def _padding(batches: list[list[int]], lengths: list[int]) -> float:
    padded = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    return padded / sum(lengths[i] for b in batches for i in b)


def test_epoch_seeded_permutation_depends_on_seed_and_epoch_only() -> None:
    a, b = EpochSeededSampler(50, seed=3), EpochSeededSampler(50, seed=3)
    assert sorted(a) == list(range(50)) and list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first and sorted(a) == list(range(50))
    assert list(EpochSeededSampler(50, seed=4)) != first
    assert list(EpochSeededSampler(0, seed=0)) == []


def test_epoch_seeded_ranks_share_one_permutation_and_resume_skips() -> None:
    ranks = [EpochSeededSampler(11, seed=0, rank=r, world=3) for r in range(3)]
    orders = [list(s) for s in ranks]
    assert [len(o) for o in orders] == [4, 4, 4] == [len(s) for s in ranks]
    assert set().union(*orders) == set(range(11))
    s = EpochSeededSampler(20, seed=1)
    s.set_epoch(2)
    full = list(s)
    s.resume_at(2, 7)
    assert list(s) == full[7:]
    assert list(s) == full  # resuming is for one pass only
    s.resume_at(1, 7)
    assert list(s) == full  # another epoch's position is ignored


@pytest.mark.parametrize(("n", "size", "window"), [(103, 8, 4), (64, 8, 2), (5, 8, 3), (40, 1, 7)])
def test_length_grouped_batches_are_the_sorted_cuts_of_the_windows(
    n: int, size: int, window: int
) -> None:
    lengths = _lengths(n)
    sampler = LengthGroupedSampler(lengths, size, window, seed=5)
    sampler.set_epoch(3)
    batches = _batches(sampler, size)
    assert sorted(i for b in batches for i in b) == list(range(n))
    # The oracle: the seeded permutation cut into windows, each sorted, cut into batches.
    g = torch.Generator().manual_seed(5 * 100_003 + 3)
    perm = torch.randperm(n, generator=g).tolist()
    expected = []
    for start in range(0, n, size * window):
        chunk = sorted(perm[start : start + size * window], key=lambda i: -lengths[i])
        expected += [tuple(chunk[k : k + size]) for k in range(0, len(chunk), size)]
    assert sorted(map(tuple, batches)) == sorted(expected)
    # The loader's cuts fall on batches: the one short batch is last, and each batch is sorted.
    assert all(len(b) == size for b in batches[:-1])
    assert all(lengths[b[k]] >= lengths[b[k + 1]] for b in batches for k in range(len(b) - 1))
    full = [b for b in batches if len(b) == size]
    if full:
        assert lengths[full[0][0]] == max(lengths[i] for b in full for i in b)


def test_length_grouped_batches_pad_less_and_still_shuffle() -> None:
    lengths = _lengths(2000, seed=1)
    grouped = LengthGroupedSampler(lengths, 32, 50, seed=0)
    plain = EpochSeededSampler(2000, seed=0)
    assert _padding(_batches(grouped, 32), lengths) < 1.15
    assert _padding(_batches(plain, 32), lengths) > 1.5
    first = _batches(grouped, 32)
    grouped.set_epoch(1)
    second = _batches(grouped, 32)
    assert first != second and {frozenset(b) for b in first} != {frozenset(b) for b in second}
    # Batch order is shuffled: not sorted by length across batches.
    heads = [lengths[b[0]] for b in first[1:]]
    assert heads != sorted(heads) and heads != sorted(heads, reverse=True)


def test_length_grouped_ranks_read_their_share_of_each_global_batch() -> None:
    lengths = _lengths(90, seed=2)
    size, world = 4, 3
    ranks = [LengthGroupedSampler(lengths, size, 5, seed=1, rank=r, world=world) for r in range(3)]
    per_rank = [_batches(s, size) for s in ranks]
    assert len({len(b) for b in per_rank}) == 1
    one = LengthGroupedSampler(lengths, size * world, 5, seed=1)
    global_batches = _batches(one, size * world)
    for k, global_batch in enumerate(global_batches):
        shares = [i for r in range(world) for i in per_rank[r][k]]
        assert sorted(shares) == sorted(global_batch)


def test_length_grouped_resume_skips_what_was_read() -> None:
    sampler = LengthGroupedSampler(_lengths(50), 4, 3, seed=0)
    sampler.set_epoch(1)
    full = list(sampler)
    sampler.resume_at(1, 12)
    assert list(sampler) == full[12:]


def test_length_grouped_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="got 0 and 3"):
        LengthGroupedSampler([1, 2], 0, 3, seed=0)
    with pytest.raises(ValueError, match="got 2 and 0"):
        LengthGroupedSampler([1, 2], 2, 0, seed=0)
    with pytest.raises(ValueError, match=r"\(1, -4\)"):
        LengthGroupedSampler([1, -4], 2, 1, seed=0)
    assert list(LengthGroupedSampler([], 4, 2, seed=0)) == []


def test_shards_cover_every_item_once() -> None:
    shards = [list(ShardSampler(10, r, 3)) for r in range(3)]
    assert sorted(i for s in shards for i in s) == list(range(10))
    assert [len(ShardSampler(10, r, 3)) for r in range(3)] == [4, 3, 3]


def _finance(**kwargs: int) -> TaggingDataModule:
    corpus = FinanceCorpus(train_docs=6, dev_docs=1, test_docs=1)
    return TaggingDataModule(corpus, batch_size=8, needs=(), **kwargs)


def test_data_module_groups_training_batches_by_the_models_lengths() -> None:
    dm = _finance(length_window=4)
    loader = dm.train_dataloader()
    assert isinstance(loader.sampler, LengthGroupedSampler)
    assert loader.sampler.lengths == [len(s.tokens) for s in dm.splits["train"]]
    batches = list(loader)
    assert sum(b.mask.shape[0] for b in batches) == len(dm.splits["train"])
    words = [len(s.tokens) for s in dm.splits["train"]]
    grouped = _padding([[dm.splits["train"].index(s) for s in b.sentences] for b in batches], words)
    plain = _padding(_batches(EpochSeededSampler(len(words), 0), 8), words)
    assert grouped < plain
    # The model's own measure (say pieces) replaces the words.
    dm.set_lengths(lambda sentences: [100 - len(s.tokens) for s in sentences])
    sampler = dm.train_dataloader().sampler
    assert isinstance(sampler, LengthGroupedSampler)
    assert sampler.lengths == [100 - n for n in words]
    dm.set_lengths(lambda sentences: [1])
    with pytest.raises(ValueError, match=r"gave 1 lengths for \d+ sentences"):
        dm.train_dataloader()
    # Evaluation order is unchanged, and no window is the plain shuffle.
    assert isinstance(dm.val_dataloader().sampler, ShardSampler)
    assert type(_finance().train_dataloader().sampler) is EpochSeededSampler


def test_data_module_refuses_a_negative_window() -> None:
    with pytest.raises(ValueError, match=r"length_window must be >= 0.*got -1"):
        _finance(length_window=-1)


def test_loader_cuts_match_the_sampler_batches() -> None:
    lengths = _lengths(37)
    sampler = LengthGroupedSampler(lengths, 5, 2, seed=0)
    cut = [b.tolist() for b in DataLoader(range(37), batch_size=5, sampler=sampler)]
    assert cut == _batches(sampler, 5)

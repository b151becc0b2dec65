"""Groupings and grouped batches: every sentence in exactly one group, batches never cross groups."""

from __future__ import annotations

import pytest

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.grouping import DocumentGroups, TweetGroups, chunk
from crfhead.data.sentence import Sentence


def _s(text: str, doc: str | None = None) -> Sentence:
    return Sentence(tokens=text.split(), doc_id=doc)


def test_chunk_cuts_each_group_in_order() -> None:
    assert chunk([[0, 1, 2, 3, 4], [5]], 2) == [[0, 1], [2, 3], [4], [5]]
    assert chunk([[0, 1, 2]], None) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="max_size"):
        chunk([[0]], 0)


def test_document_groups_follow_doc_ids_and_leave_unknown_documents_alone() -> None:
    sentences = [_s("a", "d1"), _s("b", "d1"), _s("c"), _s("d", "d2"), _s("e", "d1"), _s("f")]
    assert DocumentGroups()(sentences) == [[0, 1, 4], [2], [3], [5]]
    assert DocumentGroups(max_size=2)(sentences) == [[0, 1], [4], [2], [3], [5]]


def test_tweet_groups_link_tweets_sharing_more_than_threshold_words() -> None:
    tweets = [
        _s("one two three four five six"),
        _s("nothing in common here"),
        _s("ONE two three four five seven"),
    ]
    assert TweetGroups(threshold=4)(tweets) == [[0, 2], [1]]
    assert TweetGroups(threshold=5)(tweets) == [[0], [1], [2]]
    assert TweetGroups(threshold=4, lowercase=False)(tweets) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="threshold"):
        TweetGroups(threshold=-1)


def test_grouped_batches_hold_whole_groups_and_batch_size_counts_groups() -> None:
    dm = TaggingDataModule(
        corpus=FinanceCorpus(train_docs=5, dev_docs=2, test_docs=2),
        batch_size=2,
        eval_batch_size=3,
        grouping=DocumentGroups(),
    )
    for split, loader in (("train", dm.train_dataloader()), ("dev", dm.val_dataloader())):
        seen: list[str] = []
        per_batch = 2 if split == "train" else 3
        for batch in loader:
            assert batch.groups is not None and len(batch.groups) <= per_batch
            assert sorted(r for g in batch.groups for r in g) == list(range(len(batch.sentences)))
            for rows in batch.groups:
                docs = {batch.sentences[r].doc_id for r in rows}
                assert len(docs) == 1  # no group crosses documents...
                seen.append(docs.pop() or "")
            assert batch.mask.shape[0] == len(batch.sentences)
        # ...and every document is one group, seen once per epoch.
        docs = {s.doc_id for s in dm.splits[split]}
        assert sorted(seen) == sorted(d or "" for d in docs)


def test_ungrouped_batches_have_no_groups() -> None:
    dm = TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1))
    assert next(iter(dm.train_dataloader())).groups is None


def test_batch_sizes_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="batch_size=0"):
        TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1), batch_size=0)


def test_ignored_words_never_link_two_tweets() -> None:
    from crfhead.data.grouping import STOPWORDS, TweetGroups, group_statistics

    a = Sentence("_URL_ via _Mention_ the new album is out".split())
    b = Sentence("_url_ via _mention_ the new phone is here".split())
    c = Sentence("the new album is out now on vinyl".split())
    # a and b share _url_, via, _mention_, the, new, is: six words, more than the threshold of 4.
    assert TweetGroups(threshold=4).groups([a, b, c]) == [[0, 1, 2]]
    assert TweetGroups(threshold=4, ignore=["placeholders"]).groups([a, b, c]) == [[0, 2], [1]]
    both = TweetGroups(threshold=1, ignore=["placeholders", "stopwords"])
    assert both.groups([a, b, c]) == [[0, 2], [1]]  # a and c share "new" and "album"; b only "new"
    assert "the" in STOPWORDS and "album" not in STOPWORDS
    assert TweetGroups(threshold=4, ignore=["new", "is", "the"]).groups([a, b]) == [[0], [1]]
    with pytest.raises(ValueError, match="ignore must be a list"):
        TweetGroups(ignore="stopwords")  # type: ignore[arg-type]
    assert "ignore=['placeholders']" in repr(TweetGroups(ignore=["placeholders"]))
    stats = group_statistics([[0, 2], [1], [3, 4, 5]])
    assert stats == {
        "groups": 3.0,
        "sentences": 6.0,
        "singletons": 1.0,
        "in_multi": 5.0,
        "largest": 3.0,
        "mean_multi_size": 2.5,
    }


def test_group_folds_keep_groups_whole_and_balance_sizes() -> None:
    from crfhead.data.grouping import group_folds

    groups = [[0, 1, 2, 3, 4], [5], [6, 7], [8], [9, 10, 11], [12], [13, 14], [15]]
    folds = group_folds(groups, 3, seed=1)
    assert sorted(i for f in folds for i in f) == list(range(16))
    for g in groups:
        assert sum(set(g) <= set(f) for f in folds) == 1, g  # whole, in exactly one fold
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= 5 and sizes == [6, 5, 5]
    assert group_folds(groups, 3, seed=1) == folds  # deterministic
    with pytest.raises(ValueError, match="2 <= k <= 8"):
        group_folds(groups, 9)
    with pytest.raises(ValueError, match="repeat a sentence"):
        group_folds([[0, 1], [1]], 2)

"""Groups of sentences decoded jointly by a higher-order decoder: tweet clusters and documents.

* :func:`group_tweets` -- the seed's grouping of tweets (Qian & Liu, TACL 2014, "Global Features"):
  single-linkage clustering where two tweets are linked when they share more than ``threshold``
  distinct words (the seed: "if the similarity is greater than 4"), with no length normalisation.
* :data:`PLACEHOLDERS`, :data:`STOPWORDS` -- words a grouping may leave out of the count
  (``TweetGroups(ignore=["placeholders", "stopwords"])``): the corpus's ``_URL_``, ``_Mention_`` and
  bracket tokens and the commonest English function words link unrelated tweets into one huge
  component under single linkage;
* :func:`group_folds` -- cross-validation folds that keep every group inside one fold;
* :func:`group_statistics` -- what a grouping made of a split (sizes, tweets in multi-tweet groups);
* :class:`Grouping` -- what the data module is given (``data.grouping`` in a config) to batch whole
  groups: :class:`TweetGroups` (:func:`group_tweets`) and :class:`DocumentGroups` (``doc_id``, e.g.
  CoNLL-2003 ``-DOCSTART-`` documents). Either may cut groups to ``max_size`` sentences
  (:func:`chunk`), a decision a run states in its config.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from crfhead.data.sentence import Sentence

__all__ = [
    "IGNORE_SETS",
    "PLACEHOLDERS",
    "STOPWORDS",
    "DocumentGroups",
    "Grouping",
    "TweetGroups",
    "chunk",
    "group_folds",
    "group_statistics",
    "group_tweets",
    "has_alnum",
]

PLACEHOLDERS = frozenset(
    {"_url_", "_mention_", "-lrb-", "-rrb-", "-lsb-", "-rsb-", "-lcb-", "-rcb-"}
)
"""The placeholder tokens of the tweet corpora (lowercased): a URL, a user mention, brackets."""

STOPWORDS = frozenset(
    """a about after all also an and any are as at be been but by can could did do does for from
    had has have he her him his how i if in into is it its just me more my no not now of on one
    or our out over she so some than that the their them then there they this to too up us was we
    were what when which who will with would you your rt via""".split()
)
"""The commonest English function words (lowercased), plus the tweet markers ``rt`` and ``via``."""

IGNORE_SETS = {"placeholders": PLACEHOLDERS, "stopwords": STOPWORDS}
"""Named word sets a :class:`TweetGroups` ``ignore`` list may give by name."""


def has_alnum(token: str) -> bool:
    """The token has a letter or digit (a *word*, for grouping and for the pattern builders)."""
    return any(ch.isalnum() for ch in token)


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:  # path compression
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def group_tweets(
    sentences: Sequence[Sequence[str]],
    threshold: int = 4,
    lowercase: bool = True,
    ignore: Collection[str] = (),
) -> list[list[int]]:
    """Group tweets by single linkage on the number of distinct words two tweets share.

    Two tweets are linked when they share *more than* ``threshold`` distinct words; the groups are
    the connected components of that graph (so linkage is transitive: A–B and B–C put A, B and C in
    one group even if A and C share nothing). A *word* is a token with at least one alphanumeric
    character (punctuation-only tokens such as ``:`` or ``!`` are not counted), compared after
    lowercasing when ``lowercase``.

    Exact, without comparing all pairs: tweets that share ``s = threshold + 1`` words must share a
    word among the ``|words| − s + 1`` rarest of each (prefix filtering, Bayardo et al. 2007), so
    only those prefix words are indexed and probed, and each candidate pair is verified by a set
    intersection; pairs already in one component are not verified. Tweets with fewer than ``s``
    words are singletons.

    Args:
        sentences: the tweets, as token sequences.
        threshold: link when the number of shared words is greater than this (``>= 0``).
        lowercase: compare words case-insensitively.
        ignore: words never counted as shared (compared lowercased when ``lowercase``).

    Returns:
        Every tweet index in exactly one group; each group sorted, groups ordered by first index.

    Raises:
        ValueError: a negative threshold.
    """
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    need = threshold + 1
    skip = {w.lower() for w in ignore} if lowercase else set(ignore)
    words = [
        {w.lower() if lowercase else w for w in sentence if has_alnum(w)} - skip
        for sentence in sentences
    ]
    frequency: dict[str, int] = {}
    for ws in words:
        for w in ws:
            frequency[w] = frequency.get(w, 0) + 1
    uf = _UnionFind(len(words))
    index: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        if len(ws) < need:
            continue
        prefix = sorted(ws, key=lambda w: (frequency[w], w))[: len(ws) - need + 1]
        candidates: set[int] = set()
        for w in prefix:
            candidates.update(index.get(w, ()))
            index.setdefault(w, []).append(i)
        for j in sorted(candidates):
            if uf.find(i) != uf.find(j) and len(ws & words[j]) >= need:
                uf.union(i, j)
    groups: dict[int, list[int]] = {}
    for i in range(len(words)):
        groups.setdefault(uf.find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def chunk(groups: Sequence[Sequence[int]], max_size: int | None) -> list[list[int]]:
    """Each group cut into consecutive pieces of at most ``max_size`` members (``None``: uncut).

    Single linkage can chain many tweets through common words into one component (at threshold 4,
    1,303 of the 2,251 tweets of our MSM2013 training split); a cap keeps the joint decoding and a
    perceptron update per group local.
    """
    if max_size is not None and max_size < 1:
        raise ValueError(f"max_size must be >= 1 or None, got {max_size}")
    if max_size is None:
        return [list(g) for g in groups]
    return [list(g[i : i + max_size]) for g in groups for i in range(0, len(g), max_size)]


def group_folds(groups: Sequence[Sequence[int]], k: int, seed: int = 13) -> list[list[int]]:
    """``k`` test folds of sentence indices, each group whole inside one fold, sizes balanced.

    The groups are shuffled by ``random.Random(seed)`` (Python guarantees its sequence across
    versions and machines), then placed largest first, each into the fold with the fewest sentences
    so far (ties: the lowest fold), so fold sizes differ by at most the largest group's size. Fold
    ``i`` tests on ``folds[i]`` and trains on the rest.

    Raises:
        ValueError: ``k < 2``, more folds than groups, or groups that repeat a sentence.
    """
    import random

    if k < 2 or k > len(groups):
        raise ValueError(f"k={k} folds need 2 <= k <= {len(groups)} (the number of groups)")
    flat = [i for g in groups for i in g]
    if len(flat) != len(set(flat)):
        raise ValueError("the groups repeat a sentence: each must be in exactly one group")
    order = [list(g) for g in groups]
    random.Random(seed).shuffle(order)
    order.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    folds: list[list[int]] = [[] for _ in range(k)]
    for group in order:
        smallest = min(range(k), key=lambda f: (len(folds[f]), f))
        folds[smallest].extend(group)
    return [sorted(f) for f in folds]


def group_statistics(groups: Sequence[Sequence[int]]) -> dict[str, float]:
    """What a grouping made of a split: how many groups, how large, how many sentences share one.

    Returns:
        ``groups``, ``sentences``, ``singletons``, ``in_multi`` (sentences in a group of two or
        more), ``largest`` and ``mean_multi_size`` (the mean size of the groups of two or more).
    """
    sizes = [len(g) for g in groups]
    multi = [n for n in sizes if n > 1]
    return {
        "groups": float(len(sizes)),
        "sentences": float(sum(sizes)),
        "singletons": float(sum(1 for n in sizes if n == 1)),
        "in_multi": float(sum(multi)),
        "largest": float(max(sizes, default=0)),
        "mean_multi_size": sum(multi) / len(multi) if multi else 0.0,
    }


class Grouping:
    """How a split's sentences fall into groups: every index in exactly one group, in order.

    Args:
        max_size: cut every group into pieces of at most this many sentences (``None``: uncut).
    """

    def __init__(self, max_size: int | None = None) -> None:
        chunk([], max_size)  # validates
        self.max_size = max_size

    def groups(self, sentences: Sequence[Sentence]) -> list[list[int]]:
        """The groups, uncut: lists of sentence indices, each sorted, ordered by first index."""
        raise NotImplementedError

    def __call__(self, sentences: Sequence[Sentence]) -> list[list[int]]:
        """The groups cut to ``max_size``."""
        return chunk(self.groups(sentences), self.max_size)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


class TweetGroups(Grouping):
    """:func:`group_tweets` over the split (the seed's MSM2013 groups).

    Args:
        threshold: link two tweets sharing more than this many distinct words.
        lowercase: compare words case-insensitively.
        max_size: see :class:`Grouping`.
        ignore: words never counted as shared: words, or the names of :data:`IGNORE_SETS`
            (``["placeholders", "stopwords"]``). The seed counts every word (the default).

    Raises:
        ValueError: a negative threshold; an ``ignore`` that is a single string.
    """

    def __init__(
        self,
        threshold: int = 4,
        lowercase: bool = True,
        max_size: int | None = None,
        ignore: Sequence[str] = (),
    ) -> None:
        if threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {threshold}")
        if isinstance(ignore, str):
            raise ValueError(f"ignore must be a list of words or set names, got {ignore!r}")
        super().__init__(max_size)
        self.threshold, self.lowercase = threshold, lowercase
        self.ignore = list(ignore)
        self._skip = frozenset(w for name in ignore for w in IGNORE_SETS.get(name, (name,)))

    def groups(self, sentences: Sequence[Sentence]) -> list[list[int]]:  # noqa: D102
        return group_tweets(
            [s.tokens for s in sentences], self.threshold, self.lowercase, self._skip
        )


class DocumentGroups(Grouping):
    """The sentences of one document (same ``doc_id``) form a group; no ``doc_id``: a singleton.

    Args:
        max_size: see :class:`Grouping`.
    """

    def groups(self, sentences: Sequence[Sentence]) -> list[list[int]]:  # noqa: D102
        by_doc: dict[str, list[int]] = {}
        out: list[list[int]] = []
        for i, s in enumerate(sentences):
            if s.doc_id is None:
                out.append([i])
            elif s.doc_id in by_doc:
                by_doc[s.doc_id].append(i)
            else:
                by_doc[s.doc_id] = [i]
                out.append(by_doc[s.doc_id])
        return out

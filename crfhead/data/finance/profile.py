"""Profiles of the finance generator: the knobs that set how many test tokens are unseen, and which.

The seed's finance case study (*Sequence Labeling: From HMMs to Linear-Chain CRFs*, "Finance case study")
reports 0.369 of the test tokens unseen after 3 training documents and 0.138 after 30, and accuracy
on those tokens of 0.911 (HMM) to 0.958 (perceptron) at 30 documents. Both profiles match the rates;
they differ in what the unseen tokens are:

* :data:`DEFAULT` (``"default"``), the corpus every earlier result was measured on: names come
  mostly from the syllable generator, so at 30 documents about 0.9 of the unseen tokens are names
  (person, company, place, product) and an HMM, whose context reaches a tag only through the
  transitions, tags about a third of them right.
* :data:`SEED` (``"seed"``), calibrated to the seed's statistics: names recur more (curated lists,
  drawn by Zipf rank, far more often than generated words), and a sentence may open with an
  *aside*, an ``O`` phrase (``amid resilient freight demand,``: a connective, an adjective and two
  nouns drawn uniformly from the lexicon's long lists), and the common templates are commoner,
  so most unseen tokens are ordinary words
  outside every entity, as the seed's accuracies on unseen tokens imply (an unseen token that is
  almost always ``O`` is easy; an unseen name is not). The knobs were set on the unseen rates and
  their composition (:func:`~crfhead.data.finance.stats.unseen_composition`) alone, never on a
  tagger's scores. Over 4 pairs of runs (train run 2i, test run 2i + 1, 200 test documents), 0.374
  of the test tokens are unseen after 3 documents, 0.232 after 10 and 0.139 after 30, and 0.69,
  0.71 and 0.74 of those are ``O`` (:data:`DEFAULT`: 0.38, 0.22, 0.13 and 0.51, 0.33, 0.10).

A profile is part of a corpus run's contract: the same seed and profile give the same documents.
:data:`DEFAULT` draws exactly what the generator drew before profiles existed (the golden digest in
``tests/data/test_finance.py``); an aside is drawn only in a profile with ``p_aside > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "PROFILES", "SEED", "Profile", "profile"]


@dataclass(frozen=True)
class Profile:
    """The generator's name-novelty and aside knobs (probabilities per draw).

    Attributes:
        name: the profile's name (``FinanceCorpus(profile=...)``).
        p_flagship: a document's company (or a rival) is one of the six recurring flagships.
        p_pseudo_brand: a company brand is a generated word, not a curated brand word.
        p_pseudo_surname: a surname is a generated word, not a curated surname.
        p_gpe_org: a company is named after a place (``ohio power``).
        p_surname_org: a company is named after a person (``novak partners``).
        p_town: a place is a generated town, not a curated place.
        name_zipf: curated first names, surnames, brands and places are drawn by Zipf rank with
            this exponent (``1 / rank ** s``; 0: uniformly), so a few names recur, as in real text.
        template_zipf: within a template group, the template of rank ``r`` is drawn with weight
            ``1 / r ** s``: the first templates are the common ones, and a larger ``s`` covers the
            templates' vocabulary sooner.
        p_aside: a sentence opens with an aside (``amid resilient freight demand,``).
        aside_zipf: the exponent of the asides' adjective and noun ranks (``1 / rank ** s``).
    """

    name: str
    p_flagship: float = 0.1
    p_pseudo_brand: float = 0.95
    p_pseudo_surname: float = 0.97
    p_gpe_org: float = 0.12
    p_surname_org: float = 0.08
    p_town: float = 0.7
    name_zipf: float = 0.0
    template_zipf: float = 0.7
    p_aside: float = 0.0
    aside_zipf: float = 0.0

    def __post_init__(self) -> None:
        for key in (
            "p_flagship",
            "p_pseudo_brand",
            "p_pseudo_surname",
            "p_gpe_org",
            "p_surname_org",
            "p_town",
            "p_aside",
        ):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Profile {self.name!r}: {key} must be in [0, 1], got {value}")
        if self.p_gpe_org + self.p_surname_org > 1.0:
            raise ValueError(
                f"Profile {self.name!r}: p_gpe_org + p_surname_org must be <= 1, got "
                f"{self.p_gpe_org} + {self.p_surname_org}"
            )
        for key in ("name_zipf", "template_zipf", "aside_zipf"):
            if getattr(self, key) < 0:
                raise ValueError(
                    f"Profile {self.name!r}: {key} must be >= 0, got {getattr(self, key)}"
                )


DEFAULT = Profile("default")
"""The corpus as it was before profiles: unseen tokens are mostly generated names."""

SEED = Profile(
    "seed",
    p_pseudo_brand=0.03,
    p_pseudo_surname=0.03,
    p_town=0.03,
    name_zipf=1.0,
    template_zipf=1.6,
    p_aside=0.9,
    aside_zipf=0.0,
)
"""Calibrated to the seed's statistics: unseen tokens are mostly open-class words outside entities."""

PROFILES: dict[str, Profile] = {p.name: p for p in (DEFAULT, SEED)}
"""The named profiles."""


def profile(spec: str | Profile) -> Profile:
    """The profile named ``spec`` (or ``spec`` itself); ``ValueError`` listing the names if unknown."""
    if isinstance(spec, Profile):
        return spec
    try:
        return PROFILES[spec]
    except KeyError:
        raise ValueError(f"unknown finance profile {spec!r}; known: {sorted(PROFILES)}") from None

"""The suite's two sizes: the default (what CI runs) and ``--full`` (the slow exhaustive variants too).

``pytest --full`` (or ``CRFHEAD_FULL=1``, which ``--full`` sets, so subprocesses and test modules see
it at import) runs the tests marked ``slow``, Hypothesis's ``thorough`` profile (300 examples per
property instead of 25) and the larger sizes the tests choose with :func:`helpers.full`: 1,000
random groups per higher-order decoder, the Triton interpreter on full-size chains with exact
gradchecks. Every oracle runs in the default suite too, at a smaller size.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

FULL_ENV = "CRFHEAD_FULL"

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        default=False,
        help="also the slow exhaustive variants (tests marked slow, 300 Hypothesis examples, "
        "full sizes); sets CRFHEAD_FULL=1",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--full"):
        os.environ[FULL_ENV] = "1"
    full = os.environ.get(FULL_ENV) == "1"
    settings.load_profile("thorough" if full else os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(FULL_ENV) == "1":
        return
    skip = pytest.mark.skip(reason="a slow exhaustive variant: run with --full")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)

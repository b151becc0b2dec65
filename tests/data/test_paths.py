"""The data root: ``$CRFHEAD_DATA``, a source checkout's ``../shared/data``, else the user data folder
(never a folder inside ``site-packages``); a missing file says how to set ``CRFHEAD_DATA``."""

from __future__ import annotations

from pathlib import Path

import pytest

from crfhead.data import paths


def _layout(tmp_path: Path, *, checkout: bool, shared: bool) -> Path:
    """A fake ``<root>/<project>/crfhead/data`` tree; returns the project folder."""
    project = tmp_path / "project"
    (project / "crfhead" / "data").mkdir(parents=True)
    if checkout:
        (project / "pyproject.toml").write_text("[project]\nname = 'crfhead'\n")
    if shared:
        (tmp_path / "shared" / "data").mkdir(parents=True)
    return project


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("CRFHEAD_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "crfhead" / "data"


def test_crfhead_data_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(paths, "_CHECKOUT", _layout(tmp_path, checkout=True, shared=True))
    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path / "mine"))
    assert paths.data_dir() == tmp_path / "mine"


def test_a_source_checkout_uses_its_sibling_shared_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_env: Path
) -> None:
    monkeypatch.setattr(paths, "_CHECKOUT", _layout(tmp_path, checkout=True, shared=True))
    assert paths.data_dir() == tmp_path / "shared" / "data"


def test_a_checkout_without_shared_data_uses_the_user_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_env: Path
) -> None:
    monkeypatch.setattr(paths, "_CHECKOUT", _layout(tmp_path, checkout=True, shared=False))
    assert paths.data_dir() == no_env


def test_an_installed_package_never_looks_beside_site_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_env: Path
) -> None:
    # site-packages/../shared/data exists by chance: an installed package ignores it.
    monkeypatch.setattr(paths, "_CHECKOUT", _layout(tmp_path, checkout=False, shared=True))
    assert paths.data_dir() == no_env == paths.user_data_dir()


def test_the_user_folder_defaults_to_local_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setattr(paths.sys, "platform", "linux")
    assert paths.user_data_dir() == Path.home() / ".local" / "share" / "crfhead" / "data"


def test_error_missing_corpus_says_how_to_set_crfhead_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_env: Path
) -> None:
    monkeypatch.setattr(paths, "_CHECKOUT", _layout(tmp_path, checkout=False, shared=False))
    with pytest.raises(FileNotFoundError) as err:
        paths.data_path("conll2003", "train.txt")
    message = str(err.value)
    assert str(no_env / "conll2003" / "train.txt") in message
    assert "the default data root" in message and "export CRFHEAD_DATA=" in message

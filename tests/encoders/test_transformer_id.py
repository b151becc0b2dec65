"""``TransformerEncoder(model=...)`` takes a HuggingFace model id as well as a folder: a cached id loads
offline; an id that is not cached fails offline in one line that says so (no network in tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crfhead.encoders import TransformerEncoder

transformers = pytest.importorskip("transformers")

WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ada", "visits", "paris", "##s"]


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HuggingFace hub cache, with the hub offline."""
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _tiny_bert(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(WORDPIECES) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    config = transformers.BertConfig(
        vocab_size=len(WORDPIECES),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=20,
        max_position_embeddings=32,
    )
    transformers.BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _put_in_cache(cache: Path, model_id: str, folder: Path) -> None:
    """Lay ``folder`` out as the hub's cache holds a downloaded snapshot of ``model_id``."""
    repo = cache / f"models--{model_id.replace('/', '--')}"
    revision = "0" * 40
    shutil.copytree(folder, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)


def test_a_cached_model_id_loads_offline(tmp_path: Path, offline_cache: Path) -> None:
    _put_in_cache(offline_cache, "tiny-org/tiny-bert", _tiny_bert(tmp_path / "tiny"))
    encoder = TransformerEncoder(num_tags=3, model="tiny-org/tiny-bert")
    assert encoder.model_dir == "tiny-org/tiny-bert"
    assert encoder.head.in_features == 16 and encoder.aligner.max_length == 32


def test_a_folder_wins_over_an_id_of_the_same_name(
    tmp_path: Path, offline_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tiny_bert(tmp_path / "tiny-org" / "tiny-bert")
    monkeypatch.chdir(tmp_path)
    encoder = TransformerEncoder(num_tags=3, model="tiny-org/tiny-bert")
    assert encoder.model_dir == "tiny-org/tiny-bert"  # read from ./tiny-org/tiny-bert
    assert encoder.head.in_features == 16


def test_error_an_uncached_id_offline_fails_in_one_line(offline_cache: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        TransformerEncoder(num_tags=3, model="nobody/not-cached-model")
    message = str(err.value)
    assert "\n" not in message
    assert (
        "'nobody/not-cached-model' is not a local folder and is not in the HuggingFace" in message
    )
    assert str(offline_cache) in message and "HF_HUB_OFFLINE=1" in message
    assert err.value.__suppress_context__  # the hub's own traceback is not chained


def test_error_a_missing_path_is_still_named_as_a_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"model folder '.*no-such-model' does not exist"):
        TransformerEncoder(num_tags=3, model=str(tmp_path / "no-such-model"))
    with pytest.raises(FileNotFoundError, match=r"model folder 'gone' does not exist"):
        TransformerEncoder(num_tags=3, model="./gone")


def test_error_an_uncached_id_without_network_fails_fast_in_one_line(
    offline_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)

    def no_network(*args: object, **kwargs: object) -> socket.socket:
        raise OSError("[Errno -2] Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(FileNotFoundError) as err:
        TransformerEncoder(num_tags=3, model="nobody/not-cached-model")
    message = str(err.value)
    assert "\n" not in message and "is not in the HuggingFace cache" in message
    assert "huggingface.co:443 cannot be reached" in message

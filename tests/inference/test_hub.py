"""Hub models, never the network: ``crfhead.load("org/name")`` from a local Hugging Face cache layout
(``models--org--name/snapshots/<sha>``, ``refs/main``) and from a tiny local HTTP Hub (``HF_ENDPOINT``
on 127.0.0.1: the real ``snapshot_download``, then offline from the cache it filled),
``push_to_hub`` into a local file-based fake ``HfApi`` and back, what reads as a repository id, and
one test per error message (not cached offline, no such repository / revision, gated, unreachable,
a local path that does not exist, a cached folder that is not a crfhead model or names a foreign
class)."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import torch

import crfhead
from crfhead.data.corpora import InMemoryCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.inference import hub, saved
from crfhead.inference.hub import parse_repo_id, resolve_model_path
from crfhead.inference.hub_push import push_to_hub
from crfhead.inference.saved import read_model
from crfhead.inference.text_tagger import TextTagger
from crfhead.model.tagger import Tagger

__all__: list[str] = []

TEXT = "Ada met Bob at Acme Corp in London, said Initech."
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tagger() -> TextTagger:
    """A tagger with seeded random weights (no training: what is checked is that they travel)."""
    sentences = [
        Sentence(
            ["Ada", "Lovelace", "met", "Acme", "Corp", "in", "London"],
            ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O", "B-LOC"],
        ),
        Sentence(["Bob", "runs", "Initech"], ["B-PER", "O", "B-ORG"]),
    ]
    corpus = InMemoryCorpus({"train": sentences, "dev": sentences, "test": sentences})
    data = TaggingDataModule(corpus=corpus)
    model = Tagger.build(data.vocabs)
    generator = torch.Generator().manual_seed(28)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    config = {
        "encoder": {"class_path": "crfhead.encoders.IndicatorEncoder"},
        "head": {"class_path": "crfhead.heads.CRF"},
        "constrained": True,
    }
    out = TextTagger(model, data.vocabs, config)
    assert out.tag(TEXT), "the random weights should find some entity in TEXT"
    return out


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache, offline, with the environment's caches pointed away from the user's."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HOME", raising=False)
    return cache


def _cache(cache: Path, repo: Path, repo_id: str = "org/name", sha: str = SHA) -> Path:
    """Put ``repo``'s files in ``cache`` as ``snapshot_download`` leaves them; ``refs/main`` → sha."""
    root = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = root / "snapshots" / sha
    shutil.copytree(repo, snapshot)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(sha)
    return snapshot


class LocalApi:
    """``HfApi``'s two methods push_to_hub calls, writing into local folders (one per repo)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        (self.root / repo_id).mkdir(parents=True, exist_ok=True)
        return f"https://hub.local/{repo_id}"

    def upload_folder(self, *, repo_id: str, folder_path: str, **kwargs: Any) -> Any:
        self.calls.append(("upload_folder", {"repo_id": repo_id, **kwargs}))
        shutil.copytree(folder_path, self.root / repo_id, dirs_exist_ok=True)

        class Info:
            commit_url = f"https://hub.local/{repo_id}/commit/{SHA}"

        return Info()


# What reads as a repository id -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("org/name", ("org/name", None)),
        ("Org-1/my.model_v2", ("Org-1/my.model_v2", None)),
        ("org/name@v1.0", ("org/name", "v1.0")),
        (f"org/name@{SHA}", ("org/name", SHA)),
        ("org/name@refs/pr/1", ("org/name", "refs/pr/1")),
        ("name", None),  # one segment: a local path
        ("./org/name", None),
        ("../org/name", None),
        ("/org/name", None),
        ("~/name", None),
        ("org\\name", None),
        ("a/b/c", None),  # more than one slash
        ("org/model.ckpt", None),  # a file's extension
        ("org/name.json", None),
        ("org/na--me", None),  # refused by the Hub
        ("org/-name", None),
        ("org/name.", None),
        ("org/name@", None),
        ("org/", None),
    ],
)
def test_what_reads_as_a_repo_id(path: str, expected: tuple[str, str | None] | None) -> None:
    assert parse_repo_id(path) == expected


def test_a_local_folder_named_like_the_owner_makes_it_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_repo_id("runs/model") == ("runs/model", None)
    (tmp_path / "runs").mkdir()
    assert parse_repo_id("runs/model") is None
    with pytest.raises(
        FileNotFoundError, match="no model at runs/model: give a training checkpoint"
    ):
        crfhead.load("runs/model")


@pytest.mark.parametrize("path", ["./missing", "missing.ckpt", "a/b/c", "/no/such/model"])
def test_error_a_missing_local_path_keeps_the_local_message(path: str, offline: Path) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"^no model at .*: give a training checkpoint or a saved folder$"
    ):
        crfhead.load(path)
    assert resolve_model_path(path) == Path(path)


# Loading from the cache --------------------------------------------------------------------------


def test_load_from_the_cache_offline_tags_as_the_original(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    snapshot = _cache(offline, tagger.save(tmp_path / "repo"))
    assert resolve_model_path("org/name") == snapshot
    loaded = crfhead.load("org/name")
    assert loaded.tag(TEXT) == tagger.tag(TEXT)
    assert read_model(f"org/name@{SHA}").source == snapshot  # a commit: no refs needed
    assert read_model("org/name", revision="main").source == snapshot


def test_cache_dir_argument_wins_over_the_environment(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    other = tmp_path / "other-cache"
    snapshot = _cache(other, tagger.save(tmp_path / "repo"))
    assert read_model("org/name", cache_dir=other).source == snapshot
    with pytest.raises(FileNotFoundError, match="not in the Hugging Face cache"):
        read_model("org/name")  # $HF_HUB_CACHE is the empty one


def test_error_offline_and_not_cached_says_how_to_fix(offline: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        crfhead.load("org/absent")
    assert str(info.value) == (
        "no model at 'org/absent': not a local path, and Hub model org/absent is not in the "
        f"Hugging Face cache {offline} and HF_HUB_OFFLINE is set: download it once online "
        "(unset HF_HUB_OFFLINE), or pass cache_dir= / set HF_HUB_CACHE to the cache that holds it"
    )


def test_error_offline_revision_not_cached_names_it(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    _cache(offline, tagger.save(tmp_path / "repo"))
    with pytest.raises(
        FileNotFoundError,
        match=r"Hub model org/name \(revision v9\) is not in the Hugging Face cache",
    ):
        crfhead.load("org/name@v9")


def test_error_two_revisions_that_disagree(offline: Path) -> None:
    with pytest.raises(
        ValueError, match="'org/name@v1' names revision 'v1' but revision='v2' was given"
    ):
        read_model("org/name@v1", revision="v2")


def test_error_a_cached_repo_that_is_not_a_crfhead_model(tmp_path: Path, offline: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# a dataset card\n")
    _cache(offline, repo)
    with pytest.raises(
        ValueError, match=r"snapshots/0123.*: not a saved crfhead model \(config.json is missing\)"
    ):
        crfhead.load("org/name")


def test_a_cached_repo_gets_the_local_folder_checks(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    repo = tagger.save(tmp_path / "repo")
    config = json.loads((repo / "config.json").read_text())
    config["head"] = {"class_path": "evil.Head"}
    (repo / "config.json").write_text(json.dumps(config))
    _cache(offline, repo)
    with pytest.raises(ValueError, match=r"class_path 'evil.Head' refused"):
        crfhead.load("org/name")


# Online errors, from a stubbed snapshot_download (never the network) ------------------------------


def _http_error(cls: type[Exception]) -> Exception:
    err = cls.__new__(cls)
    Exception.__init__(err, "404 Client Error\nmore lines")
    return err


def test_snapshot_download_gets_the_model_files_and_the_call_arguments(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []

    def fake(repo_id: str, **kwargs: Any) -> str:
        calls.append({"repo_id": repo_id, **kwargs})
        return str(tmp_path)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert resolve_model_path("org/name@v1", cache_dir=tmp_path / "c") == tmp_path
    (call,) = calls
    assert call["repo_id"] == "org/name" and call["repo_type"] == "model"
    assert call["revision"] == "v1" and call["cache_dir"] == str(tmp_path / "c")
    assert call["local_files_only"] is False and call["library_name"] == "crfhead"
    assert call["allow_patterns"] == hub.ALLOW_PATTERNS
    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    resolve_model_path("org/name")
    assert calls[1]["local_files_only"] is True and calls[1]["revision"] is None


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            "RepositoryNotFoundError",
            r"Hub model org/name does not exist or is private \(a private one needs a token: `hf auth login` or HF_TOKEN\)$",
        ),
        ("GatedRepoError", r"Hub model org/name is gated: accept its conditions on the Hub"),
        (
            "RevisionNotFoundError",
            r"Hub model org/name has no revision 'v1': give an existing branch, tag or commit$",
        ),
        (
            "LocalEntryNotFoundError",
            r"\(revision v1\) is not in the Hugging Face cache .* and the Hub cannot be reached \(404 Client Error\): check the connection or HF_ENDPOINT$",
        ),
    ],
)
def test_error_from_the_hub_is_one_line(
    error: str, message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub
    import huggingface_hub.errors as errors

    def fake(repo_id: str, **kwargs: Any) -> str:
        raise _http_error(getattr(errors, error))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(FileNotFoundError, match=message) as info:
        crfhead.load("org/name@v1")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("no model at 'org/name@v1': not a local path, and ")


def test_error_another_hub_error_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError

    def fake(repo_id: str, **kwargs: Any) -> str:
        raise _http_error(HfHubHTTPError)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(
        OSError, match=r"^org/name: the Hugging Face Hub answered: 404 Client Error$"
    ):
        resolve_model_path("org/name")


# Pushing -----------------------------------------------------------------------------------------


def test_push_then_load_back_through_the_cache(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    api = LocalApi(tmp_path / "hub")
    url = push_to_hub(
        tagger, "org/name", private=True, api=api, card={"license": "mit"}, token="tok"
    )
    assert url == f"https://hub.local/org/name/commit/{SHA}"
    assert [name for name, _ in api.calls] == ["create_repo", "upload_folder"]
    create, upload = (kwargs for _, kwargs in api.calls)
    assert create == {
        "repo_id": "org/name",
        "repo_type": "model",
        "private": True,
        "exist_ok": True,
        "token": "tok",
    }
    assert upload["repo_type"] == "model" and upload["commit_message"] == "Upload crfhead model"
    assert upload["delete_patterns"] == hub.ALLOW_PATTERNS and upload["token"] == "tok"
    repo = tmp_path / "hub" / "org" / "name"
    assert {p.name for p in repo.iterdir()} == {
        "config.json",
        "vocabs.json",
        "model.safetensors",
        "README.md",
    }
    card = (repo / "README.md").read_text()
    assert "license: mit" in card and 'crfhead.load("org/name")' in card
    _cache(offline, repo)
    loaded = crfhead.load("org/name")
    assert loaded.tag(TEXT) == tagger.tag(TEXT)
    assert loaded.config["card"] == {"name": "org/name", "license": "mit"}


def test_push_a_saved_folder_uploads_a_fresh_save(
    tagger: TextTagger, tmp_path: Path, offline: Path
) -> None:
    folder = tagger.save(tmp_path / "mine")
    (folder / "notes.txt").write_text("not uploaded")  # only the files a save writes travel
    api = LocalApi(tmp_path / "hub")
    push_to_hub(folder, "org/other", api=api, commit_message="v2")
    repo = tmp_path / "hub" / "org" / "other"
    assert "notes.txt" not in {p.name for p in repo.iterdir()}
    assert api.calls[1][1]["commit_message"] == "v2"
    original = json.loads((folder / "config.json").read_text())
    pushed = json.loads((repo / "config.json").read_text())
    assert pushed["weights_sha256"] == original["weights_sha256"]  # the same weights, bit for bit
    _cache(offline, repo, "org/other")
    assert crfhead.load("org/other").tag(TEXT) == tagger.tag(TEXT)


def test_error_push_a_folder_that_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"not a saved crfhead model \(config.json is missing\)"):
        push_to_hub(tmp_path / "empty", "org/name", api=LocalApi(tmp_path / "hub"))


@pytest.mark.parametrize("repo_id", ["name", "a/b/c", "org/na--me", "org/name@v1", ""])
def test_error_push_bad_repo_id(repo_id: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"repo_id must be 'org/name'"):
        push_to_hub(object(), repo_id, api=LocalApi(tmp_path))


def test_error_push_unknown_card_key_and_not_a_tagger(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown card keys \['licence'\]; allowed: \["):
        push_to_hub(object(), "org/name", api=LocalApi(tmp_path), card={"licence": "mit"})
    with pytest.raises(
        TypeError, match="push_to_hub takes a TextTagger or a saved folder's path, got int"
    ):
        push_to_hub(3, "org/name", api=LocalApi(tmp_path))


def test_push_default_api_is_hfapi_with_the_token(
    tagger: TextTagger, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub

    made: list[Any] = []

    class FakeHfApi(LocalApi):
        def __init__(self, token: str | None = None) -> None:
            super().__init__(tmp_path / "hub")
            made.append(token)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    push_to_hub(tagger, "org/name", token="secret")
    assert made == ["secret"]


def test_the_files_downloaded_are_those_a_save_writes() -> None:
    assert [
        saved.CONFIG,
        saved.VOCABS,
        saved.WEIGHTS,
        saved.CARD,
        f"{saved.BACKBONE}/*",
    ] == hub.ALLOW_PATTERNS


# A local HTTP Hub ----------------------------------------------------------------------------------


class LocalHub:
    """The three routes ``snapshot_download`` uses, served from local folders on 127.0.0.1.

    ``GET /api/models/{repo}/revision/{rev}`` (the commit), ``.../tree/{sha}`` (the files),
    ``HEAD``/``GET /{repo}/resolve/{sha}/{file}``; errors carry the Hub's ``X-Error-Code``.
    """

    sha = "f" * 40

    def __init__(self, repos: dict[str, Path], gated: tuple[str, ...] = ()) -> None:
        self.repos, self.gated = repos, gated
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, code: int, error: str) -> None:
                body = json.dumps({"error": error}).encode()
                self._send(code, body, {"X-Error-Code": error, "Content-Type": "application/json"})

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                hub.requests.append(f"{self.command} {self.path}")
                parts = self.path.split("?")[0].strip("/").split("/")
                api = parts[:2] == ["api", "models"]
                repo = "/".join(parts[2:4] if api else parts[:2])
                if repo not in hub.repos:
                    return self._error(404, "RepoNotFound")
                if repo in hub.gated:
                    return self._error(403, "GatedRepo")
                folder = hub.repos[repo]
                files = sorted(
                    p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                )
                rev = parts[5] if api and len(parts) > 5 else parts[3] if len(parts) > 3 else ""
                if rev not in ("main", hub.sha):
                    return self._error(404, "RevisionNotFound")
                if api and parts[4] == "revision":
                    body = {
                        "id": repo,
                        "sha": hub.sha,
                        "siblings": [{"rfilename": f} for f in files],
                    }
                    return self._send(200, json.dumps(body).encode(), {})
                if api and parts[4] == "tree":
                    tree = [
                        {
                            "type": "file",
                            "path": f,
                            "size": (folder / f).stat().st_size,
                            "oid": hashlib.sha1((folder / f).read_bytes()).hexdigest(),
                        }
                        for f in files
                    ]
                    return self._send(200, json.dumps(tree).encode(), {})
                file = folder / "/".join(parts[4:])
                if parts[2] != "resolve" or not file.is_file():
                    return self._error(404, "EntryNotFound")
                data = file.read_bytes()
                etag = f'"{hashlib.sha256(data).hexdigest()}"'
                return self._send(200, data, {"ETag": etag, "X-Repo-Commit": hub.sha})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local_hub(tagger: TextTagger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A local Hub with ``org/name`` (pushed there, plus a pickle no load may fetch) and a gated
    ``org/gated``; online, an empty cache."""
    api = LocalApi(tmp_path / "repos")
    push_to_hub(tagger, "org/name", api=api)
    (tmp_path / "repos" / "org" / "name" / "payload.pkl").write_bytes(b"not to be fetched")
    push_to_hub(tagger, "org/gated", api=api)
    hub_server = LocalHub(
        {r: tmp_path / "repos" / r for r in ("org/name", "org/gated")}, gated=("org/gated",)
    )
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "not-a-real-token")  # never leaves 127.0.0.1
    yield hub_server
    hub_server.close()


def test_download_from_a_local_hub_then_load_offline(
    tagger: TextTagger,
    local_hub: LocalHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = crfhead.load("org/name")
    assert loaded.tag(TEXT) == tagger.tag(TEXT)
    snapshot = tmp_path / "cache" / "models--org--name" / "snapshots" / LocalHub.sha
    assert {p.name for p in snapshot.iterdir()} == {
        "config.json",
        "vocabs.json",
        "model.safetensors",
        "README.md",
    }  # payload.pkl: never fetched
    assert not any("payload.pkl" in r for r in local_hub.requests)
    local_hub.close()  # the Hub is gone: offline, the cache serves
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert crfhead.load("org/name").tag(TEXT) == tagger.tag(TEXT)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("org/absent", r"Hub model org/absent does not exist or is private"),
        ("org/name@v9", r"Hub model org/name has no revision 'v9'"),
        ("org/gated", r"Hub model org/gated is gated: accept its conditions on the Hub"),
    ],
)
def test_error_from_a_local_hub(path: str, message: str, local_hub: LocalHub) -> None:
    with pytest.raises(FileNotFoundError, match=message):
        crfhead.load(path)


def test_error_hub_unreachable_and_not_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()  # a port nobody listens on
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        FileNotFoundError,
        match=r"is not in the Hugging Face cache .* and the Hub cannot be reached \(.*\): check the connection or HF_ENDPOINT$",
    ):
        crfhead.load("org/name")

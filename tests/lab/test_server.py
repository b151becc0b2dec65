"""The lab's server without a browser: static files, the API, its errors, path traversal, the address.

Each test starts :func:`crfhead.lab.server.make_server` on port 0 in a thread and talks to it with
``http.client`` (so raw, unnormalised paths reach the server as written).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from crfhead.lab.server import MAX_BODY, MAX_K, STATIC, LabServer, load_model, make_server

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss."


@contextmanager
def serving(**kwargs: Any) -> Iterator[LabServer]:
    server = make_server(0, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def request(
    server: LabServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()


def post_json(server: LabServer, payload: Any) -> tuple[int, Any]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, _, data = request(
        server, "POST", "/api/tag", body, {"Content-Type": "application/json"}
    )
    return status, json.loads(data)


@pytest.fixture(scope="module")
def bare() -> Iterator[LabServer]:
    """A server with no model, on the package's static folder."""
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def tagger(lab_model_path: Path) -> Any:
    return load_model(lab_model_path)


@pytest.fixture(scope="module")
def loaded(tagger: Any, lab_model_path: Path) -> Iterator[LabServer]:
    with serving(tagger=tagger, model_path=str(lab_model_path)) as server:
        yield server


# ------------------------------------------------------------------------------------ address
class TestAddress:
    def test_binds_the_loopback_address_only(self, bare: LabServer) -> None:
        assert bare.server_address[0] == "127.0.0.1"
        assert bare.server_address[1] > 0  # port 0: the system chose a free one
        assert bare.url == f"http://127.0.0.1:{bare.server_address[1]}/"

    def test_a_host_header_that_is_not_the_loopback_is_refused(self, bare: LabServer) -> None:
        status, _, body = request(bare, "GET", "/api/model", headers={"Host": "evil.example:80"})
        assert status == 403
        assert "127.0.0.1" in json.loads(body)["error"]
        status, _, _ = request(bare, "GET", "/", headers={"Host": "localhost:1234"})
        assert status == 200

    def test_the_command_line_serves_and_prints_the_url(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "crfhead.lab", "--port", "0", "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("crfhead lab: serving on http://127.0.0.1:"), line
            port = int(line.split("127.0.0.1:")[1].split("/")[0])
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/api/model")
            assert json.loads(conn.getresponse().read())["loaded"] is False
            conn.close()
        finally:
            proc.terminate()
            proc.wait(30)

    def test_a_missing_model_is_a_one_line_error(self, tmp_path: Path) -> None:
        from crfhead.lab.cli import main

        assert main(["--model", str(tmp_path / "nope"), "--port", "0", "--no-browser"]) == 2

    def test_crfhead_lab_is_a_subcommand(self) -> None:
        from crfhead.cli import build_parser

        ns = build_parser().parse_args(["lab", "--port", "0", "--no-browser"])
        assert (ns.command, ns.port, ns.no_browser, ns.model) == ("lab", 0, True, None)

    def test_importing_the_server_imports_no_model_code(self) -> None:
        code = (
            "import sys, crfhead; before = set(sys.modules); import crfhead.lab.server; "
            "new = sorted(m for m in set(sys.modules) - before if m.startswith(('crfhead', "
            "'lightning', 'pytorch_lightning', 'transformers'))); print(new)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        assert json.loads(out.replace("'", '"')) == ["crfhead.lab", "crfhead.lab.server"]


# ------------------------------------------------------------------------------------ static
class TestStatic:
    def test_the_page_and_its_files(self, bare: LabServer) -> None:
        status, headers, body = request(bare, "GET", "/")
        assert status == 200
        assert headers["content-type"].startswith("text/html")
        assert b'src="lab.js"' in body
        assert "default-src 'self'" in headers["content-security-policy"]
        for name, ctype in [("/lab.js", "text/javascript"), ("/lab.css", "text/css")]:
            status, headers, _ = request(bare, "GET", name)
            assert (status, headers["content-type"].split(";")[0]) == (200, ctype)

    def test_head_has_no_body(self, bare: LabServer) -> None:
        status, headers, body = request(bare, "HEAD", "/index.html")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0

    def test_the_page_asks_nothing_of_the_network(self) -> None:
        for name in ("index.html", "lab.js", "lab.css"):
            text = (STATIC / name).read_text(encoding="utf-8")
            for needle in ("http://", "https://", "//cdn", "@import"):
                hits = [
                    line
                    for line in text.splitlines()
                    if needle in line and "www.w3.org/2000/svg" not in line
                ]
                assert not hits, (name, hits)

    @pytest.mark.parametrize(
        "path",
        [
            "/../server.py",
            "/../../pyproject.toml",
            "/%2e%2e/server.py",
            "/%2E%2E/%2E%2E/pyproject.toml",
            "/data/../../server.py",
            "/..%2fserver.py",
            "/%2e%2e%2fserver.py",
            "/..\\server.py",
            "/%5c..%5cserver.py",
            "//etc/passwd",
            "/%2fetc%2fpasswd",
            "/etc/passwd",
            "/C:/Windows/win.ini",
            "/./index.html",
            "/.hidden",
            "/index.html%00.js",
            "/%ff%fe",
            "/data",
            "/data/",
            "/nope.html",
        ],
    )
    def test_nothing_outside_the_static_folder(self, bare: LabServer, path: str) -> None:
        status, _headers, body = request(bare, "GET", path)
        assert status == 404, path
        assert json.loads(body) == {"error": "not found"}

    def test_links_are_never_followed(self, tmp_path: Path) -> None:
        static = tmp_path / "static"
        (static / "data").mkdir(parents=True)
        (static / "index.html").write_text("<p>hi</p>")
        outside = tmp_path / "secret"
        outside.mkdir()
        (outside / "key.txt").write_text("secret")
        (static / "inside.txt").write_text("fine")
        (static / "to_outside.txt").symlink_to(outside / "key.txt")
        (static / "to_inside.txt").symlink_to(static / "inside.txt")
        (static / "dir").symlink_to(outside, target_is_directory=True)
        (static / "data" / "trellis.json").symlink_to(outside / "key.txt")
        with serving(static=static) as server:
            assert request(server, "GET", "/inside.txt")[0] == 200
            for path in ("/to_outside.txt", "/to_inside.txt", "/dir/key.txt", "/data/trellis.json"):
                assert request(server, "GET", path)[0] == 404, path
            _status, _, body = request(server, "GET", "/api/payloads")
            assert json.loads(body) == {"payloads": []}

    def test_payloads_lists_the_data_files(self, tmp_path: Path) -> None:
        static = tmp_path / "static"
        (static / "data").mkdir(parents=True)
        (static / "data" / "trellis.json").write_text("{}")
        (static / "data" / "notes.txt").write_text("")
        with serving(static=static) as server:
            status, _, body = request(server, "GET", "/api/payloads")
            assert (status, json.loads(body)) == (200, {"payloads": ["trellis"]})


# ------------------------------------------------------------------------------------ the API
class TestErrors:
    def test_no_model_is_a_409_with_a_message(self, bare: LabServer) -> None:
        status, _, body = request(bare, "GET", "/api/model")
        info = json.loads(body)
        assert status == 200 and info["loaded"] is False and info["labels"] == []
        status, reply = post_json(bare, {"text": "hello"})
        assert status == 409
        assert "--model" in reply["error"]

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (b"{not json", "not JSON"),
            (b"\xff\xfe", "not UTF-8"),
            (b"[1, 2]", "JSON object"),
            (b'"text"', "JSON object"),
            (b"{}", 'missing "text"'),
            (b'{"text": 3}', '"text" must be a string'),
            (b'{"text": null}', '"text" must be a string'),
            (b'{"text": "a", "k": "5"}', '"k" must be an integer'),
            (b'{"text": "a", "k": true}', '"k" must be an integer'),
            (b'{"text": "a", "k": 2.5}', '"k" must be an integer'),
            (b'{"text": "a", "k": 0}', f"between 1 and {MAX_K}"),
            (b'{"text": "a", "k": 21}', f"between 1 and {MAX_K}"),
            (b'{"text": "a", "extra": 1}', "unknown fields"),
        ],
    )
    def test_bad_requests_are_400_with_a_message(
        self, loaded: LabServer, body: bytes, message: str
    ) -> None:
        status, reply = post_json(loaded, body)
        assert status == 400
        assert message in reply["error"]

    def test_a_body_over_the_limit_is_413(self, loaded: LabServer) -> None:
        text = "a " * (MAX_BODY // 2 + 10)
        status, reply = post_json(loaded, {"text": text})
        assert status == 413
        assert str(MAX_BODY) in reply["error"]

    def test_a_body_that_is_not_json_typed_is_415(self, loaded: LabServer) -> None:
        status, _, body = request(
            loaded, "POST", "/api/tag", b'{"text": "a"}', {"Content-Type": "text/plain"}
        )
        assert status == 415 and "application/json" in json.loads(body)["error"]

    def test_unknown_endpoints_and_methods(self, loaded: LabServer) -> None:
        assert request(loaded, "GET", "/api/nothing")[0] == 404
        assert request(loaded, "POST", "/index.html", b"{}")[0] == 404
        assert request(loaded, "PUT", "/api/tag", b"{}")[0] == 405
        assert request(loaded, "DELETE", "/index.html")[0] == 405


class TestTag:
    def test_model_info(self, loaded: LabServer, tagger: Any, lab_model_path: Path) -> None:
        status, _, body = request(loaded, "GET", "/api/model")
        info = json.loads(body)
        assert status == 200
        assert info["loaded"] is True
        assert info["labels"] == tagger.labels
        assert (info["head"], info["path"], info["scheme"]) == ("CRF", str(lab_model_path), "BIO")
        assert info["encoder"] and info["calibrated"] is True

    def test_a_sentence(self, loaded: LabServer, tagger: Any) -> None:
        status, r = post_json(loaded, {"text": TEXT, "k": 4})
        assert status == 200
        assert r["text"] == TEXT and r["labels"] == tagger.labels
        T, K = len(r["tokens"]), len(r["labels"])
        assert T == len(r["tags"]) > 5
        for tok in r["tokens"]:
            assert TEXT[tok["start"] : tok["end"]].lower() == tok["text"].lower()
        expected = [e.to_dict() for e in tagger.tag(TEXT)]
        assert r["entities"] == expected
        for e in r["entities"]:
            assert TEXT[e["start"] : e["end"]] == e["text"]
            assert 0.0 <= e["probability"] <= 1.0
        assert len(r["marginals"]) == T and all(len(row) == K for row in r["marginals"])
        for row in r["marginals"]:
            assert abs(sum(row) - 1.0) < 1e-4
        probs = [p["probability"] for p in r["topk"]]
        assert len(probs) == 4 and probs == sorted(probs, reverse=True)
        assert 0.0 < sum(probs) <= 1.0 + 1e-9
        assert r["topk"][0]["tags"] == r["tags"]  # the Viterbi path is the best path
        assert all(len(p["tags"]) == T for p in r["topk"])

    def test_the_best_path_probability_is_exact(self, loaded: LabServer, tagger: Any) -> None:
        import torch

        from crfhead.data.sentence import Sentence

        _, r = post_json(loaded, {"text": "the first quarter", "k": 1})
        batch = tagger.collate([Sentence([t["text"] for t in r["tokens"]], id="0")])
        with torch.inference_mode():
            emissions = tagger.model(batch)
            head = tagger.model.head
            ids = torch.tensor([[tagger.labels.index(t) for t in r["tags"]]])
            nll = float(head.nll(emissions, ids, batch.mask, "sum"))
        assert abs(r["topk"][0]["probability"] - float(torch.tensor(-nll).exp())) < 1e-5

    def test_k_defaults_to_5_and_short_sentences_have_fewer_paths(self, loaded: LabServer) -> None:
        _, r = post_json(loaded, {"text": TEXT})
        assert len(r["topk"]) == 5
        _, r = post_json(loaded, {"text": "voss", "k": MAX_K})
        assert 1 <= len(r["topk"]) <= MAX_K
        assert abs(sum(p["probability"] for p in r["topk"]) - 1.0) < 1e-4 or len(r["topk"]) == MAX_K

    def test_empty_text_has_no_tokens(self, loaded: LabServer) -> None:
        status, r = post_json(loaded, {"text": "   "})
        assert status == 200
        assert (r["tokens"], r["entities"], r["marginals"], r["topk"]) == ([], [], [], [])

    def test_concurrent_requests(self, loaded: LabServer) -> None:
        results: list[int] = []

        def one() -> None:
            results.append(post_json(loaded, {"text": TEXT, "k": 2})[0])

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [200] * 6

"""The lab's server under load and abuse: bursts, limits, a busy model, malformed requests.

Served as in ``test_server.py`` (:func:`crfhead.lab.server.make_server` on port 0 in a thread, the
tiny model of ``lab_model_path``); raw sockets where ``http.client`` would refuse to send the
request (a lying ``Content-Length``, a stalled body, a bad request line).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import post_json, request, serving

from crfhead.lab.cli import build_parser, limits_of
from crfhead.lab.server import (
    MAX_BODY,
    MAX_CHARS,
    MAX_DIGITS,
    REQUEST_QUEUE,
    LabServer,
    Limits,
    load_model,
    make_server,
)

TEXT = "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss."
BURST = 50


@pytest.fixture(scope="module")
def tagger(lab_model_path: Path) -> Any:
    return load_model(lab_model_path)


@pytest.fixture(scope="module")
def loaded(tagger: Any) -> Iterator[LabServer]:
    with serving(tagger=tagger) as server:
        yield server


def raw(
    server: LabServer, data: bytes, *, timeout: float = 10.0
) -> tuple[int, dict[str, str], Any]:
    """Send ``data`` as it is, read one answer: its status, headers and JSON body."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        res = http.client.HTTPResponse(sock)
        res.begin()
        body = res.read()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, json.loads(body)


def head(length: str | None = None, extra: str = "") -> bytes:
    """The head of a ``POST /api/tag`` with the given ``Content-Length`` (none when ``None``)."""
    lines = ["POST /api/tag HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


# ------------------------------------------------------------------------------------ bursts
class TestBurst:
    def test_the_listen_queue_holds_a_burst(self, tagger: Any) -> None:
        """50 connections made while the server is not accepting (as when its loop is busy) all
        connect and are all answered: the standard library's queue of 5 drops all but 6."""
        assert REQUEST_QUEUE >= 128
        server = make_server(0, tagger=tagger)
        addr = server.server_address[:2]
        body = json.dumps({"text": TEXT, "k": 2}).encode()
        connected = threading.Barrier(BURST + 1, timeout=30)
        statuses: list[int] = []
        errors: list[str] = []

        def one() -> None:
            try:
                sock = socket.create_connection((str(addr[0]), int(addr[1])), timeout=1.0)
            except OSError as err:
                errors.append(f"connect: {err!r}")
                connected.wait()
                return
            connected.wait()
            try:
                sock.settimeout(30)
                sock.sendall(head(str(len(body))) + body)
                res = http.client.HTTPResponse(sock)
                res.begin()
                res.read()
                statuses.append(res.status)
            except OSError as err:
                errors.append(f"answer: {err!r}")
            finally:
                sock.close()

        threads = [threading.Thread(target=one) for _ in range(BURST)]
        for t in threads:
            t.start()
        connected.wait()  # every connection made (or failed) before the server accepts any
        loop = threading.Thread(target=server.serve_forever, daemon=True)
        loop.start()
        try:
            for t in threads:
                t.join(60)
        finally:
            server.shutdown()
            server.server_close()
            loop.join(5)
        assert errors == []
        assert statuses == [200] * BURST

    def test_fifty_concurrent_posts_are_all_answered(self, loaded: LabServer) -> None:
        start = threading.Barrier(BURST, timeout=30)
        statuses: list[int] = []
        errors: list[str] = []

        def one() -> None:
            start.wait()
            try:
                statuses.append(post_json(loaded, {"text": TEXT, "k": 2})[0])
            except OSError as err:
                errors.append(repr(err))

        threads = [threading.Thread(target=one) for _ in range(BURST)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert statuses == [200] * BURST


# ------------------------------------------------------------------------------------ limits
class TestLimits:
    def test_too_long_a_text_is_413_at_once(self, loaded: LabServer) -> None:
        text = "a " * (MAX_CHARS // 2) + "b"
        began = time.monotonic()
        status, reply = post_json(loaded, {"text": text})
        assert time.monotonic() - began < 5
        assert status == 413
        assert f"{MAX_CHARS + 1} characters" in reply["error"]
        assert f"at most {MAX_CHARS} characters" in reply["error"]

    def test_too_many_tokens_is_413_with_both_counts(self, tagger: Any) -> None:
        with serving(tagger=tagger, limits=Limits(max_tokens=5)) as server:
            status, reply = post_json(server, {"text": "one two three four five six"})
            assert status == 413
            assert "6 tokens" in reply["error"] and "at most 5 tokens" in reply["error"]
            texts = ["one two three", "four five six"]
            status, reply = post_json(server, {"texts": texts, "group": "none"})
            assert status == 413 and "6 tokens" in reply["error"]  # the texts together
            assert post_json(server, {"text": "one two three four five"})[0] == 200

    def test_the_limits_are_the_servers_own(self, tagger: Any) -> None:
        limits = Limits(max_body=200, max_chars=10, max_texts=2)
        with serving(tagger=tagger, limits=limits) as server:
            status, reply = post_json(server, {"text": "x" * 11})
            assert status == 413 and "11 characters" in reply["error"]
            status, reply = post_json(server, {"texts": ["a", "b", "c"], "group": "none"})
            assert status == 413 and "3 texts" in reply["error"]
            status, reply = post_json(server, {"text": "a" * 300})
            assert status == 413 and "at most 200" in reply["error"]

    def test_a_body_over_the_limit_is_refused_unread(self, loaded: LabServer) -> None:
        """A ``Content-Length`` of a gigabyte, and only 64 KiB of it sent: the 413 comes anyway."""
        began = time.monotonic()
        status, headers, reply = raw(loaded, head(str(10**9)) + b"x" * (MAX_BODY + 1))
        assert time.monotonic() - began < 5
        assert status == 413 and headers["connection"] == "close"
        assert str(10**9) in reply["error"] and str(MAX_BODY) in reply["error"]

    @pytest.mark.parametrize("length", ["abc", "-1", "+5", "1_0", " 1 0", "1" * 30])
    def test_a_malformed_content_length_is_400(self, loaded: LabServer, length: str) -> None:
        status, _, reply = raw(loaded, head(length) + b"{}")
        assert status == 400 and "bad Content-Length" in reply["error"]

    def test_two_content_lengths_are_400(self, loaded: LabServer) -> None:
        status, _, reply = raw(loaded, head("2", "Content-Length: 20\r\n") + b"{}")
        assert status == 400 and "Content-Length" in reply["error"]

    def test_no_content_length_is_411(self, loaded: LabServer) -> None:
        status, _, reply = raw(loaded, head(None))
        assert status == 411 and "Content-Length" in reply["error"]

    def test_a_stalled_body_is_408(self, tagger: Any) -> None:
        with serving(tagger=tagger, limits=Limits(read_timeout=0.5)) as server:
            began = time.monotonic()
            status, _, reply = raw(server, head("100") + b'{"text": ')
            assert time.monotonic() - began < 5
            assert status == 408 and "100 bytes" in reply["error"]

    def test_bad_limits_are_refused(self) -> None:
        with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
            Limits(max_tokens=0)
        with pytest.raises(ValueError, match="lock_timeout must be a finite number"):
            Limits(lock_timeout=float("inf"))
        with pytest.raises(ValueError, match="read_timeout must be a finite number"):
            Limits(read_timeout=0)
        assert Limits(lock_timeout=0).lock_timeout == 0

    def test_the_command_line_sets_the_limits(self) -> None:
        assert limits_of(build_parser().parse_args([])) == Limits()
        args = "--max-body 1000 --max-chars 100 --max-tokens 20 --max-texts 3 --lock-timeout 0.5"
        ns = build_parser().parse_args([*args.split(), "--read-timeout", "2"])
        assert limits_of(ns) == Limits(1000, 100, 20, 3, 0.5, 2.0)
        for bad in (["--max-tokens", "0"], ["--max-chars", "x"], ["--lock-timeout", "-1"]):
            with pytest.raises(SystemExit):
                build_parser().parse_args(bad)


# ------------------------------------------------------------------------------------ a busy model
class TestBusy:
    def test_a_request_the_model_cannot_take_is_503_and_the_rest_is_served(
        self, tagger: Any
    ) -> None:
        with serving(tagger=tagger, limits=Limits(lock_timeout=0.5)) as server:
            waiting: list[tuple[int, dict[str, str], bytes, float]] = []

            def tag() -> None:
                began = time.monotonic()
                body = json.dumps({"text": TEXT}).encode()
                status, headers, data = request(
                    server, "POST", "/api/tag", body, {"Content-Type": "application/json"}
                )
                waiting.append((status, headers, data, time.monotonic() - began))

            with server.state.lock:  # a slow request holds the model
                thread = threading.Thread(target=tag)
                thread.start()
                time.sleep(0.1)  # it waits for the model now: the page and the API still answer
                assert request(server, "GET", "/")[0] == 200
                assert request(server, "GET", "/api/model")[0] == 200
                assert request(server, "GET", "/api/payloads")[0] == 200
                assert post_json(server, {"text": 3})[0] == 400  # refused before the model
                thread.join(10)
            ((status, headers, data, waited),) = waiting
            assert status == 503 and 0.4 < waited < 5
            assert headers["retry-after"] == "1"
            assert "busy" in json.loads(data)["error"] and "0.5 s" in json.loads(data)["error"]
            assert post_json(server, {"text": TEXT})[0] == 200  # the model is free again


# ------------------------------------------------------------------------------------ malformed
class TestMalformed:
    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (b'{"text": "a \\ud800 b"}', "lone surrogate (\\ud800) at character 2"),
            (b'{"text": "\\udfff"}', "lone surrogate (\\udfff) at character 0"),
            (b'{"texts": ["ok", "\\ud800"], "group": "none"}', '"texts"[1] holds a lone surrogate'),
            (b'{"text": "a", "\\ud800": 1}', "unknown fields"),
            (b"[" * 30_000 + b"]" * 30_000, "nests arrays or objects too deeply"),
            (b'{"text": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "too deeply"),
            (b'{"text": "a", "k": ' + b"1" * 4301 + b"}", "a number of 4301 digits"),
            (b'{"text": "a", "k": -' + b"1" * (MAX_DIGITS + 1) + b"}", f"at most {MAX_DIGITS}"),
            (b'{"text": "a", "k": NaN}', "NaN is not a JSON value"),
            (b'{"text": "a", "k": -Infinity}', "-Infinity is not a JSON value"),
        ],
    )
    def test_malformed_bodies_are_400_in_json(
        self, loaded: LabServer, body: bytes, message: str
    ) -> None:
        assert len(body) <= MAX_BODY
        status, headers, data = request(
            loaded, "POST", "/api/tag", body, {"Content-Type": "application/json"}
        )
        assert status == 400
        assert headers["content-type"].startswith("application/json")
        assert message in json.loads(data)["error"]
        assert post_json(loaded, {"text": TEXT})[0] == 200  # and the server serves on

    def test_the_standard_librarys_refusals_are_json(self, loaded: LabServer) -> None:
        too_long = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n"
        status, _, reply = raw(loaded, too_long)
        assert status == 431 and "Line too long" in reply["error"]
        status, _, reply = raw(loaded, b"OPTIONS / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 501 and "OPTIONS" in reply["error"]

    def test_an_unexpected_failure_is_500_and_the_server_serves_on(
        self, tagger: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with serving(tagger=tagger) as server:

            def broken(text: str, k: int) -> dict[str, Any]:
                raise RuntimeError("the model fell over")

            monkeypatch.setattr(server.state, "tag", broken)
            status, reply = post_json(server, {"text": TEXT})
            assert status == 500 and "RuntimeError: the model fell over" in reply["error"]
            monkeypatch.setattr(server.state, "tag", lambda text, k: {"nan": float("nan")})
            status, reply = post_json(server, {"text": TEXT})  # not JSON: an error, not silence
            assert status == 500 and "ValueError" in reply["error"]
            monkeypatch.undo()
            assert post_json(server, {"text": TEXT})[0] == 200
            assert request(server, "GET", "/")[0] == 200

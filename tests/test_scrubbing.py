"""The scrubber (uhp_server/gateway/scrubbing.py): a secret is redacted in every form it can
take in a body, whole or cut between the chunks of a stream."""

from __future__ import annotations

import base64
import html
import json
import logging
import random
import re
import urllib.parse
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import MockTransport

from storage.db import Database
from uhp_server.engine.turns.eventlog import EventLog
from uhp_server.gateway.mcp_proxy import make_mcp_router
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.gateway.providers import Provider
from uhp_server.gateway.scrubbing import REDACTED, StreamScrubber, scrubber
from uhp_server.gateway.tokens import TokenRegistry
from uhp_server.ops.logs import JsonFormatter

KEY = "sk-connection-secret-4f9a1c/+Zq"
OTHER = "run-token-secret-77d2e0"
SCRUB = scrubber([KEY, OTHER])


def escaped(text: str, every: int = 2, upper: bool = False) -> str:
    """`text` with every `every`th character as a JSON \\uXXXX escape."""
    spelled = "".join(
        (f"\\u{ord(c):04X}" if upper else f"\\u{ord(c):04x}") if i % every == 0 else c
        for i, c in enumerate(text)
    )
    return spelled


def assert_redacted(form: str) -> None:
    body = f'{{"error": {{"message": "bad key {form} given"}}}}'.encode()
    out = SCRUB.scrub(body)
    assert REDACTED in out, form
    assert out.startswith(b'{"error": {"message": "bad key ') and out.endswith(b' given"}}')


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        escaped(KEY),  # the reproduction: some characters as \uXXXX
        escaped(KEY, every=1),
        escaped(KEY, every=3, upper=True),
        escaped(KEY, every=5).replace("/", "\\/"),
        KEY.replace("/", "\\/"),
        json.dumps(KEY, ensure_ascii=True)[1:-1],
    ],
)
def test_json_escaped_forms_are_redacted(form: str) -> None:
    assert_redacted(form)


def test_a_json_string_inside_a_json_string_is_redacted() -> None:
    inner = json.dumps({"message": escaped(KEY)})
    assert_redacted(json.dumps(json.dumps(inner))[1:-1])


@pytest.mark.parametrize(
    "form",
    [
        urllib.parse.quote(KEY, safe=""),
        re.sub("%..", lambda m: m[0].lower(), urllib.parse.quote(KEY, safe="")),
        urllib.parse.quote(KEY),  # "/" left as it is
        "".join(f"%{ord(c):02X}" for c in KEY),  # every character
        "".join(f"%{ord(c):02x}" if i % 3 else c for i, c in enumerate(KEY)),  # a subset
        urllib.parse.quote(escaped(KEY), safe=""),  # JSON-escaped, then percent-encoded
    ],
)
def test_url_encoded_forms_are_redacted(form: str) -> None:
    assert_redacted(form)


def html_referenced(text: str, spell: str, every: int = 2) -> str:
    """`text` with every `every`th character as an HTML character reference."""
    return "".join(spell.format(ord(c)) if i % every == 0 else c for i, c in enumerate(text))


@pytest.mark.parametrize(
    "form",
    [
        html_referenced(KEY, "&#{};"),
        html_referenced(KEY, "&#x{:X};", every=1),
        html_referenced(KEY, "&#x{:x};", every=3),
        html_referenced(KEY, "&#X{:04x};"),  # leading zeros, an upper-case X
        html.escape(KEY).replace("/", "&#x2F;"),  # what an HTML escaper of "/" writes
        KEY.replace("/", "&sol;").replace("+", "&plus;"),
        html_referenced(KEY, "&#{:03d};", every=4).replace("/", "&#47;"),
    ],
)
def test_html_character_references_are_redacted(form: str) -> None:
    assert_redacted(form)


@pytest.mark.parametrize(
    "form",
    [
        urllib.parse.quote(urllib.parse.quote(KEY, safe=""), safe=""),  # every escape, twice
        "".join(f"%25{ord(c):02X}" if i % 2 else c for i, c in enumerate(KEY)),
        urllib.parse.quote(KEY, safe="").replace("%2F", "%252f"),  # one of them twice
    ],
)
def test_double_percent_encoding_is_redacted(form: str) -> None:
    assert_redacted(form)


def test_plus_for_a_space_is_redacted() -> None:
    spaced = scrubber(["pass phrase with spaces"])
    assert spaced.scrub(b"q=" + urllib.parse.quote_plus("pass phrase with spaces").encode()) == (
        b"q=" + REDACTED
    )


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_at_every_alignment_is_redacted(offset: int, encode: object) -> None:
    rng = random.Random(offset)
    before, after = rng.randbytes(offset + 3), rng.randbytes(7)
    blob = encode(before + KEY.encode() + after).decode()  # type: ignore[operator]
    assert_redacted(blob)
    assert_redacted(blob.replace("/", "\\/"))  # base64 inside a JSON string
    # Only the characters that depend on the key alone are taken out.
    assert SCRUB.scrub(blob.encode()).count(REDACTED) == 1


def test_base64_of_the_secret_alone_is_redacted() -> None:
    assert_redacted(base64.b64encode(KEY.encode()).decode())
    assert_redacted(base64.b64encode(f"user:{KEY}".encode()).decode())  # a Basic credential


@pytest.mark.parametrize("hexed", [KEY.encode().hex(), KEY.encode().hex().upper()])
def test_hex_in_either_case_is_redacted(hexed: str) -> None:
    assert_redacted(hexed)


def test_every_secret_of_the_set_is_redacted_and_nothing_else() -> None:
    body = f"a {KEY} b {escaped(OTHER)} c sk-connection d".encode()
    assert SCRUB.scrub(body) == b"a " + REDACTED + b" b " + REDACTED + b" c sk-connection d"


def test_raw_characters_keep_their_case() -> None:
    body = KEY.upper().encode()
    assert SCRUB.scrub(body) == body


def test_short_empty_and_missing_secrets_are_ignored() -> None:
    assert not scrubber(["", None, "short"])
    assert scrubber(["short"]).scrub(b"short") == b"short"


def test_text_is_scrubbed_like_bytes() -> None:
    assert SCRUB.scrub_text(f"é {escaped(KEY)} ü") == "é [redacted] ü"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_a_secret_cut_between_chunks_of_a_stream_is_redacted(size: int) -> None:
    body = (
        f"data: {json.dumps({'x': 1})}\n\n"
        f'data: {{"error": "{escaped(KEY)}"}}\n\n'
        f'data: {{"tail": "{urllib.parse.quote(OTHER)}"}}'
    ).encode()
    stream = StreamScrubber(SCRUB)
    out = b"".join(stream.feed(body[i : i + size]) for i in range(0, len(body), size))
    out += stream.finish()
    assert out == SCRUB.scrub(body)
    assert out.count(REDACTED) == 2


def test_a_stream_passes_each_finished_line_without_delay() -> None:
    stream = StreamScrubber(SCRUB)
    event = b'data: {"delta": "hello"}\n\n'
    assert stream.feed(event) == event  # nothing held: no secret spans a line break
    assert stream.feed(b"partial") == b""  # could be the start of one
    assert stream.finish() == b"partial"


def test_a_stream_without_secrets_passes_untouched() -> None:
    stream = StreamScrubber(scrubber([]))
    assert stream.feed(b"abc") == b"abc"
    assert stream.finish() == b""


# -- where the scrubber is applied besides the gateway ---------------------------------------


async def test_a_turns_events_are_scrubbed_before_they_are_numbered(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite3")
    try:
        log = EventLog(db, "resp_1", persist=False)
        log.guard([KEY, None])
        await log.append([{"type": "response.failed", "error": {"message": escaped(KEY)}}])
        assert log.events[0]["error"]["message"] == "[redacted]"
        assert log.events[0]["sequence_number"] == 0
    finally:
        db.close()


def test_the_log_holds_no_secret_of_a_live_grant() -> None:
    provider = Provider("connection", "chat", "https://x.example/v1", KEY, headers={"x": OTHER})
    tokens = TokenRegistry()
    grant = tokens.issue("openai", "m", 60, provider=provider)
    record = logging.LogRecord("uhp_server.x", logging.ERROR, "", 0, "echo %s", (KEY,), None)
    record.body = urllib.parse.quote(OTHER)  # an `extra=` field
    line = JsonFormatter().format(record)
    assert KEY not in line and "run-token" not in line and line.count("[redacted]") == 2
    tokens.revoke(grant.token)
    assert KEY in JsonFormatter().format(record)  # once the turn is over, nothing is held


def test_an_mcp_server_echoing_its_credential_hands_none_to_the_agent() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        body = f'{{"jsonrpc": "2.0", "id": 1, "error": {{"message": "bad {escaped(token)}"}}}}'
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/json"})

    tokens = TokenRegistry()
    app = FastAPI()
    app.include_router(make_mcp_router(tokens, httpx.AsyncClient(transport=MockTransport(echo))))
    grant = tokens.issue("openai", "m", 60)
    headers = {"Authorization": f"Bearer {KEY}"}
    server = McpTarget("vault", "http://127.0.0.1:9/mcp", "http", headers, True, secrets=(KEY,))
    grant.mcp_servers = {"vault": server}
    with TestClient(app) as client:
        answer = client.post(
            "/gateway/mcp/vault",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {grant.token}"},
        )
    assert answer.status_code == 200
    assert answer.json()["error"]["message"] == "bad [redacted]"

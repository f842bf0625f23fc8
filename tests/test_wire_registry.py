"""Wire formats register themselves through the `uhp_server.wires` entry points, as bases do
through `uhp_server.bases`, and the gateway knows them only from there: a third party's wire,
one module and one entry-point line, is served like the built-in ones."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from uhp_server.gateway import Provider, TokenRegistry, Upstreams, gateway_path, make_gateway_router
from uhp_server.gateway.wires import (
    ErrorKinds,
    ModelCall,
    ProviderApi,
    Wire,
    WireHeaders,
    api_names,
    backends,
    wires,
)
from uhp_server.gateway.wires.registry import ENTRY_POINT_GROUP
from uhp_server.settings import Settings

BUILT_IN = ("responses", "chat", "anthropic", "gemini")  # in rank order

THIRD_PARTY = """
import re

from uhp_server.gateway.wires import CallKind, ErrorKinds, ModelCall, WireHeaders


class TinyApi:
    other_wires_as = "tiny"
    version_headers = {"tiny-version": "1"}
    models_query = {}

    def root(self, base_url):
        return base_url.rstrip("/")

    def auth_headers(self, key):
        return {"tiny-key": key}

    def usage(self, counters):
        return {"input_tokens": counters.get("in", 0), "output_tokens": counters.get("out", 0)}


class TinyWire:
    name = "tiny"
    rank = 10
    backend = "tiny"
    version_in_base_url = True
    root = ""
    endpoints = re.compile(r"generate|models")
    model_calls = (ModelCall(re.compile("generate"), CallKind.ANSWER, model_in_body=True),)
    headers = WireHeaders(token=("tiny-token",))
    error_kinds = ErrorKinds("no_token", "no_route", "refused", "unreachable", "bad_body")
    translations = {}
    as_api = TinyApi()

    def error_body(self, status, message, kind):
        return {"tiny_error": kind, "message": message}

    def models_answer(self, path, model, owner):
        return {"tiny_models": [model]}

    def confine(self, body):
        body.pop("web_search", None)

    def stand_in(self, text, *, item):
        return {"text": text}


WIRE = TinyWire()


class Nameless:
    pass


NOT_A_WIRE = Nameless()
"""


def test_every_registered_wire_implements_the_protocol() -> None:
    """Read straight from the entry points: wires() would leave a broken wire out."""
    found = {entry.name: entry.load() for entry in entry_points(group=ENTRY_POINT_GROUP)}
    assert set(found) >= set(BUILT_IN)
    for name, wire in found.items():
        assert isinstance(wire, Wire), name
        assert wire.name == name
        assert wire.as_api is None or isinstance(wire.as_api, ProviderApi), name
        assert wire.model_calls and all(isinstance(c, ModelCall) for c in wire.model_calls)
        assert isinstance(wire.error_kinds, ErrorKinds) and isinstance(wire.headers, WireHeaders)
        assert set(wire.translations) <= set(api_names()), name


def test_the_built_in_wires_keep_their_names_and_places() -> None:
    assert tuple(wires())[: len(BUILT_IN)] == BUILT_IN
    assert api_names() == ("responses", "chat", "anthropic")  # gemini: no provider serves it
    assert backends() == ("openai", "anthropic")
    assert {name: wires()[name].backend for name in BUILT_IN} == {
        "responses": "openai",
        "chat": "openai",
        "anthropic": "anthropic",
        "gemini": "openai",
    }


def _distribution(root: Path, entries: dict[str, str]) -> Path:
    """A throw-away installed distribution: a module and a dist-info with entry points."""
    (root / "tiny_wire.py").write_text(THIRD_PARTY)
    info = root / "tiny_wire-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-wire\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    return root


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = _distribution(
        tmp_path,
        {
            "tiny": "tiny_wire:WIRE",
            "broken": "tiny_wire_missing:WIRE",
            "not-a-wire": "tiny_wire:NOT_A_WIRE",
        },
    )
    monkeypatch.syspath_prepend(str(root))
    wires.cache_clear()  # the registry is read once per process
    yield root
    wires.cache_clear()


def test_a_broken_wire_is_left_out_with_a_warning(
    third_party: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="uhp_server.gateway.wires.registry"):
        known = wires()
    assert "tiny" in known and set(known) >= set(BUILT_IN)
    assert tuple(known)[-1] == "tiny"  # rank 10: after the built-in ones
    left_out = {
        vars(r)["wire"]: vars(r)["error"] for r in caplog.records if r.msg == "wire_not_loaded"
    }
    assert set(left_out) == {"broken", "not-a-wire"}
    assert "is not a Wire" in left_out["not-a-wire"]


async def test_a_third_party_wire_is_served_through_its_own_backend(third_party: Path) -> None:
    assert gateway_path("tiny") == "/gateway/tiny/v1"
    assert "tiny" in api_names() and "tiny" in backends()
    seen: list[httpx.Request] = []

    def provider_answers(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"text": "hi", "usage": {"in": 3, "out": 2}})

    http = httpx.AsyncClient(transport=httpx.MockTransport(provider_answers))
    upstreams = Upstreams(Settings(), http_client=http)
    provider = Provider(
        "tinyco", "tiny", "https://tiny.example/v1", "sk-tiny-secret", models=("tiny-1",)
    )
    tokens = TokenRegistry()
    grant = tokens.issue("tiny", "tiny-1", 60, provider=provider)
    app = FastAPI()
    app.include_router(make_gateway_router(tokens, upstreams))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw/gateway/tiny/v1") as c:
        sent = {"prompt": "hi", "model": "other", "web_search": True}
        answer = await c.post("/generate", headers={"tiny-token": grant.token}, json=sent)
        refused = await c.post("/generate", headers={"tiny-token": "wrong"}, json=sent)
        elsewhere = await c.get("/files", headers={"tiny-token": grant.token})
        models = await c.get("/models", headers={"tiny-token": grant.token})
    await http.aclose()

    assert answer.status_code == 200 and answer.json()["text"] == "hi"
    (upstream,) = seen  # the wire's own confine rules ran, its auth and version were added
    assert str(upstream.url) == "https://tiny.example/v1/generate"
    assert upstream.headers["tiny-key"] == "sk-tiny-secret"
    assert upstream.headers["tiny-version"] == "1"
    assert json.loads(upstream.content) == {"prompt": "hi", "model": "tiny-1"}
    assert grant.usage.as_uhp() is not None
    assert (grant.usage.input_tokens, grant.usage.output_tokens) == (3, 2)
    # The gateway's own answers, in the wire's shapes.
    assert refused.status_code == 401 and refused.json()["tiny_error"] == "no_token"
    assert elsewhere.status_code == 404 and elsewhere.json()["tiny_error"] == "no_route"
    assert models.json() == {"tiny_models": ["tiny-1"]}  # a provider of a static model list

"""A minimal translating relay for tests: the CLI's wire in, a Chat Completions provider out,
through uhp_server.gateway.wires. It stands in for the gateway's forward() so the translators
can be tried with the real CLIs on their own; no token, pinning or path checks."""

from __future__ import annotations

import json
import threading
import time

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.scripted_provider.fixture import bind_loopback
from tests.support.translations import translation_between
from uhp_server.gateway.wires import Untranslatable

WIRE_PATHS = {"/v1/responses": "responses", "/v1/messages": "anthropic"}


def create_relay(chat_base_url: str, api_key: str) -> Starlette:
    """`chat_base_url` is the provider's OpenAI base URL (ending in /v1)."""
    client = httpx.AsyncClient(timeout=60)
    headers = {"authorization": f"Bearer {api_key}"}

    async def relay(request: Request) -> Response:
        t = translation_between(WIRE_PATHS[request.url.path], "chat")
        json_type = "application/json"
        body = json.loads(await request.body())
        try:
            chat = t.request(body, model=body.get("model", ""))
        except Untranslatable as exc:
            return Response(t.refusal(400, exc.message), 400, media_type=json_type)
        url = f"{chat_base_url}/{t.upstream_path}"
        upstream = await client.send(
            client.build_request("POST", url, json=chat, headers=headers), stream=True
        )
        if upstream.status_code >= 400:
            body = await upstream.aread()
            status = upstream.status_code
            return Response(t.error(status, body), status, media_type=json_type)
        if not chat.get("stream"):
            answer = json.loads(await upstream.aread())
            return Response(json.dumps(t.response(answer)), media_type=json_type)
        stream = t.stream()

        async def events():
            try:
                async for chunk in upstream.aiter_raw():
                    if out := stream.feed(chunk):
                        yield out
                yield stream.finish()
            finally:
                await upstream.aclose()

        return StreamingResponse(events(), media_type=stream.content_type)

    async def models(request: Request) -> Response:
        upstream = await client.get(f"{chat_base_url}/models", headers=headers)
        return Response(upstream.content, upstream.status_code, media_type="application/json")

    routes = [Route(path, relay, methods=["POST"]) for path in WIRE_PATHS]
    routes.append(Route("/v1/models", models, methods=["GET"]))
    return Starlette(routes=routes)


class RunningRelay:
    """The relay serving on a free loopback port in a background thread."""

    def __init__(self, chat_base_url: str, api_key: str) -> None:
        self._sock = bind_loopback()
        host, port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        app = create_relay(chat_base_url, api_key)
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("relay did not start")
            time.sleep(0.01)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

"""The real model gateway (uhp_server.gateway, translation included) served on a loopback
port in a background thread, with one turn's token for a Chat-Completions provider: for base
tests that run a CLI speaking another wire (Gemini CLI) directly, without a whole server."""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI

from tests.scripted_provider.fixture import bind_loopback
from uhp_server.gateway import TokenRegistry, Upstreams, gateway_path, make_gateway_router
from uhp_server.gateway.providers import Provider
from uhp_server.settings import Settings


class RunningGateway:
    def __init__(self, chat_base_url: str, api_key: str, model: str) -> None:
        self.tokens = TokenRegistry()
        self._upstreams = Upstreams(Settings(OPENAI_API_KEY=None, ANTHROPIC_API_KEY=None))
        provider = Provider("scripted", "chat", chat_base_url, api_key, models=(model,))
        self.token = self.tokens.issue("openai", model, 3600, provider=provider).token
        app = FastAPI()
        app.include_router(make_gateway_router(self.tokens, self._upstreams))
        self._sock = bind_loopback()
        host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{self.port}{gateway_path('openai')}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

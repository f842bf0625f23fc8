"""Run the provider in-process: uvicorn in a background thread on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from .app import create_app


def bind_loopback(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket (``port`` 0 picks a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


class RunningProvider:
    """A provider serving in a background thread."""

    def __init__(self, api_key: str, models: list[str], **options: Any) -> None:
        self.api_key = api_key
        self.models = list(models)
        self.chat_only = bool(options.get("chat_only"))
        self.app = create_app(api_key, self.models, **options)
        self._sock = bind_loopback()
        host, port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=3
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``<url>/v1``)."""
        return f"{self.url}/v1"

    def url_for(self, backend: str) -> str:
        """The base URL as clients of a harness base's wire expect it: `base_url` for
        "openai", the bare `url` for "anthropic" (its SDK adds `/v1` itself)."""
        return self.base_url if backend == "openai" else self.url

    def start(self, timeout: float = 10.0) -> RunningProvider:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("scripted provider did not start")
            time.sleep(0.01)
        return self

    def requests(self) -> list[dict]:
        """The recorded requests (method, path, headers, body, script, step, answer)."""
        return self.app.state.recorder.entries()

    def require_headers(self, headers: dict[str, str]) -> None:
        """From now on, refuse (401) a model call without these headers (a platform's run
        token, which changes with every invocation of a run)."""
        required = self.app.state.required_headers
        required.clear()
        required.update({k.lower(): v for k, v in headers.items()})

    def reset(self) -> None:
        """Forget the recorded requests."""
        self.app.state.recorder.clear()

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        self.app.state.closing = True
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> RunningProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> httpx.Client:
        """An httpx client for this provider, authenticated with its key."""
        headers = {"authorization": f"Bearer {self.api_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def start_provider(api_key: str, models: list[str], **options: Any) -> RunningProvider:
    """Start a provider on a free loopback port; call ``.stop()`` when done. ``options``:
    ``chat_only``, ``required_headers`` (see app.create_app)."""
    return RunningProvider(api_key, models, **options).start()

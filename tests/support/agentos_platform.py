"""A stand-in for the AgentOS platform's side of an agent's run: the holds endpoint
(`POST /v0/holds`), which accepts only the run token of the invocation being answered, and
the invoke bodies the platform sends. The model gateway is the scripted provider in
Chat-Completions-only mode, requiring the same run token (`require_headers`)."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.scripted_provider import RunningProvider
from tests.scripted_provider.fixture import bind_loopback

RUN_TOKEN_HEADER = "x-agentos-run-token"


def start_invocation(prompt: str, llm_base_url: str) -> dict[str, Any]:
    """The least `/invoke` body of the contract: a run's first invocation, no platform behind
    its `api_url` (for in-process tests that call the door directly)."""
    return {
        "capability": "run",
        "run_id": "r_1",
        "session_id": None,
        "input": {"prompt": prompt},
        "invocation": {"id": "r_1:1", "seq": 1, "attempt": 1, "kind": "start"},
        "resume": None,
        "context": {
            "token": "tok_1",
            "api_url": "https://platform.example",
            "config": {"models": {"agent": "m"}, "prompts": {}, "params": {}},
            "agent_id": "agt_1",
            "version": "v1",
            "llm": {"base_url": llm_base_url, "api_key": "k"},
        },
    }


class AgentosPlatform:
    def __init__(self, gateway: RunningProvider) -> None:
        self.gateway = gateway
        self.holds: list[dict[str, Any]] = []
        self.refused_holds = 0
        self.token = ""
        app = Starlette(routes=[Route("/v0/holds", self._open_hold, methods=["POST"])])
        self._sock = bind_loopback()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> AgentosPlatform:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline and self._thread.is_alive()
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()

    async def _open_hold(self, request: Request) -> JSONResponse:
        if not self.token or request.headers.get(RUN_TOKEN_HEADER) != self.token:
            self.refused_holds += 1
            return JSONResponse({"error": "invalid run token"}, status_code=401)
        hold = {"id": f"h_{len(self.holds) + 1}", **(await request.json())}
        self.holds.append(hold)
        return JSONResponse({"id": hold["id"], "status": "open"}, status_code=201)

    def new_token(self) -> str:
        """A fresh run token for the next invocation: the only one the platform honours."""
        self.token = "tok_" + secrets.token_hex(12)
        self.gateway.require_headers({RUN_TOKEN_HEADER: self.token})
        return self.token

    def answered(self) -> None:
        """The invocation was answered: its token stops working everywhere at once."""
        self.token = ""
        self.gateway.require_headers({RUN_TOKEN_HEADER: "tok_expired"})

    def _models(self, models: dict[str, str] | None) -> dict[str, str]:
        """The version's models: given ({} for none), or the gateway's first as `agent`."""
        return {"agent": self.gateway.models[0]} if models is None else models

    def invoke_body(
        self,
        run_id: str,
        prompt: str,
        *,
        seq: int = 1,
        session_id: str | None = None,
        resume: Any = None,
        models: dict[str, str] | None = None,
        evaluation: dict[str, Any] | None = None,
        capability: str = "run",
        llm_base_url: str | None = None,
    ) -> dict[str, Any]:
        return {
            "capability": capability,
            "run_id": run_id,
            "session_id": session_id,
            "user": None,
            "input": {"prompt": prompt},
            "invocation": {
                "id": f"{run_id}:{seq}",
                "seq": seq,
                "attempt": 1,
                "kind": "start" if resume is None else "resume",
            },
            "resume": resume,
            "context": {
                "token": self.new_token(),
                "api_url": self.url,
                "config": {"models": self._models(models), "prompts": {}, "params": {}},
                "agent_id": "agt_1",
                "version": "v1",
                "llm": {
                    "base_url": llm_base_url or self.gateway.base_url,
                    "api_key": self.gateway.api_key,
                },
                "secrets": {"CRM_API_KEY": "crm-secret-5b1e"},
                "eval": evaluation,
                "a_future_field": {"ignored": True},
            },
            "a_future_top_level_field": 1,
        }

"""The whole app in this process, on a FakeBase and a FakeSandbox, reached through httpx's
ASGITransport (lifespan included: recovery and sandbox hooks run as in `serve`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from harness_bases.base import HarnessBase
from tests.support.fakes import FakeBase, FakeSandbox
from uhp_server.app import create_app
from uhp_server.context import AppContext
from uhp_server.engine.replicas.cluster import Cluster
from uhp_server.engine.turns.run import Run
from uhp_server.environments.builder import Builder
from uhp_server.settings import Settings

API_KEY = "uhp_sk_fast_tier_key"


@dataclass
class InProcess:
    app: FastAPI
    client: httpx.AsyncClient
    base: FakeBase
    sandbox: FakeSandbox

    @property
    def ctx(self) -> AppContext:
        return self.app.state.ctx

    def run(self, response_id: str) -> Run:
        """The run of a response this server runs or ran lately; it must have one."""
        run = self.ctx.runs.get(response_id)
        assert run is not None, f"no run of {response_id} here"
        return run

    @property
    def cluster(self) -> Cluster:
        """This replica's peers: the other replicas on its PostgreSQL database."""
        peers = self.ctx.runs.peers
        assert isinstance(peers, Cluster), "not a replica on a shared database"
        return peers

    async def submit(self, input: str, **body: Any) -> httpx.Response:
        headers = body.pop("headers", {})
        return await self.client.post(
            "/v1/responses", json={"input": input, **body}, headers=headers
        )


@asynccontextmanager
async def in_process(
    data_dir: Path,
    provider_url: str,
    provider_key: str,
    base: FakeBase | None = None,
    sandbox: FakeSandbox | None = None,
    builder: Builder | None = None,
    more_bases: tuple[FakeBase, ...] = (),
    **settings: Any,
) -> AsyncIterator[InProcess]:
    """`provider_url`: an OpenAI-style base URL (the scripted provider's): the catalog lists
    its models; the fake turns never call it. `builder`: what environments are built with
    (unset: the server's own, which needs the sandbox toolchain). `more_bases`: enabled
    after `base`, in their order."""
    base = base or FakeBase()
    sandbox = sandbox or FakeSandbox()
    config = Settings(
        data_dir=data_dir,
        api_key=API_KEY,
        providers_file=None,
        # Settings read these by their environment names only.
        OPENAI_API_KEY=provider_key,
        OPENAI_BASE_URL=provider_url,
        cancel_grace_seconds=0.5,
        **settings,
    )
    bases: dict[str, HarnessBase] = {b.name: b for b in (base, *more_bases)}
    app = create_app(config, bases=bases, sandbox=sandbox, builder=builder)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://uhp.test", headers=headers, timeout=30
        ) as client,
    ):
        yield InProcess(app, client, base, sandbox)

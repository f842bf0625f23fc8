"""What the hostile-input tests share: the whole app in process, with a small JSON body cap
so that size limits are reached cheaply, and a body nested past any parser's depth."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.in_process import InProcess, in_process

DEEP = b"[" * 5000 + b"]" * 5000
BODY_CAP = 64 * 1024


@asynccontextmanager
async def capped_app(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, max_request_bytes=BODY_CAP
    ) as running:
        yield running

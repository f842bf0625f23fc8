"""Sandboxes register themselves through the `uhp_server.sandboxes` entry points, exactly as
bases do: UHP_SANDBOX names one, the registry builds it from the settings, and a third
party's sandbox is one package plus one entry-point line."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest

from harness_bases.base import SandboxPaths
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import FakeBase, answer
from uhp_server.app import create_app
from uhp_server.cli import build_parser
from uhp_server.sandbox.base import Sandbox
from uhp_server.sandbox.registry import (
    ENTRY_POINT_GROUP,
    make_sandbox,
    sandbox_class,
    sandbox_names,
)
from uhp_server.settings import Settings

BUILT_IN = {"local", "docker"}

THIRD_PARTY = '''
from tests.support.fakes import FakeSandbox
from uhp_server.sandbox.base import Sandbox


class TinySandbox(FakeSandbox):
    """Runs turns as the fake sandbox does; remembers what it was built from."""

    name = "tiny"

    @classmethod
    def from_settings(cls, settings, bases=()):
        sandbox = cls()
        sandbox.settings = settings
        sandbox.bases = sorted(base.name for base in bases)
        return sandbox


class Misnamed(TinySandbox):
    name = "something-else"


class Partial(Sandbox):
    """Everything but from_settings."""

    name = "partial"

    def gateway_url(self, backend):
        return "http://127.0.0.1:9/"

    async def start(self, invocation, mounts):
        raise NotImplementedError


class NotASandbox:
    name = "not-a-sandbox"
'''


def test_the_built_in_sandboxes_are_registered() -> None:
    """Read straight from the entry points, as a packager's metadata has them."""
    registered = {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)}
    assert registered >= BUILT_IN
    assert set(sandbox_names()) == registered


@pytest.mark.parametrize("name", sandbox_names())
def test_every_registered_sandbox_implements_the_interface_and_builds_from_defaults(
    name: str, tmp_path: Path
) -> None:
    """Building connects to nothing (open() does), so the docker sandbox builds without an
    engine too: no skip."""
    cls = sandbox_class(name)
    assert issubclass(cls, Sandbox) and not inspect.isabstract(cls)
    assert cls.name == name
    sandbox = make_sandbox(Settings(data_dir=tmp_path, sandbox=name))
    assert type(sandbox) is cls
    assert isinstance(sandbox.paths, SandboxPaths)
    assert sandbox.gateway_url("openai").startswith("http://")


def test_an_unknown_sandbox_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown sandbox 'nowhere' \(UHP_SANDBOX\)") as raised:
        make_sandbox(Settings(data_dir=tmp_path, sandbox="nowhere"))
    assert "docker, local" in str(raised.value)


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A throw-away installed distribution registering sandboxes, good and bad."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "tiny_sandbox.py").write_text(THIRD_PARTY)
    info = root / "tiny_sandbox-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-sandbox\nVersion: 0.1\n")
    entries = {
        "tiny": "tiny_sandbox:TinySandbox",
        "misnamed": "tiny_sandbox:Misnamed",
        "partial": "tiny_sandbox:Partial",
        "not-a-sandbox": "tiny_sandbox:NotASandbox",
        "broken": "tiny_sandbox_missing:Nothing",
    }
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    monkeypatch.syspath_prepend(str(root))
    yield


@pytest.mark.usefixtures("third_party")
async def test_a_third_party_sandbox_runs_the_servers_turns(
    tmp_path: Path, provider: RunningProvider
) -> None:
    assert set(sandbox_names()) >= {"tiny", *BUILT_IN}
    assert build_parser().parse_args(["serve", "--sandbox", "tiny"]).sandbox == "tiny"
    base = FakeBase()
    base.script("hello", answer("hi from tiny"))
    settings = Settings(
        data_dir=tmp_path / "data",
        sandbox="tiny",
        api_key="uhp_sk_registry_test",
        providers_file=None,
        OPENAI_API_KEY=PROVIDER_KEY,
        OPENAI_BASE_URL=provider.base_url,
    )
    app = create_app(settings, bases={base.name: base})  # no sandbox handed in
    sandbox = app.state.ctx.runs.executor.sandbox
    assert type(sandbox).__name__ == "TinySandbox"
    assert sandbox.settings is settings and sandbox.bases == ["fake"]
    headers = {"Authorization": "Bearer uhp_sk_registry_test"}
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://uhp.test", headers=headers) as c,
    ):
        resp = await c.post("/v1/responses", json={"input": "hello", "model": "gpt-test"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "completed"
    assert len(sandbox.started) == 1


@pytest.mark.usefixtures("third_party")
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("misnamed", "registered as 'misnamed' but names itself 'something-else'"),
        ("partial", "does not implement from_settings"),
        ("not-a-sandbox", "is not a Sandbox subclass"),
        ("broken", "No module named 'tiny_sandbox_missing'"),
    ],
)
def test_a_registered_sandbox_that_cannot_be_used_stops_the_server_saying_why(
    name: str, why: str, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match=f"sandbox '{name}' \\(UHP_SANDBOX\\) cannot be loaded"):
        make_sandbox(Settings(data_dir=tmp_path, sandbox=name))
    with pytest.raises(RuntimeError) as raised:
        sandbox_class(name)
    assert why in str(raised.value)

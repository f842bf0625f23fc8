"""Doors register themselves through the `uhp_server.doors` entry points, exactly as bases and
sandboxes do: the server serves every registered door, a door that cannot be loaded stops it
saying why, and no method and path is served by two parts of the application."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter
from starlette.routing import Mount

from tests.support.fakes import FakeBase, FakeSandbox
from uhp_server.app import create_app, served
from uhp_server.context import build_context
from uhp_server.doors.door import Door
from uhp_server.doors.registry import ENTRY_POINT_GROUP, doors
from uhp_server.http.route_table import claims, clashes, served_routes
from uhp_server.settings import Settings

BUILT_IN = {"uhp", "openai-chat", "oumi-harness", "oumi-tools", "agentos", "console"}
KEY = "uhp_sk_door_registry_test"

THIRD_PARTY = """
from fastapi import APIRouter, Request
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from uhp_server.doors.door import Door, SubApp
from uhp_server.doors.deps import EngineDep
from uhp_server.http.auth import require_principal

router = APIRouter()


@router.get("/tiny/bases")
async def bases(request: Request, engine: EngineDep):
    await require_principal(request)
    return {"bases": sorted(engine.bases)}


def tiny_app(engine):
    async def hello(request):
        return JSONResponse({"bases": sorted(engine.bases)})
    return Starlette(routes=[Route("/hello", hello)])


door = Door(name="tiny", speaks="a tiny contract", routers=(router,),
            sub_apps=(SubApp("/tiny-app", tiny_app),))
misnamed = Door(name="something-else", speaks="x", routers=(router,))
empty = Door(name="tiny", speaks="nothing at all")
not_a_door = object()

taker = APIRouter()


@taker.get("/v1/harnesses")
def take_over():
    return {}


clashing = Door(name="clashing", speaks="the protocol, again", routers=(taker,))
"""


def test_the_built_in_doors_are_registered() -> None:
    """Read straight from the entry points, as a packager's metadata has them."""
    registered = {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)}
    assert registered >= BUILT_IN
    assert set(doors()) == registered


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_built_in_door_is_a_door_named_as_registered(name: str) -> None:
    door = doors()[name]
    assert isinstance(door, Door)
    assert door.name == name and door.speaks
    assert door.routers or door.sub_apps


def test_no_method_and_path_is_served_twice(tmp_path: Path) -> None:
    """Across the gateway, operations, the API docs and every door (and inside the mounted
    Chat Completions application): so the order of the flat list decides no request."""
    ctx = build_context(Settings(data_dir=tmp_path), bases={}, sandbox=FakeSandbox())
    parts = served(ctx, doors().values())
    assert clashes(parts) == []
    # The check saw everything the application serves, routes and mounts alike.
    app = create_app(Settings(data_dir=tmp_path / "app"), bases={}, sandbox=FakeSandbox())
    seen = {(c.path, c.methods) for part in parts for c in claims(part)[0]}
    for route in served_routes(app):
        assert (route.path, frozenset(route.methods)) in seen, route.path
    mounts = [route.path for route in app.routes if isinstance(route, Mount)]
    assert mounts == ["/openai/v1"]
    (chat,) = [part for part in parts if isinstance(part, Mount)]
    assert "/openai/v1/chat/completions" in {c.path for c in claims(chat)[0]}


def _router(*routes: tuple[str, str]) -> APIRouter:
    router = APIRouter()
    for method, path in routes:
        router.add_api_route(path, lambda: {}, methods=[method])
    return router


@pytest.mark.parametrize(
    ("parts", "found"),
    [
        ([_router(("GET", "/v1/x")), _router(("GET", "/v1/x"))], "GET /v1/x: served by"),
        ([_router(("GET", "/v1/x"), ("GET", "/v1/x"))], "GET /v1/x: served by"),
        ([_router(("GET", "/v1/{a}/b")), _router(("GET", "/v1/x/{c}"))], "could answer"),
        ([_router(("POST", "/g/{p:path}")), _router(("POST", "/g/x/y/z"))], "could answer"),
        ([Mount("/m", app=_router(("GET", "/x"))), _router(("PUT", "/m/y"))], "could answer"),
        ([Mount("/m", app=_router(("GET", "/x"), ("GET", "/x")))], "GET /m/x: served by"),
    ],
)
def test_a_clash_is_found(parts: list, found: str) -> None:
    assert any(found in problem for problem in clashes(parts)), clashes(parts)


def test_what_cannot_clash_is_not_reported() -> None:
    parts: list[APIRouter | Mount] = [
        _router(("GET", "/v1/x"), ("GET", "/v1/{a}")),  # within a part, order decides
        _router(("POST", "/v1/x")),  # another method
        _router(("GET", "/health"), ("GET", "/v1/x/y")),  # another path
        Mount("/m", app=_router(("GET", "/x"))),
        _router(("GET", "/m")),  # the mount answers below /m/ only
    ]
    assert clashes(parts) == []


@pytest.fixture
def register(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, str]], None]:
    """Installs a throw-away distribution registering `entries` as doors."""

    def install(entries: dict[str, str]) -> None:
        root = tmp_path / "site"
        root.mkdir()
        (root / "tiny_door.py").write_text(THIRD_PARTY)
        info = root / "tiny_door-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-door\nVersion: 0.1\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
        monkeypatch.syspath_prepend(str(root))

    return install


async def test_a_third_party_door_is_served_with_the_engine(
    tmp_path: Path, register: Callable[[dict[str, str]], None]
) -> None:
    register({"tiny": "tiny_door:door"})
    assert set(doors()) == {*BUILT_IN, "tiny"}
    base = FakeBase()
    settings = Settings(data_dir=tmp_path / "data", api_key=KEY)
    app = create_app(settings, bases={base.name: base}, sandbox=FakeSandbox())
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://uhp.test") as client,
    ):
        refused = await client.get("/tiny/bases")
        routed = await client.get("/tiny/bases", headers={"Authorization": f"Bearer {KEY}"})
        mounted = await client.get("/tiny-app/hello")
        protocol = await client.get("/v1/uhp")
    assert refused.status_code == 401
    assert routed.status_code == 200 and routed.json() == {"bases": ["fake"]}
    assert mounted.status_code == 200 and mounted.json() == {"bases": ["fake"]}
    assert protocol.status_code == 200  # the built-in doors are still there


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("tiny_door:misnamed", "registered as 'tiny' but names itself 'something-else'"),
        ("tiny_door:empty", "serves no routes"),
        ("tiny_door:not_a_door", "is not a Door"),
        ("tiny_door_missing:door", "No module named 'tiny_door_missing'"),
    ],
)
def test_a_door_that_cannot_be_loaded_stops_the_server_saying_why(
    value: str, why: str, tmp_path: Path, register: Callable[[dict[str, str]], None]
) -> None:
    register({"tiny": value})
    with pytest.raises(RuntimeError, match="door 'tiny' cannot be loaded") as raised:
        create_app(Settings(data_dir=tmp_path / "data"), bases={}, sandbox=FakeSandbox())
    assert why in str(raised.value)
    assert not (tmp_path / "data").exists()  # stopped before anything was opened


def test_a_door_that_takes_another_doors_route_stops_the_server(
    tmp_path: Path, register: Callable[[dict[str, str]], None]
) -> None:
    register({"clashing": "tiny_door:clashing"})
    with pytest.raises(RuntimeError, match="routes served twice") as raised:
        create_app(Settings(data_dir=tmp_path / "data"), bases={}, sandbox=FakeSandbox())
    (problem,) = str(raised.value).splitlines()[1:]
    assert problem.startswith("GET /v1/harnesses: served by ")
    assert "uhp_server.doors.uhp.harnesses.list_harnesses" in problem
    assert "tiny_door.take_over" in problem

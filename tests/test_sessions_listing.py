"""Session listing (Sessions §2): cursor pages over real SQLite, in-process, no agent CLI.

Sessions are written straight into the app's database (what a finished task leaves behind),
then read through the HTTP API as a client would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from storage import keys
from storage import sessions as session_store
from storage.tables import SessionRow
from tests.support.app_context import app_context
from tests.support.schema import validate
from uhp_server.app import create_app
from uhp_server.ids import new_time_ordered_id
from uhp_server.settings import Settings

KEY = "uhp_sk_listing_test"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def add_sessions(client: TestClient, count: int, *, principal: str = "default", **fields: Any):
    db = app_context(client).db
    owner = db.run(keys.ensure_principal, principal)
    made = []
    for i in range(count):
        row = SessionRow(
            id=f"hsess{principal}{i:04d}",
            principal_id=owner.id,
            harness_id=fields.get("harness_id", "chrn_a"),
            container_id=f"cntr_{i}",
            title=f"task {i}",
            status="completed",
            # Several sessions share a second: the order must still be total and stable.
            created_at=1_786_400_000 + i // 3,
            updated_at=1_786_400_000 + i // 3,
        )
        made.append(db.run(session_store.insert_session, row))
    return made


def walk(client: TestClient, limit: int, **params: str) -> tuple[list[dict], list[int]]:
    """Every page from the first; returns all sessions and each page's size."""
    seen: list[dict] = []
    sizes: list[int] = []
    cursor = None
    while True:
        query: dict[str, Any] = {"limit": limit, **params}
        if cursor:
            query["cursor"] = cursor
        answer = client.get("/v1/sessions", params=query, headers=AUTH)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        validate("SessionList", body)
        seen += body["sessions"]
        sizes.append(len(body["sessions"]))
        cursor = body["next_cursor"]
        if cursor is None:
            return seen, sizes
        assert len(sizes) < 50, "pagination never ended"


def test_pages_cover_everything_once_newest_first_and_end_with_a_null_cursor(
    http: TestClient,
) -> None:
    made = add_sessions(http, 12)
    seen, sizes = walk(http, 4)
    # Exactly full pages: the last full page already says there is nothing more.
    assert sizes == [4, 4, 4]
    assert [s["id"] for s in seen] == [
        r.id for r in sorted(made, key=lambda r: (r.created_at, r.id), reverse=True)
    ]
    for session in seen:
        validate("Session", session)
        assert session["object"] == "session"
        assert set(session) >= {"id", "harness_id", "title", "status", "created_at", "updated_at"}
    seen5, sizes5 = walk(http, 5)
    assert sizes5 == [5, 5, 2] and seen5 == seen
    one_page, sizes100 = walk(http, 100)
    assert sizes100 == [12] and one_page == seen
    default = http.get("/v1/sessions", headers=AUTH).json()
    assert len(default["sessions"]) == 12 and default["next_cursor"] is None


def test_a_cursor_stays_valid_while_new_sessions_arrive(http: TestClient) -> None:
    add_sessions(http, 6)
    first = http.get("/v1/sessions", params={"limit": 3}, headers=AUTH).json()
    add_sessions(http, 2, principal="default2")  # another principal's: never listed
    db = app_context(http).db
    owner = db.run(keys.ensure_principal, "default")
    db.run(
        session_store.insert_session,
        SessionRow(
            id="hsessnewest",
            principal_id=owner.id,
            harness_id="chrn_a",
            container_id="cntr_n",
            created_at=1_786_500_000,
            updated_at=1_786_500_000,
        ),
    )
    rest = http.get(
        "/v1/sessions", params={"limit": 10, "cursor": first["next_cursor"]}, headers=AUTH
    ).json()
    ids = [s["id"] for s in first["sessions"] + rest["sessions"]]
    assert len(ids) == len(set(ids)) == 6 and "hsessnewest" not in ids
    assert rest["next_cursor"] is None


def test_the_harness_filter_and_scope(http: TestClient) -> None:
    add_sessions(http, 3, harness_id="chrn_a")
    db = app_context(http).db
    owner = db.run(keys.ensure_principal, "default")
    db.run(
        session_store.insert_session,
        SessionRow(
            id="hsessother",
            principal_id=owner.id,
            harness_id="chrn_b",
            container_id="cntr_b",
            created_at=1,
            updated_at=1,
        ),
    )
    only_b, _ = walk(http, 2, harness="chrn_b")
    assert [s["id"] for s in only_b] == ["hsessother"]
    assert len(walk(http, 2, harness="chrn_a")[0]) == 3
    assert walk(http, 2, harness="chrn_none")[0] == []
    add_sessions(http, 2, principal="someone")
    assert len(walk(http, 100)[0]) == 4  # someone else's sessions are not listed


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "WzEsMl0"}, "cursor"),  # base64 of [1,2]: well-formed, not ours
    ],
)
def test_bad_paging_parameters_are_invalid_input(
    http: TestClient, params: dict[str, Any], param: str
) -> None:
    answer = http.get("/v1/sessions", params=params, headers=AUTH)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_input" and error["param"] == param


def test_listing_needs_a_credential(http: TestClient) -> None:
    assert http.get("/v1/sessions").status_code == 401
    assert http.get("/v1/sessions/hsessx").status_code == 401


def test_sessions_made_within_one_second_are_listed_newest_first(
    http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """created_at has one-second resolution; the id, which begins with the millisecond it was
    made, orders sessions within the second."""
    db = app_context(http).db
    owner = db.run(keys.ensure_principal, "default")
    made = []
    for millisecond in (5, 6, 7, 8):
        monkeypatch.setattr(
            time, "time_ns", lambda ms=millisecond: (1_786_400_000_000 + ms) * 10**6
        )
        row = SessionRow(
            id=new_time_ordered_id("session"),
            principal_id=owner.id,
            harness_id="chrn_a",
            container_id="cntr_x",
            created_at=1_786_400_000,
            updated_at=1_786_400_000,
        )
        made.append(db.run(session_store.insert_session, row).id)
    listed = http.get("/v1/sessions", headers=AUTH).json()["sessions"]
    assert [s["id"] for s in listed] == made[::-1]

"""The console's sign-in in process: the key exchanged for a server-side sign-in, the cookie's
attributes, the CSRF guard on every write (Origin and synchronizer token), sign-out, expiry,
and a revoked key ending its sign-ins. The browser walk is tests/test_console_browser.py."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from harness_bases.codex import CodexBase
from harness_bases.events import TextDelta
from storage import harnesses as harness_store
from storage import keys
from storage import sessions as session_store
from storage.tables import HarnessRow, ResponseRow, SessionRow, SignInRow
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.app_context import app_context
from tests.support.fakes import FakeBase, Hang
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for
from uhp_server.app import create_app
from uhp_server.doors.console.live import resume_after
from uhp_server.settings import Settings

KEY = "uhp_sk_console_fast_default_key"
ORIGIN = "http://testserver"
FORM_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
IN_PROCESS_ORIGIN = "http://uhp.test"  # tests.support.in_process's
IN_PROCESS_WRITE = {"Origin": IN_PROCESS_ORIGIN}


def start(data_dir: Path, base_url: str = ORIGIN, **settings: Any) -> TestClient:
    """The server in process. A second one on the same data folder is a second browser with
    a cookie jar of its own; it needs a replica id of its own (on PostgreSQL the two are
    replicas of one database)."""
    app = create_app(Settings(data_dir=data_dir, api_key=KEY, **settings), bases={})
    return TestClient(app, base_url=base_url, raise_server_exceptions=False)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with start(tmp_path) as client:
        yield client


def form_token(page: str) -> str:
    found = FORM_TOKEN.search(page)
    assert found, page
    return found.group(1)


def sign_in(http: TestClient, key: str = KEY, origin: str = ORIGIN) -> str:
    """Signs in as a browser would; the sign-in's CSRF token, read off the page it lands on."""
    token = form_token(http.get("/console/sign-in").text)
    answer = http.post(
        "/console/sign-in",
        data={"key": key, "csrf_token": token},
        headers={"Origin": origin},
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console"
    home = http.get("/console", follow_redirects=False)
    assert home.status_code == 200, home.text
    return form_token(home.text)


def signed_in(http: TestClient) -> bool:
    answer = http.get("/console", follow_redirects=False)
    if answer.status_code == 303:
        assert answer.headers["location"] == "/console/sign-in"
        return False
    assert answer.status_code == 200, answer.text
    return True


def set_cookie(answer: Any, name: str) -> str:
    headers = [h for h in answer.headers.get_list("set-cookie") if h.startswith(name + "=")]
    assert len(headers) == 1, answer.headers
    return headers[0]


def test_a_page_sends_a_browser_not_signed_in_to_the_sign_in_form(http: TestClient) -> None:
    answer = http.get("/console", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in"
    form = http.get("/console/sign-in")
    assert form.status_code == 200
    assert 'type="password"' in form.text and '<label for="key">' in form.text


def test_a_key_is_exchanged_for_a_cookie_that_is_not_the_key(http: TestClient) -> None:
    token = form_token(http.get("/console/sign-in").text)
    answer = http.post(
        "/console/sign-in",
        data={"key": KEY, "csrf_token": token},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    cookie = set_cookie(answer, "uhp_console")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/console"} <= attributes
    assert "secure" not in attributes  # plain http: a Secure cookie would never come back
    value = cookie.split(";")[0].split("=", 1)[1]
    assert KEY not in cookie and len(value) >= 40
    home = http.get("/console")
    assert '<span class="who">default</span>' in home.text
    assert KEY not in home.text
    # Neither the key nor the browser's token is in the database: only their hashes.
    with app_context(http).db.engine.connect() as connection:
        stored = " ".join(
            str(v) for row in connection.exec_driver_sql("SELECT * FROM sign_in") for v in row
        )
    assert KEY not in stored and value not in stored and keys.hash_key(value) in stored


def test_a_wrong_key_and_a_revoked_key_get_the_same_answer(http: TestClient) -> None:
    ctx = app_context(http)
    key_id, revoked = ctx.db.run(keys.create_key, "someone")
    ctx.db.run(keys.revoke_key, key_id)
    answers = []
    for key in ("uhp_sk_never_issued", revoked, "not even a key"):
        token = form_token(http.get("/console/sign-in").text)
        answer = http.post(
            "/console/sign-in",
            data={"key": key, "csrf_token": token},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )
        assert answer.status_code == 401
        assert "uhp_console=" not in answer.headers.get("set-cookie", "")
        answers.append(answer.text.count("That key is not valid."))
    assert answers == [1, 1, 1]
    assert not signed_in(http)


@pytest.mark.parametrize(
    ("origin", "token"),
    [
        (None, "right"),  # no Origin
        ("https://evil.example", "right"),  # another site's page
        ("null", "right"),  # a sandboxed frame or a file
        (ORIGIN, None),  # no token
        (ORIGIN, "wrong"),  # a token of another form
    ],
)
def test_a_forged_sign_in_is_refused(
    http: TestClient, origin: str | None, token: str | None
) -> None:
    """Login CSRF: a cross-site page signing the browser in to the attacker's principal."""
    right = form_token(http.get("/console/sign-in").text)
    data = {"key": KEY}
    if token is not None:
        data["csrf_token"] = right if token == "right" else "x" * 43
    headers = {"Origin": origin} if origin else {}
    answer = http.post("/console/sign-in", data=data, headers=headers, follow_redirects=False)
    assert answer.status_code == 403
    assert "Refused" in answer.text
    assert not signed_in(http)


@pytest.mark.parametrize(
    ("origin", "token"),
    [(None, "right"), ("https://evil.example", "right"), (ORIGIN, None), (ORIGIN, "wrong")],
)
def test_a_forged_sign_out_is_refused(
    http: TestClient, origin: str | None, token: str | None
) -> None:
    csrf = sign_in(http)
    data = {} if token is None else {"csrf_token": csrf if token == "right" else "x" * 43}
    headers = {"Origin": origin} if origin else {}
    answer = http.post("/console/sign-out", data=data, headers=headers, follow_redirects=False)
    assert answer.status_code == 403
    assert signed_in(http)


def test_the_form_token_of_the_sign_in_page_is_not_a_sign_ins_token(http: TestClient) -> None:
    """A token another sign-in was given opens no write of this one."""
    first = sign_in(http)
    with start(Path(app_context(http).settings.data_dir), replica_id="second-browser") as other:
        second = sign_in(other)
        assert second != first
        answer = other.post(
            "/console/sign-out",
            data={"csrf_token": first},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )
        assert answer.status_code == 403


def test_sign_out_ends_the_sign_in_on_the_server(http: TestClient) -> None:
    csrf = sign_in(http)
    cookie = http.cookies.get("uhp_console", path="/console")
    assert cookie
    answer = http.post(
        "/console/sign-out",
        data={"csrf_token": csrf},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/console/sign-in"
    assert not signed_in(http)
    # The old cookie, replayed, opens nothing: the sign-in is gone, not only the cookie.
    http.cookies.set("uhp_console", cookie, domain="testserver.local", path="/console")
    replay = http.get(
        "/console", headers={"Cookie": f"uhp_console={cookie}"}, follow_redirects=False
    )
    assert replay.status_code == 303


def test_a_sign_in_expires(tmp_path: Path) -> None:
    with start(tmp_path, console_session_hours=1 / 3600) as http:  # one second
        sign_in(http)
        rows = app_context(http).db.run(lambda tx: tx.orm.exec(select(SignInRow)).all())
        assert len(rows) == 1 and 0.5 < rows[0].expires_at - rows[0].created_at <= 1.0
        time.sleep(1.2)
        assert not signed_in(http)


def test_revoking_the_key_ends_its_sign_ins(http: TestClient) -> None:
    ctx = app_context(http)
    key_id, key = ctx.db.run(keys.create_key, "alice")
    _, other = ctx.db.run(keys.create_key, "bob")
    sign_in(http, key)
    assert '<span class="who">alice</span>' in http.get("/console").text
    with start(Path(ctx.settings.data_dir), replica_id="second-browser") as bob:
        sign_in(bob, other)
        ctx.db.run(keys.revoke_key, key_id)
        assert not signed_in(http)
        assert signed_in(bob)  # another key's sign-in goes on


def test_the_cookie_is_secure_over_https(tmp_path: Path) -> None:
    with start(tmp_path, base_url="https://console.test") as http:
        token = form_token(http.get("/console/sign-in").text)
        answer = http.post(
            "/console/sign-in",
            data={"key": KEY, "csrf_token": token},
            headers={"Origin": "https://console.test"},
            follow_redirects=False,
        )
        assert answer.status_code == 303
        assert "secure" in set_cookie(answer, "uhp_console").lower()


def test_behind_a_proxy_the_public_origin_is_the_one_checked(tmp_path: Path) -> None:
    """TLS ended at the proxy: the server sees http, the browser sends the public origin."""
    public = "https://uhp.example.com"
    with start(tmp_path, public_base_url=public + "/") as http:
        form = http.get("/console/sign-in")
        assert "secure" in set_cookie(form, "uhp_console_form").lower()
        # The test client speaks http, so it keeps a Secure cookie to itself: sent by hand,
        # as the browser on https would.
        cookie = set_cookie(form, "uhp_console_form").split(";")[0]
        data = {"key": KEY, "csrf_token": form_token(form.text)}
        sent = {"Cookie": cookie}
        refused = http.post(
            "/console/sign-in",
            data=data,
            headers={**sent, "Origin": ORIGIN},
            follow_redirects=False,
        )
        assert refused.status_code == 403
        answer = http.post(
            "/console/sign-in",
            data=data,
            headers={**sent, "Origin": public},
            follow_redirects=False,
        )
        assert answer.status_code == 303
        assert "secure" in set_cookie(answer, "uhp_console").lower()


def test_bodies_that_are_not_a_console_form_are_refused_with_a_page(http: TestClient) -> None:
    token = form_token(http.get("/console/sign-in").text)
    cases = [
        ({"Content-Type": "application/json"}, b'{"key": "x"}'),
        ({"Content-Type": "application/x-www-form-urlencoded"}, b"key=" + b"a" * 70_000),
        (
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"key=%ff%fe&csrf_token=" + token.encode(),
        ),
    ]
    for headers, body in cases:
        answer = http.post("/console/sign-in", content=body, headers={**headers, "Origin": ORIGIN})
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("text/html")


def test_every_page_carries_a_strict_csp_and_no_inline_script_or_style(http: TestClient) -> None:
    sign_in(http)
    for path in ("/console", "/console/sign-in", "/console/nowhere"):
        answer = http.get(path, follow_redirects=False)
        if answer.status_code == 404:
            continue  # not a console route: the server's ordinary 404
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
        assert "frame-ancestors 'none'" in csp
        assert answer.headers["x-frame-options"] == "DENY"
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text)
        assert " style=" not in answer.text and "<style" not in answer.text
        assert not re.search(r"\son[a-z]+=", answer.text)  # no inline event handlers


def test_the_assets_are_served_and_nothing_else_is(http: TestClient) -> None:
    assert http.get("/console/_assets/console.css").headers["content-type"].startswith("text/css")
    assert http.get("/console/_assets/console.js").status_code == 200
    assert http.get("/console/_assets/..%2Fpages.py").status_code == 404
    assert http.get("/console/_assets/pages.py").status_code == 404


# -- the sessions list and a session's page ------------------------------------------------
def add_session(http: TestClient, number: int, principal: str = "default", **fields: Any) -> str:
    """A session as a finished task leaves it, written straight into the app's database."""
    db = app_context(http).db
    owner = db.run(keys.ensure_principal, principal)
    row = SessionRow(
        id=fields.get("id", f"sess_{principal}_{number:05d}"),
        principal_id=owner.id,
        harness_id=fields.get("harness_id", "hrn_a"),
        container_id=f"cntr_{principal}_{number}",
        title=fields.get("title", f"task {number}"),
        status=fields.get("status", "completed"),
        created_at=1_786_400_000 + number // 3,  # several in one second: the order stays total
        updated_at=1_786_400_000 + number // 3,
    )
    return db.run(session_store.insert_session, row).id


LISTED = re.compile(r'class="session-title" href="/console/sessions/([^"]+)"')
OLDER = re.compile(r'rel="next" href="([^"]+)"')


def listed(http: TestClient, url: str = "/console") -> tuple[list[str], str | None]:
    answer = http.get(url)
    assert answer.status_code == 200, answer.text
    older = OLDER.search(answer.text)
    return LISTED.findall(answer.text), older.group(1).replace("&amp;", "&") if older else None


def test_the_list_pages_through_every_session_newest_first(http: TestClient) -> None:
    made = [add_session(http, n) for n in range(60)]
    add_session(http, 0, principal="mallory")
    sign_in(http)
    seen: list[str] = []
    url: str | None = "/console"
    pages = 0
    while url:
        ids, url = listed(http, url)
        seen += ids
        pages += 1
    assert pages == 3
    assert seen == sorted(made, reverse=True)  # newest first, each once, none of mallory's


def test_the_list_filters_by_status_harness_and_title_text(http: TestClient) -> None:
    add_session(http, 1, title="Build the 100% report", status="failed")
    add_session(http, 2, title="build_the report", status="completed", harness_id="hrn_b")
    add_session(http, 3, title="Unrelated", status="failed", harness_id="hrn_b")
    sign_in(http)
    assert len(listed(http, "/console?status=failed")[0]) == 2
    assert listed(http, "/console?harness=hrn_b&status=failed")[0] == ["sess_default_00003"]
    assert len(listed(http, "/console?q=BUILD")[0]) == 2  # any case
    # LIKE's wildcards are taken literally: "%" and "_" match only themselves.
    assert listed(http, "/console?q=100%25")[0] == ["sess_default_00001"]
    assert listed(http, "/console?q=build_")[0] == ["sess_default_00002"]
    assert listed(http, "/console?q=no+such+title")[0] == []
    assert "No session matches these filters." in http.get("/console?q=zzz").text


@pytest.mark.parametrize(
    "query", ["status=exploded", "cursor=not-a-cursor", "cursor=" + "A" * 50, "q=" + "x" * 201]
)
def test_a_bad_filter_is_a_400_page(http: TestClient, query: str) -> None:
    sign_in(http)
    answer = http.get(f"/console?{query}")
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")


def test_hostile_titles_render_as_text(http: TestClient) -> None:
    add_session(http, 1, title='<script>alert(1)</script><img src=x onerror="alert(2)">')
    sign_in(http)
    page = http.get("/console").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_another_principals_session_gives_nothing(http: TestClient) -> None:
    theirs = add_session(http, 1, principal="mallory", title="mallory's secret plan")
    csrf = sign_in(http)
    for path in (
        "",
        "/state",
        "/live",
        "/files/file_x",
        "/files/file_x/preview",
        "/files/file_x/image",
        "/files/file_x/pdf",
    ):
        answer = http.get(f"/console/sessions/{theirs}{path}")
        assert answer.status_code == 404, path
        assert "secret plan" not in answer.text
    for action in ("share", "cancel", "delete"):
        answer = http.post(
            f"/console/sessions/{theirs}/{action}",
            data={"csrf_token": csrf, "enabled": "true"},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )
        assert answer.status_code == 404, action
    ctx = app_context(http)
    mallory = ctx.db.run(keys.ensure_principal, "mallory")
    assert ctx.db.run(session_store.get_session, mallory.id, theirs) is not None


def test_a_sessions_page_shares_unshares_and_deletes_with_the_token(http: TestClient) -> None:
    mine = add_session(http, 1, title="A session of mine")
    csrf = sign_in(http)
    page = http.get(f"/console/sessions/{mine}")
    assert page.status_code == 200 and "A session of mine" in page.text
    assert "Share a read-only link" in page.text

    def post(action: str, **data: str) -> Any:
        return http.post(
            f"/console/sessions/{mine}/{action}",
            data={"csrf_token": csrf, **data},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )

    forged = http.post(
        f"/console/sessions/{mine}/delete", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert forged.status_code == 403  # no Origin
    assert post("share", enabled="true").status_code == 303
    shared = http.get(f"/console/sessions/{mine}").text
    link = re.search(r'id="share-link" type="text" readonly value="([^"]+)"', shared)
    assert link and link.group(1).startswith(ORIGIN + "/s/")
    assert http.get(link.group(1).removeprefix(ORIGIN)).status_code == 200  # the share page
    assert post("share", enabled="false").status_code == 303
    assert http.get(link.group(1).removeprefix(ORIGIN)).status_code == 404
    assert post("share", enabled="false").status_code == 303  # not shared: already so
    answer = post("delete")
    assert answer.status_code == 303 and answer.headers["location"] == "/console"
    assert http.get(f"/console/sessions/{mine}").status_code == 404
    assert listed(http)[0] == []


# -- running a task -----------------------------------------------------------------------
def test_running_a_task_needs_the_origin_the_token_and_a_prompt(http: TestClient) -> None:
    csrf = sign_in(http)
    form = http.get("/console/run")
    assert form.status_code == 200 and '<label for="run-prompt">' in form.text
    cases = [
        ({"csrf_token": csrf, "prompt": "SAY hi"}, {}, 403),  # no Origin
        ({"prompt": "SAY hi"}, {"Origin": ORIGIN}, 403),  # no token
        ({"csrf_token": csrf, "prompt": "  "}, {"Origin": ORIGIN}, 400),
        ({"csrf_token": csrf, "prompt": "x", "model": "a\nb"}, {"Origin": ORIGIN}, 400),
    ]
    for data, headers, status in cases:
        answer = http.post("/console/run", data=data, headers=headers, follow_redirects=False)
        assert answer.status_code == status, (data, answer.text)


def test_another_principals_session_cannot_be_continued_or_answered(http: TestClient) -> None:
    theirs = add_session(http, 1, principal="mallory")
    mine = add_session(http, 2)
    csrf = sign_in(http)
    for action in ("continue", "answer"):
        answer = http.post(
            f"/console/sessions/{theirs}/{action}",
            data={"csrf_token": csrf, "prompt": "SAY hi", "call_id": "c", "answer": "a"},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )
        assert answer.status_code == 404, action
    # A session of mine with no question waiting: nothing to answer.
    answer = http.post(
        f"/console/sessions/{mine}/answer",
        data={"csrf_token": csrf, "call_id": "call_x", "answer": "yes"},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert answer.status_code == 409
    assert "no longer waiting" in answer.text


# -- keys and usage -----------------------------------------------------------------------
NEW_KEY = re.compile(r'id="new-key" type="text" readonly value="([^"]+)"')


def test_a_key_is_created_shown_once_listed_and_revoked(http: TestClient) -> None:
    ctx = app_context(http)
    _, alice = ctx.db.run(keys.create_key, "alice")
    theirs_id, _ = ctx.db.run(keys.create_key, "mallory")
    csrf = sign_in(http, alice)
    made = http.post("/console/keys", data={"csrf_token": csrf}, headers={"Origin": ORIGIN})
    assert made.status_code == 200
    found = NEW_KEY.search(made.text)
    assert found and found.group(1).startswith("uhp_sk_")
    new_key = found.group(1)
    assert made.headers["cache-control"] == "no-store"
    # It works as a key of alice's, and the list never shows it again.
    principal = ctx.db.run(keys.principal_for_key, new_key)
    assert principal is not None and principal.name == "alice"
    listing = http.get("/console/keys").text
    assert new_key not in listing and theirs_id not in listing
    new_id = re.findall(r"<code>(key_[0-9a-f]+)</code>", listing)
    assert len(new_id) == 2  # the one signed in with, and the new one
    # Mallory's key is not alice's to revoke: 404, and it still works.
    refused = http.post(
        f"/console/keys/{theirs_id}/revoke",
        data={"csrf_token": csrf},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert refused.status_code == 404
    assert all(k.revoked_at is None for k, _ in ctx.db.run(keys.list_keys) if k.id == theirs_id)
    forged = http.post(
        f"/console/keys/{new_id[0]}/revoke", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert forged.status_code == 403  # no Origin
    new_row = next(k for k, _ in ctx.db.run(keys.list_keys) if k.key_hash == keys.hash_key(new_key))
    revoked = http.post(
        f"/console/keys/{new_row.id}/revoke",
        data={"csrf_token": csrf},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert revoked.status_code == 303
    assert ctx.db.run(keys.principal_for_key, new_key) is None
    assert "Revoked" in http.get("/console/keys").text
    assert signed_in(http)  # another key of alice's was revoked, not this sign-in's


def test_usage_counts_turns_and_tokens_per_harness_per_day(http: TestClient) -> None:
    add_session(http, 1, id="sess_usage_a", harness_id="hrn_a")
    add_session(http, 2, id="sess_usage_b", harness_id="hrn_b")
    add_session(http, 3, id="sess_usage_m", principal="mallory", harness_id="hrn_a")
    ctx = app_context(http)
    owner = ctx.db.run(keys.ensure_principal, "default")
    mallory = ctx.db.run(keys.ensure_principal, "mallory")
    now = int(time.time())
    turns = [
        ("sess_usage_a", owner.id, now, {"input_tokens": 100, "output_tokens": 7}),
        ("sess_usage_a", owner.id, now, {"input_tokens": 50, "output_tokens": 3}),
        ("sess_usage_b", owner.id, now, None),  # no usage recorded: a turn, no tokens
        ("sess_usage_a", owner.id, now - 40 * 86_400, {"input_tokens": 9, "output_tokens": 9}),
        ("sess_usage_m", mallory.id, now, {"input_tokens": 999, "output_tokens": 999}),
    ]

    def write(tx: Any) -> None:
        for n, (session_id, principal_id, created_at, usage) in enumerate(turns):
            tx.orm.add(
                ResponseRow(
                    id=f"resp_usage{n}",
                    principal_id=principal_id,
                    session_id=session_id,
                    status="completed",
                    created_at=created_at,
                    final=None if usage is None else {"usage": usage},
                )
            )

    ctx.db.run(write)
    sign_in(http)
    page = http.get("/console/usage").text
    assert "3 turns, 150 input and 10 output tokens in the last 30 days." in page
    rows = re.findall(
        r"<tr><td>([^<]+)</td><td>([^<]+)</td>((?:<td class=\"num\">\d+</td>){3})", page
    )
    cells = {(harness): re.findall(r"\d+", counts) for _, harness, counts in rows}
    assert cells == {"hrn_a": ["2", "150", "10"], "hrn_b": ["1", "0", "0"]}
    longer = http.get("/console/usage?days=90").text
    assert "4 turns, 159 input and 19 output tokens" in longer
    assert http.get("/console/usage?days=0").status_code == 400


def test_attaching_a_file_is_checked_and_keeps_it_for_this_principal_only(
    http: TestClient,
) -> None:
    csrf = sign_in(http)
    upload = {"file": ("notes.txt", b"hello", "text/plain")}

    def attach(data: dict[str, str], headers: dict[str, str]) -> Any:
        return http.post(
            "/console/run/attach",
            data=data,
            files=upload,
            headers=headers,
            follow_redirects=False,
        )

    assert attach({"csrf_token": csrf}, {}).status_code == 403  # no Origin
    assert attach({"csrf_token": "x" * 43}, {"Origin": ORIGIN}).status_code == 403
    kept = attach({"csrf_token": csrf}, {"Origin": ORIGIN})
    assert kept.status_code == 303
    location = kept.headers["location"]
    assert location.startswith("/console/run?files=file_")
    assert "notes.txt" in http.get(location).text
    # Only the refused uploads' bytes are gone: one file row, this principal's.
    ctx = app_context(http)
    with ctx.db.engine.connect() as connection:
        rows = list(connection.exec_driver_sql("SELECT id, principal_id FROM file"))
    assert len(rows) == 1
    file_id = rows[0][0]
    # Another principal's run form never lists it.
    _, other = ctx.db.run(keys.create_key, "mallory")
    with start(Path(ctx.settings.data_dir), replica_id="second-browser") as theirs:
        sign_in(theirs, other)
        assert "notes.txt" not in theirs.get(f"/console/run?files={file_id}").text


# -- harnesses ------------------------------------------------------------------------------
def test_another_principals_harness_gives_nothing_and_writes_are_checked(
    http: TestClient,
) -> None:
    ctx = app_context(http)
    mallory = ctx.db.run(keys.ensure_principal, "mallory")
    row = HarnessRow(
        id="harness_mallorys",
        principal_id=mallory.id,
        name="Mallory's",
        base="codex",
        config={},
        created_at_ms=int(time.time() * 1000),
    )
    ctx.db.run(harness_store.insert_harness, row)
    theirs = asyncio.run(ctx.engine.harnesses.all(mallory.id))
    assert [h.id for h in theirs] == ["harness_mallorys"]
    csrf = sign_in(http)
    assert "Mallory" not in http.get("/console/harnesses").text
    assert http.get("/console/harnesses").status_code == 200
    for harness in theirs:
        assert http.get(f"/console/harnesses/{harness.id}").status_code == 404
        for path in ("", "/delete"):
            answer = http.post(
                f"/console/harnesses/{harness.id}{path}",
                data={"csrf_token": csrf, "configuration": "{}"},
                headers={"Origin": ORIGIN},
                follow_redirects=False,
            )
            assert answer.status_code == 404, path
    missing = "harness_does_not_exist"
    for configuration, status in (("not json", 400), ("[1]", 400), ("{}", 404)):
        answer = http.post(
            f"/console/harnesses/{missing}",
            data={"csrf_token": csrf, "configuration": configuration},
            headers={"Origin": ORIGIN},
        )
        assert answer.status_code == status, configuration
    forged = http.post(
        "/console/harnesses", data={"csrf_token": csrf, "base": "codex"}, follow_redirects=False
    )
    assert forged.status_code == 403


def test_the_live_stream_needs_a_sign_in_and_ends_at_once_without_a_turn(
    http: TestClient,
) -> None:
    mine = add_session(http, 1)
    answer = http.get(f"/console/sessions/{mine}/live", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in"
    sign_in(http)
    answer = http.get(f"/console/sessions/{mine}/live", follow_redirects=False)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert answer.text.split() == ["event:", "end", "data:", "{}"]  # no turn to follow


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, -1),
        ("resp_abc.41", 41),
        (" resp_abc.7 ", 7),
        ("resp_other.41", -1),  # an earlier turn's: the new one from its start
        ("resp_abc.x", -1),
        ("resp_abc.1234567890123456", -1),
        ("<script>.1", -1),
    ],
)
def test_a_reconnecting_page_resumes_after_its_last_event(
    header: str | None, expected: int
) -> None:
    assert resume_after(header, "resp_abc") == expected


def add_turns(http: TestClient, session_id: str, count: int, principal: str = "default") -> None:
    """Finished turns of the session, each answering `answer <n>`, written straight in."""
    db = app_context(http).db
    owner = db.run(keys.ensure_principal, principal)

    def write(tx: Any) -> None:
        for n in range(1, count + 1):
            final = {
                "id": f"resp_t{n:04d}",
                "object": "response",
                "created_at": 1_786_400_000 + n,
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": f"answer {n}"}],
                    }
                ],
                "metadata": {"session_id": session_id},
            }
            tx.orm.add(
                ResponseRow(
                    id=f"resp_t{n:04d}",
                    principal_id=owner.id,
                    session_id=session_id,
                    status="completed",
                    created_at=1_786_400_000 + n,
                    finished_at=1_786_400_000 + n + 0.5,
                    input_items=[
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": f"ask {n}"}],
                        }
                    ],
                    final=final,
                )
            )

    db.run(write)


TURN_NUMBERS = re.compile(r'class="turn-slot" id="turn-(\d+)"')
EARLIER = re.compile(r'href="([^"]+)" rel="prev">Earlier turns')


def test_a_long_session_shows_its_latest_turns_and_pages_back(http: TestClient) -> None:
    session_id = add_session(http, 1)
    add_turns(http, session_id, 65)
    sign_in(http)
    page = http.get(f"/console/sessions/{session_id}").text
    assert [int(n) for n in TURN_NUMBERS.findall(page)] == list(range(36, 66))
    assert "Turns 36 to 65 of 65" in page and "answer 65" in page and "answer 35<" not in page
    assert "Later turns" not in page and 'data-live-url="' in page
    earlier = EARLIER.search(page)
    assert earlier is not None
    older = http.get(f"/console/sessions/{earlier.group(1)}").text
    assert [int(n) for n in TURN_NUMBERS.findall(older)] == list(range(6, 36))
    assert "Later turns" in older and "data-live-url" not in older  # only the latest follows
    first = http.get(f"/console/sessions/{EARLIER.search(older).group(1)}").text  # type: ignore[union-attr]
    assert [int(n) for n in TURN_NUMBERS.findall(first)] == list(range(1, 6))
    assert "Earlier turns" not in first and "answer 1<" in first
    state = http.get(f"/console/sessions/{session_id}/state").json()
    assert [t["number"] for t in state["turns"]] == list(range(36, 66))
    for bad in ("0", "-1", "x", "99999999999"):
        assert http.get(f"/console/sessions/{session_id}?before={bad}").status_code == 400


async def _console_sign_in(server: InProcess, key: str) -> tuple[httpx.AsyncClient, str]:
    """A browser of its own (a cookie jar, no bearer header) signed in with `key`; its
    sign-in's CSRF token."""
    browser = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.app), base_url=IN_PROCESS_ORIGIN, timeout=30
    )
    token = form_token((await browser.get("/console/sign-in")).text)
    answer = await browser.post(
        "/console/sign-in",
        data={"key": key, "csrf_token": token},
        headers={"Origin": IN_PROCESS_ORIGIN},
    )
    assert answer.status_code == 303, answer.text
    return browser, form_token((await browser.get("/console")).text)


async def test_an_open_live_stream_ends_at_once_on_sign_out_and_on_revoking_its_key(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Sign-out and revocation take effect at once (docs/console.md), for the live stream
    a page holds open too: it says `end` within about a second, the turn running on."""
    base = FakeBase()
    base.script("long", [TextDelta("m", "partial answer"), Hang()])
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY, base=base) as server:
        principals = server.app.state.engine.principals
        alice = await principals.named("alice")
        _, first_key = await principals.create_key(alice)
        second_id, second_key = await principals.create_key(alice)
        started = await server.client.post(
            "/v1/responses",
            json={"input": "long", "background": True},
            headers={"Authorization": f"Bearer {first_key}"},
        )
        assert started.status_code == 200, started.text
        response_id = started.json()["id"]
        session_id = started.json()["metadata"]["session_id"]
        await wait_for(lambda: base.turns)

        async def ended_by(
            key: str, act: Callable[[httpx.AsyncClient, str], Awaitable[Any]]
        ) -> str:
            browser, csrf = await _console_sign_in(server, key)
            try:
                live = asyncio.create_task(browser.get(f"/console/sessions/{session_id}/live"))
                await asyncio.sleep(1.5)
                assert not live.done(), "the stream ended before the sign-in did"
                acted = await act(browser, csrf)
                assert acted.status_code == 303, acted.text
                answer = await asyncio.wait_for(live, timeout=8)
            finally:
                await browser.aclose()
            assert answer.status_code == 200
            return answer.text

        def sign_out(browser: httpx.AsyncClient, csrf: str) -> Awaitable[httpx.Response]:
            return browser.post(
                "/console/sign-out", data={"csrf_token": csrf}, headers=IN_PROCESS_WRITE
            )

        def revoke(browser: httpx.AsyncClient, csrf: str) -> Awaitable[httpx.Response]:
            return browser.post(
                f"/console/keys/{second_id}/revoke",
                data={"csrf_token": csrf},
                headers=IN_PROCESS_WRITE,
            )

        for act in (sign_out, revoke):
            text = await ended_by(first_key if act is sign_out else second_key, act)
            assert "partial answer" in text  # it was following the turn
            assert text.rstrip().endswith("event: end\ndata: {}"), text[-200:]
        still = await server.client.get(
            f"/v1/responses/{response_id}", headers={"Authorization": f"Bearer {first_key}"}
        )
        assert still.json()["status"] == "in_progress"  # only the streams ended
        await server.client.post(
            f"/v1/responses/{response_id}/cancel",
            headers={"Authorization": f"Bearer {first_key}"},
        )


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"maxStep": "\u00b2"}, "maxStep", "whole number"),
        ({"timeoutSeconds": "\u2460"}, "timeoutSeconds", "whole number"),
        ({"environment": "env_nope"}, "environment", "environment"),  # the engine's 404
        ({"plugins": '[{"name": "p", "files": []}]'}, "plugins", "plugin"),  # its 422
    ],
)
def test_a_refused_setting_is_shown_by_its_field_with_what_was_typed_kept(
    tmp_path: Path, fields: dict[str, str], field: str, said: str
) -> None:
    """Whatever the engine's status (400, an unknown environment's 404, a plugin's 422), a
    refusal that names a field comes back as the form: that field's error, what was typed
    still in it, nothing changed."""
    app = create_app(Settings(data_dir=tmp_path, api_key=KEY), bases={"codex": CodexBase()})
    api = {"Authorization": f"Bearer {KEY}"}
    with TestClient(app, base_url=ORIGIN, raise_server_exceptions=False) as http:
        csrf = sign_in(http)
        harness = http.post("/v1/harnesses", json={"name": "H", "base": "codex"}, headers=api)
        harness_id = harness.json()["id"]
        answer = http.post(
            f"/console/harnesses/{harness_id}/settings",
            data={"csrf_token": csrf, "name": "Renamed", "systemPrompt": "typed", **fields},
            headers={"Origin": ORIGIN},
            follow_redirects=False,
        )
        assert answer.status_code == 400, answer.text[:300]
        page = answer.text
        assert f'name="{field}" aria-invalid="true"' in page
        error = re.search(r'<p class="field-error" id="[^"]+-error">([^<]*)</p>', page)
        assert error and said in error.group(1).lower(), page
        assert 'value="Renamed"' in page and ">typed</textarea>" in page
        stored = http.get(f"/v1/harnesses/{harness_id}", headers=api).json()
        assert stored["name"] == "H" and stored["systemPrompt"] == ""

"""The console's Environments and Memories pages in process: each route, what it shows and
what it writes through the engine; another principal's ids answered as missing ones; every
write refused without the console's Origin and token; hostile names and content shown as
text. The browser walk is tests/test_console_browser.py."""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from storage import keys
from tests.support.app_context import app_context
from tests.test_console_fast import KEY, ORIGIN, form_token, sign_in, start

# (the console package's `memories` is the module's router)
console_memories = importlib.import_module("uhp_server.doors.console.memories")
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with start(tmp_path) as client:
        yield client


@pytest.fixture
def mallory(http: TestClient) -> Iterator[TestClient]:
    """A second browser, signed in as another principal on the same server."""
    ctx = app_context(http)
    _, key = ctx.db.run(keys.create_key, "mallory")
    with start(Path(ctx.settings.data_dir), replica_id="second-browser") as theirs:
        sign_in(theirs, key)
        yield theirs


def post(http: TestClient, url: str, csrf: str, **fields: Any) -> Any:
    return http.post(
        url,
        data={"csrf_token": csrf, **fields},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )


def upload(
    http: TestClient, environment: str, csrf: str, name: str, data: bytes, path: str = ""
) -> Any:
    return http.post(
        f"/console/environments/{environment}/files",
        data={"csrf_token": csrf, "path": path},
        files={"file": (name, data, "text/plain")},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )


def created(answer: Any, prefix: str) -> str:
    assert answer.status_code == 303, answer.text
    location = answer.headers["location"]
    assert location.startswith(prefix), location
    return str(location.removeprefix(prefix).split("/")[0])


def csrf_of(http: TestClient) -> str:
    return form_token(http.get("/console").text)


# -- environments ---------------------------------------------------------------------------
def make_environment(http: TestClient, csrf: str, name: str = "Reports") -> str:
    answer = post(http, "/console/environments", csrf, name=name, description="For reports.")
    return created(answer, "/console/environments/")


def test_an_environment_is_made_its_files_uploaded_viewed_replaced_and_deleted(
    http: TestClient,
) -> None:
    csrf = sign_in(http)
    env = make_environment(http, csrf)
    listing = http.get("/console/environments")
    assert listing.status_code == 200 and "Reports" in listing.text
    answer = upload(http, env, csrf, "requirements.txt", b"teaser-lib==1.0\n")
    assert answer.headers["location"] == f"/console/environments/{env}/files/requirements.txt"
    upload(http, env, csrf, "cut.py", b"print('cut')\n", path="scripts/")
    page = http.get(f"/console/environments/{env}").text
    assert "requirements.txt" in page and "scripts/cut.py" in page
    viewed = http.get(f"/console/environments/{env}/files/scripts/cut.py")
    assert viewed.status_code == 200 and "print(&#39;cut&#39;)" in viewed.text
    raw = http.get(f"/console/environments/{env}/raw/scripts/cut.py")
    assert raw.content == b"print('cut')\n"
    assert raw.headers["content-disposition"].startswith("attachment")
    assert raw.headers["content-security-policy"].startswith("sandbox")
    # Replacing is an upload at the same path; the API reads what the console wrote.
    upload(http, env, csrf, "anything.txt", b"teaser-lib==2.0\n", path="requirements.txt")
    assert "teaser-lib==2.0" in http.get(f"/console/environments/{env}/files/requirements.txt").text
    entries, _ = _tree(http, env)
    assert sorted(entries) == ["requirements.txt", "scripts/cut.py"]
    answer = post(http, f"/console/environments/{env}/files-delete", csrf, path="scripts/cut.py")
    assert answer.status_code == 303
    assert sorted(_tree(http, env)[0]) == ["requirements.txt"]
    missing = http.get(f"/console/environments/{env}/files/scripts/cut.py")
    assert missing.status_code == 404
    # A binary file is offered as a download, never shown.
    upload(http, env, csrf, "blob.bin", b"\x00\x01\x02" * 10)
    assert "not text" in http.get(f"/console/environments/{env}/files/blob.bin").text
    answer = post(http, f"/console/environments/{env}/delete", csrf)
    assert answer.headers["location"] == "/console/environments"
    assert http.get(f"/console/environments/{env}").status_code == 404


def _tree(http: TestClient, env: str) -> tuple[list[str], int]:
    """The source's files as the API lists them."""
    answer = http.get(f"/v1/environments/{env}/files", headers={"Authorization": f"Bearer {KEY}"})
    assert answer.status_code == 200, answer.text
    listed = answer.json()
    return [e["path"] for e in listed["entries"] if not e["dir"]], listed["count"]


def test_a_build_is_started_followed_and_its_versions_activated_and_rolled_back(
    http: TestClient,
) -> None:
    csrf = sign_in(http)
    env = make_environment(http, csrf)
    upload(http, env, csrf, "setup.sh", b"echo building the reports\n")
    versions = []
    for _ in range(2):
        answer = post(http, f"/console/environments/{env}/build", csrf)
        assert answer.status_code == 303
        version = int(answer.headers["location"].rsplit("/", 1)[1])
        assert answer.headers["location"] == f"/console/environments/{env}/builds/{version}"
        build_page = http.get(answer.headers["location"])
        assert build_page.status_code == 200 and f"Build {version}" in build_page.text
        assert 'src="/console/_assets/build.js"' in build_page.text
        state = _finished(http, f"/console/environments/{env}/builds/{version}/state")
        assert state["status"] == "ready", state
        assert "building the reports" in state["log"]
        versions.append(version)
    assert versions == [1, 2]
    page = http.get(f"/console/environments/{env}").text
    assert "version 2 active" in page
    assert "Roll back to 1" in page
    answer = post(http, f"/console/environments/{env}/versions/1/activate", csrf)
    assert answer.status_code == 303
    page = http.get(f"/console/environments/{env}").text
    assert "version 1 active" in page and "Activate 2" in page
    # A version never built is the engine's 404, said on a page.
    assert post(http, f"/console/environments/{env}/versions/9/activate", csrf).status_code == 404
    assert http.get(f"/console/environments/{env}/builds/9").status_code == 404


def _finished(http: TestClient, url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state: dict[str, Any] = http.get(url).json()
        if not state["running"]:
            return state
        assert state["stages"], state  # a running build names its stages
        time.sleep(0.2)
    raise AssertionError(f"the build did not finish: {state}")


def test_another_principals_environment_is_not_there(http: TestClient, mallory: TestClient) -> None:
    theirs_csrf = csrf_of(mallory)
    theirs = make_environment(mallory, theirs_csrf, "Mallory's secret project")
    upload(mallory, theirs, theirs_csrf, "plan.txt", b"the secret plan")
    csrf = sign_in(http)
    assert "secret" not in http.get("/console/environments").text
    missing = "environment_does_not_exist"
    for env in (theirs, missing):
        for path in ("", "/files/plan.txt", "/raw/plan.txt", "/builds/1", "/builds/1/state"):
            answer = http.get(f"/console/environments/{env}{path}")
            assert answer.status_code == 404, path
            assert "secret" not in answer.text
        for path in ("/delete", "/build", "/files-delete", "/versions/1/activate"):
            answer = post(http, f"/console/environments/{env}{path}", csrf, path="plan.txt")
            assert answer.status_code == 404, path
        assert upload(http, env, csrf, "plan.txt", b"overwritten").status_code == 404
    assert mallory.get(f"/console/environments/{theirs}/raw/plan.txt").content == b"the secret plan"


def test_environment_writes_need_the_consoles_origin_and_token(http: TestClient) -> None:
    csrf = sign_in(http)
    env = make_environment(http, csrf)
    upload(http, env, csrf, "keep.txt", b"kept")
    writes = [
        ("/console/environments", {"name": "Forged"}),
        (f"/console/environments/{env}/build", {}),
        (f"/console/environments/{env}/files-delete", {"path": "keep.txt"}),
        (f"/console/environments/{env}/delete", {}),
    ]
    for path, fields in writes:
        no_origin = http.post(path, data={"csrf_token": csrf, **fields}, follow_redirects=False)
        assert no_origin.status_code == 403, path
        elsewhere = http.post(
            path,
            data={"csrf_token": csrf, **fields},
            headers={"Origin": "https://evil.example"},
            follow_redirects=False,
        )
        assert elsewhere.status_code == 403, path
        no_token = post(http, path, "not-the-token", **fields)
        assert no_token.status_code == 403, path
    forged_upload = http.post(
        f"/console/environments/{env}/files",
        data={"csrf_token": "wrong"},
        files={"file": ("keep.txt", b"forged", "text/plain")},
        headers={"Origin": ORIGIN},
    )
    assert forged_upload.status_code == 403
    assert http.get(f"/console/environments/{env}/raw/keep.txt").content == b"kept"
    assert "Forged" not in http.get("/console/environments").text
    assert http.get(f"/console/environments/{env}").status_code == 200


def test_hostile_environment_names_and_files_render_inert(http: TestClient) -> None:
    csrf = sign_in(http)
    env = make_environment(http, csrf, name="Env " + HOSTILE)
    upload(http, env, csrf, "x.html", HOSTILE.encode(), path="<b>bold</b>.html")
    for url in (
        "/console/environments",
        f"/console/environments/{env}",
        f"/console/environments/{env}/files/%3Cb%3Ebold%3C/b%3E.html",
    ):
        answer = http.get(url)
        assert answer.status_code == 200, url
        assert "<script>alert" not in answer.text and "<img src=x" not in answer.text
        assert "<b>bold" not in answer.text
    assert ESCAPED in http.get(f"/console/environments/{env}").text
    raw = http.get(f"/console/environments/{env}/raw/%3Cb%3Ebold%3C/b%3E.html")
    assert raw.headers["content-security-policy"].startswith("sandbox")
    assert raw.headers["x-content-type-options"] == "nosniff"
    assert raw.headers["content-disposition"].startswith("attachment")
    assert "<" not in raw.headers["content-disposition"].split("filename*")[0]


# -- memories -------------------------------------------------------------------------------
def make_memory(http: TestClient, csrf: str, name: str, **fields: str) -> str:
    return created(post(http, "/console/memories", csrf, name=name, **fields), "/console/memories/")


def record_of(answer: Any, memory: str) -> str:
    return created(answer, f"/console/memories/{memory}/records/")


def test_a_memory_tree_grants_and_records_with_their_history(http: TestClient) -> None:
    csrf = sign_in(http)
    acme = make_memory(http, csrf, "Acme", description="The Acme account.")
    deals = make_memory(http, csrf, "Deals", parent_id=acme)
    tree = http.get("/console/memories").text
    # Deals is drawn inside Acme's branch.
    assert re.search(r"Acme</a>.*?<ul class=\"tree\">.*?Deals</a>", tree, re.S), tree
    page = http.get(f"/console/memories/{deals}").text
    assert f'href="/console/memories/{acme}">Acme</a>' in page  # its parent
    assert "Deals" in http.get(f"/console/memories/{acme}").text  # a child of Acme
    # Grants: the creator's own, one given and revoked.
    answer = post(
        http,
        f"/console/memories/{acme}/grants",
        csrf,
        principal="member:ana",
        privilege_read="on",
        privilege_write="on",
    )
    assert answer.status_code == 303
    page = http.get(f"/console/memories/{acme}").text
    assert "member:ana" in page and "read, write" in page
    grant_id = re.search(r"/grants/([^/]+)/revoke", page.split("member:ana")[1])
    assert grant_id is not None
    inherited = http.get(f"/console/memories/{deals}").text
    assert "member:ana" in inherited and "inherited" in inherited
    answer = post(http, f"/console/memories/{acme}/grants/{grant_id.group(1)}/revoke", csrf)
    assert answer.status_code == 303
    assert "member:ana" not in http.get(f"/console/memories/{acme}").text
    bad = post(http, f"/console/memories/{acme}/grants", csrf, principal="nobody")
    assert bad.status_code == 422
    # A record written, revised, and its history holding both versions.
    answer = post(
        http,
        f"/console/memories/{deals}/records",
        csrf,
        title="Renewal",
        type="fact",
        content="Acme renews its contract in March.",
        attributes='{"seats": 40}',
    )
    record = record_of(answer, deals)
    page = http.get(f"/console/memories/{deals}/records/{record}").text
    assert "Acme renews its contract in March." in page and "version 1" in page
    answer = post(
        http,
        f"/console/memories/{deals}/records/{record}",
        csrf,
        content="Acme renews its contract in April.",
    )
    assert answer.status_code == 303
    page = http.get(f"/console/memories/{deals}/records/{record}").text
    assert "version 2" in page
    history = page.split('id="history-heading"')[1]
    assert history.index("in April") < history.index("in March")  # newest first
    assert "&#34;seats&#34;: 40" in page  # kept: the revision did not state them
    # Forgotten: still in its history, gone from the active list.
    assert post(http, f"/console/memories/{deals}/records/{record}/forget", csrf).status_code == 303
    page = http.get(f"/console/memories/{deals}/records/{record}").text
    assert "forgotten" in page and "Save a new version" not in page
    assert "Renewal" not in http.get(f"/console/memories/{deals}").text
    assert "Renewal" in http.get(f"/console/memories/{deals}?include=all").text
    # Bad attributes are a 400 page, nothing written.
    bad = post(http, f"/console/memories/{deals}/records", csrf, content="x", attributes="[1]")
    assert bad.status_code == 400
    # NaN and Infinity are not JSON (the parser refuses them); 1e999 is, and overflows to an
    # infinity, which the engine refuses: kept, either would break recall's filters.
    for said, status, why in (
        ('{"seats": NaN}', 400, "not valid JSON"),
        ('{"a": {"b": [-Infinity]}}', 400, "not valid JSON"),
        ('{"seats": 1e999}', 422, "not a finite number"),
    ):
        bad = post(
            http, f"/console/memories/{deals}/records", csrf, content="Spoilt", attributes=said
        )
        assert bad.status_code == status and why in bad.text, said
    assert "Spoilt" not in http.get(f"/console/memories/{deals}?include=all").text


def test_the_recall_box_shows_hits_where_they_are_and_what_the_answer_says(
    http: TestClient,
) -> None:
    csrf = sign_in(http)
    acme = make_memory(http, csrf, "Acme")
    deals = make_memory(http, csrf, "Deals", parent_id=acme)
    post(http, f"/console/memories/{deals}/records", csrf, content="Acme renews in March.")
    post(http, f"/console/memories/{acme}/records", csrf, content="Acme has forty seats.")
    page = http.get(f"/console/memories/{acme}", params={"q": "when does acme renew"}).text
    hits = page.split('class="hits"')[1].split("</ol>")[0]
    assert "Acme renews in March." in hits
    assert f'href="/console/memories/{deals}">Deals</a>' in hits  # where the answer is
    assert "found by text" in hits
    assert 'id="recall-abstain"' not in page
    nothing = http.get(f"/console/memories/{acme}", params={"q": "zebra"}).text
    assert 'id="recall-abstain"' in nothing
    # By meaning, without an embedding model here: the answer says it is degraded.
    meaning = http.get(f"/console/memories/{acme}", params={"q": "renewal", "by": "query"}).text
    assert 'id="recall-degraded"' in meaning and "query:not_supported" in meaning


def test_the_memory_tree_shows_entries_and_their_children_within_a_cap(
    http: TestClient, mallory: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page is built from where the visitor enters and each entry's children, never a
    subtree per entry: what lies deeper is a count that leads to the memory's own page, and
    past TREE_SHOWN memories the page says the rest are through the API."""
    api = {"Authorization": f"Bearer {KEY}"}
    theirs = app_context(http).db.run(keys.ensure_principal, "mallory").id

    def made(name: str, parent: str | None = None) -> str:
        answer = http.post("/v1/memories", json={"name": name, "parent_id": parent}, headers=api)
        assert answer.status_code == 200, answer.text
        ids[name] = str(answer.json()["id"])
        return ids[name]

    ids: dict[str, str] = {}
    for i in range(4):
        root = made(f"Root {i}")
        made(f"Leaf {i}", made(f"Branch {i}", root))
        given = {"principal": f"member:{theirs}", "privileges": ["read"]}
        granted = http.post(f"/v1/memories/{root}/grants", json=given, headers=api)
        assert granted.status_code == 200, granted.text
    page = mallory.get("/console/memories").text
    shown = set(re.findall(r">((?:Root|Branch|Leaf) \d)</a>", page))
    assert shown == {f"{kind} {i}" for kind in ("Root", "Branch") for i in range(4)}
    assert page.count("1 child (open it to see them)") == 4 and "Only " not in page
    monkeypatch.setattr(console_memories, "TREE_SHOWN", 6)
    page = mallory.get("/console/memories").text
    shown = set(re.findall(r">((?:Root|Branch|Leaf) \d)</a>", page))
    assert shown == {"Root 0", "Root 1", "Root 2", "Root 3", "Branch 0", "Branch 1"}
    assert "Only 6 of the memories you can see are shown" in page
    assert "GET /v1/memories" in page
    # what is not drawn is a count on its parent, and there on its parent's own page
    assert page.count("1 child (open it to see them)") == 4
    # a memory not drawn is still offered to make a memory in, from its page's link
    leaf = ids["Leaf 3"]
    page = mallory.get(f"/console/memories?parent={leaf}").text
    assert f'<option value="{leaf}" selected>Leaf 3</option>' not in page  # it may only read
    mine = http.post(
        f"/v1/memories/{leaf}/grants",
        json={"principal": f"member:{theirs}", "privileges": ["read", "create"]},
        headers=api,
    )
    assert mine.status_code == 200, mine.text
    page = mallory.get(f"/console/memories?parent={leaf}").text
    assert f'<option value="{leaf}" selected>Leaf 3</option>' in page
    assert mallory.get("/console/memories?parent=" + "x" * 300).status_code == 200


def test_another_principals_memory_is_not_there(http: TestClient, mallory: TestClient) -> None:
    theirs_csrf = csrf_of(mallory)
    theirs = make_memory(mallory, theirs_csrf, "Mallory's secret memory")
    answer = post(mallory, f"/console/memories/{theirs}/records", theirs_csrf, content="secret")
    record = record_of(answer, theirs)
    csrf = sign_in(http)
    assert "secret" not in http.get("/console/memories").text
    for memory in (theirs, "memory_does_not_exist"):
        for path in ("", f"/records/{record}", "?q=secret"):
            answer = http.get(f"/console/memories/{memory}{path}")
            assert answer.status_code == 404, path
            assert "secret" not in answer.text
        for path in (
            "/records",
            f"/records/{record}",
            f"/records/{record}/forget",
            "/grants",
            "/grants/memory_grant_x/revoke",
            "/delete",
        ):
            answer = post(
                http,
                f"/console/memories/{memory}{path}",
                csrf,
                content="overwritten",
                principal="member:default",
                privilege_read="on",
            )
            assert answer.status_code == 404, path
    # A child under another's memory is refused as under a missing one.
    assert post(http, "/console/memories", csrf, name="x", parent_id=theirs).status_code == 404
    page = mallory.get(f"/console/memories/{theirs}/records/{record}").text
    assert "secret" in page and "overwritten" not in page and "version 1" in page


def test_memory_writes_need_the_consoles_origin_and_token(http: TestClient) -> None:
    csrf = sign_in(http)
    memory = make_memory(http, csrf, "Kept")
    record = record_of(post(http, f"/console/memories/{memory}/records", csrf, content="k"), memory)
    for path in (
        "/console/memories",
        f"/console/memories/{memory}/records",
        f"/console/memories/{memory}/records/{record}",
        f"/console/memories/{memory}/records/{record}/forget",
        f"/console/memories/{memory}/grants",
        f"/console/memories/{memory}/delete",
    ):
        fields = {"name": "Forged", "content": "forged", "principal": "member:x"}
        no_origin = http.post(path, data={"csrf_token": csrf, **fields}, follow_redirects=False)
        assert no_origin.status_code == 403, path
        assert post(http, path, "wrong", **fields).status_code == 403, path
    page = http.get(f"/console/memories/{memory}/records/{record}").text
    assert "forged" not in page and "version 1" in page and "active" in page
    assert "Forged" not in http.get("/console/memories").text


def test_hostile_memory_names_and_records_render_inert(http: TestClient) -> None:
    csrf = sign_in(http)
    memory = make_memory(http, csrf, "M " + HOSTILE, description=HOSTILE)
    answer = post(
        http,
        f"/console/memories/{memory}/records",
        csrf,
        title=HOSTILE,
        content=HOSTILE,
        attributes='{"x": "' + HOSTILE.replace('"', '\\"') + '"}',
    )
    record = record_of(answer, memory)
    for url in (
        "/console/memories",
        f"/console/memories/{memory}",
        f"/console/memories/{memory}?q=alert",
        f"/console/memories/{memory}/records/{record}",
    ):
        page = http.get(url)
        assert page.status_code == 200, url
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, url
        assert ESCAPED in page.text, url


def test_without_the_memories_chapter_there_are_no_memory_pages(tmp_path: Path) -> None:
    with start(tmp_path, memories="off") as http:
        sign_in(http)
        assert http.get("/console/memories").status_code == 404
        page = http.get("/console/environments")
        assert page.status_code == 200
        assert 'href="/console/environments"' in page.text
        assert 'href="/console/memories"' not in page.text  # not offered in the navigation
    with start(tmp_path / "on") as http:
        sign_in(http)
        assert 'href="/console/memories"' in http.get("/console/environments").text


def test_a_file_past_the_environments_limit_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    with start(tmp_path, environment_max_file_bytes=64) as http:
        csrf = sign_in(http)
        env = make_environment(http, csrf)
        answer = upload(http, env, csrf, "big.txt", b"x" * 65)
        assert answer.status_code == 413
        assert upload(http, env, csrf, "fits.txt", b"x" * 64).status_code == 303
        assert _tree(http, env) == (["fits.txt"], 1)
        bad_path = upload(http, env, csrf, "a.txt", b"x", path="../outside.txt")
        assert bad_path.status_code in (400, 422)
        assert _tree(http, env) == (["fits.txt"], 1)


def test_every_new_page_carries_the_strict_csp_and_no_inline_script_or_style(
    http: TestClient,
) -> None:
    csrf = sign_in(http)
    env = make_environment(http, csrf)
    upload(http, env, csrf, "setup.sh", b"echo hi\n")
    post(http, f"/console/environments/{env}/build", csrf)
    memory = make_memory(http, csrf, "Pages")
    record = record_of(
        post(http, f"/console/memories/{memory}/records", csrf, content="hi"), memory
    )
    for path in (
        "/console/environments",
        f"/console/environments/{env}",
        f"/console/environments/{env}/files/setup.sh",
        f"/console/environments/{env}/builds/1",
        "/console/memories",
        f"/console/memories/{memory}?q=hi",
        f"/console/memories/{memory}/records/{record}",
    ):
        answer = http.get(path)
        assert answer.status_code == 200, path
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp, path
        assert "frame-ancestors 'none'" in csp and answer.headers["cache-control"] == "no-store"
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text), path
        assert " style=" not in answer.text and "<style" not in answer.text, path
        assert not re.search(r"\son[a-z]+=", answer.text), path
    state = http.get(f"/console/environments/{env}/builds/1/state")
    assert state.headers["content-type"] == "application/json"
    assert state.headers["cache-control"] == "no-store"
    script = http.get("/console/_assets/build.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )

"""The console's Environments and Memories pages in a real browser (Debian's Chromium through
Playwright, as tests/test_console_browser.py): an environment made, its files uploaded,
viewed, replaced and deleted, a build watched as its log grows stage by stage, versions
activated and rolled back; a memory tree made, a grant given and revoked, a record written,
revised and read in its history, a question recalled; another principal's ids, a cross-site
form, hostile names and content; phone width and axe-core in light and dark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.axe import serious_violations
from tests.support.server import ServerProcess
from tests.test_console_browser import PHONE, browser, context, page, sign_in

pytestmark = pytest.mark.slow

__all__ = ["browser", "context", "page"]  # the fixtures, shared with the console's tests

HOSTILE = "<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script>"


def make_environment(page: Any, server: ServerProcess, name: str) -> str:
    """As a person: the navigation's link, the form's labelled fields, Create."""
    page.get_by_role("link", name="Environments").click()
    page.wait_for_url(f"{server.url}/console/environments")
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create").click()
    page.wait_for_url(f"{server.url}/console/environments/*")
    return str(page.url.rsplit("/", 1)[1])


def upload(page: Any, tmp_path: Path, name: str, data: str, path: str = "") -> None:
    file = tmp_path / name
    file.write_text(data)
    page.get_by_label("Upload a file").set_input_files(str(file))
    page.get_by_role("textbox", name="Path").fill(path)
    with page.expect_navigation():
        page.get_by_role("button", name="Upload", exact=True).click()


@pytest.fixture
def axe_schemes(browser: Any) -> Iterator[list[Any]]:
    """A page in each colour scheme, for axe-core."""
    contexts = [
        browser.new_context(color_scheme=scheme, viewport={"width": 1100, "height": 850})
        for scheme in ("light", "dark")
    ]
    yield [c.new_page() for c in contexts]
    for opened in contexts:
        opened.close()


def no_violations(pages: list[Any], server: ServerProcess, urls: list[str]) -> None:
    for checking in pages:
        sign_in(checking, server)
        for url in urls:
            checking.goto(f"{server.url}{url}")
            assert serious_violations(checking) == [], url


def test_an_environment_is_made_built_watched_and_rolled_back(
    server: ServerProcess,
    client: httpx.Client,
    page: Any,
    tmp_path: Path,
    axe_schemes: list[Any],
) -> None:
    sign_in(page, server)
    env = make_environment(page, server, "Reports env")
    # Files: uploaded, one into a folder, viewed, replaced, deleted.
    upload(page, tmp_path, "notes.txt", "first notes\n")
    assert page.url == f"{server.url}/console/environments/{env}/files/notes.txt"
    assert "first notes" in page.locator("pre.file-text").inner_text()
    page.get_by_label("A new file for").set_input_files(str(_file(tmp_path, "n2", "new notes\n")))
    page.get_by_role("button", name="Replace", exact=True).click()
    page.wait_for_url(f"{server.url}/console/environments/{env}/files/notes.txt")
    assert "new notes" in page.locator("pre.file-text").inner_text()
    assert client.get(f"/v1/environments/{env}/files/notes.txt").text == "new notes\n"
    page.get_by_role("link", name="Reports env").click()
    upload(page, tmp_path, "old.txt", "to delete\n", path="scratch/")
    page.get_by_role("link", name="Reports env").click()
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete scratch/old.txt").click()
    page.wait_for_url(f"{server.url}/console/environments/{env}")
    assert page.get_by_role("link", name="scratch/old.txt").count() == 0
    # A build whose setup takes a while: its page shows the stage and the log as they come.
    setup = "echo preparing the reports\nsleep 3\necho reports ready\n"
    upload(page, tmp_path, "setup.sh", setup)
    page.get_by_role("link", name="Reports env").click()
    page.get_by_role("button", name="Build a new version").click()
    page.wait_for_url(f"{server.url}/console/environments/{env}/builds/1")
    page.locator("#build-stages [aria-current='step']", has_text="setup.sh").wait_for(
        timeout=60_000
    )
    page.locator("#build-status", has_text="ready").wait_for(timeout=60_000)
    log = page.locator("#build-log").inner_text()
    assert "reports ready" in log
    assert "── setup.sh ──" in log  # the page followed the build into its stage
    assert "preparing the reports" in log.split("── setup.sh ──")[1]  # under the stage it ran in
    assert page.locator("#build-stages").is_hidden()
    # A second version, then a rollback to the first: a pointer, nothing rebuilt.
    page.get_by_role("link", name="Back to Reports env").click()
    assert "version 1 active" in page.locator(".meta").inner_text()
    page.get_by_role("button", name="Build a new version").click()
    page.wait_for_url(f"{server.url}/console/environments/{env}/builds/2")
    page.locator("#build-status", has_text="ready").wait_for(timeout=60_000)
    page.get_by_role("link", name="Back to Reports env").click()
    assert "version 2 active" in page.locator(".meta").inner_text()
    page.get_by_role("button", name="Roll back to 1").click()
    page.wait_for_url(f"{server.url}/console/environments/{env}")
    assert "version 1 active" in page.locator(".meta").inner_text()
    assert client.get(f"/v1/environments/{env}").json()["version"] == 1
    page.get_by_role("button", name="Activate 2").wait_for()
    no_violations(
        axe_schemes,
        server,
        [
            "/console/environments",
            f"/console/environments/{env}",
            f"/console/environments/{env}/files/notes.txt",
            f"/console/environments/{env}/builds/1",
        ],
    )


def _file(folder: Path, name: str, data: str) -> Path:
    path = folder / name
    path.write_text(data)
    return path


def test_a_memory_is_made_granted_written_revised_and_recalled(
    server: ServerProcess, client: httpx.Client, page: Any, axe_schemes: list[Any]
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Memories").click()
    page.wait_for_url(f"{server.url}/console/memories")
    page.get_by_label("Name").fill("Acme account")
    page.get_by_role("button", name="Make it").click()
    page.wait_for_url(f"{server.url}/console/memories/*")
    acme = page.url.rsplit("/", 1)[1]
    page.get_by_role("link", name="Make a memory inside it").click()
    page.get_by_label("Name").fill("Deals")
    assert page.get_by_label("Inside").input_value() == acme
    page.get_by_role("button", name="Make it").click()
    page.wait_for_url(f"{server.url}/console/memories/*")
    deals = page.url.rsplit("/", 1)[1]
    assert page.locator(".crumbs").inner_text().endswith("Acme account")
    # A grant given at Acme reaches Deals, and is revoked.
    page.get_by_role("link", name="Acme account").click()
    page.get_by_label("Grant to").fill("member:ana")
    page.get_by_label("write").check()
    page.get_by_role("button", name="Grant", exact=True).click()
    page.wait_for_url(f"{server.url}/console/memories/{acme}")
    row = page.locator("tr", has_text="member:ana")
    assert "read, write" in row.inner_text()
    grants = client.get(f"/v1/memories/{deals}/grants").json()["data"]
    assert any(g["principal"] == "member:ana" and g["inherited"] for g in grants)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke the grant of member:ana").click()
    page.wait_for_url(f"{server.url}/console/memories/{acme}")
    assert page.locator("tr", has_text="member:ana").count() == 0
    # A record written in Deals, revised, and both versions in its history.
    page.goto(f"{server.url}/console/memories/{deals}")
    page.get_by_label("Title").fill("Renewal")
    page.get_by_label("Text").fill("Acme renews its contract in March.")
    page.get_by_label("Attributes").fill('{"seats": 40}')
    page.get_by_role("button", name="Write it").click()
    page.wait_for_url(f"{server.url}/console/memories/{deals}/records/*")
    record = page.url.rsplit("/", 1)[1]
    page.get_by_label("Text").fill("Acme renews its contract in April.")
    page.get_by_role("button", name="Save a new version").click()
    page.wait_for_url(f"{server.url}/console/memories/{deals}/records/{record}")
    history = page.locator(".history .version").all_inner_texts()
    assert len(history) == 2
    assert "April" in history[0] and "version 2" in history[0]
    assert "March" in history[1] and "version 1" in history[1]
    api = client.get(f"/v1/memories/{deals}/records/{record}/history").json()["data"]
    assert [v["version"] for v in api] == [1, 2]
    # Asked at Acme: the answer is in Deals, and says so.
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Memories").click()
    page.get_by_role("link", name="Acme account").click()
    page.get_by_label("A question").fill("when does acme renew")
    page.get_by_role("button", name="Recall").click()
    hit = page.locator(".hit").first
    hit.wait_for()
    assert "April" in hit.inner_text() and "in Deals" in hit.inner_text()
    page.get_by_label("A question").fill("zebras")
    page.get_by_role("button", name="Recall").click()
    page.locator("#recall-abstain").wait_for()
    no_violations(
        axe_schemes,
        server,
        [
            "/console/memories",
            f"/console/memories/{acme}?q=when+does+acme+renew",
            f"/console/memories/{deals}/records/{record}",
        ],
    )


def test_another_principals_environments_and_memories_are_not_there(
    server: ServerProcess, client: httpx.Client, page: Any, other_key: str
) -> None:
    env = client.post("/v1/environments", json={"name": "Default's zanzibar env"}).json()["id"]
    memory = client.post("/v1/memories", json={"name": "Default's zanzibar memory"}).json()["id"]
    sign_in(page, server, other_key)
    for listing in ("/console/environments", "/console/memories"):
        page.goto(f"{server.url}{listing}")
        assert "zanzibar" not in page.content()
    for url in (
        f"/console/environments/{env}",
        f"/console/environments/{env}/builds/1",
        f"/console/memories/{memory}",
        f"/console/memories/{memory}?q=zanzibar",
    ):
        answer = page.goto(f"{server.url}{url}")
        assert answer.status == 404, url
        assert "zanzibar" not in page.content()


def test_a_cross_site_form_cannot_change_an_environment_or_a_memory(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    env = client.post("/v1/environments", json={"name": "Kept env"}).json()["id"]
    memory = client.post("/v1/memories", json={"name": "Kept memory"}).json()["id"]
    sign_in(page, server)
    evil = "http://evil.test/"
    forms = (
        f'<form id="env" method="post" action="{server.url}/console/environments/{env}/delete">'
        '<input name="csrf_token" value="guessed"></form>'
        f'<form id="mem" method="post" action="{server.url}/console/memories/{memory}/records">'
        '<input name="csrf_token" value="guessed"><input name="content" value="planted"></form>'
    )
    page.route(evil, lambda route: route.fulfill(content_type="text/html", body=forms))
    for form in ("env", "mem"):
        page.goto(evil)
        with page.expect_navigation():
            page.evaluate(f"document.getElementById('{form}').submit()")
        assert page.locator("h1").inner_text() in ("Refused", "Signed out")
    assert client.get(f"/v1/environments/{env}").status_code == 200
    assert client.get(f"/v1/memories/{memory}/records").json()["data"] == []


def test_hostile_names_and_content_render_inert(
    server: ServerProcess, client: httpx.Client, page: Any, tmp_path: Path
) -> None:
    env = client.post("/v1/environments", json={"name": "Env " + HOSTILE}).json()["id"]
    client.put(f"/v1/environments/{env}/files/page.html", content=HOSTILE.encode())
    memory = client.post("/v1/memories", json={"name": "Mem", "description": HOSTILE}).json()
    client.post(f"/v1/memories/{memory['id']}/records", json={"title": HOSTILE, "content": HOSTILE})
    sign_in(page, server)
    for url in (
        "/console/environments",
        f"/console/environments/{env}",
        f"/console/environments/{env}/files/page.html",
        f"/console/memories/{memory['id']}",
        f"/console/memories/{memory['id']}?q=window",
    ):
        page.goto(f"{server.url}{url}")
        page.wait_for_timeout(200)
        assert page.evaluate("typeof window.__pwned") == "undefined", url
        assert page.locator("main img, main script").count() == 0, url
    assert HOSTILE in page.locator(".hit").first.inner_text()


def test_at_phone_width_the_new_pages_do_not_scroll_sideways(
    server: ServerProcess, client: httpx.Client, browser: Any
) -> None:
    env = client.post("/v1/environments", json={"name": "Phone env"}).json()["id"]
    client.put(f"/v1/environments/{env}/files/{'deep/' * 8}file.txt", content=b"x" * 300)
    memory = client.post("/v1/memories", json={"name": "Phone memory"}).json()["id"]
    client.post(f"/v1/memories/{memory}/records", json={"content": "word " * 200})
    opened = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        phone = opened.new_page()
        sign_in(phone, server)
        for url in (
            "/console/environments",
            f"/console/environments/{env}",
            "/console/memories",
            f"/console/memories/{memory}",
        ):
            phone.goto(f"{server.url}{url}")
            assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], url
    finally:
        opened.close()

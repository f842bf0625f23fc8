"""The owner's console in a real browser (Debian's Chromium, driven by Playwright, as
tests/test_share_browser.py): signing in and out as a person does, what the browser keeps
(a cookie it cannot read, never the key), a forged cross-site write, a revoked key, phone
width, and axe-core's accessibility check in light and dark."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError

from tests.conftest import API_KEY
from tests.support.axe import serious_violations
from tests.support.server import ServerProcess
from tests.test_oumi_harness_e2e import ASK_TOOL, question_call
from tests.test_share_browser import CHROMIUM_FLAGS, chromium_path, screenshot_dir
from tests.test_tasks_e2e import create, wait_terminal
from uhp_server.files.filenames import safe_filename

pytestmark = pytest.mark.slow

PHONE = {"width": 375, "height": 740}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    opened = browser.new_context(viewport={"width": 1100, "height": 850})
    yield opened
    opened.close()


@pytest.fixture
def page(context: Any) -> Any:
    return context.new_page()


def sign_in(page: Any, server: ServerProcess, key: str = API_KEY) -> None:
    """As a person: the address, the key typed into its labelled field, Enter."""
    page.goto(f"{server.url}/console")
    assert page.url == f"{server.url}/console/sign-in"
    page.get_by_label("API key").fill(key)
    page.get_by_label("API key").press("Enter")
    page.wait_for_url(f"{server.url}/console")


def is_signed_in(page: Any, server: ServerProcess) -> bool:
    page.goto(f"{server.url}/console")
    return page.url == f"{server.url}/console"


def test_signing_in_and_out_keeps_no_key_in_the_browser(
    server: ServerProcess, context: Any, page: Any, tmp_path: Path
) -> None:
    sign_in(page, server)
    assert page.get_by_role("heading", level=1).inner_text() == "Sessions"
    assert "default" in page.locator(".who").inner_text()
    page.screenshot(path=str(screenshot_dir(tmp_path) / "console-signed-in.png"), full_page=True)
    # The browser holds a cookie its scripts cannot read, and nowhere the key.
    cookies = {c["name"]: c for c in context.cookies()}
    session = cookies["uhp_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and session["path"] == "/console"
    assert API_KEY not in session["value"]
    assert page.evaluate("document.cookie") == ""
    stored = page.evaluate(
        "JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"
    )
    assert stored == "[[],[]]"
    assert API_KEY not in page.content()
    assert page.evaluate("history.length") >= 1 and API_KEY not in page.url

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{server.url}/console/sign-in")
    assert "uhp_console" not in {c["name"] for c in context.cookies()}
    assert not is_signed_in(page, server)


def test_a_wrong_key_is_told_and_the_field_marked(server: ServerProcess, page: Any) -> None:
    page.goto(f"{server.url}/console/sign-in")
    page.get_by_label("API key").fill("uhp_sk_not_a_key_anyone_has")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    assert alert.inner_text() == "That key is not valid."
    assert page.get_by_label("API key").get_attribute("aria-invalid") == "true"
    assert not is_signed_in(page, server)


def test_a_cross_site_page_cannot_sign_the_browser_out_or_in(
    server: ServerProcess, page: Any
) -> None:
    """Another site's page posting forms to the console: the cookie stays behind (SameSite
    Strict) and the Origin is not ours, so the writes are refused and nothing changes."""
    sign_in(page, server)
    evil = "http://evil.test/"
    forms = (
        f'<form id="out" method="post" action="{server.url}/console/sign-out">'
        '<input name="csrf_token" value="guessed"></form>'
        f'<form id="in" method="post" action="{server.url}/console/sign-in">'
        '<input name="key" value="uhp_sk_attackers_key"><input name="csrf_token" value="x">'
        "</form>"
    )
    page.route(evil, lambda route: route.fulfill(content_type="text/html", body=forms))
    for form in ("out", "in"):
        page.goto(evil)
        with page.expect_navigation():
            page.evaluate(f"document.getElementById('{form}').submit()")
        assert page.url.startswith(server.url)
        assert page.locator("h1").inner_text() in ("Refused", "Signed out")
    assert is_signed_in(page, server)
    assert "default" in page.locator(".who").inner_text()


def test_revoking_the_key_signs_the_browser_out(server: ServerProcess, page: Any) -> None:
    key = server.create_key("console-revoked")
    sign_in(page, server, key)
    assert "console-revoked" in page.locator(".who").inner_text()
    server.revoke_key(key)
    assert not is_signed_in(page, server)


def test_at_phone_width_nothing_scrolls_sideways(server: ServerProcess, browser: Any) -> None:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(f"{server.url}/console/sign-in")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        sign_in(page, server)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert page.get_by_role("button", name="Sign out").is_visible()
    finally:
        context.close()


def test_the_keyboard_reaches_everything(server: ServerProcess, page: Any) -> None:
    page.goto(f"{server.url}/console/sign-in")
    assert page.evaluate("document.activeElement.id") == "key"  # the one field, ready to type
    page.keyboard.type(API_KEY)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign in"
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server.url}/console")
    reached = []
    for _ in range(11):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert reached[0] == "Skip to content"  # first, before the navigation
    assert reached[2:9] == [
        "Sessions",
        "Run a task",
        "Harnesses",
        "Environments",
        "Memories",
        "Keys",
        "Usage",
    ]
    assert "Sign out" in reached
    while page.evaluate("document.activeElement.textContent.trim()") != "Sign out":
        page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server.url}/console/sign-in")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_violation(
    server: ServerProcess, browser: Any, scheme: str
) -> None:
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1100, "height": 850})
    try:
        page = context.new_page()
        page.goto(f"{server.url}/console/sign-in")
        assert serious_violations(page) == []
        page.get_by_label("API key").fill("uhp_sk_wrong")
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("alert").wait_for()
        assert serious_violations(page) == []  # the form with its error
        sign_in(page, server)
        assert serious_violations(page) == []
    finally:
        context.close()


# -- sessions -----------------------------------------------------------------------------
def open_session(page: Any, server: ServerProcess, session_id: str) -> None:
    """From the list, as a person: the session's title is the link."""
    page.goto(f"{server.url}/console")
    page.locator(f"a.session-title[href='/console/sessions/{session_id}']").click()
    page.wait_for_url(f"{server.url}/console/sessions/{session_id}")


def test_a_finished_session_reads_shares_and_deletes(
    server: ServerProcess, client: httpx.Client, context: Any, page: Any, tmp_path: Path
) -> None:
    prompt = (
        "Write the quarter's report.\n"
        "THINK I will write report.md first.\n"
        "RUN printf '# Q3\\n\\nRevenue: 42\\n' > report.md && ls report.md\n"
        "SAY The report is in `report.md`: revenue **42**."
    )
    result = create(client, {"input": prompt})
    session_id = result["metadata"]["session_id"]
    sign_in(page, server)
    open_session(page, server, session_id)
    turn = page.locator(".turn").first
    assert "Write the quarter's report." in turn.locator(".prompt-text").inner_text()
    assert turn.locator(".answer strong").inner_text() == "42"
    tool = turn.locator("details.tool")
    assert tool.count() == 1 and not tool.locator(".tool-output").is_visible()
    tool.locator("summary").click()
    assert "report.md" in tool.locator(".tool-output").inner_text()
    page.screenshot(path=str(screenshot_dir(tmp_path) / "console-session.png"), full_page=True)

    with page.expect_download() as pending:
        turn.locator("a.file-link", has_text="report.md").click()
    assert Path(pending.value.path()).read_bytes() == b"# Q3\n\nRevenue: 42\n"

    page.get_by_role("button", name="Share a read-only link").click()
    link = page.get_by_label("Shared: anyone with this link can read the session")
    url = link.input_value()
    assert url.startswith(f"{server.url}/s/")
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy link").click()
    page.locator("#copied", has_text="Link copied.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == url
    assert httpx.get(url).status_code == 200
    page.get_by_role("button", name="Stop sharing").click()
    page.get_by_role("button", name="Share a read-only link").wait_for()
    assert httpx.get(url).status_code == 404

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete session").click()
    page.wait_for_url(f"{server.url}/console")
    assert page.locator(f"a[href='/console/sessions/{session_id}']").count() == 0
    assert client.get(f"/v1/sessions/{session_id}").status_code == 404


def test_a_running_turn_streams_onto_the_page_and_can_be_cancelled(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    first = create(client, {"input": "SAY first turn done"})
    session_id = first["metadata"]["session_id"]
    sign_in(page, server)
    open_session(page, server, session_id)
    words = " ".join(f"word{i}" for i in range(40))
    # SLOW spreads the whole answer over its seconds: the words arrive within the first
    # tenth or so, and the turn then runs on, for the cancel, for most of a minute.
    rest = " ".join(f"later{i}" for i in range(300))
    running = create(
        client,
        {
            "input": f"SLOW 60\nSAY {words}\nSAY {rest}",
            "previous_response_id": first["id"],
            "background": True,
        },
    )
    # The page notices the new turn (rendered again once: its controls change), then
    # follows its text as it grows, without reloading.
    second = page.locator(".turn").nth(1)
    second.locator(".answer").wait_for(timeout=30_000)
    page.evaluate("window.__loadedOnce = true")
    seen = [second.locator(".answer").inner_text()]
    while "word39" not in seen[-1]:
        page.wait_for_timeout(300)
        seen.append(second.locator(".answer").inner_text())
        assert len(seen) < 200, "the answer never finished on the page"
    assert len({len(text) for text in seen}) >= 2, "the text should grow while the turn runs"
    assert page.evaluate("window.__loadedOnce") is True  # the same page throughout
    assert page.locator("#session-status").inner_text() == "Running"
    page.get_by_role("button", name="Cancel the running turn").click()
    page.wait_for_url(f"{server.url}/console/sessions/{session_id}")
    assert wait_terminal(client, running["id"])["status"] == "cancelled"
    page.locator("#session-status", has_text="Cancelled").wait_for(timeout=15_000)


def test_hostile_prompts_outputs_and_file_names_render_inert(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    hostile_name = "<img src=x onerror=window.__pwned=1>.html"
    prompt = (
        "<script>window.__pwned = 'prompt'</script><b>not bold</b>\n"
        f"RUN printf '<script>window.__pwned=2</script>' > '{hostile_name}' && ls\n"
        "SAY <img src=x onerror=\"window.__pwned='answer'\"> [x](javascript:window.__pwned=3)"
    )
    result = create(client, {"input": prompt})
    session_id = result["metadata"]["session_id"]
    sign_in(page, server)
    open_session(page, server, session_id)
    page.locator("details.tool summary").click()
    page.wait_for_timeout(300)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("main img, main b, main a[href^='javascript']").count() == 0
    assert page.locator("script").count() == 1  # the console's own file
    assert "<script>window.__pwned = 'prompt'</script>" in page.locator(".prompt-text").inner_text()
    file_link = page.locator("a.file-link", has_text=hostile_name)
    assert file_link.count() == 1
    with page.expect_download() as pending:
        file_link.click()
    assert pending.value.suggested_filename.endswith(".html")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    # The list shows the hostile title as text too.
    page.goto(f"{server.url}/console")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("main b, main img").count() == 0


def test_another_principals_session_is_not_there(
    server: ServerProcess, client: httpx.Client, page: Any, other_key: str
) -> None:
    theirs = create(client, {"input": "SAY the default principal's own words"})
    session_id = theirs["metadata"]["session_id"]
    sign_in(page, server, other_key)
    assert page.locator(f"a[href='/console/sessions/{session_id}']").count() == 0
    for path in ("", "/state", "/files/" + "file_x"):
        answer = page.goto(f"{server.url}/console/sessions/{session_id}{path}")
        assert answer.status == 404
        assert "own words" not in page.content()


def test_the_sessions_list_filters_and_pages(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    marker = "filterable-" + str(id(page))
    made = [create(client, {"input": f"{marker} {n}\nSAY ok"}) for n in range(3)]
    sign_in(page, server)
    page.get_by_label("Title contains").fill(marker)
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    titles = page.locator("a.session-title").all_inner_texts()
    assert len(titles) == 3 and all(marker in t for t in titles)
    assert titles[0].endswith(" 2")  # newest first
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    assert page.locator("a.session-title").count() == 0
    assert "No session matches" in page.locator("main").inner_text()
    assert made


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_session_pages_have_no_serious_accessibility_violation(
    server: ServerProcess, client: httpx.Client, browser: Any, scheme: str
) -> None:
    result = create(client, {"input": "THINK a plan\nRUN echo hi > hi.txt\nSAY done, see hi.txt"})
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1100, "height": 850})
    try:
        page = context.new_page()
        sign_in(page, server)
        assert serious_violations(page) == []  # the list, with its filters
        open_session(page, server, result["metadata"]["session_id"])
        page.locator("details.tool summary").click()
        assert serious_violations(page) == []
        page.get_by_role("button", name="Share a read-only link").click()
        page.get_by_role("button", name="Copy link").wait_for()
        assert serious_violations(page) == []
        page.set_viewport_size(PHONE)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()


# -- running a task -----------------------------------------------------------------------
def test_run_a_task_watch_it_stream_and_continue_it(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Run a task").click()
    page.wait_for_url(f"{server.url}/console/run")
    words = " ".join(f"step{i}" for i in range(30))
    page.get_by_label("Prompt").fill(f"Console run\nSLOW 4\nSAY {words}")
    page.get_by_role("button", name="Run").click()
    page.wait_for_url(f"{server.url}/console/sessions/*")
    session_id = page.url.rsplit("/", 1)[1]
    assert client.get(f"/v1/sessions/{session_id}").status_code == 200  # the API sees it
    page.locator(".turn .answer", has_text="step29").wait_for(timeout=60_000)
    page.locator("#session-status", has_text="Completed").wait_for(timeout=15_000)

    page.get_by_label("Prompt").fill("SAY the second turn, same session")
    page.get_by_role("button", name="Send").click()
    page.locator(".turn").nth(1).locator(".answer", has_text="second turn").wait_for(timeout=60_000)
    turns = client.get(f"/v1/sessions/{session_id}/turns").json()["turns"]
    assert len(turns) == 2


def test_a_turn_streams_live_asks_and_ends_on_the_page(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    """The page follows the running turn over its live stream, without reloading: reasoning
    and a tool call collapsed with its output, then the agent's question with its form; the
    answer carries the turn on, its answer grows as it streams, and the end is seen."""
    sign_in(page, server)
    page.goto(f"{server.url}/console/run")
    question = question_call(ASK_TOOL, "Which city, <b>Paris</b> or Rome?")
    words = " ".join(f"word{i}" for i in range(30))
    page.get_by_label("Prompt").fill(
        "THINK weighing <i>cities</i>\nRUN echo tool-said-4471\n"
        f"TOOL {ASK_TOOL} {question}\nSLOW 5\nSAY city is {{output}} {words}"
    )
    page.get_by_role("button", name="Run").click()
    page.wait_for_url(f"{server.url}/console/sessions/*")
    page.evaluate("window.__samePage = true")
    asked = page.locator(".question")
    asked.wait_for(timeout=60_000)
    assert page.evaluate("window.__samePage") is True  # streamed in, not reloaded
    assert re.fullmatch(r"resp_[0-9a-f]+\.[0-9]+", page.evaluate("document.body.dataset.lastEvent"))
    assert asked.locator(".question-text").inner_text() == "Which city, <b>Paris</b> or Rome?"
    assert page.locator(".question b, .turn i").count() == 0
    tool = page.locator("details.tool", has_text="echo tool-said-4471")
    assert tool.get_attribute("open") is None  # collapsed
    tool.locator("summary").click()
    tool.locator(".tool-output", has_text="tool-said-4471").wait_for(timeout=5_000)
    assert page.locator("details.reasoning").count() >= 1  # THINK: before each model step

    page.get_by_label("Your answer").fill("Rome-4471")
    with page.expect_navigation():
        page.get_by_role("button", name="Answer").click()
    page.evaluate("window.__samePage = true")
    answer = page.locator(".turn .answer").last
    seen = []  # the answer's text as this same page showed it, while the turn ran
    for _ in range(400):
        try:
            if page.locator("#session-status").inner_text() == "Completed":
                break
            if answer.count() and page.evaluate("window.__samePage === true"):
                seen.append(answer.inner_text())
        except PlaywrightError:
            pass  # the page being rendered again at the end
        page.wait_for_timeout(150)
    grown = {len(text) for text in seen if "city is Rome-4471" in text}
    assert len(grown) >= 2, f"the answer should grow on the page as it streams: {seen}"
    # The end: the page is rendered again with the finished turn and its controls.
    page.locator("#session-status", has_text="Completed").wait_for(timeout=15_000)
    page.locator(".answer", has_text="word29").wait_for(timeout=5_000)
    assert page.locator(".question").count() == 0
    page.get_by_label("Prompt").wait_for()  # Continue this session is offered again


# -- keys and usage -----------------------------------------------------------------------
def test_create_a_key_use_it_and_revoke_it(server: ServerProcess, browser: Any, page: Any) -> None:
    owner_key = server.create_key("console-keys")
    sign_in(page, server, owner_key)
    page.get_by_role("link", name="Keys").click()
    page.get_by_role("button", name="Create a key").click()
    new_key = page.get_by_label("The new key").input_value()
    assert new_key.startswith("uhp_sk_")
    assert (
        httpx.get(
            f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {new_key}"}
        ).status_code
        == 200
    )
    page.goto(f"{server.url}/console/keys")  # shown once: not on the page again
    assert new_key not in page.content()
    assert page.locator("tbody tr").count() == 2
    # Signed in elsewhere with the new key; revoking it here signs that browser out.
    elsewhere = browser.new_context()
    try:
        other = elsewhere.new_page()
        sign_in(other, server, new_key)
        page.on("dialog", lambda dialog: dialog.accept())
        page.locator("tbody tr").first.get_by_role("button", name="Revoke").click()  # newest
        page.locator("tbody tr", has_text="Revoked").wait_for()
        assert page.locator("tbody tr", has_text="Active").count() == 1  # the owner's
        answer = httpx.get(
            f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {new_key}"}
        )
        assert answer.status_code == 401
        assert not is_signed_in(other, server)
        assert is_signed_in(page, server)
    finally:
        elsewhere.close()


def test_usage_shows_this_principals_turns(server: ServerProcess, page: Any) -> None:
    key = server.create_key("console-usage")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as theirs:
        create(theirs, {"input": "SAY counted"})
    sign_in(page, server, key)
    page.get_by_role("link", name="Usage").click()
    assert page.locator("tbody tr").count() == 1
    cells = page.locator("tbody tr td").all_inner_texts()
    assert cells[2] == "1"  # one turn on its harness today
    assert int(cells[3]) > 0  # the scripted provider reports input tokens
    assert serious_violations(page) == []
    page.get_by_role("link", name="Keys").click()
    assert serious_violations(page) == []


# -- file previews --------------------------------------------------------------------------
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def test_files_preview_as_text_and_image_and_download(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    prompt = (
        "Make the files.\n"
        "RUN printf '<script>window.__pwned=1</script>\\nline two\\n' > notes.txt"
        f" && echo {PIXEL_PNG} | base64 -d > pixel.png"
        ' && printf \'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=2"/>\''
        " > drawing.svg && printf 'x' > data.bin\n"
        "SAY made"
    )
    result = create(client, {"input": prompt})
    session_id = result["metadata"]["session_id"]
    sign_in(page, server)
    open_session(page, server, session_id)
    files = page.locator(".session-files li")
    assert sorted(files.locator("span:not(.size):not(.visually-hidden)").all_inner_texts()) == [
        "data.bin",
        "drawing.svg",
        "notes.txt",
        "pixel.png",
    ]
    page.get_by_role("link", name="Preview notes.txt").click()
    assert page.locator("h1").inner_text() == "notes.txt"
    assert page.locator("pre.file-text").inner_text() == (
        "<script>window.__pwned=1</script>\nline two\n"
    )
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.go_back()
    page.get_by_role("link", name="Preview pixel.png").click()
    image = page.locator("img.file-image")
    image.wait_for()
    # Waits for the picture in one evaluation: wait_for_function's polling evaluates its
    # string in the page, which the page's CSP refuses (no 'unsafe-eval') when a first look
    # finds the picture not loaded yet.
    assert image.evaluate("img => img.decode().then(() => img.naturalWidth)") == 1
    page.go_back()
    page.get_by_role("link", name="Preview drawing.svg").click()
    assert page.locator("img").count() == 0  # an SVG is a document: never drawn here
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.go_back()
    page.get_by_role("link", name="Preview data.bin").click()
    assert "no preview" in page.locator("main").inner_text()
    with page.expect_download() as pending:
        page.get_by_role("link", name="Download").click()
    assert Path(pending.value.path()).read_bytes() == b"x"
    assert serious_violations(page) == []


def test_a_task_runs_with_attached_files(
    server: ServerProcess, client: httpx.Client, page: Any, tmp_path: Path
) -> None:
    first = tmp_path / "<img src=x onerror=window.__pwned=1>brief.txt"
    first.write_text("the brief says 7731\n")
    second = tmp_path / "data.csv"
    second.write_text("a,b\n1,2\n")
    sign_in(page, server)
    page.goto(f"{server.url}/console/run")
    for path in (first, second):
        page.get_by_label("Attach a file").set_input_files(str(path))
        page.get_by_role("button", name="Attach", exact=True).click()
        page.wait_for_url(f"{server.url}/console/run?files=*")
    attached = page.locator("ul.attachments li").all_inner_texts()
    # The server keeps a safe name (files/filenames.py), and the page shows it as text.
    assert attached == [safe_filename(first.name), "data.csv"]
    assert page.locator("main img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.get_by_label("Prompt").fill("RUN ls && cat ./*brief*.txt\nSAY {output}")
    page.get_by_role("button", name="Run").click()
    page.wait_for_url(f"{server.url}/console/sessions/*")
    page.locator(".answer", has_text="the brief says 7731").wait_for(timeout=60_000)
    assert page.locator(".prompt .attachment").all_inner_texts() == attached


# -- harnesses ----------------------------------------------------------------------------
def test_create_edit_use_and_delete_a_harness(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Harnesses").click()
    page.get_by_label("Name").fill("Console <i>harness</i>")
    page.get_by_label("Instructions").fill("Answer briefly.")
    page.get_by_role("button", name="Create").click()
    page.wait_for_url(f"{server.url}/console/harnesses/*")
    harness_id = page.url.rsplit("/", 1)[1]
    assert page.locator("h1").inner_text() == "Console <i>harness</i>"
    assert page.locator("main i").count() == 0
    models = page.locator("section[aria-labelledby='models-heading'] tbody tr")
    assert models.count() >= 1
    assert "Yes" in models.all_inner_texts()[0]  # the scripted provider serves it
    # Edit the whole configuration as JSON: a GET→PUT round trip with one change.
    page.get_by_text("The whole configuration as JSON").click()
    configuration = page.get_by_label("The harness as")
    body = json.loads(configuration.input_value())
    assert body["systemPrompt"] == "Answer briefly."
    body["systemPrompt"] = "Answer in one word."
    configuration.fill(json.dumps(body))
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{server.url}/console/harnesses/{harness_id}")
    stored = client.get(f"/v1/harnesses/{harness_id}").json()
    assert stored["systemPrompt"] == "Answer in one word."
    # A configuration the engine refuses is said on a page, nothing changed.
    page.get_by_text("The whole configuration as JSON").click()
    page.get_by_label("The harness as").fill('{"base": "another", "systemPrompt": 1}')
    page.get_by_role("button", name="Save", exact=True).click()
    assert page.locator("h1").inner_text() == "Not possible"
    assert client.get(f"/v1/harnesses/{harness_id}").json()["systemPrompt"] == (
        "Answer in one word."
    )
    page.goto(f"{server.url}/console/harnesses/{harness_id}")
    assert serious_violations(page) == []
    # Use it: a task run on it from the console.
    page.goto(f"{server.url}/console/run")
    page.get_by_label("Harness", exact=True).select_option(harness_id)
    page.get_by_label("Prompt").fill("SAY ran on the new harness")
    page.get_by_role("button", name="Run").click()
    page.wait_for_url(f"{server.url}/console/sessions/*")
    session_id = page.url.rsplit("/", 1)[1]
    page.locator(".answer", has_text="ran on the new harness").wait_for(timeout=60_000)
    assert client.get(f"/v1/sessions/{session_id}").json()["harness_id"] == harness_id
    page.goto(f"{server.url}/console/harnesses/{harness_id}")
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete harness").click()
    page.wait_for_url(f"{server.url}/console/harnesses")
    assert client.get(f"/v1/harnesses/{harness_id}").status_code == 404


def test_a_harness_is_created_and_edited_with_its_fields(
    server: ServerProcess, client: httpx.Client, page: Any
) -> None:
    """The settings form: instructions, a budget, a new skill with its SKILL.md, an MCP
    server whose token is written once and never shown back; a refusal shown by its field."""
    sign_in(page, server)
    page.goto(f"{server.url}/console/harnesses")
    page.get_by_label("Name").fill("Fielded")
    page.get_by_role("button", name="Create").click()
    page.wait_for_url(f"{server.url}/console/harnesses/*")
    harness_id = page.url.rsplit("/", 1)[1]
    form = page.locator("form.harness-form")
    form.get_by_label("Instructions").fill("Be <b>brief</b>.")
    form.get_by_label("Most steps a turn takes").fill("7")
    new_skill = form.locator("fieldset.skill", has_text="A new skill")
    new_skill.get_by_label("Name", exact=True).fill("greeter")
    new_skill.get_by_label("Contents of SKILL.md").fill(
        "---\nname: greeter\ndescription: Greets people\n---\nSay hello warmly.\n"
    )
    server_row = form.locator("fieldset.mcp-server", has_text="A new MCP server")
    server_row.get_by_label("Name", exact=True).fill("tools")
    server_row.get_by_label("URL").fill("https://mcp.example.com/mcp")
    server_row.get_by_label("Bearer token").fill("s3cret-token-8812")
    form.get_by_role("button", name="Save settings").click()
    page.wait_for_url(f"{server.url}/console/harnesses/{harness_id}")
    stored = client.get(f"/v1/harnesses/{harness_id}").json()
    assert stored["systemPrompt"] == "Be <b>brief</b>." and stored["maxStep"] == 7
    assert [s["name"] for s in stored["skills"]] == ["greeter"]
    files = {f["path"]: f.get("content") for f in stored["skills"][0]["files"]}
    assert "Say hello warmly." in files["SKILL.md"]
    reference = stored["mcpServers"][0]["auth"]
    assert reference.startswith("uhp-secret:")
    # Written once: neither the token nor its reference is on the page.
    html = page.content()
    assert "s3cret-token-8812" not in html and reference not in html.split("<details")[0]
    assert page.locator("form.harness-form b").count() == 0
    assert (
        "stored: leave empty to keep it" in page.locator("fieldset.mcp-server").first.inner_text()
    )

    # Edited again: the token left empty is kept; the skill's text changed.
    skill = form.locator("fieldset.skill", has_text="Skill greeter")
    skill.get_by_label("Contents of SKILL.md").fill(
        "---\nname: greeter\ndescription: Greets people\n---\nSay hello briefly.\n"
    )
    form.get_by_role("button", name="Save settings").click()
    page.wait_for_url(f"{server.url}/console/harnesses/{harness_id}")
    stored = client.get(f"/v1/harnesses/{harness_id}").json()
    assert stored["mcpServers"][0]["auth"] == reference
    assert "Say hello briefly." in stored["skills"][0]["files"][0]["content"]

    # Refusals are shown by the field they name, and change nothing.
    form.get_by_label("Most steps a turn takes").fill("many")
    form.get_by_role("button", name="Save settings").click()
    error = page.locator("#f-maxStep-error")
    error.wait_for()
    assert "whole number" in error.inner_text()
    assert page.locator("#f-maxStep").get_attribute("aria-invalid") == "true"
    assert page.locator("#f-maxStep").input_value() == "many"  # what was typed stays
    skill = page.locator("fieldset.skill", has_text="Skill greeter")
    page.locator("#f-maxStep").fill("7")
    skill.get_by_label("A new file's path").fill("../escape.txt")
    page.get_by_role("button", name="Save settings").click()
    refusal = page.locator("#f-skills-0-files-1-path-error")
    refusal.wait_for()
    assert page.locator(".error-summary").is_visible()
    assert client.get(f"/v1/harnesses/{harness_id}").json()["maxStep"] == 7
    assert serious_violations(page) == []

    # Its agent's memories: a granted one chosen as the default, observing turned off.
    notes = client.post("/v1/memories", json={"name": "Console <i>notes</i>"}).json()
    grant = {"principal": f"member:{harness_id}", "privileges": ["read", "write"]}
    assert client.post(f"/v1/memories/{notes['id']}/grants", json=grant).status_code < 300
    page.goto(f"{server.url}/console/harnesses/{harness_id}")
    page.get_by_label("Default memory").select_option(notes["id"])
    page.get_by_label("Observe its turns").uncheck()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_url(f"{server.url}/console/harnesses/{harness_id}")
    memories = client.get(f"/v1/harnesses/{harness_id}/memories").json()
    assert memories["default_memory_id"] == notes["id"] and memories["observe"] is False
    assert page.locator("main i").count() == 0

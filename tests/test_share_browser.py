"""The shared-session page in a real browser: Debian's Chromium, headless, driven by
Playwright (with the system browser: nothing is downloaded). It renders a finished session,
follows a running one without a reload, shows hostile content as text, and stops resolving
once the share is revoked."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, PROVIDER_KEY
from tests.test_tasks_e2e import create

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "Chromium is not installed: `apt-get install chromium` (scripts/test.sh does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip("BROWSER TESTS NOT RUN. " + message)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    executable = chromium_path()
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1000, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def share(client: httpx.Client, response: dict[str, Any]) -> str:
    session_id = response["metadata"]["session_id"]
    answer = client.post(f"/v1/sessions/{session_id}/share")
    assert answer.status_code == 200, answer.text
    return f"{client.base_url}{answer.json()['url']}"


def screenshot_dir(tmp_path: Path) -> Path:
    configured = os.environ.get("UHP_SCREENSHOT_DIR")
    return Path(configured) if configured else tmp_path


def test_a_finished_session_reads_well_and_its_files_download(
    client: httpx.Client, page: Any, tmp_path: Path
) -> None:
    prompt = (
        "Summarise the numbers and write a report.\n"
        "THINK The user wants a short report; I will write it to report.md first.\n"
        "RUN printf '# Q3\\n\\nRevenue: 42\\n' > report.md && ls -l report.md\n"
        "SAY Here is the summary:\n"
        "SAY \n"
        "SAY - revenue is **42**\n"
        "SAY - the full report is in `report.md`"
    )
    result = create(client, {"input": prompt})
    url = share(client, result)
    loaded = page.goto(url)
    assert loaded.status == 200
    assert page.title().endswith("Shared session")
    assert page.locator("h1").inner_text() == "Summarise the numbers and write a report."
    turn = page.locator(".turn").first
    assert "Summarise the numbers" in turn.locator(".prompt-text").inner_text()
    answer = turn.locator(".answer")
    assert answer.locator("strong").inner_text() == "42"
    assert answer.locator("li").count() == 2
    assert answer.locator("code").inner_text() == "report.md"
    # THINK gives a summary before each model response: one before the call, one after.
    assert turn.locator("details.reasoning").count() >= 1
    assert turn.locator("details.tool").count() == 1
    assert turn.locator("details[open]").count() == 0  # all collapsed
    reasoning = turn.locator("details.reasoning").first
    tool = turn.locator("details.tool")
    assert not tool.locator(".tool-output").is_visible()  # collapsed until asked for
    tool.locator("summary").click()
    assert tool.locator(".tool-output").is_visible()
    assert "report.md" in tool.locator(".tool-output").inner_text()
    reasoning.locator("summary").click()
    assert "short report" in reasoning.locator(".reasoning-text").inner_text()
    page.screenshot(path=str(screenshot_dir(tmp_path) / "share-finished.png"), full_page=True)

    with page.expect_download() as pending:
        turn.locator("a.file-link", has_text="report.md").click()
    download = pending.value
    assert download.suggested_filename == "report.md"
    assert Path(download.path()).read_bytes() == b"# Q3\n\nRevenue: 42\n"
    # Nothing on the page can start, stop or change anything.
    assert page.locator("form, button, input, textarea").count() == 0
    html = page.content()
    for secret in (API_KEY, PROVIDER_KEY, result["id"], result["metadata"]["session_id"]):
        assert secret not in html


def test_the_page_follows_a_running_turn_without_reloading(
    client: httpx.Client, page: Any, tmp_path: Path
) -> None:
    first = create(client, {"input": "SAY first turn done"})
    url = share(client, first)
    page.goto(url)
    page.evaluate("window.__loadedOnce = true")
    assert page.locator(".turn").count() == 1
    words = " ".join(f"word{i}" for i in range(60))
    running = create(
        client,
        {
            "input": f"SLOW 10\nSAY {words}",
            "previous_response_id": first["id"],
            "background": True,
        },
    )
    second = page.locator(".turn").nth(1)
    second.locator(".answer").wait_for(timeout=30_000)
    seen = [second.locator(".answer").inner_text()]
    assert second.locator(".working").count() == 1
    assert page.locator("#session-status").inner_text() == "Running"
    page.screenshot(path=str(screenshot_dir(tmp_path) / "share-running.png"), full_page=True)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and "word59" not in seen[-1]:
        time.sleep(0.5)
        seen.append(second.locator(".answer").inner_text())
    assert "word59" in seen[-1], "the answer never finished on the page"
    lengths = [len(text) for text in seen]
    assert len(set(lengths)) >= 3, "the text should grow in steps while the turn runs"
    assert lengths == sorted(lengths)
    page.locator("#session-status", has_text="Completed").wait_for(timeout=15_000)
    assert second.locator(".working").count() == 0
    assert page.evaluate("window.__loadedOnce") is True  # the same page, never reloaded
    status = client.get(f"/v1/responses/{running['id']}").json()["status"]
    assert status == "completed"


def test_hostile_transcript_content_is_shown_as_text_and_never_runs(
    client: httpx.Client, page: Any
) -> None:
    hostile = (
        '<script>window.__pwned = "answer"</script> '
        "<img src=x onerror=\"window.__pwned = 'img'\"> "
        "[click](javascript:window.__pwned='link') <iframe src=/v1/uhp></iframe>"
    )
    prompt = (
        "<b>not bold</b><script>window.__pwned = 'prompt'</script>\n"
        "RUN printf '<script>window.__pwned=\"tool\"</script>' > evil.html && cat evil.html\n"
        f"SAY {hostile}"
    )
    result = create(client, {"input": prompt})
    url = share(client, result)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.goto(url)
    page.locator(".turn .answer").wait_for()
    page.locator("details.tool summary").click()
    page.wait_for_timeout(500)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("script").count() == 1  # the page's own file, nothing else
    assert page.evaluate("document.scripts[0].getAttribute('src')") == "_assets/share.js"
    assert page.locator(".answer img, .answer iframe, .prompt b").count() == 0
    assert page.locator(".answer a[href^='javascript']").count() == 0
    answer = page.locator(".answer").inner_text()
    assert '<script>window.__pwned = "answer"</script>' in answer
    assert "<iframe src=/v1/uhp></iframe>" in answer
    prompt_text = page.locator(".prompt-text").inner_text()
    assert "<b>not bold</b><script>window.__pwned = 'prompt'</script>" in prompt_text
    assert '<script>window.__pwned="tool"</script>' in page.locator(".tool-output").inner_text()
    # The HTML artifact downloads; it is never rendered on the page's origin.
    with page.expect_download() as pending:
        page.locator("a.file-link", has_text="evil.html").click()
    assert pending.value.suggested_filename == "evil.html"
    assert page.evaluate("typeof window.__pwned") == "undefined"
    # Even a direct visit to the artifact is a sandboxed download, not a page on our origin.
    file_id = result["output"][-1]["content"][0]["annotations"][0]["file_id"]
    artifact = httpx.get(f"{url}/files/{file_id}")
    assert "sandbox" in artifact.headers["content-security-policy"]
    assert artifact.headers["content-disposition"].startswith("attachment")


def test_a_revoked_share_stops_resolving(client: httpx.Client, page: Any) -> None:
    result = create(client, {"input": "SAY soon private"})
    url = share(client, result)
    assert page.goto(url).status == 200
    assert "soon private" in page.locator(".answer").inner_text()
    session_id = result["metadata"]["session_id"]
    assert client.delete(f"/v1/sessions/{session_id}/share").status_code == 200
    # The page already open notices on its next poll and drops what it showed.
    page.locator("#notice", has_text="no longer available").wait_for(timeout=15_000)
    assert page.locator(".turn").count() == 0
    reloaded = page.reload()
    assert reloaded.status == 404
    assert "soon private" not in page.content()
    assert "not available" in page.locator("h1").inner_text()


RICH_ANSWER = [
    "See [the docs](https://example.com/docs), <https://example.org/auto>",
    "and <mailto:a@example.com>.",
    "Refused: [js](javascript:window.__pwned='md') [up](../../v1/uhp) [data](data:text/html,x)",
    "![tracker](https://example.com/pixel.png)",
    "",
    "| name | value |",
    "|------|-------|",
    "| <b>raw</b> | `code` |",
    "",
    "```python",
    "print('<script>window.__pwned = \"code\"</script>')",
    "```",
    "",
    "1. first",
    "2. second",
    "",
    "<img src=https://example.com/raw.png onerror=\"window.__pwned='raw'\">",
]


def test_links_code_tables_lists_and_images_render_safely(
    client: httpx.Client, page: Any, tmp_path: Path
) -> None:
    prompt = "\n".join(
        [
            "THINK see [ref](https://example.com/think) <script>window.__pwned='think'</script>",
            "RUN echo '<a href=\"javascript:x\">t</a> [t](https://example.com/tool)'",
            *(f"SAY {line}" for line in RICH_ANSWER),
        ]
    )
    result = create(client, {"input": prompt})
    url = share(client, result)
    state = httpx.get(f"{url}/state")
    assert state.status_code == 200, state.text  # the live-update route renders links too
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    assert page.goto(url).status == 200
    answer = page.locator(".turn .answer")
    answer.wait_for()

    links = answer.locator("a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert hrefs == [
        "https://example.com/docs",
        "https://example.org/auto",
        "mailto:a@example.com",
        "https://example.com/pixel.png",  # an image is a link to it, never loaded
    ]
    for i in range(links.count()):
        rel = (links.nth(i).get_attribute("rel") or "").split()
        assert {"noopener", "nofollow", "noreferrer"} <= set(rel)
    assert links.first.inner_text() == "the docs"
    text = answer.inner_text()
    assert "[js](javascript:window.__pwned='md')" in text  # refused links stay text
    assert "[up](../../v1/uhp)" in text
    assert page.locator("a[href^='javascript'], a[href^='data'], img, iframe").count() == 0
    cells = answer.locator("table td")
    assert cells.count() == 2
    assert cells.first.inner_text() == "<b>raw</b>"
    assert cells.nth(1).locator("code").inner_text() == "code"
    assert 'window.__pwned = "code"' in answer.locator("pre code").inner_text()
    assert answer.locator("ol li").all_inner_texts() == ["first", "second"]
    assert "<img src=https://example.com/raw.png" in text

    page.locator("details.reasoning summary").first.click()
    page.locator("details.tool summary").click()
    reasoning = page.locator(".reasoning-text").first.inner_text()
    assert "[ref](https://example.com/think) <script>" in reasoning
    output = page.locator(".tool-output").inner_text()
    assert '<a href="javascript:x">t</a> [t](https://example.com/tool)' in output
    assert page.locator(".reasoning-text a, .tool-output a").count() == 0
    page.wait_for_timeout(300)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    origin = url.split("/s/")[0]
    assert requested and all(u.startswith(origin) for u in requested), requested
    page.screenshot(path=str(screenshot_dir(tmp_path) / "share-markdown.png"), full_page=True)

"""The owner's console in a real browser (Debian's Chromium, driven by Playwright, as
tests/test_share_browser.py): signing in and out as a person does, what the browser keeps
(a cookie it cannot read, never the key), a forged cross-site write, a revoked key, phone
width, and axe-core's accessibility check in light and dark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import API_KEY
from tests.support.axe import serious_violations
from tests.support.server import ServerProcess
from tests.test_share_browser import CHROMIUM_FLAGS, chromium_path, screenshot_dir

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
    for _ in range(5):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert reached[0] == "Skip to content"  # first, before the navigation
    assert "Sessions" in reached and "Sign out" in reached
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

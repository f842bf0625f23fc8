"""A console sign-in for a client that is not a browser (tests, bench/console.py): an httpx
cookie jar signed in with a key as the sign-in form is sent, Origin and form token included."""

from __future__ import annotations

import re

import httpx

FORM_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def console_client(url: str, key: str, timeout: float = 120) -> httpx.Client:
    """A client holding a live sign-in's cookie for `key` on the server at `url`."""
    browser = httpx.Client(base_url=url, timeout=timeout, follow_redirects=True)
    form = browser.get("/console/sign-in")
    token = FORM_TOKEN.search(form.text)
    if token is None:
        raise RuntimeError(f"no sign-in form at {url}/console/sign-in: {form.status_code}")
    signed = browser.post(
        "/console/sign-in",
        data={"key": key, "csrf_token": token.group(1)},
        headers={"Origin": url},
    )
    if signed.status_code != 200 or signed.url.path != "/console":
        raise RuntimeError(f"signing in failed: {signed.status_code} {signed.text[:200]}")
    return browser

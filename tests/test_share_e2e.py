"""Session sharing over HTTP (Sessions §5, Security §6-§7): publish, read back, revoke; the
page's headers; a share is never a credential and shows nothing it should not."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, PROVIDER_KEY
from tests.test_artifacts_e2e import citations
from tests.test_tasks_e2e import create

pytestmark = pytest.mark.slow

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def shared_session(client: httpx.Client, prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    result = create(client, {"input": prompt})
    answer = client.post(f"/v1/sessions/{result['metadata']['session_id']}/share")
    assert answer.status_code == 200, answer.text
    share = answer.json()
    # The OpenAPI SessionShare (the JSON Schema file has no definition for it).
    assert isinstance(share["id"], str) and isinstance(share["url"], str)
    assert isinstance(share["enabled"], bool) and share["object"] == "session.share"
    return result, share


def assert_page_headers(answer: httpx.Response) -> None:
    headers = answer.headers
    assert headers["content-security-policy"] == PAGE_CSP
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-store"


def test_publish_read_back_and_revoke(client: httpx.Client) -> None:
    result, share = shared_session(client, "RUN echo data > out.txt\nSAY shared answer")
    session_id = result["metadata"]["session_id"]
    assert share["id"].startswith("shr_") and share["object"] == "session.share"
    assert share["enabled"] is True
    assert share["url"].startswith("/s/") and len(share["url"]) > 40  # base-relative, random
    assert client.get(f"/v1/sessions/{session_id}/share").json() == share
    assert client.post(f"/v1/sessions/{session_id}/share", json={}).json() == share

    page = httpx.get(f"{client.base_url}{share['url']}")  # no credential needed
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert_page_headers(page)
    assert "shared answer" in page.text
    file_link = f"{client.base_url}{share['url']}/files/{citations(result)[0]['file_id']}"
    served = httpx.get(file_link)
    assert served.status_code == 200 and served.content == b"data\n"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-disposition"].startswith("attachment;")
    assert "sandbox" in served.headers["content-security-policy"]
    state = httpx.get(f"{client.base_url}{share['url']}/state")
    assert state.status_code == 200 and state.json()["running"] is False
    assert_page_headers(state)

    revoked = client.delete(f"/v1/sessions/{session_id}/share")
    assert revoked.status_code == 200
    assert revoked.json() | {"enabled": True} == share and revoked.json()["enabled"] is False
    for url in (
        share["url"],
        share["url"] + "/state",
        file_link.removeprefix(str(client.base_url)),
    ):
        gone = httpx.get(f"{client.base_url}{url}")
        assert gone.status_code == 404, url
        assert_page_headers(gone)
        assert "shared answer" not in gone.text and "data" not in gone.text.split("</h1>")[-1]
    assert client.get(f"/v1/sessions/{session_id}/share").status_code == 404
    assert client.delete(f"/v1/sessions/{session_id}/share").status_code == 404
    # Publishing again mints a new link; the old one stays dead.
    again = client.post(f"/v1/sessions/{session_id}/share").json()
    assert again["url"] != share["url"]
    assert httpx.get(f"{client.base_url}{share['url']}").status_code == 404
    assert httpx.get(f"{client.base_url}{again['url']}").status_code == 200
    off = client.post(f"/v1/sessions/{session_id}/share", json={"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False
    assert httpx.get(f"{client.base_url}{again['url']}").status_code == 404
    bad = client.post(f"/v1/sessions/{session_id}/share", json={"enabled": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "enabled"


def test_a_share_is_never_a_credential_and_leaks_nothing(
    client: httpx.Client, other_key: str
) -> None:
    result, share = shared_session(client, "SAY visible to readers")
    session_id = result["metadata"]["session_id"]
    token = share["url"].removeprefix("/s/")
    for credential in (token, share["id"], share["url"]):
        for path in (
            "/v1/harnesses",
            f"/v1/sessions/{session_id}",
            f"/v1/responses/{result['id']}",
        ):
            answer = httpx.get(
                f"{client.base_url}{path}", headers={"Authorization": f"Bearer {credential}"}
            )
            assert answer.status_code == 401, (credential, path)
    page = httpx.get(f"{client.base_url}{share['url']}").text
    state = httpx.get(f"{client.base_url}{share['url']}/state").text
    for secret in (API_KEY, PROVIDER_KEY, other_key, "server-secret-do-not-leak"):
        assert secret not in page and secret not in state
    for internal in (result["id"], session_id, result["metadata"]["harness_id"]):
        assert internal not in page and internal not in state
    # Only the owner can share, read or revoke the share.
    with httpx.Client(
        base_url=str(client.base_url), headers={"Authorization": f"Bearer {other_key}"}
    ) as other:
        for method in ("POST", "GET", "DELETE"):
            answer = other.request(method, f"/v1/sessions/{session_id}/share")
            assert answer.status_code == 404
        their = create(other, {"input": "SAY someone else's words"})
        other.post(f"/v1/sessions/{their['metadata']['session_id']}/share")
    assert "someone else" not in httpx.get(f"{client.base_url}{share['url']}").text
    # A token that was never minted, and path tricks, resolve to nothing.
    for probe in ("/s/" + "A" * 43, "/s/..%2f..%2fv1%2fuhp", "/s/_assets/../share.js"):
        answer = httpx.get(f"{client.base_url}{probe}")
        assert answer.status_code == 404, probe

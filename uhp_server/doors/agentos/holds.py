"""Asking a person: `POST {api_url}/v0/holds` with the run token, the question as intent."""

from __future__ import annotations

from typing import Any

import httpx

from uhp_server.gateway.url_policy import (
    MODEL_CONNECTION_SETTING,
    HostNotResolved,
    UrlRefused,
    pin_url,
    refusal,
)

RUN_TOKEN_HEADER = "x-agentos-run-token"
_TIMEOUT = httpx.Timeout(10.0)


class HoldFailed(Exception):
    """The platform did not open the hold (the message names no token or URL)."""


async def open_hold(
    http: httpx.AsyncClient,
    api_url: str,
    token: str,
    question: str,
    run_id: str,
    *,
    allow_private: bool,
) -> str:
    """Open a hold for the agent's question; returns its id. `api_url` comes with an
    unauthenticated invocation, so it passes the same URL policy as a model connection's
    `base_url` (never link-local; private hosts only when allowed), and the request goes to
    the address that was checked."""
    body: dict[str, Any] = {
        "intent": question,
        "actions": ["answer"],
        "details": {"kind": "question", "run_id": run_id},
    }
    try:
        pinned = await pin_url(f"{api_url.rstrip('/')}/v0/holds", allow_private)
    except HostNotResolved:
        raise HoldFailed(
            "The platform's holds endpoint could not be reached: its host name does not resolve."
        ) from None
    except UrlRefused as exc:
        why = refusal(exc, MODEL_CONNECTION_SETTING)
        raise HoldFailed(f"The invocation's api_url is refused: {why}") from None
    try:
        answer = await http.post(
            pinned.connect_url,
            json=body,
            headers={RUN_TOKEN_HEADER: token, "host": pinned.host_header},
            timeout=_TIMEOUT,
            extensions={"sni_hostname": pinned.host},
        )
    except httpx.HTTPError:
        raise HoldFailed("The platform's holds endpoint could not be reached.") from None
    if not answer.is_success:
        raise HoldFailed(f"The platform refused to open a hold ({answer.status_code}).")
    try:
        payload = answer.json()
    except ValueError:
        raise HoldFailed("The platform's hold answer was not JSON.") from None
    hold_id = payload.get("id") or payload.get("hold_id") if isinstance(payload, dict) else None
    if not isinstance(hold_id, str) or not hold_id:
        raise HoldFailed("The platform's hold answer named no hold id.")
    return hold_id

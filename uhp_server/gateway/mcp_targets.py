"""The MCP servers a turn may reach through the gateway, and the pre-turn reachability probe."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from uhp_server.gateway.url_policy import HostNotResolved, UrlRefused, pin_url

MCP_PATH = "/gateway/mcp"  # the proxy's route: MCP_PATH/<name>
PROBE_TIMEOUT_SECONDS = 3.0
# Why a turn goes without a server, in the notice its output shows (no address in any).
NOT_RESOLVED = "could not be reached (its host name does not resolve)"
REFUSED_BY_POLICY = "is not allowed by this server's address policy"
UNREACHABLE = "could not be reached"


@dataclass(frozen=True)
class McpTarget:
    """An enabled MCP server of a harness, resolved server-side: its real URL and the
    headers (credentials included) the gateway adds. Never handed to a sandbox."""

    name: str  # sanitised, unique within the harness
    url: str
    transport: str = "http"  # "http" (Streamable HTTP) or "sse" (legacy HTTP+SSE)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    allow_private: bool = False  # UHP_MCP_ALLOW_PRIVATE_HOSTS when the turn was accepted
    # The stored credentials among the headers: redacted, in every encoding, from what the
    # server answers (gateway/scrubbing.py), so a server echoing them cannot hand them on.
    secrets: tuple[str, ...] = field(default=(), repr=False)


def mcp_path(name: str) -> str:
    return f"{MCP_PATH}/{name}"


async def probe(target: McpTarget, timeout: float = PROBE_TIMEOUT_SECONDS) -> str | None:
    """Why the turn must go without this server, or None when it can be reached.

    Checks the URL policy and opens (then closes) a TCP connection from here, which is
    where the gateway will connect from; the MCP session itself is the CLI's business."""
    try:
        pinned = await asyncio.wait_for(pin_url(target.url, target.allow_private), timeout)
    except HostNotResolved:  # (a UrlRefused: first) DNS, not the policy, is why
        return NOT_RESOLVED
    except UrlRefused:
        return REFUSED_BY_POLICY
    except TimeoutError:
        return UNREACHABLE
    parts = urlsplit(target.url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(pinned.address, port), timeout)
    except (OSError, TimeoutError):
        return UNREACHABLE
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def degraded_notice(name: str, reason: str) -> str:
    """The visible message for a server the turn runs without (no address in it)."""
    return f"MCP server '{name}' {reason}; this turn runs without its tools."

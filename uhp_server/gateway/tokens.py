"""Per-turn gateway tokens and the token usage the gateway saw pass through for each turn."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uhp_server.gateway.providers import provider_secrets
from uhp_server.gateway.scrubbing import IN_USE

TOKEN_PREFIX = "uhpgw_"
# The ASGI scope key naming the Unix socket ("door") a gateway request came through; absent
# on the server's TCP port. A grant bound to a door is honoured on that door only.
DOOR_SCOPE_KEY = "uhp.gateway_door"


@dataclass
class UsageTotals:
    """Token counts of one turn, summed over every model call the turn made.

    input_tokens counts every input token the model processed, cache reads and cache writes
    included (OpenAI already reports it so; Anthropic's parts are added up), so the cache
    counts are subsets of it and totals mean the same thing for every backend.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # a subset of output_tokens, where the provider tells it apart
    seen: bool = False  # False until an upstream reported usage: then as_uhp() is None

    def add(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cache_read_tokens += cache_read_tokens
        self.cache_write_tokens += cache_write_tokens
        self.reasoning_tokens += reasoning_tokens
        self.seen = True

    def as_uhp(self) -> dict[str, Any] | None:
        """The protocol's `usage` object, or None when no usage was ever reported."""
        if not self.seen:
            return None
        usage: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        }
        if self.cache_read_tokens:
            usage["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            usage["cache_write_tokens"] = self.cache_write_tokens
        # The detail objects OpenAI's Responses usage always carries (the `openai` SDK reads
        # `usage.input_tokens_details.cached_tokens` without a check); UHP's Usage allows
        # more properties than its own.
        usage["input_tokens_details"] = {"cached_tokens": self.cache_read_tokens}
        usage["output_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return usage


@dataclass
class TurnGrant:
    """What one turn's token allows: one backend, one model, until expires_at (monotonic),
    through one door (the turn's sandbox socket; None: only the server's TCP port)."""

    token: str = field(repr=False)
    backend: str
    model: str
    expires_at: float
    door: str | None = None
    usage: UsageTotals = field(default_factory=UsageTotals)
    revoked: bool = False
    # Between two turns of a session whose process is kept warm (engine/turns/warm.py): the
    # CLI holds the token, and every request with it is refused until the next turn resumes it.
    suspended: bool = False
    # MCP servers the turn may reach through the gateway's MCP proxy, by sanitised name
    # (gateway.mcp_targets.McpTarget: real URL and credentials, resolved server-side).
    mcp_servers: dict[str, Any] = field(default_factory=dict, repr=False)
    # Where the model calls go (gateway.providers.Provider, a per-turn connection included);
    # None: the provider named like the backend. `model` is that provider's name for it.
    provider: Any = field(default=None, repr=False)
    # The agent waits for the user (engine/turns/questions.py): its model calls are refused
    # meanwhile.
    model_paused: bool = False
    asks_user: bool = False  # the turn is offered the server's question tool
    # What the turn's agent holds of memories (engine/facade/agent_memories.TurnMemory); None:
    # no memory tools (gateway/memory_server.py).
    memory: Any = field(default=None, repr=False)
    # The provider's refusal of the turn's latest model call, in words a client may see; None
    # once a call went through. A turn its CLI reports failed while it is set failed because
    # of the provider (`provider_error`), whether or not the CLI can tell (engine/turns/
    # executor.py): a generic ACP agent's error is its own.
    provider_refusal: str | None = None
    _secrets: tuple[str, ...] = field(default=(), repr=False)

    def use(self, provider: Any) -> None:
        """Send the turn's model calls to `provider` from now on (None: to none); its key and
        header values are kept out of the log meanwhile (scrubbing.IN_USE)."""
        IN_USE.remove(self._secrets)
        self.provider = provider
        self._secrets = provider_secrets(provider)
        IN_USE.add(self._secrets)


class TokenRegistry:
    """Issues and checks per-turn tokens. In memory: tokens never outlive the server process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._grants: dict[str, TurnGrant] = {}

    def __len__(self) -> int:
        return len(self._grants)

    def issue(
        self,
        backend: str,
        model: str,
        ttl_seconds: float,
        provider: Any = None,
        door: str | None = None,
    ) -> TurnGrant:
        self._prune()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires_at = self._clock() + ttl_seconds
        grant = TurnGrant(
            token=token,
            backend=backend,
            model=model,
            expires_at=expires_at,
            door=door,
        )
        self._grants[token] = grant
        grant.use(provider)
        return grant

    def get(self, token: str, door: str | None = None) -> TurnGrant | None:
        """The live grant of `token` presented through `door`; None when unknown, revoked,
        expired or bound to another door."""
        grant = self._grants.get(token)
        if grant is None or grant.door != door or grant.suspended:
            return None
        if grant.revoked or grant.expires_at <= self._clock():
            self._grants.pop(token, None)
            grant.use(None)
            return None
        return grant

    def revoke(self, token: str) -> None:
        """Refuse the token from now on. The caller keeps the grant to read its usage; the
        provider (a per-turn connection's key) is dropped with it."""
        grant = self._grants.pop(token, None)
        if grant is not None:
            grant.revoked = True
            grant.use(None)

    def suspend(self, token: str, idle_seconds: float) -> TurnGrant | None:
        """Refuse the token while its turn's process idles, kept warm for `idle_seconds` at
        most; the grant stays (its usage read, its token the CLI's) for `resume`. The turn's
        provider (a per-turn connection's key) is dropped. None: no live grant."""
        grant = self._grants.get(token)
        if grant is None or grant.revoked:
            return None
        grant.suspended = True
        grant.use(None)
        grant.model_paused = False
        grant.expires_at = max(grant.expires_at, self._clock() + idle_seconds + 60)
        return grant

    def resume(
        self, token: str, model: str, ttl_seconds: float, provider: Any = None
    ) -> TurnGrant | None:
        """A suspended grant, live again with the next turn's limits: its model, provider and
        lifetime, fresh usage, and nothing else carried over from the last turn (MCP
        servers, questions, memory: the executor sets them as for a new grant). None: it was
        revoked or has expired meanwhile."""
        grant = self._grants.get(token)
        if grant is None or grant.revoked or not grant.suspended:
            return None
        if grant.expires_at <= self._clock():
            self.revoke(token)
            return None
        grant.suspended = False
        grant.model = model
        grant.expires_at = self._clock() + ttl_seconds
        grant.usage = UsageTotals()
        grant.provider_refusal = None
        grant.model_paused = False
        grant.asks_user = False
        grant.memory = None
        grant.mcp_servers = {}
        grant.use(provider)
        return grant

    def _prune(self) -> None:
        # Turns whose owner never revoked (a crash mid-turn) must not pile up forever.
        now = self._clock()
        for token in [t for t, g in self._grants.items() if g.expires_at <= now or g.revoked]:
            self._grants.pop(token).use(None)

"""Long-lived streams: how many one principal may hold open, and how many all of them may.

An SSE stream holds its connection for as long as its task runs, or for good (a harness's
event feed). Unchecked, one key holding as many streams as the server takes connections locks
everybody else out. So every stream a door serves (a task's events, a harness's feed, a
streamed chat completion) takes a place here first:

- one principal holds at most `per_principal` streams at once (UHP_MAX_STREAMS_PER_PRINCIPAL;
  by default a quarter of the room for streams);
- all of them together hold at most `total`: the connection cap less a reserve that only
  short requests use (`SHORT_REQUEST_ROOM`), so streams never take the last connections;
- a stream past either is refused with 429 `rate_limited` and a Retry-After, in its door's own
  error shape, before anything starts (a refused task stream starts no task).

Health and discovery answer even when every connection is taken: http/connections.py.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from uhp_server.errors import ApiError

RETRY_AFTER_SECONDS = 5
SCOPE_KEY = "uhp.streams"  # where a request finds the server's StreamLimits (in any sub-app)


def short_request_room(max_connections: int) -> int:
    """Connections streams never take: an eighth of the cap, at least 4 (at least 1 left
    for streams)."""
    return min(max(4, max_connections // 8), max_connections - 1) if max_connections > 1 else 0


class StreamLimits:
    def __init__(self, max_connections: int, per_principal: int | None = None) -> None:
        self.total = max(1, max_connections - short_request_room(max_connections))
        default = max(1, self.total // 4)
        self.per_principal = min(per_principal or default, self.total)
        self._open: collections.Counter[str] = collections.Counter()

    @property
    def open(self) -> int:
        return self._open.total()

    def open_for(self, principal: str) -> int:
        return self._open[principal]

    def take(self, principal: str) -> StreamPlace:
        """A place for one more stream of `principal`, or 429."""
        if self._open[principal] >= self.per_principal:
            raise _refused(
                f"This key already holds {self.per_principal} open streams, as many as one "
                "key may; close one, or read the task without streaming."
            )
        if self.open >= self.total:
            raise _refused("The server holds as many open streams as it serves; retry shortly.")
        self._open[principal] += 1
        return StreamPlace(self, principal)

    async def serve(self, principal: str, answer: Callable[[], Awaitable[Response]]) -> Response:
        """The stream `answer()` makes, holding a place of `principal` until it ends (none
        when it fails before its answer)."""
        place = self.take(principal)
        try:
            response = await answer()
        except BaseException:
            place.give_back()
            raise
        return HeldStream(response, place)

    def _give_back(self, principal: str) -> None:
        self._open[principal] -= 1
        if self._open[principal] <= 0:
            del self._open[principal]


class StreamPlace:
    def __init__(self, limits: StreamLimits, principal: str) -> None:
        self._limits: StreamLimits | None = limits
        self.principal = principal

    def give_back(self) -> None:
        """Once; later calls do nothing."""
        if self._limits is not None:
            self._limits._give_back(self.principal)
            self._limits = None


class HeldStream(Response):
    """A streamed answer that gives its place back when it ends, however it ends (finished,
    the client gone, the server stopping)."""

    def __init__(self, inner: Response, place: StreamPlace) -> None:
        # Not Response.__init__: the inner answer renders itself; these are what Starlette and
        # FastAPI read of a response before they call it.
        self.inner = inner
        self.place = place
        self.status_code = inner.status_code
        self.raw_headers = inner.raw_headers
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.place.give_back()


class ProvideStreamLimits:
    """Puts the server's StreamLimits in every request's scope, where the routes of every
    door find them, those of a door served as its own app included."""

    def __init__(self, app: ASGIApp, limits: StreamLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SCOPE_KEY] = self.limits
        await self.app(scope, receive, send)


def _refused(message: str) -> ApiError:
    return ApiError(429, "rate_limited", message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

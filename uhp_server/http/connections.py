"""Connections that hold a file descriptor without making progress, and a cap on how many.

uvicorn times out a keep-alive connection between requests, but nothing else: a connection
that never finishes its request head, or stops sending its body, is kept forever, and a few
thousand of them exhaust the descriptor limit (then every accept fails and asyncio logs a
traceback for each). `guarded_protocol` returns uvicorn's h11 protocol with three guards:

- the request head must be complete within `header_timeout` of its first byte (of the
  connection, for a new one): a trickle of bytes does not keep it alive;
- a request body may pause for at most `body_timeout` between chunks (unless the server
  itself stopped reading, which is flow control, not a stall);
- at most `max_connections` at once. At the cap, the connection that has waited longest for
  a request head (one that is serving nothing: a fresh idle socket or a keep-alive between
  requests) is closed to make room; when every connection is serving a request the new one
  gets `503` and is closed, unless it asks for health or discovery (`ALWAYS_ANSWERED`): an
  orchestrator that restarts a server whose liveness probe fails would otherwise kill every
  running turn because the server was busy. So such a connection is kept over the cap until
  its request line shows its path (at most `OVER_CAP_ROOM` of them, the oldest closed for a
  new one, each within the header timeout). Evictions and refusals are logged once a
  minute, with counts, not per connection. (Long-lived streams are kept below the cap per
  principal and in all: http/streams.py.)

Once a request is complete nothing here times out: long SSE streams and slow model
responses are never cut. A request h11 cannot parse gets the protocol's error envelope, and
the errors that repeat per connection are logged once a minute (`quiet_repeated_errors`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from uhp_server.errors import VENDOR, error_body, new_correlation_id
from uhp_server.http.versioning import DEFAULT_VERSION

log = logging.getLogger("uhp_server.http.connections")

OVERLOAD_LOG_INTERVAL = 60.0
# uvicorn's `backlog`, which is also how many connections asyncio accepts in one go before
# any protocol object exists to refuse one: the cap can be overshot by about twice this
# (a batch accepted, the previous batch's evicted sockets not yet closed).
ACCEPT_BATCH = 128
# Descriptors kept free of connections: SQLite, blobs, sandbox pipes, upstream sockets, and
# that overshoot.
MIN_RESERVED_FDS = 3 * ACCEPT_BATCH
# Paths answered even at the connection cap: liveness, readiness, discovery, metrics. Each is
# a short answer from memory (readiness: a few cached checks).
ALWAYS_ANSWERED = frozenset({b"/healthz", b"/readyz", b"/v1/uhp", b"/metrics"})
# Connections over the cap waiting to show their request line; within MIN_RESERVED_FDS.
OVER_CAP_ROOM = 32
LONGEST_REQUEST_LINE = 8192


def _answer(status: str, body: dict[str, object], *extra_headers: bytes) -> bytes:
    """A whole HTTP response, written straight to a connection that is then closed."""
    payload = json.dumps(body).encode()
    head = [
        b"HTTP/1.1 " + status.encode(),
        b"content-type: application/json",
        b"uhp-version: " + DEFAULT_VERSION.encode(),
        b"connection: close",
        b"content-length: " + str(len(payload)).encode(),
        *extra_headers,
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + payload


# Answered without reading a request (so without a correlation id: logged in aggregate).
_REFUSAL = _answer(
    "503 Service Unavailable",
    error_body(503, VENDOR + "overloaded", "The server is at its connection limit; retry."),
    b"retry-after: 1",
)
_TIMED_OUT = _answer(
    "408 Request Timeout",
    error_body(408, VENDOR + "request_timeout", "The request did not arrive in time."),
)


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(configured: int, fd_limit: int) -> int:
    """The configured cap, or less: a quarter of the descriptors stay free for everything
    else the server opens."""
    reserved = max(MIN_RESERVED_FDS, fd_limit // 4)
    return max(1, min(configured, fd_limit - reserved))


@dataclass
class ConnectionGuard:
    max_connections: int
    header_timeout: float
    body_timeout: float
    # Connections serving nothing, oldest first: the ones to close at the cap.
    idle: OrderedDict[GuardedH11Protocol, None] = field(default_factory=OrderedDict)
    # Connections over the cap whose request line is not read yet, oldest first.
    over_cap: OrderedDict[GuardedH11Protocol, None] = field(default_factory=OrderedDict)
    evicted: int = 0
    refused: int = 0
    last_report: float = float("-inf")

    def report_overload(self, open_connections: int) -> None:
        now = time.monotonic()
        if now - self.last_report < OVERLOAD_LOG_INTERVAL:
            return
        self.last_report = now
        log.warning(
            "connection_cap_reached",
            extra={
                "max_connections": self.max_connections,
                "open": open_connections,
                "idle_closed": self.evicted,
                "refused_503": self.refused,
                "next_report_in_seconds": OVERLOAD_LOG_INTERVAL,
            },
        )


class GuardedH11Protocol(H11Protocol):
    guard: ConnectionGuard  # bound by guarded_protocol()
    _deadline: asyncio.TimerHandle | None = None
    _request_line: bytearray | None = None  # over the cap: what came of it so far

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        if len(self.connections) > guard.max_connections and not self._make_room():
            self._wait_for_request_line()
            return
        guard.idle[self] = None
        self._arm(guard.header_timeout)

    def _wait_for_request_line(self) -> None:
        """Over the cap: kept until its request line says whether it asks for health or
        discovery; the oldest such connection makes room for a new one."""
        guard = self.guard
        if len(guard.over_cap) >= OVER_CAP_ROOM:
            oldest, _ = guard.over_cap.popitem(last=False)
            oldest._refuse()
        guard.over_cap[self] = None
        self._request_line = bytearray()
        self._arm(guard.header_timeout)

    def _refuse(self) -> None:
        guard = self.guard
        guard.over_cap.pop(self, None)
        guard.refused += 1
        guard.report_overload(len(self.connections))
        self.transport.write(_REFUSAL)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """What h11 cannot parse (a malformed request line, a NUL in a header ...) gets the
        protocol's envelope rather than uvicorn's plain text."""
        correlation_id = new_correlation_id()
        log.info(
            "request_error",
            extra={"correlation_id": correlation_id, "status": 400, "internal": msg},
        )
        body = error_body(
            400, "invalid_input", "The request is not valid HTTP.", correlation_id=correlation_id
        )
        self.transport.write(_answer("400 Bad Request", body))
        self.transport.close()

    def _make_room(self) -> bool:
        guard = self.guard
        if not guard.idle:
            return False
        oldest, _ = guard.idle.popitem(last=False)
        oldest.transport.close()
        guard.evicted += 1
        guard.report_overload(len(self.connections))
        return True

    def data_received(self, data: bytes) -> None:
        if self._request_line is not None:
            data = self._over_cap_request(data)
            if not data:
                return
        super().data_received(data)
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._deadline is None:  # the first bytes of a request on a kept-alive connection
                self._arm(self.guard.header_timeout)
            return
        self.guard.idle.pop(self, None)
        if state is h11.SEND_BODY:
            self._arm(self.guard.body_timeout)  # a body may pause, but not for long
        else:
            self._disarm()  # the request is complete: its response may take as long as it takes

    def _over_cap_request(self, data: bytes) -> bytes:
        """What of `data` to serve on a connection over the cap: all it sent once its request
        line names a path always answered; nothing while the line is incomplete, or when it
        names another (the connection is then refused)."""
        assert self._request_line is not None
        if self.transport.is_closing():  # refused already
            return b""
        self._request_line += data
        line, found, _ = bytes(self._request_line).partition(b"\r\n")
        if not found and len(self._request_line) < LONGEST_REQUEST_LINE:
            return b""
        _method, _, rest = line.partition(b" ")
        path = rest.partition(b" ")[0].partition(b"?")[0]
        if not found or path not in ALWAYS_ANSWERED:
            self._refuse()
            return b""
        self.guard.over_cap.pop(self, None)
        whole = bytes(self._request_line)
        self._request_line = None
        return whole

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.guard.idle[self] = None  # kept alive, waiting for the next request

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.idle.pop(self, None)
        self.guard.over_cap.pop(self, None)
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY and self.flow.read_paused:
            self._arm(self.guard.body_timeout)  # the server is not reading: not the client's stall
            return
        if state not in (h11.IDLE, h11.SEND_BODY):
            return
        # Between requests (IDLE), or before the app began its answer: a 408 is still valid.
        if state is h11.IDLE or not self.cycle.response_started:
            self.transport.write(_TIMED_OUT)
        self.transport.close()


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """uvicorn's `http=` protocol class, bound to one server's guard."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


class OncePerMinute(logging.Filter):
    """Lets a message through once a minute, without its traceback: asyncio logs a failed
    accept (EMFILE: out of descriptors) every time it retries, uvicorn each unparsable
    request. Others pass untouched."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message
        self.last = float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if self.message not in record.getMessage():
            return True
        now = time.monotonic()
        if now - self.last < OVERLOAD_LOG_INTERVAL:
            return False
        self.last = now
        record.exc_info = None
        record.exc_text = None
        return True


def quiet_repeated_errors() -> None:
    logging.getLogger("asyncio").addFilter(OncePerMinute("socket.accept() out of system resource"))
    logging.getLogger("uvicorn.error").addFilter(OncePerMinute("Invalid HTTP request received."))

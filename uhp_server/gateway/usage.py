"""Reads token usage out of the bytes a model call streams back, without holding them up."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from uhp_server.gateway.tokens import UsageTotals
from uhp_server.gateway.wires import ProviderApi

log = logging.getLogger(__name__)

MAX_BUFFER = 32 * 1024 * 1024  # past this one event/body is not parsed (the bytes still flow)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _raw_fields(usage: dict[str, Any]) -> dict[str, int]:
    """The provider's own counters, flattened (nested cached_tokens of either OpenAI wire)."""
    fields = {k: v for k, v in usage.items() if _int(v) is not None}
    nested = {
        "cached_tokens": ("input_tokens_details", "prompt_tokens_details"),
        "reasoning_tokens": ("output_tokens_details", "completion_tokens_details"),
    }
    for name, keys in nested.items():
        for key in keys:
            details = usage.get(key)
            if isinstance(details, dict) and (count := _int(details.get(name))) is not None:
                fields[name] = count
    return fields


class UsageExtractor:
    """Watches one upstream response and keeps `totals` (the turn's) up to date.

    Counters within one response are taken last-wins (Anthropic's message_delta and some
    OpenAI-compatible streams repeat cumulative counts), and only the change is added to the
    turn's totals, so a response is never counted twice. Usage is recorded before the bytes
    that carry it are passed on, so it is in place by the time the client reads them.
    """

    def __init__(
        self,
        api: ProviderApi,
        content_type: str,
        totals: UsageTotals,
        on_usage: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        """`api`: the provider's, which says what its counters mean (ProviderApi.usage);
        `on_usage` sees each change of this response's counters (the server's metrics)."""
        ct = content_type.split(";")[0].strip().lower()
        self._mode = (
            "sse"
            if ct == "text/event-stream"
            else "json"
            if ct == "application/json" or ct.endswith("+json")
            else None
        )
        self._api = api
        self._totals = totals
        self._on_usage = on_usage
        self._buf = bytearray()
        self._data: list[bytes] = []  # data: lines of the SSE event being read
        self._fields: dict[str, int] = {}
        self._applied: dict[str, int] = {}

    def feed(self, chunk: bytes) -> None:
        if self._mode is None:
            return
        self._buf += chunk
        if len(self._buf) > MAX_BUFFER:
            log.warning(
                "usage not read: a %s response part exceeds %d bytes", self._mode, MAX_BUFFER
            )
            self._mode = None
            self._buf = bytearray()
            return
        if self._mode == "sse":
            self._scan_lines()

    def finish(self) -> None:
        if self._mode == "json" and self._buf:
            self._handle(bytes(self._buf))
        elif self._mode == "sse":
            self._buf += b"\n\n"  # a stream may end without the blank line of its last event
            self._scan_lines()
        self._buf = bytearray()

    def _scan_lines(self) -> None:
        while (nl := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:nl]).rstrip(b"\r")
            del self._buf[: nl + 1]
            if not line:  # a blank line ends the event
                if self._data:
                    self._handle(b"\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                self._data.append(line[5:].lstrip(b" "))

    def _handle(self, payload: bytes) -> None:
        if b'"usage"' not in payload:  # cheap pre-check: most stream events carry no usage
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        usage = obj.get("usage")
        for key in ("response", "message"):  # Responses stream events, Anthropic message_start
            inner = obj.get(key)
            if not isinstance(usage, dict) and isinstance(inner, dict):
                usage = inner.get("usage")
        if isinstance(usage, dict) and (fields := _raw_fields(usage)):
            self._fields.update(fields)
            self._apply()

    def _apply(self) -> None:
        now = self._api.usage(self._fields)
        delta = {k: v - self._applied.get(k, 0) for k, v in now.items()}
        self._totals.add(**delta)
        self._applied = now
        if self._on_usage is not None:
            self._on_usage(delta)

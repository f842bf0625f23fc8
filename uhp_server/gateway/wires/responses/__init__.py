"""The Responses API (Codex): its `Wire` object, and its calls carried over Chat Completions."""

from uhp_server.gateway.wires.responses.wire import WIRE

__all__ = ["WIRE"]

"""The Gemini API (Gemini CLI): its `Wire` object, and its calls carried over Chat
Completions."""

from uhp_server.gateway.wires.gemini.wire import WIRE

__all__ = ["WIRE"]

"""Chat Completions: its `Wire` object, and what every translation to Chat shares (the
messages it builds, the answers it reads, the streams it turns into another wire's)."""

from uhp_server.gateway.wires.chat.wire import WIRE

__all__ = ["WIRE"]

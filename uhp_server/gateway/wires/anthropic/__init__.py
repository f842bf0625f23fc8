"""Anthropic Messages (Claude Code): its `Wire` object, how a provider of it is called, and
its calls carried over Chat Completions."""

from uhp_server.gateway.wires.anthropic.wire import WIRE

__all__ = ["WIRE"]

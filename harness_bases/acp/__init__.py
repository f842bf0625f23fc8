"""The Agent Client Protocol (ACP) client every ACP base shares.

ACP is JSON-RPC 2.0 over the agent's stdio: `initialize`, `session/new` or `session/load`,
`session/prompt`, `session/update` notifications while the turn runs, `session/cancel` to
stop it, and the agent's own requests (`session/request_permission`). An ACP base subclasses
`AcpBase` and supplies its install, its config (`prepare`) and its quirks (hooks on
`AcpBase`, a subclass of `AcpParser`); the conversation itself is `AcpTurn`'s.
"""

from harness_bases.acp.base import AcpBase
from harness_bases.acp.driver import AcpTurn
from harness_bases.acp.parser import AcpParser

__all__ = ["AcpBase", "AcpParser", "AcpTurn"]

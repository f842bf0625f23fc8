"""The `acp` base: any agent that speaks the Agent Client Protocol on stdio, named by its
harness (docs/acp.md), driven by the shared ACP driver."""

from harness_bases.acp_generic.base import AcpGenericBase

__all__ = ["AcpGenericBase"]

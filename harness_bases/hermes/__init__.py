"""The Hermes base: Hermes Agent's ACP server (`hermes acp`) driven over JSON-RPC on stdio."""

from harness_bases.hermes.base import HermesBase

__all__ = ["HermesBase"]

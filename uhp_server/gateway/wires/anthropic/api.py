"""A provider of Anthropic Messages, as the gateway calls it."""

from __future__ import annotations

from collections.abc import Mapping

ANTHROPIC_VERSION = "2023-06-01"


def anthropic_root(base_url: str) -> str:
    # ANTHROPIC_BASE_URL conventionally omits /v1 (the SDK appends it); accept both.
    root = base_url.strip().rstrip("/")
    return root if root.endswith("/v1") else f"{root}/v1"


class AnthropicApi:
    """Calls on any other wire reach it as Anthropic Messages: it serves nothing else."""

    other_wires_as = "anthropic"
    version_headers: Mapping[str, str] = {"anthropic-version": ANTHROPIC_VERSION}
    models_query: Mapping[str, str] = {"limit": "1000"}  # Anthropic pages 20 at a time

    def root(self, base_url: str) -> str:
        return anthropic_root(base_url)

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def usage(self, counters: Mapping[str, int]) -> dict[str, int]:
        # Anthropic's input_tokens excludes cache reads and writes; UHP's includes them.
        read = counters.get("cache_read_input_tokens", 0)
        write = counters.get("cache_creation_input_tokens", 0)
        return {
            "input_tokens": counters.get("input_tokens", 0) + read + write,
            "output_tokens": counters.get("output_tokens", 0),
            "cache_read_tokens": read,
            "cache_write_tokens": write,
        }

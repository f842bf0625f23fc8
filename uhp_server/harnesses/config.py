"""A harness's configuration as the engine reads it: one typed object, not a camelCase dict.

The harness row keeps the configuration as the JSON object the Harnesses chapter defines
(camelCase keys, as `GET /v1/harnesses/{id}` shows them), so rows written by any earlier
version read back unchanged; `from_stored` and `stored` are the only two places that know
those keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The stored key of each field (as on the wire: camelCase, Harnesses §2).
STORED_KEYS = {
    "default_model": "defaultModel",
    "system_prompt": "systemPrompt",
    "mcp_servers": "mcpServers",
    "skills": "skills",
    "plugins": "plugins",
    "disabled_tools": "disabledTools",
    "max_step": "maxStep",
    "timeout_seconds": "timeoutSeconds",
    "environment": "environment",
    # This server's extension (vendor-prefixed): what the base itself takes from the harness
    # (the `acp` base: the agent's command line); null for a base that takes none.
    "base_config": "uhpserver_baseConfig",
    # This server's extension: how long a session's CLI process stays warm after a completed
    # turn, for its next one (engine/turns/warm.py); absent or 0: never.
    "keep_warm_seconds": "uhpserver_keepWarmSeconds",
}
BASE_CONFIG_FIELD = STORED_KEYS["base_config"]
KEEP_WARM_FIELD = STORED_KEYS["keep_warm_seconds"]


@dataclass(frozen=True)
class HarnessConfig:
    """What a harness configures. `mcp_servers`, `skills` and `plugins` are their stored
    entries: MCP servers with credential references only (harnesses/mcp.py), skills as
    handles of bundles kept out of line (harnesses/skills.py), plugins as handles of packages
    with what was derived from them (harnesses/plugins/install.py)."""

    default_model: str | None = None
    system_prompt: str = ""
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    skills: list[dict[str, Any]] = field(default_factory=list)
    plugins: list[dict[str, Any]] = field(default_factory=list)
    disabled_tools: list[str] = field(default_factory=list)
    max_step: int | None = None
    timeout_seconds: int | None = None
    environment: str | None = None  # the environment its tasks read (Environments §5)
    base_config: dict[str, Any] | None = None  # the base's own (HarnessBase.parse_base_config)
    keep_warm_seconds: int = 0  # `uhpserver_keepWarmSeconds`; 0: off

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> HarnessConfig:
        """The configuration a harness row keeps (camelCase keys; absent keys default)."""
        present = {
            name: stored[key]
            for name, key in STORED_KEYS.items()
            if key in stored and stored[key] is not None
        }
        default_model = present.get("default_model")
        if not isinstance(default_model, str) or not default_model:
            present.pop("default_model", None)
        return cls(**present)

    def stored(self) -> dict[str, Any]:
        """The JSON object a harness row keeps."""
        stored = {key: getattr(self, name) for name, key in STORED_KEYS.items()}
        if self.base_config is None:  # rows of bases that take none stay as they were
            del stored[BASE_CONFIG_FIELD]
        if not self.keep_warm_seconds:  # nor do rows of harnesses that keep nothing warm
            del stored[KEEP_WARM_FIELD]
        return stored

    @property
    def has_own_parts(self) -> bool:
        """Whether it names skills, MCP servers or plugins (beyond the built-in skills)."""
        return bool(self.skills or self.mcp_servers or self.plugins)

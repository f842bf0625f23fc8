"""The `acp` base's folder under the tools folder, and the two agents it is tested with.

The base runs whatever agent a harness names, so it has no CLI of its own: what it installs is
the place agents live, `<tools>/acp-agents/` (mounted read-only in every sandbox at
`/opt/uhp-tools/acp-agents/`), whose `bin/` leads the agent's PATH, and the pinned node that
node agents run on (its bin is on that PATH too, so an npm package's `#!/usr/bin/env node`
starts on it, not on the system's node). With them, pinned, the two ACP agents that have no
base of their own and that the tests run on it:

- `claude-code-acp` (npm `@zed-industries/claude-code-acp`): Claude Code through the Claude
  Agent SDK, reaching the model at ANTHROPIC_BASE_URL;
- `codex-acp` (npm `@zed-industries/codex-acp`): Codex, with a custom model provider given on
  its command line (`-c model_providers…`).

Anyone's agent goes the same way: `npm install --prefix <tools>/acp-agents/<name>/<version>
<package>@<version>`, then a link in `<tools>/acp-agents/bin/` (docs/acp.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness_bases import node_runtime
from harness_bases.installing import npm_install

FOLDER = "acp-agents"
BIN = "bin"
INSTALL_TIMEOUT = 600.0


class AcpAgentInstallError(RuntimeError):
    """A pinned test agent could not be installed."""


@dataclass(frozen=True)
class PinnedAgent:
    """An ACP agent installed from npm under `acp-agents/<command>/<version>`, its program
    linked as `acp-agents/bin/<command>`."""

    command: str
    package: str
    version: str
    program: str  # under the prefix's node_modules

    def prefix(self, tools_root: str) -> str:
        return f"{tools_root}/{FOLDER}/{self.command}/{self.version}"

    def program_path(self, tools_root: str) -> str:
        return f"{self.prefix(tools_root)}/node_modules/{self.program}"


def _native(package: str, program: str) -> str:
    """A native program in the per-platform package npm installs beside `package`."""
    arch = node_runtime.package().removeprefix("node-linux-")
    return f"{package}-linux-{arch}/bin/{program}"


CLAUDE_CODE_ACP = PinnedAgent(
    "claude-code-acp",
    "@zed-industries/claude-code-acp",
    "0.16.2",
    "@zed-industries/claude-code-acp/dist/index.js",
)
# The native binary itself, not the package's node launcher (which would sit between us and
# it, one more process to signal).
CODEX_ACP = PinnedAgent(
    "codex-acp",
    "@zed-industries/codex-acp",
    "0.16.0",
    _native("@zed-industries/codex-acp", "codex-acp"),
)
TEST_AGENTS = (CLAUDE_CODE_ACP, CODEX_ACP)


def bin_dir(tools_root: str) -> str:
    return f"{tools_root}/{FOLDER}/{BIN}"


def agent_path(tools_root: str) -> str:
    """The PATH an agent starts with, before the system's folders."""
    node_bin = str(Path(node_runtime.node_path(tools_root)).parent)
    return f"{bin_dir(tools_root)}:{node_bin}"


def installed(tools_dir: Path) -> bool:
    """The folder, the pinned node and every test agent are there."""
    root = str(tools_dir)
    return (
        Path(bin_dir(root)).is_dir()
        and node_runtime.installed_version(tools_dir) == node_runtime.NODE_VERSION
        and all(_linked(agent, root) for agent in TEST_AGENTS)
    )


def _linked(agent: PinnedAgent, root: str) -> bool:
    link = Path(bin_dir(root)) / agent.command
    return Path(agent.program_path(root)).is_file() and os.path.realpath(link) == os.path.realpath(
        agent.program_path(root)
    )


def install(tools_dir: Path) -> None:
    """The folder, the pinned node and the test agents (idempotent)."""
    root = str(tools_dir)
    Path(bin_dir(root)).mkdir(parents=True, exist_ok=True)
    node_runtime.install(tools_dir)
    for agent in TEST_AGENTS:
        if not Path(agent.program_path(root)).is_file():
            npm_install(
                Path(agent.prefix(root)),
                agent.package,
                agent.version,
                label=agent.command,
                timeout=INSTALL_TIMEOUT,
                error=AcpAgentInstallError,
            )
        program = Path(agent.program_path(root))
        if not program.is_file():
            raise AcpAgentInstallError(f"{agent.package}@{agent.version}: {program} is missing")
        link = Path(bin_dir(root)) / agent.command
        if link.is_symlink() or link.exists():
            link.unlink()
        # Relative, so that it resolves alike on the host and at /opt/uhp-tools inside.
        link.symlink_to(os.path.relpath(program, link.parent))

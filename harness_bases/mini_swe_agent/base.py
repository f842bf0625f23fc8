"""MiniSweAgentBase: mini-swe-agent (`mini-swe-agent`, PyPI) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import (
    SYSTEM_PATH,
    CliPin,
    Enforcement,
    HarnessBase,
    Invocation,
    Process,
    TurnSpec,
)
from harness_bases.json_lines import PromptedTurn
from harness_bases.mini_swe_agent import config
from harness_bases.mini_swe_agent import install as installer
from harness_bases.mini_swe_agent.driver import TURN_ENV
from harness_bases.mini_swe_agent.parser import MiniParser
from harness_bases.python_start import python_argv


class MiniSweAgentBase(HarnessBase):
    name = "mini-swe-agent"
    label = "mini-swe-agent"
    backend = "openai"
    wire = "chat"  # litellm's OpenAI provider: Chat Completions at the gateway
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("pypi", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (config.HOME_DIR,)
    conversation_paths = (f"{config.HOME_DIR}/{config.SESSIONS_DIR}",)
    runtime_packages = ("python3",)  # its venv runs on Debian's python3
    host_packages = ("python3-venv",)
    # Its one tool is `bash`: disabled, the model is offered no tool at all (driver.py), so a
    # call to it cannot happen. No step limit of its own here: the engine counts the calls.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # mini-swe-agent has no MCP client: MCP servers are refused for it at configuration, and
    # the agent asks its questions in its final text.
    mcp_transports = ()
    honours_max_output_tokens = True
    # Opt-in until the lead adds it to CI's default set (issue 30): UHP_BASES must name it.
    enabled_by_default = False

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        files = config.write_turn_files(turn)
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            TURN_ENV: files.turn_file,
            config.TOKEN_ENV: turn.gateway_token,
            "MSWEA_GLOBAL_CONFIG_DIR": f"{files.home_dir}/{config.CONFIG_DIR}",
            **installer.QUIET_ENV,
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = python_argv(
            installer.python_path(turn.paths.tools), installer.driver_path(turn.paths.tools)
        )
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def start_turn(self, proc: Process, turn: TurnSpec) -> PromptedTurn:
        return PromptedTurn(proc, turn.prompt, MiniParser(), name="mini_swe_agent")

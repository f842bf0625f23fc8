"""Starts OpenHands CLI's ACP server for an unattended client: UHP Server's `openhands` base
runs this file with the private Python the CLI is installed in, inside the sandbox. It imports
nothing from the server.

The pinned ACP server (`openhands acp`) reads its model only from
`~/.openhands/agent_settings.json`, a file that would hold the key, and takes no flag for
streaming or for leaving out the security analyzer. What this launcher changes, each for a
client nobody sits at, without touching the agent's loop:

- the agent of every session, new or loaded, is built from this turn's file (its path in
  `UHP_OPENHANDS_TURN`, written by the base): the gateway the only model endpoint, the key read
  from the variable the file names (the turn token: in no file), the MCP servers with their
  bearer tokens read from the environment too (on `session/load` the pinned server would drop
  them), the disabled tools filtered out of what the model is offered, the system prompt as
  the system message's suffix, user skills from `~/.openhands/skills`, nothing fetched (public
  skills, a critic);
- model calls stream (text and reasoning deltas) and always go to Chat Completions (the SDK
  picks the Responses API for some model names; the base speaks Chat);
- every action runs without a question and without the LLM security analyzer, which would
  refuse a call without its `security_risk` argument (the sandbox is the boundary);
- a tool call is announced once it is whole, with its tool's name in `_meta.toolName`;
- the system prompt is not sent back as a thought;
- a prompt stopped by `session/cancel` answers `cancelled`, as ACP says (it answered
  `end_turn`), and `session/load` of a conversation that is not there is an error, not a new
  empty one;
- the credentials leave the environment before any tool runs (its terminal inherits it);
- stdin takes a message of any size a prompt makes (the pinned reader stops at 64 KiB), and
  the process ends once stdin closes;
- the terminal keeps the prompt a finished command left when it clears its output for the
  next one. The pinned terminal looks for the prompt's markers with `\n` line ends in output
  that has the pty's `\r\n`, never finds them, so it drops everything and presses Enter
  for a fresh prompt; that prompt could come back after the next command was sent and before
  its echo, and end it at once with no output (two calls in one reply: the second came back
  empty on a busy machine).

`--version` prints the installed CLI's version, once its ACP server's module is found.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

TURN_ENV = "UHP_OPENHANDS_TURN"
PACKAGE = "openhands"
# The ACP server's module, found without importing it (that imports the whole SDK).
ACP_MODULE = ("openhands_cli", "acp_impl/agent/local_agent.py")
TOOL_NAME_META = "toolName"
# One JSON-RPC message is one stdin line: a long prompt or an image is one line of megabytes
# (asyncio's reader stops at 64 KiB by default).
STDIN_LINE_LIMIT = 256 * 1024 * 1024
PROVIDER_ERROR = "providerError"  # in a failed prompt's error data: the provider's message
# "litellm.BadRequestError: OpenAIException - <the provider's message>"
_LITELLM_PREFIX = re.compile(r"^(?:litellm\.)?\w+Error: (?:\w+Exception - )?")
TERMINAL = "subprocess"
# What a plugin's stdio server is given of this process's environment beyond the MCP client's
# default one (harness_bases/plugin_launcher.py keeps these too).
STDIO_LOCALE = ("LANG", "LC_ALL", "TZ")


def _turn() -> dict[str, Any]:
    turn: dict[str, Any] = json.loads(Path(os.environ[TURN_ENV]).read_text(encoding="utf-8"))
    return turn


def _take_secrets(turn: dict[str, Any]) -> dict[str, str]:
    """Every credential the turn names, read once; then every UHP_ variable leaves the
    environment, so the agent's commands never see one."""
    names = [turn["token_env"], *(server["token_env"] for server in turn["mcp_servers"])]
    found = {name: os.environ.get(name, "") for name in names}
    for name in list(os.environ):
        if name.startswith("UHP_"):
            del os.environ[name]
    return found


def mcp_config(turn: dict[str, Any], secrets: dict[str, str]) -> dict[str, Any]:
    """The agent's MCP configuration: the gateway's proxy routes with the turn's bearer
    tokens, and the plugins' stdio servers (the plugin launcher's command line)."""
    servers: dict[str, Any] = {}
    for server in turn["mcp_servers"]:
        servers[server["name"]] = {
            "url": server["url"],
            "transport": server["transport"],
            "headers": {"Authorization": f"Bearer {secrets[server['token_env']]}"},
        }
    # The MCP client starts a stdio server with its own short default environment (HOME, PATH,
    # TERM, USER...), which leaves the locale out: without it a Python server's interpreter
    # coerces the C locale and sets LC_CTYPE itself. The plugin launcher keeps these.
    locale = {name: os.environ[name] for name in STDIO_LOCALE if name in os.environ}
    for server in turn["stdio_servers"]:
        servers[server["name"]] = {
            "command": server["command"],
            "args": server["args"],
            "transport": "stdio",
            **({"env": locale} if locale else {}),
        }
    return {"mcpServers": servers} if servers else {}


def tools_filter(disabled: list[str]) -> str | None:
    """A regex every offered tool's name must match: none of the disabled ones. (The tools
    stay in the agent's list: a loaded conversation refuses one that was removed.)"""
    if not disabled:
        return None
    names = "|".join(re.escape(name) for name in disabled)
    return f"^(?!(?:{names})$)"


def provider_message(exc: BaseException) -> str | None:
    """The provider's own message when a model call failed somewhere in `exc`'s chain (an
    exception of LiteLLM's or of the SDK's LLM layer), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__
        if module.split(".")[0] == "litellm" or module.startswith("openhands.sdk.llm"):
            text = str(current).strip().splitlines()
            return _LITELLM_PREFIX.sub("", text[0]).strip() if text else ""
        current = current.__cause__ or current.__context__
    return None


def _agent_builder(turn: dict[str, Any], secrets: dict[str, str]) -> Callable[..., Any]:
    from openhands.sdk import LLM, Agent, AgentContext, Tool
    from openhands_cli.stores.agent_store import get_persisted_conversation_tools
    from openhands_cli.utils import get_default_cli_tools

    def default_tools() -> list[Any]:
        # Commands run as this process's children, not in a tmux server of their own.
        return [
            Tool(name=tool.name, params={"terminal_type": TERMINAL})
            if tool.name == "terminal"
            else tool
            for tool in get_default_cli_tools()
        ]

    def build(
        conversation_id: str | None = None,
        mcp_servers: dict[str, dict[str, Any]] | None = None,
        skills: list[Any] | None = None,
        **_: Any,
    ) -> Any:
        llm = LLM(
            model=f"openai/{turn['model']}",
            base_url=turn["base_url"],
            api_key=secrets[turn["token_env"]],
            usage_id="agent",
            num_retries=2,
            max_output_tokens=turn.get("max_output_tokens"),
        )
        context = AgentContext(
            skills=list(skills or []),
            # With each user message, not in the system message: a loaded conversation keeps
            # the system message it started with, and each turn follows its own instructions.
            user_message_suffix=turn.get("instructions") or None,
            load_user_skills=True,
            load_public_skills=False,
        )
        persisted = conversation_id and get_persisted_conversation_tools(conversation_id)
        return Agent(
            llm=llm,
            tools=persisted or default_tools(),
            system_prompt_kwargs={"cli_mode": True},
            mcp_config=mcp_config(turn, secrets),
            filter_tools_regex=tools_filter(turn["disabled_tools"]),
            agent_context=context,
        )

    return build


def _patch_agent(turn: dict[str, Any], secrets: dict[str, str]) -> None:
    from acp import PromptResponse, RequestError
    from openhands.sdk import LLM
    from openhands.sdk.security.confirmation_policy import NeverConfirm
    from openhands_cli.acp_impl.agent import base_agent, local_agent
    from openhands_cli.locations import get_conversations_dir

    local_agent.load_agent_specs = _agent_builder(turn, secrets)
    LLM.uses_responses_api = lambda self: False

    def approve_everything(conversation: Any, mode: str, session_id: str) -> None:
        conversation.set_security_analyzer(None)
        conversation.set_confirmation_policy(NeverConfirm())

    local_agent.apply_confirmation_mode_to_conversation = approve_everything

    original_run = base_agent.run_conversation_with_confirmation

    async def run(conversation: Any, conn: Any, session_id: str) -> None:
        # A failed run is the prompt's error, not also a message chunk "Error: <the SDK's
        # text, with the conversation's folder>" (the pinned prompt sends one for any other
        # exception); a provider's refusal carries the provider's own message.
        try:
            await original_run(conversation=conversation, conn=conn, session_id=session_id)
        except Exception as exc:
            data: dict[str, Any] = {"reason": "Failed to process prompt"}
            provider = provider_message(exc)
            if provider is not None:
                data[PROVIDER_ERROR] = provider
            raise RequestError.internal_error(data) from exc

    base_agent.run_conversation_with_confirmation = run

    agent_class = local_agent.LocalOpenHandsACPAgent
    original_load = agent_class.load_session
    original_prompt = base_agent.BaseOpenHandsACPAgent.prompt
    stops: dict[str, asyncio.Event] = {}

    async def load_session(self: Any, cwd: str, session_id: str, **kw: Any) -> Any:
        folder = Path(get_conversations_dir()) / session_id.replace("-", "")
        if not (folder / "base_state.json").is_file():
            raise RequestError.resource_not_found(session_id)
        return await original_load(self, cwd=cwd, session_id=session_id, **kw)

    async def cancel(self: Any, session_id: str, **kw: Any) -> None:
        # The prompt answers now. The pinned cancel pauses the conversation on this thread,
        # which waits for the state lock a step in flight holds (a whole model call or
        # command); the pause stops it at its next step.
        stops.setdefault(session_id, asyncio.Event()).set()
        conversation = self.active_sessions.get(session_id)
        if conversation is not None:
            await asyncio.to_thread(conversation.pause)

    async def prompt(self: Any, prompt: list[Any], session_id: str, **kw: Any) -> Any:
        stop = stops[session_id] = asyncio.Event()
        running = asyncio.ensure_future(
            original_prompt(self, prompt=prompt, session_id=session_id, **kw)
        )
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():  # answered at once, `cancelled` as ACP says (it said `end_turn`)
            return PromptResponse(stop_reason="cancelled")
        stopped.cancel()
        return running.result()

    agent_class.load_session = load_session
    agent_class.cancel = cancel
    agent_class.prompt = prompt


def _patch_events() -> None:
    from acp import start_tool_call
    from openhands.sdk.tool.builtins import FinishAction, ThinkAction
    from openhands_cli.acp_impl.events import shared_event_handler, token_streamer
    from openhands_cli.acp_impl.events.utils import (
        extract_action_locations,
        format_content_blocks,
        get_tool_kind,
        get_tool_title,
    )

    handler = shared_event_handler.SharedEventHandler
    original_action = handler.handle_action_event

    async def no_system_prompt(self: Any, ctx: Any, event: Any) -> None:
        return None

    async def action(self: Any, ctx: Any, event: Any) -> None:
        if event.action is None or isinstance(event.action, (ThinkAction, FinishAction)):
            await original_action(self, ctx, event)
            return
        update = start_tool_call(
            tool_call_id=event.tool_call_id,
            title=get_tool_title(tool_name=event.tool_name, action=event.action),
            kind=get_tool_kind(tool_name=event.tool_name, action=event.action),
            status="in_progress",
            content=format_content_blocks(shared_event_handler._event_visualize_to_plain(event)),
            locations=extract_action_locations(event.action),
            raw_input=event.action.model_dump(),
        )
        update.field_meta = {TOOL_NAME_META: event.tool_name}
        await ctx.conn.session_update(session_id=ctx.session_id, update=update)

    handler.handle_system_prompt = no_system_prompt
    handler.handle_action_event = action
    # A call is announced once whole (above), not while its arguments stream.
    subscriber = token_streamer.TokenBasedEventSubscriber
    subscriber._handle_tool_call_streaming = lambda self, tool_call: None
    token_streamer.REASONING_HEADER = ""  # "**Reasoning**:" before the model's own words


async def _serve() -> None:
    """The pinned `run_acp_server` (local agent, every action approved, streaming), ending
    once stdin closes (it would wait forever)."""
    from acp import stdio_streams
    from acp.core import AgentSideConnection
    from openhands_cli.acp_impl.agent.local_agent import LocalOpenHandsACPAgent

    reader, writer = await stdio_streams(limit=STDIN_LINE_LIMIT)

    def agent(conn: Any) -> Any:
        return LocalOpenHandsACPAgent(conn, "always-approve", None, True)

    connection = AgentSideConnection(agent, writer, reader, listening=False)
    await connection.listen()
    await writer.drain()


def _patch_terminal() -> None:
    from openhands.tools.terminal.constants import CMD_OUTPUT_PS1_BEGIN, CMD_OUTPUT_PS1_END
    from openhands.tools.terminal.terminal.subprocess_terminal import SubprocessTerminal

    clear = SubprocessTerminal.clear_screen

    def clear_keeping_the_prompt(self: Any) -> None:
        if self._initialized:
            with self.output_lock:
                data = "".join(self.output_buffer).replace("\r", "")
                start = data.rfind(CMD_OUTPUT_PS1_BEGIN)
                if start != -1 and data.rfind(CMD_OUTPUT_PS1_END) >= start:
                    self.output_buffer.clear()
                    self.output_buffer.append(data[start:])
                    return
        clear(self)  # no whole prompt to keep: cleared, and the shell asked for one

    SubprocessTerminal.clear_screen = clear_keeping_the_prompt


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        package, module = ACP_MODULE
        spec = importlib.util.find_spec(package)
        if spec is None or not (Path(str(spec.origin)).parent / module).is_file():
            sys.exit(f"{package}/{module} is not installed")
        print(version(PACKAGE))
        return
    turn = _turn()
    secrets = _take_secrets(turn)
    _patch_agent(turn, secrets)
    _patch_events()
    _patch_terminal()
    asyncio.run(_serve())
    sys.stdout.flush()
    os._exit(0)  # the conversation's threads (a model call, a command) end with us


if __name__ == "__main__":
    main()

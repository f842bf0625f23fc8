"""Starts Hermes' own ACP server (what `hermes acp` runs) for an unattended client.

This file is copied next to Hermes' virtual environment at install time and run with that
environment's Python inside the sandbox; it imports nothing from UHP Server. Hermes' agent
loop, tools and transcript are untouched. What changes is only what the pinned ACP adapter
(hermes-agent 0.19.0) leaves out or gets wrong for a client nobody is sitting at:

1. The turn's verdict. `session/prompt` answers `end_turn` even when Hermes reports the turn
   failed, and sends the error summary as if it were the answer (upstream issue #89948).
   Hermes' own verdict goes in the answer's `_meta.hermes` instead (the shape of upstream's
   fix, #89949), and the error summary is not sent as assistant text. The transcript gets
   the summary as the failed turn's reply, so the next prompt is not folded together with
   the failed one (which would re-run a request the client saw fail).
2. Tool calls as data. The adapter renders tool calls for an editor (titles, markdown); the
   tool's name, its arguments and its raw result are added in ACP's own `rawInput` and
   `rawOutput` fields and `_meta.hermes.toolName`.
3. This turn's config.yaml governs every agent. The adapter builds agents with a fixed limit
   of 90 model calls and, on `session/load`, with the provider URL and model recorded in the
   transcript (the gateway URL of an earlier turn). Here every agent takes the model,
   provider and `agent.max_turns` from config.yaml, and the standing instructions from
   `UHP_INSTRUCTIONS_FILE` as Hermes' ephemeral system prompt.
4. MCP status. `session/new` and `session/load` answers carry Hermes' `get_mcp_status()` in
   `_meta.hermes.mcpServers`, so a server that failed to connect can be reported.
5. Secrets. The turn's credentials (every `UHP_*` variable) never reach tool subprocesses.
6. No slash commands: every prompt is the user's message to the model.
7. A quick exit once stdin closes (Hermes' exit hooks run; the interpreter's slow teardown
   does not).
8. Questions. The adapter leaves Hermes' own question tool, `clarify`, out of its toolset
   and gives it no callback ("Clarify tool is not available in this execution context").
   With `UHP_CLARIFY=1` (someone can answer) the toolset has it, and its callback asks the
   client with the ACP extension request `_uhp/clarify` ({sessionId, question, choices})
   and gives Hermes the `answer` of the reply as the user's response. Without it, nothing
   changes.

`--version` prints the Hermes version once the ACP adapter imports, and nothing else.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sys
from typing import Any

SECRET_PREFIX = "UHP_"
INSTRUCTIONS_ENV = "UHP_INSTRUCTIONS_FILE"
CLARIFY_ENV = "UHP_CLARIFY"  # "1": offer `clarify`, answered by the client
CLARIFY_METHOD = "uhp/clarify"  # an ACP extension method: `_uhp/clarify` on the wire
CLARIFY_TOOLSET = "clarify"
MCP_STATUS_KEYS = ("name", "status", "error", "tools")


def _meta(existing: dict[str, Any] | None, **hermes: Any) -> dict[str, Any]:
    """`existing` _meta with `hermes` merged into its `hermes` entry."""
    meta = dict(existing or {})
    meta["hermes"] = {**(meta.get("hermes") or {}), **hermes}
    return meta


def _hide_secrets_from_tools() -> None:
    """Tool subprocesses get Hermes' sanitised environment; drop our credentials there too."""
    from tools.environments import local

    is_secret = local._is_hermes_internal_secret

    def is_internal_secret(key: str) -> bool:
        return key.upper().startswith(SECRET_PREFIX) or is_secret(key)

    local._is_hermes_internal_secret = is_internal_secret


def _add_raw_tool_data() -> None:
    """Put the tool's name, arguments and raw result on the ACP tool-call updates."""
    from acp_adapter import events

    build_start, build_complete = events.build_tool_start, events.build_tool_complete

    def tool_start(tool_call_id: str, tool_name: str, arguments: Any, **kwargs: Any) -> Any:
        update = build_start(tool_call_id, tool_name, arguments, **kwargs)
        update.raw_input = arguments
        update.field_meta = _meta(update.field_meta, toolName=tool_name)
        return update

    def tool_complete(tool_call_id: str, tool_name: str, result: Any = None, **kwargs: Any) -> Any:
        update = build_complete(tool_call_id, tool_name, result=result, **kwargs)
        update.raw_output = result
        update.field_meta = _meta(update.field_meta, toolName=tool_name)
        return update

    events.build_tool_start = tool_start
    events.build_tool_complete = tool_complete


def _instructions() -> str | None:
    path = os.environ.get(INSTRUCTIONS_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def _clarify_wanted() -> bool:
    return os.environ.get(CLARIFY_ENV) == "1"


def _offer_clarify() -> None:
    """Every agent the adapter makes gets the `clarify` toolset too."""
    from acp_adapter import session

    expand = session._expand_acp_enabled_toolsets

    def with_clarify(*args: Any, **kwargs: Any) -> list[str]:
        toolsets = expand(*args, **kwargs)
        return toolsets if CLARIFY_TOOLSET in toolsets else [*toolsets, CLARIFY_TOOLSET]

    session._expand_acp_enabled_toolsets = with_clarify


def _clarify_callback(conn: Any, loop: Any, session_id: str) -> Any:
    """Hermes' clarify callback (called on the agent's worker thread): ask the client and
    wait for its answer, however long the user takes (the client ends the process when
    nobody will answer). An error reply becomes the tool's error result."""

    def ask(question: str, choices: list[str] | None) -> str:
        params = {"sessionId": session_id, "question": question, "choices": choices or []}
        request = conn.ext_method(CLARIFY_METHOD, params)
        reply = asyncio.run_coroutine_threadsafe(request, loop).result()
        return str((reply or {}).get("answer") or "")

    return ask


def _session_manager_class() -> type:
    from acp_adapter.session import SessionManager

    class ConfiguredSessionManager(SessionManager):
        """Every agent follows this turn's config.yaml, never what the transcript recorded."""

        def _make_agent(self, *, session_id: str, cwd: str, **_recorded: Any) -> Any:
            from hermes_cli.config import load_config

            agent = super()._make_agent(session_id=session_id, cwd=cwd)
            max_turns = (load_config().get("agent") or {}).get("max_turns")
            if isinstance(max_turns, int) and max_turns > 0:
                agent.max_iterations = max_turns
                agent.iteration_budget.max_total = max_turns
            agent.ephemeral_system_prompt = _instructions()
            return agent

    return ConfiguredSessionManager


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    """Hermes' own account of how the turn ended."""
    verdict = {
        "failed": bool(result.get("failed")),
        "completed": bool(result.get("completed")),
        "interrupted": bool(result.get("interrupted")),
        "turnExitReason": str(result.get("turn_exit_reason") or ""),
        "apiCalls": result.get("api_calls"),
    }
    if result.get("error"):
        verdict["error"] = str(result["error"])[:2000]
    if result.get("failure_reason"):
        verdict["failureReason"] = str(result["failure_reason"])
    return verdict


def _close_failed_turn(agent: Any, result: dict[str, Any], history: Any) -> None:
    """End the failed turn in the transcript with Hermes' error summary as the reply.

    Hermes keeps a failed prompt unanswered and folds it into the next one, so the next
    task would silently re-run the failed request. Hermes itself closes some failed turns
    this way ("avoids consecutive user messages")."""
    messages = result.get("messages")
    if not isinstance(messages, list) or not messages:
        return
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return
    summary = str(result.get("final_response") or result.get("error") or "The request failed.")
    messages.append({"role": "assistant", "content": summary})
    # Hermes already stored the prompt; this stores the reply after it.
    with contextlib.suppress(Exception):
        agent._flush_messages_to_session_db(messages, history)


def _record_verdict(agent: Any, verdict: dict[str, Any]) -> None:
    """Wrap this agent's next run so its result lands in `verdict`."""
    run = type(agent).run_conversation.__get__(agent)  # the class's, so wraps never nest

    def recorded(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            result = run(*args, **kwargs)
        except Exception as exc:  # the adapter would send "Error: ..." as the answer
            verdict.update(failed=True, crashed=True, error=f"{type(exc).__name__}: {exc}")
            return {"final_response": ""}
        verdict.update(_verdict(result))
        if result.get("failed"):
            _close_failed_turn(agent, result, kwargs.get("conversation_history"))
            # The error summary is the verdict's, not an answer from the model.
            result = {**result, "final_response": ""}
        return result

    agent.run_conversation = recorded


def _mcp_status() -> list[dict[str, Any]]:
    try:
        from tools.mcp_tool import get_mcp_status

        return [
            {key: entry[key] for key in MCP_STATUS_KEYS if key in entry}
            for entry in get_mcp_status()
        ]
    except Exception:
        return []


def _agent_class() -> type:
    from acp_adapter.server import HermesACPAgent

    manager_class = _session_manager_class()

    class UnattendedACPAgent(HermesACPAgent):
        def __init__(self, session_manager: Any = None) -> None:
            super().__init__(session_manager=session_manager or manager_class())

        def _handle_slash_command(self, text: str, state: Any) -> str | None:
            return None  # a prompt is always for the model

        async def new_session(self, *args: Any, **kwargs: Any) -> Any:
            response = await super().new_session(*args, **kwargs)
            response.field_meta = _meta(response.field_meta, mcpServers=_mcp_status())
            return response

        async def load_session(self, *args: Any, **kwargs: Any) -> Any:
            response = await super().load_session(*args, **kwargs)
            if response is not None:
                response.field_meta = _meta(response.field_meta, mcpServers=_mcp_status())
            return response

        async def prompt(self, prompt: Any, session_id: str, **kwargs: Any) -> Any:
            state = self.session_manager.get_session(session_id)
            verdict: dict[str, Any] = {}
            if state is not None:
                _record_verdict(state.agent, verdict)
                if _clarify_wanted() and self._conn is not None:
                    loop = asyncio.get_running_loop()
                    state.agent.clarify_callback = _clarify_callback(self._conn, loop, session_id)
            response = await super().prompt(prompt=prompt, session_id=session_id, **kwargs)
            if verdict:
                response.field_meta = _meta(response.field_meta, **verdict)
            return response

    return UnattendedACPAgent


def _print_version() -> None:
    import acp  # noqa: F401  (the ACP extra must import for the adapter to run)
    from acp_adapter.server import HermesACPAgent  # noqa: F401
    from hermes_cli import __version__

    print(__version__)


def main(argv: list[str]) -> None:
    if argv[1:] == ["--version"]:
        _print_version()
        return
    from acp_adapter import entry, server

    _hide_secrets_from_tools()
    _add_raw_tool_data()
    if _clarify_wanted():
        _offer_clarify()
    server.HermesACPAgent = _agent_class()  # entry.main() imports it from there
    entry.main([])
    # Stdin closed: the client is done. Hermes' exit hooks run, but the interpreter's own
    # teardown (a second and more for Hermes' heap and idle worker threads) is skipped, so
    # the process, and the turn's credentials with it, are gone at once.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)

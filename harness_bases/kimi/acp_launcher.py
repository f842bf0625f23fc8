"""Starts Kimi CLI's own multi-session ACP server (what `kimi acp` runs) for the UHP server.

This file is copied next to Kimi CLI's private Python at install time and run with it inside
the sandbox; it imports nothing from UHP Server. Kimi's agent loop, tools and session files
are untouched. What changes is only what the pinned ACP server (kimi-cli 1.51.0) does not let
a client set:

1. No Kimi account. `session/new` and `session/load` are refused "auth required" unless a
   Kimi Code sign-in token is on disk, whatever provider the config names. Here the config's
   only provider is the model gateway, so that check is skipped.
2. The turn's token stays in this process. It arrives in `UHP_GATEWAY_TOKEN`, which is taken
   out of the environment (with every other `UHP_` variable) before Kimi starts, and becomes
   the gateway provider's key when Kimi builds its model client. Kimi's tools run commands
   with its own environment: they never see it (nor is it in a file).
3. The agent file. The ACP server always loads the built-in agent; here it loads the one
   `UHP_KIMI_AGENT_FILE` names (written each turn: it extends the built-in one with the
   turn's standing instructions).
4. Disabled tools. A tool named in `UHP_KIMI_DISABLED_TOOLS` (a JSON list) is never added to
   any toolset, built-in or MCP, the main agent's or a subagent's: the model is not offered
   it, and a call to it is answered "tool not found". `AskUserQuestion` is always among them:
   in ACP mode Kimi answers it with an empty answer; the server's `ask_user` MCP tool asks.
5. A failed model call fails the prompt. Kimi's ACP session stops reading the turn at the
   "step interrupted" message that precedes the step's error, and answers `end_turn` with the
   error lost. Here it reads on, so the error reaches its handler: a JSON-RPC error whose
   `data.error` is the provider client's message.
6. A standing instruction follows each turn. Kimi keeps a session's system prompt from its
   first turn; here each turn's agent file decides it (the session's file gets the new one).
7. An MCP server that cannot be reached is left out of the turn (its tools are not offered,
   the reason goes to stderr), as the other bases do, instead of failing the whole prompt.
8. No slash commands: every prompt is the user's message to the model (a task that starts
   with `/tmp/…` is not an unknown command).
9. Parallel tool calls whose streamed arguments interleave. Chat Completions joins a call's
   argument pieces by their `index`; Kimi's client (kosong 0.56) drops the index and appends
   every piece to the last call announced, so two calls streamed side by side reached their
   tools as broken JSON. Here the first call announced streams as it comes, and every other
   call is held and handed over whole when the reply ends.
10. A step stopped while its tools run stays in the conversation. Kimi writes a step's reply
   and its tool results only once every result is in, so a turn stopped meanwhile (a cancel,
   a question the server parks) lost the reply and its calls: the next turn's model never
   saw the question it asked. Here the reply is kept with the results that came back, and
   each call still running answered as stopped; stopped while the reply still streamed
   (its first calls already running), the calls made so far are kept the same way.

`--version` prints the Kimi CLI version once its ACP server imports, and nothing else.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

SECRET_PREFIX = "UHP_"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
AGENT_FILE_ENV = "UHP_KIMI_AGENT_FILE"
DISABLED_TOOLS_ENV = "UHP_KIMI_DISABLED_TOOLS"
ALWAYS_DISABLED = ("AskUserQuestion",)
GATEWAY_PROVIDER_TYPE = "openai_legacy"
STOPPED_CALL = "The turn was stopped before this tool call returned."
# The agent loop (KimiSoul) whose step is running in this task: where a stopped step's reply
# and results are written.
_STEPPING: contextvars.ContextVar[Any] = contextvars.ContextVar("uhp_stepping")


def _take_our_variables() -> tuple[str, str, frozenset[str]]:
    """The token, the agent file and the disabled tools, with every UHP_ variable gone from
    the environment."""
    token = os.environ.get(TOKEN_ENV, "")
    agent_file = os.environ.get(AGENT_FILE_ENV, "")
    disabled = json.loads(os.environ.get(DISABLED_TOOLS_ENV) or "[]")
    for key in [key for key in os.environ if key.startswith(SECRET_PREFIX)]:
        del os.environ[key]
    return token, agent_file, frozenset([*disabled, *ALWAYS_DISABLED])


def _patch(token: str, agent_file: str, disabled: frozenset[str]) -> None:
    from kimi_cli import app
    from kimi_cli.acp import server
    from kimi_cli.acp import session as acp_session
    from kimi_cli.exception import MCPRuntimeError
    from kimi_cli.soul import kimisoul
    from kimi_cli.soul.context import Context
    from kimi_cli.soul.toolset import KimiToolset
    from pydantic import SecretStr

    server.ACPServer._check_auth = lambda self: None

    augment = app.augment_provider_with_env_vars

    def with_gateway_key(provider: Any, model: Any) -> dict[str, str]:
        applied = augment(provider, model)
        if provider.type == GATEWAY_PROVIDER_TYPE:
            provider.api_key = SecretStr(token)
        return applied

    app.augment_provider_with_env_vars = with_gateway_key

    create = app.KimiCLI.create

    async def with_agent_file(session: Any, **kwargs: Any) -> Any:
        if agent_file and kwargs.get("agent_file") is None:
            kwargs["agent_file"] = Path(agent_file)
        return await create(session, **kwargs)

    app.KimiCLI.create = staticmethod(with_agent_file)

    add = KimiToolset.add

    def add_unless_disabled(self: Any, tool: Any) -> None:
        if tool.name not in disabled:
            add(self, tool)

    KimiToolset.add = add_unless_disabled

    # `case StepInterrupted(): break` in the session's prompt loop: a class no message is.
    acp_session.StepInterrupted = type("NeverSent", (), {})

    restore = Context.restore

    async def restore_but_the_system_prompt(self: Any) -> bool:
        restored = await restore(self)
        self._system_prompt = None  # KimiCLI.create then writes this turn's
        return restored

    Context.restore = restore_but_the_system_prompt

    wait_for_mcp_tools = KimiToolset.wait_for_mcp_tools

    async def wait_leaving_out_failed_servers(self: Any) -> None:
        try:
            await wait_for_mcp_tools(self)
        except MCPRuntimeError as exc:
            print(f"uhp: MCP servers left out of the turn: {exc}", file=sys.stderr)

    KimiToolset.wait_for_mcp_tools = wait_leaving_out_failed_servers

    kimisoul.parse_slash_command_call = lambda text: None
    _patch_parallel_calls()
    _patch_stopped_steps()


async def one_call_streaming(chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """Chat Completions chunks in which only the first tool call announced streams: the
    pieces of every other call are held (by `index`) and follow, each call whole, in one
    chunk after the last."""
    from openai.types.chat.chat_completion_chunk import (
        ChatCompletionChunk,
        Choice,
        ChoiceDelta,
        ChoiceDeltaToolCall,
        ChoiceDeltaToolCallFunction,
    )

    streaming: int | None = None
    held: dict[int, dict[str, Any]] = {}
    last = None
    async for chunk in chunks:
        last = chunk
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is not None and delta.tool_calls:
            passed = []
            for call in delta.tool_calls:
                if streaming is None:
                    streaming = call.index
                if call.index == streaming:
                    passed.append(call)
                    continue
                kept = held.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
                kept["id"] = call.id or kept["id"]
                if call.function is not None:
                    kept["name"] = call.function.name or kept["name"]
                    kept["arguments"] += call.function.arguments or ""
            delta.tool_calls = passed or None
        yield chunk
    if last is None or not held:
        return
    calls = [
        ChoiceDeltaToolCall(
            index=index,
            id=kept["id"],
            type="function",
            function=ChoiceDeltaToolCallFunction(name=kept["name"], arguments=kept["arguments"]),
        )
        for index, kept in sorted(held.items())
    ]
    choice = Choice(index=0, delta=ChoiceDelta(tool_calls=calls), finish_reason=None)
    yield ChatCompletionChunk(
        id=last.id,
        choices=[choice],
        created=last.created,
        model=last.model,
        object="chat.completion.chunk",
    )


def _patch_parallel_calls() -> None:
    from kosong.contrib.chat_provider.openai_legacy import OpenAILegacyStreamedMessage

    convert = OpenAILegacyStreamedMessage._convert_stream_response

    def convert_one_call_streaming(self: Any, response: Any) -> Any:
        return convert(self, one_call_streaming(response))

    OpenAILegacyStreamedMessage._convert_stream_response = convert_one_call_streaming


class _RecordingToolset:
    """The step's toolset, which notes each call it is handed and its pending result."""

    def __init__(self, toolset: Any) -> None:
        self._toolset = toolset
        self.calls: list[Any] = []
        self.futures: dict[str, Any] = {}

    @property
    def tools(self) -> Any:
        return self._toolset.tools

    def handle(self, call: Any) -> Any:
        result = self._toolset.handle(call)
        self.calls.append(call)
        future = result
        if not isinstance(result, asyncio.Future):  # answered at once: already returned
            future = asyncio.get_running_loop().create_future()
            future.set_result(result)
        self.futures[call.id] = future
        return result


class _Step:
    """What one step of the agent loop got to: the calls the model made so far, its whole
    reply once the reply ended, and whether the loop wrote them into the conversation."""

    def __init__(self, soul: Any) -> None:
        self.soul = soul  # the agent loop (KimiSoul) the step is of
        self.toolset: _RecordingToolset | None = None
        self.result: Any = None  # kosong's StepResult, once the model's reply ended
        self.written = False

    def reply_and_results(self) -> tuple[Any, list[Any]] | None:
        """The reply to keep and its calls' results, each call still running answered as
        stopped; None when the model made no call (nothing of the step is lost then)."""
        from kosong import StepResult
        from kosong.message import Message

        result = self.result
        if result is None and self.toolset is not None and self.toolset.calls:
            calls = self.toolset.calls
            # Stopped while the reply streamed: its calls are what the conversation needs.
            message = Message(role="assistant", content=[], tool_calls=list(calls))
            result = StepResult(None, message, None, list(calls), dict(self.toolset.futures))
        if result is None or not result.tool_calls:
            return None
        return result, kept_results(result)


def kept_results(result: Any) -> list[Any]:
    """A stopped step's tool results: each call's own where it returned, else "stopped"."""
    from kosong.tooling import ToolError, ToolResult

    kept = []
    for call in result.tool_calls:
        future = result._tool_result_futures.get(call.id)
        returned = future is not None and future.done() and not future.cancelled()
        if returned and future.exception() is None:
            kept.append(future.result())
            continue
        stopped = ToolError(message=STOPPED_CALL, brief="Stopped")
        kept.append(ToolResult(tool_call_id=call.id, return_value=stopped))
    return kept


def _patch_stopped_steps() -> None:
    """A step stopped anywhere after the model's first call (while the reply streams, while
    the tools run, or between) writes its reply and results as the loop would have."""
    import kosong
    from kimi_cli.soul.kimisoul import KimiSoul

    run_step = KimiSoul._step

    async def step_kept_when_stopped(self: Any) -> Any:
        step = _Step(self)
        stepping = _STEPPING.set(step)
        try:
            return await run_step(self)
        except asyncio.CancelledError:
            kept = None if step.written else step.reply_and_results()
            if kept is not None:
                # Shielded as Kimi shields its own context writes: the cancel goes on after.
                await asyncio.shield(self._grow_context(*kept))
            raise
        finally:
            _STEPPING.reset(stepping)  # (a compaction after the step is no step's)

    KimiSoul._step = step_kept_when_stopped

    grow_context = KimiSoul._grow_context

    async def grow_context_noted(self: Any, result: Any, tool_results: Any) -> Any:
        step = _STEPPING.get(None)
        if step is not None and step.soul is self:
            step.written = True
        return await grow_context(self, result, tool_results)

    KimiSoul._grow_context = grow_context_noted

    model_step = kosong.step

    async def model_step_recorded(
        chat_provider: Any, system_prompt: str, toolset: Any, history: Any, **kwargs: Any
    ) -> Any:
        step = _STEPPING.get(None)
        # Only the step's own model call: a subagent's (run from a tool, in a task that
        # inherited this context) has its loop's toolset, and records nothing here.
        if step is None or toolset is not step.soul._agent.toolset:
            return await model_step(chat_provider, system_prompt, toolset, history, **kwargs)
        step.toolset = _RecordingToolset(toolset)
        step.result = await model_step(
            chat_provider, system_prompt, step.toolset, history, **kwargs
        )
        return step.result

    kosong.step = model_step_recorded


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        import kimi_cli.acp.server  # noqa: F401  (fails loudly when the install is broken)
        from kimi_cli.constant import VERSION

        print(VERSION)
        return 0
    _patch(*_take_our_variables())
    from kimi_cli.acp import acp_main

    acp_main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

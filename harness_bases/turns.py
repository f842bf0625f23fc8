"""One running turn of a CLI, as the engine drives it: its events, and a way to stop it.

`HarnessBase.start_turn(proc, spec)` returns an `AgentTurn` that holds everything the turn
needs (its connection, parser, session id), so a base instance keeps no per-turn state and
serves any number of sessions at once. Every driver ends with the same loop (`drain`): feed
the CLI's messages to a parser until it knows the outcome, then close stdin and keep reading
until stdout ends, so the CLI can finish writing its transcript before it exits.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from harness_bases.events import AgentEvent

log = logging.getLogger(__name__)

Message = dict[str, Any]


class AgentTurn(abc.ABC):
    """A turn started by `HarnessBase.start_turn`. The engine iterates `events()` once and
    may call `interrupt()` at any time, also before the first event or after the last.

    Subclasses implement `run()` (the events) and `send_interrupt()`; `name` prefixes the
    log event of a failed interrupt (`<name>_interrupt_failed`)."""

    name: str = "agent"

    def __init__(self) -> None:
        self._ended = False

    @abc.abstractmethod
    def run(self) -> AsyncGenerator[AgentEvent, None]:
        """Talk to the started CLI and yield what happens, until its stdout ends.

        Yields TurnFinished, TurnFailed or StepBudgetReached once the CLI reports its
        outcome; the status comes from what the CLI reports, never from its exit code."""

    @abc.abstractmethod
    async def send_interrupt(self) -> bool:
        """Ask the CLI to stop the turn cleanly (or never to start it). True when asked."""

    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        try:
            async with contextlib.aclosing(self.run()) as stream:
                async for event in stream:
                    yield event
        finally:
            self._ended = True

    async def interrupt(self) -> bool:
        """Ask the CLI to stop the turn. False when the turn is over or the request failed:
        the engine then kills the sandbox once its grace period ends."""
        if self._ended:
            return False
        try:
            return await self.send_interrupt()
        except Exception:
            log.warning(f"{self.name}_interrupt_failed", exc_info=True)
            return False


class StreamParser(Protocol):
    """A base's pure mapping from the CLI's messages to AgentEvents, one per turn."""

    finished: bool  # the outcome was reported

    def feed(self, msg: Message) -> list[AgentEvent]: ...

    def at_eof(self) -> list[AgentEvent]:
        """Events for stdout ending (TurnFailed when no outcome was reported)."""
        ...


async def drain(
    messages: AsyncIterator[Message],
    parser: StreamParser,
    *,
    close_stdin: Callable[[], Awaitable[None]],
    stderr_tail: Callable[[], str],
    name: str,
) -> AsyncIterator[AgentEvent]:
    """Yield the parser's events until the outcome, then drain `messages` to their end.

    Once the outcome is known stdin is closed: the CLI then flushes its transcript and exits
    by itself rather than idling until the engine's grace period ends in a kill. That happens
    only when the engine asks for the event after the outcome: one that keeps the process
    warm for the session's next turn (engine/turns/warm.py) never does, and closes this
    generator instead, so stdin stays open and nothing past the outcome is read."""
    async for msg in messages:
        if parser.finished:
            continue  # draining until the CLI exits, so its transcript is complete
        for event in parser.feed(msg):
            yield event
        if parser.finished:
            with contextlib.suppress(Exception):
                await close_stdin()
    if not parser.finished:
        log.warning(f"{name}_stdout_eof", extra={"stderr": stderr_tail()})
    for event in parser.at_eof():
        yield event

"""Answers to a turn paused on another replica (docs/scale-out.md §3).

The replica running a turn posts each question the turn waits on (storage/relayed_questions
.py), so every replica reads the task as `input_required`. A replica that takes the answers
records them on those rows and NOTIFYs `uhp_answers`; the runner takes them (once: a DELETE
… RETURNING) and delivers them to the live run as a local answer would. When the runner
withdraws a question first (its turn parked, stopped), recording fails and the asking replica
starts the new turn that continues a parked one. The runner also looks for answers on every
lease renewal, so a lost notification only delays one.

Answers that come with a fresh model connection (a door's resume: an AgentOS run token is good
for one invocation only, an Oumi resume brings the key to use from then on) cannot follow the
turn: a connection's key never enters the database. The replica that takes them asks the
runner to park the turn instead (the same conditional UPDATE, on `park_requested`), and
carries it on in a new turn of its own with that connection, as it does a parked one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from storage import relayed_questions as store
from storage.db import Database
from uhp_server.engine.replicas.peers import LocalRuns
from uhp_server.engine.requests import Question, ToolAnswer
from uhp_server.engine.turns import questions
from uhp_server.engine.turns.run import Run

log = logging.getLogger("uhp_server.answer_relay")


class AnswerRelay:
    def __init__(self, db: Database, replica_id: str) -> None:
        self.db = db
        self.replica_id = replica_id
        self.runs: LocalRuns | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    # -- the replica running the turn ----------------------------------------------------
    async def post(self, run: Run, question: Question) -> None:
        """Shown to every replica (not shown: the question still waits here, for local
        answers only)."""
        try:
            await self.db.write(store.post, run.response_id, question.call_id, question.arguments)
        except Exception:
            log.exception("question_not_posted", extra={"response_id": run.response_id})

    async def withdraw(self, run: Run, question: Question) -> str | None:
        """The question no longer waits; an answer relayed for it meanwhile, if any."""
        try:
            result: str | None = await self.db.write(
                store.withdraw, run.response_id, question.call_id
            )
        except Exception:  # the row goes with the turn (Cluster's sweep)
            log.exception("question_not_withdrawn", extra={"response_id": run.response_id})
            return None
        return result

    def withdraw_later(self, run: Run, question: Question) -> None:
        self._spawn(self.withdraw(run, question))

    def notified(self, response_id: str) -> None:
        """`uhp_answers` (the payload names the response; "": any may have been missed)."""
        runs = self.runs
        if runs is None:
            return
        if not response_id:
            self._spawn(self.look_for_answers())
        elif runs.get(response_id) is not None:
            self._spawn(self.deliver(response_id))

    async def look_for_answers(self) -> None:
        for response_id in await self.db.read(store.answered_on, self.replica_id):
            await self.deliver(response_id)

    async def deliver(self, response_id: str) -> None:
        runs = self.runs
        run = runs.get(response_id) if runs is not None else None
        if run is None:
            return
        taken = await self.db.write(store.take_answers, response_id)
        if taken:
            questions.deliver(run, [ToolAnswer(call, output) for call, output in taken.items()])
            return
        if not _still_asking(run):
            return
        call_ids = await self.db.write(store.take_park_request, response_id)
        if not call_ids:
            return
        # Asked again after the await: an answer given here meanwhile goes on instead.
        if _still_asking(run, call_ids):
            questions.park(run)
            return
        # Declined (answered here, or asking other calls than the asker saw): the questions
        # still waiting are shown to the other replicas again, since the take removed them.
        for question in list(run.asking):
            waiter = run.answer_waiters.get(question.call_id)
            ending = run.stop.is_set()  # cancelled, parked, let go
            if waiter is not None and not waiter.done() and not ending:
                await self.post(run, question)

    # -- the replica that takes the answers ----------------------------------------------
    async def relay(self, response_id: str, answers: list[ToolAnswer]) -> bool:
        """Record the answers for the runner; False when its turn no longer waits on them."""
        recorded: bool = await self.db.write(
            store.record_answers, response_id, {a.call_id: a.output for a in answers}
        )
        return recorded

    async def request_park(self, response_id: str, call_ids: list[str]) -> bool:
        """Ask the runner to park the turn waiting on these calls; False when it no longer
        waits on them."""
        requested: bool = await self.db.write(store.request_park, response_id, call_ids)
        return requested

    async def withdraw_park_request(self, response_id: str) -> bool:
        """Give up a request to park the runner has not taken; False when it took it."""
        withdrawn: bool = await self.db.write(store.withdraw_park_request, response_id)
        return withdrawn

    def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        with contextlib.suppress(asyncio.CancelledError):
            if task.exception() is not None:
                log.error("answer_relay_failed", exc_info=task.exception())


def _still_asking(run: Run, call_ids: list[str] | None = None) -> bool:
    """Whether the live turn still waits on its questions (`call_ids`, when given, exactly),
    none of them answered here meanwhile: a park would end a turn that is going on."""
    asking = sorted(q.call_id for q in run.asking)
    return (
        bool(asking)
        and (call_ids is None or asking == call_ids)
        and not any(waiter.done() for waiter in run.answer_waiters.values())
        and not run.stop.is_set()
    )

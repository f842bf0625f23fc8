"""A `store: false` task's conversation files (engine/turns/unkept.py): set aside before its
turn, put back as they were after it, never following a link the agent left in its home."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import threading
import tracemalloc
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import TurnSpec
from harness_bases.turns import AgentTurn
from tests.support.fake_engine import CONNECTION, StandInBase, StandInEngine
from tests.test_engine_requests import task, text_of, until
from uhp_server.engine.requests import QuestionPolicy, ToolAnswer
from uhp_server.engine.turns import unkept

PATTERNS = (".cli/sessions", ".cli/*.db", ".cli/*.db-*", ".cli/history.jsonl")


def tree(root: Path) -> dict[str, bytes]:
    """Every regular file under root by its relative path (links not followed)."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink():
                found[str(path.relative_to(root))] = path.read_bytes()
    return found


def make_home(tmp_path: Path) -> Path:
    home = tmp_path / "session" / "home"
    (home / ".cli" / "sessions" / "2026").mkdir(parents=True)
    (home / ".cli" / "sessions" / "2026" / "kept.jsonl").write_text("kept turn\n")
    (home / ".cli" / "state.db").write_bytes(b"db: kept")
    (home / ".cli" / "config.toml").write_text("model = 'm'\n")
    return home


def test_what_the_turn_did_to_the_conversation_files_is_undone_and_nothing_else(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path)
    before = tree(home)
    assert unkept.set_aside(home, PATTERNS, "conv-1") == "conv-1"
    assert unkept.set_aside_pending(home)
    # The turn: appends to a transcript, starts another, writes a WAL and a history.
    with (home / ".cli" / "sessions" / "2026" / "kept.jsonl").open("a") as transcript:
        transcript.write("unkept turn\n")
    (home / ".cli" / "sessions" / "2026" / "new.jsonl").write_text("unkept\n")
    (home / ".cli" / "state.db-wal").write_bytes(b"unkept")
    (home / ".cli" / "history.jsonl").write_text("unkept\n")
    (home / ".cli" / "config.toml").write_text("model = 'next turn writes this anyway'\n")
    (home / "notes.md").write_text("the agent's own file, not the CLI's conversation\n")

    assert unkept.put_back(home, PATTERNS) == "conv-1"
    after = tree(home)
    assert {k: v for k, v in after.items() if ".cli/sessions" in k or ".db" in k} == {
        k: v for k, v in before.items() if ".cli/sessions" in k or ".db" in k
    }
    assert ".cli/history.jsonl" not in after
    assert after["notes.md"] and after[".cli/config.toml"].startswith(b"model = 'next")
    assert not unkept.set_aside_pending(home)
    assert not any("unkept" in str(p) for p in (tmp_path / "session").iterdir())


def test_a_task_that_started_a_conversation_leaves_none(tmp_path: Path) -> None:
    home = tmp_path / "s" / "home"
    home.mkdir(parents=True)
    assert unkept.set_aside(home, PATTERNS, None) is None
    (home / ".cli" / "sessions").mkdir(parents=True)
    (home / ".cli" / "sessions" / "t.jsonl").write_text("unkept\n")
    assert unkept.put_back(home, PATTERNS) is None
    assert tree(home) == {}


def test_a_parked_turns_copy_stands_for_its_answers_turn(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    unkept.set_aside(home, PATTERNS, "conv-1")
    (home / ".cli" / "sessions" / "parked.jsonl").write_text("asked\n")
    # The answer's turn resumes the parked conversation: the first copy is kept.
    assert unkept.set_aside(home, PATTERNS, "conv-2") == "conv-1"
    assert unkept.put_back(home, PATTERNS) == "conv-1"
    assert ".cli/sessions/parked.jsonl" not in tree(home)


def test_nothing_set_aside_means_nothing_is_touched(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    before = tree(home)
    assert unkept.put_back(home, PATTERNS) is None
    assert tree(home) == before


def test_links_the_agent_left_are_neither_read_nor_written_through(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    secret = tmp_path / "host-secret"
    secret.write_text("host only")
    outside = tmp_path / "host-folder"
    outside.mkdir()
    (home / ".cli" / "sessions" / "2026" / "leak.jsonl").symlink_to(secret)
    (home / ".cli" / "link.db").symlink_to(secret)
    unkept.set_aside(home, PATTERNS, None)
    assert "host only" not in str(tree(tmp_path / "session" / unkept.ASIDE))
    # During the turn the agent swaps its CLI's folder for a link to a host folder.
    os.rename(home / ".cli", tmp_path / "moved")
    (home / ".cli").symlink_to(outside)
    unkept.put_back(home, PATTERNS)
    assert list(outside.iterdir()) == [] and secret.read_text() == "host only"
    assert not (home / ".cli").is_symlink()
    assert tree(home)[".cli/sessions/2026/kept.jsonl"] == b"kept turn\n"


def test_a_star_stays_within_one_path_segment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cli" / "deep").mkdir(parents=True)
    (home / ".cli" / "deep" / "x.db").write_text("x")
    (home / ".cli" / "y.db").write_text("y")
    assert unkept.matches(home, (".cli/*.db",)) == [home / ".cli" / "y.db"]


def returns_promptly(work: Callable[[], object], fifos: list[Path]) -> bool:
    """Whether work() returns within seconds; a FIFO it may be stuck opening is then given a
    writer and closed, so a failing run ends rather than leaving a thread blocked."""
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(timeout=10)
    stuck = worker.is_alive()
    for fifo in fifos:
        with contextlib.suppress(OSError):  # no reader waiting: nobody is stuck on it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    worker.join(timeout=5)
    return not stuck


def test_a_fifo_the_agent_planted_is_skipped_not_waited_on(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    in_folder = home / ".cli" / "sessions" / "2026" / "trap.jsonl"
    named = home / ".cli" / "history.jsonl"
    for fifo in (in_folder, named):
        os.mkfifo(fifo)
    assert returns_promptly(lambda: unkept.set_aside(home, PATTERNS, "conv-1"), [in_folder, named])
    copies = tree(tmp_path / "session" / unkept.ASIDE)
    assert copies[f"{'files'}/.cli/sessions/2026/kept.jsonl"] == b"kept turn\n"
    assert not any("trap" in name or "history" in name for name in copies)
    # A FIFO in the copy (however it got there) is not waited on on the way back either.
    planted = tmp_path / "session" / unkept.ASIDE / "files" / ".cli" / "planted.db"
    os.mkfifo(planted)
    assert returns_promptly(lambda: unkept.put_back(home, PATTERNS), [planted])
    after = tree(home)
    assert after[".cli/sessions/2026/kept.jsonl"] == b"kept turn\n"
    assert not (home / ".cli" / "planted.db").exists() and not in_folder.exists()


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes holding data only in its first and last MiB."""
    with path.open("wb") as out:
        out.write(b"head" * (1 << 18))
        out.seek(size - (1 << 20))
        out.write(b"tail" * (1 << 18))


def digest(path: Path) -> str:
    with path.open("rb") as source:
        return hashlib.file_digest(source, "sha256").hexdigest()


@pytest.mark.parametrize("in_kernel", [True, False], ids=["copy_file_range", "read-write"])
def test_a_large_sparse_file_is_copied_in_bounded_memory_keeping_its_holes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_kernel: bool
) -> None:
    if not in_kernel:

        def cross_device(*args: object) -> int:
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(os, "copy_file_range", cross_device)
    home = make_home(tmp_path)
    size = 64 << 20
    big = home / ".cli" / "sessions" / "2026" / "big.jsonl"
    sparse(big, size)
    before = digest(big)
    copy = tmp_path / "session" / unkept.ASIDE / "files" / big.relative_to(home)

    def peak_of(work: Callable[[], object]) -> int:
        tracemalloc.start()
        try:
            work()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak_of(lambda: unkept.set_aside(home, PATTERNS, None)) < 8 << 20  # never whole
    assert copy.stat().st_size == size and digest(copy) == before
    assert copy.stat().st_blocks * 512 < size // 4  # the holes stayed holes
    big.write_text("the unkept turn's\n")
    assert peak_of(lambda: unkept.put_back(home, PATTERNS)) < 8 << 20
    assert big.stat().st_blocks * 512 < size // 4 and digest(big) == before


def test_more_than_a_set_aside_may_hold_is_refused_with_nothing_copied(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    before = tree(home)
    total = len(b"kept turn\n") + len(b"db: kept")
    with pytest.raises(unkept.TooMuchToSetAside, match="store: false"):
        unkept.set_aside(home, PATTERNS, "conv-1", limit=total - 1)
    assert not unkept.set_aside_pending(home) and tree(home) == before
    assert sorted(p.name for p in (tmp_path / "session").iterdir()) == ["home"]
    assert unkept.set_aside(home, PATTERNS, "conv-1", limit=total) == "conv-1"


def test_more_files_than_a_set_aside_may_hold_are_refused_with_nothing_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path)
    sessions = home / ".cli" / "sessions"
    for n in range(5):
        (sessions / f"empty-{n}.jsonl").touch()  # bytes nowhere near the limit
    count = sum(1 for match in unkept.matches(home, PATTERNS) for _ in unkept._regular(match))
    before = tree(home)
    monkeypatch.setattr(unkept, "SET_ASIDE_MAX_FILES", count - 1)
    with pytest.raises(unkept.TooMuchToSetAside, match="files"):
        unkept.set_aside(home, PATTERNS, "conv-1")
    assert not unkept.set_aside_pending(home) and tree(home) == before
    monkeypatch.setattr(unkept, "SET_ASIDE_MAX_FILES", count)
    assert unkept.set_aside(home, PATTERNS, "conv-1") == "conv-1"


def test_a_setuid_bit_the_agent_set_never_comes_back_on_a_copy(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    planted = home / ".cli" / "history.jsonl"
    planted.write_text("agent's bytes\n")
    os.chmod(planted, 0o6755)  # setuid and setgid, as the agent may set on its own file
    unkept.set_aside(home, PATTERNS, "conv-1")
    aside = [path for path in (home.parent / unkept.ASIDE).rglob("*") if path.is_file()]
    assert aside and all(path.stat().st_mode & 0o7000 == 0 for path in aside)
    unkept.put_back(home, PATTERNS)
    assert planted.stat().st_mode & 0o7777 == 0o755


# -- the engine: a task's turns, a parked one among them --------------------------------------
class Transcribing(AgentTurn):
    """A CLI keeping its conversations as `.standin/<id>.jsonl` in the agent home: it resumes
    the one it is given (else starts one), records its prompt and its reply; `ASK` on the
    prompt's last line asks the user first (parked when nobody answers in time)."""

    def __init__(self, base: StandInBase, spec: TurnSpec) -> None:
        super().__init__()
        self.base, self.spec = base, spec

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        spec = self.spec
        self.base.prompts.append(spec.prompt)
        conversation = spec.native_session_id or f"conv-{len(self.base.prompts)}"
        yield ev.NativeSession(conversation)
        folder = spec.host_home / ".standin"
        folder.mkdir(exist_ok=True)
        transcript = folder / f"{conversation}.jsonl"
        heard = transcript.read_text() if transcript.exists() else ""
        with transcript.open("a") as out:
            out.write(f"user: {spec.prompt}\n")
        if spec.prompt.strip().splitlines()[-1] == "ASK":
            assert self.base.runs is not None
            run = self.base.runs.by_token(spec.gateway_token)
            assert run is not None
            if await self.base.runs.ask(run, "Which colour?", ()) is None:
                await asyncio.Event().wait()  # parked: the engine ends the turn
        reply = f"heard before: {heard.count('user: ')}"
        with transcript.open("a") as out:
            out.write(f"agent: {reply}\n")
        yield ev.TextDelta("m1", reply)
        yield ev.TextDone("m1", reply)
        yield ev.TurnFinished()

    async def send_interrupt(self) -> bool:
        return True


async def session_home(engine: StandInEngine, response_id: str) -> Path:
    state = await engine.engine.state(engine.principal_id, response_id)
    return engine.settings.sessions_dir / state.response["metadata"]["session_id"] / "home"


def home_text(home: Path) -> str:
    return "".join(data.decode() for data in tree(home).values())


async def test_a_parked_store_false_turn_keeps_its_conversation_until_its_task_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    monkeypatch.setattr(engine.base, "conversation_paths", (".standin",))
    monkeypatch.setattr(
        engine.base, "start_turn", lambda proc, turn: Transcribing(engine.base, turn)
    )
    run = functools.partial(task, engine, questions=QuestionPolicy.pause())
    try:
        kept = await engine.engine.start(run("kept-1"))
        await until(engine, kept.response_id, "completed")
        unkept = await engine.engine.start(
            run("unkept-secret\nASK", store=False, previous_response_id=kept.response_id)
        )
        await until(engine, unkept.response_id, "input_required")
        await asyncio.sleep(0.5)  # parked: its process is gone, its conversation kept
        home = await session_home(engine, kept.response_id)
        assert "unkept-secret" in home_text(home)
        (question,) = (await engine.engine.state(engine.principal_id, unkept.response_id)).questions
        carried = await engine.engine.answer(
            engine.principal_id,
            unkept.response_id,
            [ToolAnswer(question.call_id, "teal")],
            model_connection=CONNECTION,
        )
        done = await until(engine, carried, "completed")
        assert text_of(done.response) == "heard before: 2"  # it resumed the parked turn
        after = await engine.engine.start(run("kept-2", previous_response_id=carried))
        done = await until(engine, after.response_id, "completed")
        assert text_of(done.response) == "heard before: 1"  # the kept conversation goes on
        text = home_text(home)
        assert "unkept-secret" not in text and "teal" not in text and "kept-1" in text
    finally:
        await engine.close()


async def test_a_kept_turn_puts_back_what_an_unanswered_parked_task_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    monkeypatch.setattr(engine.base, "conversation_paths", (".standin",))
    monkeypatch.setattr(
        engine.base, "start_turn", lambda proc, turn: Transcribing(engine.base, turn)
    )
    run = functools.partial(task, engine, questions=QuestionPolicy.pause())
    try:
        kept = await engine.engine.start(run("kept-1"))
        await until(engine, kept.response_id, "completed")
        unkept = await engine.engine.start(
            run("unkept-secret\nASK", store=False, previous_response_id=kept.response_id)
        )
        await until(engine, unkept.response_id, "input_required")
        await asyncio.sleep(0.5)  # parked
        cancelled = await engine.engine.cancel(engine.principal_id, unkept.response_id)
        assert cancelled.status == "cancelled"
        after = await engine.engine.start(run("kept-2", previous_response_id=kept.response_id))
        done = await until(engine, after.response_id, "completed")
        assert text_of(done.response) == "heard before: 1"
        home = await session_home(engine, kept.response_id)
        assert "unkept-secret" not in home_text(home)
    finally:
        await engine.close()


async def test_a_store_false_turn_with_too_much_to_set_aside_fails_before_its_cli_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    monkeypatch.setattr(engine.base, "conversation_paths", (".standin",))
    monkeypatch.setattr(
        engine.base, "start_turn", lambda proc, turn: Transcribing(engine.base, turn)
    )
    try:
        kept = await engine.engine.start(task(engine, "kept-1"))
        await until(engine, kept.response_id, "completed")
        monkeypatch.setattr(unkept, "SET_ASIDE_MAX_BYTES", 8)
        refused = await engine.engine.start(
            task(engine, "unkept", store=False, previous_response_id=kept.response_id)
        )
        failed = await until(engine, refused.response_id, "failed")
        assert "more than a store: false task may set aside" in failed.response["error"]["message"]
        assert engine.base.prompts == ["kept-1"]  # its CLI never ran
        monkeypatch.setattr(unkept, "SET_ASIDE_MAX_BYTES", 1 << 20)
        after = await engine.engine.start(
            task(engine, "kept-2", previous_response_id=kept.response_id)
        )
        done = await until(engine, after.response_id, "completed")
        assert text_of(done.response) == "heard before: 1"
    finally:
        await engine.close()

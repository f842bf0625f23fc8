"""Starting a sandboxed process never holds up the event loop: the fork and the wait for the
child's exec happen on a worker thread, and the process still behaves as before."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_bases.base import Invocation
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.local import LocalSandbox
from uhp_server.sandbox.spawn import spawn

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}


@pytest.fixture
def mounts(tmp_path: Path) -> SessionMounts:
    tools = tmp_path / "tools"
    tools.mkdir()
    return SessionMounts(workspace=tmp_path / "ws", home=tmp_path / "home", tools=tools)


async def test_the_sandbox_forks_off_the_event_loop(
    mounts: SessionMounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    forked_on: list[str] = []
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]  # private: no stub

    def recording(self: subprocess.Popen[bytes], *args: Any, **kwargs: Any) -> None:
        forked_on.append(threading.current_thread().name)
        execute_child(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", recording)
    sandbox = LocalSandbox()
    proc = await sandbox.start(Invocation(["/bin/cat"], ENV, "/workspace"), mounts)
    await proc.write(b"through the pipe\n")
    await proc.close_stdin()
    out = [line async for line in proc.lines()]
    assert await proc.wait() == 0
    assert out == [b"through the pipe"]
    assert forked_on and threading.current_thread().name not in forked_on


async def test_a_spawned_process_reports_its_exit_and_can_be_killed(tmp_path: Path) -> None:
    done = await spawn(["/bin/sh", "-c", "echo err >&2; exit 7"], limit=1024)
    assert await done.wait() == 7 and done.returncode == 7
    assert await done.stderr.read() == b"err\n"
    sleeper = await spawn(["/bin/sleep", "60"], limit=1024, start_new_session=True)
    assert sleeper.returncode is None
    os.killpg(sleeper.pid, signal.SIGKILL)
    assert await sleeper.wait() == -signal.SIGKILL

"""The bubblewrap sandbox, run for real: isolation, environment, streams, and kill."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from starlette.types import Receive, Scope, Send

from harness_bases.base import Invocation
from tests.support import read_only_probe, syscall_probe
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY
from uhp_server.sandbox import neutral_mounts
from uhp_server.sandbox.base import SandboxError, SessionMounts
from uhp_server.sandbox.local import LocalSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent", "UHP_TEST_MARK": "yes"}


@pytest.fixture
def mounts(tmp_path: Path) -> SessionMounts:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tool.txt").write_text("tool\n")
    # workspace and home do not exist yet: the sandbox creates them.
    return SessionMounts(workspace=tmp_path / "ws", home=tmp_path / "home", tools=tools)


@pytest.fixture
def sandbox() -> LocalSandbox:
    return LocalSandbox()


async def run_full(
    sandbox: LocalSandbox, mounts: SessionMounts, script: str
) -> tuple[int, list[str], str]:
    """Run `sh -c script`; returns exit code, stdout lines and the stderr tail."""
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    out = [line.decode() async for line in proc.lines()]
    return await proc.wait(), out, proc.stderr_tail()


async def run(sandbox: LocalSandbox, mounts: SessionMounts, script: str) -> tuple[int, list[str]]:
    code, out, _ = await run_full(sandbox, mounts, script)
    return code, out


def test_gateway_url(sandbox: LocalSandbox) -> None:
    assert sandbox.name == "local"
    # The sandbox's own loopback, where its relay to the gateway socket listens.
    assert sandbox.gateway_url("openai") == "http://127.0.0.1:8080/gateway/openai/v1"
    assert sandbox.gateway_url("anthropic") == "http://127.0.0.1:8080/gateway/anthropic"


async def test_env_is_exactly_the_invocations(
    sandbox: LocalSandbox, mounts: SessionMounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    monkeypatch.setenv("UHP_API_KEY", "server-key")
    proc = await sandbox.start(Invocation(["/usr/bin/env"], ENV, "/workspace"), mounts)
    out = [line.decode() async for line in proc.lines()]
    assert await proc.wait() == 0
    env = dict(line.split("=", 1) for line in out)
    # bwrap itself sets PWD to the --chdir directory; nothing else is added.
    assert env == {**ENV, "PWD": "/workspace"}
    assert not any("sk-server-secret" in line or "server-key" in line for line in out)


async def test_workspace_writable_and_visible_on_host(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    code, _ = await run(sandbox, mounts, "echo hi > /workspace/out.txt && echo ok > ~/h.txt")
    assert code == 0
    assert (mounts.workspace / "out.txt").read_text() == "hi\n"
    assert (mounts.home / "h.txt").read_text() == "ok\n"


async def test_system_and_tools_read_only(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    code, out = await run(
        sandbox,
        mounts,
        "cat /opt/uhp-tools/tool.txt; "
        "touch /usr/uhp-x 2>/dev/null && echo usr-writable; "
        "touch /opt/uhp-tools/x 2>/dev/null && echo tools-writable; "
        "touch /etc/uhp-x 2>/dev/null && echo etc-writable; "
        "touch /uhp-x 2>/dev/null && echo root-writable; "
        "touch /tmp/x && echo tmp-ok",
    )
    assert code == 0
    assert out == ["tool", "tmp-ok"]
    assert not (mounts.tools / "x").exists()


async def test_host_paths_outside_mounts_invisible(
    sandbox: LocalSandbox, mounts: SessionMounts, tmp_path: Path
) -> None:
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text("no")
    checks = [str(secret_dir / "secret.txt"), str(Path(__file__).resolve()), "/root", "/etc/shadow"]
    script = "; ".join(f"test -e {p} && echo visible:{p}" for p in checks) + "; echo done"
    code, out = await run(sandbox, mounts, script)
    assert out == ["done"]
    assert code == 0


async def test_no_capabilities(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    _, out = await run(sandbox, mounts, "grep CapEff /proc/self/status")
    assert out == ["CapEff:\t0000000000000000"]


async def test_host_wide_kernel_settings_are_read_only(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    # Writes the value swappiness already has: harmless should the guard ever fail.
    code, out = await run(
        sandbox,
        mounts,
        'v=$(cat /proc/sys/vm/swappiness); echo "$v" > /proc/sys/vm/swappiness 2>/dev/null '
        "&& echo SYSCTL_WRITE_OK; "
        "test -w /proc/sys/kernel/core_pattern && echo core-pattern-writable; "
        "test -w /proc/sysrq-trigger && echo sysrq-writable; "
        "head -c1 /proc/kcore 2>/dev/null | wc -c; echo done",
    )
    assert code == 0
    assert out == ["0", "done"]


async def test_the_agent_never_runs_as_host_root(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    mounts.home.mkdir()
    (mounts.home / "config.toml").write_text("written by the server\n")  # as base.prepare() does
    code, out = await run(
        sandbox, mounts, "id -u; cat ~/config.toml; echo more >> ~/config.toml; touch /workspace/f"
    )
    assert code == 0
    expected_uid = 200000 if os.getuid() == 0 else os.getuid()  # the uid range's first
    assert out == [str(expected_uid), "written by the server"]
    assert (mounts.workspace / "f").stat().st_uid == expected_uid


def test_root_is_refused_as_the_agent_user() -> None:
    with pytest.raises(ValueError, match="root"):
        LocalSandbox(user="0:0")


async def test_host_loopback_unreachable_no_dns(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    # Its own network namespace: a service on the host's loopback is not there at all.
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readline())
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        code, out = await run(
            sandbox,
            mounts,
            f"bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null || echo refused; "
            "getent hosts pypi.org || echo no-dns; "
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
        )
        await asyncio.sleep(0.1)
    assert code == 0
    assert out == ["refused", "no-dns", "lo"]
    assert received == []


# None: as the server chooses (a root server listens in the sandbox's own network namespace,
# netns.py); True: the relays to a socket folder an unprivileged server uses.
@pytest.mark.parametrize("relays", [None, True], ids=["chosen", "relays"])
async def test_the_gateway_is_reached_through_the_sandboxs_own_socket(
    mounts: SessionMounts, relays: bool | None
) -> None:
    doors: list[str] = []

    async def gateway(scope: Scope, receive: Receive, send: Send) -> None:
        doors.append(scope[DOOR_SCOPE_KEY])
        body = json.dumps({"path": scope["path"]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    sandbox = LocalSandbox(relays=relays)
    await sandbox.open(gateway)
    mounts = dataclasses.replace(mounts, door="local:turn-a")
    url = sandbox.gateway_url("openai") + "/models"
    code, out = await run(sandbox, mounts, f"curl -sS {url}; echo; curl -sS {url[:-25]}/v1/uhp")
    assert code == 0
    assert json.loads(out[0]) == {"path": "/gateway/openai/v1/models"}
    assert json.loads(out[1])["error"]["code"] == "uhpserver_not_found"  # only the gateway
    assert doors == ["local:turn-a"]


async def test_stdin_stdout_round_trip(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    proc = await sandbox.start(Invocation(["/bin/cat"], ENV, "/workspace"), mounts)
    await proc.write(b"hello\nworld\nno newline")
    await proc.close_stdin()
    assert [line async for line in proc.lines()] == [b"hello", b"world", b"no newline"]
    assert await proc.wait() == 0


async def test_five_megabyte_line(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    script = "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo after"
    code, out = await run(sandbox, mounts, script)
    assert code == 0
    assert len(out) == 2
    assert out[0] == "a" * 5_000_000
    assert out[1] == "after"


async def test_stderr_tail(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    # 1 MB of stderr must not block the child, and only the tail is kept.
    script = "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo END-OF-ERR >&2; echo out"
    code, out, tail = await run_full(sandbox, mounts, script)
    assert (code, out) == (0, ["out"])
    assert tail.endswith("END-OF-ERR\n")
    assert tail.startswith("eeee")
    assert len(tail) <= 8 * 1024


def _pgrep(marker: str) -> list[str]:
    res = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return res.stdout.split()


async def test_kill_stops_the_whole_tree(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    # A unique sleep length marks our processes; the setsid'd one ignores SIGHUP and has left
    # the process group, so only the pid namespace can take it down.
    marker = f"1000.{secrets.randbelow(10**9):09d}"
    script = (
        f"setsid sh -c 'trap \"\" HUP; sleep {marker}' & "
        f"sleep {marker} & "
        "sleep 0.3; echo ready; wait"
    )
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    lines = proc.lines()
    assert await asyncio.wait_for(anext(lines), 10) == b"ready"
    assert len(_pgrep(f"sleep {marker}")) >= 2
    await proc.kill()
    await proc.kill()  # idempotent
    for _ in range(50):
        if not _pgrep(marker):
            break
        await asyncio.sleep(0.1)
    assert _pgrep(marker) == []
    assert await proc.wait() < 0


async def test_missing_bwrap_raises(mounts: SessionMounts) -> None:
    sandbox = LocalSandbox(bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxError):
        await sandbox.start(Invocation(["/bin/true"], ENV, "/workspace"), mounts)


async def test_missing_program_or_cwd_raises(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    with pytest.raises(SandboxError):
        await sandbox.start(Invocation(["/opt/uhp-tools/nope"], ENV, "/workspace"), mounts)
    with pytest.raises(SandboxError):
        await sandbox.start(Invocation(["/bin/true"], ENV, "/workspace/missing"), mounts)


async def test_bwrap_setup_failure_raises(mounts: SessionMounts, tmp_path: Path) -> None:
    # A "bwrap" that exits before creating the sandbox (as one without namespaces would).
    fake = tmp_path / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    sandbox = LocalSandbox(bwrap=str(fake))
    with pytest.raises(SandboxError, match="namespace"):
        await sandbox.start(Invocation(["/bin/true"], ENV, "/workspace"), mounts)


async def test_open_clears_what_a_killed_server_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "0123456789abcdef").mkdir(parents=True)
    (run_dir / "0123456789abcdef" / "gateway.sock").write_text("")
    sandbox = LocalSandbox(run_dir)
    await sandbox.open(None)
    assert list(run_dir.iterdir()) == []
    assert run_dir.stat().st_mode & 0o777 == 0o700


async def test_a_turn_folder_is_private_and_goes_with_the_sandbox(
    tmp_path: Path, mounts: SessionMounts
) -> None:
    server_id = f"turnfolder{secrets.token_hex(4)}"
    sandbox = LocalSandbox(tmp_path / "run", server_id=server_id, relays=True)
    await sandbox.open(None)
    proc = await sandbox.start(Invocation(["/bin/sleep", "30"], ENV, "/workspace"), mounts)
    # In the run folder, or beside the turn's overlays when the server mounts them.
    roots = (tmp_path / "run", neutral_mounts.ROOT / server_id)
    (socket,) = (s for root in roots if root.is_dir() for s in root.glob("**/gateway.sock"))
    assert socket.parent.stat().st_mode & 0o777 == 0o700
    assert socket.stat().st_mode & 0o777 == 0o600
    await proc.kill()
    assert not socket.parent.exists()
    assert list((tmp_path / "run").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root server listens in the sandbox")
async def test_the_gateway_listens_in_the_sandbox_alone(
    tmp_path: Path, mounts: SessionMounts
) -> None:
    # A root server makes the gateway's listening socket inside the sandbox's network
    # namespace (netns.py): the sandbox reaches it on its loopback, the host's loopback does
    # not, no relay runs in the sandbox, and no socket file is left anywhere.
    doors: list[str] = []

    async def gateway(scope: Scope, receive: Receive, send: Send) -> None:
        doors.append(scope[DOOR_SCOPE_KEY])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sandbox = LocalSandbox(tmp_path / "run")
    assert not sandbox.relays
    await sandbox.open(gateway)
    mounts = dataclasses.replace(mounts, door="local:turn-b")
    url = sandbox.gateway_url("openai") + "/models"
    script = f"curl -sS -o /dev/null -w '%{{http_code}}\\n' {url}; ps -eo comm"
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    out = [line.decode() async for line in proc.lines()]
    assert await proc.wait() == 0
    assert out[0] == "204" and "socat" not in out
    assert doors == ["local:turn-b"]
    # The host's loopback, port and all, never reaches that door.
    with contextlib.suppress(OSError):
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", 8080), 2)
        writer.write(b"GET /gateway/openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
    assert doors == ["local:turn-b"]
    assert [p for p in (tmp_path / "run").rglob("*") if p.is_socket()] == []


async def test_the_kernel_surface_is_filtered(sandbox: LocalSandbox, mounts: SessionMounts) -> None:
    # io_uring, the keyring, bpf, perf, userfaultfd, mounts and new user namespaces answer
    # EPERM (clone3 ENOSYS, for libc to fall back to clone), an x32 call kills; what
    # programs need still works (sandbox/syscall_filter.py).
    code, out = await run(sandbox, mounts, syscall_probe.command())
    assert code == 0
    assert syscall_probe.answers(out) == syscall_probe.expected(platform.machine())


async def test_unshare_cannot_make_a_user_namespace(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    code, out = await run(sandbox, mounts, "unshare -Ur id -u 2>&1; echo exit=$?")
    assert code == 0
    assert out[-1] == "exit=1" and "Operation not permitted" in out[0]


# The red team's issue 27 item 11: a bind mount's line in /proc/self/mountinfo carries its
# source's path inside the source's filesystem; the sandbox binds per-turn overlays instead
# (sandbox/neutral_mounts.py), whose lines show only neutral layer names.
async def test_the_mount_table_shows_no_host_path_nor_session_id(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    session = tmp_path / "data" / "sessions" / "sess_0123456789abcdef"
    tools = tmp_path / "tools"
    tools.mkdir()
    mounts = SessionMounts(session / "workspace", session / "home", tools)
    code, out = await run(sandbox, mounts, "cat /proc/self/mountinfo /proc/mounts")
    assert code == 0 and any(" /workspace " in line for line in out)
    table = "\n".join(out)
    assert str(tmp_path) not in table
    assert "sess_0123456789abcdef" not in table


ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="only a root server switches uid")


@ROOT_ONLY
async def test_principals_agents_run_as_uids_of_their_own(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    uids = []
    for number in (0, 1):
        session = tmp_path / f"s{number}"
        mounts = SessionMounts(session / "ws", session / "home", tools, agent_number=number)
        code, out = await run(sandbox, mounts, "id -u; id -g")
        assert code == 0
        uids.append(out)
        assert (session / "ws").stat().st_uid == int(out[0])  # the folders handed over
    assert uids == [["200001", "200001"], ["200002", "200002"]]


@ROOT_ONLY
async def test_an_explicit_user_is_every_principals(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    sandbox = LocalSandbox(user="1234:1234")
    for number in (0, 1):
        mounts = SessionMounts(tmp_path / "ws", tmp_path / "home", tools, agent_number=number)
        _, out = await run(sandbox, mounts, "id -u")
        assert out == ["1234"]


def test_a_principal_beyond_the_uid_range_is_refused(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    users = LocalSandbox(uid_range="300000-300002").users
    assert users.default == (300000, 300000)  # turns of no principal's
    assert users.for_principal(1) == (300002, 300002)
    with pytest.raises(ValueError, match="UHP_AGENT_UID_RANGE"):
        users.for_principal(2)


# The red team's per-uid quota channel: one principal's agent holding every inotify instance
# its uid may have (fs.inotify.max_user_instances) must leave another's watchers working.
INOTIFY = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[1] == "hog":
    held = []
    while libc.inotify_init1(0) >= 0:
        held.append(1)
    print("hog", len(held), os.strerror(ctypes.get_errno()), flush=True)
    time.sleep(30)
else:
    fd = libc.inotify_init1(0)
    print("ok" if fd >= 0 else os.strerror(ctypes.get_errno()))
"""


@ROOT_ONLY
async def test_one_principal_exhausting_inotify_leaves_another_its_own(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "inotify.py").write_text(INOTIFY)
    hog_mounts = SessionMounts(
        tmp_path / "a" / "ws", tmp_path / "a" / "home", tools, agent_number=0
    )
    hog = await sandbox.start(
        Invocation(["python3", "/opt/uhp-tools/inotify.py", "hog"], ENV, "/workspace"), hog_mounts
    )
    try:
        line = await anext(aiter(hog.lines()))
        assert line.decode().startswith("hog ") and "Too many open files" in line.decode()
        other = SessionMounts(tmp_path / "b" / "ws", tmp_path / "b" / "home", tools, agent_number=1)
        code, out = await run(sandbox, other, "python3 /opt/uhp-tools/inotify.py watch")
        assert code == 0 and out == ["ok"]
    finally:
        await hog.kill()


async def test_dev_shm_is_writable_and_the_sandboxs_own(
    sandbox: LocalSandbox, mounts: SessionMounts
) -> None:
    # POSIX shared memory and semaphores (Python's multiprocessing locks) live in /dev/shm.
    script = (
        "stat -c %a /dev/shm; touch /dev/shm/mark && echo wrote; "
        "python3 -c 'import multiprocessing as m; m.Lock(); print(\"lock\")'"
    )
    code, out = await run(sandbox, mounts, script)
    assert code == 0 and out == ["1777", "wrote", "lock"]
    code, out = await run(sandbox, mounts, "ls -A /dev/shm")
    assert code == 0 and out == []  # not the other sandbox's, nor the host's


async def test_the_agents_uid_has_an_account(sandbox: LocalSandbox, tmp_path: Path) -> None:
    # A uid from the range has no host account; programs that look theirs up (Node's
    # os.userInfo(), getpass, whoami) need one. No host account shows either.
    tools = tmp_path / "tools"
    tools.mkdir()
    mounts = SessionMounts(tmp_path / "ws", tmp_path / "home", tools, agent_number=3)
    code, out = await run(
        sandbox,
        mounts,
        "whoami; python3 -c 'import getpass; print(getpass.getuser())'; "
        "cut -d: -f1 /etc/passwd; echo x >> /etc/passwd || echo read-only",
    )
    assert code == 0
    assert out == ["agent", "agent", "root", "agent", "nobody", "read-only"]


async def test_a_read_only_folder_refuses_a_hostile_agent_and_a_writable_one_takes_its_writes(
    sandbox: LocalSandbox, mounts: SessionMounts, tmp_path: Path
) -> None:
    await read_only_probe.check_extra_mounts(
        lambda with_extra, script: run(sandbox, with_extra, script), mounts, tmp_path
    )

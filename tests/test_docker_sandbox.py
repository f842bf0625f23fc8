"""The docker sandbox, run for real against a live engine: hardening, network, streams, kill,
reaping. Skipped, loudly, only when no Docker engine answers (scripts/test.sh starts one).
UHP_TEST_DOCKER_RUNTIME=runsc runs every test here in gVisor (scripts/test.sh does, too)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import platform
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from starlette.types import Receive, Scope, Send

from harness_bases.base import Invocation
from tests.support import read_only_probe, syscall_probe
from tests.support.docker import TEST_DOCKER_RUNTIME, engine_or_skip, runtime_image_or_skip
from uhp_server.sandbox import neutral_mounts
from uhp_server.sandbox.base import SandboxError, SessionMounts
from uhp_server.sandbox.docker import DockerSandbox, slot_mounts
from uhp_server.sandbox.docker.container import Limits, seccomp_option
from uhp_server.sandbox.docker.process import DockerProcess
from uhp_server.sandbox.egress import EgressPolicy

pytestmark = pytest.mark.heavy  # a real engine: containers take a second each

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent", "UHP_TEST_MARK": "yes"}
AGENT_UID = 200000  # the tests run as root: agents run as the uid range's (agent_user.py)
GVISOR = TEST_DOCKER_RUNTIME == "runsc"
# The pids limit of the fixture's containers. In gVisor the container's pids cgroup also
# holds the Sentry's own host threads (about 40 idle, measured here), so the agent's share
# of a limit is that much smaller: 64 would not leave it enough to start.
PIDS = 256 if GVISOR else 64


async def gateway_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Stands in for the server's app: answers every path with what it was asked."""
    if scope["type"] != "http":
        return
    body = json.dumps({"path": scope["path"]}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def image() -> str:
    return runtime_image_or_skip()


@pytest.fixture
def mounts(tmp_path: Path) -> SessionMounts:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tool.txt").write_text("tool\n")
    return SessionMounts(
        workspace=tmp_path / "ws",
        home=tmp_path / "home",
        tools=tools,
        labels={"uhp.session": "hsess_test", "uhp.response": "resp_test"},
    )


# Every test here runs twice: on a container created for the turn, and on one of the ready
# pool's (sandbox/docker/ready_pool.py), filled before the test starts. gVisor has no pool.
SANDBOX_KINDS = ["cold"] if GVISOR else ["cold", "pooled"]


@pytest.fixture(params=SANDBOX_KINDS)
async def sandbox(
    request: pytest.FixtureRequest, tmp_path: Path, image: str
) -> AsyncIterator[DockerSandbox]:
    pooled = request.param == "pooled"
    box = DockerSandbox(
        tmp_path / "data",
        image=image,
        runtime=TEST_DOCKER_RUNTIME,
        limits=Limits(pids=PIDS, memory="256m"),
        ready_pool=1 if pooled else 0,
    )
    await box.open(gateway_app)
    if pooled:
        await filled(box)
    yield box
    await box.close()


async def filled(box: DockerSandbox, timeout: float = 60) -> None:
    """Wait until the pool holds a ready slot of the default uid (the fixture's turns')."""
    assert box.pool is not None, "the ready pool is off here"
    box.pool.want(box.user)
    async with asyncio.timeout(timeout):
        while not box.pool.ready(box.user):
            await asyncio.sleep(0.05)


def pooled(sandbox: DockerSandbox) -> bool:
    return sandbox.pool is not None


async def start(sandbox: DockerSandbox, mounts: SessionMounts, script: str) -> DockerProcess:
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    assert isinstance(proc, DockerProcess)
    return proc


async def run_full(
    sandbox: DockerSandbox, mounts: SessionMounts, script: str
) -> tuple[int, list[str], str]:
    proc = await start(sandbox, mounts, script)
    await proc.close_stdin()
    out = [line.decode() async for line in proc.lines()]
    return await proc.wait(), out, proc.stderr_tail()


async def run(sandbox: DockerSandbox, mounts: SessionMounts, script: str) -> tuple[int, list[str]]:
    code, out, _ = await run_full(sandbox, mounts, script)
    return code, out


def inspect(container_id: str) -> dict[str, Any] | None:
    with contextlib.suppress(docker.errors.NotFound):
        return engine_or_skip().inspect_container(container_id)
    return None


def inspected(container_id: str) -> dict[str, Any]:
    """The details of a container that must exist."""
    info = inspect(container_id)
    assert info is not None, f"no container {container_id}"
    return info


async def gone(container_id: str, timeout: float = 10) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while inspect(container_id) is not None:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


# -- the process ---------------------------------------------------------------------------


async def test_gateway_url_is_the_containers_own_loopback(sandbox: DockerSandbox) -> None:
    assert sandbox.name == "docker"
    assert sandbox.gateway_url("openai") == "http://127.0.0.1:8080/gateway/openai/v1"
    assert sandbox.gateway_url("anthropic") == "http://127.0.0.1:8080/gateway/anthropic"


async def test_env_is_the_invocations_and_holds_no_server_variable(
    sandbox: DockerSandbox, mounts: SessionMounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    monkeypatch.setenv("UHP_API_KEY", "server-key")
    proc = await sandbox.start(Invocation(["/usr/bin/env"], ENV, "/workspace"), mounts)
    out = [line.decode() async for line in proc.lines()]
    assert await proc.wait() == 0
    env = dict(line.split("=", 1) for line in out)
    # Docker adds the container's HOSTNAME, the launcher's shell PWD; nothing else is added.
    assert env == {**ENV, "HOSTNAME": "uhp-sandbox", "PWD": "/workspace"}


async def test_stdin_stdout_round_trip(sandbox: DockerSandbox, mounts: SessionMounts) -> None:
    proc = await sandbox.start(Invocation(["/bin/cat"], ENV, "/workspace"), mounts)
    await proc.write(b"hello\nworld\n")
    lines = proc.lines()
    assert await asyncio.wait_for(anext(lines), 10) == b"hello"
    await proc.write(b"no newline")
    await proc.close_stdin()  # cat sees end-of-file and exits
    assert [line async for line in lines] == [b"world", b"no newline"]
    assert await proc.wait() == 0


async def test_five_megabyte_line(sandbox: DockerSandbox, mounts: SessionMounts) -> None:
    code, out = await run(sandbox, mounts, "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo z")
    assert code == 0
    assert out == ["a" * 5_000_000, "z"]


async def test_stderr_tail(sandbox: DockerSandbox, mounts: SessionMounts) -> None:
    script = "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo END-OF-ERR >&2; echo out"
    code, out, tail = await run_full(sandbox, mounts, script)
    assert (code, out) == (0, ["out"])
    assert tail.endswith("END-OF-ERR\n") and tail.startswith("eeee")
    assert len(tail) <= 8 * 1024


async def test_exit_code_and_the_container_removes_itself(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    proc = await start(sandbox, mounts, "exit 7")
    assert await proc.wait() == 7
    assert await gone(proc.container_id)


async def test_kill_removes_the_container_and_everything_in_it(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    proc = await start(
        sandbox, mounts, "setsid sh -c 'trap \"\" HUP; sleep 600' & echo ready; wait"
    )
    assert await asyncio.wait_for(anext(proc.lines()), 20) == b"ready"
    await proc.kill()
    await proc.kill()  # idempotent
    assert await proc.wait() < 0
    assert await gone(proc.container_id)


async def test_the_cli_ends_when_its_attach_goes_away(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    # What happens when the server dies: its end of the attach socket closes. stdin_once
    # makes the container's stdin reach end-of-file, and a CLI reading it exits. With the
    # garbage collector off, no copy of the socket left in the SDK's objects can close it.
    gc.disable()
    try:
        proc = await sandbox.start(Invocation(["/bin/cat"], ENV, "/workspace"), mounts)
        assert isinstance(proc, DockerProcess)
        await proc.write(b"x\n")
        assert await asyncio.wait_for(anext(proc.lines()), 10) == b"x"
        proc._writer.transport.abort()  # as a SIGKILL of the server would
        assert await gone(proc.container_id, timeout=20)
    finally:
        gc.enable()


async def test_missing_program_or_cwd_raises(sandbox: DockerSandbox, mounts: SessionMounts) -> None:
    with pytest.raises(SandboxError):
        await sandbox.start(Invocation(["/opt/uhp-tools/nope"], ENV, "/workspace"), mounts)
    with pytest.raises(SandboxError):
        await sandbox.start(Invocation(["/bin/true"], ENV, "/workspace/missing"), mounts)


# -- hardening -----------------------------------------------------------------------------


async def test_runs_as_a_non_root_user_that_owns_the_session_folders(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    mounts.home.mkdir()
    (mounts.home / "config.toml").write_text("written by the server as root\n")
    code, out = await run(
        sandbox,
        mounts,
        "id -u; id -g; echo hi > /workspace/out.txt && echo ok >> ~/config.toml && echo wrote",
    )
    assert (code, out) == (0, [str(AGENT_UID), str(AGENT_UID), "wrote"])
    assert (mounts.workspace / "out.txt").read_text() == "hi\n"
    assert (mounts.workspace / "out.txt").stat().st_uid == AGENT_UID
    assert (mounts.home / "config.toml").read_text().endswith("ok\n")


async def test_no_capabilities_and_no_new_privileges(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    fields = "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):"
    no_new_privs = (
        "import ctypes; print('NoNewPrivs:\\t%d' % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))"
    )
    _, out = await run(
        sandbox,
        mounts,
        f"grep -h -E '{fields}' /proc/1/status /proc/self/status; python3 -c \"{no_new_privs}\"",
    )
    # init and the agent's own process, then the agent's PR_GET_NO_NEW_PRIVS. gVisor's
    # /proc/<pid>/status has no CapAmb and NoNewPrivs lines: its prctl answers for them.
    assert len(out) == (9 if GVISOR else 13)
    for line in out:
        name, value = line.split(":\t")
        assert value == ("1" if name == "NoNewPrivs" else "0000000000000000"), line


async def test_the_kernel_surface_is_filtered(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    # The engine's default profile still allows io_uring (Docker 20.10) and AF_VSOCK, and
    # filters i386/x32 calls rather than refusing them: the sandbox's own profile
    # (sandbox/syscall_filter.py) answers as the local sandbox's filter does.
    code, out = await run(sandbox, mounts, syscall_probe.command())
    assert code == 0
    assert syscall_probe.answers(out) == syscall_probe.expected(platform.machine(), gvisor=GVISOR)


async def test_read_only_root_with_a_small_writable_tmp(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    code, out = await run(
        sandbox,
        mounts,
        "cat /opt/uhp-tools/tool.txt; "
        "for p in /usr/x /etc/x /x /opt/uhp-tools/x /run/uhp-gateway/x /home/x; do "
        "  touch $p 2>/dev/null && echo writable:$p; done; "
        "touch /tmp/x && echo tmp-ok; df -k /tmp | tail -1 | awk '{print $2}'",
    )
    assert code == 0
    assert out[:2] == ["tool", "tmp-ok"]
    assert int(out[2]) <= 512 * 1024  # the default tmp size, in KiB
    assert not (mounts.tools / "x").exists()


CGROUP_LIMITS = (
    # cgroup v1 files, then v2's, as the container sees its own cgroup
    "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes "
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || "
    "cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max"
)


def host_cgroup_limits(container_id: str) -> list[str]:
    """pids, memory, CPU quota and period of a container's cgroup, read on the host."""
    v1 = Path("/sys/fs/cgroup")
    files = [
        v1 / "pids/docker" / container_id / "pids.max",
        v1 / "memory/docker" / container_id / "memory.limit_in_bytes",
        v1 / "cpu/docker" / container_id / "cpu.cfs_quota_us",
        v1 / "cpu/docker" / container_id / "cpu.cfs_period_us",
    ]
    if not files[0].exists():  # cgroup v2: the systemd driver's scope, or cgroupfs' folder
        scopes = (v1 / f"system.slice/docker-{container_id}.scope", v1 / "docker" / container_id)
        folder = next(p for p in scopes if p.exists())
        pids, memory = ((folder / name).read_text().strip() for name in ("pids.max", "memory.max"))
        return [pids, memory, *(folder / "cpu.max").read_text().split()]
    return [f.read_text().strip() for f in files]


@pytest.mark.skipif(not GVISOR, reason="gVisor's limits: the test below is runc's")
async def test_in_gvisor_the_limits_hold_the_whole_sandbox_and_an_excess_ends_the_turn(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    """In gVisor the agent's processes are not the host's: the container's cgroup holds the
    Sentry (the user-space kernel) with everything it runs, and has the configured limits.
    The agent sees no cgroup files. Going over the process limit ends the whole sandbox (the
    Sentry cannot make a thread), and with it the turn; memory past the limit is refused
    inside the Sentry: the process asking for it ends, the sandbox goes on."""
    proc = await start(sandbox, mounts, "echo up; sleep 30")
    assert await asyncio.wait_for(anext(proc.lines()), 20) == b"up"
    limits = host_cgroup_limits(proc.container_id)
    await proc.kill()
    assert limits[:2] == [str(PIDS), str(256 * 1024 * 1024)]
    assert int(limits[2]) / int(limits[3]) == 2.0  # the default: two cores
    code, out = await run(
        sandbox,
        mounts,
        # Far past it: the Sentry runs a guest's processes on fewer host threads than
        # there are processes (this runsc's systrap platform), and hits the limit later.
        f"for i in $(seq 1 {8 * PIDS}); do sleep 30 & done 2>/dev/null; echo survived",
    )
    assert code != 0 and out == [], (code, out)
    grow = "b = []\nwhile True: b.append(bytearray(8 << 20))"
    code, out, _ = await run_full(
        sandbox, mounts, f"python3 -c '{grow}' 2>/dev/null; echo hog=$?; echo survived"
    )
    assert code == 0 and out[-1] == "survived"
    assert out[0].startswith("hog=") and out[0] != "hog=0", out  # it never got it all


@pytest.mark.skipif(GVISOR, reason="gVisor: the test above")
async def test_pid_memory_and_cpu_limits_are_enforced_by_the_kernel(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    code, out = await run(sandbox, mounts, CGROUP_LIMITS)
    assert code == 0
    values = " ".join(out).split()
    assert values[:2] == ["64", str(256 * 1024 * 1024)]
    quota, period = int(values[2]), int(values[3])
    assert quota / period == 2.0  # the default: two cores
    # And it bites: 100 background processes cannot all start under a limit of 64.
    code, out = await run(
        sandbox,
        mounts,
        "(for i in $(seq 1 100); do sleep 30 & done; wait) 2>/dev/null & "
        "sleep 2; ps -e --no-headers | wc -l",
    )
    assert 30 < int(out[-1]) <= 64


async def test_configured_limits_are_what_the_container_gets(
    tmp_path: Path, image: str, mounts: SessionMounts
) -> None:
    box = DockerSandbox(
        tmp_path / "other",
        image=image,
        runtime=TEST_DOCKER_RUNTIME,
        limits=Limits(memory="128m", cpus=0.5, pids=PIDS // 2, tmp_size="16m"),
    )
    await box.open(gateway_app)
    try:
        proc = await start(box, mounts, "echo up; sleep 30")
        assert await asyncio.wait_for(anext(proc.lines()), 20) == b"up"
        config = inspected(proc.container_id)["HostConfig"]
        await proc.kill()
    finally:
        await box.close()
    assert config["PidsLimit"] == PIDS // 2
    assert config["Memory"] == config["MemorySwap"] == 128 * 1024 * 1024
    assert config["NanoCpus"] == 5 * 10**8
    assert "size=16m" in config["Tmpfs"]["/tmp"]


def behind(source: str) -> str:
    """The folder a bind's source shows: itself, or the folder a turn's overlay of it (a
    mount point `mnt-<name>` beside a symlink `<name>`, sandbox/neutral_mounts.py) is of."""
    path = Path(source)
    if path.is_relative_to(slot_mounts.ROOT):
        # A ready slot's folder (sandbox/docker/slot_mounts.py): the turn's overlay is bound
        # on it, the same filesystem as the overlay's mount point.
        device = path.stat().st_dev
        path = next(p for p in neutral_mounts.ROOT.glob("*/*/mnt-*") if p.stat().st_dev == device)
    if path.is_relative_to(neutral_mounts.ROOT) and path.name.startswith("mnt-"):
        return os.readlink(path.parent / path.name.removeprefix("mnt-"))
    return source


async def test_only_the_session_folders_tools_and_gateway_are_mounted(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    proc = await start(sandbox, mounts, "echo up; sleep 30")
    assert await asyncio.wait_for(anext(proc.lines()), 20) == b"up"
    info = inspected(proc.container_id)
    binds = {(behind(m["Source"]), m["Destination"], m["RW"]) for m in info["Mounts"]}
    await proc.kill()
    gateway = sandbox.gateway.folder
    # The turn's own socket folder (its token is bound to that socket), gone with it.
    turn_folder = next(
        m["Source"] for m in info["Mounts"] if m["Destination"] == "/run/uhp-gateway"
    )
    assert Path(turn_folder).parent == gateway
    assert binds == {
        (str(mounts.workspace), "/workspace", True),
        (str(mounts.home), "/home/agent", True),
        (str(mounts.tools), "/opt/uhp-tools", False),
        (turn_folder, "/run/uhp-gateway", False),
        (str(gateway / "resolv.conf"), "/etc/resolv.conf", False),
        # The agent's account (agent_user.account_files), beside the turn's sockets.
        (f"{turn_folder}/file-passwd", "/etc/passwd", False),
        (f"{turn_folder}/file-group", "/etc/group", False),
    }
    for _ in range(100):
        if not Path(turn_folder).exists():
            break
        await asyncio.sleep(0.05)
    assert not Path(turn_folder).exists()
    if pooled(sandbox):  # beside it now: the folder of the slot the pool made next
        await sandbox.pool.close()  # type: ignore[union-attr]
    assert set(os.listdir(gateway)) == {"resolv.conf"}
    host = info["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges", seccomp_option(gvisor=GVISOR)]
    assert host["Privileged"] is False
    assert host["NetworkMode"] == "none"
    assert host["Init"] is True
    assert info["Config"]["User"] == f"{AGENT_UID}:{AGENT_UID}"
    labels = info["Config"]["Labels"]
    assert labels["uhp.server"] == sandbox.owner
    if pooled(sandbox):  # made before its turn was known: its slot's name, no session's
        assert labels["uhp.slot"] and "uhp.session" not in labels
    else:
        assert labels["uhp.session"] == "hsess_test"
        assert labels["uhp.response"] == "resp_test"


async def test_no_docker_socket_and_no_host_files_inside(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    _, out = await run(
        sandbox,
        mounts,
        "find / -xdev \\( -type s -o -name 'docker.sock' \\) 2>/dev/null; "
        "find /run /var/run -name '*.sock' 2>/dev/null; "
        "test -e /root/.cache && echo host-home; echo done",
    )
    assert out == ["/run/uhp-gateway/gateway.sock", "done"]


# -- network -------------------------------------------------------------------------------


def http_get(path: str) -> str:
    return (
        "exec 3<>/dev/tcp/127.0.0.1/8080 && "
        f"printf 'GET {path} HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3 && "
        "tr -d '\\r' <&3 | tail -1; echo"
    )


async def test_the_gateway_answers_from_inside_and_only_the_gateway(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    code, out = await run(
        sandbox, mounts, f'bash -c "{http_get("/gateway/openai/v1/models")}; {http_get("/v1/uhp")}"'
    )
    assert code == 0
    answers = [line for line in out if line]
    assert json.loads(answers[0]) == {"path": "/gateway/openai/v1/models"}
    # The rest of the API is not served on the sandbox's socket.
    assert json.loads(answers[1])["error"]["code"] == "uhpserver_not_found"


async def test_no_route_no_dns_and_a_host_listener_is_unreachable(
    sandbox: DockerSandbox, mounts: SessionMounts
) -> None:
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(100))
        writer.close()

    # A second listener on the host, on every address, as an unwanted service would be.
    listener = await asyncio.start_server(handle, "0.0.0.0", 0)
    port = listener.sockets[0].getsockname()[1]
    bridge = docker_bridge_address()
    targets = ["127.0.0.1"] + ([bridge] if bridge else [])
    probes = "; ".join(
        f"(echo hi > /dev/tcp/{addr}/{port}) 2>/dev/null && echo reached:{addr}" for addr in targets
    )
    async with listener:
        code, out = await run(
            sandbox,
            mounts,
            f"bash -c '{probes}'; "
            "echo routes; tail -n +2 /proc/net/route; "
            "echo ifaces; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
            "echo dns; grep -v '^#' /etc/resolv.conf; echo end",
        )
        await asyncio.sleep(0.2)
    assert code == 0
    assert out == ["routes", "ifaces", "lo", "dns", "end"]
    assert received == []


async def test_egress_goes_through_the_proxy_to_allowed_hosts_only(
    tmp_path: Path, image: str, mounts: SessionMounts
) -> None:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readline())
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        writer.close()

    web = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = web.sockets[0].getsockname()[1]
    policy = EgressPolicy.from_settings("127.0.0.1", allow_private=True)
    box = DockerSandbox(
        tmp_path / "egress", image=image, runtime=TEST_DOCKER_RUNTIME, egress=policy
    )
    await box.open(gateway_app)

    def via_proxy(url: str) -> str:  # no curl in the image: speak to the proxy by hand
        return (
            "exec 3<>/dev/tcp/127.0.0.1/3128 && "
            f"printf 'GET {url} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3 && "
            "head -n 1 <&3 | cut -d ' ' -f 2"
        )

    try:
        async with web:
            code, out = await run(
                box,
                mounts,
                f'echo "$HTTPS_PROXY"; bash -c "{via_proxy(f"http://127.0.0.1:{port}/ok")}"; '
                f'bash -c "{via_proxy(f"http://localhost:{port}/no")}"',
            )
    finally:
        await box.close()
    assert code == 0
    assert out == ["http://127.0.0.1:3128", "204", "403"]
    assert seen == [b"GET /ok HTTP/1.1\r\n"]


def docker_bridge_address() -> str | None:
    """The host's address on Docker's default bridge: where a container on a normal network
    would find host services. It is on this machine; with no route nothing is sent."""
    try:
        network = engine_or_skip().inspect_network("bridge")
        return network["IPAM"]["Config"][0]["Gateway"]
    except (docker.errors.APIError, KeyError, IndexError):
        return None


# -- no orphans ----------------------------------------------------------------------------


async def test_a_restarted_server_reaps_what_a_dead_one_left(
    tmp_path: Path, image: str, mounts: SessionMounts
) -> None:
    data = tmp_path / "reap"
    first = DockerSandbox(data, image=image, runtime=TEST_DOCKER_RUNTIME)
    await first.open(gateway_app)
    left = await start(first, mounts, "echo up; trap '' TERM; sleep 600")
    assert await asyncio.wait_for(anext(left.lines()), 20) == b"up"
    # Another server's container must survive our reaping.
    neighbour = DockerSandbox(tmp_path / "neighbour", image=image, runtime=TEST_DOCKER_RUNTIME)
    await neighbour.open(gateway_app)
    theirs = await start(neighbour, mounts, "echo up; sleep 600")
    assert await asyncio.wait_for(anext(theirs.lines()), 20) == b"up"
    try:
        # The first server "dies": its gateway goes, its container is left running.
        await first.gateway.close()
        second = DockerSandbox(data, image=image, runtime=TEST_DOCKER_RUNTIME)
        assert second.owner == "" and first.owner
        await second.open(gateway_app)
        assert second.owner == first.owner
        assert await gone(left.container_id)
        assert inspected(theirs.container_id)["State"]["Running"]
        await second.close()
    finally:
        await theirs.kill()
        await neighbour.close()


# Issue 27, item 11: the engine shares this server's mount namespace here, so a container
# binds per-turn overlays and a tmpfs socket folder (sandbox/neutral_mounts.py).
async def test_the_mount_table_shows_no_host_path_nor_session_id(
    sandbox: DockerSandbox, tmp_path: Path
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


# -- a uid per principal (sandbox/agent_user.py) ------------------------------------------

INOTIFY_HOG = (
    "import ctypes, os, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "n = 0\n"
    "while libc.inotify_init1(0) >= 0: n += 1\n"
    "print('hog', n, os.strerror(ctypes.get_errno()), flush=True)\n"
    "time.sleep(60)\n"
)
INOTIFY_ONE = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "print('ok' if libc.inotify_init1(0) >= 0 else os.strerror(ctypes.get_errno()))\n"
)


def principal_mounts(tmp_path: Path, name: str, number: int) -> SessionMounts:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "hog.py").write_text(INOTIFY_HOG)
    (tools / "one.py").write_text(INOTIFY_ONE)
    return SessionMounts(
        tmp_path / name / "ws", tmp_path / name / "home", tools, agent_number=number
    )


async def test_principals_containers_run_as_uids_of_their_own(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    seen = []
    for number in (0, 1):
        mounts = principal_mounts(tmp_path, f"p{number}", number)
        # An account for the uid: Node's os.userInfo() throws without one.
        code, out = await run(
            sandbox, mounts, "id -u; id -g; whoami; node -p 'require(\"os\").userInfo().username'"
        )
        assert code == 0
        seen.append(out)
    assert seen == [
        [str(AGENT_UID + 1), str(AGENT_UID + 1), "agent", "agent"],
        [str(AGENT_UID + 2), str(AGENT_UID + 2), "agent", "agent"],
    ]


@pytest.mark.skipif(GVISOR, reason="gVisor's inotify is the Sentry's own, not the host's quota")
async def test_one_principal_exhausting_inotify_leaves_another_its_own(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    hog = await start(sandbox, principal_mounts(tmp_path, "a", 0), "python3 /opt/uhp-tools/hog.py")
    try:
        line = (await anext(aiter(hog.lines()))).decode()
        assert line.startswith("hog ") and "Too many open files" in line
        other = principal_mounts(tmp_path, "b", 1)
        code, out = await run(sandbox, other, "python3 /opt/uhp-tools/one.py")
        assert (code, out) == (0, ["ok"])
    finally:
        await hog.kill()


async def test_a_read_only_folder_refuses_a_hostile_agent_and_a_writable_one_takes_its_writes(
    sandbox: DockerSandbox, mounts: SessionMounts, tmp_path: Path
) -> None:
    await read_only_probe.check_extra_mounts(
        lambda with_extra, script: run(sandbox, with_extra, script), mounts, tmp_path
    )

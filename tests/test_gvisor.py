"""The docker sandbox in gVisor (UHP_DOCKER_RUNTIME=runsc), run for real: issue 27's kernel
reproductions fail there, the agent's calls reach gVisor's kernel and not the host's, the
read-only mounts hold, the gateway answers. Skipped, loudly, when the engine has no runsc
(bash scripts/docker-engine.sh installs and registers it). The rest of the docker sandbox's
behaviour in gVisor is tests/test_docker_sandbox.py with UHP_TEST_DOCKER_RUNTIME=runsc."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness_bases.base import Invocation
from tests.support.docker import engine_or_skip, runtime_image_or_skip, runtime_or_skip
from tests.support.kernel_probe import probe_command, verdicts
from tests.test_docker_sandbox import ENV, gateway_app, http_get
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.docker import DockerSandbox
from uhp_server.sandbox.docker.process import DockerProcess
from uhp_server.sandbox.docker.runtimes import GVISOR

pytestmark = pytest.mark.heavy  # a real engine: containers take a second each


@pytest.fixture(scope="module")
def image() -> str:
    image = runtime_image_or_skip()
    runtime_or_skip(engine_or_skip(), GVISOR)
    return image


def session(root: Path, name: str) -> SessionMounts:
    tools = root / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "tool.txt").write_text("tool\n")
    return SessionMounts(
        workspace=root / name / "ws",
        home=root / name / "home",
        tools=tools,
        labels={"uhp.session": f"hsess_{name}", "uhp.response": f"resp_{name}"},
    )


@pytest.fixture
async def sandbox(tmp_path: Path, image: str) -> AsyncIterator[DockerSandbox]:
    box = DockerSandbox(tmp_path / "data", image=image, runtime=GVISOR)
    await box.open(gateway_app)
    yield box
    await box.close()


async def run(sandbox: DockerSandbox, mounts: SessionMounts, script: str) -> tuple[int, list[str]]:
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    out = [line.decode() async for line in proc.lines()]
    return await proc.wait(), out


async def test_the_kernel_reproductions_of_issue_27_fail_in_gvisor(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    code, out = await run(sandbox, session(tmp_path, "a"), probe_command())
    assert code == 0, out
    found = verdicts(out)
    assert set(found) == {
        "add_key @u",
        "keyctl search+read @u",
        "io_uring_setup",
        "bpf",
        "unshare -Ur + mount",
    }
    for attempt, verdict in found.items():
        assert verdict.startswith("refused: "), f"{attempt}: {verdict}"


async def test_no_key_crosses_from_one_principals_turn_to_anothers(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """The channel of issue 27: one agent stores a key in its user keyring, another agent
    (another session, another principal) looks it up. Each sandbox is a kernel of its own,
    and the keyring is out of reach besides."""
    code, out = await run(sandbox, session(tmp_path, "a"), probe_command("store"))
    assert code == 0 and verdicts(out)["add_key @u"].startswith("refused: ")
    code, out = await run(sandbox, session(tmp_path, "b"), probe_command("read"))
    assert code == 0 and verdicts(out)["keyctl search+read @u"].startswith("refused: ")


async def test_the_agent_runs_on_gvisors_kernel_and_the_sandbox_under_seccomp_on_the_host(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    mounts = session(tmp_path, "a")
    proc = await sandbox.start(
        Invocation(["/bin/sh", "-c", "uname -r; dmesg | head -1; sleep 30"], ENV, "/workspace"),
        mounts,
    )
    assert isinstance(proc, DockerProcess)
    lines = proc.lines()
    release = (await asyncio.wait_for(anext(lines), 20)).decode()
    boot = (await asyncio.wait_for(anext(lines), 20)).decode()
    host_release = Path("/proc/sys/kernel/osrelease").read_text().strip()
    # On the host: the container's processes are gVisor's (its Sentry and gofer), each under
    # a seccomp filter of its own; none of them is the agent's shell or its sleep.
    host_processes = [process_seccomp(pid) for pid in container_host_pids(proc.container_id)]
    await proc.kill()
    assert release != host_release  # gVisor's own kernel answers (4.4.0)
    assert "gVisor" in boot
    assert host_processes
    for command, seccomp in host_processes:
        assert command not in {"sh", "sleep"}, command
        assert seccomp == "2", command  # SECCOMP_MODE_FILTER


def process_seccomp(pid: int) -> tuple[str, str]:
    """A host process's command name and seccomp mode."""
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return status["Name"], status["Seccomp"].strip()


def container_host_pids(container_id: str) -> list[int]:
    """The host's processes in a container's cgroup (v1's pids controller, or v2's)."""
    root = Path("/sys/fs/cgroup")
    for folder in (
        root / "pids/docker" / container_id,
        root / f"system.slice/docker-{container_id}.scope",
        root / "docker" / container_id,
    ):
        if (folder / "cgroup.procs").exists():
            return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    raise AssertionError(f"no cgroup found for {container_id}")


async def test_read_only_mounts_read_but_cannot_be_written_even_where_their_modes_allow(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    mounts = session(tmp_path, "a")
    mounts.tools.chmod(0o777)  # only the mount stops the agent: it must
    (mounts.tools / "tool.txt").chmod(0o666)
    code, out = await run(
        sandbox,
        mounts,
        "cat /opt/uhp-tools/tool.txt; cd /opt/uhp-tools && ls; "
        "echo x >> /opt/uhp-tools/tool.txt || echo refused-append; "
        "touch /opt/uhp-tools/new || echo refused-create; "
        "touch /run/uhp-gateway/new || echo refused-gateway; "
        "echo x > /etc/resolv.conf || echo refused-resolv",
    )
    assert code == 0
    assert out == [
        "tool",
        "tool.txt",
        "refused-append",
        "refused-create",
        "refused-gateway",
        "refused-resolv",
    ]
    assert (mounts.tools / "tool.txt").read_text() == "tool\n"
    assert sorted(p.name for p in mounts.tools.iterdir()) == ["tool.txt"]


async def test_the_gateway_answers_through_its_socket(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """gVisor connects to no host socket by default: the runtime's --host-uds=open lets it
    reach the turn's gateway socket, the one it mounts."""
    code, out = await run(
        sandbox, session(tmp_path, "a"), f'bash -c "{http_get("/gateway/openai/v1/models")}"'
    )
    assert code == 0
    assert json.loads(next(line for line in out if line)) == {"path": "/gateway/openai/v1/models"}

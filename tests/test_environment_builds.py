"""Environments' builds for real (environments/building/): in the local sandbox and, with an
engine, the docker one (UHP_TEST_DOCKER_RUNTIME=runsc: in gVisor), each installing real
packages from the registries this machine reaches through the egress proxy.

Set UHP_TEST_BUILD_CA_BUNDLE to the CA bundle a TLS-inspecting proxy needs (default: the
host's, which trusts it here); the registries' hosts must resolve for the proxy."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from harness_bases.base import Invocation
from uhp_server.environments.builder import BuildFailed, BuildRequest, BuildResult, Declared
from uhp_server.environments.building import SandboxBuilder
from uhp_server.sandbox.base import ExtraMount, Sandbox, SessionMounts
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.settings import Settings

pytestmark = [
    pytest.mark.heavy,  # real installs from real registries, seconds each
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

REGISTRIES = "pypi.org,files.pythonhosted.org,registry.npmjs.org,deb.debian.org"
CA_BUNDLE = Path(os.environ.get("UHP_TEST_BUILD_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
MOUNT = "/env/demo"
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}


class Steps:
    """The progress a build reported: each stage, in order, and the log it had then."""

    def __init__(self) -> None:
        self.stages: list[str] = []

    async def step(self, stage: str, log: str) -> None:
        if not self.stages or self.stages[-1] != stage:
            self.stages.append(stage)


Make = Callable[..., Awaitable[tuple[Sandbox, SandboxBuilder]]]


@pytest.fixture(params=["local", "docker"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    """make(hosts=REGISTRIES, **settings): a sandbox of the parameter's kind with that egress
    allow-list, opened, and a builder on it."""
    opened: list[Sandbox] = []

    async def factory(hosts: str = REGISTRIES, **overrides: Any) -> tuple[Sandbox, SandboxBuilder]:
        settings = Settings(
            data_dir=tmp_path / "data",
            egress_allow_hosts=hosts,
            egress_allow_private_hosts=True,  # the registries resolve to TEST-NET here
            environment_build_ca_bundle=CA_BUNDLE if CA_BUNDLE.is_file() else None,
            **overrides,
        )
        egress = EgressPolicy.from_settings(hosts, True)
        box: Sandbox
        if request.param == "local":
            from uhp_server.sandbox.local import LocalSandbox

            box = LocalSandbox.from_settings(settings)
            await box.open(None)
        else:
            from tests.support.docker import TEST_DOCKER_RUNTIME, runtime_image_or_skip
            from uhp_server.sandbox.docker.sandbox import DockerSandbox

            async def no_gateway(scope: object, receive: object, send: object) -> None:
                return None

            box = DockerSandbox(
                settings.data_dir,
                image=runtime_image_or_skip(),
                runtime=TEST_DOCKER_RUNTIME,
                egress=egress,
            )
            await box.open(no_gateway)
        opened.append(box)
        return box, SandboxBuilder(box, settings, egress)

    yield factory
    for box in opened:
        await box.close()


def version(builder: SandboxBuilder, n: int, files: dict[str, str], env: str = "env_1") -> Path:
    folder = builder.layout.version(env, n)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


async def build(
    builder: SandboxBuilder,
    folder: Path,
    declared: Declared = Declared(),  # noqa: B008 (frozen)
    principal: str = "prin_a",
    agent: int = 3,
    steps: Steps | None = None,
) -> BuildResult:
    request = BuildRequest(
        environment_id=folder.parent.parent.name,
        principal_id=principal,
        agent_number=agent,
        version=int(folder.name),
        folder=folder,
        mount=MOUNT,
        declared=declared,
    )
    return await builder.build(request, steps or Steps())


async def run_read_only(box: Sandbox, folder: Path, tmp_path: Path, script: str) -> tuple[int, str]:
    """`script` in a session-like sandbox that mounts the version read-only at MOUNT."""
    tools = tmp_path / "session-tools"
    tools.mkdir(exist_ok=True)
    mounts = SessionMounts(
        workspace=tmp_path / "session-ws",
        home=tmp_path / "session-home",
        tools=tools,
        agent_number=3,
        extra=(ExtraMount(folder, MOUNT),),
    )
    process = await box.start(
        Invocation(["/bin/sh", "-c", script + " 2>&1"], ENV, "/workspace"), mounts
    )
    await process.close_stdin()
    out = [line.decode() async for line in process.lines()]
    return await process.wait(), "\n".join(out)


PYTHON_AND_NODE = {
    "requirements.txt": "six==1.16.0\n",
    "package.json": json.dumps(
        {"name": "demo", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}
    ),
}


async def test_a_build_installs_what_the_manifests_say_and_it_runs_read_only_at_the_mount(
    make: Make, tmp_path: Path
) -> None:
    box, builder = await make()
    folder = version(builder, 1, PYTHON_AND_NODE)
    steps = Steps()
    result = await build(builder, folder, Declared(apt=("hello",)), steps=steps)

    assert steps.stages == ["python packages", "node packages", "system packages", "finishing"]
    named = {(p.manager, p.name): p.version for p in result.packages}
    assert named[("pip", "six")] == "1.16.0"
    assert named[("npm", "is-number")] == "7.0.0"
    assert named[("apt", "hello")].startswith("2.10")
    assert "Successfully installed six-1.16.0" in result.log
    assert "dpkg -x hello_" in result.log

    script = (
        f"{MOUNT}/.venv/bin/python -c 'import six; print(six.__version__)' && "
        f"node -e 'console.log(require(\"{MOUNT}/node_modules/is-number\")(5))' && "
        f"{MOUNT}/apt/usr/bin/hello && touch {MOUNT}/.venv/x || echo read-only"
    )
    code, out = await run_read_only(box, folder, tmp_path, script)
    assert code == 0, out
    assert out.splitlines()[:3] == ["1.16.0", "true", "Hello, world!"]
    assert out.splitlines()[-1] == "read-only"


async def test_a_package_that_does_not_exist_fails_the_build_with_its_reason(make: Make) -> None:
    _, builder = await make()
    folder = version(builder, 1, {"requirements.txt": "uhp-no-such-package-4e1c9a==1.0\n"})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, folder)
    assert failed.value.reason == "The python packages step failed (exit code 1)."
    assert "No matching distribution found for uhp-no-such-package-4e1c9a" in failed.value.log


async def test_a_registry_off_the_allow_list_is_refused_by_the_proxy(make: Make) -> None:
    _, builder = await make(hosts="registry.npmjs.org")
    folder = version(builder, 1, {"requirements.txt": "six==1.16.0\n"})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, folder)
    assert "403" in failed.value.log  # the egress proxy's answer to pypi.org


async def test_without_egress_a_build_that_needs_a_registry_fails_at_once(make: Make) -> None:
    _, builder = await make(hosts="")
    needs = version(builder, 1, {"requirements.txt": "six==1.16.0\n"})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, needs)
    assert "UHP_EGRESS_ALLOW_HOSTS" in failed.value.reason
    assert not (needs / ".venv").exists()  # nothing ran

    offline = version(builder, 2, {"requirements.txt": "# nothing yet\n"})
    result = await build(builder, offline)
    assert (offline / ".venv" / "pyvenv.cfg").is_file()
    assert result.packages == ()


async def test_setup_sh_runs_last_in_the_version_folder(make: Make) -> None:
    _, builder = await make()
    setup = "pwd > setup.out; python -c 'import six' && ls node_modules >> setup.out\n"
    folder = version(builder, 1, {**PYTHON_AND_NODE, "setup.sh": setup})
    steps = Steps()
    await build(builder, folder, steps=steps)
    assert steps.stages == ["python packages", "node packages", "setup.sh", "finishing"]
    assert (folder / "setup.out").read_text().splitlines() == [MOUNT, "is-number"]


async def test_each_principal_has_a_download_cache_of_its_own(make: Make) -> None:
    # npm's cache: pip keeps nothing of answers without caching headers (this machine's
    # TLS-inspecting proxy sends none).
    _, builder = await make()
    await build(builder, version(builder, 1, {"package.json": PYTHON_AND_NODE["package.json"]}))
    mine = builder.cache_folder("prin_a")
    assert any((mine / "npm" / "_cacache").rglob("*")), "npm cached nothing for the principal"

    peek = "ls -A /opt/uhp-build-cache > cache.out 2>&1 || true\n"
    other = version(builder, 1, {"setup.sh": peek}, env="env_2")
    await build(builder, other, principal="prin_b", agent=4)
    assert builder.cache_folder("prin_b") != mine
    assert (other / "cache.out").read_text() == ""  # another principal's cache is not there


async def test_a_rebuild_of_an_unchanged_project_reuses_the_installed_trees(make: Make) -> None:
    box, builder = await make()
    first = version(builder, 1, PYTHON_AND_NODE)
    await build(builder, first)
    # The rebuild needs no registry: a builder without egress still builds it.
    offline = SandboxBuilder(box, builder.settings, EgressPolicy())
    second = version(builder, 2, PYTHON_AND_NODE)
    result = await build(offline, second)
    assert "reused (hard links)" in result.log
    six = ".venv/lib/python3.11/site-packages/six.py"
    assert os.stat(first / six).st_ino == os.stat(second / six).st_ino
    assert {p.name for p in result.packages} == {"six", "is-number"}

    changed = version(builder, 3, {**PYTHON_AND_NODE, "requirements.txt": "six==1.15.0\n"})
    result = await build(builder, changed)
    assert "Successfully installed six-1.15.0" in result.log


async def test_a_build_over_its_time_or_disk_limit_is_stopped_with_the_reason(make: Make) -> None:
    _, builder = await make(environment_build_timeout_seconds=3.0, environment_build_disk="16m")
    slow = version(builder, 1, {"setup.sh": "sleep 60\n"})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, slow)
    assert failed.value.reason == "The build exceeded its time limit (3 seconds)."

    filler = (
        "i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); "
        "sleep 0.02; done\n"
    )
    big = version(builder, 2, {"setup.sh": filler})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, big)
    assert "disk limit (16 MiB" in failed.value.reason
    assert len(list(big.glob("f*"))) < 64


async def test_links_a_build_plants_where_the_server_reads_or_writes_are_not_followed(
    make: Make, tmp_path: Path
) -> None:
    # Root-only files outside every build: one the server would write (the tree's key), one
    # it would read (npm's lockfile: its "packages" would show up as the version's).
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"packages": {"node_modules/leaked": {"version": "SECRET"}}}))
    for path in (victim, secret):
        path.chmod(0o600)
    plant = (
        "mkdir -p node_modules && "
        f"ln -sf {victim} node_modules/.uhp-build-key && "
        f"ln -sf {secret} node_modules/.package-lock.json && "
        f"ln -sf {secret} /workspace/apt.list && ln -sf {secret} /workspace/pip.json && "
        "mkfifo node_modules/.fifo"
    )
    manifest = json.dumps({"name": "demo", "version": "1.0.0", "scripts": {"postinstall": plant}})
    _, builder = await make()
    first = version(builder, 1, {"package.json": manifest})
    result = await build(builder, first)
    assert victim.read_text() == "root's own\n"
    assert all("SECRET" not in (p.name, p.version) for p in result.packages)

    # A rebuild reads the earlier version's notes, never its (agent-written) tree.
    second = version(builder, 2, {"package.json": manifest})
    result = await build(builder, second)
    assert "reused" in result.log
    assert victim.read_text() == "root's own\n"
    assert all("SECRET" not in (p.name, p.version) for p in result.packages)


async def test_a_sparse_file_counts_its_size_against_the_disk_limit(make: Make) -> None:
    _, builder = await make(environment_build_disk="16m")
    sparse = version(builder, 1, {"setup.sh": "truncate -s 64M sparse.bin\n"})
    with pytest.raises(BuildFailed) as failed:
        await build(builder, sparse)
    assert "disk limit (16 MiB" in failed.value.reason

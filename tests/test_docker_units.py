"""The docker sandbox's pure parts, without an engine: container settings, users, paths,
the gateway-only filter, folder hand-over, the image recipe's identity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from starlette.types import Message, Receive, Scope, Send

from harness_bases.base import Invocation, SandboxPaths
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY
from uhp_server.sandbox import syscall_filter
from uhp_server.sandbox.base import SandboxError
from uhp_server.sandbox.docker import bootstrap, images
from uhp_server.sandbox.docker.container import (
    HostMounts,
    Limits,
    create_kwargs,
    host_config_kwargs,
    resolve_user,
    seccomp_option,
)
from uhp_server.sandbox.docker.gateway_socket import socket_dir
from uhp_server.sandbox.docker.host_paths import HostPaths
from uhp_server.sandbox.docker.runtimes import check_runtime
from uhp_server.sandbox.docker.sandbox import DockerSandbox
from uhp_server.sandbox.gateway_door import gateway_only
from uhp_server.sandbox.ownership import hand_over
from uhp_server.sandbox.registry import make_sandbox
from uhp_server.settings import Settings

MOUNTS = HostMounts("/h/ws", "/h/home", "/h/tools", "/h/gw", "/h/gw/resolv.conf")


def test_hardening_is_all_there() -> None:
    config = host_config_kwargs(MOUNTS, SandboxPaths(), Limits("1g", 1.5, 100, "64m"))
    assert config["network_mode"] == "none"
    assert config["read_only"] is True
    assert config["cap_drop"] == ["ALL"]
    assert config["security_opt"] == ["no-new-privileges", seccomp_option()]
    profile = json.loads(seccomp_option().removeprefix("seccomp="))
    assert profile == syscall_filter.docker_profile()  # the one list, whole
    assert (config["pids_limit"], config["mem_limit"], config["memswap_limit"]) == (
        100,
        "1g",
        "1g",
    )
    assert config["nano_cpus"] == 1_500_000_000
    assert config["tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
    assert config["auto_remove"] is True and config["init"] is True
    assert config["runtime"] is None  # the engine's default (runc)
    assert config["binds"] == {
        "/h/ws": {"bind": "/workspace", "mode": "rw"},
        "/h/home": {"bind": "/home/agent", "mode": "rw"},
        "/h/tools": {"bind": "/opt/uhp-tools", "mode": "ro"},
        "/h/gw": {"bind": "/run/uhp-gateway", "mode": "ro"},
        "/h/gw/resolv.conf": {"bind": "/etc/resolv.conf", "mode": "ro"},
    }


def test_the_runtime_setting_is_the_containers_runtime() -> None:
    config = host_config_kwargs(MOUNTS, SandboxPaths(), Limits(), "runsc")
    runc = host_config_kwargs(MOUNTS, SandboxPaths(), Limits())
    assert config["runtime"] == "runsc"
    # Everything else is the same hardening, plus gVisor's seccomp profile.
    differ = {"runtime", "security_opt"}
    assert {k: v for k, v in config.items() if k not in differ} == {
        k: v for k, v in runc.items() if k not in differ
    }
    # The syscall filter's gVisor variant (test_syscall_filter.py checks what it holds).
    assert config["security_opt"] == ["no-new-privileges", seccomp_option(gvisor=True)]
    assert runc["security_opt"] == ["no-new-privileges", seccomp_option()]
    assert seccomp_option(gvisor=True) != seccomp_option()


class FakeInfoApi:
    def __init__(self, runtimes: dict[str, object]) -> None:
        self.runtimes = runtimes

    def info(self) -> dict[str, object]:
        return {"Runtimes": self.runtimes}


def test_an_engine_without_the_runtime_is_refused_saying_how_to_register_it() -> None:
    engine = FakeInfoApi({"runc": {"path": "runc"}})
    check_runtime(engine, "", "unix:///e.sock")  # the engine's default: nothing to check
    check_runtime(engine, "runc", "unix:///e.sock")
    with pytest.raises(SandboxError) as refused:
        check_runtime(engine, "runsc", "unix:///e.sock")
    assert "UHP_DOCKER_RUNTIME=runsc" in str(refused.value)
    assert "unix:///e.sock" in str(refused.value) and "it has: runc" in str(refused.value)
    assert "scripts/docker-engine.sh" in str(refused.value)
    registered = {"path": "/usr/bin/runsc", "runtimeArgs": ["--oci-seccomp", "--host-uds=open"]}
    check_runtime(FakeInfoApi({"runc": {}, "runsc": registered}), "runsc", "unix:///e.sock")
    spelled_out = {"runtimeArgs": ["--oci-seccomp=true", "--host-uds=all"]}
    check_runtime(FakeInfoApi({"runsc": spelled_out}), "runsc", "unix:///e.sock")


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (None, "--oci-seccomp --host-uds=open"),
        (["--network=none", "--host-uds=open"], "--oci-seccomp"),
        (["--network=none", "--oci-seccomp"], "--host-uds=open"),
        (["--oci-seccomp", "--host-uds=open", "--oci-seccomp=false"], "--oci-seccomp"),
        (["--oci-seccomp=true", "--host-uds=none"], "--host-uds=open"),
    ],
)
def test_a_runsc_registered_without_the_flags_the_server_needs_is_refused(
    args: list[str] | None, missing: str
) -> None:
    """Without --oci-seccomp runsc ignores the syscall filter's profile, silently."""
    registered: dict[str, object] = {"path": "/usr/bin/runsc"}
    if args is not None:
        registered["runtimeArgs"] = args
    with pytest.raises(SandboxError) as refused:
        check_runtime(FakeInfoApi({"runsc": registered}), "runsc", "unix:///e.sock")
    assert f"without {missing}" in str(refused.value)
    assert "scripts/docker-engine.sh" in str(refused.value)


def test_gvisor_refuses_a_pids_limit_its_own_kernel_needs_most_of(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="at least 128"):
        DockerSandbox(tmp_path, runtime="runsc", limits=Limits(pids=64))
    DockerSandbox(tmp_path, runtime="runsc", limits=Limits(pids=128))
    DockerSandbox(tmp_path, limits=Limits(pids=64))  # runc: the agent's own processes only


def test_the_cli_starts_behind_the_gateway_relay_with_its_own_env() -> None:
    invocation = Invocation(["/opt/uhp-tools/cli", "serve"], {"HOME": "/home/agent"}, "/workspace")
    kwargs = create_kwargs(
        image="img", invocation=invocation, user=(1000, 1000), labels={"a": "b"}, host_config={}
    )
    assert kwargs["command"] == ["/usr/local/bin/uhp-launch", "8080", "/opt/uhp-tools/cli", "serve"]
    assert kwargs["environment"] == {"HOME": "/home/agent"}
    assert kwargs["user"] == "1000:1000"
    assert kwargs["stdin_open"] is True and kwargs["detach"] is False and kwargs["tty"] is False


def test_the_agent_is_never_root(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_user("1234:5678") == (1234, 5678)
    assert resolve_user("1234") == (1234, 1234)
    with pytest.raises(ValueError):
        resolve_user("0:0")
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert resolve_user("auto") == (200000, 200000)  # the uid range's first (agent_user.py)
    monkeypatch.setattr(os, "getuid", lambda: 4321)
    monkeypatch.setattr(os, "getgid", lambda: 99)
    assert resolve_user("auto") == (4321, 99)


def test_settings_reach_the_sandbox(tmp_path: Path) -> None:
    settings = Settings(
        sandbox="docker",
        data_dir=tmp_path,
        docker_image="my/agent:1",
        docker_memory="1g",
        docker_cpus=0.5,
        docker_pids_limit=128,
        docker_tmp_size="32m",
        docker_user="2000:2000",
        docker_hosts="unix:///run/a.sock, ssh://me@b",
        docker_host_max_turns=3,
        docker_runtime="runsc",
    )
    sandbox = make_sandbox(settings)
    assert isinstance(sandbox, DockerSandbox)
    assert [e.url for e in sandbox.engines.engines] == ["unix:///run/a.sock", "ssh://me@b"]
    assert sandbox.engines.max_turns == 3
    assert sandbox.image == "my/agent:1"
    assert sandbox.limits == Limits("1g", 0.5, 128, "32m")
    assert sandbox.user == (2000, 2000)
    assert sandbox.runtime == "runsc"
    assert sandbox.gateway_url("openai") == "http://127.0.0.1:8080/gateway/openai/v1"


def test_defaults_run_this_versions_image_within_the_hosts_cores(tmp_path: Path) -> None:
    sandbox = make_sandbox(Settings(sandbox="docker", data_dir=tmp_path, docker_cpus=10_000))
    assert isinstance(sandbox, DockerSandbox)
    assert sandbox.image == images.runtime_tag()
    assert sandbox.limits.cpus == float(os.cpu_count() or 1)


def test_host_paths_translate_through_the_servers_own_mounts(tmp_path: Path) -> None:
    identity = HostPaths()
    assert identity(tmp_path / "x") == str((tmp_path / "x").resolve())
    mapped = HostPaths({"/data": "/var/lib/docker/volumes/v/_data", "/data/tools": "/opt/t"})
    assert mapped(Path("/data/sessions/s/workspace")) == (
        "/var/lib/docker/volumes/v/_data/sessions/s/workspace"
    )
    assert mapped(Path("/data/tools/codex")) == "/opt/t/codex"  # the longest mount wins
    assert mapped(Path("/datax/y")) == "/datax/y"


def test_a_long_data_dir_still_gets_a_socket_path_that_fits(tmp_path: Path) -> None:
    assert socket_dir(Path("/data")) == Path("/data/run/gateway")
    deep = tmp_path / ("d" * 120)
    folder = socket_dir(deep)
    assert len(str(folder / ("t" * 16) / "gateway.sock")) <= 100  # a turn's socket fits
    assert folder == socket_dir(deep)  # stable across restarts


async def test_only_gateway_routes_pass_the_socket() -> None:
    seen: list[str] = []
    doors: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])
        doors.append(scope[DOOR_SCOPE_KEY])

    sent: list[Message] = []

    async def receive() -> Message:
        raise AssertionError("the filter reads no body")

    async def send(message: Message) -> None:
        sent.append(message)

    filtered = gateway_only(app, "door-a")
    await filtered({"type": "http", "path": "/gateway/openai/v1/responses"}, receive, send)
    await filtered({"type": "http", "path": "/v1/responses"}, receive, send)
    await filtered({"type": "http", "path": "/gatewayx"}, receive, send)
    assert seen == ["/gateway/openai/v1/responses"]
    assert doors == ["door-a"]  # every request names the socket it came through
    statuses = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert statuses == [404, 404]
    body = json.loads(sent[1]["body"])
    assert body["error"]["code"] == "uhpserver_not_found"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_hand_over_changes_only_what_is_not_the_agents(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    (tmp_path / "link").symlink_to("/etc/passwd")
    assert hand_over(1000, 1000, tmp_path) == 5
    assert (tmp_path / "a" / "b" / "f").stat().st_uid == 1000
    assert os.lstat(tmp_path / "link").st_uid == 1000
    assert Path("/etc/passwd").stat().st_uid == 0  # links are never followed
    assert hand_over(1000, 1000, tmp_path) == 0


def test_the_image_tag_follows_the_recipe() -> None:
    digest = images.recipe_digest()
    assert len(digest) == 64
    assert images.runtime_tag() == f"uhp-runtime:{digest[:12]}"
    recipe = (images.RECIPE_DIR / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=debian:bookworm-slim" in recipe
    assert "USER agent" in recipe


def test_the_bootstrap_mirror_is_the_hosts_debian_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    (sources / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
    )
    monkeypatch.setattr(bootstrap, "_SOURCES", (tmp_path / "none.list", sources))
    assert bootstrap.debian_mirror() == "http://mirror.example/debian"
    monkeypatch.setattr(bootstrap, "_SOURCES", (tmp_path / "none.list",))
    assert bootstrap.debian_mirror() == bootstrap.DEFAULT_MIRROR

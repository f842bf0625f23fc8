"""Security §1, §2 and §8 end to end: what the agent can see, whose objects are whose, and
what an error withholds."""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
from typing import Any

import httpx
import pytest

from tests.conftest import (
    API_KEY,
    DEFAULT_MODEL,
    PROVIDER_KEY,
    TEST_BASE,
    TEST_SANDBOX,
    backend_under_test,
)
from tests.support import passes, syscall_probe
from tests.support.base_under_test import BASE
from tests.support.docker import TEST_DOCKER_RUNTIME
from tests.support.server import ServerProcess
from tests.support.shell_probe import as_one_command
from tests.test_tasks_e2e import create
from uhp_server.gateway.tokens import TOKEN_PREFIX

pytestmark = pytest.mark.slow

# The sandbox under test is gVisor's (the Sentry answers the calls the filter lets through).
IN_GVISOR = TEST_SANDBOX == "docker" and TEST_DOCKER_RUNTIME == "runsc"

# One model call on each backend's gateway route, for checking a token is dead.
MODEL_CALLS = {
    "openai": ("/gateway/openai/v1/responses", {"model": DEFAULT_MODEL, "input": "SAY hi"}),
    "anthropic": (
        "/gateway/anthropic/v1/messages",
        {"model": DEFAULT_MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]},
    ),
}

# Every environment variable of every process in the sandbox, one per line.
# Copilot CLI masks the values of the variables named by --secret-env-vars (its gateway
# token) in what a command prints: for it each line is printed reversed and read back here.
REVERSED = TEST_BASE == "copilot"
DUMP_SANDBOX_ENV = (
    "RUN for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done | sort -u"
    + (" | rev" if REVERSED else "")
    + "\nSAY {output}"
)


def tool_outputs(response: dict[str, Any]) -> str:
    return "\n".join(
        item["output"] for item in response["output"] if item["type"] == "function_call_output"
    )


def test_the_sandbox_holds_no_secret_but_its_own_short_lived_token(
    client: httpx.Client, server: ServerProcess, provider: Any
) -> None:
    provider.reset()
    result = create(client, {"input": DUMP_SANDBOX_ENV})
    dumped = tool_outputs(result)
    if REVERSED:
        dumped = "\n".join(line[::-1] for line in dumped.splitlines())
    assert "HOME=" in dumped  # the dump really ran
    for secret in (PROVIDER_KEY, API_KEY, "server-secret-do-not-leak", provider.url):
        assert secret not in dumped
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "UHP_API_KEY",
        "UHP_SERVER_ONLY_SECRET",
        "UHP_DATA_DIR",
        "PYTHONPATH",
    ):
        if name == BASE.gateway_url_variable:
            continue  # the harness gives the agent the gateway's URL in it: not the provider's
        assert f"\n{name}=" not in f"\n{dumped}"
    # Whatever variable the base's CLI reads it from (UHP_GATEWAY_TOKEN for Codex,
    # ANTHROPIC_AUTH_TOKEN for Claude Code), the per-turn token has the gateway's prefix.
    tokens = set(re.findall(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]+", dumped))
    assert tokens, "the CLI itself holds the per-turn gateway token"
    # The upstream saw the real key (as its wire sends keys), never the sandbox's token.
    creds = {
        r["headers"].get("authorization") or r["headers"].get("x-api-key")
        for r in provider.requests()
    }
    assert creds and creds <= {f"Bearer {PROVIDER_KEY}", PROVIDER_KEY}
    # The token died with the turn.
    path, body = MODEL_CALLS[backend_under_test()]
    for token in tokens:
        answer = httpx.post(
            f"{server.url}{path}", headers={"Authorization": f"Bearer {token}"}, json=body
        )
        assert answer.status_code == 401


def test_tool_commands_do_not_inherit_the_gateway_token(client: httpx.Client) -> None:
    result = create(client, {"input": "RUN env\nSAY {output}"})
    env = tool_outputs(result)
    assert "PATH=" in env
    assert "UHP_GATEWAY_TOKEN" not in env and PROVIDER_KEY not in env


# The reviewer's repro: write swappiness (its own value, so a failure of the guard is
# harmless), probe core_pattern (host code execution if writable), and the agent's uid.
TOUCH_KERNEL_SETTINGS = (
    "RUN "
    + as_one_command(
        'v=$(cat /proc/sys/vm/swappiness); echo "$v" > /proc/sys/vm/swappiness '
        "&& echo SYSCTL_WRITE_OK; test -w /proc/sys/kernel/core_pattern "
        "&& echo CORE_PATTERN_WRITABLE; echo uid=$(id -u)"
    )
    + "\nSAY {output}"
)


@passes.same_on_every_base
def test_a_tool_command_cannot_change_host_kernel_settings_nor_run_as_root(
    client: httpx.Client,
) -> None:
    outputs = tool_outputs(create(client, {"input": TOUCH_KERNEL_SETTINGS}))
    assert "uid=" in outputs  # the command really ran
    assert "SYSCTL_WRITE_OK" not in outputs
    assert "CORE_PATTERN_WRITABLE" not in outputs
    assert "uid=0" not in outputs.split()


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_the_gateway_refuses_anything_but_a_live_turn_token(server: ServerProcess) -> None:
    for headers in (
        {},
        {"Authorization": f"Bearer {API_KEY}"},
        {"Authorization": f"Bearer {PROVIDER_KEY}"},
    ):
        answer = httpx.post(
            f"{server.url}/gateway/openai/v1/responses",
            headers=headers,
            json={"model": "gpt-test", "input": "x"},
        )
        assert answer.status_code == 401
        assert PROVIDER_KEY not in answer.text


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_another_principal_cannot_touch_anything_and_learns_nothing(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    mine = create(client, {"input": "SAY private"})
    rid, sid = mine["id"], mine["metadata"]["session_id"]
    hid = mine["metadata"]["harness_id"]
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=60
    ) as other:
        probes = [
            ("GET", f"/v1/responses/{rid}", None, "response_not_found"),
            ("GET", f"/v1/responses/{rid}?stream=true", None, "response_not_found"),
            ("GET", f"/v1/responses/{rid}/input_items", None, "response_not_found"),
            ("DELETE", f"/v1/responses/{rid}", None, "response_not_found"),
            ("POST", f"/v1/responses/{rid}/cancel", None, "response_not_found"),
            ("POST", f"/v1/sessions/{sid}/cancel", None, "session_not_found"),
            ("GET", f"/v1/harnesses/{hid}", None, "harness_not_found"),
            ("GET", f"/v1/harnesses/{hid}/models", None, "harness_not_found"),
            (
                "POST",
                "/v1/responses",
                {"input": "SAY x", "previous_response_id": rid},
                "response_not_found",
            ),
            (
                "POST",
                "/v1/responses",
                {"input": "SAY x", "metadata": {"harness_id": hid}},
                "harness_not_found",
            ),
        ]
        for method, path, body, code in probes:
            answer = other.request(method, path, json=body)
            assert answer.status_code == 404, (method, path, answer.text)
            assert answer.json()["error"]["code"] == code
            assert rid not in answer.text and sid not in answer.text
        theirs = other.get("/v1/harnesses").json()["harnesses"]
        assert theirs and hid not in {h["id"] for h in theirs}
    assert client.get(f"/v1/responses/{rid}").json()["status"] == "completed"


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_an_error_carries_a_correlation_id_that_matches_a_log_line(
    client: httpx.Client, server: ServerProcess
) -> None:
    answer = client.get("/v1/responses/resp_nothing_here")
    correlation = answer.json()["error"]["detail"]["correlation_id"]
    lines = [json.loads(line) for line in server.log().splitlines() if correlation in line]
    assert lines and lines[0]["correlation_id"] == correlation
    assert lines[0]["code"] == "response_not_found"


# The red team's keyring channel: one principal's agent stores a key in its uid's user
# keyring (@u), another principal's agent, in a session of its own, searches for it and reads
# it back. Keys belong to a uid, and every local sandbox's agent runs as one.
KEYRING_PROBE = r"""
import ctypes, errno, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
USER_KEYRING, SEARCH, READ = -4, 10, 11
name = b"uhp-red-team-drop"
def answer(result):
    return str(result) if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
if sys.argv[1] == "store":
    secret = b"cross-principal-" + b"secret"
    stored = libc.syscall(ADD_KEY, b"user", name, secret, len(secret), USER_KEYRING)
    print("stored=" + answer(stored))
else:
    found = libc.syscall(KEYCTL, SEARCH, USER_KEYRING, b"user", name, 0)
    print("found=" + answer(found))
    if found >= 0:
        buffer = ctypes.create_string_buffer(256)
        size = libc.syscall(KEYCTL, READ, ctypes.c_long(found), buffer, 256)
        print("read=" + (buffer.raw[:size].decode() if size >= 0 else answer(size)))
"""


def keyring_probe(action: str) -> str:
    script = f"/usr/bin/python3 -c {shlex.quote(KEYRING_PROBE)} {action}"
    return f"RUN {as_one_command(script)}\nSAY {{output}}"


@passes.same_on_every_base
def test_no_principal_reaches_another_through_the_kernel_keyring(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    stored = tool_outputs(create(client, {"input": keyring_probe("store")}))
    assert "stored=" in stored  # the probe ran
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=120
    ) as other:
        found = tool_outputs(create(other, {"input": keyring_probe("search")}))
    assert "found=" in found
    assert "cross-principal-secret" not in found
    # Closed at the source: no agent reaches a keyring at all.
    assert "stored=EPERM" in stored.split() and "found=EPERM" in found.split()


@passes.same_on_every_base
def test_the_agent_meets_the_syscall_filter(client: httpx.Client) -> None:
    # io_uring, the keyring, bpf, perf, new user namespaces, mounts: refused to the agent's
    # own tool commands, whatever the base and the sandbox (sandbox/syscall_filter.py).
    # Two Python starts: on a loaded machine (in gVisor) past a shell tool's default wait of
    # 10 s, after which the command's output never reaches the model.
    probe = f"TIMEOUT 30\nRUN {as_one_command(syscall_probe.command())}\nSAY {{output}}"
    answers = syscall_probe.answers(tool_outputs(create(client, {"input": probe})).splitlines())
    expected = syscall_probe.expected(platform.machine(), gvisor=IN_GVISOR)
    assert {name: answers.get(name) for name in expected} == expected
    unshare = tool_outputs(create(client, {"input": "RUN unshare -Ur id -u\nSAY {output}"}))
    assert "Operation not permitted" in unshare


WHO_AM_I = "RUN id -u; whoami\nSAY {output}"


@pytest.mark.skipif(os.getuid() != 0, reason="a server that is not root runs agents as itself")
@passes.same_on_every_base
def test_each_principals_agents_run_as_a_uid_of_their_own(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    # Per-uid kernel quotas (inotify instances, pipe buffers) are then no principal's to
    # exhaust for another (sandbox/agent_user.py).
    mine = tool_outputs(create(client, {"input": WHO_AM_I})).split()
    again = tool_outputs(create(client, {"input": WHO_AM_I})).split()
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=120
    ) as other:
        theirs = tool_outputs(create(other, {"input": WHO_AM_I})).split()
    assert mine == again  # a principal keeps its uid
    assert mine[1] == theirs[1] == "agent"  # an account, for what looks its user up
    assert mine[0] != theirs[0]
    assert all(200000 <= int(uid) <= 299999 for uid in (mine[0], theirs[0]))

"""The per-turn gateway token is bound to its own sandbox (issue 8, item 5), end to end: it
is on no command line, and a token copied out of a live turn is refused on the server's TCP
port and through another turn's sandbox socket."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import TEST_SANDBOX, backend_under_test
from tests.support.server import ServerProcess
from tests.support.shell_probe import as_one_command
from tests.test_security_e2e import tool_outputs
from tests.test_tasks_e2e import create, wait_terminal
from uhp_server.gateway.tokens import TOKEN_PREFIX

pytestmark = pytest.mark.slow

# The turn's own token, as any tool command can read it from the CLI's environment.
OWN_TOKEN = (
    "$(for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null"
    f" | grep -o '{TOKEN_PREFIX}[A-Za-z0-9_-]*' | head -n 1)"
)
MODELS = {"openai": "/gateway/openai/v1/models", "anthropic": "/gateway/anthropic/v1/models"}[
    backend_under_test()
]


# A shell function printing the HTTP status of a gateway call with the token it is given,
# spoken through bash's /dev/tcp (the docker runtime image has no curl).
STATUS = (
    "status() { exec 3<>/dev/tcp/127.0.0.1/8080; printf '"
    f"GET {MODELS} HTTP/1.0\\r\\nAuthorization: Bearer %s\\r\\nx-api-key: %s\\r\\n\\r\\n"
    '\' "$1" "$1" >&3; head -n 1 <&3 | cut -d \' \' -f 2; exec 3<&-; }; '
)


def _wait_for(path_glob: str, root: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in root.rglob(path_glob) if p.stat().st_size > 0]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"{path_glob} never appeared")


def _parent(pid: str) -> str:
    # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1]


def _command_lines(under: int) -> list[str]:
    """The command lines of every process descending from process `under`."""
    lines = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            pid = proc.name
            while pid not in ("0", "1", str(under)):
                pid = _parent(pid)
            if pid == str(under):
                lines.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError):
            continue  # gone meanwhile
    return lines


def _tree_with_sleep(under: int, timeout: float = 10.0) -> list[str]:
    """The command lines under `under` once the turn's `sleep 12` runs: the token file is
    written just before the shell starts it, and a busy machine can be read in between."""
    deadline = time.monotonic() + timeout
    while True:
        lines = _command_lines(under)
        if any("sleep 12" in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_a_token_copied_out_of_a_live_turn_is_useless_elsewhere(
    client: httpx.Client, server: ServerProcess
) -> None:
    # Turn A leaves its token where the test can take it, and stays alive a while.
    probe_a = f"echo {OWN_TOKEN} > /workspace/stolen-token; sleep 12"
    script_a = f"RUN {as_one_command(probe_a)}\nSAY done"
    a = create(client, {"input": script_a, "background": True})
    stolen = _wait_for("stolen-token", server.data_dir).read_text().strip()
    assert stolen.startswith(TOKEN_PREFIX)

    # While turn A runs: no token is on the command line of any process of the server's
    # (the sandbox, the relay, the CLI, its tools)...
    # (A docker turn's processes belong to the engine, not the server; its environment is
    # the container's, never a command line.)
    if TEST_SANDBOX == "local":
        assert server.proc is not None
        lines = _tree_with_sleep(server.proc.pid)
        assert any("bwrap" in line for line in lines) and any("sleep 12" in line for line in lines)
        # (The tool command itself names the prefix in its grep pattern; a token is longer.)
        token = re.compile(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]{{40,}}")
        assert not [line for line in lines if token.search(line)]
    # ...and the server's TCP port refuses it.
    answer = httpx.get(
        f"{server.url}{MODELS}", headers={"Authorization": f"Bearer {stolen}", "x-api-key": stolen}
    )
    assert answer.status_code == 401

    # Turn B (another session) presents A's token through its own socket: refused, while
    # its own token works there.
    probe_b = f"{STATUS}echo own=$(status {OWN_TOKEN}) stolen=$(status {stolen})"
    b = create(client, {"input": f"RUN {as_one_command(probe_b)}\nSAY {{output}}"})
    assert "own=200 stolen=401" in tool_outputs(b)
    assert wait_terminal(client, a["id"])["status"] == "completed"

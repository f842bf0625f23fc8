"""The compose deployment, as the README tells a user to run it: build the server image,
`compose up`, then the README's own curl example. The model provider is the scripted one,
as a second service. Skipped, loudly, without a Docker engine or a Compose CLI."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROVIDER_KEY, tools_dir
from tests.support.docker import engine_or_skip, runtime_image_or_skip
from tests.support.server import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
OVERRIDE = REPO / "tests" / "support" / "compose.provider.yaml"
BUILD_TIMEOUT = 1800


def compose_cli() -> list[str]:
    """Compose v2 (`docker compose`) when the docker CLI has it, else v1 (`docker-compose`)."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    message = "\n*** COMPOSE TEST SKIPPED: neither `docker compose` nor `docker-compose` ***\n"
    print(message, file=sys.stderr)
    pytest.skip(message)


def readme_curl() -> str:
    """The first curl example of the README, as a user would paste it."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(export UHP_KEY=.*?curl .*?)```", text, re.S)
    assert block, "the README's curl example moved"
    return block.group(1)


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[str, str]]:
    """(base URL, API key) of a `compose up` deployment; torn down with its volume after."""
    engine_or_skip()
    runtime_image_or_skip()
    compose = compose_cli()
    subprocess.run(
        ["bash", str(REPO / "deploy" / "vendor.sh")],
        check=True,
        env={**os.environ, "UHP_TOOLS_DIR": str(tools_dir()), "UHP_BASES": "codex"},
        timeout=BUILD_TIMEOUT,
    )
    port = free_port()
    key = "uhp_sk_compose_" + secrets.token_hex(8)
    project = "uhptest" + secrets.token_hex(4)
    base = "uhp-debian:bookworm"
    has_base = subprocess.run(["docker", "image", "inspect", base], capture_output=True)
    env = {
        **os.environ,
        "UHP_PUBLISH": f"127.0.0.1:{port}",
        "UHP_API_KEY": key,
        "OPENAI_API_KEY": PROVIDER_KEY,
        "UHP_OPENAI_DEFAULT_MODEL": "gpt-test",
        "UHP_REPO": str(REPO),
        **({"UHP_BASE_IMAGE": base} if has_base.returncode == 0 else {}),
    }
    files = ["-f", str(REPO / "compose.yaml"), "-f", str(OVERRIDE)]
    command = [*compose, "-p", project, *files]
    try:
        # Build first: the provider service runs the image the server service builds.
        build = subprocess.run(
            [*command, "build"], env=env, timeout=BUILD_TIMEOUT, capture_output=True, text=True
        )
        # The build's own last lines, not only its exit status, say why it failed.
        assert build.returncode == 0, (
            f"compose build failed:\n{(build.stdout + build.stderr)[-4000:]}"
        )
        subprocess.run([*command, "up", "-d"], check=True, env=env, timeout=300)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/v1/uhp", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            logs = subprocess.run([*command, "logs"], env=env, capture_output=True, text=True)
            raise AssertionError(f"the server did not come up:\n{logs.stdout[-5000:]}")
        yield url, key
    finally:
        subprocess.run([*command, "down", "-v"], env=env, check=False, timeout=300)


def test_compose_up_then_the_readme_curl_example_works(deployment: tuple[str, str]) -> None:
    url, key = deployment
    script = readme_curl().replace("uhp_sk_…", key).replace("http://127.0.0.1:8080", url)
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"] == "completed", answer
    assert answer["output"][-1]["content"][0]["text"] == "ok"  # the scripted provider's reply


def test_the_compose_server_runs_turns_in_agent_containers(deployment: tuple[str, str]) -> None:
    url, key = deployment
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
        answer = http.post(
            "/v1/responses", json={"input": "RUN id -u; hostname\nSAY {output}"}, timeout=300
        ).json()
    assert answer["status"] == "completed", answer
    text = answer["output"][-1]["content"][0]["text"].split()
    assert text[0] != "0" and text[1] == "uhp-sandbox"  # not root, in an agent container

"""The scripted provider driving one real Codex CLI run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.provider.wire_helpers import KEY
from tests.scripted_provider import RunningProvider

# --- the real Codex CLI ---------------------------------------------------------------------


@pytest.mark.slow
def test_codex_cli_runs_a_command(
    provider: RunningProvider, codex_installed: Path, tmp_path: Path
) -> None:
    """The CLI is found where the server finds it (the tools dir), installed when missing."""
    import tomli_w

    from harness_bases.codex.install import binary_path

    home, workdir = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    scripted = {
        "name": "scripted",
        "base_url": provider.base_url,
        "env_key": "SCRIPTED_KEY",
        "wire_api": "responses",
    }
    config = {
        "model": "gpt-test",
        "model_provider": "scripted",
        "model_providers": {"scripted": scripted},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    env = {**os.environ, "CODEX_HOME": str(home), "SCRIPTED_KEY": KEY}
    command = [
        binary_path(str(codex_installed)),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        str(workdir),
        "RUN echo hi\nSAY got {output}",
    ]
    done = subprocess.run(
        command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    items = [
        json.loads(line)["item"] for line in done.stdout.splitlines() if '"item.completed"' in line
    ]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert commands and commands[0]["aggregated_output"].strip() == "hi"
    assert [i["text"] for i in items if i["type"] == "agent_message"] == ["got hi"]
    assert [r["answer"].get("tool") for r in provider.requests()] == ["exec_command", None]

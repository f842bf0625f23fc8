"""The Codex base's skills and MCP configuration: folders written whole (and never through a
link the agent planted), `[mcp_servers]` tables for the gateway's proxy, and the developer
instructions naming every skill. The strict-config check runs the real pinned CLI."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from harness_bases.base import McpServerSpec, SandboxPaths, SkillBundle, SkillFile, TurnSpec
from harness_bases.codex import CodexBase
from harness_bases.codex.config import TOKEN_ENV
from harness_bases.codex.instructions import developer_instructions

TOKEN = "uhpgw_turn-token-never-in-a-file"
SKILL = SkillBundle(
    "vault-manual",
    (
        SkillFile("SKILL.md", b"---\nname: vault-manual\ndescription: d\n---\nbody\n"),
        SkillFile("references/codes.md", b"codes\n"),
        SkillFile("scripts/run.sh", b"#!/bin/sh\necho hi\n"),
        SkillFile("assets/logo.bin", bytes(range(256))),
    ),
)
OTHER = SkillBundle("other", (SkillFile("SKILL.md", b"no front matter\n"),))
SERVERS = (
    McpServerSpec("vault", "http://gw.invalid/gateway/mcp/vault", TOKEN, "http"),
    McpServerSpec("legacy", "http://gw.invalid/gateway/mcp/legacy", TOKEN, "sse"),
)


def spec(tmp_path: Path, tools: Path | None = None, **kw: object) -> TurnSpec:
    tools = tools or tmp_path / "tools"
    fields: dict = {
        "prompt": "SAY hi",
        "model": "gpt-test",
        "gateway_url": "http://gw.invalid/gateway/openai/v1",
        "gateway_token": TOKEN,
        "host_workspace": tmp_path / "ws",
        "host_home": tmp_path / "home",
        "host_tools": tools,
    }
    if tools != tmp_path / "tools":  # a real CLI run without a sandbox: host paths inside
        fields["paths"] = SandboxPaths(str(tmp_path / "ws"), str(tmp_path / "home"), str(tools))
    return TurnSpec(**{**fields, **kw})


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_mcp_servers_point_at_the_proxy_with_the_token_from_the_environment(
    tmp_path: Path,
) -> None:
    invocation = CodexBase().prepare(spec(tmp_path, mcp_servers=SERVERS))
    text = (tmp_path / "home" / ".codex" / "config.toml").read_text()
    config = tomllib.loads(text)
    assert config["mcp_servers"] == {
        "vault": {
            "url": "http://gw.invalid/gateway/mcp/vault",
            "bearer_token_env_var": TOKEN_ENV,
            "startup_timeout_sec": 20,
        }
    }  # Codex speaks Streamable HTTP only: the engine reports the sse one as left out
    assert TOKEN not in text
    assert invocation.env[TOKEN_ENV] == TOKEN
    assert CodexBase.mcp_transports == ("http",)


def test_skill_folders_are_written_whole_and_replaced_every_turn(tmp_path: Path) -> None:
    base = CodexBase()
    skills_dir = tmp_path / "home" / ".codex" / "skills"
    (skills_dir / ".system" / "imagegen").mkdir(parents=True)  # Codex's own: left alone
    (skills_dir / ".system" / "imagegen" / "SKILL.md").write_text("codex's")
    base.prepare(spec(tmp_path, skills=(SKILL, OTHER)))
    assert tree(skills_dir / "vault-manual") == {f.path: f.data for f in SKILL.files}
    assert (skills_dir / "vault-manual" / "scripts" / "run.sh").stat().st_mode & 0o111
    assert not (skills_dir / "vault-manual" / "references" / "codes.md").stat().st_mode & 0o111
    # The agent edits a skill and adds a file; the next turn restores exactly the bundle.
    (skills_dir / "vault-manual" / "SKILL.md").write_text("tampered")
    (skills_dir / "vault-manual" / "extra.md").write_text("x")
    base.prepare(spec(tmp_path, skills=(SKILL,)))
    assert tree(skills_dir / "vault-manual") == {f.path: f.data for f in SKILL.files}
    assert not (skills_dir / "other").exists()  # disabled or deleted since: gone
    assert (skills_dir / ".system" / "imagegen" / "SKILL.md").read_text() == "codex's"


def test_links_planted_in_the_home_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    codex_home = tmp_path / "home" / ".codex"
    (codex_home / "skills").mkdir(parents=True)
    (codex_home / "skills" / "vault-manual").symlink_to(outside)
    (codex_home / "config.toml").symlink_to(outside / "precious.txt")
    CodexBase().prepare(spec(tmp_path, skills=(SKILL,)))
    assert tree(outside) == {"precious.txt": b"keep"}
    assert not (codex_home / "skills" / "vault-manual").is_symlink()
    assert not (codex_home / "config.toml").is_symlink()
    # The whole .codex folder swapped for a link: replaced by a real folder too.
    home = tmp_path / "home2"
    home.mkdir()
    (home / ".codex").symlink_to(outside)
    CodexBase().prepare(spec(tmp_path, host_home=home, skills=(SKILL,)))
    assert tree(outside) == {"precious.txt": b"keep"}
    assert (home / ".codex" / "skills" / "vault-manual" / "SKILL.md").is_file()


def test_the_agent_is_told_where_every_skill_is(tmp_path: Path) -> None:
    text = developer_instructions(spec(tmp_path, skills=(SKILL, OTHER), system_prompt="Be kind."))
    assert text is not None and text.startswith("Be kind.")
    assert "- vault-manual: /home/agent/.codex/skills/vault-manual/SKILL.md" in text
    assert "- other: /home/agent/.codex/skills/other/SKILL.md" in text
    assert developer_instructions(spec(tmp_path)) is None


@pytest.mark.slow
def test_config_with_mcp_servers_and_skills_passes_strict_validation(
    tmp_path: Path, codex_installed: Path
) -> None:
    (tmp_path / "ws").mkdir()
    turn = spec(tmp_path, codex_installed, skills=(SKILL,), mcp_servers=SERVERS)
    invocation = CodexBase().prepare(turn)
    result = subprocess.run(
        [*invocation.argv, "--strict-config", "--print-startup-config"],
        env=invocation.env,
        cwd=invocation.cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["appServerVersion"] == "0.169.0"

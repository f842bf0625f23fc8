"""What HermesBase.prepare writes and starts (no CLI needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness_bases.base import McpServerSpec, SandboxPaths, SkillBundle, SkillFile, TurnSpec
from harness_bases.hermes import HermesBase
from harness_bases.hermes.config import INSTRUCTIONS_FILE, SKILLS_DIR
from harness_bases.plugin_folders import LAUNCHER_ARGS, PYTHON, stdio_launches
from tests.support.plugin_turn import stamp_plugin

TOKEN = "uhpgw_turn_token"


def spec(tmp_path: Path, **fields: Any) -> TurnSpec:
    return TurnSpec(
        prompt="SAY hi",
        model="gpt-test",
        gateway_url="http://127.0.0.1:8080/gateway/openai/v1",
        gateway_token=TOKEN,
        host_workspace=tmp_path / "workspace",
        host_home=tmp_path / "home",
        host_tools=tmp_path / "tools",
        **fields,
    )


def hermes_home(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".hermes"


def test_prepare_starts_the_launcher_with_an_environment_built_from_nothing(
    tmp_path: Path,
) -> None:
    mcp = McpServerSpec("docs", "http://127.0.0.1:8080/gateway/mcp/docs", "uhpgw_mcp")
    invocation = HermesBase().prepare(spec(tmp_path, mcp_servers=(mcp,)))
    assert invocation.argv == [
        "/opt/uhp-tools/hermes/0.19.0/venv/bin/python",
        "-s",  # never the session home's user site-packages (harness_bases/python_start.py)
        "/opt/uhp-tools/hermes/0.19.0/uhp_acp_launcher.py",
    ]
    assert invocation.cwd == "/workspace"
    assert invocation.env == {
        # Hermes' own folder last: a command's python3 is never Hermes' (base.py says why).
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ":/opt/uhp-tools/hermes/0.19.0/venv/bin",
        "HOME": "/home/agent",
        "HERMES_HOME": "/home/agent/.hermes",
        "UHP_GATEWAY_TOKEN": TOKEN,
        "UHP_MCP_TOKEN_0": "uhpgw_mcp",
        "UHP_INSTRUCTIONS_FILE": f"/home/agent/.hermes/{INSTRUCTIONS_FILE}",
        "HERMES_DISABLE_LAZY_INSTALLS": "1",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }


def test_a_turn_that_can_ask_offers_hermes_own_clarify(tmp_path: Path) -> None:
    async def ask(text: str, options: tuple[str, ...]) -> str | None:
        return "yes"

    invocation = HermesBase().prepare(spec(tmp_path, ask_user=ask))
    assert invocation.env["UHP_CLARIFY"] == "1"


def test_config_makes_the_gateway_the_only_provider_and_holds_no_secret(tmp_path: Path) -> None:
    mcp = McpServerSpec("docs", "http://127.0.0.1:8080/gateway/mcp/docs", "uhpgw_mcp", "sse")
    HermesBase().prepare(spec(tmp_path, mcp_servers=(mcp,), max_step=3))
    text = (hermes_home(tmp_path) / "config.yaml").read_text()
    assert TOKEN not in text and "uhpgw_mcp" not in text
    config = yaml.safe_load(text)
    assert config["model"] == {"provider": "uhp_gateway", "default": "gpt-test"}
    provider = config["providers"]["uhp_gateway"]
    assert provider["base_url"] == "http://127.0.0.1:8080/gateway/openai/v1"
    assert provider["key_env"] == "UHP_GATEWAY_TOKEN"
    assert provider["api_mode"] == "chat_completions"
    assert config["agent"]["max_turns"] == 4  # three tool calls and the answer
    assert config["mcp_servers"] == {
        "docs": {
            "url": "http://127.0.0.1:8080/gateway/mcp/docs",
            "headers": {"Authorization": "Bearer ${UHP_MCP_TOKEN_0}"},
            "transport": "sse",
        }
    }
    assert config["skills"]["external_dirs"] == [f"/home/agent/.hermes/{SKILLS_DIR}"]
    # Nothing that goes online or asks the model behind the agent's back.
    assert config["approvals"]["mode"] == "off"
    assert config["auxiliary"]["title_generation"]["enabled"] is False
    assert config["security"]["tirith_enabled"] is False
    # No toolchain probe (subprocesses) before every turn's first model call.
    assert config["agent"]["environment_probe"] is False
    # Without a step budget Hermes keeps its own limit.
    HermesBase().prepare(spec(tmp_path))
    assert (
        "max_turns"
        not in yaml.safe_load((hermes_home(tmp_path) / "config.yaml").read_text())["agent"]
    )


def test_a_plugin_s_stdio_server_is_a_stdio_server_beside_the_remote_ones(
    tmp_path: Path,
) -> None:
    mcp = McpServerSpec("docs", "http://127.0.0.1:8080/gateway/mcp/docs", "uhpgw_mcp")
    launch = stdio_launches((stamp_plugin(),), SandboxPaths())
    HermesBase().prepare(spec(tmp_path, mcp_servers=(mcp,), stdio_servers=launch))
    config = yaml.safe_load((hermes_home(tmp_path) / "config.yaml").read_text())
    servers = "/home/agent/.uhp/plugin-servers"
    assert config["mcp_servers"] == {
        "docs": {
            "url": "http://127.0.0.1:8080/gateway/mcp/docs",
            "headers": {"Authorization": "Bearer ${UHP_MCP_TOKEN_0}"},
        },
        "stamp": {
            "command": PYTHON,
            "args": [*LAUNCHER_ARGS, f"{servers}/stamp.json"],
        },
    }


def test_instructions_join_the_system_prompt_disabled_tools_and_skills(tmp_path: Path) -> None:
    plain = SkillBundle("notes", (SkillFile("SKILL.md", b"# notes\n"),))
    long = "How to read the codes of this plugin,\n  in more than sixty characters: all of it."
    front = f"---\nname: codes\ndescription: |\n  {long}\n---\nBody.\n".encode()
    described = SkillBundle("codes", (SkillFile("SKILL.md", front),), plugin="demo")
    HermesBase().prepare(
        spec(
            tmp_path,
            system_prompt="Be brief.",
            disabled_tools=("terminal", "patch"),
            skills=(plain, described),
        )
    )
    # Where each skill is, and its description whole (Hermes' listing cuts it at 60).
    folders = "/home/agent/.hermes/uhp-skills"
    assert (hermes_home(tmp_path) / INSTRUCTIONS_FILE).read_text() == (
        "Be brief.\n\nDo not use these tools: terminal, patch.\n\n"
        "Skills are installed for you (load one with skill_view): each is a folder of "
        "instructions and resources for one kind of task. When a task matches a skill, read "
        "its SKILL.md first and use the files beside it as it says.\n"
        f"- notes: {folders}/notes/SKILL.md\n"
        f"- codes: {folders}/codes/SKILL.md (How to read the codes of this plugin, in more "
        "than sixty characters: all of it.)"
    )
    HermesBase().prepare(spec(tmp_path))  # the next task has none: the file says nothing
    assert (hermes_home(tmp_path) / INSTRUCTIONS_FILE).read_text() == ""


def test_skills_are_written_whole_and_replaced_every_turn(tmp_path: Path) -> None:
    files = (
        SkillFile("SKILL.md", b"---\nname: tidy\n---\n"),
        SkillFile("scripts/run.sh", b"#!/bin/sh\necho tidy\n"),
        SkillFile("docs/deep/ref.md", b"ref"),
    )
    HermesBase().prepare(spec(tmp_path, skills=(SkillBundle("tidy", files),)))
    folder = hermes_home(tmp_path) / SKILLS_DIR / "tidy"
    assert (folder / "docs" / "deep" / "ref.md").read_bytes() == b"ref"
    assert (folder / "scripts" / "run.sh").stat().st_mode & 0o111  # a script stays runnable
    HermesBase().prepare(spec(tmp_path))
    assert list((hermes_home(tmp_path) / SKILLS_DIR).iterdir()) == []


def test_links_the_agent_left_in_its_home_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    home = hermes_home(tmp_path)
    home.mkdir(parents=True)
    (home / "config.yaml").symlink_to(outside / "keep.txt")
    (home / SKILLS_DIR).symlink_to(outside)
    HermesBase().prepare(spec(tmp_path))
    assert (outside / "keep.txt").read_text() == "host file"
    assert not (home / "config.yaml").is_symlink() and not (home / SKILLS_DIR).is_symlink()
    assert list(outside.iterdir()) == [outside / "keep.txt"]

"""A turn's plugins in the session's home (harness_bases/plugin_folders.py): each package
whole, PLUGIN_DATA kept for the session, and each stdio server started through the launcher
with exactly what Agent Plugins §9 owes it. The launcher runs here for real (the host's
python3, as a local sandbox has it), with no CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from harness_bases.base import PluginPackage, SandboxPaths, SkillFile, StdioServer, TurnSpec
from harness_bases.plugin_folders import (
    LAUNCHER_ARGS,
    PYTHON,
    place_plugins,
    plugin_data,
    plugin_root,
    stdio_launches,
)
from tests.support.plugins import STDIO_SERVER
from tests.support.stdio_mcp_server import ANSWER_PREFIX

STAMP = StdioServer(
    "stamp",
    "./bin/stamp",
    args=("--data", "${PLUGIN_DATA}/x", "${PLUGIN_ROOT}${PLUGIN_DATA}", "${HOME}", "$PLUGIN_ROOT"),
    env=(("CONFIG", "${PLUGIN_ROOT}/config.json"), ("PLUGIN", "${UNKNOWN}")),
)


def plugin(*servers: StdioServer, name: str = "demo-plugin") -> PluginPackage:
    files = (
        SkillFile("plugin.json", b"{}"),
        SkillFile("bin/stamp", STDIO_SERVER.encode(), executable=True),
        SkillFile("data/seed.bin", b"\x00\x01"),
    )
    return PluginPackage(name, files, servers)


def spec(tmp_path: Path, *plugins: PluginPackage, home: str | None = None) -> TurnSpec:
    host_home = tmp_path / "home"
    host_home.mkdir(exist_ok=True)
    paths = SandboxPaths(str(tmp_path / "ws"), home or str(host_home), str(tmp_path / "tools"))
    return TurnSpec(
        prompt="x",
        model="m",
        gateway_url="http://gateway",
        gateway_token="secret-turn-token",
        host_workspace=tmp_path / "ws",
        host_home=host_home,
        host_tools=tmp_path / "tools",
        paths=paths,
        plugins=plugins,
        stdio_servers=stdio_launches(plugins, paths),
    )


def test_packages_are_placed_whole_and_data_outlives_them(tmp_path: Path) -> None:
    turn = spec(tmp_path, plugin(STAMP))
    place_plugins(turn)
    home = turn.host_home
    root = Path(plugin_root(str(home), "demo-plugin"))
    assert (root / "data" / "seed.bin").read_bytes() == b"\x00\x01"
    assert os.access(root / "bin" / "stamp", os.X_OK)
    assert not os.access(root / "data" / "seed.bin", os.X_OK)
    data = Path(plugin_data(str(home), "demo-plugin"))
    assert data.is_dir()
    (data / "state").write_text("kept")
    place_plugins(spec(tmp_path))  # the next turn, the plugin disabled
    assert not root.exists()
    assert (data / "state").read_text() == "kept"  # PLUGIN_DATA lives as long as the session


def test_only_the_two_placeholders_expand_once_in_args_env_and_cwd(tmp_path: Path) -> None:
    # A home whose path holds a placeholder: what a replacement brings in stays literal.
    home = str(tmp_path / "h${PLUGIN_DATA}")
    cwd = StdioServer("in-data", "python3", cwd="${PLUGIN_DATA}/work")
    turn = spec(tmp_path, plugin(STAMP, cwd), home=home)
    (launch,) = [s for s in turn.stdio_servers if s.name == "stamp"]
    assert launch.command == PYTHON and launch.plugin == "demo-plugin"
    # The launcher's code, isolated (no PYTHON* variables, no user site), then its launch file.
    assert launch.args[:3] == LAUNCHER_ARGS and launch.args[1] == "-c"
    assert all("${" not in arg or arg.startswith(home) for arg in launch.args[3:])
    place_plugins(turn)
    launches = turn.host_home / ".uhp" / "plugin-servers"
    written = json.loads((launches / "stamp.json").read_text())
    root, data = plugin_root(home, "demo-plugin"), plugin_data(home, "demo-plugin")
    assert written == {
        "command": f"{root}/bin/stamp",
        "root": root,
        "data": data,
        "args": ["--data", f"{data}/x", f"{root}{data}", "${HOME}", "$PLUGIN_ROOT"],
        "env": {"CONFIG": f"{root}/config.json", "PLUGIN": "${UNKNOWN}"},
        "cwd": root,
    }
    assert json.loads((launches / "in-data.json").read_text())["cwd"] == f"{data}/work"


def run_server(turn: TurnSpec, name: str, *requests: dict) -> subprocess.CompletedProcess[str]:
    """Start the server as a CLI would (the launch's command and arguments) and talk to it."""
    (launch,) = [s for s in turn.stdio_servers if s.name == name]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": turn.paths.home,
        "UHP_GATEWAY_TOKEN": turn.gateway_token,  # what the CLI holds, never the plugin
        "ANTHROPIC_AUTH_TOKEN": "another-credential",
    }
    lines = "".join(json.dumps({"jsonrpc": "2.0", **r}) + "\n" for r in requests)
    return subprocess.run(
        [launch.command, *launch.args], input=lines, env=env, capture_output=True, text=True
    )


def test_the_launcher_starts_the_server_with_what_it_is_owed(tmp_path: Path) -> None:
    turn = spec(tmp_path, plugin(STAMP))
    place_plugins(turn)
    call = {"name": "stamp", "arguments": {"word": "w"}}
    done = run_server(
        turn,
        "stamp",
        {"id": 1, "method": "initialize", "params": {}},
        {"id": 2, "method": "tools/call", "params": call},
        {"id": 3, "method": "tools/call", "params": call},
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    first, second = (a["result"]["content"][0]["text"] for a in answers[1:])
    facts = json.loads(first.removeprefix(ANSWER_PREFIX + "w "))
    root = plugin_root(turn.paths.home, "demo-plugin")
    data = plugin_data(turn.paths.home, "demo-plugin")
    assert facts["root"] == root and facts["data"] == data
    assert facts["cwd"] == root  # the default working directory is the plugin root
    assert facts["argv"] == ["--data", f"{data}/x", f"{root}{data}", "${HOME}", "$PLUGIN_ROOT"]
    # The CLI's credentials never reach a plugin's process; the plugin's env does.
    assert "UHP_GATEWAY_TOKEN" not in facts["env"] and "ANTHROPIC_AUTH_TOKEN" not in facts["env"]
    assert {"CONFIG", "PLUGIN", "PLUGIN_ROOT", "PLUGIN_DATA", "PATH", "HOME"} <= set(facts["env"])
    assert json.loads(second.removeprefix(ANSWER_PREFIX + "w "))["count"] == 2  # data is writable


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    missing = StdioServer("missing", "no-such-command-uhp")
    not_runnable = StdioServer("garbage", "./data/seed.bin")
    turn = spec(tmp_path, plugin(missing, not_runnable))
    place_plugins(turn)
    done = run_server(turn, "missing")
    assert done.returncode != 0 and "no-such-command-uhp" in done.stderr
    done = run_server(turn, "garbage")
    assert done.returncode != 0 and "could not be started" in done.stderr


def test_what_the_cli_runs_with_its_credentials_is_nothing_the_agent_can_write(
    tmp_path: Path,
) -> None:
    """The CLI starts the launcher with its whole environment (the turn's tokens in it); the
    launcher drops them for the plugin's process. So the launcher's code must not be a file
    in the agent home or the workspace, which the agent and the plugin's own process can
    rewrite before a CLI starts a server again (Qwen Code does: test_qwen_code_base). Only
    the launch file, data the launcher reads, may be there (review of issue 26)."""
    turn = spec(tmp_path, plugin(STAMP))
    writable = (turn.paths.home, turn.paths.workspace)
    for launch in turn.stdio_servers:
        code = [launch.command, *(a for a in launch.args if not a.endswith(".json"))]
        assert not [part for part in code if part.startswith(writable)], launch

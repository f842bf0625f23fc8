"""A turn's enabled plugins in the sandbox (Plugins §6), the same for every base.

In the session's agent home, every turn:

- `.uhp/plugins/<name>/`: each enabled plugin's whole package, its PLUGIN_ROOT. Rewritten
  every turn; a plugin disabled or removed since is gone.
- `.uhp/plugin-data/<name>/`: its PLUGIN_DATA, made before any of its servers starts and
  kept for the life of the session (never removed here).
- `.uhp/plugin-servers/`: one launch file per stdio MCP server: what it runs,
  `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` expanded (only those, once, in `args`, `env` and
  `cwd`), a `./` command resolved against the root.

A base configures each TurnSpec.stdio_servers entry in its CLI's MCP format: a command and
its arguments, which start the launcher (plugin_launcher.py) on the server's launch file.
The launcher's code travels in those arguments (`python3 -I -c <code>`), never as a file: the
CLI runs it with its whole environment, the turn's tokens included, and the agent home is
the agent's to write, so a launcher file there could be rewritten before a CLI starts the
server again (Qwen Code restarts one that exits). The launch file is only data: whatever it
says, the launcher gives the plugin's process none of the CLI's credentials.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from harness_bases.base import PluginPackage, SandboxPaths, StdioServerSpec, TurnSpec
from harness_bases.safe_files import real_dir, remove_if_present, write_file
from harness_bases.skill_folders import write_skill_folders

ROOTS_DIR = ".uhp/plugins"
DATA_DIR = ".uhp/plugin-data"
SERVERS_DIR = ".uhp/plugin-servers"
_RECORD = ".uhp/plugins.json"  # the packages written last turn
_PLACEHOLDER = re.compile(r"\$\{(PLUGIN_ROOT|PLUGIN_DATA)\}")
# The system's own python3, which every sandbox has (the runtime image; the host's /usr
# locally): a `python3` looked up on the agent's PATH could be one it put there.
PYTHON = "/usr/bin/python3"
# `-I`: no PYTHON* variables, no user site, no script folder on sys.path.
LAUNCHER_ARGS = ("-I", "-c", (Path(__file__).parent / "plugin_launcher.py").read_text())


def plugin_root(home: str, plugin: str) -> str:
    return f"{home.rstrip('/')}/{ROOTS_DIR}/{plugin}"


def plugin_data(home: str, plugin: str) -> str:
    return f"{home.rstrip('/')}/{DATA_DIR}/{plugin}"


def stdio_launches(
    plugins: tuple[PluginPackage, ...], paths: SandboxPaths
) -> tuple[StdioServerSpec, ...]:
    """How the CLI starts each stdio server of `plugins` (their launch files are written by
    place_plugins)."""
    servers = f"{paths.home.rstrip('/')}/{SERVERS_DIR}"
    return tuple(
        StdioServerSpec(
            name=server.name,
            command=PYTHON,
            args=(*LAUNCHER_ARGS, f"{servers}/{server.name}.json"),
            plugin=plugin.name,
        )
        for plugin in plugins
        for server in plugin.stdio_servers
    )


def place_plugins(turn: TurnSpec) -> None:
    """Write every enabled plugin's package, data folder and server launch files into the
    session's agent home (host side), replacing what the previous turn wrote."""
    home = turn.host_home
    write_skill_folders(home, ROOTS_DIR, _RECORD, turn.plugins)
    for plugin in turn.plugins:
        real_dir(home, f"{DATA_DIR}/{plugin.name}")
    remove_if_present(home / SERVERS_DIR)
    if not any(plugin.stdio_servers for plugin in turn.plugins):
        return
    servers = real_dir(home, SERVERS_DIR)
    for plugin in turn.plugins:
        root = plugin_root(turn.paths.home, plugin.name)
        data = plugin_data(turn.paths.home, plugin.name)
        for server in plugin.stdio_servers:
            launch = _launch(server.command, root, data)
            launch |= {
                "args": [_expand(arg, root, data) for arg in server.args],
                "env": {key: _expand(value, root, data) for key, value in server.env},
                "cwd": _cwd(server.cwd, root, data),
            }
            write_file(servers / f"{server.name}.json", json.dumps(launch, indent=2).encode())


def _launch(command: str, root: str, data: str) -> dict[str, object]:
    # No expansion in `command`: a `./` path is resolved against the root, a bare name found
    # on PATH by the launcher.
    if command.startswith("./"):
        command = _join(root, command[2:])
    return {"command": command, "root": root, "data": data}


def _expand(text: str, root: str, data: str) -> str:
    """One pass over `text`: what a replacement brings in is never expanded again."""
    values = {"PLUGIN_ROOT": root, "PLUGIN_DATA": data}
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)


def _cwd(cwd: str | None, root: str, data: str) -> str:
    if cwd is None:
        return root
    if cwd.startswith("./"):
        return _join(root, cwd[2:])
    return posixpath.normpath(_expand(cwd, root, data))


def _join(root: str, relative: str) -> str:
    """A path inside the package (checked to stay inside when the plugin was installed)."""
    return posixpath.normpath(f"{root}/{relative}")

"""Starts one stdio MCP server of a plugin, inside the sandbox (Plugins §6, Agent Plugins §9).

Run by the CLI as `/usr/bin/python3 -I -c <this file's code> <launch file>`
(plugin_folders.py says why never as a file). The launch file, written by the server, holds the
server's command (a `./` path already resolved against the plugin root), its arguments, its
environment and its working directory, with `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` already
expanded and nothing else. No string from the plugin passes through the CLI's own MCP config
(where `${VAR}` would be expanded from the CLI's environment, credentials included) or
through a shell.

The process gets a few of the CLI's variables (never its credentials), the plugin's `env`
over them, then PLUGIN_ROOT and PLUGIN_DATA; a bare command is found on the CLI's PATH. Only
the standard library: it runs on whatever python3 the sandbox has.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

# What a plugin's process inherits from the CLI's environment.
KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ", "USER")


def main(launch_file: str) -> None:
    with open(launch_file, encoding="utf-8") as handle:
        launch = json.load(handle)
    env = {name: os.environ[name] for name in KEPT if name in os.environ}
    env.update(launch["env"])
    env["PLUGIN_ROOT"] = launch["root"]
    env["PLUGIN_DATA"] = launch["data"]
    os.makedirs(launch["data"], exist_ok=True)
    cwd = launch["cwd"]
    if cwd == launch["data"] or cwd.startswith(launch["data"] + "/"):
        os.makedirs(cwd, exist_ok=True)  # plugin state: made on first use
    command = launch["command"]
    path = command
    if "/" not in command:
        found = shutil.which(command, path=os.environ.get("PATH", os.defpath))
        if found is None:
            sys.exit(f"plugin MCP server: '{command}' was not found on PATH")
        path = found
    try:
        os.chdir(cwd)
        os.execve(path, [command, *launch["args"]], env)
    except OSError as exc:
        sys.exit(f"plugin MCP server: '{command}' could not be started: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1])

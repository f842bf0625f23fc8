"""A live base turn with a plugin enabled, as the engine gives it to a base: the plugin's
package placed in the home, its stdio MCP server (the stamp server, stdio_mcp_server.py)
started by the CLI through the launcher, its skill beside the harness's own.

The model calls the plugin's `stamp` tool; the answer says what the plugin's process got, so
a test can check it ran inside the session with what Agent Plugins §9 owes it and none of
the CLI's credentials.
"""

from __future__ import annotations

import json
from typing import Any

from harness_bases import events as ev
from harness_bases.base import PluginPackage, SkillBundle, SkillFile, StdioServer
from harness_bases.plugin_folders import plugin_data, plugin_root, stdio_launches
from harness_bases.plugin_launcher import KEPT
from tests.support.direct_turn import DirectTurn
from tests.support.live_base import LiveBase
from tests.support.plugins import STDIO_SERVER
from tests.support.stdio_mcp_server import ANSWER_PREFIX

PLUGIN = "stamp-plugin"
SERVER = "stamp"
SKILL = SkillBundle(
    "stamp-manual",
    (SkillFile("SKILL.md", b"---\nname: stamp-manual\ndescription: How to stamp.\n---\nStamp.\n"),),
    plugin=PLUGIN,
)
WORD = "wombat"


def stamp_plugin() -> PluginPackage:
    files = (
        SkillFile("plugin.json", json.dumps({"name": PLUGIN}).encode()),
        SkillFile("bin/stamp", STDIO_SERVER.encode(), executable=True),
        *(SkillFile(f"skills/{SKILL.name}/{f.path}", f.data) for f in SKILL.files),
    )
    server = StdioServer(
        SERVER, "./bin/stamp", args=("--data", "${PLUGIN_DATA}/x"), env=(("MODE", "plugin"),)
    )
    return PluginPackage(PLUGIN, files, (server,))


def plugin_fields(env: LiveBase) -> dict[str, Any]:
    """The TurnSpec fields a turn of `env` gets from the enabled stamp plugin."""
    plugin = stamp_plugin()
    paths = env.spec("").paths
    return {
        "plugins": (plugin,),
        "stdio_servers": stdio_launches((plugin,), paths),
        "skills": (SKILL,),
    }


async def stamp_turn(env: LiveBase, tool: str = SERVER, **kw: Any) -> DirectTurn:
    """A turn whose model calls the plugin's `stamp(word)`, by the name `tool` the CLI offers
    it under (the scripted provider also finds it by its suffix), and says what it answered."""
    prompt = f'TOOL {tool} {{"word": "{WORD}"}}\nSAY {{output}}'
    return await env.run(prompt, **{**plugin_fields(env), **kw})


def stamp_facts(output: str) -> dict[str, Any]:
    """The facts in a stamp answer, as a CLI shows the tool's output: as it is, or inside a
    JSON string of its own (Hermes)."""
    head = f"{ANSWER_PREFIX}{WORD} "
    assert head in output, output
    rest = output.split(head, 1)[1]
    decode = json.JSONDecoder().raw_decode
    if rest.startswith('{\\"'):
        rest = decode(f'"{rest}')[0]  # the rest of that string, unescaped
    facts: dict[str, Any] = decode(rest)[0]
    return facts


def stamped(turn: DirectTurn, env: LiveBase) -> dict[str, Any]:
    """What the plugin's process reported, after checking the call succeeded and the process
    was the plugin's: its root and data folder in this session's home, started in its root
    with its arguments expanded, given its own variable and nothing of the CLI's but the
    launcher's short list."""
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok, finished.output
    facts = stamp_facts(finished.output)
    root, data = plugin_root(str(env.home), PLUGIN), plugin_data(str(env.home), PLUGIN)
    assert (facts["root"], facts["data"], facts["cwd"]) == (root, data, root)
    assert facts["argv"] == ["--data", f"{data}/x"]
    # LC_CTYPE: set by python itself when it coerces a C locale (PEP 538).
    allowed = {*KEPT, "LC_CTYPE", "MODE", "PLUGIN_ROOT", "PLUGIN_DATA"}
    assert {"MODE", "PLUGIN_ROOT", "PLUGIN_DATA"} <= set(facts["env"]) <= allowed, facts["env"]
    return facts

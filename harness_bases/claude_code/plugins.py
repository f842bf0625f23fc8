"""A turn's enabled plugins in Claude Code's own plugin form, for what that form can carry.

Each enabled plugin becomes a Claude Code plugin, `<config dir>/uhp/plugins/<name>/`: a
`.claude-plugin/plugin.json` (its name, version and description) and `skills/`, the plugin's
skills whole. The turn loads them all with one `--plugin-dir` naming that folder (the pinned
2.1.328 loads each child of a folder of plugins). The CLI then lists each skill as
`<plugin>:<skill>`, answers the Skill tool by the skill's own name as well (the server keeps
skill names unique across the harness and its plugins, so that name is never ambiguous), and
tells the model the skill's folder when it loads one. A SKILL.md is treated as the harness's
own skills are: nothing from the CLI's environment is expanded into it, and a command it runs
(`` !`…` ``) goes through the shell prefix, without the turn's credentials (all checked
against the live CLI in tests). The CLI's own `${CLAUDE_PLUGIN_ROOT}` in a SKILL.md names
this folder, not the package (Agent Plugins gives skills no placeholder of their own).

The plugin's MCP servers are not in this form; config.py puts them in `--mcp-config` beside
the harness's own, a stdio one as the command that starts plugin_folders.py's launcher. Two
reasons, both from the pinned CLI:

- Under `--strict-mcp-config` it connects no plugin's MCP server ("This session runs with
  --strict-mcp-config, which connects no plugin servers"), and that flag is what keeps a
  `.mcp.json` in the workspace, or one the agent writes into its own home, from adding a
  server that bypasses the gateway's MCP proxy.
- It renames a plugin's server `plugin:<plugin>:<server>` and its tools
  `mcp__plugin_<plugin>_<server>__<tool>`: not the one namespace the harness was checked
  against, nor the names `disabledTools` deny.

The package itself stays where plugin_folders.py placed it (PLUGIN_ROOT): the CLI is never
pointed at it, since a package's own `.mcp.json`, hooks or commands would otherwise load with
strings the CLI expands from its environment. The folder is rewritten whole every turn, so
only what the server wrote there is ever loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness_bases.base import PluginPackage, SkillBundle, SkillFile
from harness_bases.safe_files import real_dir, remove_if_present
from harness_bases.skill_folders import write_folder

PLUGINS_DIR = "plugins"  # under the config dir's own folder (config.OWN_DIR)
MANIFEST = ".claude-plugin/plugin.json"
SKILLS_DIR = "skills"


@dataclass(frozen=True)
class NativePlugin:
    """A plugin as Claude Code loads it: its folder name and the files written there."""

    name: str
    files: tuple[SkillFile, ...]


def native_plugins(
    plugins: tuple[PluginPackage, ...], skills: tuple[SkillBundle, ...]
) -> tuple[NativePlugin, ...]:
    """Each enabled plugin with its manifest and its skills (those of `skills` it brings)."""
    return tuple(
        NativePlugin(
            plugin.name,
            (
                SkillFile(MANIFEST, _manifest(plugin)),
                *(
                    SkillFile(f"{SKILLS_DIR}/{skill.name}/{file.path}", file.data, file.executable)
                    for skill in skills
                    if skill.plugin == plugin.name
                    for file in skill.files
                ),
            ),
        )
        for plugin in plugins
    )


def own_skills(
    plugins: tuple[PluginPackage, ...], skills: tuple[SkillBundle, ...]
) -> tuple[SkillBundle, ...]:
    """The skills no native plugin carries: the harness's own and the built-in ones."""
    carried = {plugin.name for plugin in plugins}
    return tuple(skill for skill in skills if skill.plugin not in carried)


def write_plugins(own_dir: Path, plugins: tuple[NativePlugin, ...]) -> bool:
    """Replace `own_dir/plugins/` with `plugins`; True when there is any to load."""
    root = own_dir / PLUGINS_DIR
    remove_if_present(root)  # whatever is left there would load as a plugin
    for plugin in plugins:
        write_folder(real_dir(root, plugin.name), plugin.files)
    return bool(plugins)


def _manifest(plugin: PluginPackage) -> bytes:
    manifest = {"name": plugin.name}
    if plugin.version is not None:
        manifest["version"] = plugin.version
    if plugin.description is not None:
        manifest["description"] = plugin.description
    return json.dumps(manifest, ensure_ascii=False, indent=2).encode("utf-8")

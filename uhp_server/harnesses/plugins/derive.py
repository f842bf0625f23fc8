"""What a plugin's package contributes, read from its files as an Agent Plugins client reads
them (Plugins §2.2): the manifest, the MCP servers, the skills and what was skipped. It is
computed on every write and for every export, never taken from what a client sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.skills import StoredFile
from uhp_server.harnesses.plugins.manifest import MANIFEST_FILE, Manifest, read_manifest
from uhp_server.harnesses.plugins.servers import PluginServer, find_servers
from uhp_server.harnesses.plugins.skills import PluginSkill, find_skills
from uhp_server.harnesses.plugins.skipped import Skipped, bounded


@dataclass(frozen=True)
class Derived:
    manifest: Manifest
    servers: list[PluginServer]
    skills: list[PluginSkill]
    skipped: list[Skipped]

    @property
    def name(self) -> str:
        return self.manifest.name

    def wire(self) -> dict[str, Any]:
        """The server-written fields of the plugin object (what a harness row keeps)."""
        return {
            "manifest": self.manifest.fields,
            "mcpServers": [server.wire() for server in self.servers],
            "skills": [skill.wire() for skill in self.skills],
            "skipped": [skipped.wire() for skipped in self.skipped],
        }


def derive(files: list[StoredFile], param: str, allow_private: bool) -> Derived:
    """The package's contributions; a fatal manifest error refuses the plugin (`param`: the
    plugin's place in the body). `files` holds plugin.json (package.package_files)."""
    manifest_file = next(f for f in files if f.path == MANIFEST_FILE)
    manifest = read_manifest(manifest_file.data, f"{param}.files")
    servers, servers_skipped = find_servers(files, manifest.version, allow_private)
    skills, skills_skipped = find_skills(files)
    skipped = bounded([*manifest.skipped, *servers_skipped, *skills_skipped])
    return Derived(manifest, servers, skills, skipped)

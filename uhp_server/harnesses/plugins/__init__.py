"""Plugins of a harness (Plugins chapter): Agent Plugins 1.0.0 packages installed from their
files, as an Agent Plugins client would load them.

- `package`: a plugin's files from a body (or the `blob` a GET returned), checked;
- `schemas`, `manifest`: the Agent Plugins versions installed; `plugin.json` validated;
- `servers`, `skills`, `skipped`, `derive`: what a package contributes, and what it carries
  that was not loaded (recorded, never dropped in silence);
- `install`: the `plugins` of a POST/PUT body, stored out of line;
- `namespace`: one name, one owner, across the harness and its enabled plugins;
- `render`, `export`: back to the wire; a harness's own tools and skills as a package;
- `runtime`: what a turn gets (harness_bases/plugin_folders.py places it in the sandbox);
- `problems`: the chapter's refusals.
"""

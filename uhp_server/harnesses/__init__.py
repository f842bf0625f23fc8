"""Harness configuration as clients write it (Harnesses §2, §4, §5).

- `body`: a POST/PUT body (snake_case `HarnessCreate`, or the camelCase object a GET
  returned) → (name, stored config), every field validated, `param` on each error;
- `skills`, `skill_paths`: skill folders validated, stored out of line, rendered back;
- `builtin_skills`: the folders under the repository's `skills/` every harness inherits;
- `mcp`: MCP servers, names sanitised, credentials kept server-side as references;
- `plugins/`: Agent Plugins packages, their contributions derived, one namespace checked;
- `writes`: what a body stores, held back until all of it is valid;
- `runtime`: what a turn gets (whole skill folders, MCP targets for the gateway, plugins).
"""

"""The builds of environments' versions, run in the sandbox toolchain sessions run in
(Environments §4): `SandboxBuilder(sandbox, settings, egress)` implements
environments/builder.py's Builder.

Where each part lives:
- sandbox_builder.py: the builder, a build's steps in order, one sandbox process each.
- steps.py: what each step runs (pip, npm, apt and dpkg -x, setup.sh) and its environment.
- reuse.py: a rebuild's reuse of an earlier version's .venv, node_modules and apt/.
- limits.py: the build's time, memory and disk (UHP_ENVIRONMENT_BUILD_*).
- log.py: the installers' output, bounded.
- packages.py: what was installed, as pip, npm and dpkg report it.
- host_files.py: the server's reads of what a build wrote, never through its links.
- runtimes.py: the Python minors, Node major and OS builds can use here.
Operators: docs/environments.md, "Builds".
"""

from uhp_server.environments.building.sandbox_builder import SandboxBuilder

__all__ = ["SandboxBuilder"]

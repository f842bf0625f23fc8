"""Environments (UHP 2026-09-28, Environments chapter): a principal's project, its files put
in by path or imported, built into immutable read-only versions that sessions mount at
`/env/<slug>`.

Where each part lives:
- layout.py: where an environment's source, versions and the build cache sit on disk.
- builder.py: what a build is asked and answers (BuildRequest, BuildResult), the seam
  between the chapter's bookkeeping and the builds that run in the sandbox.
- mount.py: what a turn on an environment reads (EnvironmentMount).
Storage: storage/environments.py. The facade: engine/facade/environments.py. The routes:
doors/uhp/environments.py.
"""

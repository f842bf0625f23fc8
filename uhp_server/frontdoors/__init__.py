"""Front doors: packages that translate another contract into the engine's task and render
the task's event log back into that contract's own format (DESIGN: one engine, several
front doors)."""

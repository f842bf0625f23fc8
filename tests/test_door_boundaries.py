"""The doors reach tasks, harnesses, sessions, files and shares only through the engine's
facade: no door module imports storage, none imports a module of the engine (only the
package, `uhp_server.engine`, whose names are the facade), and none imports another
module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

DOORS = Path(__file__).resolve().parent.parent / "uhp_server" / "doors"


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import in the file; name '' for `import module`."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.extend((node.module, alias.name) for alias in node.names)
    return found


def test_no_door_imports_storage() -> None:
    offenders = [
        f"{path.relative_to(DOORS)}: {module}"
        for path in sorted(DOORS.rglob("*.py"))
        for module, _ in imports(path)
        if module == "storage" or module.startswith("storage.")
    ]
    assert offenders == []


def test_a_door_imports_the_engine_only_through_its_facade() -> None:
    offenders = [
        f"{path.relative_to(DOORS)}: {module}"
        for path in sorted(DOORS.rglob("*.py"))
        for module, _ in imports(path)
        if module.startswith("uhp_server.engine.")
    ]
    assert offenders == []


def test_no_door_imports_private_names() -> None:
    offenders = [
        f"{path.relative_to(DOORS)}: {module}.{name}"
        for path in sorted(DOORS.rglob("*.py"))
        for module, name in imports(path)
        if name.startswith("_") and name != "__version__"
    ]
    assert offenders == []

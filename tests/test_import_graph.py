"""The packages import one another in one direction only: no module imports, at run time,
a module that imports it back (directly or around a longer circle). An import under
`if TYPE_CHECKING:` is for types only and does not count; one inside a function does, since
it runs."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("uhp_server", "harness_bases", "storage")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def imported(path: Path, modules: set[str]) -> set[str]:
    """The project's modules whose code runs when this one imports at run time: each module
    it names (a `from package import name` names the submodule `package.name` when there is
    one, else the package) and that module's packages, whose `__init__` runs first — but not
    this module's own packages, already running when it is imported."""
    here = module_name(path)
    own = set(_ancestors(here))
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != here:
                found.update(m for m in (name, *_ancestors(name)) if m not in own)
    return found


def graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    modules = {module_name(p) for p in paths}
    return {module_name(p): imported(p, modules) for p in paths}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert circles(graph()) == []


def test_the_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]

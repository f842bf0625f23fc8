"""The documentation keeps up with the code: every setting is in docs/configuration.md, every
registered extension (base, sandbox, wire format, door) is named in docs/extending.md or a page
it links to and every entry-point group the code loads is described there, every relative link
between README.md and docs/ lands on a file (and a heading, when it names one), and the README
stays a page a newcomer reads (at most 300 lines; the rest lives in docs/).
Fast: reads files, the Settings class and the installed entry points, starts nothing."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points
from pathlib import Path

from pydantic import AliasChoices

from uhp_server.settings import Settings

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300
EXTENDING = REPO / "docs" / "extending.md"
# The groups whose every entry point is an extension a reader can add one of (a group nothing
# has registered in yet, as `uhp_server.wires` before the gateway's wires land, is empty).
EXTENSION_GROUPS = (
    "uhp_server.bases",
    "uhp_server.sandboxes",
    "uhp_server.wires",
    "uhp_server.doors",
    "uhp_server.memory_providers",
)
CODE = ("uhp_server", "harness_bases", "storage")
DISTRIBUTION = "uhp-server"

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target): the text may wrap across lines; the target has no spaces.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def setting_names() -> dict[str, list[str]]:
    """Each Settings field's environment variable names: its aliases when it has any (the
    providers' conventional names), else the UHP_ prefix and the field's name."""
    prefix = Settings.model_config.get("env_prefix", "")
    names: dict[str, list[str]] = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names[field_name] = [choice for choice in alias.choices if isinstance(choice, str)]
        elif isinstance(alias, str):
            names[field_name] = [alias]
        else:
            names[field_name] = [f"{prefix}{field_name}".upper()]
    return names


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation
    dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = REPO) -> Iterator[str]:
    """Each relative link of `page` whose file, or whose heading in that file, is missing,
    named relative to `root`."""
    prose = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
            continue
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            yield f"{page.relative_to(root)}: {target} (no such file)"
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            yield f"{page.relative_to(root)}: {target} (no such heading)"


def registered(group: str) -> list[str]:
    """This distribution's entry points in `group` (a third party's, installed beside it, is
    documented by its own package)."""
    names = {
        entry.name
        for entry in entry_points(group=group)
        if entry.dist is None or entry.dist.name.lower().replace("_", "-") == DISTRIBUTION
    }
    return sorted(names)


def with_linked_pages(page: Path) -> list[Path]:
    """The page and every page it links to (relative links, one hop)."""
    prose = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    linked = [page]
    for target in LINK.findall(prose):
        path_part = target.partition("#")[0]
        if path_part.endswith(".md") and not re.match(r"^[a-z][a-z0-9+.-]*:", target):
            found = (page.parent / path_part).resolve()
            if found.exists() and found not in linked:
                linked.append(found)
    return linked


def unnamed(names: Iterable[str], pages: Iterable[Path]) -> list[str]:
    """The names that no page writes as code (`name`)."""
    text = "\n".join(page.read_text() for page in pages)
    return [name for name in names if f"`{name}`" not in text]


def loaded_groups(roots: Iterable[Path]) -> tuple[set[str], list[str]]:
    """The entry-point groups the code under `roots` loads: the `group` of every
    `entry_points(...)` call, a string or a module-level constant holding one; and where a call
    names its group some other way (or not at all), which this cannot read."""
    groups: set[str] = set()
    unreadable: list[str] = []
    for path in sorted(p for root in roots for p in root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            node.targets[0].id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node.func) == "entry_points"):
                continue
            group = next((kw.value for kw in node.keywords if kw.arg == "group"), None)
            if isinstance(group, ast.Constant) and isinstance(group.value, str):
                groups.add(group.value)
            elif isinstance(group, ast.Name) and group.id in constants:
                groups.add(constants[group.id])
            else:
                unreadable.append(f"{path}:{node.lineno}")
    return groups, unreadable


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def test_every_registered_extension_is_documented() -> None:
    pages = with_linked_pages(EXTENDING)
    assert registered("uhp_server.bases") and registered("uhp_server.doors")  # read, not empty
    missing = {group: unnamed(registered(group), pages) for group in EXTENSION_GROUPS}
    missing = {group: names for group, names in missing.items() if names}
    assert not missing, f"registered but named nowhere in docs/extending.md or its links: {missing}"


def test_every_entry_point_group_is_described_in_extending() -> None:
    groups, unreadable = loaded_groups(REPO / root for root in CODE)
    assert not unreadable, f"entry_points() without a group this test can read: {unreadable}"
    assert {"uhp_server.bases", "uhp_server.sandboxes", "uhp_server.doors"} <= groups
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    groups |= set(pyproject["project"].get("entry-points", {}))
    groups |= set(EXTENSION_GROUPS)
    undescribed = unnamed(sorted(groups), [EXTENDING])
    assert not undescribed, f"entry-point groups docs/extending.md does not describe: {undescribed}"


def test_the_extension_checks_see_what_is_missing(tmp_path: Path) -> None:
    page = tmp_path / "extending.md"
    (tmp_path / "other.md").write_text("The `b` one.\n")
    (tmp_path / "unlinked.md").write_text("The `c` one.\n")
    page.write_text("The `a` one, and [more](other.md#x). Not a or `c-d`.\n")
    assert unnamed(["a", "b", "c"], with_linked_pages(page)) == ["c"]
    code = tmp_path / "code"
    code.mkdir()
    (code / "m.py").write_text(
        "from importlib import metadata\n"
        "from importlib.metadata import entry_points\n"
        'GROUP = "x.by_constant"\n'
        'entry_points(group="x.by_string")\n'
        "metadata.entry_points(group=GROUP)\n"
        "entry_points()\n"
    )
    groups, unreadable = loaded_groups([code])
    assert groups == {"x.by_string", "x.by_constant"}
    assert unreadable == [f"{code / 'm.py'}:6"]


def test_every_setting_is_in_the_configuration_reference() -> None:
    reference = (REPO / "docs" / "configuration.md").read_text()
    names = setting_names()
    assert "OPENAI_API_KEY" in names["openai_api_key"]  # aliases are read, not guessed
    assert names["data_dir"] == ["UHP_DATA_DIR"]
    missing = [
        name for variants in names.values() for name in variants if f"`{name}`" not in reference
    ]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_relative_links_land() -> None:
    broken = [problem for page in pages() for problem in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A `code` heading: yes\n")
    page.write_text(
        "[ok](there.md#a-code-heading-yes) [gone](missing.md) [bad](there.md#nope)\n"
        "[web](https://example.com/x.md) `[code](ignored.md)`\n"
    )
    found = [problem.split(": ", 1)[1] for problem in broken_links(page, tmp_path)]
    assert found == ["missing.md (no such file)", "there.md#nope (no such heading)"]


def test_readme_stays_short() -> None:
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"

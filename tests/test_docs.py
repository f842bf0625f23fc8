"""The documentation keeps up with the code: every setting is in docs/configuration.md, every
relative link between README.md and docs/ lands on a file (and a heading, when it names one),
and the README stays a page a newcomer reads (at most 300 lines; the rest lives in docs/).
Fast: reads files and the Settings class, starts nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import AliasChoices

from uhp_server.settings import Settings

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300

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

"""What the server found in a package and did not load, and where (Plugins §2.2 `skipped`).

Ignoring is allowed, silent ignoring is not: every component left out of a plugin is one of
these on the plugin object, with its place in the package (`skills/broken`,
`mcp.json#/mcpServers/redline`, `plugin.json#/vendorField`) and one sentence of reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str

    def wire(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


def pointer(file: str, *parts: str | int) -> str:
    """`file#/a/b`: a JSON pointer into one of the package's files (`~` and `/` escaped)."""
    if not parts:
        return file
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in parts)
    return f"{file}#/" + "/".join(escaped)


# What a package makes the server keep is bounded by the package: the harness row carries
# `skipped` and every read and turn loads it, so a package of 20,000 unknown fields is not
# 20,000 entries (an entry is longer than the field it names).
MAX_LISTED = 100


def bounded(found: list[Skipped]) -> list[Skipped]:
    """The first entries whole, then one saying how many more were left out."""
    if len(found) <= MAX_LISTED:
        return found
    shown, first_unlisted = found[: MAX_LISTED - 1], found[MAX_LISTED - 1]
    more = len(found) - len(shown) - 1
    reason = f"Not loaded, nor {more} more components after it, which are not listed."
    return [*shown, Skipped(first_unlisted.path, reason)]

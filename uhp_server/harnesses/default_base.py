"""Which base a task without `metadata.harness_id` runs on (Tasks §1.2: "the server MUST use a
default harness"): UHP_DEFAULT_BASE when set, else Codex when it is enabled, else the first
enabled base.

The choice is made once, at start-up, and carried by the order of the enabled bases: the
default base comes first. Every door reaches the default harness through that one order
(harnesses/defaults.py), so the UHP door, Chat Completions, Oumi and AgentOS cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

PREFERRED = "codex"  # the base README and docs centre on

T = TypeVar("T")


class DefaultBaseError(ValueError):
    """UHP_DEFAULT_BASE names a base this server does not run: a start-up error."""


@dataclass(frozen=True)
class DefaultBase:
    name: str
    chosen_by: str  # why this one, for the start log


def choose_default_base(
    configured: str | None,
    enabled: list[str],
    known: Callable[[], Iterable[str]] = lambda: (),
) -> DefaultBase | None:
    """The default base among `enabled` (in their order); None when none is enabled.
    DefaultBaseError when `configured` names a base that is not enabled and installed.
    `known`: every registered base's name, asked only then (it loads the registry)."""
    configured = (configured or "").strip() or None
    if configured is not None:
        if configured not in enabled:
            raise DefaultBaseError(_not_enabled(configured, enabled, sorted({*known(), *enabled})))
        return DefaultBase(configured, "UHP_DEFAULT_BASE")
    if PREFERRED in enabled:
        return DefaultBase(PREFERRED, f"{PREFERRED} is installed (UHP_DEFAULT_BASE unset)")
    if enabled:
        why = f"{PREFERRED} is not enabled: the first enabled base (UHP_DEFAULT_BASE unset)"
        return DefaultBase(enabled[0], why)
    return None


def _not_enabled(configured: str, enabled: list[str], known: list[str]) -> str:
    """What to do: install or enable a base this server knows; a name it does not know at
    all would only fail again in `bases install` ("unknown bases"), so the known ones are
    listed instead."""
    said = f"UHP_DEFAULT_BASE={configured!r}"
    if configured not in known:
        return (
            f"{said} is not a known base (known: {', '.join(known) or 'none'}); name one of "
            "them, or unset UHP_DEFAULT_BASE"
        )
    return (
        f"{said} is not an enabled, installed base (enabled: {', '.join(enabled) or 'none'}); "
        f"install it (uhp-server bases install {configured}), name it in UHP_BASES, or unset "
        "UHP_DEFAULT_BASE"
    )


def default_first(bases: dict[str, T], default: DefaultBase | None) -> dict[str, T]:
    """The same bases, the default one first, the others in their order."""
    if default is None:
        return dict(bases)
    return {default.name: bases[default.name], **bases}


def default_base_name(bases: dict[str, T]) -> str | None:
    """The default base of bases ordered by `default_first`."""
    return next(iter(bases), None)

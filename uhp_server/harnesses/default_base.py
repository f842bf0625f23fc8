"""Which base a task without `metadata.harness_id` runs on (Tasks §1.2: "the server MUST use a
default harness"): UHP_DEFAULT_BASE when set, else Codex when it is enabled, else the first
enabled base.

The choice is made once, at start-up, and carried by the order of the enabled bases: the
default base comes first. Every door reaches the default harness through that one order
(harnesses/defaults.py), so the UHP door, Chat Completions, Oumi and AgentOS cannot disagree.
"""

from __future__ import annotations

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


def choose_default_base(configured: str | None, enabled: list[str]) -> DefaultBase | None:
    """The default base among `enabled` (in their order); None when none is enabled.
    DefaultBaseError when `configured` names a base that is not enabled and installed."""
    configured = (configured or "").strip() or None
    if configured is not None:
        if configured not in enabled:
            raise DefaultBaseError(
                f"UHP_DEFAULT_BASE={configured!r} is not an enabled, installed base "
                f"(enabled: {', '.join(enabled) or 'none'}); install it "
                f"(uhp-server bases install {configured}), name it in UHP_BASES, or unset "
                "UHP_DEFAULT_BASE"
            )
        return DefaultBase(configured, "UHP_DEFAULT_BASE")
    if PREFERRED in enabled:
        return DefaultBase(PREFERRED, f"{PREFERRED} is installed (UHP_DEFAULT_BASE unset)")
    if enabled:
        why = f"{PREFERRED} is not enabled: the first enabled base (UHP_DEFAULT_BASE unset)"
        return DefaultBase(enabled[0], why)
    return None


def default_first(bases: dict[str, T], default: DefaultBase | None) -> dict[str, T]:
    """The same bases, the default one first, the others in their order."""
    if default is None:
        return dict(bases)
    return {default.name: bases[default.name], **bases}


def default_base_name(bases: dict[str, T]) -> str | None:
    """The default base of bases ordered by `default_first`."""
    return next(iter(bases), None)

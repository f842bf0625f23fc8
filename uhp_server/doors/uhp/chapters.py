"""What this server implements of the protocol, as discovery reports it (Lifecycle §2).

Every version it serves holds the same core chapters; the later ones add optional chapters
(Plugins in 2026-09-12, Environments in 2026-09-28, Memories in 2026-10-04), each behind a
capability. A chapter this server does not implement yet reports its capability `false`
and serves no route at all, so each of its endpoints answers the ordinary 404: what each of
those chapters asks of a server without it (Plugins §7, Environments §7, Memories §11),
never a partial implementation. Implementing one is serving its routes and turning its
`served` below to True; discovery, `/openapi.json` and the tests follow from this table.

A served chapter the operator may turn off (UHP_MEMORIES=off: Memories) is named by
`turned_off`: discovery then reports it false and its routes are not mounted
(doors/uhp/__init__.py), exactly as for a chapter not built.
"""

from __future__ import annotations

from dataclasses import dataclass

from uhp_server.harnesses.plugins.schemas import SUPPORTED as SUPPORTED_PLUGIN_SCHEMAS
from uhp_server.settings import Settings

# The core capabilities, each true only once it is built and tested. The class follows from
# the capabilities (discovery.py), never the other way round.
CORE_CAPABILITIES: dict[str, bool] = {
    "streaming": True,
    "sessions": True,
    "cancellation": True,
    "idempotency": True,
    "files_input": True,
    "files_output": True,
    "session_listing": True,
    "harness_management": True,
    "session_sharing": True,
}


@dataclass(frozen=True)
class OptionalChapter:
    capability: str  # its name in discovery's `capabilities`
    tag: str  # the tag of its operations in the protocol's OpenAPI document
    served: bool


PLUGINS = OptionalChapter("plugins", tag="Plugins", served=True)
ENVIRONMENTS = OptionalChapter("environments", tag="Environments", served=True)
MEMORIES = OptionalChapter("memories", tag="Memories", served=True)
OPTIONAL_CHAPTERS = (PLUGINS, ENVIRONMENTS, MEMORIES)

# The Agent Plugins manifest schemas installed (Plugins §7): discovery names them, and must,
# exactly while `plugins` is served.
PLUGIN_SCHEMAS = tuple(SUPPORTED_PLUGIN_SCHEMAS)


# Operations of a served chapter that this server does not serve yet, each answering the
# ordinary 404: /openapi.json says so on each (api_docs/document.py). None today: every
# operation of every served chapter is served (a provider's refusal is the chapter's own
# `memory_unsupported`, not a 404).
NOT_SERVED_YET: frozenset[tuple[str, str]] = frozenset()


def capabilities(off: frozenset[str] = frozenset()) -> dict[str, bool]:
    """Every capability, `false` ones included: a client tells "not supported" from "older
    than this field" by the key being there (Lifecycle §2). `off`: the capabilities of the
    chapters the operator turned off (`turned_off`)."""
    return {
        **CORE_CAPABILITIES,
        **{
            chapter.capability: chapter.served and chapter.capability not in off
            for chapter in OPTIONAL_CHAPTERS
        },
    }


def turned_off(settings: Settings) -> frozenset[str]:
    """The served chapters this server's operator turned off (UHP_MEMORIES=off)."""
    return frozenset({MEMORIES.capability} if settings.memories == "off" else ())


def chapters_off() -> tuple[OptionalChapter, ...]:
    return tuple(chapter for chapter in OPTIONAL_CHAPTERS if not chapter.served)

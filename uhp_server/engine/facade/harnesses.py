"""Harnesses for every door (Harnesses chapter): a principal's harnesses (its default ones
made on first use), created, replaced and deleted; a skill's folder; a plugin's package and
the harness exported as one (Plugins chapter); the models a harness can serve; and the live
feed of what runs in its sessions.

The configuration's rules (fields, skills, MCP servers and their secrets, plugins) are the
harness configuration package's (uhp_server/harnesses/); this is where they meet storage.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from harness_bases.base import HarnessBase
from storage import harnesses as harness_store
from storage.db import Database, Order
from storage.tables import HarnessRow
from storage.unit import Tx
from uhp_server.catalog import ModelCatalog
from uhp_server.engine.facade import records
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.errors import VENDOR, ApiError
from uhp_server.harnesses.base_config import bound_or_base, wire_backends
from uhp_server.harnesses.body import (
    ConfigRules,
    ParsedHarness,
    check_immutables,
    parse_harness_body,
)
from uhp_server.harnesses.config import HarnessConfig
from uhp_server.harnesses.defaults import (
    default_harness,
    defaults_first,
    ensure_defaults,
    made_default,
)
from uhp_server.harnesses.plugins.export import export_plugin
from uhp_server.harnesses.plugins.problems import plugin_not_found
from uhp_server.harnesses.plugins.render import plugin_files, render_plugins
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.skills import inherited_builtin_skills, render_skills, skill_folder
from uhp_server.ids import new_id
from uhp_server.settings import Settings


def harness_not_found() -> ApiError:
    return ApiError(404, "harness_not_found", "No harness with that id.", param="harness_id")


def _summary(row: HarnessRow) -> records.HarnessSummary:
    config = HarnessConfig.from_stored(row.config)
    return records.HarnessSummary(
        row.id, row.name, row.base, row.created_at_ms, config.default_model
    )


class Harnesses:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        bases: dict[str, HarnessBase],
        catalog: ModelCatalog,
        runs: RunRegistry,
    ) -> None:
        self.settings = settings
        self.db = db
        self.bases = bases  # the enabled and installed ones
        self.catalog = catalog
        self.runs = runs
        self.rules = ConfigRules(settings.max_timeout_seconds, settings.mcp_allow_private_hosts)

    # -- the harness object ------------------------------------------------------------------
    async def all(self, principal_id: str) -> list[records.Harness]:
        """Every harness of the principal, its default ones made on its first look."""

        def listed(tx: Tx) -> list[HarnessRow]:
            ensure_defaults(tx, principal_id, self.bases)
            return defaults_first(harness_store.list_harnesses(tx, principal_id), self.bases)

        return [await self._record(row) for row in await self.db.write(listed)]

    async def get(self, principal_id: str, harness_id: str) -> records.Harness:
        return await self._record(await self.db.read(self._row, principal_id, harness_id))

    async def create(self, principal_id: str, body: dict[str, Any]) -> records.Harness:
        """A new harness from a HarnessCreate body (or a harness object read back)."""
        base_name = body.get("base")
        if base_name is not None and not isinstance(base_name, str):
            invalid("base", "`base` must be a string: one of the bases this server supports.")
        base = self.bases.get(base_name) if base_name else None
        if base is None:  # absent too: "REQUIRED and MUST be one the server supports;
            # otherwise 422 unsupported_base" (Harnesses §5.1)
            raise ApiError(
                422,
                "unsupported_base",
                "This server does not support that base."
                if base_name
                else "`base` is required: one of the bases this server supports.",
                param="base",
                detail={"supported": list(self.bases)},  # the default base first
            )

        def checked(tx: Tx) -> ParsedHarness:
            return parse_harness_body(
                tx, principal_id, body, base, self.rules, default_name=base.label
            )

        # Checked in a read, stored in a write: the write holds nothing while a package is
        # checked (harnesses/writes.py).
        parsed = await self.db.read(checked)

        def created(tx: Tx) -> HarnessRow:
            parsed.writes.write(tx)
            row = HarnessRow(
                id=new_id("harness"),
                principal_id=principal_id,
                name=parsed.name,
                base=base.name,
                config=parsed.config,
                created_at_ms=int(time.time() * 1000),
            )
            harness_store.insert_harness(tx, row)
            return row

        return await self._record(await self.db.write(created, order=Order.ANY))

    async def replace(
        self, principal_id: str, harness_id: str, body: dict[str, Any]
    ) -> records.Harness:
        """Replace the mutable configuration: a field left out takes its default (the name,
        a label, keeps its value). `id`, `base` and `createdAt` never change."""

        def checked(tx: Tx) -> ParsedHarness:
            row = self._row(tx, principal_id, harness_id)
            check_immutables(body, row)
            return parse_harness_body(
                tx,
                principal_id,
                body,
                self.bases.get(row.base),
                self.rules,
                default_name=row.name,
            )

        parsed = await self.db.read(checked)  # as in create: the write holds no check

        def replaced(tx: Tx) -> HarnessRow:
            row = self._row(tx, principal_id, harness_id)  # still there
            parsed.writes.write(tx)
            updated = harness_store.update_harness(tx, row.id, parsed.name, parsed.config)
            if updated is None:
                raise harness_not_found()
            return updated

        record = await self._record(await self.db.write(replaced, order=Order.ANY))
        await self.runs.end_warm_harness(harness_id)  # its sessions go on with what it says now
        return record

    async def delete(self, principal_id: str, harness_id: str) -> str:
        """Soft delete: the sessions and responses that used it stay readable; continuing
        such a session answers harness_not_found. Its id."""

        def deleted(tx: Tx) -> str:
            row = self._row(tx, principal_id, harness_id)
            harness_store.delete_harness(tx, row.id)
            return row.id

        gone = await self.db.write(deleted, order=Order.ANY)
        await self.runs.end_warm_harness(gone)
        return gone

    async def skill_folder(self, principal_id: str, harness_id: str, skill: str) -> dict[str, Any]:
        """The whole folder of one of the harness's skills (its own or an inherited built-in),
        every file with its content."""
        row = await self.db.read(self._row, principal_id, harness_id)
        stored = HarnessConfig.from_stored(row.config).skills
        folder = await self.db.read(skill_folder, principal_id, stored, skill)
        if folder is None:
            raise ApiError(
                404,
                VENDOR + "skill_not_found",
                "This harness has no skill of that name.",
                param="skill",
            )
        return folder

    async def plugin_files(self, principal_id: str, harness_id: str, plugin: str) -> dict[str, Any]:
        """Every file of one of the harness's plugins, with its contents (Plugins §3.1)."""
        row = await self.db.read(self._row, principal_id, harness_id)
        stored = HarnessConfig.from_stored(row.config).plugins
        files = await self.db.read(plugin_files, principal_id, stored, plugin)
        if files is None:
            raise plugin_not_found()
        return files

    async def export_plugin(self, principal_id: str, harness_id: str) -> dict[str, Any]:
        """The harness's own MCP servers and skills as an Agent Plugins package, without its
        credentials (Plugins §5)."""

        def exported(tx: Tx) -> dict[str, Any]:
            row = self._row(tx, principal_id, harness_id)
            config = HarnessConfig.from_stored(row.config)
            allow_private = self.rules.mcp_allow_private_hosts
            return export_plugin(tx, principal_id, row.id, row.name, config, allow_private)

        return await self.db.read(exported)

    # -- models --------------------------------------------------------------------------
    async def models(self) -> dict[str, Any]:
        """Every provider an enabled base can use (directly or translated) with its models,
        keyed by provider (`GET /v1/models`)."""
        backends: dict[str, Any] = {}
        wires = {base.wire for base in self.bases.values()}
        if any(base.harness_names_wire for base in self.bases.values()):
            wires |= set(wire_backends())  # its harnesses may name any registered wire
        for name, provider in self.catalog.upstreams.providers.items():
            if not any(provider.serves(wire) for wire in wires):
                continue
            entry = await self.catalog.provider_entry(name)
            if entry is not None:
                backends[name] = entry
        return backends

    async def models_of(self, principal_id: str, harness_id: str) -> dict[str, Any]:
        """The models the harness can serve, `available` measured."""
        row = await self.db.read(self._row, principal_id, harness_id)
        base = self.bases.get(row.base)
        if base is None:
            return {"harness_id": row.id, "models": []}
        config = HarnessConfig.from_stored(row.config)
        base = bound_or_base(base, config.base_config)  # the wire it configured, if any
        return await self.catalog.harness_models(row.id, base, config.default_model)

    async def default_model(self, harness: records.HarnessSummary) -> str | None:
        """The model a task on the harness runs when it names none: the harness's own, else
        the catalogue's default for its base (None: the base is not enabled, or no provider
        serves it)."""
        base = self.bases.get(harness.base)
        if base is None:
            return harness.default_model
        return await self.catalog.default_for(base, harness.default_model)

    # -- what runs in it -------------------------------------------------------------------
    async def events(self, principal_id: str, harness_id: str) -> AsyncIterator[dict[str, Any]]:
        """The live feed of the harness's sessions (Streaming §5), open once this returns."""
        harness = await self.db.read(harness_store.get_harness, principal_id, harness_id)
        if harness is None:
            raise harness_not_found()
        async with self.runs.peers.events_heard():  # the turns of other replicas reach it too
            return self.runs.feed.subscribe(principal_id, harness.id)

    # -- lookups for the doors that pick a harness -----------------------------------------
    async def summaries(
        self, principal_id: str, *, create_defaults: bool = True
    ) -> list[records.HarnessSummary]:
        """The principal's harnesses, its default ones created on first use (a write;
        `create_defaults=False` only reads)."""

        def look(tx: Tx) -> list[records.HarnessSummary]:
            if create_defaults:
                ensure_defaults(tx, principal_id, self.bases)
            rows = defaults_first(harness_store.list_harnesses(tx, principal_id), self.bases)
            return [_summary(row) for row in rows]

        return await (self.db.write(look) if create_defaults else self.db.read(look))

    async def summary(
        self, principal_id: str, harness_id: str | None
    ) -> records.HarnessSummary | None:
        """The principal's harness with this id, or its default harness for None."""

        def look(tx: Tx, create_defaults: bool) -> records.HarnessSummary | None:
            if harness_id is not None:
                row = harness_store.get_harness(tx, principal_id, harness_id)
            elif create_defaults:
                row = default_harness(tx, principal_id, self.bases)
            else:
                row = made_default(tx, principal_id, self.bases)
            return _summary(row) if row is not None else None

        # A read finds the harness nearly always; only a principal's first task waits on the
        # writer, to create its defaults.
        found = await self.db.read(look, False)
        if found is None and harness_id is None:
            found = await self.db.write(look, True)
        return found

    async def exists(self, principal_id: str, harness_id: str) -> bool:
        """Whether the principal has this harness (its default harnesses included)."""

        def look(tx: Tx) -> bool:
            default_harness(tx, principal_id, self.bases)  # creates the defaults
            return harness_store.get_harness(tx, principal_id, harness_id) is not None

        return await self.db.write(look)

    # -- rows to records -------------------------------------------------------------------
    @staticmethod
    def _row(tx: Tx, principal_id: str, harness_id: str) -> HarnessRow:
        row = harness_store.get_harness(tx, principal_id, harness_id)
        if row is None:
            raise harness_not_found()
        return row

    async def _record(self, row: HarnessRow) -> records.Harness:
        base = self.bases.get(row.base)
        config = HarnessConfig.from_stored(row.config)
        default = config.default_model
        if base is not None and not default:
            default = await self.catalog.default_for(bound_or_base(base, config.base_config), None)
        skills = await self.db.read(render_skills, row.principal_id, config.skills)
        plugins = await self.db.read(render_plugins, row.principal_id, config.plugins)
        return records.Harness(
            id=row.id,
            principal_id=row.principal_id,
            name=row.name,
            base=row.base,
            config=config,
            created_at_ms=row.created_at_ms,
            base_label=base.label if base is not None else row.base,
            enforcement=base.enforcement if base is not None else None,
            default_model=default,
            skills=skills,
            builtin_skills=inherited_builtin_skills(config.skills),
            plugins=plugins,
        )

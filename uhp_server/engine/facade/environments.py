"""Environments for every door (Environments chapter): the object, its source's files, imports,
builds and versions, the harnesses that name it, the runtimes and the package check.

Every operation on an environment finds it by (principal, id): another principal's is
`environment_not_found`, as one that is not there. The chapter's logic is in
uhp_server/environments/ (a module per concept); this is where it meets storage and turns
into records and the chapter's errors (§8).
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from storage import environments as store
from storage.db import Database, Order
from storage.tables import EnvironmentRow, EnvironmentVersionRow
from storage.unit import Tx
from uhp_server.engine.facade.environment_records import (
    Environment,
    EnvironmentBuild,
    EnvironmentDeleted,
    EnvironmentVersion,
    NamingHarness,
    SourceFile,
    build_of,
    packages_of,
    status_of,
    version_of,
)
from uhp_server.environments.builder import Builder, Runtimes
from uhp_server.environments.builds import BuildOrder, Builds
from uhp_server.environments.errors import (
    busy,
    environment_not_found,
    environment_not_ready,
    invalid,
    source_errors,
)
from uhp_server.environments.git_fetch import GitFetcher, GitUnavailable, checked_git
from uhp_server.environments.importing import (
    ImportLimits,
    ImportResult,
    import_archive,
    import_folder,
)
from uhp_server.environments.layout import EnvironmentLayout, mount_path
from uhp_server.environments.names import (
    Invalid,
    checked_declared,
    checked_name,
    checked_runtime,
    checked_text,
    declared_specs,
)
from uhp_server.environments.package_check import PackageCheck, PackageChecker
from uhp_server.environments.retention import Retention
from uhp_server.environments.source import (
    Busy,
    Entry,
    ImportSlots,
    Incoming,
    Size,
    SourceLocks,
    SourceTree,
    TooLarge,
)
from uhp_server.errors import ApiError
from uhp_server.ids import new_id

MAX_VERSION = 2**31 - 1  # a version number in a route past this names no version


@dataclass(frozen=True)
class PrincipalQuota:
    """One principal's share: its environments, and its sources' files and bytes together."""

    max_environments: int
    max_bytes: int
    max_files: int


@dataclass(frozen=True)
class EnvironmentLimits:
    max_file_bytes: int
    imports: ImportLimits
    principal: PrincipalQuota
    max_concurrent_imports: int


@dataclass
class _Sizes:
    """The sources' sizes, known since their last change here (a walk of a large tree on
    every read would be the slow part of listing environments)."""

    known: dict[str, Size] = field(default_factory=dict)


class Environments:
    def __init__(
        self,
        db: Database,
        layout: EnvironmentLayout,
        builder: Builder,
        builds: Builds,
        retention: Retention,
        checker: PackageChecker,
        git: GitFetcher,
        limits: EnvironmentLimits,
        locks: SourceLocks,
    ) -> None:
        self.db = db
        self.layout = layout
        self.builder = builder
        self.builds = builds
        self.retention = retention
        self.checker = checker
        self.git = git
        self.limits = limits
        self.locks = locks
        self._sizes = _Sizes()
        self._imports = ImportSlots(limits.max_concurrent_imports)
        # Taken (before an environment's own lock) by whatever adds to a principal's share,
        # so two requests at once cannot both fit in what is left for one.
        self._shares = SourceLocks()

    async def open(self) -> None:
        """At start-up: abandoned builds end failed; retention is applied everywhere."""
        await self.builds.open()

    async def close(self) -> None:
        await self.builds.close()
        await self.checker.aclose()

    # -- the object -----------------------------------------------------------------------
    async def create(self, principal_id: str, body: dict[str, Any]) -> Environment:
        try:
            name, slug = checked_name(body.get("name"))
            now = store.now_ms()
            row = EnvironmentRow(
                id=new_id("environment"),
                principal_id=principal_id,
                name=name,
                slug=slug,
                description=checked_text("description", body.get("description") or ""),
                entry=checked_text("entry", body.get("entry") or ""),
                declared=checked_declared(_declared_field(body) or {}),
                runtime=await self._runtime(body.get("runtime") or {}),
                created_at_ms=now,
                updated_at_ms=now,
            )
        except Invalid as exc:
            raise invalid(str(exc)) from None
        async with self._shares.of(principal_id):
            inserted = await self._insert(principal_id, row)
        if inserted is None:
            raise ApiError(
                409,
                "environment_exists",
                f"Another environment already occupies {mount_path(slug)}; choose another name.",
            )
        await asyncio.to_thread(self.layout.source(row.id).mkdir, parents=True, exist_ok=True)
        return await self.get(principal_id, row.id)

    async def _insert(self, principal_id: str, row: EnvironmentRow) -> EnvironmentRow | None:
        most = self.limits.principal.max_environments
        if len(await self.db.read(store.list_environments, principal_id)) >= most:
            raise ApiError(
                422,
                "environment_invalid",
                f"You have {most} environments, as many as this server keeps for one "
                "principal; delete one first.",
                detail={"max_environments": most},
            )
        return await self.db.write(store.insert_environment, row, order=Order.ANY)

    async def all(self, principal_id: str) -> list[Environment]:
        rows = await self.db.read(_all_with_versions, principal_id)
        return [await self._record(row, versions) for row, versions in rows]

    async def get(self, principal_id: str, environment_id: str) -> Environment:
        row, versions = await self._found(principal_id, environment_id)
        return await self._record(row, versions)

    async def update(
        self, principal_id: str, environment_id: str, body: dict[str, Any]
    ) -> Environment:
        """A field left out keeps its value; the slug never changes (a session's
        instructions name it)."""
        try:
            changes: dict[str, Any] = {}
            if "name" in body:
                changes["name"], _ = checked_name(body["name"])
            for text in ("description", "entry"):
                if text in body:
                    changes[text] = checked_text(text, body[text] or "")
            if (declared := _declared_field(body)) is not None:
                changes["declared"] = checked_declared(declared)
            if "runtime" in body:
                changes["runtime"] = await self._runtime(body["runtime"] or {})
        except Invalid as exc:
            raise invalid(str(exc)) from None
        if not await self.db.write(_update, principal_id, environment_id, changes, order=Order.ANY):
            raise environment_not_found()
        return await self.get(principal_id, environment_id)

    async def delete(self, principal_id: str, environment_id: str) -> EnvironmentDeleted:
        """Refused while a build runs. Harnesses that named it keep the reference (their next
        task is refused environment_not_found); the answer names them."""
        async with self.locks.of(environment_id):
            outcome = await self.db.write(_delete, principal_id, environment_id, order=Order.ANY)
            if outcome == _NOT_FOUND:
                raise environment_not_found()
            if outcome == _BUSY:
                raise busy("A build of this environment is running; delete it once it ends.")
            assert isinstance(outcome, tuple)
            await self.builds.remove_folders(environment_id)
        self.locks.forget(environment_id)
        self._sizes.known.pop(environment_id, None)
        return EnvironmentDeleted(environment_id, outcome)

    async def harnesses(self, principal_id: str, environment_id: str) -> list[NamingHarness]:
        await self._found(principal_id, environment_id)
        rows = await self.db.read(store.harnesses_naming, principal_id, environment_id)
        return [NamingHarness(row.id, row.name, row.base) for row in rows]

    # -- files ----------------------------------------------------------------------------
    async def tree(self, principal_id: str, environment_id: str) -> tuple[list[Entry], Size]:
        await self._found(principal_id, environment_id)
        entries = await asyncio.to_thread(self._tree(environment_id).tree)
        files = [entry for entry in entries if not entry.dir]
        return entries, Size(len(files), sum(entry.bytes for entry in files))

    async def read_file(self, principal_id: str, environment_id: str, path: str) -> SourceFile:
        await self._found(principal_id, environment_id)
        with source_errors():
            found, size = await asyncio.to_thread(self._tree(environment_id).open_file, path)
        media_type = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return SourceFile(found, size, media_type)

    async def write_file(
        self,
        principal_id: str,
        environment_id: str,
        path: str,
        chunks: AsyncIterator[bytes],
        declared_length: int | None,
    ) -> int:
        """Writes the body's bytes at `path` exactly as sent, its directories made; the
        bytes written. Refused before a byte is read when the path or its declared length is."""
        await self._found(principal_id, environment_id)
        tree = self._tree(environment_id)
        limit = self.limits.max_file_bytes
        with source_errors():
            await asyncio.to_thread(_writable, tree, path)
            if declared_length is not None and declared_length > limit:
                raise TooLarge(
                    f"The file is larger than this server accepts ({limit} bytes).", limit
                )
            incoming = await asyncio.to_thread(Incoming, tree, limit)
            try:
                async for chunk in chunks:
                    await incoming.write(chunk)
                await incoming.finish()
                async with self._shares.of(principal_id), self.locks.of(environment_id):
                    now = await self._size(environment_id)
                    after = await asyncio.to_thread(_placed, tree, path, incoming.size, now)
                    await self._fit(principal_id, environment_id, after)
                    await asyncio.to_thread(tree.place, incoming.path, path)
            finally:
                incoming.discard()
        self._changed(environment_id)
        return incoming.size

    async def make_directory(self, principal_id: str, environment_id: str, path: Any) -> str:
        await self._found(principal_id, environment_id)
        if not isinstance(path, str):
            raise invalid("`path` must be a string.")
        with source_errors():
            async with self.locks.of(environment_id):
                await asyncio.to_thread(self._tree(environment_id).make_directory, path)
        self._changed(environment_id)
        return path.strip("/")

    async def remove(self, principal_id: str, environment_id: str, path: str) -> str:
        await self._found(principal_id, environment_id)
        with source_errors("Nothing at that path in the environment."):
            async with self.locks.of(environment_id):
                await asyncio.to_thread(self._tree(environment_id).remove, path)
        self._changed(environment_id)
        return path.strip("/")

    # -- imports --------------------------------------------------------------------------
    async def import_archive(
        self,
        principal_id: str,
        environment_id: str,
        chunks: AsyncIterator[bytes],
        declared_length: int | None,
        replace: bool,
    ) -> ImportResult:
        """A zip or a tar as the body: received to a temporary file within the import's
        limit, then extracted (links and escapes dropped, a wrapping directory stripped)."""
        await self._found(principal_id, environment_id)
        tree = self._tree(environment_id)
        limits = self.limits.imports
        with source_errors(), self._importing(environment_id):
            if declared_length is not None and declared_length > limits.max_bytes:
                raise TooLarge(
                    f"The archive is larger than {limits.max_bytes} bytes.", limits.max_bytes
                )
            incoming = await asyncio.to_thread(Incoming, tree, limits.max_bytes)
            try:
                async for chunk in chunks:
                    await incoming.write(chunk)
                await incoming.finish()
                if incoming.size == 0:
                    raise Invalid(
                        "The import is empty: send a zip or a tar, or JSON naming a git repository."
                    )
                async with self._shares.of(principal_id), self.locks.of(environment_id):
                    fits = await self._fits(principal_id, environment_id)
                    result = await asyncio.to_thread(
                        import_archive, incoming.path, tree, limits, replace, fits
                    )
            finally:
                incoming.discard()
        self._changed(environment_id)
        return result

    async def import_git(self, principal_id: str, environment_id: str, body: Any) -> ImportResult:
        """`{"git": {"url", "ref"}, "replace"}`: the repository fetched by the server under
        its egress policy (environments/git_fetch.py), then landed like an archive's tree."""
        await self._found(principal_id, environment_id)
        if not isinstance(body, dict) or "git" not in body:
            raise invalid("An import is a zip or tar body, or JSON naming a git repository.")
        replace = body.get("replace", False)
        if not isinstance(replace, bool):
            raise invalid("`replace` must be true or false.")
        tree = self._tree(environment_id)
        limits = self.limits.imports
        try:
            with source_errors(), self._importing(environment_id):
                source = checked_git(body["git"])
                fetched = await self.git.fetch(source, tree.scratch, limits)
                try:
                    async with self._shares.of(principal_id), self.locks.of(environment_id):
                        fits = await self._fits(principal_id, environment_id)
                        result = await asyncio.to_thread(
                            import_folder, fetched, tree, limits, replace, fits
                        )
                finally:
                    await asyncio.to_thread(shutil.rmtree, fetched.parent, True)
        except GitUnavailable as exc:
            raise ApiError(502, "environment_unavailable", str(exc)) from None
        self._changed(environment_id)
        return result

    # -- builds and versions -------------------------------------------------------------
    async def build(self, principal_id: str, environment_id: str) -> EnvironmentBuild:
        row, _ = await self._found(principal_id, environment_id)
        order = BuildOrder(
            environment_id=row.id,
            principal_id=principal_id,
            slug=row.slug,
            declared=dict(row.declared or {}),
            python=str((row.runtime or {}).get("python") or ""),
        )
        started = await self.builds.start(order)
        if started is None:
            raise busy("A build of this environment is already running.")
        return build_of(started)  # as started: read again, a quick build may be over already

    async def build_record(
        self, principal_id: str, environment_id: str, version: int
    ) -> EnvironmentBuild:
        await self._found(principal_id, environment_id)
        record = None
        if 0 < version <= MAX_VERSION:  # beyond, no row can be (nor SQLite hold the number)
            record = await self.db.read(store.get_version, environment_id, version)
        if record is None:
            raise ApiError(404, "not_found", f"This environment has no build {version}.")
        return build_of(record)

    async def versions(
        self, principal_id: str, environment_id: str
    ) -> tuple[int | None, list[EnvironmentVersion]]:
        row, versions = await self._found(principal_id, environment_id)
        return row.active_version, [version_of(v) for v in versions]

    async def activate(self, principal_id: str, environment_id: str, version: int) -> Environment:
        """Makes a finished build the active version: a rollback is a pointer, nothing is
        rebuilt. 404 for a version never started; environment_not_ready for one that did
        not finish (or whose folder retention collected)."""
        _, versions = await self._found(principal_id, environment_id)
        record = next((v for v in versions if v.version == version), None)
        if record is None:
            raise ApiError(404, "not_found", f"This environment has no version {version}.")
        if not await self.db.write(store.activate_kept, environment_id, version, order=Order.ANY):
            why = (
                "was garbage-collected; build again"
                if record.collected_at is not None
                else f"is {record.status}, not a finished build"
            )
            raise environment_not_ready(f"Version {version} {why}.")
        return await self.get(principal_id, environment_id)

    # -- what builds can use --------------------------------------------------------------
    async def runtimes(self) -> Runtimes:
        return await asyncio.to_thread(self.builder.runtimes)

    async def check_package(self, manager: str, spec: str) -> PackageCheck:
        try:
            return await self.checker.check(manager, spec)
        except Invalid as exc:
            raise invalid(str(exc), status=400) from None

    # -- helpers --------------------------------------------------------------------------
    async def _found(
        self, principal_id: str, environment_id: str
    ) -> tuple[EnvironmentRow, list[EnvironmentVersionRow]]:
        found = await self.db.read(_with_versions, principal_id, environment_id)
        if found is None:
            raise environment_not_found()
        return found

    async def _record(
        self, row: EnvironmentRow, versions: list[EnvironmentVersionRow]
    ) -> Environment:
        active = next((v for v in versions if v.version == row.active_version), None)
        return Environment(
            id=row.id,
            name=row.name,
            slug=row.slug,
            description=row.description,
            entry=row.entry,
            status=status_of(row, versions),
            version=row.active_version,
            latest_version=row.latest_version,
            files=await self._size(row.id),
            packages=packages_of(active.packages if active else None),
            declared=declared_specs(row.declared or {}),
            runtime=dict(row.runtime or {}),
            versions=tuple(version_of(v) for v in versions),
            created_at_ms=row.created_at_ms,
            updated_at_ms=row.updated_at_ms,
        )

    async def _size(self, environment_id: str) -> Size:
        known = self._sizes.known.get(environment_id)
        if known is None:
            known = await asyncio.to_thread(self._tree(environment_id).size)
            self._sizes.known[environment_id] = known
        return known

    @contextlib.contextmanager
    def _importing(self, environment_id: str) -> Iterator[None]:
        try:
            with self._imports.hold(environment_id):
                yield
        except Busy as exc:
            raise busy(str(exc)) from None

    async def _others(self, principal_id: str, environment_id: str) -> Size:
        """The files and bytes of the principal's other environments' sources."""
        rows = await self.db.read(store.list_environments, principal_id)
        sizes = [await self._size(row.id) for row in rows if row.id != environment_id]
        return Size(sum(s.count for s in sizes), sum(s.bytes for s in sizes))

    async def _fit(self, principal_id: str, environment_id: str, after: Size) -> None:
        """TooLarge when the principal's share would not hold this source at `after`."""
        (await self._fits(principal_id, environment_id))(after)

    async def _fits(self, principal_id: str, environment_id: str) -> Callable[[Size], None]:
        others = await self._others(principal_id, environment_id)
        quota = self.limits.principal

        def fits(after: Size) -> None:
            if others.bytes + after.bytes > quota.max_bytes:
                raise TooLarge(
                    f"Your environments' sources would hold {others.bytes + after.bytes} "
                    f"bytes, over the {quota.max_bytes} this server keeps for one principal.",
                    quota.max_bytes,
                )
            if others.count + after.count > quota.max_files:
                raise TooLarge(
                    f"Your environments' sources would hold {others.count + after.count} "
                    f"files, over the {quota.max_files} this server keeps for one principal.",
                    quota.max_bytes,
                    quota.max_files,
                )

        return fits

    def _changed(self, environment_id: str) -> None:
        self._sizes.known.pop(environment_id, None)

    def _tree(self, environment_id: str) -> SourceTree:
        return SourceTree(
            self.layout.source(environment_id), self.layout.folder(environment_id) / "incoming"
        )

    async def _runtime(self, value: Any) -> dict[str, str]:
        if not value:
            return {}
        runtimes = await self.runtimes()
        return checked_runtime(value, runtimes.python)


def _declared_field(body: dict[str, Any]) -> Any:
    """`packages` (EnvironmentCreate) or `declared` (the object's own name for it)."""
    if "packages" in body and "declared" in body:
        raise Invalid("Send the declared packages once, as `packages`.")
    return body.get("packages", body.get("declared"))


def _placed(tree: SourceTree, path: str, size: int, now: Size) -> Size:
    """The source's size once a file of `size` bytes is at `path` (replacing one, or not)."""
    try:
        _, replaced = tree.open_file(path)
    except FileNotFoundError:
        return Size(now.count + 1, now.bytes + size)
    return Size(now.count, now.bytes - replaced + size)


def _writable(tree: SourceTree, path: str) -> None:
    """Invalid for a path a file cannot be written at (before the body is read)."""
    try:
        _, is_dir = tree.existing(path)
    except FileNotFoundError:
        return
    if is_dir:
        raise Invalid("The path names a directory; a file cannot replace it.")


def _with_versions(
    tx: Tx, principal_id: str, environment_id: str
) -> tuple[EnvironmentRow, list[EnvironmentVersionRow]] | None:
    row = store.get_environment(tx, principal_id, environment_id)
    return None if row is None else (row, store.versions(tx, environment_id))


def _all_with_versions(
    tx: Tx, principal_id: str
) -> list[tuple[EnvironmentRow, list[EnvironmentVersionRow]]]:
    return [(row, store.versions(tx, row.id)) for row in store.list_environments(tx, principal_id)]


def _update(tx: Tx, principal_id: str, environment_id: str, changes: dict[str, Any]) -> bool:
    row = store.get_environment(tx, principal_id, environment_id)
    if row is None:
        return False
    for name, value in changes.items():
        setattr(row, name, value)
    store.save_environment(tx, row)
    return True


_NOT_FOUND, _BUSY = "not found", "busy"


def _delete(tx: Tx, principal_id: str, environment_id: str) -> tuple[NamingHarness, ...] | str:
    """The harnesses it detaches, or why it was not deleted (_NOT_FOUND, _BUSY)."""
    if store.get_environment(tx, principal_id, environment_id) is None:
        return _NOT_FOUND
    naming = store.harnesses_naming(tx, principal_id, environment_id)
    if not store.delete_environment(tx, environment_id):
        return _BUSY
    return tuple(NamingHarness(row.id, row.name, row.base) for row in naming)

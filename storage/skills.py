"""Skill bundles and plugin packages, stored out of line: a principal's bundle is a manifest of
content-addressed blobs. A bundle id is the `blob` handle a client receives and passes back
unchanged; its prefix says what it holds (`skb_` a skill folder, `plg_` a plugin package).

Bundles and blobs are immutable; a changed skill is a new bundle. The id is derived from the
principal and the manifest, so storing the same folder twice costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from storage.tables import SkillBlobRow, SkillBundleRow
from storage.unit import Tx

BUNDLE_PREFIX = "skb_"  # a skill's folder
PACKAGE_PREFIX = "plg_"  # a plugin's package (uhp_server/harnesses/plugins/)


@dataclass(frozen=True)
class StoredFile:
    """One file of a bundle. `encoding` is how the client sent it ("text" or "base64"), so
    the bundle reads back in the form it was written."""

    path: str
    data: bytes
    encoding: str


@dataclass(frozen=True)
class ManifestEntry:
    path: str
    digest: str
    size: int
    encoding: str


def _manifest(files: list[StoredFile]) -> list[dict[str, Any]]:
    entries = (
        {
            "path": f.path,
            "digest": hashlib.sha256(f.data).hexdigest(),
            "size": len(f.data),
            "encoding": f.encoding,
        }
        for f in files
    )
    return sorted(entries, key=lambda m: m["path"])


def bundle_id(principal_id: str, files: list[StoredFile], prefix: str = BUNDLE_PREFIX) -> str:
    """The id put_bundle gives these files (known before anything is written)."""
    canonical = json.dumps([principal_id, _manifest(files)], sort_keys=True, separators=(",", ":"))
    return prefix + hashlib.sha256(canonical.encode()).hexdigest()[:40]


def put_bundle(
    tx: Tx, principal_id: str, files: list[StoredFile], prefix: str = BUNDLE_PREFIX
) -> str:
    """Store the files (deduplicated) and return the bundle's id."""
    manifest = _manifest(files)
    new_id = bundle_id(principal_id, files, prefix)
    data = {hashlib.sha256(f.data).hexdigest(): f.data for f in files}
    for digest, blob in data.items():
        _add_once(tx, SkillBlobRow(digest=digest, data=blob), digest)
    bundle = SkillBundleRow(
        id=new_id, principal_id=principal_id, files=manifest, created_at=time.time()
    )
    _add_once(tx, bundle, new_id)
    return new_id


def stored(tx: Tx, table: type[SkillBlobRow] | type[SkillBundleRow], key: str) -> bool:
    return tx.orm.get(table, key) is not None


def _add_once(tx: Tx, row: SkillBlobRow | SkillBundleRow, key: str) -> None:
    """Insert a row keyed by its content, unless it is stored. Two writes storing the same
    content at once (harness writes run side by side on PostgreSQL) both find it missing and
    the key decides: the loser's row is the winner's, so it has nothing left to write. It
    finds out in a savepoint, so that its unit stays usable and commits: a failed flush
    outside one ends the unit's transaction (on PostgreSQL the failed statement aborts it
    anyway), a 500 where the harness is due."""
    if stored(tx, type(row), key):
        return
    try:
        with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
            tx.orm.add(row)
    except IntegrityError:  # the same content, stored at the same moment
        pass


def get_manifest(tx: Tx, principal_id: str, bundle_id: str) -> list[ManifestEntry] | None:
    """The bundle's files (without their bytes); None when not the principal's."""
    row = tx.orm.get(SkillBundleRow, bundle_id)
    if row is None or row.principal_id != principal_id:
        return None
    return [ManifestEntry(**entry) for entry in row.files]


def read_blobs(tx: Tx, digests: list[str]) -> dict[str, bytes]:
    if not digests:
        return {}
    rows = tx.orm.exec(select(SkillBlobRow).where(col(SkillBlobRow.digest).in_(set(digests))))
    return {row.digest: row.data for row in rows}


def read_bundle(tx: Tx, principal_id: str, bundle_id: str) -> list[StoredFile] | None:
    """The bundle's files with their bytes; None when not the principal's."""
    manifest = get_manifest(tx, principal_id, bundle_id)
    if manifest is None:
        return None
    blobs = read_blobs(tx, [m.digest for m in manifest])
    return [StoredFile(m.path, blobs[m.digest], m.encoding) for m in manifest]

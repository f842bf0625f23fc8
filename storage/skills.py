"""Skill bundles, stored out of line: a principal's bundle is a manifest of content-addressed
blobs. A bundle id is the `blob` handle a client receives and passes back unchanged.

Bundles and blobs are immutable; a changed skill is a new bundle. The id is derived from the
principal and the manifest, so storing the same folder twice costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Column, LargeBinary
from sqlmodel import Field, SQLModel, select

if TYPE_CHECKING:  # storage.db imports this module to register its tables
    from storage.db import Database

BUNDLE_PREFIX = "skb_"


class SkillBlobRow(SQLModel, table=True):
    __tablename__ = "skill_blob"
    digest: str = Field(primary_key=True)  # sha256 hex of data
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class SkillBundleRow(SQLModel, table=True):
    __tablename__ = "skill_bundle"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    # [{"path", "digest", "size", "encoding"}], sorted by path
    files: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    created_at: float


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


def bundle_id(principal_id: str, files: list[StoredFile]) -> str:
    """The id put_bundle gives these files (known before anything is written)."""
    canonical = json.dumps([principal_id, _manifest(files)], sort_keys=True, separators=(",", ":"))
    return BUNDLE_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:40]


def put_bundle(db: Database, principal_id: str, files: list[StoredFile]) -> str:
    """Store the files (deduplicated) and return the bundle's id."""
    manifest = _manifest(files)
    new_id = bundle_id(principal_id, files)
    data = {hashlib.sha256(f.data).hexdigest(): f.data for f in files}
    with db.session() as s:
        for digest, blob in data.items():
            if s.get(SkillBlobRow, digest) is None:
                s.add(SkillBlobRow(digest=digest, data=blob))
        if s.get(SkillBundleRow, new_id) is None:
            s.add(
                SkillBundleRow(
                    id=new_id, principal_id=principal_id, files=manifest, created_at=time.time()
                )
            )
        s.commit()
    return new_id


def get_manifest(db: Database, principal_id: str, bundle_id: str) -> list[ManifestEntry] | None:
    """The bundle's files (without their bytes); None when not the principal's."""
    with db.session() as s:
        row = s.get(SkillBundleRow, bundle_id)
        if row is None or row.principal_id != principal_id:
            return None
        return [ManifestEntry(**entry) for entry in row.files]


def read_blobs(db: Database, digests: list[str]) -> dict[str, bytes]:
    if not digests:
        return {}
    with db.session() as s:
        rows = s.exec(select(SkillBlobRow).where(SkillBlobRow.digest.in_(set(digests))))  # type: ignore[attr-defined]
        return {row.digest: row.data for row in rows}


def read_bundle(db: Database, principal_id: str, bundle_id: str) -> list[StoredFile] | None:
    """The bundle's files with their bytes; None when not the principal's."""
    manifest = get_manifest(db, principal_id, bundle_id)
    if manifest is None:
        return None
    blobs = read_blobs(db, [m.digest for m in manifest])
    return [StoredFile(m.path, blobs[m.digest], m.encoding) for m in manifest]

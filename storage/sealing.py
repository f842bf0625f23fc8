"""Secrets at rest: what the database holds of a credential is sealed, never the value.

A stored secret (an MCP server's `auth` or credential header, storage/mcp_secrets.py) is
encrypted with AES-256-GCM before it is written: a copied database, a backup or a replica's
dump holds no usable credential without the key, which never enters the database. The
sealed form is text, `uhp-sealed:v1:<key id>:<base64 of nonce + ciphertext>`, and names the
key it was sealed with. Associated data binds it to its row (the caller's `context`), so a
sealed value copied onto another row or principal does not open.

The keys: `UHP_SECRETS_KEY`, one key or several separated by commas (each 32 random bytes in
URL-safe base64, as `uhp-server secrets new-key` prints one). The first seals; every one
opens. Unset: a key file in the data directory, `secrets.key` (mode 0600), made on first
start, one key per line in the same order. Rotation (docs/security.md): put the new key
first, keep the old ones after it until `uhp-server secrets rotate` (or the next start) has
sealed every stored secret again with the new one.

A value stored before sealing existed reads as it is (`open` passes it through) and is
sealed at the next start (`mcp_secrets.reseal`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from storage.private import private_dir

SEALED_PREFIX = "uhp-sealed:v1:"
KEY_FILE_NAME = "secrets.key"
_KEY_BYTES = 32
_NONCE_BYTES = 12


class SealingError(Exception):
    """A key that is not one, or a sealed value no key opens (said without the value)."""


def new_key() -> str:
    """A fresh key, as UHP_SECRETS_KEY and the key file take it."""
    return base64.urlsafe_b64encode(secrets.token_bytes(_KEY_BYTES)).decode()


def _decoded(key: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(key.strip().encode())
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != _KEY_BYTES:
        raise SealingError(
            "A secrets key must be 32 bytes in URL-safe base64 (uhp-server secrets new-key)."
        )
    return raw


def _key_id(raw: bytes) -> str:
    """A short name for a key that says nothing of it: which key sealed a value."""
    return hashlib.sha256(b"uhp-secrets-key:" + raw).hexdigest()[:12]


class Sealer:
    """Seals with the first key; opens with whichever key sealed. Keys read from a key file
    are read again when a value names a key not among them (`uhp-server secrets rotate`
    added it while this server ran)."""

    def __init__(self, keys: list[str], source: Path | None = None) -> None:
        self._keys = tuple(_decoded(k) for k in keys if k.strip())
        if not self._keys:
            raise SealingError("No secrets key.")
        self._source = source

    @property
    def current_id(self) -> str:
        return _key_id(self._keys[0])

    def seal(self, value: str, context: str) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._keys[0]).encrypt(nonce, value.encode(), context.encode())
        text = base64.urlsafe_b64encode(nonce + sealed).decode()
        return f"{SEALED_PREFIX}{self.current_id}:{text}"

    def open(self, stored: str, context: str) -> str:
        """The value of a sealed secret; a value stored before sealing, as it is."""
        if not is_sealed(stored):
            return stored
        key_id, _, text = stored[len(SEALED_PREFIX) :].partition(":")
        try:
            data = base64.urlsafe_b64decode(text.encode())
        except (binascii.Error, ValueError) as exc:
            raise SealingError("A stored secret is damaged.") from exc
        key = self._key(key_id)
        if key is None:
            raise SealingError(
                f"A stored secret was sealed with key {key_id}, which this server does not "
                "have (UHP_SECRETS_KEY or the data directory's secrets.key)."
            )
        try:
            nonce, sealed = data[:_NONCE_BYTES], data[_NONCE_BYTES:]
            return AESGCM(key).decrypt(nonce, sealed, context.encode()).decode()
        except InvalidTag as exc:
            raise SealingError("A stored secret is damaged or belongs to another row.") from exc

    def _key(self, key_id: str) -> bytes | None:
        found = next((k for k in self._keys if _key_id(k) == key_id), None)
        if found is None and self._source is not None and self._source.exists():
            self._keys = Sealer(_read_keys(self._source))._keys
            found = next((k for k in self._keys if _key_id(k) == key_id), None)
        return found

    def is_current(self, stored: str) -> bool:
        """Whether `stored` is sealed with the key that seals now."""
        return stored.startswith(f"{SEALED_PREFIX}{self.current_id}:")


def is_sealed(stored: str) -> bool:
    return stored.startswith(SEALED_PREFIX)


def key_file(data_dir: Path) -> Path:
    return data_dir / KEY_FILE_NAME


def load_sealer(configured: str | None, data_dir: Path) -> Sealer:
    """The keys of UHP_SECRETS_KEY (`configured`) or, unset, of the data directory's key
    file, made (0600, one new key) when there is none."""
    if configured and configured.strip():
        return Sealer(configured.split(","))
    path = key_file(data_dir)
    if not path.exists():
        write_key_file(path, [new_key()], exclusive=True)
    check_key_file_mode(path)
    return Sealer(_read_keys(path), source=path)


def check_key_file_mode(path: Path) -> None:
    """Refuses a key file that users other than the server's can read: the key opens every
    stored secret, so a key readable by all is no better than no sealing."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SealingError(
            f"The secrets key file {path} is readable by other users (mode {mode:04o}): "
            f"run `chmod 600 {path}`."
        )


def _read_keys(path: Path) -> list[str]:
    return path.read_text(encoding="ascii").splitlines()


def write_key_file(path: Path, keys: list[str], *, exclusive: bool = False) -> None:
    """The key file, readable by this user only. `exclusive`: only when none exists (two
    processes starting at once keep the one that was made first)."""
    private_dir(path.parent)
    fresh = path.with_name(f"{path.name}.{secrets.token_hex(4)}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write("".join(f"{k}\n" for k in keys).encode("ascii"))
        out.flush()
        os.fsync(out.fileno())
    try:
        if exclusive:
            os.link(fresh, path)  # whole, and only when there is none
        else:
            os.replace(fresh, path)  # all the keys or the old file, never half of one
    except FileExistsError:
        pass
    finally:
        fresh.unlink(missing_ok=True)

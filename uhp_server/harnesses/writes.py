"""What a harness body stores besides the harness row (skill bundles, plugin packages, MCP
secrets), held back until the whole body has been validated, so a refused body leaves nothing
behind; and validated in a read, stored in the write, so what a body costs to check (a
plugin package's YAML and JSON Schema) never holds the one writer every principal's writes
and every turn's event log wait for (engine/facade/harnesses.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from storage import mcp_secrets
from storage import skills as skill_store
from storage.skills import StoredFile
from storage.unit import Tx


@dataclass
class PendingWrites:
    tx: Tx  # the read it validates in (blob handles, secret references)
    principal_id: str
    _bundles: list[tuple[list[StoredFile], str]] = field(default_factory=list)
    _secrets: list[tuple[str, str, str]] = field(default_factory=list)

    def bundle(self, files: list[StoredFile], prefix: str = skill_store.BUNDLE_PREFIX) -> str:
        """The blob handle these files will be stored under (`prefix`: what they are)."""
        self._bundles.append((files, prefix))
        return skill_store.bundle_id(self.principal_id, files, prefix)

    def secret(self, value: str, origin: str) -> str:
        """The id the secret will be stored under, bound to the origin it is for."""
        secret_id = mcp_secrets.new_secret_id()
        self._secrets.append((secret_id, value, origin))
        return secret_id

    def write(self, tx: Tx) -> None:
        """Store them, in the write that stores the harness."""
        for files, prefix in self._bundles:
            skill_store.put_bundle(tx, self.principal_id, files, prefix)
        for secret_id, value, origin in self._secrets:
            mcp_secrets.put_secret(tx, self.principal_id, value, secret_id, origin)
        self._bundles.clear()
        self._secrets.clear()

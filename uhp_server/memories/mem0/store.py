"""mem0's `Memory` in its local mode, called from one worker thread at a time.

Local mode: vectors and payloads in Qdrant embedded on disk (`<folder>/qdrant`, one
collection), mem0's change history in SQLite (`<folder>/history.sqlite3`). Nothing here
reaches a network: mem0's telemetry is turned off before mem0 is imported, its LLM is never
asked (every write is `infer=False`; the LLM it is configured with points at the discard
port, so even a call could not leave the machine), and its embedder is replaced by
`PreparedVectors`: the provider embeds through the server's gateway first, and mem0 is handed
the vectors it asks for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

COLLECTION = "uhp_records"
# Reads of one memory's payloads take them all at once (Qdrant's local mode scans anyway).
SCAN_LIMIT = 1_000_000
NOWHERE = "http://127.0.0.1:9/not-used"  # the discard port: mem0's LLM is never called


class PreparedVectors:
    """mem0's embedder, answered from vectors the provider already fetched through the
    gateway; a text it was not handed is a bug of the adapter, not a call to anywhere."""

    def __init__(self, config: Any) -> None:
        self.config = config  # mem0 reads its embedder's config now and then
        self.vectors: dict[str, list[float]] = {}

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self.vectors[text]

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        return [self.vectors[text] for text in texts]


def import_mem0(home: Path) -> Any:
    """mem0's `Memory`, imported with its telemetry off and its home folder (where it writes
    a config file on import) in the provider's own folder, not in a user's home. ImportError
    when the `.[mem0]` extra is not installed."""
    os.environ["MEM0_TELEMETRY"] = "False"  # it would post events to a server of mem0's
    os.environ.setdefault("MEM0_DIR", str(home))
    from mem0 import Memory
    from mem0.memory import main, telemetry

    # Read once, when mem0 is first imported: had anything imported it before the variable
    # was set, its flags are turned off here all the same.
    telemetry.MEM0_TELEMETRY = False
    main.MEM0_TELEMETRY = False
    return Memory


class Mem0Store:
    """One mem0 `Memory`; every method runs on a worker thread, one at a time (the provider
    holds its lock): Qdrant's local mode is not made for concurrent callers."""

    def __init__(self, folder: Path, dimensions: int, model: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        memory_class = import_mem0(folder / "home")
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": COLLECTION,
                    "path": str(folder / "qdrant"),
                    "embedding_model_dims": dimensions,
                    "on_disk": True,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {"model": model, "api_key": "not-used", "openai_base_url": NOWHERE},
            },
            "llm": {
                "provider": "openai",
                "config": {"model": "not-used", "api_key": "not-used", "openai_base_url": NOWHERE},
            },
            "history_db_path": str(folder / "history.sqlite3"),
        }
        self.memory = memory_class.from_config(config)
        self.vectors = PreparedVectors(self.memory.embedding_model.config)
        self.memory.embedding_model = self.vectors

    def add(self, text: str, vector: list[float], memory_id: str, metadata: dict[str, Any]) -> str:
        """A new mem0 memory holding `text` as stated (infer=False); its id."""
        self.vectors.vectors = {text: vector}
        added = self.memory.add(
            [{"role": "user", "content": text}], user_id=memory_id, metadata=metadata, infer=False
        )
        return str(added["results"][0]["id"])

    def scan(self, filters: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Every point matching mem0's filter syntax, with its payload."""
        listed = self.memory.vector_store.list(filters=filters, top_k=SCAN_LIMIT)
        points = listed[0] if listed and isinstance(listed[0], list) else listed
        return [(str(point.id), dict(point.payload or {})) for point in points]

    def set_fields(self, point_id: str, fields: dict[str, Any]) -> None:
        """Payload fields changed in place (a version closed); its text and vector stay."""
        self.memory.vector_store.update(vector_id=point_id, payload=fields)

    def search(
        self, query: str, vector: list[float], filters: dict[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        """mem0's search (its vector search; its keyword and entity boosts need extras
        this server does not install), every score kept (threshold 0)."""
        self.vectors.vectors = {query: vector}
        found = self.memory.search(query, top_k=limit, filters=filters, threshold=0.0)
        return list(found["results"])

    def delete(self, point_ids: list[str]) -> None:
        """The points removed, and then mem0's history of them, which keeps their text."""
        for point_id in point_ids:
            self.memory.delete(point_id)
        self._purge_history(point_ids)

    def _purge_history(self, point_ids: list[str]) -> None:
        history = self.memory.db
        marks = ",".join("?" for _ in point_ids)
        with history._lock:
            statement = f"DELETE FROM history WHERE memory_id IN ({marks})"
            history.connection.execute(statement, point_ids)
            history.connection.commit()

    def history_rows(self, point_ids: list[str]) -> int:
        """How many rows mem0's history still holds about these points (erase's check)."""
        return sum(len(self.memory.history(point_id)) for point_id in point_ids)

    def close(self) -> None:
        self.memory.close()

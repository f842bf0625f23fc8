"""Rows for one table, in plain SQL: inserted by a statement of their own, or (PostgreSQL) as
one part of a larger statement behind a gate (storage/acceptance.py).

Plain SQL because a task's acceptance writes them at every task: the ORM's unit of work for
these few rows costs about a millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.unit import Tx


@dataclass(frozen=True)
class Insert:
    """Rows for one table."""

    table: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    json: frozenset[str] = frozenset()  # columns given as JSON text
    clock: str | None = None  # a column set to the database's clock, in seconds

    def run(self, tx: Tx) -> None:
        """Insert the rows in the caller's transaction."""
        values = ", ".join(["?"] * len(self.columns) + ([tx.dialect.now] if self.clock else []))
        tx.executemany(f"INSERT INTO {self.table} ({self._targets()}) VALUES ({values})", self.rows)

    def behind_gate(self, now: str) -> tuple[str, list[Any]]:
        """PostgreSQL: an INSERT of these rows for each row of a CTE named `gate`, written with
        `?` parameters; `now`: the database's clock in SQL. Only JSON columns are cast:
        PostgreSQL types the other untyped parameters from the column they go to, or as text
        (a NULL goes only to text columns here)."""
        one = ", ".join("?::json" if c in self.json else "?" for c in self.columns)
        values = ", ".join(f"({one})" for _ in self.rows)
        names = ", ".join(f"v{i}" for i in range(len(self.columns)))
        clock = f", {now}" if self.clock else ""
        sql = (
            f"INSERT INTO {self.table} ({self._targets()}) SELECT {names}{clock}"
            f" FROM gate, (VALUES {values}) AS v ({names})"
        )
        return sql, [field for row in self.rows for field in row]

    @property
    def parameters(self) -> int:
        return len(self.columns) * len(self.rows)

    def _targets(self) -> str:
        return ", ".join(self.columns + ((self.clock,) if self.clock else ()))

"""One unit of work: the transaction every storage function is given (`Tx`), and what a
storage function may declare about itself.

Every storage function takes a `Tx` first and never opens, commits or rolls back anything.
`await db.write(fn, *args)` runs `fn(tx, *args)` in one transaction on one connection,
committed once when it returns and rolled back whole when it raises, so two storage functions
called from one `fn` are one transaction (datasette's `execute_write_fn` is the model).
`await db.read(fn, *args)` gives `fn` a Tx whose statements each see what is committed.
What others may only be told once the unit is there to see waits for its commit
(`tx.after_commit`).

Two declarations, which storage/db.py acts on:
- `one_statement` / `at_once`: a function that is (or can be) sent as ONE statement, atomic
  on its own: on PostgreSQL without BEGIN and COMMIT around it, and, while the server binds
  its event loop, sent from the loop (storage/loop_link.py says why).
- `repeatable`: a write sent again when the database ended its connection under it, since
  doing it twice does no harm (storage/replicas.py's admission statements).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, TypeVarTuple

from sqlalchemy.engine import Connection
from sqlmodel import Session

from storage.dialect import Dialect
from storage.sealing import Sealer, SealingError

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
F = TypeVar("F", bound=Callable[..., Any])
Rows = list[tuple[Any, ...]]
# A plain statement's parameters: a sequence for `?`, a mapping for `:name`.
Params = Sequence[Any] | Mapping[str, Any]


class Tx:
    """One transaction on one connection: the ORM's session, plain SQL, and the dialect.
    Made by storage/db.py, for one call of a storage function."""

    def __init__(
        self,
        connection: Connection,
        dialect: Dialect,
        unit_id: str = "",
        sealer: Sealer | None = None,
    ) -> None:
        self.dialect = dialect
        self._sealer = sealer
        self._unit_id = unit_id
        self._connection = connection
        self._session: Session | None = None
        self._after_commit: list[Callable[[], object]] = []

    @property
    def unit_id(self) -> str:
        """An id of this unit of work, the same each time it is sent again (`repeatable`): a
        change that must not land twice marks its row with it, and a repeat finds it there."""
        if not self._unit_id:  # (not repeatable: made only when asked for)
            self._unit_id = secrets.token_hex(8)
        return self._unit_id

    @property
    def sealer(self) -> Sealer:
        """What seals and opens the secrets this unit stores or reads (storage/sealing.py)."""
        if self._sealer is None:
            raise SealingError("This database was opened without a secrets key.")
        return self._sealer

    @property
    def orm(self) -> Session:
        """The ORM's session, on this transaction's connection (made at first use). Never
        commit it: the unit does."""
        if self._session is None:
            self._session = Session(
                bind=self._connection,
                expire_on_commit=False,
                # The unit owns the transaction: the session flushes into it, never ends it.
                join_transaction_mode="rollback_only",
            )
        return self._session

    def rows(self, statement: str, params: Params = ()) -> Rows:
        """Plain SQL on this transaction's connection (`?` or `:name` parameters, as for
        SQLite; storage/dialect.py spells them for the driver): its rows, [] for none. The
        ORM's pending changes are flushed first, so the statement sees them."""
        cursor = self._cursor(statement, params)
        try:
            return self.dialect.fetch(cursor)
        finally:
            cursor.close()

    def execute(self, statement: str, params: Params = ()) -> int:
        """Plain SQL that returns no rows; how many rows it changed."""
        cursor = self._cursor(statement, params)
        try:
            self.dialect.fetch(cursor)  # (pipelined, the count comes with the answer)
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def executemany(self, statement: str, rows: Sequence[Params]) -> None:
        """One statement for each of `rows` (the driver's own loop)."""
        self.flush()
        cursor = self.driver.cursor()
        try:
            cursor.executemany(self.dialect.sql(statement), rows)
        finally:
            cursor.close()

    def after_commit(self, then: Callable[[], object]) -> None:
        """Call `then` on this thread once the unit has committed (never, when it did not):
        what others may only be told of, or act on, once it is there to see."""
        self._after_commit.append(then)

    def committed(self) -> None:
        """The unit committed (storage/db.py says so): what waited for it, in order."""
        for then in self._after_commit:
            then()

    @property
    def driver(self) -> Any:
        """The driver's own connection under this transaction (psycopg's, or sqlite3's)."""
        return self._connection.connection.dbapi_connection

    def flush(self) -> None:
        """Send the ORM's pending changes (the unit does, before it commits)."""
        session = self._session
        if session is not None and (session.new or session.dirty or session.deleted):
            session.flush()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    def _cursor(self, statement: str, params: Params) -> Any:
        self.flush()
        cursor = self.driver.cursor()
        try:
            cursor.execute(self.dialect.sql(statement), params)
        except BaseException:
            cursor.close()
            raise
        return cursor


@dataclass(frozen=True)
class Statement(Generic[T]):
    """One statement, atomic on its own: its SQL (`?` parameters), its parameters, and what
    its rows mean."""

    sql: str
    params: Sequence[Any]
    result: Callable[[Rows], T]

    def run(self, tx: Tx) -> T:
        return self.result(tx.rows(self.sql, self.params))


# Storage functions that can be sent as one statement: the function -> its statement for a
# dialect and arguments (None: not one statement here).
_AT_ONCE: dict[Callable[..., Any], Callable[..., Statement[Any] | None]] = {}


def one_statement(form: Callable[[*Ts], Statement[T]]) -> Callable[[Tx, *Ts], T]:
    """The storage function that runs the statement `form` makes of its arguments."""

    def fn(tx: Tx, *args: *Ts) -> T:
        return form(*args).run(tx)

    functools.update_wrapper(fn, form)
    _AT_ONCE[fn] = lambda _dialect, *args: form(*args)
    return fn


def at_once(
    form: Callable[[Dialect, *Ts], Statement[T] | None],
) -> Callable[[Callable[[Tx, *Ts], T]], Callable[[Tx, *Ts], T]]:
    """Declare that the storage function can also be sent as the one statement `form` makes
    for a dialect and its arguments (None: not here, e.g. past one statement's parameters).
    Inside a caller's transaction the function itself runs."""

    def declare(fn: Callable[[Tx, *Ts], T]) -> Callable[[Tx, *Ts], T]:
        _AT_ONCE[fn] = form
        return fn

    return declare


def statement_of(
    fn: Callable[..., Any], dialect: Dialect, args: tuple[Any, ...]
) -> Statement[Any] | None:
    """The one statement `fn(tx, *args)` can be sent as, or None."""
    form = _AT_ONCE.get(fn)
    return form(dialect, *args) if form is not None else None


@dataclass(frozen=True)
class Repeat:
    """How a write is sent again when the database ended its connection under it: once, or
    (`seconds`, from the call's arguments) again and again for that long."""

    seconds: Callable[..., float] | None = None


_REPEATABLE: dict[Callable[..., Any], Repeat] = {}


def repeatable(*, for_seconds: Callable[..., float] | None = None) -> Callable[[F], F]:
    """Declare a write (a storage function, or a method taking a Tx after `self`) that may be
    sent again when the database ended its connection under it (a restart, a terminated
    backend): its commit may have landed, so doing it twice must do no harm. Once; with
    `for_seconds` (a function of the call's arguments), again and again with a growing pause
    until the database answers, for that long. OutcomeUnknown when the last try failed too."""

    def declare(fn: F) -> F:
        _REPEATABLE[fn] = Repeat(for_seconds)
        return fn

    return declare


def repeat_of(fn: Callable[..., Any]) -> Repeat | None:
    """How `fn` (a storage function, or a method taking a Tx after `self`) is repeated."""
    return _REPEATABLE.get(getattr(fn, "__func__", fn))


class OutcomeUnknown(Exception):
    """A repeatable write whose connection the database ended under it, and whose repeats
    failed too: whether its COMMIT landed is not known."""

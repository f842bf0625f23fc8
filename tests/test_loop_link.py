"""How PostgreSQL's hot statements are spelled for asyncpg (storage/loop_link.py); the
statements themselves run in the PostgreSQL pass (tests/test_postgres_storage.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from storage.loop_link import connect_arguments, numbered


def test_parameters_are_numbered_and_typed_from_their_values() -> None:
    given = ["a", 1, 2.5, True, None, "{}"]
    sql, values = numbered("VALUES (%s, %s, %s, %s, %s, %s::json) -- 10%%", given)
    assert sql == "VALUES ($1, $2::bigint, $3::float8, $4::boolean, $5, $6::json) -- 10%"
    assert values == given


def test_nul_in_text_is_sent_as_the_replacement_character() -> None:
    # PostgreSQL's text cannot hold NUL: as on psycopg's connections (raw_sql.nul_safe_text).
    assert numbered("SELECT %s", ["a\x00b"])[1] == ["a\ufffdb"]


def test_a_statement_and_its_values_must_agree_in_number() -> None:
    with pytest.raises(ValueError):
        numbered("SELECT %s, %s", [1])
    with pytest.raises(ValueError):
        numbered("SELECT %s", [1, 2])


def test_libpq_only_options_are_not_sent_as_server_settings() -> None:
    # asyncpg takes an option it does not know for a server setting, and PostgreSQL refuses
    # `keepalives` or `connect_timeout` as one: the start would fail.
    url = make_url(
        "postgresql+psycopg://u:p@db:5432/uhp?connect_timeout=3&keepalives=1"
        "&tcp_user_timeout=10000&sslmode=require&application_name=uhp"
    )
    arguments = connect_arguments(url)
    assert arguments["timeout"] == 3.0
    kept = make_url(arguments["dsn"])
    assert kept.drivername == "postgresql"
    assert dict(kept.query) == {"sslmode": "require", "application_name": "uhp"}
    assert (kept.username, kept.password, kept.host, kept.database) == ("u", "p", "db", "uhp")

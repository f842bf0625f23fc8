"""How PostgreSQL's hot statements are spelled for asyncpg (storage/loop_link.py); the
statements themselves run in the PostgreSQL pass (tests/test_postgres_storage.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from storage.loop_link import UnsupportedUrl, connect_arguments, link_settings, numbered


def test_parameters_are_numbered_and_typed_from_their_values() -> None:
    given = ["a", 1, 2.5, True, None, "{}"]
    sql, values = numbered("VALUES (%s, %s, %s, %s, %s, %s::json) -- 10%%", given)
    assert sql == "VALUES ($1, $2::bigint, $3::float8, $4::boolean, $5, $6::json) -- 10%"
    assert values == given


def test_nul_in_text_is_sent_as_the_replacement_character() -> None:
    # PostgreSQL's text cannot hold NUL: as on psycopg's connections (dialect.nul_safe_text).
    assert numbered("SELECT %s", ["a\x00b"])[1] == ["a\ufffdb"]


def test_a_statement_and_its_values_must_agree_in_number() -> None:
    with pytest.raises(ValueError):
        numbered("SELECT %s, %s", [1])
    with pytest.raises(ValueError):
        numbered("SELECT %s", [1, 2])


def test_libpq_only_options_are_not_sent_as_server_settings() -> None:
    # asyncpg takes an option it does not know for a server setting, and PostgreSQL refuses
    # `keepalives` or `connect_timeout` as one: the start would fail. The link options are
    # the sockets' own instead.
    url = make_url(
        "postgresql+psycopg://u:p@db:5432/uhp?connect_timeout=3&keepalives_idle=30"
        "&tcp_user_timeout=20000&sslmode=require&application_name=uhp"
    )
    arguments = connect_arguments(url)
    assert arguments["timeout"] == 3.0
    assert link_settings(url) == {
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 20000,
    }
    kept = make_url(arguments["dsn"])
    assert kept.drivername == "postgresql"
    assert dict(kept.query) == {"sslmode": "require", "application_name": "uhp"}
    assert (kept.username, kept.password, kept.host, kept.database) == ("u", "p", "db", "uhp")


@pytest.mark.parametrize(
    "option",
    [
        "channel_binding=require",
        "hostaddr=10.0.0.1",
        "gssencmode=require",
        "service=uhp",  # asyncpg would not read the service's dbname
        "host=10.0.0.1:5432&host=10.0.0.2:5432",  # asyncpg would keep the last host alone
    ],
)
def test_an_option_asyncpg_cannot_honour_is_neither_dropped_nor_sent_as_a_setting(
    option: str,
) -> None:
    # Dropping `channel_binding=require` would weaken the link; sending it as a setting stops
    # the start. Database.bind_loop keeps the threads for such a URL.
    with pytest.raises(UnsupportedUrl, match=option.split("=")[0]):
        connect_arguments(make_url(f"postgresql://u:p@db/uhp?{option}"))


def test_several_hosts_in_one_option_are_asyncpgs_as_libpqs() -> None:
    url = make_url("postgresql://u:p@/uhp?host=h1,h2&port=5432,5433&target_session_attrs=any")
    assert make_url(connect_arguments(url)["dsn"]).query["host"] == "h1,h2"

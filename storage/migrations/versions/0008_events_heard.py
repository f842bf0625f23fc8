"""Events are told on `uhp_events` only while some replica hears them: `replica.hears_events`,
set by a replica while it LISTENs (engine/replicas/notifications.py), read by the trigger that
NOTIFYs. A NOTIFY nobody hears still costs every commit of events a cluster-wide lock held through
its WAL flush, which serialises the commits of the event log, the acceptances and the admission
line (docs/scale-out.md §3, "Events across replicas").

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# A commit that found nobody hearing told nobody; a replica starting to hear waits for the
# transactions under way when its flag landed (storage/replicas.py `hear_events`).
_NOTIFY_IF_HEARD = """
CREATE OR REPLACE FUNCTION uhp_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM replica WHERE hears_events) THEN
    PERFORM pg_notify('uhp_events', id) FROM (SELECT DISTINCT response_id AS id FROM added) AS r;
  END IF;
  RETURN NULL;
END $$
"""
_NOTIFY_ALWAYS = """
CREATE OR REPLACE FUNCTION uhp_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('uhp_events', id) FROM (SELECT DISTINCT response_id AS id FROM added) AS r;
  RETURN NULL;
END $$
"""


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("replica")}
    if "hears_events" not in columns:
        with op.batch_alter_table("replica") as table:
            table.add_column(
                sa.Column("hears_events", sa.Boolean(), nullable=False, server_default=sa.false())
            )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_IF_HEARD)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_ALWAYS)
    with op.batch_alter_table("replica") as table:
        table.drop_column("hears_events")

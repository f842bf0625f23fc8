"""Several replicas on one database: each replica's lease, the replica that runs each
response, a cancel asked for on another replica, and the admission line kept in the table
(docs/scale-out.md §3).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_RESPONSE_COLUMNS = (
    "replica_id",
    "cancel_requested",
    "stop_details",
    "admission",
    "admission_at",
)

# PostgreSQL: every statement inserting events NOTIFYs `uhp_events` with each response id it
# wrote to (storage.db.EVENTS_CHANNEL), delivered when its transaction commits: replicas
# tailing a response that runs elsewhere wake on it. A trigger costs the writer no round trip;
# PostgreSQL folds repeats of one payload within a transaction into one notification.
_NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION uhp_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('uhp_events', id) FROM (SELECT DISTINCT response_id AS id FROM added) AS r;
  RETURN NULL;
END $$
"""
_NOTIFY_TRIGGER = """
CREATE TRIGGER uhp_event_added AFTER INSERT ON event
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION uhp_notify_events()
"""


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "replica" not in inspector.get_table_names():
        op.create_table(
            "replica",
            sa.Column("id", sa.String(), primary_key=True),
            sa.Column("heartbeat_at", sa.Float(), nullable=False),
            sa.Column("started_at", sa.Float(), nullable=False),
        )
    present = {c["name"] for c in inspector.get_columns("response")}
    with op.batch_alter_table("response") as batch:
        if "replica_id" not in present:
            batch.add_column(sa.Column("replica_id", sa.String(), nullable=True))
        if "cancel_requested" not in present:
            batch.add_column(
                sa.Column(
                    "cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()
                )
            )
        if "stop_details" not in present:
            batch.add_column(sa.Column("stop_details", sa.String(), nullable=True))
        if "admission" not in present:
            batch.add_column(sa.Column("admission", sa.String(), nullable=True))
        if "admission_at" not in present:
            batch.add_column(sa.Column("admission_at", sa.Float(), nullable=True))
    indexes = {str(ix["name"]) for ix in inspector.get_indexes("response")}
    if "ix_response_status" not in indexes:  # the sweeps look for what is in progress
        op.create_index("ix_response_status", "response", ["status"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        op.execute("DROP TRIGGER IF EXISTS uhp_event_added ON event")
        op.execute(_NOTIFY_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS uhp_event_added ON event")
        op.execute("DROP FUNCTION IF EXISTS uhp_notify_events()")
    op.drop_index("ix_response_status", "response")
    with op.batch_alter_table("response") as batch:
        for name in _RESPONSE_COLUMNS:
            batch.drop_column(name)
    op.drop_table("replica")

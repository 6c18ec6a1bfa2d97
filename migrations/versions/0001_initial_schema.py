"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("health", sa.String(length=16), nullable=False),
        sa.Column("health_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cordoned", sa.Boolean(), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_clusters")),
    )
    op.create_table(
        "events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("workload_id", BIG_ID, nullable=True),
        sa.Column("cluster", sa.String(length=63), nullable=True),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", JSON_TYPE, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_at"), ["at"], unique=False)
        batch_op.create_index("ix_events_workload_id_at", ["workload_id", "at"], unique=False)

    op.create_table(
        "leadership",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(length=253), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leadership")),
    )
    op.create_table(
        "workloads",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("api_version", sa.String(length=127), nullable=False),
        sa.Column("queue", sa.String(length=253), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("priority_class", sa.String(length=253), nullable=True),
        sa.Column("pod_sets", JSON_TYPE, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("object_generation", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=True),
        sa.Column("placement_id", BIG_ID, nullable=True),
        sa.Column("status_mode", sa.String(length=16), nullable=False),
        sa.Column("no_failover", sa.Boolean(), nullable=False),
        sa.Column("cluster_selector", JSON_TYPE, nullable=True),
        sa.Column("excluded", JSON_TYPE, nullable=False),
        sa.Column("last_decision", JSON_TYPE, nullable=True),
        sa.Column("remote_status", JSON_TYPE, nullable=True),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("placed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cleaned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workloads")),
        sa.UniqueConstraint("uid", name=op.f("uq_workloads_uid")),
    )
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.create_index("ix_workloads_cluster_state", ["cluster", "state"], unique=False)
        batch_op.create_index("ix_workloads_namespace_name", ["namespace", "name"], unique=False)
        batch_op.create_index("ix_workloads_state_priority", ["state", "priority"], unique=False)

    op.create_table(
        "placements",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("workload_id", BIG_ID, nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("strategy", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("decision", JSON_TYPE, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("remote_uid", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mirrored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["workload_id"], ["workloads.id"], name=op.f("fk_placements_workload_id_workloads"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placements")),
    )
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.create_index("ix_placements_cluster_state", ["cluster", "state"], unique=False)
        batch_op.create_index(batch_op.f("ix_placements_workload_id"), ["workload_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_placements_workload_id"))
        batch_op.drop_index("ix_placements_cluster_state")

    op.drop_table("placements")
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_index("ix_workloads_state_priority")
        batch_op.drop_index("ix_workloads_namespace_name")
        batch_op.drop_index("ix_workloads_cluster_state")

    op.drop_table("workloads")
    op.drop_table("leadership")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_workload_id_at")
        batch_op.drop_index(batch_op.f("ix_events_at"))

    op.drop_table("events")
    op.drop_table("clusters")

"""workloads.stopped: an operator stopped the workload (dispatcher stop), not placed until resumed; an index on
events (cluster, at) for a worker's history

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A server default, so that existing rows (and a replica still running the previous version) read False.
    with op.batch_alter_table("workloads") as batch:
        batch.add_column(sa.Column("stopped", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_index("ix_events_cluster_at", "events", ["cluster", "at"])


def downgrade() -> None:
    op.drop_index("ix_events_cluster_at", table_name="events")
    with op.batch_alter_table("workloads") as batch:
        batch.drop_column("stopped")

"""Alembic migrations of the dispatcher's SQL schema (installed as ``dispatcher._migrations``)."""

"""The only user of SQLAlchemy: models, migrations, queries and transactions."""

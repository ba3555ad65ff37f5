"""Alembic environment: the engine is handed over by MetadataStore.migrate (no alembic.ini needed)."""

from alembic import context

from venice_core.meta.models import Base

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    context.run_migrations()

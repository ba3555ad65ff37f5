"""Engine, sessions and Alembic migrations of the metadata store (SQLite in WAL mode, or PostgreSQL)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import CursorResult, Engine, Float, Result, create_engine, event, inspect, select, text
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction, sessionmaker
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from venice_core.errors import MetadataStoreError

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

# Alembic is imported where it is used: it costs most of a CLI command's start-up.

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def rows_matched(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE statement matched (its cursor's row count)."""
    assert isinstance(result, CursorResult)
    return result.rowcount


class database_now(FunctionElement[float]):  # noqa: N801 - a SQL function, named as SQLAlchemy's `func.now`
    """The metadata database's clock, in seconds since the epoch, as a SQL expression: what every lease is written
    and judged by (`controller.instances`, `controller.placement`), so that processes whose clocks disagree still
    agree on when a lease runs out. PostgreSQL's `clock_timestamp()`; SQLite's `julianday('now')`, to the
    millisecond, which is the clock of the process that runs the statement (the embedded profile's processes share
    one machine's)."""

    type = Float()
    inherit_cache = True


@compiles(database_now)
def _unknown_now(_element: database_now, compiler: SQLCompiler, **_kw: Any) -> str:
    raise NotImplementedError(
        f"no clock of the {compiler.dialect.name} database: the metadata store is SQLite or PostgreSQL"
    )


@compiles(database_now, "sqlite")
def _sqlite_now(_element: database_now, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"


@compiles(database_now, "postgresql")
def _postgresql_now(_element: database_now, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"


def database_time(session: Session) -> float:
    """The metadata database's clock now (`database_now`), read in the session's transaction."""
    return float(session.execute(select(database_now())).scalar_one())


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str, immediate: bool = False) -> Engine:
    """The engine of a metadata store. `immediate` (SQLite): every transaction takes the database's write lock as it
    begins (`BEGIN IMMEDIATE`), so that one reading then writing rows serialises with every other such transaction:
    SQLite has no row locks, and a deferred transaction reads without any lock."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # (isolation_level None: the driver issues no BEGIN of its own; the engine's begin event does.)
        engine = create_engine(url, connect_args={"timeout": 30, **({"isolation_level": None} if immediate else {})})
        event.listen(engine, "connect", _sqlite_pragmas)
        if immediate:
            event.listen(engine, "begin", lambda connection: connection.exec_driver_sql("BEGIN IMMEDIATE"))
        return engine
    return create_engine(url, pool_pre_ping=True, connect_args=POSTGRES_CONNECT_ARGS if "postgresql" in url else {})


# A database cut off the network resets nothing: without these a statement on an open connection waits for TCP to give
# up (~15 minutes), a lease renewal with it. libpq drops a connection whose data goes unacknowledged for 10 s, or that
# is idle and silent for 11 s (keepalives), and gives up connecting after 10 s; the next use opens a new one.
POSTGRES_CONNECT_ARGS = {
    "connect_timeout": 10,
    "tcp_user_timeout": 10_000,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


class TrackedSession(Session):
    """A session that bumps the metadata store's generation (`models.MetadataGeneration`) as it commits a change: a
    row inserted, deleted or updated. A session opened with `announce=False` (a lease's renewal, a heartbeat: nothing a
    region server syncs) bumps nothing, nor does a statement with the execution option `announce=False` (an UPDATE
    that only locks a row)."""


_CHANGED, _QUIET = "venice.changed", "venice.quiet"
_BUMP = text("UPDATE metadata_generation SET generation = generation + 1 WHERE id = 1")


@event.listens_for(TrackedSession, "do_orm_execute")
def _note_statement(state: ORMExecuteState) -> Result[Any] | None:
    if not (state.is_insert or state.is_update or state.is_delete) or state.session.info.get(_QUIET):
        return None
    if state.execution_options.get("announce", True) is False:
        return None
    result = state.invoke_statement()
    if not isinstance(result, CursorResult) or result.rowcount != 0:  # (-1: unknown, counted as a change)
        state.session.info[_CHANGED] = True
    return result


@event.listens_for(TrackedSession, "before_flush")
def _note_flush(session: Session, _flush: UOWTransaction, _instances: object) -> None:
    if session.info.get(_QUIET):
        return
    if session.new or session.deleted or any(_announced(row) for row in session.dirty):
        session.info[_CHANGED] = True


def _announced(row: object) -> bool:
    """Whether a changed row moved something the region servers sync: any column but those its model declares
    progress (`UNANNOUNCED`: a replica's offset, a leader's replication position), which are written every few seconds
    and read only where they are shown. (Each ingestion report moved the generation before, and every instance read
    everything again: ~3 times a second in a push, and for good while a hybrid replica reported.)"""
    progress: frozenset[str] = getattr(type(row), "UNANNOUNCED", frozenset())
    return any(attr.history.has_changes() for attr in inspect(row).attrs if attr.key not in progress)


@event.listens_for(TrackedSession, "before_commit")
def _bump_generation(session: Session) -> None:
    session.flush()  # (what the commit would flush, noted first)
    if session.info.pop(_CHANGED, False):
        session.execute(_BUMP)


P = ParamSpec("P")
R = TypeVar("R")


def retry_on_conflict(attempts: int = 3) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Re-run a write that lost an insert race (IntegrityError): the retry sees the winner's row and updates it."""

    def decorate(write: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(write)
        def retried(*args: P.args, **kwargs: P.kwargs) -> R:
            for attempt in range(1, attempts + 1):
                try:
                    return write(*args, **kwargs)
                except IntegrityError:
                    if attempt == attempts:
                        raise
            raise AssertionError("unreachable")

        return retried

    return decorate


class MetadataStore:
    """The coordination point of the platform. One short transaction per operation."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, class_=TrackedSession, expire_on_commit=False)
        self._locking_engine: Engine | None = None

    def _alembic_config(self) -> AlembicConfig:
        from alembic.config import Config as AlembicConfig

        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        cfg.attributes["engine"] = self.engine
        return cfg

    def migrate(self) -> None:
        """Bring the schema to the newest migration (idempotent)."""
        from alembic import command

        try:
            command.upgrade(self._alembic_config(), "head")
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"cannot migrate the metadata store at {self.safe_url}: {exc}") from exc

    def current_revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        try:
            with self.engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()
        except OperationalError as exc:
            raise MetadataStoreError(f"cannot reach the metadata store at {self.safe_url}: {exc.orig}") from exc

    def head_revision(self) -> str | None:
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(self._alembic_config()).get_current_head()

    def check_migrated(self) -> None:
        """Cheap check for every command (no Alembic import): `venice up` has initialised this database."""
        try:
            with self.engine.connect() as conn:
                initialised = conn.execute(text("SELECT version_num FROM alembic_version")).first() is not None
        except OperationalError as exc:
            if "alembic_version" not in str(exc.orig):
                raise MetadataStoreError(f"cannot reach the metadata store at {self.safe_url}: {exc.orig}") from exc
            initialised = False
        except ProgrammingError:  # PostgreSQL: relation does not exist
            initialised = False
        if not initialised:
            raise MetadataStoreError(f"the metadata store at {self.safe_url} is not initialised: run `venice up`")

    @property
    def safe_url(self) -> str:
        # Without its query: on a secured platform, only the paths of the files it connects with.
        return self.engine.url.set(query={}).render_as_string(hide_password=True)

    @contextmanager
    def session(self, announce: bool = True) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on any error. `announce=False`: its writes change nothing a
        region server syncs (a lease's renewal), so they leave the generation as it was."""
        with self._sessions.begin() as session:
            session.info[_QUIET] = not announce
            yield session

    def generation(self) -> int:
        """The metadata store's generation: it moves at each committed change (`TrackedSession`)."""
        with self.session() as session:
            return int(session.execute(text("SELECT generation FROM metadata_generation WHERE id = 1")).scalar_one())

    @contextmanager
    def locked_session(self) -> Iterator[Session]:
        """A transaction that serialises with every other locked one over the rows it reads for update
        (`with_for_update`): PostgreSQL locks those rows; SQLite, which has no row locks, takes its write lock when the
        transaction begins. For the few writes that decide on what they read and race each other (a swap and a stop
        of one version): the others keep plain sessions, which SQLite's readers never wait on."""
        if not self.url.startswith("sqlite"):
            with self.session() as session:
                yield session
            return
        if self._locking_engine is None:
            self._locking_engine = make_engine(self.url, immediate=True)
        with sessionmaker(self._locking_engine, class_=TrackedSession, expire_on_commit=False).begin() as session:
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
        if self._locking_engine is not None:
            self._locking_engine.dispose()

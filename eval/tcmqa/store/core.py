"""The connection core every part of the store builds on: engines, transactions, locks and the upsert.

Most of what differs between the dialects is here: how a writing transaction begins (SQLite ``BEGIN
IMMEDIATE``; PostgreSQL advisory locks) and how an upsert is spelled; the partial-index syntax is in
:mod:`tcmqa.store.tables`, the row locks (``FOR UPDATE SKIP LOCKED``) in :mod:`tcmqa.store.queue`.
:class:`StoreCore` knows no table; the concern modules (jobs, queue, results, outbox, practice) are
mixins over it, composed once into :class:`tcmqa.store.Store`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tcmqa.flags import redact

_SUBMIT_LOCK = 0x74636D71  # PostgreSQL advisory lock keys ("tcmq")
_MIGRATE_LOCK = _SUBMIT_LOCK + 1
_ITEMS_LOCK = _SUBMIT_LOCK + 2  # numbering new items (tcmqa.store.outcomes)
# PostgreSQL: a dead server, a hung statement or a transaction left open must not stall a worker past its own
# time limits. Set in the URL to change them (libpq's own parameters): ?connect_timeout=5 or
# ?options=-c statement_timeout=30000 -c idle_in_transaction_session_timeout=30000 (milliseconds).
PG_CONNECT_TIMEOUT_S = 10
PG_STATEMENT_TIMEOUT_MS = 120_000
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000


# The stores a spec may name; anything else with a scheme is refused (a typo must not become an empty SQLite queue
# in a folder named after the URL, password and all).
SUPPORTED_STORES = (
    "a folder (SQLite inside it: DIR/queue.sqlite)",
    "sqlite:DIR",
    "sqlite:///FILE",
    "postgresql://user:password@host:5432/db (also postgres:// and postgresql+psycopg://)",
)
_POSTGRESQL = ("postgresql+psycopg://", "postgresql://", "postgres://")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # RFC 3986; a plain path has none (./a:b is a path)


def store_url(spec: str | os.PathLike) -> str:
    """The SQLAlchemy URL for a store spec: a plain path is a folder with SQLite inside it; ``sqlite:DIR``,
    ``sqlite:///FILE`` and the ``postgresql://`` spellings of :data:`SUPPORTED_STORES` are URLs; any other
    scheme (``mysql://``, ``postgresql+psycopg2://``, ``POSTGRESQL://``, ``hub:``) is refused, naming the
    supported ones. Checked before any file or database is touched."""
    spec = str(spec)
    for prefix in _POSTGRESQL:
        if spec.startswith(prefix):
            return "postgresql+psycopg://" + spec.removeprefix(prefix)
    if spec.startswith("sqlite://"):
        return spec
    if spec.startswith("hub:"):
        raise ValueError(
            f"{redact(spec)!r}: the Hub is no longer a queue store; use a SQLite directory or a postgresql:// URL "
            "(finished evaluations are published to the Hub by the publisher)"
        )
    if _SCHEME.match(spec) and not spec.startswith("sqlite:"):
        scheme = spec.split(":", 1)[0]
        raise ValueError(
            f"{redact(spec)!r}: unknown store scheme {scheme!r}; a store is one of: "
            + "; ".join(SUPPORTED_STORES)
            + " (schemes are spelled in lower case; a folder whose name has a colon: ./NAME)"
        )
    directory = Path(spec.removeprefix("sqlite:")).expanduser().resolve()  # a bare "sqlite:DIR" as before
    return f"sqlite:///{directory / 'queue.sqlite'}"


def _cache_root() -> Path:
    return Path(os.environ.get("TCMQA_CACHE") or Path.home() / ".cache" / "tcmqa")


def _pg_timeouts(url: sa.engine.URL) -> dict[str, Any]:
    """The connect, statement and idle-in-transaction timeouts, unless the URL sets its own."""
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if "options" not in url.query:
        args["options"] = (
            f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS} "
            f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_TIMEOUT_MS}"
        )
    return args


class StoreCore:
    """One store's database: its URL, dialect, engines and cache folder (see :class:`tcmqa.store.Store`)."""

    def __init__(self, url: str | os.PathLike, *, cache_dir: str | Path | None = None):
        self.url = store_url(url)
        parsed = sa.engine.make_url(self.url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise ValueError("a SQLite store needs a file (each process opens its own connection)")
            db = Path(parsed.database)
            db.parent.mkdir(parents=True, exist_ok=True)
            self.root: Path | None = db.parent
            self.cache_dir = Path(cache_dir or db.parent / "outputs").expanduser()
            self._writer = self._sqlite_engine(db, "BEGIN IMMEDIATE")
            self._reader = self._sqlite_engine(db, "BEGIN")
        elif self.dialect == "postgresql":
            self.root = None
            where = hashlib.sha1(parsed.render_as_string(hide_password=True).encode()).hexdigest()[:12]
            self.cache_dir = Path(cache_dir or _cache_root() / "store-outputs" / where).expanduser()
            self._writer = self._reader = sa.create_engine(
                self.url,
                pool_pre_ping=True,
                pool_size=4,
                max_overflow=16,
                pool_recycle=1800,
                connect_args=_pg_timeouts(parsed),
            )
        else:
            raise ValueError(f"{self.shown}: only sqlite and postgresql stores are supported")

    # -- connections ------------------------------------------------------------------------------
    @staticmethod
    def _sqlite_engine(db: Path, begin: str) -> Engine:
        """Pooled connections (opening one, with its pragmas, costs ~3 ms: a practitioner's response and the
        refreshed board take some twenty transactions); WAL, a generous busy timeout, and our own BEGIN.
        A connection serves one transaction of one thread at a time, so it may move between threads."""
        engine = sa.create_engine(
            f"sqlite:///{db}",
            poolclass=sa.QueuePool,
            pool_size=4,
            max_overflow=16,
            connect_args={"timeout": 60, "check_same_thread": False},
        )

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # the driver's own transaction handling is off: we BEGIN
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql(begin)

        return engine

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A writing transaction: SQLite takes its write lock at BEGIN; PostgreSQL locks rows as it goes."""
        with self._writer.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._reader.begin() as conn:
            yield conn

    def _now(self, conn: Connection) -> float:
        """The database server's time in Unix seconds: the one clock every worker's comparisons share, so a
        worker whose own clock is off never re-queues healthy jobs nor misses status changes."""
        if self.dialect == "postgresql":
            return float(conn.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
        return float(conn.execute(sa.text("SELECT (julianday('now') - 2440587.5) * 86400.0")).scalar_one())

    def _lock(self, conn: Connection, key: int) -> None:
        """Serialize with other transactions taking ``key`` (PostgreSQL; SQLite's BEGIN IMMEDIATE already does)."""
        if self.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))

    def _upsert(self, table: sa.Table, values: dict[str, Any], key: list[str]) -> Any:
        """INSERT ... ON CONFLICT (key) DO UPDATE in this dialect."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(table).values(**values)
        return statement.on_conflict_do_update(
            index_elements=key, set_={k: v for k, v in values.items() if k not in key}
        )

    def close(self) -> None:
        """Release pooled connections (PostgreSQL); the store may still be used afterwards."""
        self._writer.dispose()
        self._reader.dispose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shown!r})"

    @property
    def shown(self) -> str:
        """The URL as logs, reprs and errors show it: no password, in the userinfo or the query
        (:func:`tcmqa.flags.redact`, the one rule)."""
        return redact(self.url)

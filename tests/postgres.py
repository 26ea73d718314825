"""A real PostgreSQL server for the test session: its own data directory, port and socket directory.

``postgres_url`` (session fixture) starts one server with ``initdb``/``pg_ctl`` from the Debian
packages (``/usr/lib/postgresql/*/bin``, or ``pg_config --bindir``), as the ``postgres`` user when the
tests run as root (the server refuses root), and stops it at the end of the session. It skips when
no server binaries are installed (``apt-get install postgresql``; ``.ci/run`` does). ``fresh_database``
gives each test an empty database of its own on that server.

Registered in conftest.py, so test modules use ``postgres_url`` like any fixture.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def server_bin() -> Path | None:
    """The folder holding initdb and pg_ctl (newest installed major version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        bindir = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip())
        if (bindir / "initdb").is_file():
            return bindir
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One throwaway server; ``url`` is its ``postgres`` database (trust authentication, 127.0.0.1 only)."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.as_root = os.geteuid() == 0
        # Not under pytest's tmp dirs: those are private to root and the server runs as ``postgres``.
        self.dir = Path(tempfile.mkdtemp(prefix="tcmqa-postgres-"))
        self.data, self.sockets, self.log = self.dir / "data", self.dir / "sockets", self.dir / "server.log"
        self.sockets.mkdir()
        if self.as_root:
            shutil.chown(self.dir, "postgres")
            shutil.chown(self.sockets, "postgres")
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [str(self.bindir / tool), *args]
        if self.as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.dir)

    def start(self) -> None:
        done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{log}")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """Create an empty database on the server at ``server_url``; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A running PostgreSQL server for the session (skips where none is installed); its admin URL."""
    bindir = server_bin()
    if bindir is None:
        missing = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if os.environ.get("TCMQA_REQUIRE_REAL_PARTS"):  # CI: a missing real part fails, never skips
            pytest.fail(missing)
        pytest.skip(missing)
    server = PostgresServer(bindir)
    started = time.monotonic()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    print(f"\nPostgreSQL {bindir.parts[-2]} on port {server.port} in {time.monotonic() - started:.1f} s")
    try:
        yield server.url
    finally:
        server.stop()

# SPDX-License-Identifier: Apache-2.0
"""``ProcessLock`` and ``AdvisoryLock``: one lock for the threads of this process and for every
other process.

A knowledge-base folder (``faiss.index`` + ``sql.db``) may be written by several processes at
once: a CLI beside a server, or N server workers. Each write transaction holds the folder's lock
file (an advisory OS lock through the ``filelock`` package; released by the OS when a process
dies, so a ``kill -9`` never leaves it stuck). A registry in PostgreSQL, shared by servers on
several machines, is guarded the same way by a PostgreSQL advisory lock (``AdvisoryLock``), held by
a database session and released by the server when that session ends, however the process died.
A ``threading.RLock`` in front of either makes the lock re-entrant and keeps the threads of one
process from contending on it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from mx_rag.errors import StorageError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

__all__ = ["AdvisoryLock", "ProcessLock", "lock_path_for"]

logger = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
WAIT_NOTICE_S = 2.0  # say once that another process holds the lock after waiting this long


def lock_path_for(path: Path) -> Path:
    """The lock file guarding ``path`` (``<path>.lock`` beside it)."""
    return path.with_name(path.name + LOCK_SUFFIX)


class _ReentrantLock:
    """Re-entrancy, the thread lock and the ``outer`` lock around an inter-process lock that
    subclasses take (``_acquire_shared``) and give back (``_release_shared``)."""

    def __init__(self, timeout: float | None, outer: Any) -> None:
        self._timeout = timeout
        self._outer = outer
        self._threads = threading.RLock()
        self._depth = 0

    def _acquire_shared(self) -> None:
        raise NotImplementedError

    def _release_shared(self) -> None:
        raise NotImplementedError

    def acquire(self) -> None:
        self._threads.acquire()
        if self._depth == 0:
            try:
                if self._outer is not None:
                    self._outer.acquire()
                try:
                    self._acquire_shared()
                except BaseException:
                    if self._outer is not None:
                        self._outer.release()
                    raise
            except BaseException:
                self._threads.release()
                raise
        self._depth += 1

    def release(self) -> None:
        if self._depth <= 0:
            raise RuntimeError(f"{type(self).__name__} released more often than acquired")
        self._depth -= 1
        if self._depth == 0:
            try:
                self._release_shared()
            finally:
                if self._outer is not None:
                    self._outer.release()
        self._threads.release()

    def __enter__(self) -> _ReentrantLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class ProcessLock(_ReentrantLock):
    """A re-entrant lock shared by threads and processes through the file ``path``.

    Args:
        path: the lock file (created with mode 0600 if missing; never deleted: deleting a lock
            file that another process has open would split the lock in two).
        timeout: seconds to wait for another process, or None to wait as long as it takes.
        outer: an extra lock (e.g. a ``multiprocessing.Lock``) taken before the file lock.
    """

    def __init__(self, path: Path, timeout: float | None = None, outer: Any = None) -> None:
        super().__init__(timeout, outer)
        self.path = path
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
        self._file = FileLock(str(path), thread_local=False)

    def _release_shared(self) -> None:
        self._file.release()

    def _acquire_shared(self) -> None:
        try:
            self._file.acquire(timeout=WAIT_NOTICE_S)
            return
        except Timeout:
            logger.info("waiting for %s: another process is writing", self.path)
        started = time.monotonic()
        remaining = -1.0 if self._timeout is None else max(0.0, self._timeout - WAIT_NOTICE_S)
        try:
            self._file.acquire(timeout=remaining)
        except Timeout as exc:
            waited = WAIT_NOTICE_S + time.monotonic() - started
            raise StorageError(
                f"another process held the lock {str(self.path)!r} for {waited:.0f} s (timeout {self._timeout} s)"
            ) from exc

    def __repr__(self) -> str:
        return f"ProcessLock({str(self.path)!r})"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit PostgreSQL advisory-lock key for ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLock(_ReentrantLock):
    """A re-entrant lock shared by threads and by processes on any machine through a PostgreSQL
    session-level advisory lock on ``engine``'s database.

    The lock is held by a connection of its own, opened when the lock is first taken and closed
    when it is given back, so it never rides on a pooled connection that other code reuses.

    Args:
        engine: a SQLAlchemy engine on PostgreSQL.
        name: what is locked; processes locking the same name on the same database exclude each other.
        timeout: seconds to wait for another process, or None to wait as long as it takes.
        outer: an extra lock taken before the advisory lock.
    """

    def __init__(self, engine: Engine, name: str, timeout: float | None = None, outer: Any = None) -> None:
        super().__init__(timeout, outer)
        self.engine, self.name, self.key = engine, name, advisory_key(name)
        self._connection: Connection | None = None

    def _acquire_shared(self) -> None:
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            connection = self.engine.connect()
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot reach the database for the lock {self.name!r}: {exc}") from exc
        try:
            got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}).scalar()
            if not got:
                logger.info("waiting for the lock %r: another process is writing", self.name)
                started = time.monotonic()
                if self._timeout is not None:
                    connection.execute(text(f"SET lock_timeout = {int(self._timeout * 1000)}"))
                try:
                    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": self.key})
                except SQLAlchemyError as exc:
                    waited = time.monotonic() - started
                    raise StorageError(f"another process held the lock {self.name!r} for {waited:.0f} s "
                                       f"(timeout {self._timeout} s)") from exc
            connection.commit()  # end the transaction the queries began; the session keeps the lock
        except BaseException:
            connection.close()  # closing the session gives back a lock it may hold
            raise
        self._connection = connection

    def _release_shared(self) -> None:
        from sqlalchemy import text

        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
            connection.commit()
        finally:
            connection.invalidate()  # never back to the pool: a session that held a lock is done
            connection.close()

    def __repr__(self) -> str:
        return f"AdvisoryLock({self.name!r})"

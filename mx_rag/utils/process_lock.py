# SPDX-License-Identifier: Apache-2.0
"""``ProcessLock``: one lock for the threads of this process and for every other process.

A knowledge-base folder (``faiss.index`` + ``sql.db``) may be written by several processes at
once: a CLI beside a server, or N server workers. Each write transaction holds the folder's lock
file (an advisory OS lock through the ``filelock`` package; released by the OS when a process
dies, so a ``kill -9`` never leaves it stuck). A ``threading.RLock`` in front of it makes the lock
re-entrant and keeps the threads of one process from contending on the file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from filelock import FileLock, Timeout

from mx_rag.errors import StorageError

__all__ = ["ProcessLock", "lock_path_for"]

logger = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
WAIT_NOTICE_S = 2.0  # say once that another process holds the lock after waiting this long


def lock_path_for(path: Path) -> Path:
    """The lock file guarding ``path`` (``<path>.lock`` beside it)."""
    return path.with_name(path.name + LOCK_SUFFIX)


class ProcessLock:
    """A re-entrant lock shared by threads and processes through the file ``path``.

    Args:
        path: the lock file (created with mode 0600 if missing; never deleted: deleting a lock
            file that another process has open would split the lock in two).
        timeout: seconds to wait for another process, or None to wait as long as it takes.
        outer: an extra lock (e.g. a ``multiprocessing.Lock``) taken before the file lock.
    """

    def __init__(self, path: Path, timeout: float | None = None, outer: Any = None) -> None:
        self.path = path
        self._timeout = timeout
        self._outer = outer
        self._threads = threading.RLock()
        self._depth = 0
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
        self._file = FileLock(str(path), thread_local=False)

    def acquire(self) -> None:
        self._threads.acquire()
        if self._depth == 0:
            try:
                if self._outer is not None:
                    self._outer.acquire()
                try:
                    self._acquire_file()
                except BaseException:
                    if self._outer is not None:
                        self._outer.release()
                    raise
            except BaseException:
                self._threads.release()
                raise
        self._depth += 1

    def _acquire_file(self) -> None:
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

    def release(self) -> None:
        if self._depth <= 0:
            raise RuntimeError("ProcessLock released more often than acquired")
        self._depth -= 1
        if self._depth == 0:
            self._file.release()
            if self._outer is not None:
                self._outer.release()
        self._threads.release()

    def __enter__(self) -> ProcessLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"ProcessLock({str(self.path)!r})"

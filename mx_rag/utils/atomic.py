# SPDX-License-Identifier: Apache-2.0
"""Crash-safe file replacement: temp file in the same directory, fsync, ``os.replace``, fsync dir.

A reader (or a process restarted after ``kill -9``) sees either the old complete file or the new
complete file, never a truncated one.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
FILE_MODE = 0o600


def write_atomic(path: Path, write: Callable[[str], object], mode: int = FILE_MODE) -> None:
    """Create or replace ``path`` with what ``write(tmp_path)`` writes to a temp file.

    The temp file is created next to ``path`` (so ``os.replace`` never crosses a file system) with
    ``mode`` (default 0600); it is fsynced before the rename and the directory after it.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, mode)
        _fsync(tmp, os.O_RDWR)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _fsync(path: str | Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX only; a no-op where directories can't be opened)."""
    if os.name == "posix":
        _fsync(directory, os.O_RDONLY)


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a crashed save of ``path`` left behind."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            stale.unlink()
            logger.info("removed the temp file %s left by an interrupted save", stale)

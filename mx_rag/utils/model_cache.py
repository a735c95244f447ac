# SPDX-License-Identifier: Apache-2.0
"""The model cache: where converted models live, and how a directory is built exactly once.

``build_once`` builds into a temporary sibling directory and renames it into place, so a reader
never sees a half-written model, and holds a file lock so two processes never build at once.
A crash leaves at most a stale temporary directory, which the next build removes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mx_rag.utils.lazy import extra_import

logger = logging.getLogger(__name__)

HOME_ENV = "MXRAG_HOME"
MARKER_FILE = "mx_rag_build.json"
LOCK_TIMEOUT = 1800.0


def models_home() -> Path:
    """``$MXRAG_HOME/models``, by default ``~/.cache/mx_rag/models``."""
    root = os.environ.get(HOME_ENV) or os.path.join("~", ".cache", "mx_rag")
    return Path(root).expanduser() / "models"


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The build marker of a finished directory, or None when absent or unreadable."""
    try:
        data = json.loads((directory / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def build_once(target: Path, build: Callable[[Path], object], marker: dict[str, Any]) -> Path:
    """Return ``target``, building it with ``build(tmp_dir)`` unless a matching build is there.

    ``marker`` identifies the build (source, converter version); a directory whose marker
    differs is rebuilt and swapped in. Safe against concurrent callers in other processes.
    """
    if read_marker(target) == marker:
        return target
    with extra_import("embed", "filelock"):  # filelock comes with transformers
        from filelock import FileLock
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock"), timeout=LOCK_TIMEOUT):
        if read_marker(target) == marker:  # another process built it while we waited
            return target
        _remove_stale(target)
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            build(tmp)
            (tmp / MARKER_FILE).write_text(json.dumps(marker, indent=2), encoding="utf-8")
            _swap_in(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    logger.info("built %s", target)
    return target


def _remove_stale(target: Path) -> None:
    """Delete leftovers of crashed builds (we hold the lock, so none is in progress)."""
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in target.parent.glob(f".{target.name}.old-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _swap_in(tmp: Path, target: Path) -> None:
    if target.exists():  # an outdated or broken build: move it aside first
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)

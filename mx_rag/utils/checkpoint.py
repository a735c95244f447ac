# SPDX-License-Identifier: Apache-2.0
"""Resumable evaluations: an append-only checkpoint of finished items, and atomic JSON reports.

``Checkpoint`` writes a header line, then one JSON line per finished item (flushed and fsynced,
under a lock), so a run stopped at any point loses at most the item in flight; ``atomic_write_json``
replaces a report in one step. ``mxrag corag evaluate`` and ``mxrag eval`` keep theirs this way.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, TextIO

from mx_rag.utils.atomic import write_atomic

__all__ = [
    "CHECKPOINT_SUFFIX",
    "Checkpoint",
    "atomic_write_json",
    "atomic_write_text",
    "checkpoint_path",
    "digest",
    "read_lines",
]

CHECKPOINT_SUFFIX = ".partial.jsonl"


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (a temporary file, fsynced, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), mode=0o644)  # reports: readable


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=4, ensure_ascii=False))


def checkpoint_path(save_file: str | os.PathLike[str]) -> Path:
    """Where ``evaluate(..., save_file)`` keeps its finished questions: ``<save_file>.partial.jsonl``."""
    path = Path(save_file)
    return path.with_name(path.name + CHECKPOINT_SUFFIX)


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def read_lines(path: Path) -> tuple[Any, list[Any]]:
    """A checkpoint's header and its entries (broken lines left out); (None, []) without a file."""
    if not path.is_file():
        return None, []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    entries: list[Any] = []
    for line in lines[1:]:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    return header, entries


class Checkpoint:
    """The checkpoint file, appended one finished question at a time (flushed, fsynced, under a lock)."""

    def __init__(self, path: Path, header: dict[str, Any], kept: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [header, *kept])
        atomic_write_text(path, text)  # a clean start: no half-written last line, no stale failed records
        self.path = path
        self._lock = threading.Lock()
        self._file: TextIO = path.open("a", encoding="utf-8")

    def write(self, entry: dict[str, Any]) -> None:
        text = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self._file.write(text)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            self._file.close()

# SPDX-License-Identifier: Apache-2.0
"""The exact-match store: a dict in memory, written to ``<folder>/<name>.json``.

A flush holds ``<folder>/<name>.lock`` (``ProcessLock``), merges what other processes flushed
since, evicts down to ``cache_size`` and replaces the file atomically, so several processes on one
folder never lose each other's entries. A lookup that misses first merges a file that changed
since it was last read (one ``stat``), so an answer flushed by another process is found.
The file is JSON, never pickle: a cache folder cannot run code when loaded.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.cache.config import CacheConfig, EvictPolicy
from mx_rag.errors import StorageError
from mx_rag.utils.common import MB
from mx_rag.utils.process_lock import ProcessLock

__all__ = ["Entry", "MemoryStore", "victims"]

logger = logging.getLogger(__name__)

FILE_VERSION = 1
MAX_FILE_SIZE = 100 * MB


@dataclass
class Entry:
    answer: str
    created: float
    accessed: float
    hits: int = 0


def victims(entries: dict[Any, Entry], count: int, policy: EvictPolicy) -> list[Any]:
    """The ``count`` keys to evict under ``policy``."""
    if count <= 0:
        return []
    keys = list(entries)
    if policy is EvictPolicy.RR:
        return random.sample(keys, min(count, len(keys)))
    rank = {
        EvictPolicy.LRU: lambda k: (entries[k].accessed, entries[k].created),
        EvictPolicy.LFU: lambda k: (entries[k].hits, entries[k].accessed),
        EvictPolicy.FIFO: lambda k: (entries[k].created,),
    }[policy]
    return sorted(keys, key=rank)[:count]


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


class MemoryStore:
    """Exact-match question -> answer entries, evicted by policy, flushed every ``auto_flush`` updates."""

    def __init__(self, name: str, config: CacheConfig) -> None:
        self.config = config
        self.folder = config.data_save_folder
        self.path = self.folder / f"{name}.json"
        self._name = name
        self._entries: dict[str, Entry] = {}
        self._lock = threading.RLock()
        self._seen: tuple[int, int, int] | None = None
        self._pending = 0
        self._merge_file()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, query: str) -> str | None:
        with self._lock:
            entry = self._entries.get(query)
            if entry is None and _signature(self.path) != self._seen:
                self._merge_file()
                entry = self._entries.get(query)
            if entry is None:
                return None
            entry.hits += 1
            entry.accessed = time.time()
            return entry.answer

    def put(self, query: str, answer: str) -> None:
        with self._lock:
            now = time.time()
            old = self._entries.get(query)
            self._entries[query] = Entry(answer, old.created if old else now, now, old.hits if old else 0)
            self._evict()
            self._pending += 1
            if self._pending >= self.config.auto_flush:
                try:
                    self.flush()
                except StorageError as exc:  # an answer still goes back to the caller
                    logger.warning("cache %s: automatic flush skipped: %s", self._name, exc)

    def flush(self) -> None:
        with self._lock, self._file_lock():
            self._merge_file()
            self._evict()
            self._write()
            self._pending = 0

    def clear(self) -> None:
        with self._lock, self._file_lock():
            self._entries.clear()
            self._pending = 0
            self.path.unlink(missing_ok=True)
            self._seen = None

    @property
    def dirty(self) -> bool:
        return self._pending > 0

    # -- internals ---------------------------------------------------------------------------

    def _file_lock(self) -> ProcessLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        return ProcessLock(self.folder / f"{self._name}.lock", outer=self.config.lock)

    def _evict(self) -> None:
        extra = len(self._entries) - self.config.cache_size
        for key in victims(self._entries, extra, self.config.eviction_policy):
            del self._entries[key]

    def _merge_file(self) -> None:
        """Add the file's entries that this process does not hold (or holds an older use of)."""
        seen = _signature(self.path)
        if seen is None:
            self._seen = None
            return
        if seen[2] > MAX_FILE_SIZE:
            raise StorageError(f"cache file {str(self.path)!r} is {seen[2]} bytes, more than {MAX_FILE_SIZE}")
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            rows = data["entries"] if data.get("version") == FILE_VERSION else []
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            logger.warning("cache file %s is unreadable (%s); starting empty", self.path, exc)
            rows = []
        for row in rows:
            try:
                query, answer, created, accessed, hits = row
                entry = Entry(str(answer), float(created), float(accessed), int(hits))
            except (TypeError, ValueError):
                continue
            mine = self._entries.get(str(query))
            if mine is None or mine.accessed < entry.accessed:
                self._entries[str(query)] = entry
        self._seen = seen

    def _write(self) -> None:
        free = shutil.disk_usage(self.folder).free
        if free < self.config.min_free_space:
            raise StorageError(f"only {free} bytes free in {str(self.folder)!r}; min_free_space is "
                               f"{self.config.min_free_space}: the cache was not written")
        rows = [[q, e.answer, e.created, e.accessed, e.hits] for q, e in self._entries.items()]
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as handle:
                json.dump({"version": FILE_VERSION, "entries": rows}, handle, ensure_ascii=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        self._seen = _signature(self.path)

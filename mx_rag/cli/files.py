# SPDX-License-Identifier: Apache-2.0
"""The files an ``mxrag ingest`` names: folders walked, symbolic links looked at, every path that
cannot be ingested reported with its reason instead of aborting the run.

Inside a folder: hidden entries are left out; files without a loader are *skipped* (a folder
usually holds other files too); a symbolic link to a file is followed, a broken one *fails*, one
to a folder is skipped (not followed). A path named on the command line that does not exist or
has no loader *fails*. A file that failed before and has not changed since fails again without
being parsed (``--retry-failed`` parses it again): the memo is ``ingest-failures.json`` in the
data folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FailureMemo", "Found", "find_files", "shown_path", "white_paths"]

MAX_WHITE_PATHS = 1024


@dataclass
class Found:
    """What the named paths hold."""

    files: list[Path] = field(default_factory=list)  # resolved, unique, in walk order, with a loader
    shown: dict[str, str] = field(default_factory=dict)  # resolved path -> the path as the user sees it
    failed: dict[str, str] = field(default_factory=dict)  # shown path -> why
    skipped: dict[str, str] = field(default_factory=dict)  # shown path -> why
    present: set[str] = field(default_factory=set)  # resolved paths of every file found (for --prune)
    roots: list[Path] = field(default_factory=list)  # the named paths that exist, resolved
    missing: dict[str, Path] = field(default_factory=dict)  # named paths that do not exist -> absolute path

    def add(self, path: Path, shown: str) -> None:
        """A file to ingest; one reached both by a link and by its own name is shown by its name."""
        resolved = path.resolve()
        self.present.add(str(resolved))
        if str(resolved) not in self.shown:
            self.files.append(resolved)
        elif path.is_symlink():
            return
        self.shown[str(resolved)] = shown


def find_files(paths: Iterable[Path], suffixes: set[str]) -> Found:
    """Walk ``paths`` (files and folders) for files whose suffix (lower case) is in ``suffixes``."""
    found = Found()
    allowed = ", ".join(sorted(suffixes))
    for path in paths:
        if not path.exists():
            reason = "broken symbolic link" if path.is_symlink() else "no such file or folder"
            found.missing[str(path)] = Path(os.path.abspath(path))
            found.failed[str(path)] = reason
        elif path.is_dir():
            found.roots.append(path.resolve())
            _walk(path, suffixes, found)
        elif path.suffix.lower() not in suffixes:
            found.roots.append(path.resolve())
            kind = path.suffix or "files without a suffix"
            found.failed[str(path)] = f"no loader for {kind!r} (supported: {allowed})"
        elif not path.is_file():
            found.failed[str(path)] = "not a regular file"
        else:
            found.roots.append(path.resolve())
            found.add(path, str(path))
    return found


def _walk(folder: Path, suffixes: set[str], found: Found) -> None:
    for top, dirs, names in os.walk(folder, followlinks=False):
        base = Path(top)
        for name in sorted(dirs):
            if not name.startswith(".") and (base / name).is_symlink():
                found.skipped[str(base / name)] = "symbolic link to a folder (not followed)"
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (base / d).is_symlink())
        for name in sorted(names):
            path = base / name
            if name.startswith("."):
                continue
            if path.is_symlink() and not path.exists():
                found.failed[str(path)] = "broken symbolic link"
            elif not path.is_file():
                found.skipped[str(path)] = "not a regular file"
            elif path.suffix.lower() not in suffixes:
                found.present.add(str(path.resolve()))
                found.skipped[str(path)] = f"no loader for {path.suffix or 'files without a suffix'!r}"
            else:
                found.add(path, str(path))


def white_paths(files: Iterable[Path]) -> list[str]:
    """The folders of ``files``, none inside another (at most 1024: their common folder beyond)."""
    folders = sorted({f.parent for f in files})
    kept: list[Path] = []
    for folder in folders:
        if not any(folder.is_relative_to(k) for k in kept):
            kept.append(folder)
    if len(kept) > MAX_WHITE_PATHS:
        kept = [Path(os.path.commonpath([str(k) for k in kept]))]
    return [str(k) for k in kept]


class FailureMemo:
    """Files that failed, with their content hash and reason, per knowledge base."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self._all: dict[str, dict[str, dict[str, str]]] = data if isinstance(data, dict) else {}
        self.entries = self._all.setdefault(key, {})

    def known(self, path: Path) -> str | None:
        """The reason ``path`` failed before, if it has not changed since."""
        from mx_rag.knowledge.ingest import file_digest

        entry = self.entries.get(str(path))
        if not entry:
            return None
        try:
            return entry["reason"] if file_digest(path) == entry.get("hash") else None
        except OSError:
            return None

    def record(self, path: Path, reason: str) -> None:
        from mx_rag.knowledge.ingest import file_digest

        with contextlib.suppress(OSError):
            self.entries[str(path)] = {"hash": file_digest(path), "reason": reason}

    def forget(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.entries.pop(path, None)

    def save(self) -> None:
        if not self.entries:
            self._all.pop(self.key, None)
        partial = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}")
        try:
            partial.write_text(json.dumps(self._all, indent=1, ensure_ascii=False), encoding="utf-8")
            partial.replace(self.path)
        except OSError:
            partial.unlink(missing_ok=True)


def shown_path(path: str) -> str:
    """A stored path as the user would type it: relative to the working folder when inside it."""
    p = Path(path)
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)

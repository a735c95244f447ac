# SPDX-License-Identifier: Apache-2.0
"""Path checks for files the SDK reads or writes.

The policy: a path is a str or ``os.PathLike`` of at most 1024 characters without NUL bytes or
``..`` components; it is resolved (symlinks followed) before use, and where a set of allowed
roots is given (``white_paths``), the resolved path must lie inside one of them, so a symlink
cannot lead outside. File names containing ``..`` (``a..b.txt``) are fine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import fail
from mx_rag.utils.common import MAX_PATH_LENGTH


def check_path(name: str, path: Any) -> Path:
    """A syntactically safe path, made absolute and resolved (it need not exist)."""
    if not isinstance(path, (str, os.PathLike)):
        raise fail(name, path, "a str or os.PathLike path")
    text = os.fspath(path)
    if not isinstance(text, str) or not 0 < len(text) <= MAX_PATH_LENGTH:
        raise fail(name, path, f"a path of 1 to {MAX_PATH_LENGTH} characters")
    if "\0" in text:
        raise fail(name, path, "a path without NUL characters")
    if ".." in Path(text).parts:
        raise fail(name, path, "a path without '..' components")
    return Path(text).expanduser().resolve()


def check_file(name: str, path: Any, max_size: int) -> Path:
    """An existing regular file of at most ``max_size`` bytes; returns the resolved path."""
    resolved = check_path(name, path)
    if not resolved.is_file():
        raise fail(name, os.fspath(path), "an existing regular file")
    size = resolved.stat().st_size
    if size > max_size:
        raise ParameterError(f"{name} {os.fspath(path)!r} is {size} bytes, more than the limit of {max_size} bytes")
    return resolved


def check_dir(name: str, path: Any) -> Path:
    """An existing directory; returns the resolved path."""
    resolved = check_path(name, path)
    if not resolved.is_dir():
        raise fail(name, os.fspath(path), "an existing directory")
    return resolved


def check_inside(name: str, path: Path, roots: Iterable[Path]) -> Path:
    """``path`` (resolved) must lie inside one of the resolved ``roots``."""
    roots = list(roots)
    if not any(path == root or path.is_relative_to(root) for root in roots):
        allowed = [str(root) for root in roots]
        raise ParameterError(f"{name} {str(path)!r} is outside the allowed directories {allowed}")
    return path


def check_writable_parent(name: str, path: Any) -> Path:
    """A file path whose parent directory exists (the file itself may not exist yet)."""
    resolved = check_path(name, path)
    if resolved.exists() and not resolved.is_file():
        raise fail(name, os.fspath(path), "a file path (it names a directory)")
    if not resolved.parent.is_dir():
        raise fail(name, os.fspath(path), "a path whose parent directory exists")
    return resolved

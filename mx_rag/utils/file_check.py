# SPDX-License-Identifier: Apache-2.0
"""Path checks for files the SDK reads or writes.

The policy: a path is a str or ``os.PathLike`` of at most 1024 characters without NUL bytes or
``..`` components; it is resolved (symlinks followed) before use, and where a set of allowed
roots is given (``white_paths``), the resolved path must lie inside one of them, so a symlink
cannot lead outside. File names containing ``..`` (``a..b.txt``) are fine.

``FileCheck`` keeps the original SDK's static checks (``FileCheck.dir_check``) for user programs.
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


# -- FileCheck: the original's static checks, for programs written against it ------------------------


class FileCheck:
    """The original SDK's path checks, kept for user programs (``FileCheck.dir_check(path)``).

    Each method returns None or raises ``ParameterError`` (``FileCheckError`` is the same class)
    naming the path and the rule it broke. New code should use ``check_path``, ``check_dir`` and
    ``check_file`` above, which return the resolved path.
    """

    MAX_PATH_LENGTH = MAX_PATH_LENGTH
    DEFAULT_MAX_FILE_NAME_LEN = 255
    BLACKLIST_PATH = ("/etc/", "/usr/bin/", "/usr/lib/", "/usr/lib64/", "/sys/", "/dev/", "/sbin", "/tmp")

    @staticmethod
    def _text(path: Any, name: str = "path") -> str:
        if not isinstance(path, str) or not path:
            raise fail(name, path, f"a non-empty str path of at most {MAX_PATH_LENGTH} characters")
        if len(path) > MAX_PATH_LENGTH:
            raise ParameterError(f"{name} {path[:60]!r}... is {len(path)} characters, more than {MAX_PATH_LENGTH}")
        return path

    @staticmethod
    def check_input_path_valid(path: str, check_real_path: bool = True, check_blacklist: bool = False) -> None:
        """A path without ``..``; with ``check_real_path`` no symlink in it; with ``check_blacklist``
        not under a system directory of ``BLACKLIST_PATH`` (nor ``/tmp``)."""
        FileCheck._text(path)
        if ".." in path:
            raise fail("path", path, "a path without '..'")
        absolute = Path(os.path.abspath(path))
        resolved = absolute.resolve()
        if check_real_path and resolved != absolute:
            raise fail("path", path, f"a path without symbolic links (it resolves to {str(resolved)!r})")
        if check_blacklist:
            for banned in FileCheck.BLACKLIST_PATH:
                if resolved.is_relative_to(banned.rstrip("/") or "/"):
                    raise ParameterError(f"path {path!r} lies under {banned!r}, where the SDK does not read or write")

    @staticmethod
    def check_path_is_exist_and_valid(path: str, check_real_path: bool = True, check_blacklist: bool = False) -> None:
        """``check_input_path_valid``, and the path exists."""
        FileCheck._text(path)
        if not os.path.exists(path):
            raise fail("path", path, "an existing path")
        FileCheck.check_input_path_valid(path, check_real_path, check_blacklist)

    @staticmethod
    def dir_check(file_path: str) -> None:
        """An existing directory, without ``..`` or symbolic links (a relative path is taken from the
        current directory; the original required an absolute one)."""
        FileCheck._text(file_path, "file_path")
        if not os.path.isdir(file_path):
            raise fail("file_path", file_path, "an existing directory")
        FileCheck.check_input_path_valid(file_path, True)

    @staticmethod
    def check_file_size(file_path: str, max_file_size: int) -> None:
        """The file holds at most ``max_file_size`` bytes."""
        FileCheck._text(file_path, "file_path")
        check_file("file_path", file_path, max_file_size)

    @staticmethod
    def check_files_num_in_directory(directory_path: str, suffix: str, limit: int) -> None:
        """At most ``limit`` entries of ``directory_path`` end with ``suffix`` (every entry when it is empty)."""
        FileCheck._text(directory_path, "directory_path")
        count = sum(1 for entry in Path(directory_path).glob("*") if not suffix or entry.suffix == suffix)
        if count > limit:
            raise ParameterError(f"directory_path {directory_path!r} holds {count} {suffix or ''} files, "
                                 f"more than the limit of {limit}")

    @staticmethod
    def check_file_owner(file_path: str) -> None:
        """The file and its directory belong to the user running the program."""
        FileCheck._text(file_path, "file_path")
        uid = os.getuid()
        for kind, path in (("file", file_path), ("directory", os.path.dirname(os.path.abspath(file_path)))):
            try:
                owner = os.stat(path).st_uid
            except OSError as exc:
                raise ParameterError(f"cannot read the owner of the {kind} {path!r}: {exc}") from exc
            if owner != uid:
                raise ParameterError(f"the {kind} {path!r} belongs to uid {owner}, not to the running user ({uid})")

    @staticmethod
    def check_filename_valid(file_path: str, max_length: int = 0) -> None:
        """The file name (last component) has at most ``max_length`` characters (default 255)."""
        limit = max_length if max_length > 0 else FileCheck.DEFAULT_MAX_FILE_NAME_LEN
        name = os.path.basename(file_path)
        if len(name) > limit:
            raise ParameterError(f"file name {name[:60]!r} is {len(name)} characters, more than {limit}")

    @staticmethod
    def check_mode(file_path: str, mode_limit: int = 0o755) -> None:
        """The file grants no permission bit beyond ``mode_limit``."""
        try:
            mode = os.stat(file_path).st_mode & 0o777
        except OSError as exc:
            raise ParameterError(f"cannot read the mode of {file_path!r}: {exc}") from exc
        extra = mode & ~mode_limit & 0o777
        if extra:
            raise ParameterError(f"{file_path!r} has mode {oct(mode)}, which grants more than {oct(mode_limit)}")


FileCheckError = ParameterError  # the original's name for a failed check

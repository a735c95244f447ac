# SPDX-License-Identifier: Apache-2.0
"""``MarkDownParser``: the titles and texts of a folder's Markdown files, for ``QAGenerationConfig``."""

from __future__ import annotations

import re
from pathlib import Path

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_str
from mx_rag.utils.common import MAX_PATH_LENGTH, MB
from mx_rag.utils.file_check import check_dir, check_file

__all__ = ["MarkDownParser"]

MAX_MD_SIZE = 10 * MB
MAX_TITLE = 100  # QAGenerationConfig's limit on a title
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_INLINE_IMAGE = re.compile(r"^.*data:image/.*$\n?", re.IGNORECASE | re.MULTILINE)


class MarkDownParser:
    """Read the ``*.md`` files directly inside a folder (not its subfolders), in name order.

    Args:
        file_path: the folder, a path of at most 1024 characters; checked when ``parse`` runs
            (an existing directory, no ``..`` component; symbolic links are resolved).
        max_file_num: the most ``.md`` files the folder may hold, in [1, 10000]. Default 1000.

    Example:
        >>> # titles, contents = MarkDownParser("/data/faq").parse()
    """

    def __init__(self, file_path: str, max_file_num: int = 1000) -> None:
        self.file_path = check_str("file_path", file_path, 1, MAX_PATH_LENGTH)
        self.max_file_num = check_int("max_file_num", max_file_num, 1, 10_000)

    def parse(self) -> tuple[list[str], list[str]]:
        """(titles, contents), one pair per file that holds text.

        A title is the file's first level-one heading, else its name without ``.md``, cut to 100
        characters. Lines holding a base64 ``data:image/...`` are dropped from the text. A file over
        10 MiB or not UTF-8 raises ``ParameterError`` naming it; an empty file is left out.
        """
        folder = check_dir("file_path", self.file_path)
        files = sorted(p for p in folder.glob("*.md") if p.is_file())
        if len(files) > self.max_file_num:
            raise ParameterError(f"file_path {self.file_path!r} holds {len(files)} .md files, more than "
                                 f"max_file_num {self.max_file_num}")
        titles, contents = [], []
        for path in files:
            text = _read(check_file("file_path", path, MAX_MD_SIZE))
            if not text.strip():
                continue
            heading = _HEADING.search(text)
            title = (heading.group(1) if heading else path.stem).strip() or path.stem
            titles.append(title[:MAX_TITLE])
            contents.append(text)
        return titles, contents


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"file_path {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return _INLINE_IMAGE.sub("", text)

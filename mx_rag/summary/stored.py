# SPDX-License-Identifier: Apache-2.0
"""``StoredSummaries``: document summaries kept in one JSON file, so each is written once.

A summary is kept under a key that changes with the text it summarises (``mxrag kb show
--summary`` uses the document id and its content hash), so a changed document is summarised again
and an unchanged one costs nothing. Long texts are summarised by ``Summary.merge_text_summarize``
(map-reduce over their chunks within ``merge_threshold`` characters per LLM call).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from mx_rag.summary.summary import Summary
from mx_rag.utils.checkpoint import atomic_write_json
from mx_rag.utils.checks import check_instance, check_str, fail

__all__ = ["StoredSummaries"]

logger = logging.getLogger(__name__)

MAX_KEY_LEN = 1024


class StoredSummaries:
    """Summaries by key in the JSON file ``path`` (created on the first write).

    Args:
        path: the file; a missing or unreadable one starts empty (with a warning when unreadable).

    Example:
        >>> from mx_rag.summary.stored import StoredSummaries
        >>> # stored = StoredSummaries(Path(".mxrag/summaries/handbook.json"))
        >>> # text = stored.summarize(Summary(llm=llm), "3:9f2c...", [chunk.page_content for chunk in chunks])
    """

    def __init__(self, path: Path) -> None:
        if not isinstance(path, (str, Path)):
            raise fail("path", path, "a str or a pathlib.Path")
        self.path = Path(path)
        self._items: dict[str, str] = {}
        if self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                logger.warning("ignoring the unreadable summaries file %s: %s", self.path, exc)
            else:
                if isinstance(loaded, dict):
                    self._items = {str(k): v for k, v in loaded.items() if isinstance(v, str)}

    def get(self, key: str) -> str | None:
        """The summary kept under ``key``, else None."""
        return self._items.get(check_str("key", key, 1, MAX_KEY_LEN))

    def summarize(self, summary: Summary, key: str, texts: Sequence[str]) -> str:
        """The summary under ``key``; without one, ``texts`` summarised into one (then kept).

        Args:
            summary: the ``Summary`` (its LLM) that writes a missing summary.
            key: 1 to 1024 characters; give a new key when the texts change.
            texts: the parts of the text in order (a document's chunks), 1 to 1024 of them.
        """
        check_instance("summary", summary, Summary)
        found = self.get(key)
        if found is not None:
            return found
        if not texts:
            raise fail("texts", texts, "1 or more strings to summarise")
        written = summary.merge_text_summarize(list(texts))
        self._items[key] = written
        atomic_write_json(self.path, self._items)
        return written

    def keep_only(self, keys: Sequence[str]) -> None:
        """Forget the summaries of every key but ``keys`` (those of deleted or changed documents)."""
        wanted = set(keys)
        if set(self._items) - wanted:
            self._items = {k: v for k, v in self._items.items() if k in wanted}
            atomic_write_json(self.path, self._items)

# SPDX-License-Identifier: Apache-2.0
"""What a CoRAG agent does when its document source fails, and how it counts retrievals.

Document sources raise when they fail (``RetrievalError`` or another ``MxRagError``); the agent
is the one layer that catches, by its ``on_retrieval_error`` policy:

* ``"continue"`` (default, the documented behaviour): the step has no documents, a WARNING is
  logged and the failure is counted;
* ``"raise"``: the failure is counted and raised as a ``RetrievalError`` (chained to the cause).

Example:
    >>> stats = RetrievalStats()
    >>> stats.record(found=2); stats.record(failed=True)
    >>> stats.snapshot()
    RetrievalCounts(calls=2, failures=1, empty=0)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["ON_RETRIEVAL_ERROR", "RetrievalCounts", "RetrievalStats"]

ON_RETRIEVAL_ERROR = ("continue", "raise")


@dataclass(frozen=True)
class RetrievalCounts:
    """Retrievals so far: ``calls`` (failed ones included), ``failures``, and ``empty`` (answered
    with no usable document)."""

    calls: int = 0
    failures: int = 0
    empty: int = 0


class RetrievalStats:
    """Thread-safe counters of one agent's retrievals (all threads and questions together)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = RetrievalCounts()

    def record(self, *, found: int = 0, failed: bool = False) -> None:
        """Count one retrieval that failed, or that found ``found`` usable documents."""
        with self._lock:
            old = self._counts
            self._counts = RetrievalCounts(old.calls + 1, old.failures + failed, old.empty + (not failed and not found))

    def snapshot(self) -> RetrievalCounts:
        """The counts now."""
        with self._lock:
            return self._counts

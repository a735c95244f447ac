# SPDX-License-Identifier: Apache-2.0
"""``Progress``: a progress bar on stderr for long library loops (evaluations, sample generation)."""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["Progress"]


class Progress:
    """A progress bar on stderr: tqdm when installed, else a counter line; silent when not a TTY."""

    def __init__(self, total: int, desc: str) -> None:
        self._total, self._desc, self._done = total, desc, 0
        self._lock = threading.Lock()
        self._enabled = total > 0 and sys.stderr.isatty()
        self._bar: Any = None
        if self._enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._bar = tqdm(total=total, desc=desc, unit="q", file=sys.stderr)

    def update(self, count: int = 1) -> None:
        with self._lock:
            self._done += count
            if self._bar is not None:
                self._bar.update(count)
            elif self._enabled:
                sys.stderr.write(f"\r{self._desc}: {self._done}/{self._total}")
                sys.stderr.flush()

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
            elif self._enabled:
                sys.stderr.write("\n")

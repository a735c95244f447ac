# SPDX-License-Identifier: Apache-2.0
"""How ``mxrag ingest`` shows its progress on stderr: a bar with files and chunks per second on a
terminal, one line per file otherwise (logs, CI, pipes)."""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

__all__ = ["Reporter", "reporter"]

WIDTH = 10  # the status column of the per-file lines


class Reporter:
    """One line per file on stderr."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.files = 0
        self.chunks = 0
        self.total = 0

    def start(self, total: int) -> None:
        self.total = total

    def file(self, status: str, shown: str, chunks: int = 0, reason: str = "") -> None:
        """A file handled: stored, updated, unchanged, failed, skipped or removed."""
        self.files += status not in ("skipped", "removed")
        self.chunks += chunks
        detail = f" ({chunks} chunk{'s' * (chunks != 1)})" if chunks else ""
        tail = f": {reason}" if reason else ""
        self.echo(f"{status:<{WIDTH}} {shown}{detail}{tail}")

    def note(self, text: str) -> None:
        self.echo(text)

    def echo(self, text: str) -> None:
        typer.echo(text, err=True)

    def close(self) -> None:
        """Called once, before the summary."""

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


class BarReporter(Reporter):
    """A rich progress bar; failures and notes printed above it, the rest only counted."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("{task.fields[current]}"),
            console=self.console, transient=True,
        )
        self.task: Any = None

    def start(self, total: int) -> None:
        super().start(total)
        self.progress.start()
        self.task = self.progress.add_task("ingest", total=total, rate="", current="")

    def file(self, status: str, shown: str, chunks: int = 0, reason: str = "") -> None:
        self.files += status not in ("skipped", "removed")
        self.chunks += chunks
        if status in ("failed", "removed"):
            self.echo(f"{status:<{WIDTH}} {shown}{f': {reason}' if reason else ''}")
        if self.task is not None and status not in ("skipped", "removed"):
            elapsed = max(self.elapsed, 1e-3)
            rate = f"{self.files / elapsed:.1f} files/s, {self.chunks / elapsed:.0f} chunks/s"
            self.progress.update(self.task, completed=self.files, rate=rate, current=_short(shown))

    def echo(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def close(self) -> None:
        self.progress.stop()


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def reporter() -> Reporter:
    """A bar on a terminal, lines otherwise."""
    return BarReporter() if sys.stderr.isatty() else Reporter()

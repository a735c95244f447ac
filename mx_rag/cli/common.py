# SPDX-License-Identifier: Apache-2.0
"""What every ``mxrag`` command shares: failing with one line on stderr, stopping on signals."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

__all__ = ["fail", "stop_on_signals"]


def fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM; the previous handlers come back afterwards."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

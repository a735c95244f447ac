# SPDX-License-Identifier: Apache-2.0
"""What every ``mxrag`` command shares: failing with one line on stderr, stopping on signals."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

__all__ = ["fail", "stop_on_signals", "usage_message"]


def fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


def usage_message(exc: Any) -> str:
    """One line for a usage error of the parser: the parameter, the value and the allowed range.

    ``exc`` is the parser's ``UsageError``; a value it could not convert or that is out of an
    option's ``min``/``max`` comes back as ``--k must be an integer in [1, 100], got '0'`` instead
    of the validator's wording, which names neither the value nor the range.
    """
    param, message = getattr(exc, "param", None), exc.format_message()
    errors = exc.__cause__.errors() if hasattr(exc.__cause__, "errors") else []  # the validator's, if any
    numeric = bool(errors) and str(errors[0].get("type", "")).startswith(("int", "float", "greater", "less"))
    if param is not None and (numeric or getattr(param, "min", None) is not None or getattr(param, "max", None)
                              is not None) and errors:
        name = param.opts[0] if param.opts and param.opts[0].startswith("-") else (param.name or "").upper()
        error = errors[0]
        low, high = getattr(param, "min", None), getattr(param, "max", None)
        bound = low if low is not None else high
        integer = str(error.get("type", "")).startswith("int") or isinstance(bound, int)
        kind = "an integer" if integer else "a number"
        if low is not None and high is not None:
            kind += f" in [{low}, {high}]"
        elif low is not None or high is not None:
            kind += f" >= {low}" if low is not None else f" <= {high}"
        message = f"{name} must be {kind}, got {error.get('input')!r}"
    command = getattr(getattr(exc, "ctx", None), "command_path", "mxrag")
    return f"{message.rstrip('.')} (see `{command} --help`)"


@contextmanager
def stop_on_signals(on_first: Callable[[], None] | None = None, *,
                    second_interrupts: bool = False) -> Iterator[threading.Event]:
    """An event set by the first SIGINT or SIGTERM, which also calls ``on_first``; with
    ``second_interrupts``, a second Ctrl-C raises ``KeyboardInterrupt`` (a two-step stop). The
    previous handlers come back afterwards."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        if second_interrupts and stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        stop.signum = signum  # type: ignore[attr-defined]
        if on_first is not None:
            on_first()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

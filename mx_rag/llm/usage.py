# SPDX-License-Identifier: Apache-2.0
"""Token usage the LLM servers report, counted per caller: ``with usage_meter() as usage: ...``.

Every chat completion made inside the ``with`` block (in this thread or task, through any mx_rag
LLM client, including those a chain makes) adds the ``usage`` its server reported. Streamed
requests made inside a meter ask for it (``stream_options.include_usage``); outside one nothing
changes in the requests. ``usage.reported`` is False when no server reported any.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["Usage", "metering", "record_usage", "start_usage_meter", "usage_meter"]


@dataclass
class Usage:
    """Tokens reported by the LLM servers of the calls made inside one ``usage_meter``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


_meter: ContextVar[Usage | None] = ContextVar("mxrag_usage_meter", default=None)


@contextmanager
def usage_meter() -> Iterator[Usage]:
    usage = Usage()
    token = _meter.set(usage)
    try:
        yield usage
    finally:
        _meter.reset(token)


def start_usage_meter() -> Usage:
    """Start counting in the current context without an end (for code that runs every step of a
    stream in its own ``contextvars.Context``, which it then drops)."""
    usage = Usage()
    _meter.set(usage)
    return usage


def metering() -> bool:
    """Whether a meter is counting the calls made here."""
    return _meter.get() is not None


def record_usage(data: Any) -> None:
    """Add a response's (or stream chunk's) ``usage`` object to the active meter, if any."""
    usage = _meter.get()
    if usage is None or not isinstance(data, dict) or not isinstance(data.get("usage"), dict):
        return
    reported = data["usage"]
    prompt, completion = reported.get("prompt_tokens"), reported.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 and completion >= 0:
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.reported = True

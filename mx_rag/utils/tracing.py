# SPDX-License-Identifier: Apache-2.0
"""OpenTelemetry spans for the stages of ingestion and of a question, when tracing is on.

Off (the default) a stage costs one global read and returns a shared do-nothing context manager:
no opentelemetry module is imported. Tracing is on when

* ``MXRAG_OTLP_ENDPOINT`` is set (an OTLP/HTTP traces URL, ``http://collector:4318/v1/traces``):
  on first use spans are batched and exported there (``pip install "mxrag[trace]"``); or
* ``enable(tracer_provider)`` was called with a provider of the caller's (tests, applications
  that set up OpenTelemetry themselves); ``disable()`` turns it off again.

Stage names (span names ``mxrag.<stage>``): ingest ``load``, ``split``, ``embed``, ``write``; a
question ``query.embed``, ``query.vector_search``, ``query.keyword_search``, ``query.fusion``,
``query.subject_links``, ``query.rerank``, ``query.prompt``, ``query.llm`` (the whole answer)
and ``query.llm_first_token`` (until the first streamed token).

Stage times without OpenTelemetry: ``observe(callback)`` has ``callback(stage, seconds)`` called
after each stage in this process (the server's ``/metrics`` histograms), and ``timings()``
collects the stages run inside its block, in the calling context (``mxrag ask --timings``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from mx_rag.utils.lazy import extra_import

__all__ = ["ENDPOINT_VARIABLE", "disable", "enable", "enabled", "observe", "stage", "timings", "unobserve"]

ENDPOINT_VARIABLE = "MXRAG_OTLP_ENDPOINT"
_OFF: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
_tracer: Any = None  # an opentelemetry Tracer while on
_checked = False  # the environment was read
_lock = threading.Lock()
_observers: tuple[Callable[[str, float], None], ...] = ()  # told each stage's time; empty: not timed
_collected: contextvars.ContextVar[list[tuple[str, float]] | None] = contextvars.ContextVar("mxrag_timings",
                                                                                           default=None)
_collecting = 0  # timings() blocks open


def enable(tracer_provider: Any = None) -> None:
    """Trace from now on through ``tracer_provider`` (default: an OTLP/HTTP exporter to
    ``MXRAG_OTLP_ENDPOINT``, which must then be set)."""
    global _tracer, _checked
    with _lock:
        if tracer_provider is None:
            endpoint = os.environ.get(ENDPOINT_VARIABLE)
            if not endpoint:
                raise ValueError(f"tracing needs a tracer_provider or {ENDPOINT_VARIABLE} (an OTLP/HTTP traces URL)")
            tracer_provider = _otlp_provider(endpoint)
        _tracer = tracer_provider.get_tracer("mx_rag")
        _checked = True


def disable() -> None:
    """Stop tracing (spans already ended stay with their provider)."""
    global _tracer, _checked
    with _lock:
        _tracer, _checked = None, True


def enabled() -> bool:
    if not _checked:
        _from_environment()
    return _tracer is not None


def observe(callback: Callable[[str, float], None]) -> None:
    """Call ``callback(stage, seconds)`` after every stage from now on (once, however often
    ``callback`` is given); it must be quick and must not raise."""
    with _lock:
        _set_observing(callback, True)


def unobserve(callback: Callable[[str, float], None]) -> None:
    """Stop calling ``callback`` (nothing if it was not observing)."""
    with _lock:
        _set_observing(callback, False)


def _set_observing(callback: Callable[[str, float], None], on: bool) -> None:
    global _observers
    others = tuple(c for c in _observers if c != callback)
    _observers = (*others, callback) if on else others


@contextlib.contextmanager
def timings() -> Iterator[list[tuple[str, float]]]:
    """``(stage, seconds)`` of each stage that ends inside the block, in this context, in order
    of ending (the list is filled as they end)."""
    global _collecting
    collected: list[tuple[str, float]] = []
    token = _collected.set(collected)
    with _lock:
        _collecting += 1
        _set_observing(_collect, True)
    try:
        yield collected
    finally:
        _collected.reset(token)
        with _lock:
            _collecting -= 1
            _set_observing(_collect, _collecting > 0)


def _collect(name: str, seconds: float) -> None:
    collected = _collected.get()
    if collected is not None:
        collected.append((name, seconds))


def stage(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span ``mxrag.<name>`` around the block when tracing is on, timed for the observers when
    there are any; else a shared no-op."""
    if _observers:
        return _timed(name, attributes)
    if _tracer is None and (_checked or not _from_environment()):
        return _OFF
    return _span(name, attributes)


@contextlib.contextmanager
def _span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    with _tracer.start_as_current_span(f"mxrag.{name}", attributes=attributes or None) as span:
        yield span


@contextlib.contextmanager
def _timed(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    started = time.perf_counter()
    try:
        traced = _OFF if _tracer is None and (_checked or not _from_environment()) else _span(name, attributes)
        with traced as span:
            yield span
    finally:
        seconds = time.perf_counter() - started
        for callback in _observers:
            callback(name, seconds)


def _from_environment() -> bool:
    global _checked
    if not _checked:
        if os.environ.get(ENDPOINT_VARIABLE):
            enable()
        _checked = True
    return _tracer is not None


def _otlp_provider(endpoint: str) -> Any:
    with extra_import("trace", "opentelemetry.sdk", only={"opentelemetry"}):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    provider = TracerProvider(resource=Resource.create({"service.name": "mx_rag"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider

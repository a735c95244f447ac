# SPDX-License-Identifier: Apache-2.0
"""The server's Prometheus metrics (one registry per process; with ``--workers N`` each worker
reports its own, so scrape each worker or sum them).

``mxrag_stage_seconds{stage}`` times the stages of ``mx_rag.utils.tracing`` (ingestion: load,
split, embed, write; a question: query.embed, query.vector_search, query.keyword_search, ...)
once ``create_app`` has passed ``observe_stage`` to ``tracing.observe``."""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_TYPE", "METHODS", "RequestMetrics", "count_ingested", "count_tokens", "exposition",
           "observe_request", "observe_stage"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# the method label: any other method a client makes up counts as "other", so clients cannot grow the series
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

REGISTRY = CollectorRegistry()
_REQUESTS = Counter("mxrag_requests", "HTTP requests answered", ["route", "method", "status"], registry=REGISTRY)
_LATENCY = Histogram(
    "mxrag_request_seconds", "Time to answer a request (streams: to the last byte handed over)", ["route"],
    registry=REGISTRY, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
_STAGES = Histogram(
    "mxrag_stage_seconds", "Time of each stage of an ingestion or a question (mx_rag.utils.tracing)", ["stage"],
    registry=REGISTRY, buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                60, 120),
)
_TOKENS = Counter("mxrag_tokens", "Tokens of chat completions", ["kind"], registry=REGISTRY)
_FILES = Counter("mxrag_ingested_files", "Uploaded files ingested, by result", ["result"], registry=REGISTRY)


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    _REQUESTS.labels(route, method if method in METHODS else "other", str(status)).inc()
    _LATENCY.labels(route).observe(seconds)


def observe_stage(stage: str, seconds: float) -> None:
    _STAGES.labels(stage).observe(seconds)


class RequestMetrics:
    """ASGI middleware counting each HTTP request by route, method and status, with its latency
    to the last byte handed over (plain ASGI: nothing is spawned per request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            observe_request(getattr(route, "path", "unmatched"), scope["method"], status,
                            time.perf_counter() - started)


def count_tokens(prompt: int, completion: int) -> None:
    _TOKENS.labels("prompt").inc(prompt)
    _TOKENS.labels("completion").inc(completion)


def count_ingested(result: str) -> None:
    _FILES.labels(result).inc()


def exposition() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST

# SPDX-License-Identifier: Apache-2.0
"""SQLAlchemy engines on PostgreSQL, shared by the chunk store, the graph store and the knowledge
registry: one URL check, one driver default (psycopg 3), one message that never shows a password."""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import URL, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from mx_rag.errors import ExtraNotInstalledError, ParameterError
from mx_rag.utils.checks import fail

__all__ = ["URL_HINT", "postgres_engine"]

URL_HINT = "a SQLAlchemy URL such as postgresql+psycopg://user:password@host:5432/dbname, or an Engine"


def postgres_engine(url_or_engine: Any, name: str = "url_or_engine") -> tuple[Engine, bool]:
    """The engine for ``url_or_engine`` (a PostgreSQL URL or ``Engine``; connections checked
    before use) and whether the caller owns it (made here) or not (given). ``name`` is the
    parameter named in errors."""
    if isinstance(url_or_engine, Engine):
        if url_or_engine.dialect.name != "postgresql":
            raise fail(name, url_or_engine, "an Engine on PostgreSQL")
        return url_or_engine, False
    if not isinstance(url_or_engine, (str, URL)):
        raise fail(name, url_or_engine, URL_HINT)
    try:
        url = make_url(url_or_engine)
    except (ArgumentError, ValueError):
        raise ParameterError(f"{name} must be {URL_HINT}") from None  # the text may hold a password
    if url.get_backend_name() != "postgresql":
        raise ParameterError(f"{name} must be {URL_HINT}; got the backend {url.get_backend_name()!r}")
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(
            url, pool_pre_ping=True, json_serializer=functools.partial(json.dumps, ensure_ascii=False)
        )
    except (ImportError, NoSuchModuleError) as exc:
        raise ExtraNotInstalledError(url.get_driver_name(), "postgres") from exc
    return engine, True

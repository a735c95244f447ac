# SPDX-License-Identifier: Apache-2.0
"""Helpers of the document-store tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text

from mx_rag.storage.document_store.sql_storage import _SqlDocstore

DATA = Path(__file__).resolve().parents[2] / "data" / "storage"

MakeStore = Callable[..., _SqlDocstore]


def encrypt(value: str) -> str:
    """A reversible stand-in for a real cipher."""
    return base64.b64encode(value.encode("utf-8")).decode("ascii")


def decrypt(value: str) -> str:
    return base64.b64decode(value).decode("utf-8")


def indexed_rows(store: _SqlDocstore) -> int:
    """How many chunks the full-text index holds."""
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            return int(conn.execute(text(f"SELECT count(*) FROM {store.table_name}_fts")).scalar_one())
        query = f"SELECT count(*) FROM {store.table_name} WHERE search_vector IS NOT NULL"
        return int(conn.execute(text(query)).scalar_one())


def excerpt() -> list[dict[str, str]]:
    """Paragraphs of the Debian Reference: ``section``, ``lang`` (en, zh), ``title``, ``text``."""
    lines = (DATA / "debian_reference_excerpt.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]

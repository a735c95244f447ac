# SPDX-License-Identifier: Apache-2.0
"""PostgreSQL for the storage tests.

``postgres_url``: ``MXRAG_TEST_POSTGRES_URL`` when set (CI exports it); otherwise the URL printed
by ``scripts/ensure_postgres.sh``, which starts (and if need be installs) a local server. When
that fails the PostgreSQL tests are skipped with the script's reason.

``postgres_table``: a table name unique to the test; the table is dropped afterwards.

``milvus_client``: one milvus-lite client (a local file) for the session; tests use their own
collections.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

ENSURE_POSTGRES = Path(__file__).resolve().parents[2] / "scripts" / "ensure_postgres.sh"
ENSURE_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A SQLAlchemy URL of a PostgreSQL database the tests may create tables in."""
    url = os.environ.get("MXRAG_TEST_POSTGRES_URL", "").strip()
    if url:
        return url
    try:
        proc = subprocess.run(
            ["bash", str(ENSURE_POSTGRES)], capture_output=True, text=True, timeout=ENSURE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"no PostgreSQL server: {ENSURE_POSTGRES.name} could not run: {exc}")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        pytest.skip(f"no PostgreSQL server: {ENSURE_POSTGRES.name} failed: {proc.stderr.strip()[-800:]}")
    return lines[-1]


@pytest.fixture
def postgres_table(postgres_url: str) -> Iterator[str]:
    """A fresh table name; the table (and its indexes) is dropped when the test ends."""
    name = f"t_{uuid.uuid4().hex[:20]}"
    yield name
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def milvus_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp_path_factory.mktemp("milvus") / "milvus.db"))
    yield client
    client.close()

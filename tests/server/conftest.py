# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the server tests.

``milvus_server``: a real Milvus 2.3.5 standalone (``milvus-server`` of the PyPI package ``milvus``,
see ``milvus_server.py``) on free ports in a temporary folder for the session; skipped only where
that package is not installed. The unpacked binaries are kept in pytest's cache folder.

``postgres_url``: ``MXRAG_TEST_POSTGRES_URL`` (``make test`` sets it from
``scripts/ensure_postgres.sh``); skipped without it. ``postgres_schema_url``: that database with a
fresh schema as the search path (dropped with its tables afterwards), so that the fixed table
names of the server's stores do not collide between tests or runs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.server.milvus_server import MILVUS_VERSION, MilvusServer, installed_version, running_milvus


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[MilvusServer]:
    version = installed_version()
    if version is None:
        pytest.skip(f"the Milvus server is not installed: pip install milvus=={MILVUS_VERSION} "
                    "(its milvus-server is a Milvus standalone; make setup installs it)")
    cache = pytestconfig.cache.mkdir(f"milvus-{version}") if pytestconfig.cache is not None else None
    try:
        with running_milvus(tmp_path_factory.mktemp("milvus"), bin_cache=cache) as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("MXRAG_TEST_POSTGRES_URL", "").strip()
    if not url:
        pytest.skip("MXRAG_TEST_POSTGRES_URL is not set: run with url=$(scripts/ensure_postgres.sh) and "
                    "MXRAG_TEST_POSTGRES_URL=$url (make test does this)")
    return url


@pytest.fixture
def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """``postgres_url`` with a new, empty schema as its search path."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        url = make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()

# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the server tests.

``milvus_server``: a real Milvus 2.3.5 standalone (``milvus-server`` of the PyPI package ``milvus``,
see ``milvus_server.py``) on free ports in a temporary folder for the session; skipped only where
that package is not installed. The unpacked binaries are kept in pytest's cache folder.

``postgres_url`` and ``postgres_schema_url`` come from the suite's root conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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


# the servers of the hostile-client tests (test_hostile_*.py)
from tests.server.hostile_world import keyed, local, scripted_llm  # noqa: E402, F401

# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the server tests: the servers of the hostile-client tests (test_hostile_*.py).

``milvus_server``, ``postgres_url`` and ``postgres_schema_url`` come from the suite's root conftest.
"""

from tests.server.hostile_world import keyed, local, scripted_llm  # noqa: F401

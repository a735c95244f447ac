# SPDX-License-Identifier: Apache-2.0
"""Schemathesis over ``mxrag serve``'s published OpenAPI (issue 29, case 17): generated requests,
valid and not, to every operation of the ``keyed`` server with a read-only key (so nothing it
sends can change the knowledge bases), bounded to a few examples per operation. No answer may be
a 5xx or contradict the schema (status codes, media types, bodies, headers). One check is left
out: ``positive_data_acceptance`` expects every schema-valid body to be accepted, while the routes
also refuse with 400 what a JSON schema cannot say (a chat whose last message is not the user's,
an unknown chain), in the documented error shape. ``/rerank`` is left out: this server has no
reranker model, and its documented answer is then 503 (test_server.py runs it with one)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.server.hostile_world import World

pytestmark = pytest.mark.slow

EXAMPLES = 15  # per operation: about 20 s for the whole schema (25: 32 s)


def test_answers_match_the_published_schema(keyed: World) -> None:
    schema = schemathesis.openapi.from_url(keyed.base_url + "/openapi.json")
    headers = {"Authorization": f"Bearer {keyed.keys['alice_ro']}"}
    operations = [op for op in (result.ok() for result in schema.get_all_operations()) if op.path != "/rerank"]
    assert len(operations) >= 15
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, timeout=30, excluded_checks=[positive_data_acceptance])

        check()

"""Marks for LangChain's standard suites: their ``async def`` tests need pytest-asyncio's mark
(strict mode); applied to a whole module it also lands on the sync tests, which ignore it."""

import pytest

ASYNC_SUITE = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio'"),
]

"""LangChain's standard embedding suites (``langchain-tests``) on our embeddings.

``HashEmbedding`` (no model) and ``TextEmbedding`` (the embedded all-MiniLM-L6-v2) run the unit
and the integration suites. Counts are recorded in docs/langchain.md.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from mx_rag.embedding.local import TextEmbedding
from mx_rag.testing import HashEmbedding

from ._marks import ASYNC_SUITE

pytestmark = ASYNC_SUITE


class TestHashEmbeddingUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return HashEmbedding

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"dim": 64}


class TestHashEmbeddingIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return HashEmbedding

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"dim": 64}


class TestTextEmbeddingUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return TextEmbedding


class TestTextEmbeddingIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return TextEmbedding

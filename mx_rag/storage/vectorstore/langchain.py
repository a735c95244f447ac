# SPDX-License-Identifier: Apache-2.0
"""``LangChainVectorStore``: an mx_rag vector store (``MindFAISS``, ``MilvusDB``) and a chunk
store (``SQLiteDocstore``, ``PostgresDocstore``) seen as one LangChain ``VectorStore``.

LangChain identifies documents by string ids; mx_rag stores vectors under integer chunk ids
grouped by integer document ids. Each LangChain document becomes one mx_rag document of one
chunk: its ``document_id`` is derived from the string id (the first 63 bits of its SHA-256, so no
mapping table is needed and any process computes the same one), the string id is kept as the
chunk's ``document_name``, and the text and metadata are the chunk's. Adding an id that exists
replaces that document (``add_documents`` is an upsert).

Example:
    >>> from mx_rag.storage.vectorstore.langchain import LangChainVectorStore     # doctest: +SKIP
    >>> store = LangChainVectorStore(MindFAISS(x_dim=384, devs=[0], load_local_index="faiss.index"),
    ...                              SQLiteDocstore("sql.db"), TextEmbedding())     # doctest: +SKIP
    >>> store.add_documents([Document("Debian keeps the hostname in /etc/hostname.")], ids=["h"])  # doctest: +SKIP
    >>> store.as_retriever(search_kwargs={"k": 3}).invoke("Where is the hostname?")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore as LangChainBase

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store.base_storage import Docstore, MxDocument
from mx_rag.storage.vectorstore.vectorstore import VectorStore, as_matrix
from mx_rag.utils.checks import check_instance, check_str

__all__ = ["LangChainVectorStore", "document_id_of"]

MAX_ID_CHARS = 1024  # a chunk's document_name


def document_id_of(langchain_id: str) -> int:
    """The mx_rag ``document_id`` of the LangChain document ``langchain_id`` (63 bits of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(langchain_id.encode("utf-8")).digest()[:8], "big") >> 1


class LangChainVectorStore(LangChainBase):
    """A LangChain ``VectorStore`` over an mx_rag vector store and document store.

    Args:
        vector_store: ``MindFAISS``, ``MilvusDB`` or any mx_rag ``VectorStore`` (of the
            embedding's dimension).
        document_store: any mx_rag ``Docstore``; it holds the texts, metadata and string ids.
        embedding: the LangChain ``Embeddings`` that embeds texts (``embed_documents``) and
            queries (``embed_query``).

    Writes go to the document store, then the vector store; a failure between the two can
    leave a document without its vector (found by ``get_by_ids``, not by search) until it is
    added again. Scores of ``similarity_search_with_score`` are the vector store's scaled
    similarities (higher is closer).
    """

    def __init__(self, vector_store: VectorStore, document_store: Docstore, embedding: Embeddings) -> None:
        self.vector_store = check_instance("vector_store", vector_store, VectorStore)
        self.document_store = check_instance("document_store", document_store, Docstore)
        self.embedding = check_instance("embedding", embedding, Embeddings)

    @property
    def embeddings(self) -> Embeddings:
        return self.embedding

    # -- writing -------------------------------------------------------------------------------

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict[Any, Any]] | None = None, *, ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and store ``texts``; return their ids (given ones, else new UUIDs). An id that
        exists is replaced."""
        if kwargs:
            raise ParameterError(f"LangChainVectorStore.add_texts got unknown keyword argument(s) {sorted(kwargs)}")
        texts = list(texts)
        metadatas = [dict(m) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        given = list(ids) if ids is not None else [None] * len(texts)
        if len(metadatas) != len(texts) or len(given) != len(texts):
            raise ParameterError(f"metadatas and ids must have one entry per text ({len(texts)} texts)")
        final = [check_str("ids[]", i, 1, MAX_ID_CHARS) if i else str(uuid.uuid4()) for i in given]
        if len(set(final)) != len(final):
            raise ParameterError("ids must not repeat within one call")
        if not texts:
            return []
        vectors = as_matrix("embedding result", self.embedding.embed_documents(texts))
        self.delete(final)
        for text, metadata, lc_id, vector in zip(texts, metadatas, final, vectors, strict=True):
            document_id = document_id_of(lc_id)
            chunk_ids = self.document_store.add([MxDocument(text, metadata, lc_id)], document_id)
            self.vector_store.add(chunk_ids, vector[None, :], document_id=document_id)
        return final

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents ``ids`` (unknown ids are ignored). ``ids=None`` is refused: this
        adapter never empties a store it shares with others."""
        if ids is None:
            raise ParameterError("LangChainVectorStore.delete needs the ids to delete")
        for lc_id in ids:
            chunk_ids = self.document_store.delete(document_id_of(check_str("ids[]", lc_id, 1, MAX_ID_CHARS)))
            if chunk_ids:
                self.vector_store.delete(chunk_ids)
        return True

    # -- reading -------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents among ``ids``, in that order; unknown ids are left out."""
        found: list[Document] = []
        for lc_id in ids:
            chunks = self.document_store.search_by_document_id(document_id_of(lc_id))
            found += [self._document(chunk) for chunk in chunks if chunk.document_name == lc_id]
        return found

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` documents closest to ``query`` with their scaled similarity, best first.

        ``filter`` (LangChain's keyword) is refused: restrict by documents with the mx_rag
        stores' own ``filter_dict`` through ``mx_rag.retrievers.Retriever`` instead.
        """
        return self._search(self.embedding.embed_query(query), k, **kwargs)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self._search(embedding, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: score  # already a scaled similarity

    def _search(self, vector: Any, k: int, **kwargs: Any) -> list[tuple[Document, float]]:
        if kwargs.get("filter") is not None:
            raise ParameterError("LangChainVectorStore does not take filter; use Retriever's filter_dict")
        unknown = sorted(set(kwargs) - {"filter"})
        if unknown:
            raise ParameterError(f"LangChainVectorStore search got unknown keyword argument(s) {unknown}")
        scores, ids = self.vector_store.search(as_matrix("query embedding", [vector]), k=k)
        hits = [(s, i) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]
        chunks = self.document_store.search_many([i for _, i in hits])
        return [(self._document(chunks[i]), float(s)) for s, i in hits if i in chunks]

    @staticmethod
    def _document(chunk: MxDocument) -> Document:
        return Document(page_content=chunk.page_content, metadata=dict(chunk.metadata), id=chunk.document_name)

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls, texts: list[str], embedding: Embeddings, metadatas: list[dict[Any, Any]] | None = None, *,
        ids: list[str] | None = None, vector_store: VectorStore | None = None,
        document_store: Docstore | None = None, **kwargs: Any,
    ) -> LangChainVectorStore:
        """A store over ``vector_store`` and ``document_store`` (both required) holding ``texts``."""
        if vector_store is None or document_store is None:
            raise ParameterError("LangChainVectorStore.from_texts needs vector_store= and document_store=")
        store = cls(vector_store, document_store, embedding)
        store.add_texts(texts, metadatas, ids=ids, **kwargs)
        return store

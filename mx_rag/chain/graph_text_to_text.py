# SPDX-License-Identifier: Apache-2.0
"""``GraphRagText2TextChain``: answer from the contexts a ``GraphRetriever`` returns."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain.single_text_to_text import SingleText2TextChain, UserContentBuilder
from mx_rag.llm.protocol import LLMLike
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import fail

__all__ = ["TEXT_RAG_TEMPLATE", "GraphRagText2TextChain"]

TEXT_RAG_TEMPLATE = """You are an assistant for question-answering tasks. Use the following \
retrieved context to answer the question. If you don't know the answer, say that you don't know. \
Use three sentences at most and keep the answer concise; do not repeat the question.

Context:
{context}

Question: {question}
Answer:"""


def _graph_content_builder(query: str, docs: list[Document], prompt: str) -> str:
    """``prompt`` with ``{context}`` (the contexts, one per line) and ``{question}`` filled in."""
    context = "\n".join(doc.page_content for doc in docs)
    return prompt.replace("{context}", context).replace("{question}", query)


def _as_documents(items: Any) -> list[Document]:
    """The retriever's answer as Documents (a ``GraphRetriever`` of the original returns str)."""
    docs = []
    for item in items:
        if isinstance(item, Document):
            docs.append(item)
        elif isinstance(item, str):
            docs.append(Document(page_content=item))
        else:
            raise fail("retriever result item", item, "a Document or a str")
    return docs


class GraphRagText2TextChain(SingleText2TextChain):
    """Graph RAG question answering: ``GraphRetriever`` contexts -> prompt -> LLM.

    Args:
        llm: a ``Text2TextLLM``, any ``ChatLLM`` or a LangChain chat or text model.
        retriever: a ``GraphRetriever`` (``GraphRAGPipeline.as_retriever()``); any retriever
            returning Documents or strings works.
        reranker: optional ``Reranker`` over the contexts (the pipeline's ``rerank_model``
            already reranks inside the retriever: give it to one of the two).
        prompt: the template, with ``{context}`` and ``{question}``. Default ``TEXT_RAG_TEMPLATE``.
        sys_messages: messages sent before the user turn (never modified).
        source: add ``source_documents`` to the result. Default False (the documented result is
            ``{"query", "result"}``).
        user_content_builder: ``(question, docs, prompt) -> str``; default fills the template.

    ``query(text, llm_config)`` streams when ``llm_config.stream`` is True (the config passed to
    ``query``, not the LLM's own).

    Example:
        >>> chain = GraphRagText2TextChain(llm=llm, retriever=pipeline.as_retriever())  # doctest: +SKIP
        >>> chain.query("Who are Teutberga's parents?")["result"]                        # doctest: +SKIP
    """

    def __init__(
        self,
        llm: LLMLike,
        retriever: BaseRetriever,
        reranker: Reranker | None = None,
        prompt: str = TEXT_RAG_TEMPLATE,
        sys_messages: list[dict[str, Any]] | None = None,
        source: bool = False,
        user_content_builder: UserContentBuilder = _graph_content_builder,
    ) -> None:
        super().__init__(llm=llm, retriever=retriever, reranker=reranker, prompt=prompt, sys_messages=sys_messages,
                         source=source, user_content_builder=user_content_builder)

    def _retrieve(self, text: str) -> list[Document]:
        docs = _as_documents(self._retriever.invoke(text))
        if self._reranker is not None and docs:
            scores = self._reranker.rerank(text, [doc.page_content for doc in docs])
            docs = self._reranker.rerank_top_k(docs, scores)
        return docs

# SPDX-License-Identifier: Apache-2.0
"""``RerankCompressor``: a reranker scores the context's pieces against the question; the best stay."""

from __future__ import annotations

from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter

from mx_rag.compress.base_compressor import (
    DEFAULT_COMPRESS_RATE,
    PromptCompressor,
    check_compress_args,
    check_splitter,
    pieces,
    select,
)
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import check_instance

__all__ = ["RerankCompressor"]


class RerankCompressor(PromptCompressor):
    """Keep the pieces of a context that a reranker scores highest for the question.

    Args:
        reranker: an ``mx_rag.reranker`` ``Reranker`` (``LocalReranker``, ``TEIReranker``).
        splitter: a LangChain ``TextSplitter``; default ``RecursiveCharacterTextSplitter(
            chunk_size=512, chunk_overlap=0, separators=["\\n", ""], keep_separator=True)``.

    Example:
        >>> from mx_rag.compress import RerankCompressor
        >>> # compressor = RerankCompressor(reranker=TEIReranker(url="http://127.0.0.1:8080/rerank"))
        >>> # shorter = compressor.compress_texts(long_text, "What does FAISS index?", compress_rate=0.5)
    """

    def __init__(self, reranker: Reranker, splitter: TextSplitter | None = None) -> None:
        self.reranker = check_instance("reranker", reranker, Reranker)
        if splitter is None:
            splitter = RecursiveCharacterTextSplitter(
                chunk_size=512, chunk_overlap=0, separators=["\n", ""], keep_separator=True
            )
        self.splitter = check_splitter(splitter)

    def compress_texts(
        self,
        context: str,
        question: str,
        compress_rate: float = DEFAULT_COMPRESS_RATE,
        context_reorder: bool = False,
    ) -> str:
        """Drop about ``compress_rate`` of ``context``'s characters, the pieces least relevant first.

        Args:
            context: 1 to 16 MiB characters.
            question: 1 to 1,000,000 characters; the pieces are scored against it.
            compress_rate: the share to drop, in (0, 1). Default 0.6.
            context_reorder: False keeps the kept pieces in their original order; True puts
                them in order of relevance, the most relevant first.

        Returns:
            The compressed context.
        """
        rate = check_compress_args(context, question, compress_rate, context_reorder)
        parts = pieces(context, self.splitter)
        if len(parts) < 2:
            return context
        scores = [float(score) for score in self.reranker.rerank(question, [part.strip() or part for part in parts])]
        kept = select(parts, scores, rate)
        order = kept if context_reorder else sorted(kept)
        return "".join(parts[i] for i in order)

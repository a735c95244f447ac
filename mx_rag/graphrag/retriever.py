# SPDX-License-Identifier: Apache-2.0
"""``GraphRetriever``: link the question to graph nodes, expand a subgraph, rank what it reaches.

Steps for a question:

1. *Linking*: nodes whose name appears in the question (score 1.0), the ``retrieval_top_k``
   nodes nearest to the question's embedding, and, with ``use_llm_entities``, the nodes nearest
   to each entity the LLM names in the question. Links below ``similarity_tail_threshold`` are
   dropped; a node keeps its best score.
2. *Expansion*: ``GraphStore.expand`` from the linked nodes, ``subgraph_depth`` hops, at most
   ``max_nodes`` nodes. A reached node scores ``DECAY ** hops`` times its best neighbour's score.
3. *Ranking*: ``use_text=True`` ranks the chunks that support the reached nodes and edges (a
   chunk scores the sum of what it supports); ``use_text=False`` ranks ``"u relation v"``
   triples by the mean score of their ends. Then optional reranking, ``reranker_top_k`` and the
   ``max_context_chars`` budget.

The retriever keeps no per-call state: one instance serves many threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict

from mx_rag.graphrag.graph_store import GraphStore, Subgraph
from mx_rag.graphrag.merge import normalise_name
from mx_rag.graphrag.prompts import QUESTION_ENTITY_PROMPTS, fill
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.reranker.reranker import Reranker
from mx_rag.retrievers.call_settings import CallSettings, CallSettingsRetriever, resolve_call_settings
from mx_rag.storage.vectorstore.vectorstore import VectorStore
from mx_rag.utils.checks import check_str
from mx_rag.utils.common import TEXT_MAX_LEN, Lang

__all__ = ["DECAY", "GraphRetriever"]

DECAY = 0.5
MAX_CONTEXTS = 1000  # the range of reranker_top_k (GraphRAGPipeline.as_retriever), and of a call's k
MAX_NGRAM_WORDS = 6
NGRAM_SCAN_CHARS = 2000
_WORD = re.compile(r"[\w'’.\-]+")
_CJK = re.compile(r"[\u3400-\u9fff]")


class GraphRetriever(CallSettingsRetriever):
    """A LangChain retriever over a graph built by ``GraphRAGPipeline`` (make it with
    ``pipeline.as_retriever(...)``).

    ``invoke(question)`` returns ``Document``s: chunk texts (``metadata["type"] == "chunk"``,
    with ``source``, ``chunk_id`` and ``score``) or, with ``use_text=False``, relation triples
    (``"relation"``, with ``chunk_ids`` and ``score``), best first.

    ``invoke(question, k=n)`` keeps at most ``n`` contexts, in [1, 1000], for that call (in place
    of ``reranker_top_k``).

    Example:
        >>> retriever = pipeline.as_retriever(subgraph_depth=2, reranker_top_k=5)
        >>> [d.page_content for d in retriever.invoke("Who founded Acme?")]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    graph: GraphStore
    node_vectors: VectorStore
    registry: ChunkRegistry
    embed_query: Callable[[str], list[float]]
    embed_documents: Callable[[list[str]], list[list[float]]]
    llm: Text2TextLLM | None = None
    reranker: Reranker | None = None
    lang: Lang = Lang.EN
    use_text: bool = True
    use_llm_entities: bool = False
    retrieval_top_k: int = 40
    reranker_top_k: int = 20
    subgraph_depth: int = 2
    similarity_tail_threshold: float = 0.0
    max_nodes: int = 200
    max_context_chars: int = 20_000

    @classmethod
    def from_embeddings(cls, embedding: Embeddings, **fields: Any) -> GraphRetriever:
        return cls(embed_query=embedding.embed_query, embed_documents=embedding.embed_documents, **fields)

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        """``k`` (contexts kept) is ``reranker_top_k`` unless the call gives one."""
        defaults = CallSettings(k=self.reranker_top_k)
        return resolve_call_settings(type(self).__name__, kwargs, defaults, ("k",), max_k=MAX_CONTEXTS)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        top_k = self._call_settings(kwargs).k
        seeds = self.link(query)
        if not seeds:
            return []
        best = sorted(seeds, key=lambda n: (-seeds[n], n))[: self.max_nodes]
        sub = self.graph.expand(best, self.subgraph_depth, self.max_nodes)
        scores = _propagate(sub, {n: seeds[n] for n in best})
        docs = self._chunk_documents(sub, scores, top_k) if self.use_text else self._triple_documents(sub, scores)
        docs = docs[:top_k]
        if self.reranker is not None and docs:
            docs = self.reranker.rerank_top_k(docs, self.reranker.rerank(query, [d.page_content for d in docs]))
        return _within_budget(docs, self.max_context_chars)

    # -- linking ---------------------------------------------------------------------------------

    def link(self, question: str) -> dict[str, float]:
        """Node name -> link score for ``question`` (step 1 above)."""
        seeds: dict[str, float] = dict.fromkeys(self.graph.get_nodes(_candidates(question)), 1.0)
        texts = [question]
        if self.use_llm_entities and self.llm is not None:
            entities = self._question_entities(question)
            seeds.update(dict.fromkeys(self.graph.get_nodes(normalise_name(e) for e in entities), 1.0))
            texts += entities
        for name, score in self._nearest(texts).items():
            if score > 0.0 and score >= self.similarity_tail_threshold and score > seeds.get(name, -1.0):
                seeds[name] = score
        return seeds

    def _question_entities(self, question: str) -> list[str]:
        prompt = fill(QUESTION_ENTITY_PROMPTS[self.lang], question=question)
        answer = self.llm.chat(prompt, llm_config=LLMParameterConfig(temperature=0.0, max_tokens=128))  # type: ignore[union-attr]
        parts = re.split(r"[,，、;；\n]", answer.replace("......", ""))
        return [p.strip(" .\"'") for p in parts if p.strip(" .\"'")][:20]

    def _nearest(self, texts: list[str]) -> dict[str, float]:
        if self.node_vectors.count() == 0:
            return {}
        vectors = [self.embed_query(texts[0]), *(self.embed_documents(texts[1:]) if texts[1:] else [])]
        score_rows, id_rows = self.node_vectors.search(vectors, k=self.retrieval_top_k)
        best: dict[int, float] = {}
        for row_scores, row_ids in zip(score_rows, id_rows, strict=True):
            for score, node_id in zip(row_scores, row_ids, strict=True):
                best[node_id] = max(score, best.get(node_id, -1.0))
        nodes = self.graph.get_nodes_by_id(best)
        return {node.name: best[node_id] for node_id, node in nodes.items()}

    # -- ranking ---------------------------------------------------------------------------------

    def _chunk_documents(self, sub: Subgraph, scores: dict[str, float], top_k: int) -> list[Document]:
        chunk_scores: dict[str, float] = {}
        for node in self.graph.get_nodes(sub.nodes).values():
            for chunk in node.sources:
                chunk_scores[chunk] = chunk_scores.get(chunk, 0.0) + scores[node.name]
        for edge in sub.edges:
            for chunk in edge.sources:
                chunk_scores[chunk] = chunk_scores.get(chunk, 0.0) + _edge_score(edge.source, edge.target, scores)
        ranked = sorted((c for c in chunk_scores if chunk_scores[c] > 0), key=lambda c: (-chunk_scores[c], c))
        records = self.registry.chunks(ranked[:top_k])
        docs = []
        for chunk in ranked:
            record = records.get(chunk)
            if record is not None:
                meta = {"source": record.document, **record.metadata, "type": "chunk", "chunk_id": chunk,
                        "score": round(chunk_scores[chunk], 6)}
                docs.append(Document(page_content=record.text, metadata=meta))
        return docs

    def _triple_documents(self, sub: Subgraph, scores: dict[str, float]) -> list[Document]:
        labels = {n.name: n.label for n in self.graph.get_nodes(sub.nodes).values()}
        ranked = sorted(sub.edges, key=lambda e: (-_edge_score(e.source, e.target, scores), e.key))
        docs: dict[str, Document] = {}
        for edge in ranked:
            text = f"{labels.get(edge.source, edge.source)} {edge.relation or 'related to'} "
            text += labels.get(edge.target, edge.target)
            if text not in docs:
                meta = {"type": "relation", "chunk_ids": sorted(edge.sources),
                        "score": round(_edge_score(edge.source, edge.target, scores), 6)}
                docs[text] = Document(page_content=text, metadata=meta)
        return list(docs.values())


def _candidates(question: str) -> set[str]:
    """Normalised word n-grams of the question (and CJK character runs) that may name nodes."""
    text = question[:NGRAM_SCAN_CHARS]
    words = _WORD.findall(text)
    found: set[str] = set()
    for start in range(len(words)):
        for size in range(1, MAX_NGRAM_WORDS + 1):
            if start + size <= len(words):
                found.add(normalise_name(" ".join(words[start : start + size])))
    for word in words:
        if _CJK.search(word):
            found.update(word[i : i + n] for n in range(2, 9) for i in range(len(word) - n + 1))
    found.discard("")
    return found


def _propagate(sub: Subgraph, seeds: dict[str, float]) -> dict[str, float]:
    scores = {name: seeds.get(name, 0.0) for name in sub.nodes}
    depth = max(sub.nodes.values(), default=0)
    for hop in range(1, depth + 1):
        for edge in sub.edges:
            for near, far in ((edge.source, edge.target), (edge.target, edge.source)):
                if sub.nodes[near] == hop - 1 and sub.nodes[far] == hop:
                    scores[far] = max(scores[far], scores[near] * DECAY)
    return scores


def _edge_score(source: str, target: str, scores: dict[str, float]) -> float:
    return (scores.get(source, 0.0) + scores.get(target, 0.0)) / 2


def _within_budget(docs: list[Document], max_chars: int) -> list[Document]:
    kept: list[Document] = []
    used = 0
    for doc in docs:
        if kept and used + len(doc.page_content) > max_chars:
            break
        kept.append(doc)
        used += len(doc.page_content)
    return kept

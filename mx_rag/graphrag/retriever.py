# SPDX-License-Identifier: Apache-2.0
"""``GraphRetriever``: rank passages for a question over the knowledge graph.

Three modes (``mode=``):

* ``"graph"`` (HippoRAG 2's method): the question is linked to entity nodes (names it contains,
  score 1.0, and the ``retrieval_top_k`` nodes nearest to its embedding), each linked entity is
  joined to its synonyms (other nodes whose name embedding is at least ``synonym_threshold``
  similar), and the ``dense_top_k`` passages nearest to the question are found in the passage
  vectors. Personalized PageRank then runs over the entities reached within ``subgraph_depth``
  hops and the passages that mention them (``mx_rag.graphrag.passage_rank``), restarting at
  the linked entities (weighted by specificity) and at the dense passages (weighted by
  ``passage_weight``). Passages rank by their PageRank score. With ``fact_top_k`` > 0 the
  ``fact_top_k`` facts (``"subject relation object"`` triples, embedded: ``mx_rag.graphrag.vectors``)
  nearest to the question also link their two entities, each with the mean similarity of its
  facts (HippoRAG 2's query-to-triple linking); ``name_links=False`` drops the names found in
  the question (with ``retrieval_top_k`` and ``fact_top_k`` the linking is HippoRAG 2's alone).
* ``"mix"`` (LightRAG's mix mode, with a keyword side): the graph ranking fused by reciprocal
  rank fusion with the dense ranking and with the ``keyword_top_k`` passages that best match the
  question's words (BM25 over the chunk texts: ``mx_rag.graphrag.keywords``), the graph's ranks
  weighted ``mix_weight``, the keyword ones ``1 - mix_weight`` and the dense ones
  ``dense_weight`` times that, like the default ``HybridRetriever`` (``keyword_top_k=0``: graph
  and dense only). The dense ranking fused is the ``max(dense_top_k, keyword_top_k)`` nearest
  passages; the walk restarts at the first ``dense_top_k``. Then the second hop
  (``mx_rag.graphrag.second_hop``): the question's words that the best fused passage lacks and
  the entities it names are searched by BM25, and those hits are fused in as a fourth ranking
  weighted ``hop_weight`` times the keyword one (0: no second hop).
* ``"local"`` (the earlier behaviour): link, expand ``subgraph_depth`` hops, score reached
  nodes by ``DECAY ** hops``; chunks score the sum of the nodes and edges they support (or,
  with ``use_text=False``, ``"u relation v"`` triples rank by the mean score of their ends).

In ``graph`` and ``mix``, the entities named by the first ``subject_links`` passages are then
followed to the passages about them (``mx_rag.retrievers.subject_links``), which come next.
Then optional reranking, ``reranker_top_k`` and the ``max_context_chars`` budget.
``explain(question)`` returns the entities and relations behind the passages.

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

from mx_rag.errors import ParameterError
from mx_rag.graphrag.explain import explanation
from mx_rag.graphrag.graph_store import GraphStore, Subgraph
from mx_rag.graphrag.keywords import KeywordIndex
from mx_rag.graphrag.merge import normalise_name
from mx_rag.graphrag.passage_rank import PassageRanking, WalkSettings, rank_passages
from mx_rag.graphrag.prompts import QUESTION_ENTITY_PROMPTS, fill
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.graphrag.second_hop import rrf_scores, second_hop
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.reranker.reranker import Reranker
from mx_rag.retrievers.call_settings import CallSettings, CallSettingsRetriever, resolve_call_settings
from mx_rag.retrievers.subject_links import follow_subjects, opens_with
from mx_rag.storage.vectorstore.vectorstore import VectorStore
from mx_rag.utils.checks import check_int, check_str
from mx_rag.utils.common import TEXT_MAX_LEN, Lang

__all__ = ["DECAY", "MODES", "GraphRetriever"]

DECAY = 0.5
MODES = ("graph", "mix", "local")
MAX_CONTEXTS = 1000  # the range of reranker_top_k (GraphRAGPipeline.as_retriever), and of a call's k
MAX_NGRAM_WORDS = 6
NGRAM_SCAN_CHARS = 2000
SYNONYM_SEEDS = 8  # linked entities whose synonyms are looked up
SYNONYM_K = 5  # nearest names looked at per linked entity
ENTITIES_PER_DOCUMENT = 8  # metadata["entities"] of a returned passage
SUBJECT_MAX_SOURCES = 50  # entities mentioned by more chunks are not followed to their subject chunks
_WORD = re.compile(r"[\w'’.\-]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_POSSESSIVE = re.compile(r"['’]s?$")


class GraphRetriever(CallSettingsRetriever):
    """A LangChain retriever over a graph built by ``GraphRAGPipeline`` (make it with
    ``pipeline.as_retriever(...)``; the pipeline documents every field).

    ``invoke(question)`` returns ``Document``s, best first: chunk texts
    (``metadata["type"] == "chunk"``, with ``source``, ``chunk_id``, ``score`` and ``entities``,
    the labels of the graph entities the passage mentions, most relevant first) or, with
    ``use_text=False``, relation triples (``"relation"``, with ``chunk_ids`` and ``score``).

    ``invoke(question, k=n)`` or ``invoke(question, reranker_top_k=n)`` keeps at most ``n``
    contexts, in [1, 1000], for that call (in place of the constructor's ``reranker_top_k``).
    ``explain(question)`` tells which entities and relations the retrieval used.

    Example:
        >>> retriever = pipeline.as_retriever(mode="mix", reranker_top_k=5)
        >>> [d.metadata["source"] for d in retriever.invoke("Who founded Acme?")]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    graph: GraphStore
    node_vectors: VectorStore
    registry: ChunkRegistry
    embed_query: Callable[[str], list[float]]
    embed_documents: Callable[[list[str]], list[list[float]]]
    passage_vectors: VectorStore | None = None
    llm: Any = None  # a ChatLLM (chat() is all it needs), as GraphRAGPipeline checked it
    reranker: Reranker | None = None
    lang: Lang = Lang.EN
    mode: str = "mix"
    use_text: bool = True
    use_llm_entities: bool = False
    retrieval_top_k: int = 3
    reranker_top_k: int = 20
    subgraph_depth: int = 1
    similarity_tail_threshold: float = 0.0
    max_nodes: int = 200
    max_context_chars: int = 20_000
    dense_top_k: int = 20
    dense_expand: int = 5
    passage_weight: float = 1.0
    damping: float = 0.5
    synonym_threshold: float = 0.9
    fact_vectors: VectorStore | None = None
    fact_ends: Callable[[list[int]], Mapping[int, tuple[str, str]]] | None = None
    fact_top_k: int = 0
    name_links: bool = True
    mix_weight: float = 0.75
    dense_weight: float = 4.0
    hop_weight: float = 10.0
    keyword_index: KeywordIndex | None = None
    keyword_top_k: int = 50
    subject_links: int = 2
    concepts: Any = None  # a ConceptIndex (GraphRAGPipeline with conceptualize=True)

    @classmethod
    def from_embeddings(cls, embedding: Embeddings, **fields: Any) -> GraphRetriever:
        return cls(embed_query=embedding.embed_query, embed_documents=embedding.embed_documents, **fields)

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        """``k`` (contexts kept) is ``reranker_top_k`` unless the call gives ``k`` or
        ``reranker_top_k`` (the constructor's name for it; not both)."""
        given = dict(kwargs)
        if "reranker_top_k" in given:
            if "k" in given:
                raise ParameterError("give k or reranker_top_k for a call, not both: they are the same count")
            given["k"] = check_int("reranker_top_k", given.pop("reranker_top_k"), 1, MAX_CONTEXTS)
        defaults = CallSettings(k=self.reranker_top_k)
        return resolve_call_settings(type(self).__name__, given, defaults, ("k",), max_k=MAX_CONTEXTS)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        top_k = self._call_settings(kwargs).k
        return self._retrieve(query, top_k)[0]

    def explain(self, question: str, k: int | None = None) -> dict[str, Any]:
        """What the retrieval of ``question`` used: the passages it returns, the entities (nodes)
        and the relations (edges) behind them, and which returned passages mention each entity.

        Returns:
            a JSON-ready dict (see ``mx_rag.graphrag.explain.explanation``) with ``"mode"``,
            ``"documents"`` (``chunk_id``, ``source``, ``score``, ``text``), ``"nodes"`` (``name``,
            ``label``, ``type``, ``score``, ``seed``, ``chunk_ids``: the returned passages that
            mention it) and ``"edges"`` (``source``, ``target``, ``relation``, ``kind``
            ``"relation"`` or ``"synonym"``, ``chunk_ids``).

        Example:
            >>> view = retriever.explain("Who founded Acme?")
            >>> [(n["label"], n["chunk_ids"]) for n in view["nodes"]][:3]
        """
        docs, ranking = self._retrieve(question, self._call_settings({} if k is None else {"k": k}).k)
        return explanation(self.mode, docs, ranking)

    def _retrieve(self, query: str, top_k: int) -> tuple[list[Document], PassageRanking | None]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        if self.mode == "local" or not self.use_text:
            docs, ranking = self._local(query, top_k)
        else:
            ranking = self._rank(query)
            docs = self._ranked_documents(ranking, top_k)
        if self.reranker is not None and docs:
            docs = self.reranker.rerank_top_k(docs, self.reranker.rerank(query, [d.page_content for d in docs]))
        return _within_budget(docs, self.max_context_chars), ranking

    # -- graph and mix ---------------------------------------------------------------------------

    def _rank(self, query: str) -> PassageRanking:
        vector = self.embed_query(query)
        fused_k = max(self.dense_top_k, self.keyword_top_k) if self.mode == "mix" else self.dense_top_k
        fused_dense = self._dense(vector, fused_k)
        dense = dict(list(fused_dense.items())[: self.dense_top_k])  # the walk's restart passages
        seeds = self.link(query, vector) if self.name_links or self.retrieval_top_k else {}
        for name, score in self._fact_seeds(vector).items():
            seeds[name] = max(score, seeds.get(name, 0.0))
        settings = WalkSettings(self.subgraph_depth, self.max_nodes, self.damping, self.passage_weight,
                                self.dense_expand)  # fmt: skip
        ranking = rank_passages(self.graph, self.registry.entities_of, seeds, dense, self._synonyms(seeds), settings)
        chunks = ranking.chunks
        if self.mode == "mix":
            keyword_weight = 1.0 - self.mix_weight
            lists = [(list(ranking.chunks), self.mix_weight), (list(fused_dense), keyword_weight * self.dense_weight),
                     (self._keywords(query), keyword_weight)]  # fmt: skip
            chunks = rrf_scores(lists)
            if self.hop_weight and chunks:
                hop = second_hop(query, next(iter(chunks)), self.registry, self.graph, self.keyword_index)
                chunks = rrf_scores([*lists, (hop, keyword_weight * self.hop_weight)])
        if self.subject_links:
            order = follow_subjects(list(chunks), self.subject_links, self.registry.entities_of, self._subjects)
            chunks = _non_increasing(order, chunks)
        return PassageRanking(chunks, ranking.entities, ranking.nodes, ranking.seeds, ranking.edges)

    def _subjects(self, names: set[str]) -> dict[str, list[str]]:
        """Entity name -> the chunks that open with it, among the chunks that mention it (names
        mentioned by more than ``SUBJECT_MAX_SOURCES`` chunks are too common to point anywhere)."""
        nodes = {n: node for n, node in self.graph.get_nodes(names).items()
                 if len(node.sources) <= SUBJECT_MAX_SOURCES}  # fmt: skip
        records = self.registry.chunks({c for node in nodes.values() for c in node.sources})
        return {name: [c for c in node.sources if c in records and opens_with(records[c].text, name)]
                for name, node in nodes.items()}  # fmt: skip

    def _dense(self, vector: list[float], top_k: int) -> dict[str, float]:
        """Chunk id -> similarity of the ``top_k`` passages nearest to the question, best first."""
        if self.passage_vectors is None or self.passage_vectors.count() == 0:
            return {}
        scores, ids = self.passage_vectors.search([vector], k=top_k)
        chunks = self.registry.by_number(ids[0])
        return {chunks[n]: float(s) for s, n in zip(scores[0], ids[0], strict=True) if n in chunks}

    def _keywords(self, query: str) -> list[str]:
        """Chunk ids of the ``keyword_top_k`` passages that best match the question's words."""
        if self.keyword_index is None or not self.keyword_top_k:
            return []
        numbers = self.keyword_index.search(query, self.keyword_top_k)
        chunks = self.registry.by_number(numbers)
        return [chunks[n] for n in numbers if n in chunks]

    def _fact_seeds(self, vector: list[float]) -> dict[str, float]:
        """Entity name -> the mean similarity of the ``fact_top_k`` facts nearest to the question
        that it is an end of (HippoRAG 2's query-to-triple linking)."""
        if not self.fact_top_k or self.fact_vectors is None or self.fact_ends is None:
            return {}
        if self.fact_vectors.count() == 0:
            return {}
        scores, ids = self.fact_vectors.search([vector], k=self.fact_top_k)
        ends = self.fact_ends(list(ids[0]))
        found: dict[str, list[float]] = {}
        for score, key in zip(scores[0], ids[0], strict=True):
            for name in ends.get(key, ()):
                found.setdefault(name, []).append(float(score))
        return {name: sum(values) / len(values) for name, values in found.items() if sum(values) > 0}

    def _synonyms(self, seeds: Mapping[str, float]) -> list[tuple[str, str, float]]:
        """``(linked entity, other entity, similarity)`` for the best linked entities' near names."""
        if self.synonym_threshold >= 1.0 or not seeds or self.node_vectors.count() == 0:
            return []
        best = sorted(seeds, key=lambda n: (-seeds[n], n))[:SYNONYM_SEEDS]
        nodes = self.graph.get_nodes(best)
        names = [n for n in best if n in nodes]
        if not names:
            return []
        vectors = self.embed_documents([nodes[n].label for n in names])
        score_rows, id_rows = self.node_vectors.search(vectors, k=SYNONYM_K + 1)
        found = self.graph.get_nodes_by_id({i for row in id_rows for i in row})
        pairs = []
        for name, row_scores, row_ids in zip(names, score_rows, id_rows, strict=True):
            for score, node_id in zip(row_scores, row_ids, strict=True):
                other = found.get(node_id)
                if other is not None and other.name != name and score >= self.synonym_threshold:
                    pairs.append((name, other.name, float(score)))
        return pairs

    def _ranked_documents(self, ranking: PassageRanking, top_k: int) -> list[Document]:
        ranked = list(ranking.chunks)[:top_k]
        records = self.registry.chunks(ranked)
        entities = self.registry.entities_of(ranked)
        docs = []
        for chunk in ranked:
            record = records.get(chunk)
            if record is None:
                continue
            mentioned = sorted((n for n in entities.get(chunk, []) if n in ranking.entities),
                               key=lambda n: (-ranking.entities[n], n))[:ENTITIES_PER_DOCUMENT]  # fmt: skip
            meta = {"source": record.document, **record.metadata, "type": "chunk", "chunk_id": chunk,
                    "score": round(ranking.chunks[chunk], 6),
                    "entities": [ranking.nodes[n].label for n in mentioned]}  # fmt: skip
            docs.append(Document(page_content=record.text, metadata=meta))
        return docs

    # -- linking ---------------------------------------------------------------------------------

    def link(self, question: str, vector: list[float] | None = None) -> dict[str, float]:
        """Node name -> link score for ``question``: names it contains (1.0), the nodes nearest
        to its embedding (``vector`` when given) and, with ``use_llm_entities``, to the entities
        the LLM names in it; with concepts (``conceptualize=True``), also the nodes that have the
        concepts nearest to those (``ConceptIndex.link``)."""
        seeds: dict[str, float] = {}
        if self.name_links or self.mode == "local":
            seeds = dict.fromkeys(self.graph.get_nodes(_candidates(question)), 1.0)
        texts = [question]
        if self.use_llm_entities and self.llm is not None:
            entities = self._question_entities(question)
            seeds.update(dict.fromkeys(self.graph.get_nodes(normalise_name(e) for e in entities), 1.0))
            texts += entities
        vectors = self._vectors(texts, vector) if self.retrieval_top_k else []
        near = self._nearest(vectors)
        if self.concepts is not None:
            for name, score in self.concepts.link(vectors, self.retrieval_top_k).items():
                near[name] = max(score, near.get(name, -1.0))
        for name, score in near.items():
            if score > 0.0 and score >= self.similarity_tail_threshold and score > seeds.get(name, -1.0):
                seeds[name] = score
        return seeds

    def _question_entities(self, question: str) -> list[str]:
        prompt = fill(QUESTION_ENTITY_PROMPTS[self.lang], question=question)
        answer = self.llm.chat(prompt, llm_config=LLMParameterConfig(temperature=0.0, max_tokens=128))
        parts = re.split(r"[,，、;；\n]", answer.replace("......", ""))
        return [p.strip(" .\"'") for p in parts if p.strip(" .\"'")][:20]

    def _vectors(self, texts: list[str], vector: list[float] | None = None) -> list[list[float]]:
        first = vector if vector is not None else self.embed_query(texts[0])
        return [first, *(self.embed_documents(texts[1:]) if texts[1:] else [])]

    def _nearest(self, vectors: list[list[float]]) -> dict[str, float]:
        if self.node_vectors.count() == 0 or not vectors:
            return {}
        score_rows, id_rows = self.node_vectors.search(vectors, k=self.retrieval_top_k)
        best: dict[int, float] = {}
        for row_scores, row_ids in zip(score_rows, id_rows, strict=True):
            for score, node_id in zip(row_scores, row_ids, strict=True):
                best[node_id] = max(score, best.get(node_id, -1.0))
        nodes = self.graph.get_nodes_by_id(best)
        return {node.name: best[node_id] for node_id, node in nodes.items()}

    # -- local -----------------------------------------------------------------------------------

    def _local(self, query: str, top_k: int) -> tuple[list[Document], PassageRanking | None]:
        seeds = self.link(query)
        if not seeds:
            return [], None
        best = sorted(seeds, key=lambda n: (-seeds[n], n))[: self.max_nodes]
        sub = self.graph.expand(best, self.subgraph_depth, self.max_nodes)
        scores = _propagate(sub, {n: seeds[n] for n in best})
        nodes = self.graph.get_nodes(sub.nodes)
        if not self.use_text:
            return self._triple_documents(sub, scores)[:top_k], None
        chunk_scores: dict[str, float] = {}
        for node in nodes.values():
            for chunk in node.sources:
                chunk_scores[chunk] = chunk_scores.get(chunk, 0.0) + scores[node.name]
        for edge in sub.edges:
            for chunk in edge.sources:
                chunk_scores[chunk] = chunk_scores.get(chunk, 0.0) + _edge_score(edge.source, edge.target, scores)
        ranked = sorted((c for c in chunk_scores if chunk_scores[c] > 0), key=lambda c: (-chunk_scores[c], c))
        edges = tuple((e.source, e.target, e.relation, tuple(sorted(e.sources))) for e in sub.edges)
        ranking = PassageRanking({c: chunk_scores[c] for c in ranked},
                                 dict(sorted(scores.items(), key=lambda item: (-item[1], item[0]))), nodes,
                                 {n: seeds[n] for n in best if n in nodes}, edges)  # fmt: skip
        return self._ranked_documents(ranking, top_k), ranking

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
                last = _POSSESSIVE.sub("", words[start + size - 1])  # "Krilanovich's" -> "Krilanovich"
                found.add(normalise_name(" ".join([*words[start : start + size - 1], last])))
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


def _non_increasing(order: list[str], scores: Mapping[str, float]) -> dict[str, float]:
    """Chunk id -> score in the order given: a chunk moved up takes the score of the one before it
    when its own is higher than that or it has none, so scores never rise down the list."""
    result: dict[str, float] = {}
    last = float("inf")
    for chunk in order:
        last = min(scores.get(chunk, last), last)
        result[chunk] = last
    return result


def _within_budget(docs: list[Document], max_chars: int) -> list[Document]:
    kept: list[Document] = []
    used = 0
    for doc in docs:
        if kept and used + len(doc.page_content) > max_chars:
            break
        kept.append(doc)
        used += len(doc.page_content)
    return kept

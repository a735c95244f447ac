# SPDX-License-Identifier: Apache-2.0
"""``GraphRAGPipeline``: documents -> extracted knowledge graph -> ``GraphRetriever``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.document.doc_loader_mng import LoaderMng
from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.graphrag.age_graph import resolve_age_graph
from mx_rag.graphrag.build_estimate import BuildEstimate
from mx_rag.graphrag.concepts import ConceptIndex, concept_settings
from mx_rag.graphrag.extraction import Chunk, Extraction, Extractor
from mx_rag.graphrag.graph_store import GraphStore
from mx_rag.graphrag.keywords import KeywordIndex
from mx_rag.graphrag.llm_extractor import MAX_WORKERS, LLMExtractor
from mx_rag.graphrag.merge import to_records
from mx_rag.graphrag.offline_extractor import OfflineExtractor
from mx_rag.graphrag.registry import ChangeJournal, ChunkRecord, ChunkRegistry, GraphChange, chunk_id, content_hash
from mx_rag.graphrag.retriever import GraphRetriever
from mx_rag.graphrag.retriever_options import retriever_fields
from mx_rag.graphrag.vectors import (
    FactEnds,
    passage_vectors_stale,
    sync_fact_vectors,
    sync_node_vectors,
    sync_passage_vectors,
)
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import LLMLike, chat_llm
from mx_rag.reranker.reranker import Reranker
from mx_rag.storage.vectorstore.vectorstore import VectorStore
from mx_rag.utils.checks import check_bool, check_choice, check_instance, check_int, check_pattern, fail
from mx_rag.utils.common import MAX_BATCH_SIZE, Lang
from mx_rag.utils.file_check import check_dir, check_path

__all__ = ["BuildEstimate", "GraphRAGPipeline"]

logger = logging.getLogger(__name__)

GRAPH_TYPES = ("networkx", "postgres", "opengauss")
MAX_DIM = 1024 * 1024
MAX_FILES = 100
GRAPH_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,254}"
_BUILD_KEYS = ("max_workers", "batch_size", "prompt", "llm_config", "repair_with_llm", "top_k", "threshold",
               "conceptualizer_prompts", "extractor")


class GraphRAGPipeline:
    """Build a knowledge graph from documents and retrieve passages from it.

    ``upload_files`` loads and splits documents; ``build_graph`` extracts entities and relations
    from each new chunk (with the LLM, one call per chunk; or, with no LLM, offline with spaCy
    for English and jieba for Chinese; cached by text hash), merges them into the graph, and
    embeds new node names and chunk texts; ``as_retriever`` gives a ``GraphRetriever``. Building again
    after more uploads extends the graph; ``delete_document`` removes what only one document
    supported. Files in ``work_dir``: ``<graph_name>.json`` (graph), ``<graph_name>_chunks.json``
    (chunks and extraction cache), ``<graph_name>_node_vectors.index`` (node embeddings),
    ``<graph_name>_chunk_vectors.index`` (chunk embeddings), ``<graph_name>_fact_vectors.index``
    (fact embeddings: ``mx_rag.graphrag.vectors``), and,
    while a build or deletion is changing them, ``<graph_name>_journal.json`` (the change).

    A process killed in the middle of ``build_graph`` or ``delete_document`` leaves the change in
    the journal (once its extractions are done); the next pipeline opened on ``work_dir`` (or the
    next build or deletion of this one, after an error) applies it to the stores that miss it, so
    the graph, the chunk registry and the node vectors always agree. A build killed earlier, while
    extracting, left nothing in the graph; its extractions so far are cached.

    Args:
        work_dir: an existing directory for the graph's files.
        llm: a ``Text2TextLLM`` (or any ``ChatLLM``, or a LangChain model) that extracts
            entities and relations; None (and no ``extractor``) extracts offline with
            ``OfflineExtractor`` (spaCy / jieba, chosen per chunk by its language), so a graph
            builds with no LLM at all.
        embedding_model: a LangChain ``Embeddings`` for node names and questions.
        dim: the embedding dimension, 1 to 1 MiB.
        rerank_model: optional ``Reranker`` applied to the retrieved contexts.
        graph_type: ``"networkx"`` (a file in ``work_dir``) or ``"postgres"`` (a
            ``PostgresGraphStore``; pass ``postgres_url=``); ``"opengauss"`` is ``"postgres"``.
            Chunks and node vectors stay in ``work_dir`` either way.
        graph_name: a Python identifier of 1 to 255 characters prefixing the files (and naming
            the graph in PostgreSQL).
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to the JSON files written / read.

    Keyword Args:
        postgres_url: SQLAlchemy URL of the database for ``graph_type="postgres"``.
        extractor: an ``Extractor`` used instead of ``LLMExtractor``.
        graph_store: a ``GraphStore`` used instead of the one ``graph_type`` names.
        age_graph: the original's openGauss graph argument (``mx_rag.graphrag.age_graph``): a
            ``GraphStore`` is used; ``graph_type="opengauss"`` is PostgreSQL with ``postgres_url``.
        node_vector_store: a ``VectorStore`` for node embeddings (default: a ``MindFAISS`` file).
        passage_vector_store: a ``VectorStore`` for chunk embeddings (default: a ``MindFAISS``
            file).
        fact_vector_store: a ``VectorStore`` for fact embeddings (default: a ``MindFAISS`` file).
        devs: ``[device id]`` of the default ``MindFAISS`` (GPU where faiss has one). Default [0].
        conceptualize: also ask the LLM for the concepts of every entity, event and relation at
            each build, embed and cluster them (``mx_rag.graphrag.concepts``), and link the
            entities whose concepts are near the question at retrieval. Default False.
        concept_vector_store: a ``VectorStore`` for the concept embeddings (default: a
            ``MindFAISS`` file ``<graph_name>_concept_vectors.index``); ignored, with a warning,
            without ``conceptualize``.

    Other keyword arguments raise ``ParameterError``.

    Example:
        >>> pipeline = GraphRAGPipeline("/data/graph", llm, TextEmbedding("all-MiniLM-L6-v2"), 384)
        >>> pipeline.upload_files(["/data/docs/a.txt"], LoaderMng.with_defaults())
        >>> pipeline.estimate_build().llm_calls
        12
        >>> pipeline.build_graph(Lang.EN, max_workers=8)
        >>> pipeline.retrieve_graph("Who founded Acme?")
        >>> offline = GraphRAGPipeline("/data/graph2", None, TextEmbedding(), 384)  # spaCy / jieba
    """

    def __init__(
        self,
        work_dir: str | Path,
        llm: LLMLike | None,
        embedding_model: Embeddings,
        dim: int,
        rerank_model: Reranker | None = None,
        graph_type: str = "networkx",
        graph_name: str = "graph",
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
        *,
        extractor: Extractor | None = None,
        graph_store: GraphStore | None = None,
        node_vector_store: VectorStore | None = None,
        **kwargs: Any,
    ) -> None:
        self._work_dir = check_dir("work_dir", work_dir)
        self._llm = None if llm is None else chat_llm("llm", llm, stream=False)
        self._embedding = check_instance("embedding_model", embedding_model, Embeddings)
        self._dim = check_int("dim", dim, 1, MAX_DIM)
        self._reranker = None if rerank_model is None else check_instance("rerank_model", rerank_model, Reranker)
        graph_type = check_choice("graph_type", graph_type, GRAPH_TYPES)
        self._name = check_pattern("graph_name", graph_name, GRAPH_NAME_PATTERN)
        for name, fn in (("encrypt_fn", encrypt_fn), ("decrypt_fn", decrypt_fn)):
            if fn is not None and not callable(fn):
                raise fail(name, fn, "None or a callable str -> str")
        if extractor is not None and not isinstance(extractor, Extractor):
            raise fail("extractor", extractor, "an Extractor (an object with extract(chunks))")
        self._extractor = extractor if extractor is not None or self._llm is not None else OfflineExtractor()
        devs = kwargs.pop("devs", [0])
        postgres_url = kwargs.pop("postgres_url", None)
        graph_type, graph_store = resolve_age_graph(graph_type, kwargs.pop("age_graph", None), graph_store,
                                                    postgres_url)
        passage_store = kwargs.pop("passage_vector_store", None)
        fact_store = kwargs.pop("fact_vector_store", None)
        conceptualize = check_bool("conceptualize", kwargs.pop("conceptualize", False))
        concept_store = kwargs.pop("concept_vector_store", None)
        if kwargs:
            raise ParameterError(f"unknown keyword arguments {sorted(kwargs)}; accepted: extractor, graph_store, "
                                 "age_graph, node_vector_store, passage_vector_store, fact_vector_store, devs, "
                                 "postgres_url, conceptualize, concept_vector_store")
        if conceptualize and self._llm is None:
            raise ParameterError("conceptualize=True needs an llm (the concepts are asked of it); llm is None")
        if concept_store is not None and not conceptualize:
            logger.warning("concept_vector_store is ignored without conceptualize=True")
        self._graph = self._open_graph(graph_type, graph_store, postgres_url, encrypt_fn, decrypt_fn)
        self._registry = ChunkRegistry(self._file("_chunks.json"), encrypt_fn, decrypt_fn)
        self._vectors = self._open_vectors("node_vector_store", node_vector_store, devs, "_node_vectors.index")
        self._passages = self._open_vectors("passage_vector_store", passage_store, devs, "_chunk_vectors.index")
        self._facts = self._open_vectors("fact_vector_store", fact_store, devs, "_fact_vectors.index")
        self._concepts = None if not conceptualize else ConceptIndex(
            self._file("_concepts.json"), self._file("_synset.json"),
            self._open_vectors("concept_vector_store", concept_store, devs, "_concept_vectors.index"),
            encrypt_fn, decrypt_fn)  # fmt: skip
        self._fact_ends: FactEnds | None = None  # fact key -> (source, target), once synced
        self._keywords: KeywordIndex | None = None  # in memory, filled when a mix retriever first needs it
        self._journal = ChangeJournal(self._file("_journal.json"), encrypt_fn, decrypt_fn)
        self._pending: dict[str, list[ChunkRecord]] = {}
        self._lock = threading.RLock()
        self._recover()

    # -- construction ----------------------------------------------------------------------------

    def _file(self, suffix: str) -> Path:
        return self._work_dir / f"{self._name}{suffix}"

    def _open_graph(
        self, graph_type: str, store: GraphStore | None, postgres_url: Any, encrypt_fn: Any, decrypt_fn: Any
    ) -> GraphStore:
        if store is not None:
            return check_instance("graph_store", store, GraphStore)
        if graph_type == "postgres":
            if postgres_url is None:
                raise ParameterError("graph_type 'postgres' needs postgres_url= (or graph_store=)")
            from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

            return PostgresGraphStore(postgres_url, self._name)
        from mx_rag.graphrag.networkx_store import NetworkxGraphStore

        return NetworkxGraphStore(self._file(".json"), encrypt_fn, decrypt_fn)

    def _open_vectors(self, name: str, store: VectorStore | None, devs: Any, suffix: str) -> VectorStore:
        if store is not None:
            return check_instance(name, store, VectorStore)
        from mx_rag.storage.vectorstore.faiss_npu import MindFAISS

        return MindFAISS(x_dim=self._dim, devs=devs, load_local_index=self._file(suffix), metric_type="COSINE",
                         auto_save=False)  # fmt: skip

    @property
    def graph(self) -> GraphStore:
        """The graph store (read it; write through the pipeline)."""
        return self._graph

    @property
    def concepts(self) -> ConceptIndex | None:
        """The concepts of the graph with ``conceptualize=True`` (read them), else None."""
        return self._concepts

    # -- upload ----------------------------------------------------------------------------------

    def upload_files(self, file_list: Sequence[str | Path], loader_mng: LoaderMng) -> None:
        """Load and split 1 to 100 files for the next ``build_graph``.

        A file uploaded again replaces its earlier version at the next build (unchanged chunks
        are not extracted again). A file that cannot be loaded raises (``DocumentError``,
        ``UnsupportedFileTypeError``, ``ParameterError``) and nothing of this call is kept.
        """
        check_instance("loader_mng", loader_mng, LoaderMng)
        if not isinstance(file_list, (list, tuple)) or not 1 <= len(file_list) <= MAX_FILES:
            raise fail("file_list", file_list, f"a list of 1 to {MAX_FILES} file paths")
        staged: dict[str, list[ChunkRecord]] = {}
        for path in file_list:
            document = str(check_path("file_list item", path))
            staged[document] = _records(document, loader_mng.load_and_split(document))
        with self._lock:
            self._pending.update(staged)

    def add_chunks(self, path: str | Path, chunks: Sequence[Any]) -> None:
        """Stage one document's chunks, already loaded and split (``Document``s), for the next
        ``build_graph``, as ``upload_files`` stages a file it parsed (ingestion parses once)."""
        document = str(check_path("path", path))
        records = _records(document, chunks)
        with self._lock:
            self._pending[document] = records

    def pending(self) -> list[str]:
        """The documents staged for the next ``build_graph``."""
        with self._lock:
            return list(self._pending)

    # -- build -----------------------------------------------------------------------------------

    def build_graph(self, lang: Lang = Lang.EN, **kwargs: Any) -> None:
        """Extract the uploaded documents into the graph and embed the new nodes.

        Keyword Args:
            max_workers: concurrent LLM calls, 1 to 512. Default 5.
            batch_size: chunks extracted (and node names embedded) per batch, 1 to 1024; the
                extraction cache is saved after each batch, so a failed build resumes. Default 32.
            prompt: extraction prompt containing ``{text}`` (default: built in, per ``lang``).
            llm_config: ``LLMParameterConfig`` of extraction calls (default temperature 0).
            repair_with_llm: one more LLM call per unreadable answer. Default False.
            top_k: with ``conceptualize``: nearest concepts a new concept is joined to, 1 to 100.
                Default 5.
            threshold: with ``conceptualize``: similarity above which concepts are joined, [0, 1].
                Default 0.3.
            conceptualizer_prompts: with ``conceptualize``: a dict of the prompts asking for the
                concepts of an ``"entity"`` (placeholders ``[ENTITY]``, ``[CONTEXT]``), an
                ``"event"`` (``[EVENT]``) and a ``"relation"`` (``[RELATION]``), each 1 to 1 MiB
                characters. Default: the built-in ones of ``lang``.
            extractor: an ``Extractor`` for this build only, instead of the pipeline's (one
                that spreads the work over machines: ``mx_rag.distributed.RayExtractor``).

        Raises:
            KnowledgeError: nothing was uploaded since the last build.
            RemoteError: an LLM call failed (chunks extracted so far stay cached).
        """
        batch_size = check_int("batch_size", kwargs.get("batch_size", 32), 1, MAX_BATCH_SIZE)
        extractor = self._build_extractor(lang, kwargs)
        concepts = concept_settings(kwargs, lang, check_int("max_workers", kwargs.get("max_workers", 5), 1,
                                                             MAX_WORKERS))
        with self._lock:
            pending = dict(self._pending)
            if not pending:
                raise KnowledgeError("no documents to build: call upload_files first")
            self._recover()
            changed = self._changed(pending)
            self._extract_missing([c for chunks in changed.values() for c in chunks], extractor, batch_size)
            if changed:
                self._apply(self._build_change(changed), batch_size)
            else:
                self._sync_vectors(batch_size)
            for document in pending:
                self._pending.pop(document, None)
            if self._concepts is not None:
                assert self._llm is not None
                llm, config = self._llm, LLMParameterConfig(temperature=0.0, max_tokens=128)
                self._concepts.conceptualize(self._graph, lambda prompt: llm.chat(prompt, llm_config=config), concepts)
                self._concepts.sync(self._graph, self._embedding, batch_size, concepts.top_k, concepts.threshold)
        logger.info("graph %s: %d nodes, %d edges", self._name, self._graph.count_nodes(), self._graph.count_edges())

    def estimate_build(self, lang: Lang = Lang.EN, **kwargs: Any) -> BuildEstimate:
        """What ``build_graph(lang, **kwargs)`` would cost now, without calling any model."""
        extractor = self._build_extractor(lang, kwargs)
        with self._lock:
            changed = self._changed(dict(self._pending))
        chunks = [c for records in changed.values() for c in records]
        todo = self._uncached(chunks)
        calls = prompt = completion = 0
        if isinstance(extractor, LLMExtractor):
            calls, prompt, completion = extractor.estimate([Chunk(c.id, c.text) for c in todo])
        return BuildEstimate(len(changed), len(chunks), len(todo), calls, prompt, completion)

    def _build_extractor(self, lang: Any, kwargs: dict[str, Any]) -> Extractor:
        check_instance("lang", lang, Lang)
        unknown = set(kwargs) - set(_BUILD_KEYS)
        if unknown:
            raise ParameterError(f"unknown build_graph arguments {sorted(unknown)}; accepted: {list(_BUILD_KEYS)}")
        if kwargs.get("extractor") is not None:
            return check_instance("extractor", kwargs["extractor"], Extractor)
        if self._extractor is not None:
            return self._extractor
        assert self._llm is not None
        return LLMExtractor(
            self._llm, lang, max_workers=check_int("max_workers", kwargs.get("max_workers", 5), 1, MAX_WORKERS),
            prompt=kwargs.get("prompt"), llm_config=kwargs.get("llm_config"),
            repair_with_llm=kwargs.get("repair_with_llm", False),
        )

    def _changed(self, pending: dict[str, list[ChunkRecord]]) -> dict[str, list[ChunkRecord]]:
        """The pending documents that are new or whose chunks differ from the built version."""
        built = set(self._registry.documents())
        return {d: chunks for d, chunks in pending.items()
                if d not in built or self._registry.chunk_ids(d) != [c.id for c in chunks]}

    def _uncached(self, chunks: list[ChunkRecord]) -> list[ChunkRecord]:
        todo: dict[str, ChunkRecord] = {}
        for chunk in chunks:
            if chunk.hash not in todo and self._registry.cached(chunk.hash) is None:
                todo[chunk.hash] = chunk
        return list(todo.values())

    def _extract_missing(self, chunks: list[ChunkRecord], extractor: Extractor, batch_size: int) -> None:
        todo = self._uncached(chunks)
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            results = extractor.extract([Chunk(c.id, c.text) for c in batch])
            if not isinstance(results, list) or len(results) != len(batch):
                raise ParameterError(f"extractor.extract must return a list of {len(batch)} Extraction "
                                     f"objects (one per chunk), got {type(results).__name__} {results!r:.80}")
            for result in results:
                check_instance("extractor result", result, Extraction)
            self._registry.cache({c.hash: r for c, r in zip(batch, results, strict=True)})
            self._registry.save()
            logger.info("extracted %d of %d new chunks", min(start + batch_size, len(todo)), len(todo))

    def _build_change(self, changed: dict[str, list[ChunkRecord]]) -> GraphChange:
        built = set(self._registry.documents())
        extractions = {c.hash: self._registry.cached(c.hash) or Extraction() for cs in changed.values() for c in cs}
        return GraphChange(put=changed, drop={d: self._registry.chunk_ids(d) for d in changed if d in built},
                           extractions=extractions)  # fmt: skip

    # -- changes ---------------------------------------------------------------------------------

    def _apply(self, change: GraphChange, batch_size: int) -> list[str]:
        """Journal ``change``, then apply it to the graph, the registry and the node vectors; return
        the names of the nodes it deleted.

        Every step can run again over its own result, so a journal left by a killed process is
        applied again from the start (``_recover``). An error inside the graph batch (rolled back:
        no store has any of the change) removes the journal; a later error keeps it for the next
        attempt.
        """
        self._journal.write(change)
        pairs = [(c.id, change.extractions.get(c.hash) or Extraction()) for cs in change.put.values() for c in cs]
        nodes, edges = to_records(pairs)
        written = False
        try:
            with self._graph.batch():
                removed = self._graph.remove_sources(change.stale_chunks())
                self._graph.upsert_nodes(nodes)
                self._graph.upsert_edges(edges)
                written = True
        except BaseException:
            if not written:
                self._journal.clear()
            raise
        self._registry.cache(dict(change.extractions))
        self._registry.replace_documents(change.put, change.removed)
        self._registry.save()
        self._sync_vectors(batch_size)
        self._journal.clear()
        return removed

    def _recover(self) -> None:
        """Finish the change a killed process (or a failed call) left in the journal."""
        change = self._journal.read()
        if change is not None:
            logger.warning("graph %s: finishing an interrupted change (%d documents added, %d removed) "
                           "recorded in %s", self._name, len(change.put), len(change.removed),
                           self._journal.path)  # fmt: skip
            self._apply(change, MAX_BATCH_SIZE)

    def _sync_vectors(self, batch_size: int) -> None:
        """Embed nodes and chunks that have no vector yet; drop vectors of deleted ones."""
        sync_node_vectors(self._graph, self._vectors, self._embedding, batch_size)
        sync_passage_vectors(self._registry, self._passages, self._embedding, batch_size)
        if self._fact_ends is not None or self._facts.count():  # fact vectors exist once asked for
            self._fact_ends = sync_fact_vectors(self._graph, self._facts, self._embedding, batch_size)
        if self._keywords is not None:
            self._keywords.sync(self._registry)
        if self._concepts is not None:  # drops the concepts of deleted nodes
            self._concepts.sync(self._graph, self._embedding, batch_size)

    # -- delete ----------------------------------------------------------------------------------

    def documents(self) -> list[str]:
        """The documents built into the graph (resolved paths)."""
        return self._registry.documents()

    def delete_document(self, path: str | Path) -> list[str]:
        """Remove a document: its chunks, and every node, edge, description and node vector only
        it supported. The file itself need not exist any more.

        Returns:
            the names of the deleted nodes, sorted.

        Raises:
            KnowledgeError: the document is neither built into the graph nor uploaded.
        """
        document = str(check_path("path", path))
        with self._lock:
            self._recover()
            staged = self._pending.pop(document, None)
            ids = self._registry.chunk_ids(document)
            if not ids and document not in self._registry.documents():
                if staged is not None:
                    return []
                raise KnowledgeError(f"document {document!r} is not in graph {self._name!r}")
            return self._apply(GraphChange(drop={document: ids}), MAX_BATCH_SIZE)

    # -- retrieval -------------------------------------------------------------------------------

    def as_retriever(self, **kwargs: Any) -> GraphRetriever:
        """A ``GraphRetriever`` over this graph (``mx_rag.graphrag.retriever`` explains the modes).

        Keyword Args:
            mode: ``"mix"`` (default: the graph ranking fused with dense and keyword retrieval),
                ``"graph"`` (Personalized PageRank over entities and passages, seeded by the linked entities
                and the dense passage scores) or ``"local"`` (the earlier neighbourhood scoring).
            reranker_top_k: contexts kept, 1 to 1000. Default 20.
            retrieval_top_k: nearest nodes linked per question (and entity), 1 to 1000. Default
                3 (``local``: 40).
            subgraph_depth: hops of expansion, 1 to 5. Default 1 (``local``: 2).
            max_nodes: entity nodes reached at most, 1 to 100000. Default 200.
            dense_top_k: passages scored by dense retrieval, 1 to 1000. Default 20.
            dense_expand: best dense passages whose entities start the expansion, 0 to 1000.
                Default 5.
            passage_weight: restart weight of the dense passages against the linked entities,
                0 to 1000. Default 1.0 (HippoRAG 2 uses 0.05; 1.0 measured best here).
            damping: probability that the walk follows an edge, [0, 0.99]. Default 0.5.
            synonym_threshold: name-embedding similarity that makes two entities synonyms,
                [0, 1]; 1 turns synonyms off. Default 0.9 (``mix``: 1, off).
            fact_top_k: nearest facts whose entities are linked, 0 to 1000; 0 (default) links by
                entity names only. The first retriever with facts embeds the graph's facts
                (about 3 per passage), and later builds and deletions keep them in step.
            name_links: link the entity names found in the question. Default True.
            mix_weight: weight of the graph ranks in ``mix``, [0, 1]; the keyword ranks weigh
                ``1 - mix_weight``. Default 0.75.
            dense_weight: ``mix``: the dense ranks weigh ``dense_weight`` times the keyword
                ones, [0, 100] (as in ``HybridRetriever``). Default 4.0. The dense ranking fused
                is the ``max(dense_top_k, keyword_top_k)`` passages nearest to the question.
            hop_weight: ``mix``: the second hop's ranks (a keyword search for the question's
                words that the best passage lacks and the entities it names:
                ``mx_rag.graphrag.second_hop``) weigh ``hop_weight`` times the keyword ones,
                [0, 1000]; 0 turns the second hop off. Default 10.0.
            keyword_top_k: ``mix``: passages taken from the keyword (BM25) search of the question
                and fused with the graph and dense rankings, 0 to 1000; 0 fuses graph and dense
                only. Default 50. The first ``mix`` retriever indexes the chunk texts in memory,
                and later builds and deletions keep that index in step.
            subject_links: ``graph``/``mix``: the first passages of the ranking whose named
                entities are followed to the passages about them (that open with their name),
                which then come next, 0 to 1000; 0 turns it off. Default 2 for ``mix``, 1 for
                ``graph`` (``mx_rag.retrievers.subject_links``).
            use_text: return chunk texts (True, default) or ``"u relation v"`` triples (the
                ``local`` ranking).
            similarity_tail_threshold: minimum similarity of a linked node, [0, 1]. Default 0.0.
            use_llm_entities: also ask the LLM for the question's entities. Default False.
            max_context_chars: total characters of the contexts (at least one is kept), 1 to
                1,000,000. Default 20000.
            lang: ``Lang`` of the question-entity prompt. Default ``Lang.EN``.
            batch_size: accepted for compatibility (1 to 1024); unused.
        """
        fields = retriever_fields(kwargs, self._llm is not None)
        if fields["mode"] != "local":
            with self._lock:
                if passage_vectors_stale(self._registry, self._passages):
                    sync_passage_vectors(self._registry, self._passages, self._embedding, MAX_BATCH_SIZE)
                if self._fact_ends is None and fields["fact_top_k"]:  # opened, not built: read the facts
                    self._fact_ends = sync_fact_vectors(self._graph, self._facts, self._embedding, MAX_BATCH_SIZE)
                keywords = fields["keyword_top_k"] or fields["hop_weight"]
                if self._keywords is None and fields["mode"] == "mix" and keywords:
                    self._keywords = KeywordIndex()
                    self._keywords.sync(self._registry)
        return GraphRetriever.from_embeddings(
            self._embedding, graph=self._graph, node_vectors=self._vectors, passage_vectors=self._passages,
            registry=self._registry, llm=self._llm, reranker=self._reranker, fact_vectors=self._facts,
            fact_ends=self._fact_lookup, keyword_index=self._keywords, concepts=self._concepts, **fields,
        )

    def _fact_lookup(self, keys: list[int]) -> FactEnds:
        ends = self._fact_ends or {}
        return {k: ends[k] for k in keys if k in ends}

    def retrieve_graph(self, question: str, **kwargs: Any) -> list[str]:
        """The context strings for ``question`` (``as_retriever(**kwargs)``'s page contents).

        Raises:
            KnowledgeError: the graph is empty (build it first).
        """
        if self._graph.count_nodes() == 0:
            raise KnowledgeError(f"graph {self._name!r} is empty: upload files and call build_graph first")
        return [doc.page_content for doc in self.as_retriever(**kwargs).invoke(question)]


def _records(document: str, docs: Sequence[Any]) -> list[ChunkRecord]:
    return [ChunkRecord(chunk_id(document, i, d.page_content), document, d.page_content, content_hash(d.page_content),
                        dict(d.metadata)) for i, d in enumerate(docs)]

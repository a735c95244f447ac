# SPDX-License-Identifier: Apache-2.0
"""Answering a chat request through a knowledge base: the model name, the chain, the sources.

A chat ``model`` names a knowledge base, optionally with a chain: ``handbook`` or
``handbook/parallel``. The chains: ``single`` (retrieve, answer), ``parallel`` (retrieval overlapped
with a prefix-cache warm-up of the LLM), ``hybrid`` (dense + keyword retrieval fused),
``multi-query`` (the question and LLM rewrites of it searched). Every retriever is scoped to the
knowledge base. The last user message is the question; earlier turns go before it as history.

An ``Answerer`` keeps the retrievers and chains it builds, per user, knowledge base, chain, ``k``
and answer prompt, and builds them again after any change of the knowledge registry (its
generation: an ingest or a deletion, by any process) or when the knowledge base was made again.
A conversation's chain (it carries the history) is built for its request. Questions of
concurrent requests are embedded together (the service's ``QueryBatcher``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.app.chains import CHAIN_TYPES
from mx_rag.app.service import KnowledgeService, check_kb_name
from mx_rag.app.users import Principal
from mx_rag.chain.base import Chain
from mx_rag.errors import KnowledgeNotFound, ParameterError
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.utils.text import has_han

__all__ = ["Answerer", "Question", "answer_prompt", "parse_model", "question_of", "source_entries"]

CORAG_PATH_LENGTH = 3  # retrieval steps of a served CoRAG answer (greedy decoding)
MAX_HISTORY = 15  # earlier turns sent before the question (chains take at most 16 messages)
MAX_KEPT = 256  # retrievers and chains an Answerer keeps (the least recently used goes first)
ANSWER_PROMPT = "Answer the question using the information above. If it is not there, say so."
ANSWER_PROMPT_ZH = "请根据上述信息回答问题。如果上述信息中没有答案，请如实说明。"


def answer_prompt(question: str) -> str:
    """The answer instruction in the question's language: Chinese when it has a Han character.

    >>> answer_prompt("系统主机名保存在哪个文件中？") == ANSWER_PROMPT_ZH
    True
    """
    return ANSWER_PROMPT_ZH if has_han(question) else ANSWER_PROMPT


@dataclass(frozen=True)
class Question:
    """A chat request reduced to what a chain takes."""

    text: str
    history: list[dict[str, str]]


def parse_model(model: str, default_chain: str) -> tuple[str, str]:
    """``"kb"`` or ``"kb/chain"`` -> (knowledge base, chain).

    Raises:
        ParameterError: an unknown chain.
        KnowledgeNotFound: ``model`` cannot name a knowledge base.
    """
    name, _, chain = model.partition("/")
    chain = chain or default_chain
    if chain not in CHAIN_TYPES:
        raise ParameterError(f"model {model!r}: chain {chain!r} is not one of {', '.join(CHAIN_TYPES)}")
    try:
        check_kb_name(name)
    except ParameterError as exc:
        raise KnowledgeNotFound(f"model {model!r} names no knowledge base") from exc
    return name, chain


def question_of(messages: list[dict[str, Any]]) -> Question:
    """The last user message and the turns before it (system, user, assistant; text only)."""
    turns = [(m.get("role"), _text(m.get("content"))) for m in messages]
    users = [i for i, (role, _) in enumerate(turns) if role == "user"]
    if not users or not turns[users[-1]][1].strip():
        raise ParameterError("messages must end with a non-empty user message")
    last = users[-1]
    history = [{"role": str(role), "content": text} for role, text in turns[:last]
               if role in ("system", "user", "assistant") and text]
    return Question(turns[last][1], history[-MAX_HISTORY:])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def source_entries(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The chain's source documents as the API returns them: text, source file, page, score, and
    for a retrieved image its ``image_base64`` and ``image_mime``.

    ``score`` is the passage's similarity to the question (0 to 1); a passage that only the keyword
    search found (hybrid retrieval) has ``score`` None and ``"match": "keyword"``, since its BM25
    figure is on another scale."""
    out = []
    for doc in result.get("source_documents") or []:
        meta = doc.get("metadata", {})
        source = meta.get("source")
        keyword = meta.get("retrieval_type") == "sparse"
        entry: dict[str, Any] = {"text": doc.get("page_content", ""), "score": None if keyword else meta.get("score"),
                                 "source": Path(source).name if isinstance(source, str) else None}
        if keyword:
            entry["match"] = "keyword"
        if meta.get("page") is not None:
            entry["page"] = meta["page"]
        if meta.get("type") == "image" and meta.get("image_base64"):  # a retrieved picture, to show it
            entry["image_base64"], entry["image_mime"] = meta["image_base64"], meta.get("image_mime", "image/png")
        out.append(entry)
    return out


class Answerer:
    """Builds the chain of a request over the service's knowledge bases and the server's LLM."""

    def __init__(self, service: KnowledgeService, llm: Text2TextLLM) -> None:
        self.service = service
        self.llm = llm
        self._caches: Any = None  # the [cache] settings' answer caches, made on first use
        # (user, kb, what, chain, k[, prompt]) -> (the KnowledgeDB, registry generation, retriever or chain)
        self._kept: OrderedDict[tuple[Any, ...], tuple[KnowledgeDB, int, Any]] = OrderedDict()
        self._kept_lock = threading.Lock()

    def chain(self, who: Principal, kb: str, chain: str, question: Question, k: int | None) -> Any:
        from mx_rag.chain import GraphRagText2TextChain, ParallelText2TextChain, SingleText2TextChain
        from mx_rag.chain.single_text_to_text import question_first_content

        if chain == "graph":
            if not self.service.is_graph(who, kb):
                self.service.open(who, kb)  # 404 first for a knowledge base the caller cannot see
                raise ParameterError(f"knowledge base {kb!r} keeps no graph: create it with graph=true for the "
                                     "graph chain")
            retriever = self.service.graph(who, kb).as_retriever(reranker_top_k=k or self.service.settings.chain.k)
            return GraphChain(GraphRagText2TextChain(llm=self.llm, retriever=retriever,
                                                     sys_messages=question.history or None, source=True), retriever)
        knowledge = self.service.open(who, kb)
        stamp = (knowledge, knowledge.knowledge_store.generation())
        key = (who.user_id, kb, chain, k)
        retriever = self._keep(stamp, ("retriever", *key), lambda: self._retriever(knowledge, chain, k))
        if chain == "corag":
            return CoRagChain(self.llm, retriever, k or self.service.settings.chain.k)
        prompt = answer_prompt(question.text)

        def build() -> Any:
            common = {"llm": self.llm, "retriever": retriever, "reranker": self.service.reranker(),
                      "prompt": prompt, "sys_messages": question.history or None}
            if chain == "parallel":  # its own layout puts the question first too (the warm-up's prefix)
                return ParallelText2TextChain(**common)
            return SingleText2TextChain(**common, user_content_builder=question_first_content)

        built = build() if question.history else self._keep(stamp, ("chain", *key, prompt), build)
        return self._cached(who, kb, chain, k, question, built)

    def _keep(self, stamp: tuple[KnowledgeDB, int], key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """The object kept under ``key`` while ``stamp`` (the knowledge base and the registry's
        generation) is the same; else ``build()``, kept."""
        with self._kept_lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0] is stamp[0] and kept[1] == stamp[1]:
                self._kept.move_to_end(key)
                return kept[2]
        built = build()
        with self._kept_lock:
            self._kept[key] = (*stamp, built)
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return built

    def _cached(self, who: Principal, kb: str, chain: str, k: int | None, question: Question, built: Any) -> Any:
        """``built`` behind the answer cache when ``[cache]`` is on (never for a conversation)."""
        if not self.service.settings.cache.enabled or question.history:
            return built
        if self._caches is None:
            from mx_rag.app.answer_cache import AnswerCaches

            self._caches = AnswerCaches(self.service)
        return self._caches.wrap(who, kb, chain, k, built)

    def _retriever(self, knowledge: KnowledgeDB, chain: str, k: int | None) -> Any:
        settings = self.service.settings.chain
        k = k or settings.k
        embed = self.service.queries.embed_documents
        if chain == "hybrid":
            from mx_rag.retrievers import HybridRetriever

            return knowledge.scoped(HybridRetriever(vector_store=knowledge.vector_store,
                                                    document_store=knowledge.chunk_store, embed_func=embed, k=k,
                                                    dense_weight=settings.dense_weight,
                                                    subject_links=settings.subject_links))  # fmt: skip
        if chain == "multi-query":
            from mx_rag.retrievers import MultiQueryRetriever

            return knowledge.scoped(MultiQueryRetriever(vector_store=knowledge.vector_store,
                                                        document_store=knowledge.chunk_store, embed_func=embed, k=k,
                                                        llm=self.llm))
        return knowledge.as_retriever(embed, k=k, score_threshold=settings.score_threshold)

    def answer(self, chain: Any, question: Question, config: LLMParameterConfig) -> dict[str, Any]:
        """The chain's result; a graph chain's also holds ``"graph"`` (see ``GraphChain.view``)."""
        result: dict[str, Any] = chain.query(question.text, config)
        return result

    def stream(self, chain: Chain, question: Question, config: LLMParameterConfig) -> Iterator[tuple[str, Any]]:
        """The answer as ("delta", text) items, then ("result", the whole result as ``answer``
        returns it): the chains' one streaming shape, which the server's SSE and the command line
        send on as it is. Nothing runs before the first item is asked for."""
        yield from chain.stream(question.text, config)


class GraphChain(Chain):
    """A ``GraphRagText2TextChain`` with the entities behind its answer (``view``)."""

    def __init__(self, chain: Chain, retriever: Any) -> None:
        self.chain, self.retriever = chain, retriever

    def query(self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any) -> Any:
        result = self.chain.query(text, llm_config)
        return {**result, "graph": self.view(text, result)} if isinstance(result, dict) else result

    def stream(self, text: str, llm_config: LLMParameterConfig | None = None) -> Iterator[tuple[str, Any]]:
        for kind, value in self.chain.stream(text, llm_config):
            yield kind, ({**value, "graph": self.view(text, value)} if kind == "result" else value)

    def view(self, question: str, result: dict[str, Any]) -> dict[str, Any]:
        """The entities and relations around the answer: ``{"nodes": [{"id", "label", "passages"}],
        "edges": [{"source", "target", "label"}]}``, where ``passages`` index the answer's
        ``sources``. The retrieval is run once more for it (the graph retrievers are
        deterministic, so it finds the same passages)."""
        explained = self.retriever.explain(question)
        index: dict[str, int] = {}
        for i, doc in enumerate(result.get("source_documents") or []):
            chunk = doc.get("metadata", {}).get("chunk_id")
            if chunk is not None:
                index.setdefault(str(chunk), i)
        nodes = [{"id": n["name"], "label": n["label"], "type": n.get("type"), "seed": n.get("seed", False),
                  "passages": [index[c] for c in n.get("chunk_ids", []) if c in index]}
                 for n in explained.get("nodes", [])]
        edges = [{"source": e["source"], "target": e["target"], "label": e["relation"], "kind": e.get("kind")}
                 for e in explained.get("edges", [])]
        return {"nodes": nodes, "edges": edges}


class _RecordingSource:
    """A CoRAG document source over a knowledge-base retriever that keeps what it returned."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self.found: dict[str, Any] = {}  # text -> Document, in the order first retrieved

    def retrieve(self, query: str, top_k: int) -> list[Any]:
        from mx_rag.retrievers.sources import RetrievedDocument

        docs = self.retriever.invoke(query, k=top_k)
        for doc in docs:
            self.found.setdefault(doc.page_content, doc)
        return [RetrievedDocument(str(doc.metadata.get("id", i)), doc.page_content) for i, doc in enumerate(docs)]



class _ConfiguredLLM:
    """The server's LLM with one request's settings as its own (CoRAG reads ``llm_config``)."""

    def __init__(self, llm: Any, config: LLMParameterConfig) -> None:
        self.llm, self.llm_config = llm, config.replace(stream=False)

    def chat(self, query: str, *args: Any, llm_config: LLMParameterConfig | None = None, **kwargs: Any) -> Any:
        return self.llm.chat(query, *args, llm_config=llm_config or self.llm_config, **kwargs)


class CoRagChain(Chain):
    """CoRAG as a served chain: greedy multi-hop retrieval over one knowledge base, then the final
    answer; ``query`` returns the chains' result shape (streamed as one piece: the answer is only
    known at the end)."""

    def __init__(self, llm: Any, retriever: Any, k: int) -> None:
        self.llm, self.retriever, self.k = llm, retriever, k

    def query(self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any) -> Any:
        config = llm_config or LLMParameterConfig()
        result = self._answer(text, config)
        return iter([result]) if config.stream else result

    def _answer(self, text: str, config: LLMParameterConfig) -> dict[str, Any]:
        from mx_rag.corag import CoRagAgent

        source = _RecordingSource(self.retriever)
        agent = CoRagAgent(_ConfiguredLLM(self.llm, config), source, retrieve_top_k=self.k,
                           on_retrieval_error="raise")  # a served answer must not hide a failed retrieval
        answer, _ = agent.answer(text, strategy="greedy", max_path_length=CORAG_PATH_LENGTH)
        docs = [{"page_content": d.page_content, "metadata": dict(d.metadata)} for d in source.found.values()]
        return {"query": text, "result": answer, "source_documents": docs}

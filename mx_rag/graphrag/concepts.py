# SPDX-License-Identifier: Apache-2.0
"""Conceptualisation of a knowledge graph (``GraphRAGPipeline(..., conceptualize=True)``).

At each ``build_graph`` the LLM names a few abstract concepts ("laptop", "computer") of every
entity (seen in the context of one relation into it and one out of it), every event node and
every relation label that has none yet. Each concept is embedded once into the concept vector
store, keyed by ``text_key(concept)``, and joined to its ``top_k`` nearest concepts that are more
than ``threshold`` similar; the connected groups of joined concepts are the synsets.

Retrieval searches the concept store with the question's vector (and those of the entities the
LLM names in it): the entities and events that have one of the nearest concepts are linked, most
often hit first (``ConceptIndex.link``).

Files in the work dir: ``<graph_name>_concepts.json`` (the LLM's answers: one
``{"node", "conceptualized_node", "node_type"}`` per entity, event and relation, ``node`` being the
node's normalised name or the relation label, ``conceptualized_node`` the concepts joined by
``", "``) and ``<graph_name>_synset.json`` (each concept's joined neighbours, and the synsets).
Answers are cached: a later build asks only about new nodes and relations, and the concepts of
deleted nodes and relations leave both files and the store.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.errors import StorageError
from mx_rag.graphrag.graph_store import Edge, GraphStore, Node
from mx_rag.graphrag.merge import normalise_name
from mx_rag.graphrag.prompts import CONCEPT_PROMPTS
from mx_rag.graphrag.registry import _SealedJson
from mx_rag.graphrag.vectors import fact_key as text_key
from mx_rag.storage.vectorstore.vectorstore import VectorStore
from mx_rag.utils.checks import check_int, check_number, check_str, fail
from mx_rag.utils.common import Lang

__all__ = ["KINDS", "ConceptIndex", "ConceptSettings", "concept_settings", "parse_concepts", "text_key"]

KINDS = ("entity", "event", "relation")
DEFAULT_TOP_K = 5
DEFAULT_THRESHOLD = 0.3
MAX_TOP_K = 100
MAX_PROMPT_CHARS = 1024 * 1024
MAX_CONCEPTS = 10  # kept per answer
MAX_CONCEPT_CHARS = 64  # a longer "phrase" is prose, not a concept
MAX_CONTEXT_CHARS = 500
_SPLIT = re.compile(r"[,，、;；\n]")
_STRIP = " \t\"'“”‘’`*.。-•"

Key = tuple[str, str]  # (kind, item)


@dataclass(frozen=True)
class ConceptSettings:
    """The conceptualisation arguments of one ``build_graph`` call."""

    prompts: Mapping[str, str]
    top_k: int = DEFAULT_TOP_K
    threshold: float = DEFAULT_THRESHOLD
    max_workers: int = 5


def concept_settings(kwargs: Mapping[str, Any], lang: Lang, max_workers: int) -> ConceptSettings:
    """``ConceptSettings`` from ``build_graph``'s ``top_k``, ``threshold`` and
    ``conceptualizer_prompts`` (a dict of ``entity``, ``event`` and ``relation`` prompts, each
    1 to 1 MiB characters; default: the built-in ones of ``lang``)."""
    top_k = check_int("top_k", kwargs.get("top_k", DEFAULT_TOP_K), 1, MAX_TOP_K)
    threshold = check_number("threshold", kwargs.get("threshold", DEFAULT_THRESHOLD), 0.0, 1.0)
    given = kwargs.get("conceptualizer_prompts")
    if given is None:
        return ConceptSettings(CONCEPT_PROMPTS[lang], top_k, threshold, max_workers)
    if not isinstance(given, Mapping) or set(given) != set(KINDS):
        raise fail("conceptualizer_prompts", given, f"a dict with exactly the keys {list(KINDS)}")
    prompts = {k: check_str(f"conceptualizer_prompts[{k!r}]", given[k], 1, MAX_PROMPT_CHARS) for k in KINDS}
    return ConceptSettings(prompts, top_k, threshold, max_workers)


def parse_concepts(answer: str, item: str) -> list[str]:
    """The concepts of an LLM answer: comma-separated phrases, normalised (case-folded, spaces
    collapsed), without the item itself, duplicates and prose; at most 10."""
    found: dict[str, None] = {}
    own = normalise_name(item)
    for part in _SPLIT.split(answer):
        phrase = normalise_name(re.split(r"[:：]", part)[-1].strip(_STRIP))
        if phrase and phrase != own and len(phrase) <= MAX_CONCEPT_CHARS:
            found[phrase] = None
    return list(found)[:MAX_CONCEPTS]


def _kind(node: Node) -> str:
    return "event" if node.type.strip().casefold() == "event" else "entity"


def _contexts(nodes: Iterable[Node], edges: list[Edge], labels: Mapping[str, str]) -> dict[str, str]:
    """Node name -> one relation into the node and one out of it, as text (else its description)."""
    into: dict[str, Edge] = {}
    out: dict[str, Edge] = {}
    for edge in sorted(edges, key=lambda e: e.key):
        into.setdefault(edge.target, edge)
        out.setdefault(edge.source, edge)
    contexts = {}
    for node in nodes:
        parts = [f"{labels.get(e.source, e.source)} {e.relation or 'related to'} {labels.get(e.target, e.target)}"
                 for e in (into.get(node.name), out.get(node.name)) if e is not None]
        text = "; ".join(parts) or node.description.split("\n")[0]
        contexts[node.name] = text[:MAX_CONTEXT_CHARS]
    return contexts


class _ConceptFile(_SealedJson):
    FORMAT, VERSION, WHAT = "mxrag-graph-concepts", 1, "the graph concepts"

    def load(self) -> dict[Key, tuple[str, ...]]:
        if not self._path.exists():
            return {}
        rows = self._data()["concepts"]
        return {(str(r["node_type"]), str(r["node"])): tuple(c for c in str(r["conceptualized_node"]).split(", ") if c)
                for r in rows}  # fmt: skip

    def store(self, answers: Mapping[Key, tuple[str, ...]]) -> None:
        self._save({"concepts": [{"node": item, "conceptualized_node": ", ".join(concepts), "node_type": kind}
                                 for (kind, item), concepts in sorted(answers.items())]})  # fmt: skip


class _SynsetFile(_SealedJson):
    FORMAT, VERSION, WHAT = "mxrag-graph-synsets", 1, "the concept synsets"

    def load(self) -> dict[str, set[str]]:
        if not self._path.exists():
            return {}
        return {str(c): set(map(str, near)) for c, near in self._data()["neighbours"].items()}

    def store(self, neighbours: Mapping[str, set[str]], synsets: list[list[str]]) -> None:
        self._save({"neighbours": {c: sorted(near) for c, near in sorted(neighbours.items())}, "synsets": synsets})


class ConceptIndex:
    """The concepts of a graph's entities, events and relations, their vectors and synsets.

    Thread-safe. ``GraphRAGPipeline`` owns one when built with ``conceptualize=True``
    (``pipeline.concepts``); read it, the pipeline writes it.
    """

    def __init__(
        self,
        concepts_path: Path,
        synset_path: Path,
        store: VectorStore,
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
    ) -> None:
        self._file = _ConceptFile(concepts_path, encrypt_fn, decrypt_fn)
        self._synset_file = _SynsetFile(synset_path, encrypt_fn, decrypt_fn)
        self._store = store
        self._lock = threading.RLock()
        try:
            self._answers = self._file.load()
            self._neighbours = self._synset_file.load()
        except (KeyError, TypeError, AttributeError) as exc:
            raise StorageError(f"cannot read the concepts in {str(concepts_path)!r} or {str(synset_path)!r}: "
                               f"{exc!r}") from exc  # fmt: skip
        self._by_key: dict[int, str] = {}
        self._nodes_of: dict[str, list[str]] = {}
        self._refresh()

    @property
    def store(self) -> VectorStore:
        """The concept vector store (one vector per concept, keyed by ``text_key(concept)``)."""
        return self._store

    def concepts_of(self, item: str, kind: str = "entity") -> list[str]:
        """The concepts of a node (by normalised name; ``kind`` ``"entity"`` or ``"event"``) or of
        a relation label (``kind="relation"``); ``[]`` when it has none."""
        with self._lock:
            return list(self._answers.get((kind, item), ()))

    def nodes_with(self, concept: str) -> list[str]:
        """The names of the entities and events that have ``concept``, sorted."""
        with self._lock:
            return list(self._nodes_of.get(concept, []))

    def synsets(self) -> list[list[str]]:
        """The groups of joined concepts (each sorted; largest first)."""
        with self._lock:
            return _components(self._neighbours)

    # -- building --------------------------------------------------------------------------------

    def conceptualize(self, graph: GraphStore, ask: Callable[[str], str], settings: ConceptSettings) -> int:
        """Ask ``ask`` (one prompt -> the LLM's answer) for the concepts of each entity, event and
        relation of ``graph`` that has none yet; ``settings.max_workers`` calls at a time.
        Answers received before a failed call are kept. Returns the number of calls."""
        todo = self._todo(graph, settings.prompts)
        done: dict[Key, tuple[str, ...]] = {}
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(settings.max_workers, len(todo)))) as pool:
                for (key, _), answer in zip(todo, pool.map(lambda task: ask(task[1]), todo), strict=True):
                    done[key] = tuple(parse_concepts(str(answer), key[1]))
        finally:
            if done:
                with self._lock:
                    self._answers.update(done)
                    self._file.store(self._answers)
                    self._refresh()
        return len(todo)

    def _todo(self, graph: GraphStore, prompts: Mapping[str, str]) -> list[tuple[Key, str]]:
        with self._lock:
            known = set(self._answers)
        nodes = [n for n in graph.iter_nodes() if (_kind(n), n.name) not in known]
        edges = list(graph.iter_edges())
        todo: list[tuple[Key, str]] = []
        if nodes:
            labels = {n.name: n.label for n in graph.get_nodes({e.source for e in edges} | {e.target for e in edges})
                      .values()}  # fmt: skip
            contexts = _contexts(nodes, edges, labels)
            for node in nodes:
                kind = _kind(node)
                prompt = prompts[kind].replace(f"[{kind.upper()}]", node.label)
                todo.append(((kind, node.name), prompt.replace("[CONTEXT]", contexts[node.name])))
        for relation in sorted({e.relation for e in edges if e.relation} - {r for k, r in known if k == "relation"}):
            todo.append((("relation", relation), prompts["relation"].replace("[RELATION]", relation)))
        return todo

    def sync(self, graph: GraphStore, embedding: Embeddings, batch_size: int, top_k: int = DEFAULT_TOP_K,
             threshold: float = DEFAULT_THRESHOLD) -> None:  # fmt: skip
        """Drop the concepts of deleted nodes and relations (answers, vectors, synsets); embed the
        concepts that have no vector yet and join each to its ``top_k`` nearest concepts more than
        ``threshold`` similar. Running it again after a crash finishes the job."""
        with self._lock:
            live = {(_kind(n), n.name) for n in graph.iter_nodes()}
            live |= {("relation", e.relation) for e in graph.iter_edges() if e.relation}
            stale = [key for key in self._answers if key not in live]
            for key in stale:
                del self._answers[key]
            if stale:
                self._file.store(self._answers)
            concepts = {text_key(c): c for found in self._answers.values() for c in found}
            stored = set(self._store.get_all_ids())
            dropped = sorted(stored - concepts.keys())
            if dropped:
                self._store.delete(dropped)
            kept = set(concepts.values())
            self._neighbours = {c: near & kept for c, near in self._neighbours.items() if c in kept}
            todo = sorted(k for k in concepts if k not in stored or concepts[k] not in self._neighbours)
            for start in range(0, len(todo), batch_size):
                keys = todo[start : start + batch_size]
                vectors = embedding.embed_documents([concepts[k] for k in keys])
                new = [(k, v) for k, v in zip(keys, vectors, strict=True) if k not in stored]
                if new:
                    self._store.add([k for k, _ in new], [v for _, v in new])
                self._join([concepts[k] for k in keys], vectors, concepts, top_k, threshold)
            if todo or dropped:
                self._store.save_local()
            if todo or dropped or stale:
                self._synset_file.store(self._neighbours, _components(self._neighbours))
            self._refresh()

    def _join(self, names: list[str], vectors: list[list[float]], concepts: Mapping[int, str], top_k: int,
              threshold: float) -> None:  # fmt: skip
        score_rows, id_rows = self._store.search(vectors, k=top_k + 1)
        for name, scores, ids in zip(names, score_rows, id_rows, strict=True):
            near = self._neighbours.setdefault(name, set())
            for score, key in zip(scores, ids, strict=True):
                other = concepts.get(int(key))
                if other is not None and other != name and float(score) > threshold:
                    near.add(other)
                    self._neighbours.setdefault(other, set()).add(name)

    def _refresh(self) -> None:
        self._by_key = {text_key(c): c for found in self._answers.values() for c in found}
        nodes_of: dict[str, set[str]] = {}
        for (kind, item), found in self._answers.items():
            if kind != "relation":
                for concept in found:
                    nodes_of.setdefault(concept, set()).add(item)
        self._nodes_of = {c: sorted(names) for c, names in nodes_of.items()}

    # -- retrieval -------------------------------------------------------------------------------

    def link(self, vectors: list[list[float]], k: int, threshold: float = 0.0) -> dict[str, float]:
        """Node name -> score for the entities and events that have one of the ``k`` concepts
        nearest to each of ``vectors`` (similarity above 0 and at least ``threshold``). A node's
        score is the best similarity of its concepts hit; at most ``k`` nodes are linked, the most
        often hit first (then the best scored)."""
        with self._lock:
            if not self._by_key or not vectors or self._store.count() == 0:
                return {}
            score_rows, id_rows = self._store.search(vectors, k=k)
            hits: dict[str, list[float]] = {}
            for scores, ids in zip(score_rows, id_rows, strict=True):
                for score, key in zip(scores, ids, strict=True):
                    concept = self._by_key.get(int(key))
                    if concept is None or float(score) <= 0.0 or float(score) < threshold:
                        continue
                    for name in self._nodes_of.get(concept, ()):
                        hits.setdefault(name, []).append(float(score))
        ranked = sorted(hits, key=lambda n: (-len(hits[n]), -max(hits[n]), n))[:k]
        return {name: max(hits[name]) for name in ranked}


def _components(neighbours: Mapping[str, set[str]]) -> list[list[str]]:
    seen: set[str] = set()
    groups = []
    for start in sorted(neighbours):
        if start in seen:
            continue
        group, stack = set(), [start]
        while stack:
            concept = stack.pop()
            if concept not in group:
                group.add(concept)
                stack.extend(neighbours.get(concept, ()))
        seen |= group
        groups.append(sorted(group))
    return sorted(groups, key=lambda g: (-len(g), g))

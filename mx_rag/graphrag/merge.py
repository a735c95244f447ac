# SPDX-License-Identifier: Apache-2.0
"""Turn per-chunk extractions into graph records: names normalised, duplicates merged."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from mx_rag.graphrag.extraction import Extraction
from mx_rag.graphrag.graph_store import Edge, Node
from mx_rag.utils.names import MAX_NAME_CHARS, normalise_name
from mx_rag.utils.names import clean_label as _label

__all__ = ["MAX_NAME_CHARS", "normalise_name", "to_records"]

_SPACES = re.compile(r"\s+")


def _relation_key(relation: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", relation)).strip().casefold()[:MAX_NAME_CHARS]


def _add(texts: dict[str, list[str]], key: str, text: str) -> None:
    bucket = texts.setdefault(key, [])
    if text and text not in bucket:
        bucket.append(text)


def to_records(items: Iterable[tuple[str, Extraction]]) -> tuple[list[Node], list[Edge]]:
    """Nodes and edges of ``(chunk_id, extraction)`` pairs.

    Entity names are normalised with ``normalise_name`` (the first spelling seen becomes the
    label); relation ends missing from the entity list become entities; relations from a node
    to itself are dropped; several relations between one pair stay separate edges.
    """
    labels: dict[str, str] = {}
    types: dict[str, str] = {}
    node_texts: dict[str, dict[str, list[str]]] = {}
    edge_texts: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for chunk_id, extraction in items:
        for entity in extraction.entities:
            key = normalise_name(entity.name)
            if not key:
                continue
            labels.setdefault(key, _label(entity.name))
            if entity.type and not types.get(key):
                types[key] = entity.type.strip()[:MAX_NAME_CHARS]
            _add(node_texts.setdefault(key, {}), chunk_id, entity.description)
        for relation in extraction.relations:
            source, target = normalise_name(relation.source), normalise_name(relation.target)
            if not source or not target or source == target:
                continue
            for key, raw in ((source, relation.source), (target, relation.target)):
                labels.setdefault(key, _label(raw))
                node_texts.setdefault(key, {}).setdefault(chunk_id, [])
            edge_key = (source, target, _relation_key(relation.relation))
            _add(edge_texts.setdefault(edge_key, {}), chunk_id, relation.description)
    nodes = [
        Node(key, label=labels[key], type=types.get(key) or "entity",
             descriptions={chunk: "; ".join(texts) for chunk, texts in by_chunk.items()})
        for key, by_chunk in node_texts.items()
    ]
    edges = [
        Edge(*key, descriptions={chunk: "; ".join(texts) for chunk, texts in by_chunk.items()})
        for key, by_chunk in edge_texts.items()
    ]
    return nodes, edges

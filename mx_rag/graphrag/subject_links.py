# SPDX-License-Identifier: Apache-2.0
"""Subject links: follow the entities a top passage names to the passages *about* them.

A passage is about an entity (it is the entity's *subject passage*) when its text opens with the
entity's name: a title line (``"Arthur's Magazine: Arthur's Magazine (1844-1846) was ..."``), a
heading, or the first words of an encyclopedic paragraph. Multi-hop questions often name one
entity and need the passage about another one that the first passage names (the bridge):
HotpotQA's bridge questions were written by following such a link from one Wikipedia paragraph
to the article it points to, and hyperlink-following retrievers (Asai et al., 2020, "Learning to
Retrieve Reasoning Paths over Wikipedia Graph for Question Answering") walk the same links.

``follow_subjects`` keeps the first ``heads`` passages of a ranking, puts the subject passages of
the other entities they name (not of the entity a head passage is itself about) right after them,
at most ``PER_HEAD`` per head passage (the best ranked first), in the order of the passage that
names them, and the rest of the ranking after those. Entities mentioned by more than
``MAX_SOURCES`` passages are too common to point anywhere and are not followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from mx_rag.graphrag.graph_store import Node
from mx_rag.graphrag.merge import normalise_name
from mx_rag.graphrag.registry import ChunkRecord

__all__ = ["MAX_SOURCES", "PER_HEAD", "follow_subjects", "opens_with"]

MAX_SOURCES = 50
PER_HEAD = 1  # subject passages followed from one head passage, the best ranked first
MIN_NAME_CHARS = 4  # shorter names ("US", "May") open too many passages by chance
_MARKUP = re.compile(r"^[\s#>*_`\"'“‘(\[-]+")


def opens_with(text: str, name: str) -> bool:
    """Whether ``text`` starts with the entity ``name`` (normalised; leading Markdown marks and
    quotes skipped), followed by a non-word character or the end."""
    head = _MARKUP.sub("", text[: len(name) + 64])
    opening = normalise_name(head[: len(name) + 1])
    if len(name) < MIN_NAME_CHARS or not opening.startswith(name):
        return False
    rest = opening[len(name) :]
    return not rest or not rest[0].isalnum()


def follow_subjects(
    ranked: list[str],
    heads: int,
    entities_of: Callable[[Iterable[str]], Mapping[str, list[str]]],
    get_nodes: Callable[[Iterable[str]], Mapping[str, Node]],
    chunks: Callable[[Iterable[str]], Mapping[str, ChunkRecord]],
) -> list[str]:
    """``ranked`` (chunk ids, best first) with the subject passages of the entities its first
    ``heads`` chunks name moved up to follow them (see the module docstring)."""
    first = ranked[:heads]
    if not first:
        return ranked
    named = entities_of(first)
    nodes = get_nodes({n for chunk in first for n in named.get(chunk, [])})
    candidates = {c for node in nodes.values() if len(node.sources) <= MAX_SOURCES for c in node.sources}
    records = chunks(candidates | set(first))
    own = {c: {n for n in named.get(c, []) if c in records and opens_with(records[c].text, n)} for c in first}
    position = {chunk: i for i, chunk in enumerate(ranked)}
    linked: list[str] = []
    for chunk in first:
        found = []
        for name in named.get(chunk, []):
            node = nodes.get(name)
            if node is None or len(node.sources) > MAX_SOURCES or name in own.get(chunk, ()):
                continue
            found += [c for c in node.sources if c not in first and c in records and opens_with(records[c].text, name)]
        found.sort(key=lambda c: (position.get(c, len(ranked)), c))
        linked += [c for c in dict.fromkeys(found) if c not in linked][:PER_HEAD]
    if not linked:
        return ranked
    moved = set(linked)
    return first + linked + [c for c in ranked[heads:] if c not in moved]

# SPDX-License-Identifier: Apache-2.0
"""Subject links: follow the names a top passage mentions to the passages *about* them.

A passage is about a name (it is the name's *subject passage*) when its text opens with it: a
title line (``"Arthur's Magazine: Arthur's Magazine (1844-1846) was ..."``), a heading, or the
first words of an encyclopedic paragraph. Multi-hop questions often name one entity and need the
passage about another one that the first passage names (the bridge): HotpotQA's bridge questions
were written by following such a link from one Wikipedia paragraph to the article it points to,
and hyperlink-following retrievers (Asai et al., 2020, "Learning to Retrieve Reasoning Paths over
Wikipedia Graph for Question Answering") walk the same links.

``follow_subjects`` keeps the first ``heads`` passages of a ranking and puts, right after them,
the subject passages of the other names they mention (not of the name a head passage is itself
about), at most ``PER_HEAD`` per head passage (the best ranked first), then the rest of the
ranking. Where the names and the subject passages come from is the caller's: the graph
retriever uses a passage's extracted entities and the graph's mentions
(``mx_rag.graphrag.retriever``); ``Retriever(subject_links=n)`` uses the capitalised names of
the text and the document store's keyword index (``subject_documents``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from langchain_core.documents import Document

from mx_rag.utils.names import normalise_name

__all__ = [
    "MAX_SUBJECT_LINKS", "MIN_NAME_CHARS", "PER_HEAD", "SUBJECT_HITS",
    "capitalised_names", "follow_subjects", "opens_with", "subject_documents",
]

MIN_NAME_CHARS = 4  # shorter names ("US", "May") open too many passages by chance
PER_HEAD = 1  # subject passages followed from one head passage
NAMES_PER_PASSAGE = 12  # capitalised names of a passage looked up in the keyword index
SUBJECT_HITS = 5  # keyword hits per name that may open with it
MAX_SUBJECT_LINKS = 100  # the range of Retriever.subject_links
_MARKUP = re.compile(r"^[\s#>*_`\"'“‘(\[-]+")
_WORD = r"[A-Z][\w'’&-]*"
_CAPITALISED = re.compile(rf"{_WORD}(?:\s+(?:(?:of|the|and|de|la|le|von|van|der|du|del|da|di|for)\s+)?{_WORD})*")


def opens_with(text: str, name: str) -> bool:
    """Whether ``text`` starts with ``name`` (a ``normalise_name`` key; leading Markdown marks
    and quotes skipped), followed by a non-word character or the end."""
    if len(name) < MIN_NAME_CHARS:
        return False
    head = _MARKUP.sub("", text[: len(name) + 64])
    opening = normalise_name(head[: len(name) + 1])
    if not opening.startswith(name):
        return False
    rest = opening[len(name) :]
    return not rest or not rest[0].isalnum()


def capitalised_names(text: str) -> list[str]:
    """The ``normalise_name`` keys of the capitalised word runs of ``text`` ("Arthur's Magazine",
    "Bank of America"), first appearance first, at least ``MIN_NAME_CHARS`` long."""
    found = (normalise_name(m.group(0)) for m in _CAPITALISED.finditer(text))
    return [n for n in dict.fromkeys(found) if len(n) >= MIN_NAME_CHARS]


def follow_subjects(
    ranked: list[str],
    heads: int,
    names_of: Callable[[list[str]], Mapping[str, list[str]]],
    subjects_of: Callable[[set[str]], Mapping[str, Sequence[str]]],
) -> list[str]:
    """``ranked`` (passage keys, best first) with the subject passages of the names its first
    ``heads`` passages mention moved up to follow them (see the module docstring).

    Args:
        names_of: passage keys -> the names each mentions, in order.
        subjects_of: names -> the passages that open with each (any order).
    """
    first = ranked[:heads]
    if not first:
        return ranked
    named = names_of(first)
    subjects = subjects_of({n for key in first for n in named.get(key, [])})
    position = {key: i for i, key in enumerate(ranked)}
    linked: list[str] = []
    for key in first:
        found: list[str] = []
        for name in named.get(key, []):
            about = subjects.get(name, ())
            if key not in about:  # not the name this passage is itself about
                found += [c for c in about if c not in first]
        found = sorted(dict.fromkeys(found), key=lambda c: (position.get(c, len(ranked)), c))
        linked += [c for c in found if c not in linked][:PER_HEAD]
    if not linked:
        return ranked
    moved = set(linked)
    return first + linked + [c for c in ranked[heads:] if c not in moved]


def subject_documents(
    docs: list[Document],
    heads: int,
    key: Callable[[Document], str],
    search: Callable[[str], Iterable[Document]],
) -> list[Document]:
    """``follow_subjects`` over documents: the names are the capitalised names of their texts,
    and ``search(name)`` (a keyword search) finds the documents that may open with a name."""
    by_key = {key(d): d for d in docs}

    def names_of(keys: list[str]) -> dict[str, list[str]]:
        return {k: capitalised_names(by_key[k].page_content)[:NAMES_PER_PASSAGE] for k in keys}

    def subjects_of(names: set[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name in sorted(names):
            for doc in [*docs, *search(name)]:
                if opens_with(doc.page_content, name):
                    by_key.setdefault(key(doc), doc)
                    found.setdefault(name, []).append(key(doc))
        return found

    order = follow_subjects([key(d) for d in docs], heads, names_of, subjects_of)
    return [by_key[k] for k in order]

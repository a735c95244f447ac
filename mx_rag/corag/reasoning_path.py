# SPDX-License-Identifier: Apache-2.0
"""``ReasoningPath`` (one CoRAG path) and the rules for accepting a sub-query into it.

Example:
    >>> p = ReasoningPath("Who founded YouTube?")
    >>> usable_subquery(ParsedSubquery("final", "Chad Hurley"), p).text   # before any retrieval
    'Who founded YouTube?'
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from mx_rag.corag.prompts import ParsedSubquery, is_no_info

__all__ = [
    "STOP_BUDGET",
    "STOP_CALLS",
    "STOP_EARLY",
    "STOP_LENGTH",
    "STOP_REASONS",
    "ReasoningPath",
    "informativeness",
    "subquery_key",
    "usable_subquery",
]

logger = logging.getLogger(__name__)

STOP_LENGTH, STOP_EARLY, STOP_BUDGET, STOP_CALLS = "max_path_length", "early_stop", "token_budget", "call_budget"
STOP_REASONS = (STOP_LENGTH, STOP_EARLY, STOP_BUDGET, STOP_CALLS)


@dataclass
class ReasoningPath:
    """One CoRAG reasoning path; the lists are parallel, one entry per step.

    The first six fields are the original's (positional construction works as documented);
    ``stop_reason`` (one of ``STOP_REASONS``, ``""`` while unfinished), ``tokens_used`` (LLM
    tokens spent on the path, estimated when the server reports none) and ``score`` (set by
    best-of-N and tree search) are ours. ``reasoning_steps`` holds the model's ``<reasoning>``
    block for each step, or None.

    Example:
        >>> p = ReasoningPath("Who founded YouTube?", ["Who founded YouTube?"], ["Chad Hurley and others"],
        ...                   [["d1"]], [None], [["YouTube was founded by Chad Hurley, Steve Chen and Jawed Karim."]])
        >>> len(p.subqueries), p.stopped_early
        (1, False)
    """

    original_query: str
    subqueries: list[str] = field(default_factory=list)
    subanswers: list[str] = field(default_factory=list)
    document_ids: list[list[str]] = field(default_factory=list)
    reasoning_steps: list[str | None] = field(default_factory=list)
    documents: list[list[str]] = field(default_factory=list)
    stop_reason: str = ""
    tokens_used: int = 0
    score: float | None = None

    @property
    def stopped_early(self) -> bool:
        """Whether the model ended the path because it had enough information."""
        return self.stop_reason == STOP_EARLY

    def copy(self) -> ReasoningPath:
        """A copy whose lists can be extended without touching this path."""
        return replace(
            self,
            subqueries=list(self.subqueries),
            subanswers=list(self.subanswers),
            document_ids=[list(ids) for ids in self.document_ids],
            reasoning_steps=list(self.reasoning_steps),
            documents=[list(docs) for docs in self.documents],
        )


def subquery_key(text: str) -> str:
    """The form sub-queries are compared in to detect repeats (case, spaces, final "?" ignored)."""
    return " ".join(text.casefold().rstrip("?？.。 ").split())


def usable_subquery(proposal: ParsedSubquery, path: ReasoningPath) -> ParsedSubquery | None:
    """The sub-query to run next on ``path``, or None to ask again (empty, a repeat, or a final
    answer that cannot end the path). A final answer before any retrieval searches the main
    question itself: a path always retrieves at least once."""
    if proposal.kind == "final" and not path.subqueries:
        return ParsedSubquery("subquery", path.original_query, proposal.thought)
    if proposal.kind != "subquery":
        logger.debug("CoRAG: unusable sub-query reply (%s); asking again", proposal.kind)
        return None
    if subquery_key(proposal.text) in {subquery_key(q) for q in path.subqueries}:
        logger.debug("CoRAG: repeated sub-query %r; asking again hotter", proposal.text[:80])
        return None
    return proposal


def informativeness(path: ReasoningPath) -> float:
    """Share of the path's sub-answers that found relevant information (0 for an empty path)."""
    if not path.subanswers:
        return 0.0
    return sum(not is_no_info(answer) for answer in path.subanswers) / len(path.subanswers)

# SPDX-License-Identifier: Apache-2.0
"""CoRAG prompts (sub-query, sub-answer, final answer, path judge) and parsers for their replies.

The prompt functions keep the original SDK's names and section order so training samples built
from them match what the agent sends at inference time.

Example:
    >>> parse_subquery('<think>hmm</think>SubQuery 2: "Who founded YouTube?"').text
    'Who founded YouTube?'
    >>> parse_subquery("Final Answer: Paris").kind
    'final'
    >>> parse_judge_score("Score: 8/10")
    0.8
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "NO_RELEVANT_INFO",
    "ParsedSubquery",
    "clean_answer",
    "get_generate_final_answer_prompt",
    "get_generate_intermediate_answer_prompt",
    "get_generate_subquery_prompt",
    "get_judge_path_prompt",
    "is_no_info",
    "is_prompt_echo",
    "parse_judge_score",
    "parse_subquery",
    "render_final_history",
    "render_history",
    "strip_reasoning",
    "unique_documents",
]

NO_RELEVANT_INFO = "No relevant information available"
MAX_SUBQUERY_CHARS = 2000
_TRUNCATION_MARK = "......"  # Text2TextLLM.chat appends it when the answer hit max_tokens

_SUBQUERY_RULES = (
    "You are answering the main question below with a search engine, one simple search at a time.\n"
    "Write the next search query: one short, self-contained question that fills a gap in what the "
    "previous searches found.\n"
    "- Do not repeat an earlier query. If an earlier search found nothing useful, rephrase it or "
    "break it down further.\n"
)
_EARLY_STOP_RULE = (
    '- If the previous answers already answer the main question, reply "Final Answer: <answer>" '
    "instead of a query.\n"
)


def _check_lengths(subqueries: Sequence[str], subanswers: Sequence[str]) -> None:
    if len(subqueries) != len(subanswers):
        raise ValueError(f"{len(subqueries)} sub-queries but {len(subanswers)} sub-answers")


def render_history(subqueries: Sequence[str], subanswers: Sequence[str]) -> str:
    """``Step i: q`` / ``Answer i: a`` lines, as shown in the sub-query prompt."""
    _check_lengths(subqueries, subanswers)
    return "\n".join(
        f"Step {i}: {q}\nAnswer {i}: {a}" for i, (q, a) in enumerate(zip(subqueries, subanswers, strict=True), 1)
    )


def get_generate_subquery_prompt(
    query: str,
    past_subqueries: Sequence[str],
    past_subanswers: Sequence[str],
    task_desc: str,
    *,
    allow_final_answer: bool = False,
    history: str | None = None,
) -> str:
    """Prompt for the next sub-query. ``allow_final_answer`` adds the early-stop option;
    ``history`` replaces the rendered history (the agent passes a shortened one)."""
    if history is None:
        history = render_history(past_subqueries, past_subanswers)
    rules = _SUBQUERY_RULES + (_EARLY_STOP_RULE if allow_final_answer else "") + "- Reply with the query only.\n"
    return (
        f"{rules}\n## Previous searches\n{history or 'None yet.'}\n\n"
        f"## Task\n{task_desc}\n\n## Main question\n{query}\n"
    )


def _documents(documents: Sequence[str], label: str) -> str:
    return "\n\n".join(f"{label.format(i=i)}\n{doc}" for i, doc in enumerate(documents, start=1))


def get_generate_intermediate_answer_prompt(subquery: str, documents: Sequence[str]) -> str:
    """Prompt for a sub-answer from the retrieved ``documents`` (each rendered once, in rank order)."""
    return (
        "Answer the question using only the documents below; do not add facts they do not contain.\n"
        f'If they contain nothing relevant, reply exactly "{NO_RELEVANT_INFO}".\n'
        "Give a short, direct answer.\n\n"
        f"## Documents\n{_documents(documents, 'Document {i}:') or '(none)'}\n\n"
        f"## Question\n{subquery}\n"
    )


def unique_documents(documents: Sequence[Sequence[str]] | Sequence[str]) -> list[str]:
    """Flatten per-step document lists rank by rank (every step's first document, then every
    step's second...) and drop repeats (first occurrence wins; whitespace is ignored).

    Ranking across steps means that when a prompt must be cut, each step keeps its best documents.

    >>> unique_documents([["a", "b"], ["c", "a"]])
    ['a', 'c', 'b']
    """
    steps = [[item] if isinstance(item, str) else list(item) for item in documents]
    seen: set[str] = set()
    flat: list[str] = []
    for rank in range(max((len(step) for step in steps), default=0)):
        for step in steps:
            if rank < len(step):
                key = " ".join(step[rank].split())
                if key and key not in seen:
                    seen.add(key)
                    flat.append(step[rank])
    return flat


def get_generate_final_answer_prompt(
    query: str,
    past_subqueries: Sequence[str],
    past_subanswers: Sequence[str],
    task_desc: str,
    documents: Sequence[Sequence[str]] | Sequence[str] | None = None,
    *,
    history: str | None = None,
) -> str:
    """Prompt for the final answer. ``documents``: per-step lists (``ReasoningPath.documents``)
    or a flat list; they are flattened, de-duplicated and shown one block each."""
    docs = unique_documents(documents or [])
    if history is None:
        history = _history_brackets(past_subqueries, past_subanswers)
    return (
        "Answer the main question using the search history and the reference documents below.\n"
        "The intermediate answers may be wrong: check them against the documents.\n"
        "Reply with the answer only, as briefly as possible.\n\n"
        f"## Reference documents\n{_documents(docs, '[Document {i}]') or '(none)'}\n\n"
        f"## Search history\n{history or '(none)'}\n\n"
        f"## Task\n{task_desc}\n\n## Main question\n{query}\n"
    )


def _history_brackets(subqueries: Sequence[str], subanswers: Sequence[str]) -> str:
    _check_lengths(subqueries, subanswers)
    return "\n".join(
        f"[Query {i}] {q}\n[Answer {i}] {a}" for i, (q, a) in enumerate(zip(subqueries, subanswers, strict=True), 1)
    )


def render_final_history(subqueries: Sequence[str], subanswers: Sequence[str]) -> str:
    """``[Query i]`` / ``[Answer i]`` lines, as shown in the final-answer prompt."""
    return _history_brackets(subqueries, subanswers)


def get_judge_path_prompt(query: str, subqueries: Sequence[str], subanswers: Sequence[str]) -> str:
    """Prompt asking a judge LLM how well the findings of a path support an answer (1 to 10)."""
    findings = _history_brackets(subqueries, subanswers) or "(no searches)"
    return (
        "You check whether a chain of searches has found enough evidence to answer a question.\n\n"
        f"## Question\n{query}\n\n## Searches and findings\n{findings}\n\n"
        "Rate from 1 to 10 how confidently the question can be answered from these findings alone "
        "(10: the answer is clearly supported; 1: nothing relevant was found). Reply with the number only.\n"
    )


# -- parsing ------------------------------------------------------------------------------------

_REASONING = re.compile(r"<reasoning>(.*?)</reasoning>", re.DOTALL | re.IGNORECASE)
_BLOCKS = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNCLOSED = re.compile(r"<(think|thinking|reasoning)>.*\Z", re.DOTALL | re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"\A.*?</(think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)
_FINAL = re.compile(r"^(?:final\s*answer|最终答案)\s*[:：]\s*(.*)$", re.IGNORECASE)
_SUBQUERY = re.compile(
    r"^(?:sub[\s_-]?quer(?:y|ies)|intermediate\s+query|follow[\s-]?up(?:\s+(?:question|query))?|next\s+query|"
    r"search\s+query|query|step|子查询|子问题)\s*\d*\s*[:：]\s*(.*)$",
    re.IGNORECASE,
)
_DECORATION = re.compile(r"^(?:[-*>#]+\s*|\d+[.)]\s+)")
_QUOTES = ('""', "''", "“”", "‘’", "「」", "``")


def strip_reasoning(text: str) -> tuple[str, str | None]:
    """``(text without <think>/<reasoning> blocks, content of the first <reasoning> block)``.

    An unclosed ``<think>`` (answer cut at max_tokens) drops everything after it; a closing tag
    without its opening one (the template opened it) drops everything before it.
    """
    match = _REASONING.search(text)
    thought = match.group(1).strip() if match else None
    text = _BLOCKS.sub("", text)
    text = _STRAY_CLOSE.sub("", text)
    text = _UNCLOSED.sub("", text)
    return text.strip(), thought


def _unquote(text: str) -> str:
    text = text.strip().strip("*").strip()
    for pair in _QUOTES:
        if len(text) >= 2 and text[0] == pair[0] and text[-1] == pair[1]:
            return text[1:-1].strip()
    return text


@dataclass(frozen=True)
class ParsedSubquery:
    """A parsed sub-query reply. ``kind``: ``"subquery"``, ``"final"`` (the model gave its final
    answer: ``text`` is that answer) or ``"empty"`` (nothing usable)."""

    kind: str
    text: str
    thought: str | None = None


def parse_subquery(raw: str) -> ParsedSubquery:
    """Parse a sub-query reply: drops reasoning blocks, quotes and prefixes such as ``SubQuery:``,
    ``SubQuery 2:``, ``Step 1:``, ``Intermediate query 1:``; ``Final Answer: x`` gives kind final.

    The first line carrying a sub-query or final-answer marker decides; without markers the first
    non-empty line is the sub-query (later lines are the model running on, e.g. a made-up answer).
    """
    text = raw.strip()
    if text.endswith(_TRUNCATION_MARK):
        text = text[: -len(_TRUNCATION_MARK)]
    text, thought = strip_reasoning(text)
    lines = [_DECORATION.sub("", line.strip()).strip("*").strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    for index, line in enumerate(lines):
        final = _FINAL.match(line)
        if final:
            answer = final.group(1).strip() or " ".join(lines[index + 1: index + 2])
            return ParsedSubquery("final", _unquote(answer), thought)
        sub = _SUBQUERY.match(line)
        if sub:
            body = _unquote(sub.group(1)) or (_unquote(lines[index + 1]) if index + 1 < len(lines) else "")
            return _subquery(body, thought)
    return _subquery(_unquote(lines[0]) if lines else "", thought)


_WORD = re.compile(r"\w+")
_LABEL_WORDS = frozenset([
    "sub", "subquery", "subqueries", "subanswer", "subanswers", "query", "queries", "answer", "answers", "final",
    "intermediate", "step", "question", "next", "search", "the", "is", "a", "an", "to", "of",
])
_FUNCTION_WORDS = frozenset([
    "a", "an", "the", "is", "are", "was", "were", "be", "of", "to", "in", "on", "at", "by", "for", "with", "and",
    "or", "not", "do", "does", "did", "it", "this", "that", "what", "who", "whom", "which", "when", "where", "how",
])
# Every word of the sub-query prompt itself (rules, headings), taken from the prompt so they cannot drift.
_PROMPT_WORDS = _LABEL_WORDS | frozenset(
    _WORD.findall(get_generate_subquery_prompt("", [], [], "", allow_final_answer=True).casefold())
)
_NOT_NAMES = _FUNCTION_WORDS | _LABEL_WORDS


def is_prompt_echo(text: str, query: str, task_desc: str = "") -> bool:
    """Whether a proposed sub-query only echoes the prompt instead of asking something.

    Small models often reply with a line of the instructions ("Do not repeat an earlier query."),
    a bare label or number ("SubAnswer:", "1") or a lead-in ("The answer is:"); searching for that
    retrieves noise. A reply that names something from the main ``query`` is never an echo;
    otherwise it is one when it ends in a colon (a lead-in with nothing after it) or when all its
    words come from the instructions, labels, numbers and ``task_desc``.

    >>> is_prompt_echo("Do not repeat an earlier query.", "Who founded YouTube?")
    True
    >>> is_prompt_echo("YouTube founders:", "Who founded YouTube?")
    False
    """
    stripped = text.strip()
    words = _WORD.findall(stripped.casefold())
    asked = set(_WORD.findall(query.casefold()))
    if any(word in asked for word in words if word not in _NOT_NAMES):
        return False
    if not words or stripped.endswith((":", "：")):
        return True
    task_words = set(_WORD.findall(task_desc.casefold()))
    return all(word in _PROMPT_WORDS or word in task_words or word.isdigit() for word in words)


_INLINE_ANSWER = re.compile(r"\s(?:sub[\s_-]?answer|intermediate\s+answer|final\s*answer)\s*\d*\s*[:：].*$",
                            re.IGNORECASE)


def _subquery(text: str, thought: str | None) -> ParsedSubquery:
    """The sub-query up to an answer label on the same line (the model running on in the format)."""
    text = _INLINE_ANSWER.sub("", " ".join(text.split()))[:MAX_SUBQUERY_CHARS].strip()
    return ParsedSubquery("subquery" if text else "empty", text, thought)


_ANSWER_PREFIX = re.compile(
    r"^(?:sub[\s_-]?answer|intermediate\s+answer|final\s*answer|answer|最终答案|答案)\s*\d*\s*[:：]\s*", re.IGNORECASE
)


def clean_answer(raw: str) -> str:
    """A sub-answer or final answer without reasoning blocks, a ``SubAnswer:`` / ``Final Answer:``
    prefix or the ``......`` mark of an answer cut at max_tokens."""
    text = raw.strip()
    if text.endswith(_TRUNCATION_MARK):
        text = text[: -len(_TRUNCATION_MARK)]
    text, _ = strip_reasoning(text)
    return _ANSWER_PREFIX.sub("", text.strip().strip("*").strip(), count=1).strip()


def is_no_info(answer: str) -> bool:
    """Whether a sub-answer says the documents held nothing relevant."""
    folded = answer.casefold()
    return "no relevant information" in folded or folded.strip() in ("", "none", "unknown")


_SCORE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:(/)\s*(\d+(?:\.\d+)?)|(%))?")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_judge_score(text: str) -> float | None:
    """A judge reply as a score in [0, 1]: ``"8"`` / ``"8/10"`` / ``"80%"`` / ``"yes"`` / ``"no"``.
    Bare numbers are on the 1 to 10 scale asked for. None when nothing sensible is found."""
    clean, _ = strip_reasoning(text)
    match = _SCORE.search(clean)
    if match:
        value = float(match.group(1))
        if match.group(2):
            scale = float(match.group(3))
            return min(value / scale, 1.0) if scale > 0 else None
        if match.group(4):
            return min(value / 100, 1.0)
        if 0 <= value <= 10:
            return value / 10
        return None
    word = _YES_NO.search(clean)
    if word:
        return 1.0 if word.group(1).lower() == "yes" else 0.0
    return None

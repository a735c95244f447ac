# SPDX-License-Identifier: Apache-2.0
"""Readers for CoRAG input files: query/answer lists, HotpotQA and MuSiQue.

``load_records`` reads a JSON array or JSON Lines (one object per line) file; ``parse_item``
turns one record into a ``MultiHopItem`` whatever its format:

* plain (``SampleGenerator`` input): ``{"query": "中国的首都是哪里?", "answer": "北京", "id"?: ...}``;
  ``answer`` may be a string or a list of strings.
* HotpotQA / 2WikiMultihopQA: ``question``, ``answer``, ``context`` = ``[[title, [sentences]]]``,
  ``supporting_facts`` = ``[[title, sentence_index]]`` or ``[[title, [i, j]]]`` (the Hugging
  Face layout ``{"title": [...], "sentences": [...]}`` / ``{"title": [...], "sent_id": [...]}``
  is read too).
* MuSiQue: ``question``, ``answer``, ``answer_aliases``, ``paragraphs`` =
  ``[{"title"?, "paragraph_text", "is_supporting"}]``.

Golden facts (for the original recall measure) are the supporting sentences: HotpotQA's indexed
sentences, or MuSiQue's supporting paragraphs split at ``.``/``?``/``!`` (and ``。！？``).
``iter_passages`` lists every paragraph as ``"Title\\ntext"``, the layout the evaluator maps
back to titles (see :func:`mx_rag.corag.metrics.document_title`).

Example:
    >>> item = parse_item({"question": "Q?", "answer": "A", "answer_aliases": ["a1"]}, 0)
    >>> item.answers, item.format
    (['A', 'a1'], 'plain')
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.common import MAX_FILE_SIZE
from mx_rag.utils.file_check import check_file

__all__ = ["MultiHopItem", "iter_passages", "load_records", "parse_item", "split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|(?<=[。！？])")
_ANSWER_KEYS = ("answer", "answers", "golden_answers", "answer_aliases")
_ID_KEYS = ("id", "_id", "qid", "query_id")


@dataclass(frozen=True)
class MultiHopItem:
    """One question of an input file, normalised across formats.

    ``id`` is the record's ``id``/``_id`` as a string, ``""`` when it has none. ``answer`` is the
    record's ``answer`` as given (str or list); ``answers`` lists every accepted answer (aliases
    included) as non-empty strings. ``supporting_titles`` and
    ``golden_facts`` are empty for plain records.
    """

    index: int
    id: str
    question: str
    answer: Any
    answers: list[str]
    format: str = "plain"
    supporting_titles: list[str] = field(default_factory=list)
    golden_facts: list[str] = field(default_factory=list)


def load_records(path: str | os.PathLike[str], name: str = "input_file") -> list[Any]:
    """The records of a JSON array file or a JSON Lines file (blank lines are skipped).

    Raises:
        ParameterError: the path is not a readable file of at most 100 MiB, or the content is
            not valid JSON (the message gives the line), or a JSON document is not an array.
    """
    resolved = check_file(name, path, MAX_FILE_SIZE)
    try:
        text = resolved.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{name} {os.fspath(path)!r} could not be read as UTF-8 text: {exc}") from exc
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ParameterError(f"{name} {os.fspath(path)!r} is not valid JSON: {exc}") from exc
        return list(data)
    records: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ParameterError(
                f"{name} {os.fspath(path)!r} line {number} is not valid JSON ({exc}); "
                "expected a JSON array or one JSON object per line"
            ) from exc
    return records


def split_sentences(text: str) -> list[str]:
    """Sentences at ``.``, ``?``, ``!`` followed by whitespace, and after ``。！？``.

    >>> split_sentences("It rains. Does it? 是的。好")
    ['It rains.', 'Does it?', '是的。', '好']
    """
    return [part.strip() for part in _SENTENCE_END.split(text or "") if part and part.strip()]


def _question(raw: dict[str, Any]) -> str | None:
    for key in ("question", "query"):
        if isinstance(raw.get(key), str) and raw[key].strip():
            return str(raw[key]).strip()
    for key, value in raw.items():
        lowered = str(key).lower()
        if ("question" in lowered or "query" in lowered) and isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _answers(raw: dict[str, Any]) -> list[str]:
    from mx_rag.corag.metrics import as_answer_list

    out: list[str] = []
    for key in _ANSWER_KEYS:
        for answer in as_answer_list(raw.get(key)):
            if answer not in out:
                out.append(answer)
    return out


def _hotpot_context(context: Any) -> dict[str, list[str]]:
    pairs: list[tuple[Any, Any]]
    if isinstance(context, dict):  # Hugging Face layout
        pairs = list(zip(context.get("title") or [], context.get("sentences") or [], strict=False))
    else:
        pairs = [(e[0], e[1]) for e in context or [] if isinstance(e, (list, tuple)) and len(e) >= 2]
    table: dict[str, list[str]] = {}
    for title, sentences in pairs:
        if isinstance(sentences, str):
            sentences = [sentences]
        table[str(title)] = [str(s) for s in sentences or []]
    return table


def _hotpot_supporting(facts: Any) -> list[tuple[str, list[int]]]:
    if isinstance(facts, dict):  # Hugging Face layout
        entries: list[Any] = list(zip(facts.get("title") or [], facts.get("sent_id") or [], strict=False))
    else:
        entries = [tuple(entry[:2]) for entry in facts or [] if isinstance(entry, (list, tuple)) and entry]
    out: list[tuple[str, list[int]]] = []
    for entry in entries:
        title = str(entry[0])
        where = entry[1] if len(entry) > 1 else []
        indices = where if isinstance(where, (list, tuple)) else [where]
        out.append((title, [i for i in indices if isinstance(i, int) and not isinstance(i, bool)]))
    return out


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def parse_item(raw: Any, index: int) -> MultiHopItem:
    """One record as a ``MultiHopItem``; ``index`` is its position in the file.

    Raises:
        ParameterError: the record is not an object or has no question/query text.
    """
    if not isinstance(raw, dict):
        raise ParameterError(f"record {index} is a {type(raw).__name__}, expected a JSON object")
    question = _question(raw)
    if question is None:
        raise ParameterError(f"record {index} has no question: expected a 'question' or 'query' string")
    record_id = next((str(raw[k]) for k in _ID_KEYS if raw.get(k) not in (None, "")), "")
    answer = raw.get("answer", raw.get("answers", raw.get("golden_answers", "")))
    item = MultiHopItem(index=index, id=record_id, question=question, answer=answer, answers=_answers(raw))
    if isinstance(raw.get("paragraphs"), list):
        supporting = [p for p in raw["paragraphs"] if isinstance(p, dict) and p.get("is_supporting")]
        facts = [s for p in supporting for s in split_sentences(str(p.get("paragraph_text") or p.get("text") or ""))]
        titles = _unique([str(p.get("title") or "") for p in supporting])
        return replace(item, format="musique", supporting_titles=titles, golden_facts=facts)
    if "supporting_facts" in raw or "context" in raw:
        context = _hotpot_context(raw.get("context"))
        support = _hotpot_supporting(raw.get("supporting_facts"))
        facts = []
        for title, indices in support:
            sentences = context.get(title, [])
            facts += [sentences[i].strip() for i in indices if 0 <= i < len(sentences) and sentences[i].strip()]
        titles = _unique([title for title, _ in support])
        return replace(item, format="hotpotqa", supporting_titles=titles, golden_facts=facts)
    return item


def iter_passages(raw_items: list[Any]) -> Iterator[tuple[str, str]]:
    """Every paragraph of HotpotQA/MuSiQue records as ``(title, "Title\\ntext")``, first occurrence only.

    Build a retrieval corpus from it so that retrieved texts map back to titles::

        texts = [text for _, text in iter_passages(json.load(open("hotpotqa.json")))]
    """
    seen: set[str] = set()
    for raw in raw_items:
        if not isinstance(raw, dict):
            continue
        if isinstance(raw.get("paragraphs"), list):
            pairs = [(str(p.get("title") or ""), str(p.get("paragraph_text") or p.get("text") or ""))
                     for p in raw["paragraphs"] if isinstance(p, dict)]
        else:
            context = _hotpot_context(raw.get("context"))
            pairs = [(title, "".join(sentences).strip()) for title, sentences in context.items()]
        for title, body in pairs:
            text = f"{title}\n{body}" if title else body
            if body and text not in seen:
                seen.add(text)
                yield title, text

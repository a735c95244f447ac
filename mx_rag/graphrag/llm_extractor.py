# SPDX-License-Identifier: Apache-2.0
"""``LLMExtractor``: one LLM call per chunk, answered in (possibly broken) JSON."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mx_rag.graphrag.extraction import Chunk, Entity, Extraction, Relation
from mx_rag.graphrag.json_repair import loads_tolerant
from mx_rag.graphrag.prompts import EXTRACTION_PROMPTS, JSON_REPAIR_PROMPTS, fill
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import LLMLike, chat_llm
from mx_rag.utils.checks import check_bool, check_instance, check_int, check_str
from mx_rag.utils.common import MAX_PROMPT_LENGTH, Lang

__all__ = ["MAX_WORKERS", "LLMExtractor", "approx_tokens", "parse_extraction"]

logger = logging.getLogger(__name__)

MAX_WORKERS = 512
MAX_FIELD_CHARS = 2000

_ENTITY_LISTS = ("entities", "entity", "nodes", "实体", "实体列表")
_RELATION_LISTS = ("relations", "relationships", "relation", "edges", "triples", "关系", "关系列表")
_NAME = ("name", "entity", "entity_name", "名称", "实体", "实体名称", "名字")
_TYPE = ("type", "entity_type", "类型", "实体类型")
_DESCRIPTION = ("description", "desc", "描述", "说明", "关系描述")
_SOURCE = ("source", "head", "subject", "from", "源", "源实体", "头实体", "主体")
_TARGET = ("target", "tail", "object", "to", "目标", "目标实体", "尾实体", "客体")
_RELATION = ("relation", "relationship", "predicate", "type", "关系", "谓语")


def default_extraction_config() -> LLMParameterConfig:
    return LLMParameterConfig(temperature=0.0, max_tokens=1024)


def approx_tokens(text: str) -> int:
    """A rough token count: one per CJK character, one per four other characters."""
    cjk = sum(1 for char in text if "\u3000" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff")
    return cjk + (len(text) - cjk + 3) // 4


class LLMExtractor:
    """Extract entities and relations from chunks with an LLM, ``max_workers`` calls at a time.

    Each answer is read with ``loads_tolerant`` (code fences, single quotes, trailing commas,
    cut-off lists, Chinese keys); an answer that still cannot be read gives an empty extraction,
    or, with ``repair_with_llm``, one more call asking the LLM to rewrite it as JSON.

    Args:
        llm: the ``Text2TextLLM`` (or any ``ChatLLM``, or a LangChain model) to ask.
        lang: ``Lang.EN`` or ``Lang.CH``: the language of the built-in prompt.
        max_workers: concurrent LLM calls, 1 to 512. Default 5.
        prompt: a replacement prompt containing ``{text}`` (1 to 1 MiB characters).
        llm_config: generation settings (default: temperature 0, 1024 tokens).
        repair_with_llm: ask the LLM to repair JSON that cannot be read. Default False.

    Example:
        >>> extractor = LLMExtractor(llm, Lang.EN, max_workers=8)
        >>> extractor.extract([Chunk("c1", "Ada Lovelace was born in London.")])
    """

    def __init__(
        self,
        llm: LLMLike,
        lang: Lang = Lang.EN,
        max_workers: int = 5,
        prompt: str | None = None,
        llm_config: LLMParameterConfig | None = None,
        repair_with_llm: bool = False,
    ) -> None:
        self._llm = chat_llm("llm", llm, stream=False)
        self._lang = check_instance("lang", lang, Lang)
        self._max_workers = check_int("max_workers", max_workers, 1, MAX_WORKERS)
        self._prompt = EXTRACTION_PROMPTS[lang] if prompt is None else check_str("prompt", prompt, 1, MAX_PROMPT_LENGTH)
        self._config = default_extraction_config() if llm_config is None else llm_config
        check_instance("llm_config", self._config, LLMParameterConfig)
        self._repair = check_bool("repair_with_llm", repair_with_llm)

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One ``Extraction`` per chunk, in order; LLM errors propagate."""
        if not chunks:
            return []
        workers = min(self._max_workers, len(chunks))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mxrag-extract") as pool:
            return list(pool.map(self._extract_one, chunks))

    def estimate(self, chunks: Sequence[Chunk]) -> tuple[int, int, int]:
        """``(llm_calls, prompt_tokens, completion_tokens)`` that extracting ``chunks`` will take
        (approximate; repair calls not counted)."""
        prompt_tokens = sum(approx_tokens(fill(self._prompt, text=c.text)) for c in chunks)
        completion = sum(min(self._config.max_tokens, approx_tokens(c.text) + 40) for c in chunks)
        return len(chunks), prompt_tokens, completion

    def _extract_one(self, chunk: Chunk) -> Extraction:
        answer = self._llm.chat(fill(self._prompt, text=chunk.text), llm_config=self._config)
        data = _read(answer)
        if data is None and self._repair:
            repaired = self._llm.chat(fill(JSON_REPAIR_PROMPTS[self._lang], text=answer), llm_config=self._config)
            data = _read(repaired)
        if data is None:
            logger.warning("chunk %s: the LLM answer is not JSON; nothing extracted from it", chunk.id)
            return Extraction()
        return parse_extraction(data)


def _read(answer: str) -> Any:
    try:
        return loads_tolerant(answer)
    except ValueError:
        return None


def parse_extraction(data: Any) -> Extraction:
    """Read entities and relations from a parsed answer: ``{"entities", "relations"}``, or a bare
    list of relation triples (``Head``/``Relation``/``Tail``, Chinese keys accepted)."""
    if isinstance(data, list):
        data = {"relations": data}
    if not isinstance(data, dict):
        return Extraction()
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    entities = [_entity(item) for item in _first_list(lowered, _ENTITY_LISTS)]
    relations = [_relation(item) for item in _first_list(lowered, _RELATION_LISTS)]
    return Extraction(
        entities=tuple(e for e in entities if e is not None),
        relations=tuple(r for r in relations if r is not None),
    )


def _first_list(data: dict[str, Any], keys: tuple[str, ...]) -> list[Any]:
    for key in keys:
        value = data.get(key)
        if isinstance(value, list):
            return value
    return []


def _field(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = item.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value).strip()[:MAX_FIELD_CHARS]
    return ""


def _lower_keys(item: Any) -> dict[str, Any] | None:
    return {str(k).strip().lower(): v for k, v in item.items()} if isinstance(item, dict) else None


def _entity(item: Any) -> Entity | None:
    if isinstance(item, str):
        return Entity(item.strip()[:MAX_FIELD_CHARS]) if item.strip() else None
    fields = _lower_keys(item)
    if fields is None:
        return None
    name = _field(fields, _NAME)
    return Entity(name, _field(fields, _TYPE), _field(fields, _DESCRIPTION)) if name else None


def _relation(item: Any) -> Relation | None:
    if isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item):
        source, relation, target = (x.strip()[:MAX_FIELD_CHARS] for x in item)
        return Relation(source, target, relation) if source and target else None
    fields = _lower_keys(item)
    if fields is None:
        return None
    source, target = _field(fields, _SOURCE), _field(fields, _TARGET)
    if not source or not target:
        return None
    return Relation(source, target, _field(fields, _RELATION), _field(fields, _DESCRIPTION))

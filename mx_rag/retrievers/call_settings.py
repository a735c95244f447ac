# SPDX-License-Identifier: Apache-2.0
"""Per-call settings of retrievers: ``retriever.invoke(query, k=3, filter_dict=...)``.

LangChain passes the keyword arguments of ``invoke``/``ainvoke`` on to
``_get_relevant_documents(query, *, run_manager, **kwargs)``. Every mx_rag retriever turns them
into a :class:`CallSettings` with its ``_call_settings(kwargs)`` method: the retriever's own
fields, overridden by the call's values, which are checked by the same functions as the fields
(same messages, same ranges). An unknown keyword raises ``ParameterError``.

A subclass that must restrict every search (to one knowledge base, say) overrides
``_call_settings`` and narrows the ``filter_dict`` of the settings its parent returns::

    class KnowledgeRetriever(Retriever):
        def _call_settings(self, kwargs):
            settings = super()._call_settings(kwargs)
            return settings.narrowed_to(allowed_document_ids)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, field_validator

from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.storage.document_store.base_storage import document_ids_filter
from mx_rag.storage.validation import DocumentIds, check_k
from mx_rag.utils.checks import check_number, check_str, fail
from mx_rag.utils.common import MAX_PROMPT_LENGTH, MAX_TOP_K
from mx_rag.utils.validated import ParameterErrorInit

__all__ = [
    "ALL_SETTINGS",
    "CallSettings",
    "CallSettingsRetriever",
    "check_filter_dict",
    "check_k",
    "check_score_threshold",
    "resolve_call_settings",
]

ALL_SETTINGS = ("k", "score_threshold", "filter_dict")
# read by LangChain's invoke itself (for its callbacks) and passed on with the other keywords
_LANGCHAIN_KEYWORDS = frozenset({"verbose"})


def check_score_threshold(value: Any) -> float | None:
    """``score_threshold``: None, or a number in [0, 1]."""
    return None if value is None else check_number("score_threshold", value, 0.0, 1.0)


def check_filter_dict(value: Any) -> dict[str, Any]:
    """``filter_dict``: None or ``{}`` (no filter), or ``{"document_id": [ids]}``; returns a copy."""
    document_ids_filter(value)
    return dict(value or {})


def _frozen_filter(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    plain = {key: list(ids) if isinstance(ids, tuple) else ids for key, ids in (value or {}).items()}
    ids = document_ids_filter(plain)
    if isinstance(ids, DocumentIds):  # unchangeable already: kept, so stores see the same object each call
        return MappingProxyType({"document_id": ids})
    return MappingProxyType({} if ids is None else {"document_id": tuple(ids)})


@dataclass(frozen=True)
class CallSettings:
    """The effective settings of one retrieval call (immutable).

    Attributes:
        k: documents to return.
        score_threshold: minimum scaled similarity, or None.
        filter_dict: read-only ``{"document_id": (ids...)}``, or empty for no filter. Given as a
            dict (``dataclasses.replace(settings, filter_dict={"document_id": [1, 2]})``), it is
            checked and frozen.
    """

    k: int
    score_threshold: float | None = None
    filter_dict: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "filter_dict", _frozen_filter(self.filter_dict))

    @property
    def document_ids(self) -> tuple[int, ...] | None:
        """The documents searched, or None for all of them."""
        ids = self.filter_dict.get("document_id")
        return None if ids is None else tuple(ids)

    @property
    def search_filter(self) -> dict[str, Any] | None:
        """``filter_dict`` as the stores take it (a fresh dict), or None when there is no filter."""
        ids = self.filter_dict.get("document_id")
        if isinstance(ids, DocumentIds):
            return {"document_id": ids}
        return None if ids is None else {"document_id": list(ids)}

    def narrowed_to(self, document_ids: Iterable[int]) -> CallSettings:
        """These settings searching only ``document_ids`` (within the current filter, if any)."""
        allowed = set(document_ids)
        current = self.document_ids
        ids = allowed if current is None else allowed.intersection(current)
        return dataclasses.replace(self, filter_dict={"document_id": sorted(ids)})


def resolve_call_settings(
    owner: str, kwargs: Mapping[str, Any], defaults: CallSettings, supported: Collection[str] = ALL_SETTINGS,
    *, max_k: int = MAX_TOP_K,
) -> CallSettings:
    """``defaults`` overridden by the call's keywords, each checked like the field it overrides.

    Args:
        owner: the retriever's class name, for messages.
        kwargs: the keywords of the call (``verbose``, which LangChain itself reads, is ignored).
        defaults: the retriever's own settings.
        supported: the keywords this retriever takes, a subset of ``ALL_SETTINGS``.
        max_k: the largest ``k``.
    """
    given = {key: value for key, value in kwargs.items() if key not in _LANGCHAIN_KEYWORDS}
    unknown = sorted(set(given) - set(supported))
    if unknown:
        raise ParameterError(
            f"{owner} got unknown keyword argument(s) {unknown}: the per-call settings it takes are {sorted(supported)}"
        )
    changes: dict[str, Any] = {}
    if "k" in given:
        changes["k"] = check_k(given["k"], max_k)
    if "score_threshold" in given:
        changes["score_threshold"] = check_score_threshold(given["score_threshold"])
    if "filter_dict" in given:
        changes["filter_dict"] = check_filter_dict(given["filter_dict"])
    return dataclasses.replace(defaults, **changes) if changes else defaults


class CallSettingsRetriever(ParameterErrorInit, BaseRetriever):
    """Base of mx_rag retrievers: ``invoke`` and ``ainvoke`` take per-call settings.

    Subclasses implement ``_call_settings(kwargs) -> CallSettings`` and
    ``_get_relevant_documents(query, *, run_manager=None, **kwargs)``, which resolves its
    settings through ``self._call_settings(kwargs)``.

    The constructor is keyword-only; an invalid argument raises ``ParameterError``; unknown
    fields are refused. The fields several retrievers share are checked here, where a subclass
    declares them: ``k``, ``score_threshold`` and ``filter_dict`` like the per-call settings;
    ``llm_config`` (an ``LLMParameterConfig``) and ``prompt`` (None or a ``PromptTemplate`` whose
    only input variable is ``question``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    @field_validator("k", mode="before", check_fields=False)
    @classmethod
    def _check_k(cls, value: Any) -> int | None:
        return check_k(value)

    @field_validator("score_threshold", mode="before", check_fields=False)
    @classmethod
    def _check_threshold(cls, value: Any) -> float | None:
        return check_score_threshold(value)

    @field_validator("filter_dict", mode="before", check_fields=False)
    @classmethod
    def _check_filter(cls, value: Any) -> dict[str, Any]:
        return check_filter_dict(value)

    @field_validator("llm_config", mode="before", check_fields=False)
    @classmethod
    def _check_llm_config(cls, value: Any) -> Any:
        if not isinstance(value, LLMParameterConfig):
            raise fail("llm_config", value, "an LLMParameterConfig")
        return value

    @field_validator("prompt", mode="before", check_fields=False)
    @classmethod
    def _check_prompt(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, PromptTemplate) or set(value.input_variables) != {"question"}:
            raise fail("prompt", value, "a PromptTemplate whose input_variables are exactly ['question']")
        check_str("prompt.template", value.template, 1, MAX_PROMPT_LENGTH)
        return value

    def set_filter(self, filter_dict: dict[str, Any]) -> None:
        """Restrict later searches to ``{"document_id": [ids]}`` (retrievers with a ``filter_dict``)."""
        self.filter_dict = check_filter_dict(filter_dict)

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        raise NotImplementedError

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await run_in_executor(
            None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **kwargs
        )

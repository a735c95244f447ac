# SPDX-License-Identifier: Apache-2.0
"""``BMRetriever``: the LLM turns the question into keywords; BM25 ranks the given documents by them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate
from pydantic import Field, PrivateAttr, field_validator

from mx_rag.errors import RemoteResponseError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import ChatLLM, chat_llm
from mx_rag.retrievers.bm25 import BM25Index
from mx_rag.retrievers.call_settings import CallSettings, CallSettingsRetriever, resolve_call_settings
from mx_rag.storage.document_store.text_tokens import tokenize
from mx_rag.utils.checks import check_str, fail
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["DEFAULT_KEYWORD_PROMPT", "BMRetriever", "split_keywords"]

MAX_DOCS = 1000

DEFAULT_KEYWORD_PROMPT = PromptTemplate(
    input_variables=["question"],
    template=(
        "从问题中提取不超过10个检索关键词。尽量拆成单独的名词、动词或形容词，不要用长词组，"
        "以便匹配到用词不同但意思相关的资料。关键词之间用逗号分隔。\n"
        "Question: CANN如何安装？\n"
        "Keywords: CANN, 安装, install\n"
        "Question: MindStudio 容器镜像怎么制作\n"
        "Keywords: MindStudio, 容器镜像, Docker build\n"
        "Question: {question}\n"
        "Keywords:\n"
    ),
)

_SEPARATORS = re.compile(r"[,，、;；\n]+")


def split_keywords(text: str) -> list[str]:
    """The default ``preprocess_func``: the LLM's answer split at commas (ASCII or Chinese), 、 ; and lines.

    >>> split_keywords("CANN, 安装，install")
    ['CANN', '安装', 'install']
    """
    return [part.strip(" {}[]\"'") for part in _SEPARATORS.split(text) if part.strip(" {}[]\"'")]


class BMRetriever(CallSettingsRetriever):
    """Keyword search over a list of documents: the LLM extracts keywords, BM25 ranks by them.

    Args (keyword only):
        docs: the documents to search, 0 to 1000 ``Document``s (indexed once, at construction).
        llm: a ``Text2TextLLM`` (or any object with ``chat``) that writes the keywords.
        k: how many documents to return, 1 to 10000 (default 1).
        llm_config: settings of the keyword call (default temperature 0.5, top_p 0.95).
        prompt: a ``PromptTemplate`` whose only input variable is ``question`` (template of 1 to
            1 MiB characters); default ``DEFAULT_KEYWORD_PROMPT``.
        preprocess_func: turns the LLM's answer into keywords (default ``split_keywords``).

    Each keyword is tokenised as the documents are (jieba for Chinese, lower-cased words
    elsewhere), so "Docker build" matches documents holding "docker" or "build". Documents come
    back best first with their BM25 score in ``metadata["score"]``; documents sharing no keyword
    are left out. ``invoke`` takes ``k`` for one call (``retriever.invoke(question, k=3)``).

    Example:
        >>> retriever = BMRetriever(docs=docs, llm=llm, k=10)                 # doctest: +SKIP
        >>> retriever.invoke("怎么安装MindIE?")                                # doctest: +SKIP

    Raises:
        ParameterError: an argument is out of range (at construction), or the query is.
        RemoteResponseError: the LLM answered no keyword.
    """

    docs: list[Document]
    llm: ChatLLM
    k: int = 1
    llm_config: LLMParameterConfig = Field(default_factory=lambda: LLMParameterConfig(temperature=0.5, top_p=0.95))
    prompt: PromptTemplate = DEFAULT_KEYWORD_PROMPT
    preprocess_func: Callable[[str], list[str]] | None = None

    _index: BM25Index = PrivateAttr()

    @field_validator("docs", mode="before")
    @classmethod
    def _check_docs(cls, value: Any) -> Any:
        if not isinstance(value, list) or len(value) > MAX_DOCS:
            raise fail("docs", value, f"a list of 0 to {MAX_DOCS} Documents")
        for i, doc in enumerate(value):
            if not isinstance(doc, Document):
                raise fail(f"docs[{i}]", doc, "a langchain_core Document")
        return value

    @field_validator("preprocess_func", mode="before")
    @classmethod
    def _check_preprocess(cls, value: Any) -> Any:
        if value is not None and not callable(value):
            raise fail("preprocess_func", value, "None or a function str -> list[str]")
        return value

    def model_post_init(self, context: Any) -> None:
        self._index = BM25Index([doc.page_content for doc in self.docs])

    @field_validator("llm", mode="before")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        return chat_llm("llm", value, stream=False)

    def keywords(self, query: str) -> list[str]:
        """The keywords the LLM gives for ``query`` (after ``preprocess_func``)."""
        check_str("query", query, 1, TEXT_MAX_LEN)
        answer = self.llm.chat(self.prompt.format(question=query), llm_config=self.llm_config)
        split = self.preprocess_func or split_keywords
        words = split(answer) if answer.strip() else []
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise fail("preprocess_func's result", words, "a list of str")
        if not any(w.strip() for w in words):
            raise RemoteResponseError(f"the LLM gave no keywords for the query (answer: {answer[:200]!r})")
        return words

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        """The field ``k``, overridden by the call's ``k``."""
        return resolve_call_settings(type(self).__name__, kwargs, CallSettings(k=self.k), ("k",))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        k = self._call_settings(kwargs).k
        words = self.keywords(query)
        if not self.docs:
            return []
        tokens = [token for word in words for token in tokenize(word)]
        scores = self._index.scores(tokens)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])[:k]
        return [Document(page_content=self.docs[i].page_content, id=self.docs[i].id,
                         metadata={**self.docs[i].metadata, "score": scores[i]}) for i in order]

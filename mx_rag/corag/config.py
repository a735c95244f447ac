# SPDX-License-Identifier: Apache-2.0
"""``CoRagBaseConfig``: the settings shared by the CoRAG agent, sample generator and evaluator.

Example:
    >>> from mx_rag.corag.config import CoRagBaseConfig
    >>> from mx_rag.llm import Text2TextLLM
    >>> from mx_rag.utils import ClientParam
    >>> llm = Text2TextLLM(base_url="http://127.0.0.1:8000/v1/chat/completions", model_name="qwen",
    ...                    client_param=ClientParam(use_http=True))
    >>> config = CoRagBaseConfig(llm, "http://127.0.0.1:9000/retrieve", num_threads=4,
    ...                          client_param=ClientParam(use_http=True))
    >>> config.final_llm is llm, config.max_path_length
    (True, 3)
"""

from __future__ import annotations

from typing import Any

from mx_rag.corag.types import DocumentSource
from mx_rag.utils.checks import check_bool, check_int, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MAX_TOP_K

__all__ = ["DEFAULT_SAMPLE_TASK_DESC", "DEFAULT_TASK_DESC", "CoRagBaseConfig", "check_llm", "check_source"]

# Our wording of the original's path-sampling instruction. The original ends it with Qwen3's
# "/no_think" switch; we leave it out: it is a model-specific control token that other models read
# as literal text (and it would leak into every prompt and training sample). Reasoning blocks a
# thinking model still emits are stripped by the parsers instead.
DEFAULT_TASK_DESC = (
    "You are a helpful assistant that answers complex, multi-step questions with a search tool. "
    "Break the question down into simple sub-queries and search for one at a time. After each "
    "search, give a short sub-answer based on the retrieved documents. When you know enough, "
    "give the final answer. Use the format: SubQuery: ..., SubAnswer: ..., Final Answer: ..."
)
DEFAULT_SAMPLE_TASK_DESC = "answer multi-hop questions"

MAX_THREADS = 64
MAX_PATH_LENGTH = 32


def check_llm(name: str, llm: Any, *, optional: bool = False) -> Any:
    """A ``Text2TextLLM``, any object with ``chat(query, llm_config=...)`` or a LangChain model
    (see ``mx_rag.llm.protocol.chat_llm``); None when optional."""
    if llm is None and optional:
        return None
    from mx_rag.llm.protocol import chat_llm

    return chat_llm(name, llm, stream=False)


def check_source(name: str, source: Any, client_param: ClientParam) -> Any:
    """A retrieval-API URL (checked against ``client_param``), a ``DocumentSource`` or a LangChain
    retriever."""
    if isinstance(source, str):
        from mx_rag.utils.http import check_url

        return check_url(name, source, client_param)
    if isinstance(source, DocumentSource):
        return source
    from langchain_core.retrievers import BaseRetriever

    if isinstance(source, BaseRetriever):
        return source
    raise fail(name, source, "a retrieval API URL, a DocumentSource (retrieve(query, top_k)) or a LangChain retriever")


class CoRagBaseConfig:
    """Validated CoRAG settings; ``final_llm`` and ``sub_answer_llm`` default to ``base_llm``.

    Args:
        base_llm: generates the sub-queries (and everything else by default).
        retrieve_api_url: the retrieval API (POST ``{"query", "top_k"}``), or (our addition) a
            ``DocumentSource`` or a LangChain retriever used directly.
        num_threads: parallel items in the sample generator and evaluator, in [1, 64]. Default 8.
        max_path_length: most sub-query steps per path, in [1, 32]. Default 3.
        final_llm: writes the final answer; default ``base_llm``.
        sub_answer_llm: writes the sub-answers; default ``base_llm``.
        judge_llm: judges answers and paths; None: string checks and answer agreement.
        retrieve_top_k: documents per retrieval, in [1, 10000]. Default 5.
        client_param: HTTP settings of the retrieval client; default a fresh ``ClientParam()``.
        context_tokens: (keyword, ours) the models' context window for prompt fitting. Default 4096.
        max_tokens_per_question: (keyword, ours) token budget of one question's path; None: none.
        early_stop: (keyword, ours) let the model end a path when it has enough. Default True.

    Raises:
        ParameterError: an argument has the wrong type or is out of range.
    """

    def __init__(
        self,
        base_llm: Any,
        retrieve_api_url: Any,
        num_threads: int = 8,
        max_path_length: int = 3,
        final_llm: Any = None,
        sub_answer_llm: Any = None,
        judge_llm: Any = None,
        retrieve_top_k: int = 5,
        client_param: ClientParam | None = None,
        *,
        context_tokens: int = 4096,
        max_tokens_per_question: int | None = None,
        early_stop: bool = True,
    ) -> None:
        if client_param is not None and not isinstance(client_param, ClientParam):
            raise fail("client_param", client_param, "None or a ClientParam")
        self.client_param: ClientParam = client_param if client_param is not None else ClientParam()
        self.base_llm = check_llm("base_llm", base_llm)
        self.retrieve_api_url = check_source("retrieve_api_url", retrieve_api_url, self.client_param)
        self.num_threads = check_int("num_threads", num_threads, 1, MAX_THREADS)
        self.max_path_length = check_int("max_path_length", max_path_length, 1, MAX_PATH_LENGTH)
        self.final_llm = self.base_llm if final_llm is None else check_llm("final_llm", final_llm)
        self.sub_answer_llm = self.base_llm if sub_answer_llm is None else check_llm("sub_answer_llm", sub_answer_llm)
        self.judge_llm = check_llm("judge_llm", judge_llm, optional=True)
        self.retrieve_top_k = check_int("retrieve_top_k", retrieve_top_k, 1, MAX_TOP_K)
        self.context_tokens = check_int("context_tokens", context_tokens, 256, 10_000_000)
        if max_tokens_per_question is not None:
            check_int("max_tokens_per_question", max_tokens_per_question, 1, 1_000_000_000)
        self.max_tokens_per_question = max_tokens_per_question
        self.early_stop = check_bool("early_stop", early_stop)

    def __repr__(self) -> str:
        source = self.retrieve_api_url if isinstance(self.retrieve_api_url, str) else type(self.retrieve_api_url)
        return (
            f"CoRagBaseConfig(retrieve_api_url={source!r}, num_threads={self.num_threads}, "
            f"max_path_length={self.max_path_length}, retrieve_top_k={self.retrieve_top_k}, "
            f"judge_llm={'set' if self.judge_llm is not None else None})"
        )

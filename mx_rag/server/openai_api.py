# SPDX-License-Identifier: Apache-2.0
"""The OpenAI-compatible routes: ``/v1/chat/completions``, ``/v1/models``, ``/v1/embeddings``.

A chat completion answers through a knowledge base (``model`` = ``"<kb>"`` or ``"<kb>/<chain>"``,
see ``answers``). Besides OpenAI's fields, a response carries ``sources`` (text, source file,
page, score of each passage the answer was given), in the body or, when streaming, in the last
chunk before ``data: [DONE]``; a ``graph`` chain's answer also carries ``graph``, the entities and
relations around it (``answers.GraphChain.view``). ``usage`` is what the LLM server reported for the calls the chain
made (a count of words where it reported none). Extra request fields: ``k`` (passages retrieved).
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

import base64
import contextvars
import json
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from mx_rag.app.answers import Answerer, parse_model, question_of, source_entries
from mx_rag.app.users import Principal
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.usage import Usage, start_usage_meter, usage_meter
from mx_rag.server import metrics
from mx_rag.server.errors import ApiError
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["ChatRequest", "EmbeddingRequest", "openai_router"]

MAX_MESSAGES = 256
MAX_EMBED_INPUTS = 2048


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1, max_length=200)
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1, le=100_000)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=100_000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    k: int | None = Field(default=None, ge=1, le=100)


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: str | list[str] = Field(min_length=1)
    model: str = Field(default="default", max_length=200)
    encoding_format: Literal["float", "base64"] = "float"


def openai_router(answerer: Answerer, principal: Any) -> APIRouter:
    """The routes, acting for ``principal(request)``."""
    router = APIRouter()
    Who = Annotated[Principal, Depends(principal)]
    service = answerer.service
    settings = service.settings

    @router.get("/v1/models")
    def models(who: Who) -> dict[str, Any]:
        names = service.names(who)
        return {"object": "list",
                "data": [{"id": name, "object": "model", "created": 0, "owned_by": who.user_id} for name in names]}

    @router.post("/v1/chat/completions", response_model=None)
    def chat(body: ChatRequest, who: Who) -> Any:
        kb, chain_type = parse_model(body.model, settings.chain.type)
        question = question_of(body.messages)
        chain = answerer.chain(who, kb, chain_type, question, body.k)
        config = LLMParameterConfig(
            max_tokens=body.max_completion_tokens or body.max_tokens or settings.llm.max_tokens,
            temperature=settings.llm.temperature if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
        )
        if body.seed is not None:
            config = config.replace(seed=body.seed)
        ident, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())
        if body.stream:
            return StreamingResponse(_sse(answerer, chain, question, config, ident, created, body.model),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        with usage_meter() as usage:
            result = answerer.answer(chain, question, config)
        answer = result.get("result", "")
        return {
            "id": ident, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": _usage(usage, question.text, answer),
            **_extra(result),
        }

    @router.post("/v1/embeddings")
    def embeddings(body: EmbeddingRequest, who: Who) -> dict[str, Any]:
        texts = [body.input] if isinstance(body.input, str) else body.input
        if not 1 <= len(texts) <= MAX_EMBED_INPUTS or any(not 0 < len(t) <= TEXT_MAX_LEN for t in texts):
            raise ApiError(400, "invalid_argument", f"input must be 1 to {MAX_EMBED_INPUTS} non-empty strings "
                           f"of at most {TEXT_MAX_LEN} characters")
        vectors = service.embedding.embed_documents(texts)
        encode = _base64 if body.encoding_format == "base64" else list
        return {"object": "list", "model": body.model,
                "data": [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": sum(len(t.split()) for t in texts),
                          "total_tokens": sum(len(t.split()) for t in texts)}}

    return router


def _extra(result: dict[str, Any]) -> dict[str, Any]:
    """What an answer carries besides its text: sources, a graph chain's graph, whether it was cached."""
    return {"sources": source_entries(result), **({"graph": result["graph"]} if "graph" in result else {}),
            **({"cached": True} if result.get("cached") else {})}


def _base64(vector: Any) -> str:
    """A vector as OpenAI's ``encoding_format="base64"`` sends it: little-endian float32 bytes."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _usage(usage: Usage, prompt: str, answer: str) -> dict[str, int]:
    """Token counts as the LLM server reported them; a count of words where it reported none."""
    if usage.reported:
        prompt_tokens, completion_tokens = usage.prompt_tokens, usage.completion_tokens
    else:
        prompt_tokens, completion_tokens = len(prompt.split()), len(answer.split())
    metrics.count_tokens(prompt_tokens, completion_tokens)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _sse(answerer: Answerer, chain: Any, question: Any, config: LLMParameterConfig, ident: str, created: int,
         model: str) -> Iterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    pieces: list[str] = []  # joined only for a word count, where the LLM reported no usage
    # Starlette runs each step of this generator in a fresh copy of the context: every step of
    # the chain runs in this one Context instead, so the usage meter sees the whole stream.
    context = contextvars.copy_context()
    usage = context.run(start_usage_meter)
    items = answerer.stream(chain, question, config)
    result: dict[str, Any] = {}
    try:
        while (item := context.run(next, items, None)) is not None:
            kind, value = item
            if kind == "delta":
                pieces.append(value)
                yield chunk({"content": value})
            else:
                result = value
        answer = "" if usage.reported else "".join(pieces)
        yield chunk({}, "stop", usage=_usage(usage, question.text, answer), **_extra(result))
    except Exception as exc:  # the status line is sent: the error goes in the stream
        error = {"error": {"code": "upstream_error", "message": " ".join(str(exc).split())[:500]}}
        yield f"data: {json.dumps(error)}\n\n"
    yield "data: [DONE]\n\n"

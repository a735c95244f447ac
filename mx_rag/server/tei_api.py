# SPDX-License-Identifier: Apache-2.0
"""TEI-compatible routes: ``POST /embed`` and ``POST /rerank``, as text-embeddings-inference answers.

=========  ============================================================  =================================
route      request body                                                  answer
=========  ============================================================  =================================
/embed     ``{"inputs": str | [str], "normalize"?: true, "truncate"?}``  ``[[float, ...], ...]``, one per
                                                                         input (a str input: one vector)
/rerank    ``{"query": str, "texts": [str], "raw_scores"?: false,        ``[{"index": i, "score": s}]``
           "return_text"?: false, "truncate"?}``                         (``"text"`` too with
                                                                         return_text), best score first
=========  ============================================================  =================================

``/embed`` serves the server's own embedding model (the one its knowledge bases are built with),
so ``TEIEmbedding("<server>/embed")`` gives the vectors the server searches with. Its vectors are
always unit length: ``"normalize": false`` is refused (400). ``/rerank`` serves a local
cross-encoder, ``[chain] reranker`` of the settings (a model directory; no reranker ships with
mx_rag, so without one ``/rerank`` answers 503). Scores are the sigmoid of the model's logit, as
TEI gives them, or the logit itself with ``"raw_scores": true``. Both truncate every input to
the model's length whatever ``truncate`` says (TEI would refuse an over-long input without it).

The limits are those of the clients, per request: 1 to 1024 inputs (a client batch), each of 1 to
128 Mi characters for ``/embed``, 1 to 1 Mi characters for ``/rerank`` and its query; the
request body is bounded by ``max_body_mb`` first.
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr

from mx_rag.app.users import Principal
from mx_rag.embedding.inputs import MAX_TEXT_LEN
from mx_rag.errors import MxRagError
from mx_rag.reranker.reranker import Reranker
from mx_rag.server.errors import ApiError
from mx_rag.server.service import KnowledgeService
from mx_rag.utils.common import MAX_BATCH_SIZE, MAX_PROMPT_LENGTH

__all__ = ["EmbedRequest", "RerankRequest", "tei_router"]

BATCH = 32  # texts per forward pass


class EmbedRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    inputs: StrictStr | list[StrictStr]
    normalize: StrictBool = True
    truncate: StrictBool | None = None


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: StrictStr
    texts: list[StrictStr]
    raw_scores: StrictBool = False
    return_text: StrictBool = False
    truncate: StrictBool | None = None


def _check_texts(what: str, texts: list[str], max_len: int) -> None:
    """1 to MAX_BATCH_SIZE texts of 1 to ``max_len`` characters; the texts are never echoed."""
    if not 1 <= len(texts) <= MAX_BATCH_SIZE:
        raise ApiError(400, "invalid_argument", f"{what} must hold 1 to {MAX_BATCH_SIZE} texts, got {len(texts)}")
    for index, text in enumerate(texts):
        if not 1 <= len(text) <= max_len:
            raise ApiError(400, "invalid_argument",
                           f"{what}[{index}] must have 1 to {max_len} characters, got {len(text)}")


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _reranker(service: KnowledgeService) -> Reranker:
    reranker = service.reranker()
    if reranker is None:
        raise ApiError(503, "no_reranker", "this server has no reranker model: set [chain] reranker in "
                       "mxrag.toml (or MXRAG_CHAIN__RERANKER) to a local cross-encoder directory, "
                       "e.g. bge-reranker-base; mx_rag ships none")
    return reranker


def tei_router(service: KnowledgeService, principal: Any) -> APIRouter:
    """``/embed`` and ``/rerank`` over ``service``'s embedding and reranker, acting for ``principal(request)``."""
    router = APIRouter()
    Who = Annotated[Principal, Depends(principal)]

    @router.post("/embed")
    def embed(body: EmbedRequest, who: Who) -> list[list[float]]:
        if not body.normalize:
            raise ApiError(400, "invalid_argument", "normalize=false is not supported: this server's "
                           "embedding model gives unit-length vectors only")
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        _check_texts("inputs", texts, MAX_TEXT_LEN)
        return [list(map(float, v)) for v in service.embedding.embed_documents(texts, batch_size=BATCH)]

    @router.post("/rerank")
    def rerank(body: RerankRequest, who: Who) -> list[dict[str, Any]]:
        if not 1 <= len(body.query) <= MAX_PROMPT_LENGTH:
            raise ApiError(400, "invalid_argument",
                           f"query must have 1 to {MAX_PROMPT_LENGTH} characters, got {len(body.query)}")
        _check_texts("texts", body.texts, MAX_PROMPT_LENGTH)
        try:
            model = _reranker(service)
        except MxRagError as exc:
            raise ApiError(503, "no_reranker", f"the reranker model is not usable: {exc}") from exc
        try:
            logits = [float(s) for s in model.rerank(body.query, body.texts, batch_size=BATCH)]
        except (OSError, ValueError, ImportError) as exc:  # inputs are checked: the model did not load
            raise ApiError(503, "no_reranker", f"the reranker model could not be loaded: "
                           f"{type(exc).__name__}: {exc}") from exc
        scores = logits if body.raw_scores else [_sigmoid(x) for x in logits]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        out: list[dict[str, Any]] = []
        for i in order:
            item: dict[str, Any] = {"index": i, "score": scores[i]}
            if body.return_text:
                item["text"] = body.texts[i]
            out.append(item)
        return out

    return router

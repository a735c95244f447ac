# SPDX-License-Identifier: Apache-2.0
"""``TEIReranker``: reranking by a TEI server (``/rerank``) or a Cohere/Jina-style ``/v1/rerank``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mx_rag.errors import ParameterError, RemoteResponseError
from mx_rag.reranker.reranker import MAX_RERANK_ITEMS, Reranker
from mx_rag.utils.checks import check_int, check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MAX_BATCH_SIZE, MAX_PROMPT_LENGTH
from mx_rag.utils.http import HttpClient, check_url

__all__ = ["TEIReranker"]


class TEIReranker(Reranker):
    """Scores texts against a query with a remote reranking service.

    The wire format follows the URL: ``.../v1/rerank`` sends ``{"query", "documents"}`` and
    reads ``results[].relevance_score``; ``.../rerank`` (TEI) sends ``{"query", "texts",
    "truncate": true}`` and reads ``[{index, score}]``.

    Example:
        >>> TEIReranker(url="http://127.0.0.1:8080/rerank", k=3,
        ...             client_param=ClientParam(use_http=True))   # doctest: +SKIP
    """

    def __init__(self, url: str, k: int = 1, client_param: ClientParam | None = None) -> None:
        super().__init__(k)
        self.client_param = client_param or ClientParam()
        self.url = check_url("url", url, self.client_param).rstrip("/")
        if self.url.endswith("/v1/rerank"):
            self._cohere_style = True
        elif self.url.endswith("/rerank"):
            self._cohere_style = False
        else:
            raise ParameterError(f"url must end with /rerank or /v1/rerank, got {url!r}")
        self._http = HttpClient(self.client_param)

    def rerank(self, query: str, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One score per text, in input order.

        Args:
            query: 1 to 1 MiB characters.
            texts: 1 to 1,000,000 strings of 1 to 1 MiB characters each.
            batch_size: texts per request, in [1, 1024].
        """
        check_str("query", query, 1, MAX_PROMPT_LENGTH)
        if not isinstance(texts, (list, tuple)):
            raise fail("texts", texts, f"a list of 1 to {MAX_RERANK_ITEMS} strings")
        if not 1 <= len(texts) <= MAX_RERANK_ITEMS:
            raise ParameterError(f"texts must hold 1 to {MAX_RERANK_ITEMS} strings, got {len(texts)}")
        for i, text in enumerate(texts):
            check_str(f"texts[{i}]", text, 1, MAX_PROMPT_LENGTH)
        check_int("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        scores: list[float] = []
        for start in range(0, len(texts), batch_size):
            scores.extend(self._batch(query, list(texts[start : start + batch_size])))
        return np.asarray(scores, dtype=np.float64)

    def _batch(self, query: str, texts: list[str]) -> list[float]:
        if self._cohere_style:
            data = self._http.post_json(self.url, {"query": query, "documents": texts}).json()
            items, key = (data.get("results") if isinstance(data, dict) else None), "relevance_score"
        else:
            items, key = (
                self._http.post_json(self.url, {"query": query, "texts": texts, "truncate": True}).json(),
                "score",
            )
        return _scores_by_index(items, key, len(texts), self.url)


def _scores_by_index(items: Any, key: str, count: int, url: str) -> list[float]:
    if not isinstance(items, list) or len(items) != count:
        raise RemoteResponseError(f"expected {count} rerank results, got {str(items)[:200]!r}", url=url)
    scores: list[float | None] = [None] * count
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get(key) if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or scores[index] is not None:
            raise RemoteResponseError(f"malformed rerank result {str(item)[:200]!r}", url=url)
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise RemoteResponseError(f"malformed rerank score {str(item)[:200]!r}", url=url)
        scores[index] = float(score)
    return [float(s) for s in scores if s is not None]

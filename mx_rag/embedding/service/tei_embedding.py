# SPDX-License-Identifier: Apache-2.0
"""``TEIEmbedding``: vectors from a text-embeddings-inference (TEI) or OpenAI-style embedding server.

The wire format follows the URL's path, as in the original:

=====================  ==========================================  ==================================
URL path ends with     request body (per batch)                    answer -> result
=====================  ==========================================  ==================================
``/embed``             ``{"inputs": [...], "truncate": true}``     list of vectors
``/embeddings``        ``{"input": [...]}`` (+ ``"model"``)        ``data[].embedding``, by ``index``
``/embed_sparse``      ``{"inputs": [...], "truncate": true}``     per text ``[{index, value}]`` -> dict
=====================  ==========================================  ==================================
"""

from __future__ import annotations

import logging
import math
from typing import Any
from urllib.parse import urlsplit

from langchain_core.embeddings import Embeddings

from mx_rag.embedding.inputs import check_batch_size, check_text, check_texts
from mx_rag.errors import ParameterError, RemoteResponseError
from mx_rag.utils.checks import check_choice, check_instance, check_optional_str
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MAX_MODEL_NAME_LENGTH
from mx_rag.utils.factory import Creatable
from mx_rag.utils.http import HttpClient, check_url
from mx_rag.utils.lifecycle import Closable

logger = logging.getLogger(__name__)

__all__ = ["TEIEmbedding"]

DENSE, OPENAI, SPARSE = "/embed", "/embeddings", "/embed_sparse"
EMBED_MODES = ("dense", "sparse")


def wire_format(url: str) -> str:
    """The wire format named by the end of the URL's path; ``ParameterError`` when there is none."""
    path = urlsplit(url).path.rstrip("/")
    for suffix in (SPARSE, OPENAI, DENSE):
        if path.endswith(suffix):
            return suffix
    raise ParameterError(
        f"url {url!r} is not supported: its path must end with /embed (TEI), /embed_sparse (TEI sparse) "
        "or /embeddings (OpenAI style, e.g. /v1/embeddings)"
    )


class TEIEmbedding(Embeddings, Creatable, Closable):
    """An embedding client for TEI (``/embed``, ``/embed_sparse``) and OpenAI-style (``/v1/embeddings``) servers.

    One pooled HTTP connection set per instance, reused across calls and threads. Texts are sent
    in batches of ``batch_size``; the result keeps the input order. Vectors are returned as the
    server sends them (TEI normalises by default).

    Args:
        url: the full endpoint URL; its path's ending picks the wire format (see the module doc).
        client_param: TLS, API key, timeouts and retries; default ``ClientParam()`` (https only).
        embed_mode: ``"dense"`` or ``"sparse"``; kept for compatibility, the URL decides (as in the original).
        batch_size: texts per request, 1 to 1024 (``embed_documents`` may override it per call).
        model_name: sent as ``"model"`` to ``/embeddings`` endpoints when given.

    Example:
        >>> from mx_rag.embedding.service import TEIEmbedding
        >>> from mx_rag.utils import ClientParam
        >>> emb = TEIEmbedding("http://127.0.0.1:8080/embed", client_param=ClientParam(use_http=True))
        >>> # emb.embed_documents(["first text", "second text"]) -> [[...], [...]]
        >>> emb.close()

    Raises:
        ParameterError: an argument is out of range or the URL has no supported ending.
        RemoteError: the server failed, or answered with the wrong shape or number of vectors.
    """

    def __init__(
        self,
        url: str,
        client_param: ClientParam | None = None,
        embed_mode: str = "dense",
        batch_size: int = 32,
        *,
        model_name: str | None = None,
    ) -> None:
        param = ClientParam() if client_param is None else check_instance("client_param", client_param, ClientParam)
        self.url = check_url("url", url, param).rstrip("/")
        self.embed_mode = check_choice("embed_mode", embed_mode, EMBED_MODES)
        self.batch_size = check_batch_size(batch_size)
        self.model_name = check_optional_str("model_name", model_name, 1, MAX_MODEL_NAME_LENGTH)
        self._format = wire_format(self.url)
        if (self._format == SPARSE) != (embed_mode == "sparse"):
            logger.debug("embed_mode=%r is ignored: the URL %s selects the wire format", embed_mode, self.url)
        self._client = HttpClient(param)

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()


    def embed_documents(self, texts: list[str], batch_size: int | None = None) -> list[Any]:
        """One result per text, in input order: ``list[float]``, or ``dict[int, float]`` for ``/embed_sparse``.

        Args:
            texts: 1 to 1,000,000 strings of 1 to 128 Mi characters each.
            batch_size: texts per request, 1 to 1024; default: the instance's ``batch_size``.
        """
        texts = check_texts("texts", texts)
        size = self.batch_size if batch_size is None else check_batch_size(batch_size)
        out: list[Any] = []
        for start in range(0, len(texts), size):
            out.extend(self._request(texts[start:start + size]))
        if self._format != SPARSE and len({len(vector) for vector in out}) > 1:
            raise RemoteResponseError("the server returned vectors of different lengths", url=self.url)
        return out

    def embed_query(self, text: str) -> Any:
        """The result for one text."""
        check_text("text", text)
        return self._request([text])[0]

    # -- wire format -----------------------------------------------------------------------

    def _request(self, batch: list[str]) -> list[Any]:
        if self._format == OPENAI:
            payload: dict[str, Any] = {"input": batch}
            if self.model_name:
                payload["model"] = self.model_name
        else:
            payload = {"inputs": batch, "truncate": True}
        body = self._client.post_json(self.url, payload).json()
        results: list[Any]
        if self._format == OPENAI:
            results = self._openai_vectors(body)
        elif self._format == SPARSE:
            results = [self._sparse(i, item) for i, item in enumerate(self._list(body, "the answer"))]
        else:
            results = [self._vector(item, f"vector {i}") for i, item in enumerate(self._list(body, "the answer"))]
        if len(results) != len(batch):
            raise RemoteResponseError(
                f"the server returned {len(results)} embeddings for {len(batch)} texts", url=self.url
            )
        return results

    def _fail(self, what: str, value: Any) -> RemoteResponseError:
        shown = repr(value)
        shown = shown if len(shown) <= 200 else shown[:200] + "..."
        return RemoteResponseError(f"unexpected answer: {what}, got {shown}", url=self.url)

    def _list(self, value: Any, what: str) -> list[Any]:
        if not isinstance(value, list):
            raise self._fail(f"{what} must be a JSON list", value)
        return value

    def _number(self, value: Any, what: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._fail(f"{what} must be a finite number", value)
        return float(value)

    def _vector(self, value: Any, what: str) -> list[float]:
        items = self._list(value, what)
        if not items:
            raise self._fail(f"{what} must not be empty", value)
        return [self._number(item, what) for item in items]

    def _openai_vectors(self, body: Any) -> list[list[float]]:
        data = body.get("data") if isinstance(body, dict) else None
        entries = self._list(data, "the answer's 'data'")
        if not all(isinstance(entry, dict) and "embedding" in entry for entry in entries):
            raise self._fail("each item of 'data' must be an object with an 'embedding'", data)
        indices = [entry.get("index") for entry in entries]
        if all(index is None for index in indices):  # no index at all: the order sent is the order
            return [self._vector(entry["embedding"], f"data[{i}]") for i, entry in enumerate(entries)]
        if sorted(i for i in indices if isinstance(i, int) and not isinstance(i, bool)) != list(range(len(entries))):
            raise self._fail(f"the 'index' fields must be 0 to {len(entries) - 1}, each once", indices)
        ordered = sorted(entries, key=lambda entry: entry["index"])
        return [self._vector(entry["embedding"], f"data[index={i}]") for i, entry in enumerate(ordered)]

    def _sparse(self, position: int, value: Any) -> dict[int, float]:
        out: dict[int, float] = {}
        for entry in self._list(value, f"sparse result {position}"):
            index = entry.get("index") if isinstance(entry, dict) else None
            if isinstance(index, bool) or not isinstance(index, int):
                raise self._fail(f"sparse result {position} must hold {{index: int, value: number}} items", entry)
            out[index] = self._number(entry.get("value"), f"sparse result {position} value")
        return out

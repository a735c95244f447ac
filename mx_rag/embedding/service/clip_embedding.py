# SPDX-License-Identifier: Apache-2.0
"""``CLIPEmbedding``: text and image vectors from a CLIP service (clip-as-service's ``/encode`` API).

Request (per batch): ``{"data": [{"text": ...} | {"blob": <base64 image>}], "parameters":
{"drop_image_content": true}}``; answer: ``{"data": [{"embedding": [...]}, ...]}``, one item per
input, in order.
"""

from __future__ import annotations

import math
import re

from langchain_core.embeddings import Embeddings

from mx_rag.embedding.inputs import check_batch_size, check_items, check_text, check_texts
from mx_rag.errors import RemoteResponseError
from mx_rag.utils.checks import check_instance, check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MB
from mx_rag.utils.factory import Creatable
from mx_rag.utils.http import HttpClient, check_url

__all__ = ["CLIPEmbedding"]

MAX_URL_LENGTH = 128
MAX_IMAGES = 1000
MAX_IMAGE_LEN = 10 * MB
_BASE64 = re.compile(r"[A-Za-z0-9+/=]+")


class CLIPEmbedding(Embeddings, Creatable):
    """A client of a CLIP embedding service: ``embed_documents``/``embed_query`` for texts,
    ``embed_images`` for base64-encoded images (one vector space for both).

    Args:
        url: the service endpoint (e.g. ``https://host:51000/encode``), at most 128 characters.
        client_param: TLS, timeouts, retries; default ``ClientParam()`` (https only).

    Example:
        >>> from mx_rag.embedding.service import CLIPEmbedding
        >>> from mx_rag.utils import ClientParam
        >>> clip = CLIPEmbedding.create(url="http://127.0.0.1:51000/encode", client_param=ClientParam(use_http=True))
        >>> # clip.embed_documents(["a dog"]) -> [[...512 floats]]

    Raises:
        ParameterError: an argument is out of range.
        RemoteError: the service failed or answered with the wrong shape or number of vectors.
    """

    def __init__(self, url: str, client_param: ClientParam | None = None) -> None:
        param = ClientParam() if client_param is None else check_instance("client_param", client_param, ClientParam)
        check_str("url", url, 1, MAX_URL_LENGTH)
        self.url = check_url("url", url, param)
        self._client = HttpClient(param)

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def embed_documents(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """One vector per text (1 to 1,000,000 texts of 1 to 128 Mi characters), in order."""
        texts = check_texts("texts", texts)
        check_batch_size(batch_size)
        return self._encode([{"text": text} for text in texts], batch_size)

    def embed_query(self, text: str) -> list[float]:
        """The vector of one text."""
        check_text("text", text)
        return self._encode([{"text": text}], 1)[0]

    def embed_images(self, images: list[str], batch_size: int = 32) -> list[list[float]]:
        """One vector per image: 1 to 1000 base64 strings of at most 10 MiB each.

        A smaller ``batch_size`` helps when the service answers 500 for large batches.
        """
        check_items("images", images, MAX_IMAGES)
        for i, image in enumerate(images):
            check_str(f"images[{i}]", image, 1, MAX_IMAGE_LEN)
            if _BASE64.fullmatch(image) is None:
                raise fail(f"images[{i}]", image, "a base64 string (characters A-Z a-z 0-9 + / =)")
        check_batch_size(batch_size)
        return self._encode([{"blob": image} for image in images], batch_size)

    def _encode(self, items: list[dict[str, str]], batch_size: int) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(items), batch_size):
            batch = items[start:start + batch_size]
            body = self._client.post_json(self.url, {"data": batch, "parameters": {"drop_image_content": True}}).json()
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list) or len(data) != len(batch):
                raise RemoteResponseError(f"expected {{'data': [...]}} with {len(batch)} items, got {str(body)[:200]}",
                                          url=self.url)
            for i, item in enumerate(data):
                vector = item.get("embedding") if isinstance(item, dict) else None
                if not isinstance(vector, list) or not vector or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vector):
                    raise RemoteResponseError(f"item {start + i} has no usable 'embedding' list of numbers",
                                              url=self.url)
                out.append([float(v) for v in vector])
        if len({len(v) for v in out}) > 1:
            raise RemoteResponseError("the service returned vectors of different lengths", url=self.url)
        return out

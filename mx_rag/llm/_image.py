# SPDX-License-Identifier: Apache-2.0
"""Shared base of the image-generation clients and the reading of their answers."""

from __future__ import annotations

import base64
from typing import Any

from mx_rag.errors import RemoteResponseError
from mx_rag.utils.checks import check_instance, check_optional_str, check_pattern
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import IMAGE_SIZE_PATTERN, MAX_MODEL_NAME_LENGTH
from mx_rag.utils.http import HttpClient, HttpResponse, check_url

_JSON_IMAGE_KEYS = ("image", "images", "result", "data", "b64_json")


class ImageModel:
    """``url``, ``model_name``, ``client_param`` and one pooled HTTP client."""

    def __init__(self, url: str, model_name: str | None = None, client_param: ClientParam | None = None) -> None:
        self.client_param = check_instance("client_param", client_param or ClientParam(), ClientParam)
        self.url = check_url("url", url, self.client_param)
        self.model_name = check_optional_str("model_name", model_name, 1, MAX_MODEL_NAME_LENGTH)
        self._http = HttpClient(self.client_param)

    def close(self) -> None:
        self._http.close()

    def _post(self, payload: dict[str, Any], size: str) -> HttpResponse:
        check_pattern("size", size, IMAGE_SIZE_PATTERN)
        return self._http.post_json(self.url, {**payload, "size": size, "model_name": self.model_name})


def image_as_base64(response: HttpResponse) -> str:
    """The image of a response as base64 text: a JSON field holding it, or the raw image bytes."""
    content_type = response.headers.get("content-type", "")
    if "json" not in content_type:
        if not response.content:
            raise RemoteResponseError("the image service answered an empty body", url=response.url)
        return base64.b64encode(response.content).decode("ascii")
    found = _find_image(response.json())
    if found is None:
        raise RemoteResponseError(
            f"no image in the JSON answer (looked for {list(_JSON_IMAGE_KEYS)}): {response.text[:200]!r}",
            url=response.url,
        )
    return found


def _find_image(data: Any) -> str | None:
    if isinstance(data, str) and data:
        return data.partition(";base64,")[2] if data.startswith("data:") else data
    if isinstance(data, list) and data:
        return _find_image(data[0])
    if isinstance(data, dict):
        for key in _JSON_IMAGE_KEYS:
            if key in data:
                found = _find_image(data[key])
                if found:
                    return found
    return None

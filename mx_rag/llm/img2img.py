# SPDX-License-Identifier: Apache-2.0
"""``Img2ImgMultiModel``: image-to-image generation over the original SDK's JSON payload."""

from __future__ import annotations

from mx_rag.llm._image import ImageModel, image_as_base64
from mx_rag.utils.checks import check_str
from mx_rag.utils.common import MAX_IMAGE_CONTENT_LEN, MAX_PROMPT_LENGTH

__all__ = ["Img2ImgMultiModel"]


class Img2ImgMultiModel(ImageModel):
    """An image-to-image service (e.g. IP-Adapter on Stable Diffusion).

    Args:
        url: the service URL (https, or http with ``ClientParam(use_http=True)``).
        model_name: sent as ``model_name`` in the request; optional.
        client_param: connection settings; raise ``response_limit_size`` for big images.

    Example:
        >>> from mx_rag.llm import Img2ImgMultiModel
        >>> from mx_rag.utils import ClientParam
        >>> model = Img2ImgMultiModel(url="http://127.0.0.1:9000/img2img", model_name="sd",
        ...                           client_param=ClientParam(use_http=True))
        >>> # model.img2img("make it a knight", image_content=<base64 png>)["result"]
    """

    def img2img(self, prompt: str, image_content: str, size: str = "512*512") -> dict[str, str]:
        """POST ``{"prompt", "image", "size", "model_name"}``.

        Returns:
            ``{"prompt": prompt, "result": <base64 image>}`` from the answer's ``image`` field.
        """
        check_str("prompt", prompt, 1, MAX_PROMPT_LENGTH)
        check_str("image_content", image_content, 1, MAX_IMAGE_CONTENT_LEN)
        response = self._post({"prompt": prompt, "image": image_content}, size)
        return {"prompt": prompt, "result": image_as_base64(response)}

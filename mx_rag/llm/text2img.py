# SPDX-License-Identifier: Apache-2.0
"""``Text2ImgMultiModel``: text-to-image generation over the original SDK's JSON payload."""

from __future__ import annotations

from mx_rag.llm._image import ImageModel, image_as_base64
from mx_rag.utils.checks import check_choice, check_str
from mx_rag.utils.common import IMAGE_OUTPUT_FORMATS, MAX_PROMPT_LENGTH

__all__ = ["Text2ImgMultiModel"]


class Text2ImgMultiModel(ImageModel):
    """A text-to-image service (e.g. a Stable Diffusion server).

    Args:
        url: the service URL (https, or http with ``ClientParam(use_http=True)``).
        model_name: sent as ``model_name`` in the request; optional.
        client_param: connection settings. Images are large: raise ``response_limit_size``
            (up to 10 MiB) for big outputs.

    Example:
        >>> from mx_rag.llm import Text2ImgMultiModel
        >>> from mx_rag.utils import ClientParam
        >>> model = Text2ImgMultiModel(url="http://127.0.0.1:9000/text2img", model_name="sd",
        ...                            client_param=ClientParam(use_http=True))
        >>> # model.text2img("dog wearing black glasses", output_format="jpg")["result"]  (base64)
    """

    def text2img(self, prompt: str, output_format: str = "png", size: str = "512*512") -> dict[str, str]:
        """POST ``{"prompt", "output_format", "size", "model_name"}``.

        Returns:
            ``{"prompt": prompt, "result": <base64 image>}``; the result is taken from a JSON
            image field, or base64-encoded from a raw image body.
        """
        check_str("prompt", prompt, 1, MAX_PROMPT_LENGTH)
        check_choice("output_format", output_format, IMAGE_OUTPUT_FORMATS)
        response = self._post({"prompt": prompt, "output_format": output_format}, size)
        return {"prompt": prompt, "result": image_as_base64(response)}

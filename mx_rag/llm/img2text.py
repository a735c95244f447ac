# SPDX-License-Identifier: Apache-2.0
"""``Img2TextLLM``: describe an image with a vision-language model (OpenAI ``image_url`` content)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydantic import Field

from mx_rag.llm._chat import ChatModel
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import build_messages
from mx_rag.utils.checks import check_optional_str, check_str, fail
from mx_rag.utils.common import LLM_TEXT_MAX_LEN, MAX_PROMPT_LENGTH

__all__ = ["IMG_TO_TEXT_PROMPT", "Img2TextLLM"]

IMG_TO_TEXT_PROMPT = (
    "请分两层描述这张图片（通常是表格或图表）。"
    "第一层概括：图片的类型、用途和想表达的主要结论。"
    "第二层细节：表头或坐标轴、单位、数据系列、关键数值和趋势，以及图中的标签、注释和图例。"
    "只描述图中确实存在的内容，不要臆测。"
)


def check_image_url(image_url: Any) -> dict[str, str]:
    """``{"url": "data:image/<type>;base64,<data>"}`` with well-formed base64, at most 4 MiB."""
    if not isinstance(image_url, dict) or set(image_url) != {"url"}:
        raise fail("image_url", image_url, 'a dict with the single key "url"')
    url = check_str('image_url["url"]', image_url["url"], 1, LLM_TEXT_MAX_LEN)
    _, sep, data = url.partition(";base64,")
    if not url.startswith("data:image") or not sep:
        raise fail('image_url["url"]', url, "a data URL of the form data:image/<type>;base64,<data>")
    try:
        if not base64.b64decode(data, validate=True):
            raise ValueError("empty image")
    except (binascii.Error, ValueError) as exc:
        raise fail('image_url["url"]', url, f"valid, non-empty base64 image data ({exc})") from exc
    return {"url": url}


class Img2TextLLM(ChatModel):
    """A vision-language chat model used to caption images (tables, figures, photos).

    Args:
        base_url: chat-completions URL of the VLM server.
        model_name: model name sent in each request.
        prompt: instruction sent with every image (1 to 1 MiB characters); a two-level
            description of tables and figures by default.
        llm_config: default generation settings (own copy per instance).
        client_param: ``ClientParam`` for TLS, API key, headers, timeouts and retries.

    Example:
        >>> from mx_rag.llm import Img2TextLLM
        >>> from mx_rag.utils import ClientParam
        >>> vlm = Img2TextLLM(base_url="http://127.0.0.1:8000/v1/chat/completions",
        ...                   model_name="qwen2.5-vl", client_param=ClientParam(use_http=True))
        >>> # vlm.chat({"url": "data:image/png;base64,iVBORw0..."})
    """

    prompt: str = Field(default=IMG_TO_TEXT_PROMPT)

    def model_post_init(self, context: Any, /) -> None:
        check_str("prompt", self.prompt, 1, MAX_PROMPT_LENGTH)
        super().model_post_init(context)

    def chat(
        self,
        image_url: dict[str, str],
        sys_messages: list[dict[str, Any]] | None = None,
        role: str = "user",
        llm_config: LLMParameterConfig | None = None,
        prompt: str | None = None,
    ) -> str:
        """Describe one image. ``prompt`` overrides the instance prompt for this call only."""
        image = check_image_url(image_url)
        text = check_optional_str("prompt", prompt, 1, MAX_PROMPT_LENGTH) or self.prompt
        messages, config = self._resolve(role, sys_messages, llm_config)
        return self._complete(build_messages(messages, role, _image_content(text, image)), config)

    def _prompt_messages(self, prompt: str) -> list[dict[str, Any]]:
        """LangChain's ``prompt`` is the image as a ``data:image/...;base64,...`` URL."""
        return build_messages([], "user", _image_content(self.prompt, check_image_url({"url": prompt})))


def _image_content(text: str, image: dict[str, str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": image}]

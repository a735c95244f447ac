# SPDX-License-Identifier: Apache-2.0
"""``chat_url``: the chat-completions URL of an OpenAI-compatible server, from the URL a user has.

``mxrag llm serve`` prints a base URL (``http://127.0.0.1:8080/v1``); other tools print the full
chat URL. Both are accepted wherever a command or a setting takes an LLM URL.
"""

from __future__ import annotations

__all__ = ["chat_url"]


def chat_url(url: str) -> str:
    """An OpenAI-compatible chat URL from a base URL (``.../v1``) or the full one.

    Example:
        >>> chat_url("http://127.0.0.1:8080/v1/")
        'http://127.0.0.1:8080/v1/chat/completions'
    """
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"

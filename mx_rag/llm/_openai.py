# SPDX-License-Identifier: Apache-2.0
"""The OpenAI chat-completions wire format: request bodies, responses and a tolerant SSE reader."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from mx_rag.errors import RemoteResponseError
from mx_rag.llm.llm_parameter import LLMParameterConfig

TRUNCATION_MARK = "......"  # appended when the server stopped at max_tokens (original behaviour)


def build_messages(sys_messages: Sequence[dict[str, Any]] | None, role: str, content: Any) -> list[dict]:
    """A new message list: copies of ``sys_messages`` then the user turn. Inputs stay untouched."""
    return [dict(message) for message in sys_messages or ()] + [{"role": role, "content": content}]


def chat_body(
    model: str,
    messages: list[dict[str, Any]],
    config: LLMParameterConfig,
    *,
    stream: bool,
    stop: list[str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": config.max_tokens,
        "presence_penalty": config.presence_penalty,
        "frequency_penalty": config.frequency_penalty,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": config.seed,
        "stream": stream,
    }
    if stop:
        body["stop"] = list(stop)
    return body


def _first_choice(data: Any, url: str) -> dict[str, Any]:
    if isinstance(data, dict) and "error" in data:
        raise RemoteResponseError(f"the server reported an error: {_error_text(data['error'])}", url=url)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RemoteResponseError(f"response has no choices: {str(data)[:200]!r}", url=url)
    return choices[0]


def parse_completion(data: Any, url: str) -> str:
    """Answer text of a non-streaming chat completion; a null content is the empty answer."""
    choice = _first_choice(data, url)
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else ""
    if choice.get("finish_reason") == "length":
        text += TRUNCATION_MARK
    return text


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def sse_events(lines: Iterable[str]) -> Iterator[str]:
    """Data payloads of a server-sent-event stream.

    Accepts ``data:`` with or without the space, multi-line data, comments and other fields,
    and a last event without its blank line.
    """
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def stream_deltas(lines: Iterable[str], url: str) -> Iterator[str]:
    """Text deltas of a streamed chat completion.

    Null and missing ``delta.content`` are skipped, content in the chunk that carries
    ``finish_reason`` is kept, an ``{"error": ...}`` event raises, and a stream that ends with
    neither ``[DONE]`` nor a ``finish_reason`` raises ``RemoteResponseError`` (it was cut).
    """
    finish: str | None = None
    events = sse_events(lines)
    for payload in events:
        if payload.strip() == "[DONE]":
            for _ in events:  # read to the end of the body so the connection returns to the pool
                pass
            break
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise RemoteResponseError(f"malformed stream event: {payload[:200]!r}", url=url) from exc
        if isinstance(data, dict) and not data.get("choices") and "error" not in data:
            continue  # e.g. a trailing usage-only chunk
        choice = _first_choice(data, url)
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            yield content
        finish = choice.get("finish_reason") or finish
    else:
        if finish is None:
            raise RemoteResponseError("the stream ended before the answer was finished", url=url)
    if finish == "length":
        yield TRUNCATION_MARK

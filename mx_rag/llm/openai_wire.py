# SPDX-License-Identifier: Apache-2.0
"""The OpenAI chat-completions wire format: messages, request bodies, responses and a tolerant SSE reader."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from mx_rag.errors import RemoteError, RemoteResponseError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.usage import metering, record_usage
from mx_rag.utils import bounded_json
from mx_rag.utils.checks import check_str, fail
from mx_rag.utils.common import (
    LLM_TEXT_MAX_LEN,
    MAX_MESSAGE_KEY_LEN,
    MAX_MESSAGE_KEYS,
    MAX_SYS_MESSAGES,
)

__all__ = [
    "EXCERPT_CHARS",
    "TRUNCATION_MARK",
    "build_messages",
    "chat_body",
    "check_sys_messages",
    "parse_completion",
    "parse_message",
    "sse_events",
    "stream_deltas",
]

logger = logging.getLogger(__name__)

TRUNCATION_MARK = "......"  # appended when the server stopped at max_tokens (original behaviour)
EXCERPT_CHARS = 200


def build_messages(sys_messages: Sequence[dict[str, Any]] | None, role: str, content: Any) -> list[dict]:
    """A new message list: copies of ``sys_messages`` then the user turn. Inputs stay untouched."""
    return [dict(message) for message in sys_messages or ()] + [{"role": role, "content": content}]


def check_sys_messages(sys_messages: Any) -> list[dict[str, Any]]:
    """None or a list of at most 16 dicts, each with at most 16 keys of at most 16 characters and
    str values of at most 4 MiB (non-str values, such as content-part lists, are passed through)."""
    if sys_messages is None:
        return []
    if not isinstance(sys_messages, list):
        raise fail("sys_messages", sys_messages, "None or a list of dicts")
    if len(sys_messages) > MAX_SYS_MESSAGES:
        raise fail("sys_messages", f"<{len(sys_messages)} messages>", f"at most {MAX_SYS_MESSAGES} messages")
    for i, message in enumerate(sys_messages):
        if not isinstance(message, dict):
            raise fail(f"sys_messages[{i}]", message, "a dict")
        if len(message) > MAX_MESSAGE_KEYS:
            raise fail(f"sys_messages[{i}]", f"<{len(message)} keys>", f"at most {MAX_MESSAGE_KEYS} keys")
        for key, value in message.items():
            check_str(f"sys_messages[{i}] key", key, 1, MAX_MESSAGE_KEY_LEN)
            if isinstance(value, str):
                check_str(f"sys_messages[{i}][{key!r}]", value, 0, LLM_TEXT_MAX_LEN)
    return sys_messages


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
    if stream and metering():
        body["stream_options"] = {"include_usage": True}
    return body


def _error_of(data: Any) -> str | None:
    """The error an answer reports: ``{"error": ...}`` (OpenAI, vLLM, TGI) or
    ``{"object": "error", "message": ...}`` (older vLLM); None for ``"error": null``."""
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        return _error_text(data["error"])
    if data.get("object") == "error":
        return _error_text(data.get("message") or data)
    return None


def _first_choice(data: Any, url: str) -> dict[str, Any]:
    error = _error_of(data)
    if error is not None:
        raise RemoteResponseError(f"the server reported an error: {_short(error)}", url=url)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RemoteResponseError(f"response has no choices: {_short(str(data))!r}", url=url)
    return choices[0]


def _short(text: str) -> str:
    """One line of at most 200 characters."""
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


def _finish_reason(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) and reason else None


def parse_completion(data: Any, url: str) -> str:
    """Answer text of a non-streaming chat completion; a null content is the empty answer."""
    return parse_message(data, url)[0]


def parse_message(data: Any, url: str) -> tuple[str, list[dict[str, Any]]]:
    """Answer text and the tool calls (OpenAI's ``message.tool_calls``, as sent) of a completion."""
    choice = _first_choice(data, url)
    record_usage(data)
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else ""
    if _finish_reason(choice) == "length":
        text += TRUNCATION_MARK
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if calls is not None and (not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)):
        raise RemoteResponseError(f"response has malformed tool_calls: {_short(str(calls))!r}", url=url)
    return text, calls or []


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
    ``finish_reason`` is kept, an ``{"error": ...}`` (or ``{"object": "error"}``) event raises
    ``RemoteResponseError``, and so does a malformed event. A stream that ends, or breaks off,
    before ``[DONE]`` or a ``finish_reason`` raises ``RemoteResponseError`` after the deltas
    received so far: a partial answer never looks complete. Once the answer is finished
    (``finish_reason`` or ``[DONE]`` seen), the rest of the body is read so the connection can
    be reused, and a transport failure there is only logged: the answer is whole.
    Whatever the bytes, the reader yields ``str`` deltas or raises ``RemoteError``; nothing else.
    """
    finish: str | None = None
    received = 0
    events = sse_events(lines)
    while True:
        try:
            payload = next(events, None)
        except RemoteError as exc:
            if finish is None:
                raise
            logger.warning("the stream broke after the answer was finished, ignored: %s", exc)
            break
        if payload is None:
            if finish is None:
                raise RemoteResponseError(
                    f"the stream ended before the answer was finished (no [DONE] and no finish_reason; "
                    f"{received} characters received)",
                    url=url,
                )
            break
        if payload.strip() == "[DONE]":
            _drain(events, url)
            break
        try:
            data = bounded_json.loads(payload)
        except ValueError as exc:
            raise RemoteResponseError(f"malformed stream event: {_short(payload)!r}", url=url) from exc
        record_usage(data)
        if isinstance(data, dict) and not data.get("choices") and _error_of(data) is None:
            continue  # e.g. a trailing usage-only chunk
        choice = _first_choice(data, url)
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            received += len(content)
            yield content
        finish = _finish_reason(choice) or finish
    if finish == "length":
        yield TRUNCATION_MARK


def _drain(events: Iterator[str], url: str) -> None:
    """Read what follows ``[DONE]`` so the connection returns to the pool; its failures do not matter."""
    try:
        for _ in events:
            pass
    except RemoteError as exc:
        logger.debug("reading past [DONE] of %s failed, ignored: %s", url, exc)

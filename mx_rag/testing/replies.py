# SPDX-License-Identifier: Apache-2.0
"""Canned HTTP replies for :class:`~mx_rag.testing.ScriptedServer`, and its default routes."""

from __future__ import annotations

import base64
import itertools
import json as _json
import re
import struct
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TINY_PNG", "Reply", "default_reply"]

_Headers = tuple[tuple[str, str], ...]
_ids = itertools.count(1)
_WORD = re.compile(r"\s*\S+\s*")
_SSE_HEADERS: _Headers = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _build_png(width: int = 2, height: int = 2) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    rows = b"".join(b"\x00" + bytes((200, 40, 40)) * width for _ in range(height))  # filter 0 per row
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(rows))
        + _png_chunk(b"IEND", b"")
    )


TINY_PNG: bytes = _build_png()
"""A valid 2x2 RGB PNG image."""


def _dumps(obj: Any) -> bytes:
    return _json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _sse_event(data: str, space: bool) -> bytes:
    return f"data: {data}\n\n".encode() if space else f"data:{data}\n\n".encode()


def _merge_headers(base: Mapping[str, str], extra: Mapping[str, str] | None) -> _Headers:
    merged = {name.lower(): (name, value) for name, value in base.items()}
    for name, value in (extra or {}).items():
        merged[name.lower()] = (name, value)
    return tuple(merged.values())


def _new_id(prefix: str) -> str:
    return f"{prefix}-scripted-{next(_ids)}"


def _word_count(text: str | None) -> int:
    return len(text.split()) if text else 0


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer; build it with a classmethod, never with the constructor.

    Every classmethod takes ``delay`` (seconds to wait before sending anything)::

        srv.enqueue(Reply.chat("hi"), Reply.stream(["Hel", "lo"], chunk_delay=0.01))
        srv.enqueue(Reply.status(429, headers={"Retry-After": "0"}), Reply.drop(delay=0.5))
    """

    code: int = 200
    headers: _Headers = ()
    body: bytes = b""
    chunks: tuple[bytes, ...] | None = None  # not None: Transfer-Encoding chunked, one HTTP chunk each
    chunk_delay: float = 0.0
    cut_after: int | None = None  # close the socket before writing chunk number cut_after
    close_without_reply: bool = False
    delay: float = 0.0

    # -- OpenAI chat ---------------------------------------------------------------------------

    @classmethod
    def chat(
        cls,
        content: str | None,
        *,
        finish_reason: str | None = "stop",
        model: str = "scripted",
        usage: dict[str, Any] | None = None,
        reasoning_content: str | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A 200 ``chat.completion`` JSON answer (content None is sent as JSON null)."""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning_content is not None:
            message["reasoning_content"] = reasoning_content
        if usage is None:
            words = _word_count(content) + _word_count(reasoning_content)
            usage = {"prompt_tokens": 0, "completion_tokens": words, "total_tokens": words}
        completion = {
            "id": _new_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage,
        }
        return cls.json(completion, delay=delay)

    @classmethod
    def stream(
        cls,
        pieces: list[str | None],
        *,
        finish_reason: str | None = "stop",
        final_content: str | None = None,
        space: bool = True,
        done: bool = True,
        role_chunk: bool = True,
        omit_finish_key: bool = False,
        chunk_delay: float = 0.0,
        cut_after: int | None = None,
        model: str = "scripted",
        usage: dict[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A 200 SSE stream of ``chat.completion.chunk`` events, one HTTP chunk per event.

        ``cut_after=N`` closes the socket after N piece events (no final chunk, no [DONE], no
        terminating HTTP chunk). ``usage`` adds an OpenAI ``include_usage`` chunk before [DONE].
        """
        if cut_after is not None and cut_after < 0:
            raise ValueError(f"cut_after must be >= 0, got {cut_after}")
        chunk_id, created = _new_id("chatcmpl"), int(time.time())

        def event(delta: dict[str, Any], final: bool = False) -> str:
            choice: dict[str, Any] = {"index": 0, "delta": delta}
            if final or not omit_finish_key:
                choice["finish_reason"] = finish_reason if final else None
            chunk = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [choice]}
            return _dumps(chunk).decode("utf-8")

        events: list[str] = []
        if role_chunk:
            events.append(event({"role": "assistant", "content": ""}))
        events.extend(event({"content": piece}) for piece in pieces)
        events.append(event({"content": final_content} if final_content is not None else {}, final=True))
        if usage is not None:
            events.append(_dumps({"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                                  "model": model, "choices": [], "usage": usage}).decode("utf-8"))
        if done:
            events.append("[DONE]")
        cut = None if cut_after is None else int(role_chunk) + min(cut_after, len(pieces))
        return cls(code=200, headers=_SSE_HEADERS, chunks=tuple(_sse_event(e, space) for e in events),
                   chunk_delay=chunk_delay, cut_after=cut, delay=delay)

    @classmethod
    def sse(cls, events: list[str], *, space: bool = True, raw: bool = False, delay: float = 0.0) -> Reply:
        """A 200 SSE stream; each string is sent as ``data: <string>\\n\\n``, one HTTP chunk each.

        Strings starting with ``:`` are sent as SSE comment lines (``<string>\\n\\n``); with
        ``raw=True`` every string is sent exactly as given (include your own ``data:`` and newlines).
        """
        chunks = tuple(
            e.encode("utf-8") if raw else (f"{e}\n\n".encode() if e.startswith(":") else _sse_event(e, space))
            for e in events
        )
        return cls(code=200, headers=_SSE_HEADERS, chunks=chunks, delay=delay)

    @classmethod
    def error_event(cls, message: str, *, code: int | str = 500, delay: float = 0.0) -> Reply:
        """A 200 SSE stream with one ``{"error": {...}}`` event and no [DONE]."""
        error = {"error": {"message": message, "type": "server_error", "code": code}}
        return cls.sse([_dumps(error).decode("utf-8")], delay=delay)

    # -- plain HTTP ----------------------------------------------------------------------------

    @classmethod
    def status(
        cls,
        code: int,
        body: str | dict[str, Any] = "",
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """Any status; dict bodies go as JSON, strings as text/plain."""
        if isinstance(body, dict):
            data, content_type = _dumps(body), "application/json"
        else:
            data, content_type = body.encode("utf-8"), "text/plain; charset=utf-8"
        return cls(code=code, headers=_merge_headers({"Content-Type": content_type}, headers), body=data,
                   delay=delay)

    @classmethod
    def json(cls, obj: Any, *, status: int = 200, chunked: bool = False, delay: float = 0.0) -> Reply:
        """A JSON body, with Content-Length, or chunked without it."""
        return cls.raw(_dumps(obj), status=status, content_type="application/json", chunked=chunked,
                       delay=delay)

    @classmethod
    def raw(
        cls,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/octet-stream",
        chunked: bool = False,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """Arbitrary bytes (``headers`` may override Content-Type)."""
        merged = _merge_headers({"Content-Type": content_type}, headers)
        if chunked:
            return cls(code=status, headers=merged, chunks=(body,) if body else (), delay=delay)
        return cls(code=status, headers=merged, body=body, delay=delay)

    @classmethod
    def drop(cls, *, delay: float = 0.0) -> Reply:
        """Read the request, then close the connection without any response."""
        return cls(close_without_reply=True, delay=delay)

    @classmethod
    def image(cls, *, as_json_key: str | None = None, delay: float = 0.0) -> Reply:
        """:data:`TINY_PNG` as raw ``image/png``, or as JSON ``{as_json_key: <base64>}``."""
        if as_json_key is None:
            return cls.raw(TINY_PNG, content_type="image/png", delay=delay)
        return cls.json({as_json_key: base64.b64encode(TINY_PNG).decode("ascii")}, delay=delay)


# -- default routes (used when the queue is empty) ---------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts: list[str] = []
    images = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url" or "image_url" in part:
            images += 1
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return " ".join(texts) + " [image]" * images


def _echo(payload: dict[str, Any]) -> Reply:
    messages = payload.get("messages")
    messages = messages if isinstance(messages, list) else []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    pieces: list[str] = _WORD.findall("echo: " + _content_text(last.get("content")))
    finish_reason = "stop"
    limit = payload.get("max_tokens", payload.get("max_completion_tokens"))
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 <= limit < len(pieces):
        pieces, finish_reason = pieces[:limit], "length"
        if pieces:
            pieces[-1] = pieces[-1].rstrip()
    model = payload.get("model") if isinstance(payload.get("model"), str) else "scripted"
    prompt = sum(_word_count(_content_text(m.get("content"))) for m in messages if isinstance(m, dict))
    usage = {"prompt_tokens": prompt, "completion_tokens": len(pieces), "total_tokens": prompt + len(pieces)}
    if payload.get("stream") is True:
        options = payload.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        return Reply.stream(list(pieces), finish_reason=finish_reason, model=str(model),
                            usage=usage if wants_usage else None)
    return Reply.chat("".join(pieces), finish_reason=finish_reason, model=str(model), usage=usage)


def default_reply(method: str, path: str, payload: Any) -> Reply:
    """The reply used when the queue is empty (``payload``: the parsed JSON body or None)."""
    route = path.split("?", 1)[0].rstrip("/")
    if route.endswith("chat/completions"):
        return _echo(payload if isinstance(payload, dict) else {})
    if route.endswith("/models"):
        return Reply.json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
    if "text2img" in route:
        return Reply.image()
    if "img2img" in route:
        return Reply.image(as_json_key="image")
    error = {"message": "no route", "type": "not_found_error", "code": 404, "method": method, "path": path}
    return Reply.status(404, {"error": error})

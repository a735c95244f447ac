"""Hypothesis fuzzing of the SSE reader: ``split_lines`` (bytes to lines, mx_rag/utils/http.py)
then ``stream_deltas`` (lines to text deltas, mx_rag/llm/openai_wire.py), the path every streamed
answer takes.

The contract: whatever the bytes, the reader yields non-empty ``str`` deltas and then either
ends or raises ``RemoteResponseError`` with a one-line message; never UnicodeDecodeError,
KeyError, TypeError, IndexError, RecursionError or a json error. On top of it:

* a valid stream gives its pieces whatever its chunking (and lines are split the same way);
* a valid stream cut anywhere before its finish chunk raises, after a prefix of its pieces:
  a partial answer never passes for a complete one;
* the reader ends normally only after ``[DONE]`` or a string ``finish_reason``.

Examples per property: ``MXRAG_FUZZ_EXAMPLES`` (default 150, derandomized so CI always tries
the same inputs; set it, e.g. ``MXRAG_FUZZ_EXAMPLES=20000``, for a random long run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mx_rag.errors import RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.llm.openai_wire import TRUNCATION_MARK, stream_deltas
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam
from mx_rag.utils.http import parse_retry_after, split_lines

URL = "http://127.0.0.1:1/v1/chat/completions"
LONG_RUN = "MXRAG_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("MXRAG_FUZZ_EXAMPLES", "150"))

fuzz = settings(
    max_examples=EXAMPLES,
    derandomize=not LONG_RUN,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def read(chunks: list[bytes], limit: int = 1 << 20) -> tuple[list[str], RemoteResponseError | None]:
    """The deltas the reader yields for ``chunks``, and the error it ended with (if any)."""
    out: list[str] = []
    try:
        for delta in stream_deltas(split_lines(iter(chunks), limit, URL), URL):
            assert isinstance(delta, str) and delta, repr(delta)
            out.append(delta)
    except RemoteResponseError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc), str(exc)
        return out, exc
    return out, None


def rechunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


# -- strategies --------------------------------------------------------------------------------

TOKENS = [b"data:", b"data: ", b"\n", b"\r\n", b"\n\n", b"\r", b": ping\n", b"event: x\n", b"id: 1\n",
          b"[DONE]", b"{", b"}", b"[", b"]", b'"', b",", b":", b'"choices"', b'"delta"', b'"content"',
          b'"finish_reason"', b'"stop"', b'"length"', b'"error"', b'"object"', b"null", b"0", b"\\u",
          b"\xff", b"\xe4\xbd", b"\xa0", b"\x00", "你好".encode()]

sse_bytes = st.lists(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=12)), max_size=60).map(b"".join)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=8), st.sampled_from(["stop", "length", "", "[DONE]"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["choices", "delta", "content", "finish_reason", "error", "message", "object", "usage", "index"]
    ) | st.text(max_size=4), inner, max_size=3)), max_leaves=6)
chunk_like = st.builds(
    lambda delta, finish, extra: {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra},
    st.one_of(json_value, st.fixed_dictionaries({"content": json_value})),
    json_leaf, st.dictionaries(st.sampled_from(["error", "object", "usage"]), json_value, max_size=2),
)
event_payload = st.one_of(json_value.map(json.dumps), chunk_like.map(json.dumps), st.just("[DONE]"),
                          st.text(max_size=20))
pieces = st.lists(st.text(min_size=0, max_size=6), max_size=8)


def valid_stream(parts: list[str], finish: str, space: bool, done: bool) -> tuple[bytes, int]:
    """A stream as ScriptedServer sends it, and the offset where its finish chunk's data line ends."""
    reply = Reply.stream(list(parts), finish_reason=finish, space=space, done=done)
    assert reply.chunks is not None
    finish_index = len(reply.chunks) - (2 if done else 1)  # [role, *pieces, finish, [DONE]]
    body = b"".join(reply.chunks)
    finish_end = len(b"".join(reply.chunks[:finish_index])) + reply.chunks[finish_index].index(b"\n")
    return body, finish_end


def expected_deltas(parts: list[str], finish: str) -> list[str]:
    return [p for p in parts if p] + ([TRUNCATION_MARK] if finish == "length" else [])


# -- properties --------------------------------------------------------------------------------


@fuzz
@given(data=sse_bytes, cuts=st.lists(st.integers(min_value=0), max_size=8),
       limit=st.sampled_from([8, 64, 1 << 20]))
def test_arbitrary_bytes_give_deltas_or_our_error(data: bytes, cuts: list[int], limit: int) -> None:
    read(rechunk(data, cuts), limit)


@fuzz
@given(events=st.lists(event_payload, max_size=6), space=st.booleans())
def test_arbitrary_events_end_normally_only_when_finished(events: list[str], space: bool) -> None:
    body = "".join(f"data:{' ' if space else ''}{line}\n" for e in events for line in [*e.split("\n"), ""])
    _, error = read([body.encode("utf-8", errors="surrogatepass")])
    if error is None:
        assert any(_finishes(e) for e in events), events


def _finishes(payload: str) -> bool:
    if payload.strip() == "[DONE]":
        return True
    try:
        data = json.loads(payload)
    except ValueError:
        return False
    choices = data.get("choices") if isinstance(data, dict) else None
    return bool(isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("finish_reason"), str) and choices[0]["finish_reason"])


@fuzz
@given(parts=pieces, finish=st.sampled_from(["stop", "length"]), space=st.booleans(), done=st.booleans(),
       cuts=st.lists(st.integers(min_value=0), max_size=10))
def test_valid_stream_gives_its_pieces_however_chunked(
    parts: list[str], finish: str, space: bool, done: bool, cuts: list[int]
) -> None:
    body, _ = valid_stream(parts, finish, space, done)
    assert read(rechunk(body, cuts)) == (expected_deltas(parts, finish), None)


@fuzz
@given(parts=pieces, finish=st.sampled_from(["stop", "length"]), space=st.booleans(), at=st.integers(0))
def test_valid_stream_cut_before_its_finish_raises(parts: list[str], finish: str, space: bool, at: int) -> None:
    body, finish_end = valid_stream(parts, finish, space, done=True)
    cut = at % finish_end
    got, error = read([body[:cut]])
    assert error is not None, f"a stream cut at {cut} of {len(body)} bytes passed for complete: {got}"
    wanted = [p for p in parts if p]
    assert got == wanted[: len(got)]


MUTATIONS = ["truncate", "delete", "insert", "flip", "duplicate", "swap-lines", "replace-event"]


@fuzz
@given(parts=pieces, finish=st.sampled_from(["stop", "length"]), mutation=st.sampled_from(MUTATIONS),
       a=st.integers(0), b=st.integers(0), junk=st.one_of(st.sampled_from(TOKENS), st.binary(max_size=8)),
       payload=event_payload, cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_mutated_valid_stream_gives_deltas_or_our_error(
    parts: list[str], finish: str, mutation: str, a: int, b: int, junk: bytes, payload: str, cuts: list[int]
) -> None:
    body, _ = valid_stream(parts, finish, space=True, done=True)
    read(rechunk(mutate(body, mutation, a, b, junk, payload), cuts))


def mutate(body: bytes, mutation: str, a: int, b: int, junk: bytes, payload: str) -> bytes:
    i, j = sorted((a % (len(body) + 1), b % (len(body) + 1)))
    if mutation == "truncate":
        return body[:i]
    if mutation == "delete":
        return body[:i] + body[j:]
    if mutation == "insert":
        return body[:i] + junk + body[i:]
    if mutation == "flip":
        return body[:i] + bytes([body[i] ^ (1 + b % 255)]) + body[i + 1:] if i < len(body) else body
    if mutation == "duplicate":
        return body[:j] + body[i:j] + body[j:]
    lines = body.split(b"\n")
    k, m = a % len(lines), b % len(lines)
    if mutation == "swap-lines":
        lines[k], lines[m] = lines[m], lines[k]
    else:  # replace-event: one data line gets an arbitrary payload
        data_lines = [n for n, line in enumerate(lines) if line.startswith(b"data:")]
        lines[data_lines[a % len(data_lines)]] = b"data: " + payload.encode("utf-8", errors="surrogatepass")
    return b"\n".join(lines)


@fuzz
@given(data=st.binary(max_size=200).map(lambda d: d.replace(b"\r", b"")) | sse_bytes,
       cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_split_lines_does_not_depend_on_chunking(data: bytes, cuts: list[int]) -> None:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    reference = [(line[:-1] if line.endswith(b"\r") else line).decode("utf-8", errors="replace") for line in lines]
    assert list(split_lines(iter(rechunk(data, cuts)), 1 << 20, URL)) == reference


@settings(fuzz, max_examples=max(EXAMPLES // 3, 20))
@given(value=st.one_of(st.text(max_size=40), st.sampled_from(
    ["3600", "1.5", "-1", "1e400", "nan", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
     "Mon, 99 Foo 2024 99:99:99 GMT", "٣", "¹", " 2 "])))
def test_retry_after_parsing_never_raises(value: str) -> None:
    seconds = parse_retry_after(value)
    assert seconds is None or (isinstance(seconds, float) and 0 <= seconds < float("inf"))


# -- a few of them over real HTTP -----------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@settings(fuzz, max_examples=max(EXAMPLES // 5, 20))
@given(parts=pieces, mutation=st.sampled_from(MUTATIONS), a=st.integers(0), b=st.integers(0),
       junk=st.sampled_from(TOKENS), payload=event_payload, cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_mutated_stream_over_http(shared_server: ScriptedServer, parts: list[str], mutation: str, a: int, b: int,
                                  junk: bytes, payload: str, cuts: list[int]) -> None:
    body, _ = valid_stream(parts, "stop", space=True, done=True)
    chunks = tuple(c for c in rechunk(mutate(body, mutation, a, b, junk, payload), cuts) if c)
    shared_server.enqueue(replace(Reply.raw(b"", chunked=True, content_type="text/event-stream"), chunks=chunks))
    llm = Text2TextLLM(base_url=shared_server.url("/v1/chat/completions"), model_name="m",
                       client_param=ClientParam(use_http=True, timeout=5, retries=0))
    out: list[Any] = []
    try:
        out.extend(llm.chat_streamly("q"))
    except RemoteResponseError as exc:
        assert "\n" not in str(exc)
    assert all(isinstance(text, str) for text in out)

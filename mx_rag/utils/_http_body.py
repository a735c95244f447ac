# SPDX-License-Identifier: Apache-2.0
"""Reading response bodies for ``HttpClient`` with bounded memory: gzip and deflate decoded at most
``DECODED_PIECE`` bytes at a time, and a byte stream split into lines under a size cap."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from mx_rag.errors import RemoteResponseError, ResponseTooLargeError

__all__ = ["DECODED_PIECE", "split_lines"]

DECODED_PIECE = 64 * 1024


class _BoundedDecoder:
    """gzip or deflate decoding that never produces more than ``DECODED_PIECE`` bytes at a time."""

    def __init__(self, encoding: str, url: str) -> None:
        self.url = url
        self.deflate = encoding == "deflate"
        self.first = True
        self.obj = zlib.decompressobj(zlib.MAX_WBITS if self.deflate else 16 + zlib.MAX_WBITS)

    def decode(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self.obj.decompress(data, DECODED_PIECE)
            except zlib.error as exc:
                if self.deflate and self.first:  # "deflate" is also sent as raw deflate, without the zlib header
                    self.first = False
                    self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise RemoteResponseError(f"the response body could not be decoded: zlib: {exc}", url=self.url) from exc
            self.first = False
            if out:
                yield out
            data = self.obj.unconsumed_tail
            if not data and len(out) < DECODED_PIECE:
                return

    def flush(self) -> Iterator[bytes]:
        yield from self.decode(b"")
        try:
            rest = self.obj.flush()
        except zlib.error as exc:
            raise RemoteResponseError(f"the response body could not be decoded: zlib: {exc}", url=self.url) from exc
        if rest:
            yield rest


def split_lines(chunks: Iterable[bytes], limit: int, url: str) -> Iterator[str]:
    """The lines of a byte stream (``\\n`` or ``\\r\\n`` ended), decoded as UTF-8 with replacement.

    ``ResponseTooLargeError`` as soon as a line, or an event (the lines since the last blank
    one, as in server-sent events), grows past ``limit`` bytes: nothing larger is buffered.
    Linear in the input however it is chunked.
    """
    pending: list[bytes] = []  # pieces of the line not ended yet
    line_size = event_size = 0
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            line_size += len(piece)
            event_size += len(piece)
            if line_size > limit or event_size > limit:
                what = "line" if line_size > limit else "event"
                raise ResponseTooLargeError(f"a streamed {what} exceeded response_limit_size={limit} bytes", url=url)
            if end < 0:
                if piece:
                    pending.append(piece)
                break
            line = b"".join((*pending, piece)) if pending else piece
            pending, line_size = [], 0
            text = _decode_line(line)
            if not text:
                event_size = 0
            yield text
            start = end + 1
    if pending:
        yield _decode_line(b"".join(pending))


def _decode_line(line: bytes) -> str:
    return (line[:-1] if line.endswith(b"\r") else line).decode("utf-8", errors="replace")

# SPDX-License-Identifier: Apache-2.0
"""``QueryBatcher``: the questions of concurrent requests embedded together.

A server thread per request embeds its question before it searches. Alone, a question is
embedded at once; questions that arrive while one is being embedded wait for it and then go
together, in one forward pass, run by the first of them (group commit: no timer, no added wait
when the server is idle). On a CPU a batch of 8 short questions costs about what 2 alone do.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from mx_rag.embedding.inputs import check_text

__all__ = ["QueryBatcher"]

MAX_BATCH = 32  # questions per forward pass


@dataclass
class _Call:
    text: str
    woken: threading.Event = field(default_factory=threading.Event)
    served: bool = False
    vector: list[float] | None = None
    error: BaseException | None = None


class QueryBatcher:
    """``embedding`` with its ``embed_query`` calls from concurrent threads batched.

    Pass ``batcher.embed_documents`` as a retriever's ``embed_func``: the retrievers embed a
    question through the ``embed_query`` of the object whose ``embed_documents`` they were given,
    which is this one. Documents go to ``embedding`` unchanged. An embedding without
    ``embed_queries`` (a batched ``embed_query``) is called once per question.
    """

    def __init__(self, embedding: Any, max_batch: int = MAX_BATCH) -> None:
        self.embedding = embedding
        self.max_batch = max_batch
        self._batched = getattr(embedding, "embed_queries", None)
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._busy = False  # a batch is being embedded; the queue waits for it

    def embed_documents(self, texts: list[str], *args: Any, **kwargs: Any) -> list[list[float]]:
        return list(self.embedding.embed_documents(texts, *args, **kwargs))

    def embed_query(self, text: str) -> list[float]:
        if self._batched is None:
            return list(self.embedding.embed_query(text))
        call = _Call(check_text("text", text))
        with self._lock:
            self._queue.append(call)
            lead, self._busy = not self._busy, True
        if not lead:
            call.woken.wait()  # served by a batch, or made the next batch's runner
        if not call.served:
            self._run_batch()
        if call.error is not None:
            raise call.error
        assert call.vector is not None
        return call.vector

    def _run_batch(self) -> None:
        """Embed the oldest queued calls (the runner's own first), then hand on to the next one."""
        with self._lock:
            batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
        try:
            vectors = self._batched([call.text for call in batch])  # type: ignore[misc]
            for call, vector in zip(batch, vectors, strict=True):
                call.vector = list(vector)
        except BaseException as exc:  # every question of the batch gets the error
            for call in batch:
                call.error = exc
        finally:
            with self._lock:
                for call in batch:
                    call.served = True
                runner = self._queue[0] if self._queue else None
                self._busy = runner is not None
            for call in batch:
                call.woken.set()
            if runner is not None:
                runner.woken.set()

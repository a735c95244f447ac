# SPDX-License-Identifier: Apache-2.0
"""Helpers for the embedding tests: a deterministic text->vector function, TEI over the scripted
server, and tiny random CLIP models built with transformers."""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any

from mx_rag.embedding.service import TEIEmbedding
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

FAKE_DIM = 16


def fake_vector(text: str, dim: int = FAKE_DIM) -> list[float]:
    """A unit vector that depends only on ``text``."""
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    values = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def tei_answer(path: str, texts: list[str]) -> Reply:
    """What a TEI / OpenAI server would answer for ``texts`` at ``path``."""
    if path.endswith("/embeddings"):
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(texts)]
        return Reply.json({"object": "list", "data": data, "model": "fake"})
    return Reply.json([fake_vector(t) for t in texts])


def _plausible(texts: Any) -> bool:
    """Whether answers are worth queueing (the client will send these texts)."""
    return isinstance(texts, list) and len(texts) < 10_000 and all(
        isinstance(t, str) and 0 < len(t) < 100_000 for t in texts)


class ScriptedTEI:
    """A ``TEIEmbedding`` against a ``ScriptedServer`` that queues, before each call, the answers
    a real server would give for the batches the call will send (any other batching fails)."""

    def __init__(self, server: ScriptedServer, path: str = "/embed") -> None:
        self.server = server
        self.path = path
        self.tei = TEIEmbedding(server.url(path), client_param=ClientParam(use_http=True, retries=0))
        self.requests_sent = 0

    def _call(self, batches: list[list[str]], func: Any, *args: Any) -> Any:
        self.server.reset()
        for batch in batches:
            self.server.enqueue(tei_answer(self.path, batch))
        try:
            return func(*args)
        finally:
            self.requests_sent = len(self.server.requests)
            self.server.reset()

    def embed_documents(self, texts: Any, batch_size: Any = 32) -> list[list[float]]:
        batches: list[list[str]] = []
        if _plausible(texts) and isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size > 0:
            batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
        result: list[list[float]] = self._call(batches, self.tei.embed_documents, texts, batch_size)
        return result

    def embed_query(self, text: Any) -> list[float]:
        result: list[float] = self._call([[text]] if _plausible([text]) else [], self.tei.embed_query, text)
        return result


def build_tiny_clip(directory: Path, tokenizer_dir: Path, *, chinese: bool = False) -> Path:
    """Save a random 2-layer CLIP (or Chinese-CLIP) with a BERT tokenizer and a 32-px image processor."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    text: dict[str, Any] = {"vocab_size": tokenizer.vocab_size, "hidden_size": 64, "intermediate_size": 128,
                            "num_hidden_layers": 2, "num_attention_heads": 2, "pad_token_id": tokenizer.pad_token_id}
    vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": 32, "patch_size": 8}
    size: dict[str, Any] = {"size": {"shortest_edge": 32}, "crop_size": {"height": 32, "width": 32}}
    torch.manual_seed(0)
    model: Any
    processor_class: Any
    if chinese:
        config = transformers.ChineseCLIPConfig(text_config={**text, "max_position_embeddings": 512},
                                                vision_config=vision, projection_dim=32)
        model = transformers.ChineseCLIPModel(config)
        processor_class = getattr(transformers, "ChineseCLIPImageProcessorPil", None)
        processor = (processor_class or transformers.ChineseCLIPImageProcessor)(**size)
    else:
        text.update(max_position_embeddings=77, eos_token_id=tokenizer.sep_token_id,
                    bos_token_id=tokenizer.cls_token_id)
        model = transformers.CLIPModel(transformers.CLIPConfig(text_config=text, vision_config=vision,
                                                               projection_dim=32))
        processor_class = getattr(transformers, "CLIPImageProcessorPil", None)
        processor = (processor_class or transformers.CLIPImageProcessor)(**size)
    model.eval().save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    processor.save_pretrained(str(directory))
    return directory

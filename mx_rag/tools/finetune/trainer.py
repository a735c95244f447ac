# SPDX-License-Identifier: Apache-2.0
"""Fine-tune an embedding model on (question, passage) pairs and measure its retrieval.

``finetune_embedding`` trains with in-batch negatives (the loss of sentence-transformers'
``MultipleNegativesRankingLoss``: each question must score its own passage above the other
passages of the batch; scale 20, cosine similarity), AdamW with linear warm-up then cosine decay,
on the CPU, a CUDA GPU or an NPU (``dev_id`` as elsewhere in mx_rag). A batch never holds the same
passage twice (it would be a false negative). The result is a sentence-transformers directory that
``TextEmbedding`` and ``SentenceTransformer`` both load.

``evaluate_embedding`` runs sentence-transformers' ``InformationRetrievalEvaluator`` on
``{"query", "corpus"}`` lines; the corpus is the set of distinct passages, and each question's
relevant passage is its own.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_number, fail
from mx_rag.utils.common import MAX_DEVICE_ID
from mx_rag.utils.file_check import check_dir, check_file, check_path
from mx_rag.utils.lazy import extra_import

__all__ = ["evaluate_embedding", "finetune_embedding", "read_pairs"]

logger = logging.getLogger(__name__)

MAX_DATA_FILE = 1024 * 1024 * 1024
SCALE = 20.0


def read_pairs(path: str | os.PathLike[str], decrypt_fn: Any = None) -> list[tuple[str, str]]:
    """The ``(query, corpus)`` pairs of a JSON-lines file written by the generators."""
    resolved = check_file("data_path", path, MAX_DATA_FILE)
    pairs = []
    with open(resolved, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                query, corpus = record["query"], record["corpus"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ParameterError(f"{resolved}:{number} is not a {{'query', 'corpus'}} JSON line: {exc}") from exc
            if decrypt_fn is not None:
                query, corpus = decrypt_fn(query), decrypt_fn(corpus)
            if not isinstance(query, str) or not isinstance(corpus, str) or not query or not corpus:
                raise ParameterError(f"{resolved}:{number}: query and corpus must be non-empty strings")
            pairs.append((query, corpus))
    if not pairs:
        raise ParameterError(f"{resolved} holds no pairs")
    return pairs


def _load(model_path: Any, dev_id: int) -> Any:
    with extra_import("finetune", "sentence_transformers", "torch"):
        from sentence_transformers import SentenceTransformer
    from mx_rag.embedding.device import select_device
    from mx_rag.embedding.local.model_info import minilm_dir

    path = minilm_dir() if model_path is None else check_dir("model_path", model_path)
    device = select_device(check_int("dev_id", dev_id, 0, MAX_DEVICE_ID))
    return SentenceTransformer(str(path), device=str(device), local_files_only=True)


def _batches(pairs: Sequence[tuple[str, str]], size: int, rng: random.Random) -> list[list[tuple[str, str]]]:
    """Shuffled batches in which no passage (and no question) appears twice."""
    order = list(pairs)
    rng.shuffle(order)
    batches: list[list[tuple[str, str]]] = []
    pending = order
    while pending:
        batch: list[tuple[str, str]] = []
        seen: set[str] = set()
        rest = []
        for pair in pending:
            if len(batch) < size and pair[0] not in seen and pair[1] not in seen:
                batch.append(pair)
                seen.update(pair)
            else:
                rest.append(pair)
        batches.append(batch)
        pending = rest
    return [b for b in batches if len(b) > 1]  # a lone pair has no negative to learn from


def finetune_embedding(model_path: str | os.PathLike[str] | None, train_data_path: str | os.PathLike[str],
                       output_path: str | os.PathLike[str], *, epochs: int = 1, batch_size: int = 16,
                       learning_rate: float = 2e-5, warmup_ratio: float = 0.1, dev_id: int = 0, seed: int = 0,
                       decrypt_fn: Any = None) -> Path:
    """Fine-tune the model at ``model_path`` on ``train_data_path``; save it to ``output_path``.

    Args:
        model_path: a sentence-transformers or transformers directory; None: the packaged all-MiniLM-L6-v2.
        train_data_path: ``{"query", "corpus"}`` JSON lines (``TrainDataGenerator``'s ``train_data.jsonl``).
        output_path: the directory to write (created; its parent must exist).
        epochs: passes over the data, 1 to 100.
        batch_size: pairs per step, 2 to 1024 (more in-batch negatives help; memory decides).
        learning_rate: AdamW's peak rate, in (0, 1].
        warmup_ratio: share of the steps with a linearly rising rate, 0 to 1.
        dev_id: accelerator index (CUDA, NPU, MPS; ignored on the CPU).
        seed: shuffling and initialisation seed.
        decrypt_fn: ``str -> str`` for data written with ``encrypt_fn``.

    Returns:
        The resolved ``output_path``.
    """
    pairs = read_pairs(train_data_path, decrypt_fn)
    check_int("epochs", epochs, 1, 100)
    check_int("batch_size", batch_size, 2, 1024)
    check_number("learning_rate", learning_rate, 0.0, 1.0, low_open=True)
    check_number("warmup_ratio", warmup_ratio, 0.0, 1.0)
    check_int("seed", seed, 0, 2**31 - 1)
    out = check_path("output_path", output_path)
    if not out.parent.is_dir():
        raise fail("output_path", os.fspath(output_path), "a path whose parent directory exists")
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = _load(model_path, dev_id)
    plan = [_batches(pairs, batch_size, rng) for _ in range(epochs)]
    steps = sum(len(b) for b in plan)
    if steps == 0:
        raise ParameterError(f"{train_data_path}: too few distinct pairs to form a batch of two")
    warmup = int(steps * warmup_ratio)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    model.train()
    step = 0
    for epoch, batches in enumerate(plan, start=1):
        total = 0.0
        for batch in batches:
            queries = _embed(model, [q for q, _ in batch])
            passages = _embed(model, [p for _, p in batch])
            scores = SCALE * queries @ passages.T
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch), device=scores.device))
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            total += float(loss.detach())
            step += 1
        logger.info("epoch %d/%d: mean loss %.4f over %d steps", epoch, epochs, total / max(1, len(batches)),
                    len(batches))
    model.eval()
    model.save(str(out))
    return out


def _embed(model: Any, texts: list[str]) -> Any:
    import torch

    prepare = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers < 6
    features = prepare(texts)
    features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
    vectors = model(features)["sentence_embedding"]
    return torch.nn.functional.normalize(vectors, dim=-1)


def evaluate_embedding(model_path: str | os.PathLike[str] | None, eval_data_path: str | os.PathLike[str], *,
                       dev_id: int = 0, batch_size: int = 32, name: str = "", decrypt_fn: Any = None,
                       corpus: Sequence[str] = ()) -> dict[str, float]:
    """Retrieval metrics of the model on ``eval_data_path``: ``cosine_recall@5`` and the rest.

    Args:
        model_path: a model directory; None: the packaged all-MiniLM-L6-v2.
        eval_data_path: ``{"query", "corpus"}`` JSON lines (``EvalDataGenerator``'s output, reviewed).
        dev_id: accelerator index (ignored on the CPU).
        batch_size: texts per forward pass, 1 to 1024.
        name: a prefix for the metric names (``"<name>_cosine_recall@5"``), as sentence-transformers writes them.
        decrypt_fn: ``str -> str`` for data written with ``encrypt_fn``.
        corpus: more passages to search among (distractors: the rest of the document set).

    Returns:
        ``{"cosine_accuracy@1": ..., "cosine_recall@5": ..., "cosine_ndcg@10": ..., "cosine_mrr@10": ...,
        "cosine_map@100": ...}`` (with ``accuracy``, ``precision`` and ``recall`` at 1, 3, 5 and 10).
    """
    pairs = read_pairs(eval_data_path, decrypt_fn)
    check_int("batch_size", batch_size, 1, 1024)
    model = _load(model_path, dev_id)
    with extra_import("finetune", "sentence_transformers"):
        try:
            from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
        except ImportError:  # sentence-transformers < 6
            from sentence_transformers.evaluation import InformationRetrievalEvaluator  # type: ignore[no-redef]

    if not isinstance(corpus, (list, tuple)) or not all(isinstance(c, str) and c for c in corpus):
        raise fail("corpus", corpus, "a list of non-empty passages")
    corpus_ids: dict[str, str] = {}
    queries: dict[str, Any] = {}
    relevant: dict[str, set[str]] = {}
    for i, (query, passage) in enumerate(pairs):
        doc_id = corpus_ids.setdefault(passage, f"d{len(corpus_ids)}")
        queries[f"q{i}"] = query
        relevant[f"q{i}"] = {doc_id}
    for passage in corpus:
        corpus_ids.setdefault(passage, f"d{len(corpus_ids)}")
    passages: dict[str, Any] = {doc_id: passage for passage, doc_id in corpus_ids.items()}
    evaluator = InformationRetrievalEvaluator(queries=queries, corpus=passages, relevant_docs=relevant,
                                              name=name, batch_size=batch_size, show_progress_bar=False,
                                              write_csv=False)
    raw = evaluator(model)
    prefix = f"{name}_" if name else ""
    return {key if key.startswith(prefix) else prefix + key: float(value) for key, value in raw.items()}

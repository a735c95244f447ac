# SPDX-License-Identifier: Apache-2.0
"""Recall of a large ``MindFAISS`` FLAT index's quantised search on real embeddings.

From ``quantize_from`` vectors on (default 100,000), a FLAT index answers unfiltered searches by
scoring exactly the ``4 * k`` best candidates of an 8-bit copy (mx_rag/storage/vectorstore/
_faiss_index.py). ``bench/query_scaling.py --index-recall`` measures it on hash vectors, where the
nearest neighbours tie; this measures it on what users store: the chunks of Python's
documentation sources (``apt-get install python3.11-doc``: every ``*.rst.txt``, split by mx_rag's
default loaders) embedded by the SDK's default model, and as many section titles as questions.

Contenders, on the same vectors and questions in turn: ``MindFAISS`` with every search exact
(``quantize_from`` past the index's size; the plain FAISS FLAT scan) and with every search
quantised (``quantize_from=1``). One JSON line: recall@10 of the quantised search against the
exact one (by ids, and tie-aware: a hit counts when it scores at least the exact 10th), and the
p50 ms of both. The embeddings are cached under ``--cache`` (embedding takes about 17 minutes
on 2 cores).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, environment, loadavg, ms, percentile, positive_int, recall_against

ROOT = Path("/usr/share/doc/python3.11/html/_sources")
UNDERLINES = set("=-~*^")


def titles_of(text: str) -> list[str]:
    """reStructuredText section titles: a line underlined by a run of one of ``UNDERLINES``."""
    lines = text.splitlines()
    return [lines[i - 1].strip() for i in range(1, len(lines))
            if len(lines[i]) > 3 and set(lines[i]) <= UNDERLINES and lines[i - 1].strip()]  # fmt: skip


def embed_corpus(questions: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(chunk vectors, question vectors, model name) of the documentation sources."""
    from mx_rag.document import LoaderMng
    from mx_rag.embedding.local import TextEmbedding

    if not ROOT.is_dir():
        raise SystemExit(f"{ROOT} is missing: apt-get install python3.11-doc")
    loader = LoaderMng.with_defaults()
    texts: list[str] = []
    titles: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mxrag-quantised-") as scratch:
        for path in sorted(ROOT.rglob("*.rst.txt")):
            raw = path.read_text(encoding="utf-8", errors="replace")
            titles += titles_of(raw)
            copy = Path(scratch) / "page.md"  # reStructuredText read as Markdown-like text
            copy.write_text(raw, encoding="utf-8")
            texts += [d.page_content for d in loader.load_and_split(str(copy)) if d.page_content.strip()]
    embedding = TextEmbedding.create()
    vectors = np.asarray(embedding.embed_documents(texts), dtype=np.float32)
    asked = random.Random(0).sample(titles, min(questions, len(titles)))
    return vectors, np.asarray([embedding.embed_query(q) for q in asked], dtype=np.float32), embedding.embedding_id


def measure(vectors: np.ndarray, asked: np.ndarray) -> dict[str, Any]:
    from mx_rag.storage.vectorstore import MindFAISS

    stores = {name: MindFAISS(x_dim=vectors.shape[1], load_local_index=None, index_params={"quantize_from": value})
              for name, value in (("exact", len(vectors) + 1), ("quantised", 1))}  # fmt: skip
    for store in stores.values():
        store.add(list(range(len(vectors))), vectors, document_id=1)
        store.search(asked[:1], k=10)  # builds the quantised copy outside the clock
    times: dict[str, list[float]] = {name: [] for name in stores}
    hits: dict[str, list[tuple[list[float], list[int]]]] = {name: [] for name in stores}
    for i, vector in enumerate(asked):
        for name in (("exact", "quantised") if i % 2 == 0 else ("quantised", "exact")):
            start = time.perf_counter()
            scores, ids = stores[name].search(vector[None, :], k=10)
            times[name].append(time.perf_counter() - start)
            hits[name].append((scores[0], ids[0]))
    recall = recall_against(hits["exact"], hits["quantised"])
    return {"recall_at_10": recall["recall"], "tie_aware_recall_at_10": recall["tie_aware_recall"],
            "exact_p50_ms": ms(percentile(times["exact"], 0.5)),
            "quantised_p50_ms": ms(percentile(times["quantised"], 0.5))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=positive_int, default=200)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/mxrag-quantised-recall.npz"))
    args = parser.parse_args()
    import faiss

    faiss.omp_set_num_threads(1)
    emit(environment("quantised_recall", loadavg=loadavg()))
    if args.cache.exists():
        cached = np.load(args.cache)
        vectors, asked, model = cached["vectors"], cached["asked"], str(cached["model"])
    else:
        vectors, asked, model = embed_corpus(args.questions)
        np.savez(args.cache, vectors=vectors, asked=asked, model=model)
    emit({"bench": "quantised_recall", "scenario": "quantised_vs_exact", "model": model, "vectors": len(vectors),
          "dim": int(vectors.shape[1]), "questions": len(asked), **measure(vectors, asked), "loadavg": loadavg()})


if __name__ == "__main__":
    main()

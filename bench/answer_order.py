# SPDX-License-Identifier: Apache-2.0
"""Does the order of the five passages move the embedded LLM's MuSiQue answers? A diagnostic.

For each of the first ``--count`` MuSiQue questions, the passages mx_rag's default retriever
finds (``bench/answers.py``'s ``_Pipelines``: hybrid, dense-weighted fusion, subject links) are
put in the served layout (``question_first_content``) in other orders and answered at
temperature 0 with the short-answer instruction, 48 tokens, by the default model on 2 threads:

* ``mx/dense/qfirst``: sorted by the dense (e5 query vs passage) similarity, best first;
* ``mx/rev/qfirst``: the fused order reversed (best last, next to the instruction);
* ``mx/fused/qfirst`` and ``lc/dense/plain`` are the two pipelines of ``bench/answers.py
  --tasks pooled``: their rows come from its records (``bench/results/answers-pooled.jsonl``),
  which used the same passages, so only the new orders are asked here.

Rows go to ``--out`` (one per question and order, resumed like the pooled records); the JSON
lines printed average EM, F1, containment and recall@5 over the questions every order has.

Run::

    .venv/bin/python bench/answer_order.py                    # about 27 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import answers
import numpy as np
from _harness import CACHE_DIR, ROOT, cached_vectors, emit

OUT = ROOT / "bench" / "results" / "musique-order-ablation.jsonl"
ORDERS = ("mx/dense/qfirst", "mx/rev/qfirst")
RECORDED = {"mx_rag": "mx/fused/qfirst", "langchain": "lc/dense/plain"}


def _load(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[row["question"], row["cond"]] = row
    return rows


def ask_orders(count: int, out: Path) -> None:
    from mx_rag.chain.single_text_to_text import question_first_content
    from mx_rag.corag.metrics import contains_answer, exact_match, f1_score
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.knowledge.store import DEFAULT_EMBEDDING
    from mx_rag.llm import LLMParameterConfig
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.llm.models import DEFAULT_MODEL

    done = _load(out)
    texts, items = answers._english_set("musique", count)
    if all((item["question"], order) in done for item in items for order in ORDERS):
        return
    embedding = TextEmbedding(DEFAULT_EMBEDDING)
    lc_embedding = answers.langchain_embedding()
    matrix, _ = cached_vectors(embedding.embed_documents, DEFAULT_EMBEDDING, texts, CACHE_DIR, "musique")
    row_of = {text: i for i, text in enumerate(texts)}
    with (
        LocalLLMServer(DEFAULT_MODEL, n_ctx=4096, n_parallel=1, n_threads=2) as server,
        tempfile.TemporaryDirectory(prefix="mxrag-bench-order-") as work,
    ):
        pipes = answers._Pipelines(server, embedding, lc_embedding, Path(work), "musique", texts)
        try:
            for turn, item in enumerate(items):
                question = item["question"]
                fused = [doc.page_content for doc in pipes.retrievers["mx_rag"].invoke(question)]
                query = np.asarray(embedding.embed_query(question))
                orders = {
                    "mx/dense/qfirst": sorted(fused, key=lambda text: -float(matrix[row_of[text]] @ query)),
                    "mx/rev/qfirst": fused[::-1],
                }
                for order, passages in orders.items():
                    if (question, order) in done:
                        continue
                    content = question_first_content(
                        question, [answers.Document(page_content=p) for p in passages], answers.SHORT_ANSWER
                    )
                    started = time.monotonic()
                    answer = pipes.llm.chat(
                        content, role="user", llm_config=LLMParameterConfig(max_tokens=48, temperature=0)
                    ).strip()
                    row = {
                        "question": question,
                        "cond": order,
                        "answer": answer,
                        "f1": f1_score(answer, item["answer"]),
                        "em": exact_match(answer, item["answer"]),
                        "contains": contains_answer(answer, item["answer"]),
                        "recall_at_5": len(item["gold"] & set(passages)) / len(item["gold"]),
                        "seconds": round(time.monotonic() - started, 1),
                    }
                    with out.open("a", encoding="utf-8") as sink:
                        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                print(f"musique {turn + 1}/{len(items)}", file=sys.stderr, flush=True)
        finally:
            pipes.close()


def report(count: int, out: Path) -> None:
    rows = _load(out)
    for line in answers.RECORDS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["set"] == "musique":
            rows[row["question"], RECORDED[row["system"]]] = row
    conds = (*RECORDED.values(), *ORDERS)
    questions = [item["question"] for item in answers._english_set("musique", count)[1]]
    common = [q for q in questions if all((q, cond) in rows for cond in conds)]
    for cond in conds:
        chosen = [rows[q, cond] for q in common]
        emit(
            {
                "task": "answer_order",
                "set": "musique",
                "cond": cond,
                "n": len(chosen),
                **{
                    key: round(sum(float(r[key]) for r in chosen) / max(len(chosen), 1), 3)
                    for key in ("em", "f1", "contains", "recall_at_5")
                },
            }
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=100, help="MuSiQue questions (at most 100)")
    parser.add_argument("--out", type=Path, default=OUT, help="per-question rows (resumed)")
    args = parser.parse_args()
    ask_orders(args.count, args.out)
    report(args.count, args.out)


if __name__ == "__main__":
    main()

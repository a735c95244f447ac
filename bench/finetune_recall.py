# SPDX-License-Identifier: Apache-2.0
"""Recall@5 of the packaged all-MiniLM-L6-v2 before and after fine-tuning with mx_rag.tools.finetune.

The document set: chapter 3 of the Debian Reference in English (../shared/data/docs/debian-reference),
split into chunks. The embedded LLM (``mxrag llm``, qwen2.5-coder-1.5b by default) writes
``--questions`` questions per chunk with ``TrainDataGenerator`` (an English prompt; no reranker
selection, LLM scoring or rewrites: no trained reranker ships offline, and the small LLM's scores
are noise). Per chunk one question is held back for evaluation (the chunk's last one); the others
are the training pairs. ``evaluate_embedding`` measures the held-back questions against all the
chunks with the model before and after ``finetune_embedding``.

    flock /tmp/mxrag-bench.lock python bench/finetune_recall.py --chunks 60 > bench/results/finetune_recall.jsonl

One JSON line per figure; the first line is the environment (with the load average).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

from _harness import emit, environment, loadavg, positive_int

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT.parent / "shared" / "data" / "docs" / "debian-reference" / "debian-reference.en.txt"
if not TEXT.is_file():
    TEXT = Path("/work/shared/data/docs/debian-reference/debian-reference.en.txt")

PROMPT = """Read the passage and write {question_number} different questions that the passage answers.
Use your own words; do not copy whole sentences from the passage.
Passage: {doc}
Write one question per line, in this form:
Question 1: ...
Question 2: ...
"""


def chapter(text: str, number: int) -> str:
    """The text of one chapter (its heading uses no-break spaces: "Chapter\u00a03.\u00a0...")."""
    start = re.search(rf"^Chapter\s{number}\.\s", text, re.MULTILINE)
    end = re.search(rf"^Chapter\s{number + 1}\.\s", text, re.MULTILINE)
    if start is None or end is None:
        raise SystemExit(f"chapter {number} not found in {TEXT}")
    return text[start.start():end.start()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=positive_int, default=60)
    parser.add_argument("--questions", type=positive_int, default=3)
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--parallel", type=positive_int, default=2)
    parser.add_argument("--model", default=None, help="LLM (default: the registry's default)")
    args = parser.parse_args()

    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from mx_rag.llm import LLMParameterConfig, Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.reranker.local import MixRetrieveReranker
    from mx_rag.tools.finetune import DataProcessConfig, TrainDataGenerator, evaluate_embedding, finetune_embedding
    from mx_rag.utils import ClientParam

    emit(environment("finetune_recall", loadavg=loadavg(), chunks=args.chunks, questions=args.questions,
                     epochs=args.epochs))
    splitter = RecursiveCharacterTextSplitter(chunk_size=600, chunk_overlap=0)
    chunks = [c for c in splitter.split_text(chapter(TEXT.read_text(encoding="utf-8"), 3)) if len(c) > 200]
    chunks = chunks[: args.chunks]
    with tempfile.TemporaryDirectory() as tmp, LocalLLMServer(args.model, n_ctx=2048,
                                                               n_parallel=args.parallel) as server:
        work = Path(tmp)
        llm = Text2TextLLM(base_url=server.chat_url, model_name=server.model_name,
                           llm_config=LLMParameterConfig(max_tokens=160, temperature=0.3),
                           client_param=ClientParam(use_http=True, timeout=600))

        # featured=False: the reranker is never called (a Reranker is still required by the signature)
        generator = TrainDataGenerator(llm, str(work), MixRetrieveReranker())
        started = time.perf_counter()
        config = DataProcessConfig(generate_qd_prompt=PROMPT, question_number=args.questions, featured=False,
                                   preferred=False, rewrite=False)
        generator.generate_train_data(chunks, config, batch_size=args.parallel)
        generation_s = time.perf_counter() - started
        pairs = [json.loads(line) for line in (work / "train_data.jsonl").read_text().splitlines()]
        by_chunk: dict[str, list[str]] = {}
        for row in pairs:
            by_chunk.setdefault(row["corpus"], []).append(row["query"])
        train, held = [], []
        for passage, queries in by_chunk.items():
            if len(queries) >= 2:  # the chunk's last question is held back for evaluation
                held.append({"query": queries[-1], "corpus": passage})
            train += [{"query": q, "corpus": passage} for q in (queries[:-1] if len(queries) >= 2 else queries)]
        train_path, eval_path = work / "train.jsonl", work / "eval.jsonl"
        train_path.write_text("".join(json.dumps(r) + "\n" for r in train))
        eval_path.write_text("".join(json.dumps(r) + "\n" for r in held))
        emit({"bench": "finetune_recall", "step": "data", "chunks": len(chunks), "pairs": len(pairs),
              "train_pairs": len(train), "held_back_questions": len(held), "generation_s": round(generation_s, 1),
              "loadavg": loadavg()})
        server.stop()  # free the CPU for training
        before = evaluate_embedding(None, eval_path, corpus=chunks)  # every chunk competes
        started = time.perf_counter()
        tuned = finetune_embedding(None, train_path, work / "tuned", epochs=args.epochs, batch_size=16)
        train_s = time.perf_counter() - started
        after = evaluate_embedding(str(tuned), eval_path, corpus=chunks)
        for name, metrics in (("all-MiniLM-L6-v2", before), ("all-MiniLM-L6-v2 fine-tuned", after)):
            emit({"bench": "finetune_recall", "model": name, "recall@1": round(metrics["cosine_recall@1"], 4),
                  "recall@5": round(metrics["cosine_recall@5"], 4), "mrr@10": round(metrics["cosine_mrr@10"], 4),
                  "questions": len(held), "corpus": len(chunks), "loadavg": loadavg()})
        emit({"bench": "finetune_recall", "step": "training", "train_s": round(train_s, 1), "epochs": args.epochs,
              "train_pairs": len(train), "loadavg": loadavg()})


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""How often ``RAGEvaluator``'s judgements agree with a known label, on HotpotQA rows.

For each of the first N questions of /work/shared/data/multihop/hotpotqa_train.json two rows are
built whose right judgement is known by construction:

* positive: the response is the gold answer, the contexts are the gold supporting sentences;
* negative: the response is the gold answer of another question (a wrong answer), and the contexts
  are that other question's supporting sentences.

A metric agrees on a row when its score is >= 0.5 on a positive row and < 0.5 on a negative one
(``answer_correctness``, ``nv_accuracy``: the response matches the reference; ``faithfulness``:
the response is backed by the contexts - also true on the negative rows, whose contexts belong to
their answer, so it is reported but its "label" there is 1; ``context_recall``: the contexts hold
the reference). The judge is the embedded LLM (``LocalLLMServer``, the registry's default model),
the embedder the packaged MiniLM. One JSON line per metric, then a summary line.

    flock /tmp/mxrag-bench.lock python bench/evaluate_agreement.py --questions 6
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from _harness import emit, environment, loadavg, positive_int

DATA = Path("/work/shared/data/multihop/hotpotqa_train.json")
METRICS = ["answer_correctness", "nv_accuracy", "faithfulness", "context_recall"]
# the right verdict on (positive, negative) rows
LABELS = {"answer_correctness": (1, 0), "nv_accuracy": (1, 0), "faithfulness": (1, 1), "context_recall": (1, 0)}


def supporting(item: dict) -> list[str]:
    paragraphs = {title: sentences for title, sentences in item["context"]}
    found = []
    for title, index in item["supporting_facts"]:
        sentences = paragraphs.get(title, [])
        if index < len(sentences):
            found.append(f"{title}: {sentences[index].strip()}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=positive_int, default=6)
    parser.add_argument("--model", default=None, help="registry name or GGUF path (default: the registry default)")
    args = parser.parse_args()
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.evaluate import RAGEvaluator
    from mx_rag.llm import Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam

    items = json.loads(DATA.read_text(encoding="utf-8"))[: args.questions]
    n = len(items)
    rows = {"user_input": [], "response": [], "retrieved_contexts": [], "reference": []}
    for i, item in enumerate(items):
        other = items[(i + 1) % n]
        for response, contexts in ((item["answer"], supporting(item)), (other["answer"], supporting(other))):
            rows["user_input"].append(item["question"])
            rows["reference"].append(item["answer"])
            rows["response"].append(response)
            rows["retrieved_contexts"].append(contexts)
    emit(environment("evaluate_agreement", questions=n, rows=2 * n, loadavg_start=loadavg()))
    with LocalLLMServer(args.model, n_ctx=4096) as server:
        llm = Text2TextLLM(base_url=server.chat_url, model_name=server.model_name,
                           client_param=ClientParam(use_http=True, timeout=600))
        started = time.perf_counter()
        scores = RAGEvaluator(llm, TextEmbedding()).evaluate(METRICS, rows, language="english")
        seconds = time.perf_counter() - started
    total_agree = total = 0
    for metric in METRICS:
        agree, counted, pos, neg = 0, 0, [], []
        for row, score in enumerate(scores[metric]):
            label = LABELS[metric][row % 2]
            (pos if row % 2 == 0 else neg).append(score)
            if math.isnan(score):
                continue
            counted += 1
            agree += int((score >= 0.5) == bool(label))
        total_agree += agree
        total += counted
        emit({"metric": metric, "agreement": round(agree / counted, 3) if counted else None, "rows": counted,
              "mean_positive": round(sum(pos) / len(pos), 3), "mean_negative": round(sum(neg) / len(neg), 3),
              "labels": list(LABELS[metric])})
    emit({"summary": "agreement", "agreement": round(total_agree / total, 3) if total else None,
          "judgements": total, "judge": server.model_name, "seconds": round(seconds, 1),
          "loadavg_end": loadavg()})


if __name__ == "__main__":
    main()

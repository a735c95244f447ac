# SPDX-License-Identifier: Apache-2.0
"""The server's answer cache: a hit against a miss through ``mxrag serve`` with the embedded LLM, and how
many paraphrases hit with no wrong answer served.

``mxrag ingest`` puts tests/data/docs/norwich-city.txt (an article on the footballer Iwan Roberts) in
a knowledge base; ``mxrag serve`` runs with ``[cache] enabled`` and ``similarity_threshold`` (default
0.8, ``SimilarityCacheConfig``'s default) and the embedded LLM. For each of 8 questions: the first
ask is a miss (retrieval + the LLM), the same question again is a hit; then a paraphrase (the same
meaning: a hit is right) and a near miss (a different question about the same thing: a hit would
serve a wrong answer) are asked. Lines: one per question, then the p50 of hits and misses, their
ratio, the share of paraphrases that hit and the near misses that hit (wrong answers served).

``--sweep`` asks no server: it embeds the 24 questions with the server's default embedding model
(``TextEmbedding()``, queries compared as the similarity cache compares them: cosine among
cached questions of the same kind and numbers) and prints, per threshold, how many
paraphrases would hit their own question and how many near misses would hit any cached question.

    flock /tmp/mxrag-bench.lock python bench/cache.py
    python bench/cache.py --sweep
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _harness import emit, environment, loadavg, percentile

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "tests" / "data" / "docs" / "norwich-city.txt"
# (question, paraphrase, near miss)
QUESTIONS = [
    ("When was Iwan Roberts born?", "What is Iwan Roberts's date of birth?", "Where was Iwan Roberts born?"),
    ("Which club did Iwan Roberts join in 1990?", "In 1990, which club did Iwan Roberts move to?",
     "Which club did Iwan Roberts join in 1993?"),
    ("How many caps did Iwan Roberts win for Wales?", "How many times did Iwan Roberts play for Wales?",
     "How many goals did Iwan Roberts score for Norwich City?"),
    ("Where did Iwan Roberts grow up?", "In which town was Iwan Roberts raised?",
     "Which team did Iwan Roberts support as a boy?"),
    ("What position did Iwan Roberts play?", "In which position did Iwan Roberts play football?",
     "What is Iwan Roberts's job since he retired?"),
    ("When was Iwan Roberts elected to the Norwich City Hall of Fame?",
     "In what year did Norwich City put Iwan Roberts in its Hall of Fame?",
     "When did Iwan Roberts leave Norwich City?"),
    ("What is the title of Iwan Roberts's book?", "What is Iwan Roberts's book called?",
     "When was Iwan Roberts's book published?"),
    ("How many league appearances did Iwan Roberts make?", "How many league games did Iwan Roberts play in total?",
     "How many league goals did Iwan Roberts score?"),
]


def ask(client: httpx.Client, question: str) -> tuple[float, dict]:
    body = {"model": "bench", "messages": [{"role": "user", "content": question}], "max_tokens": 32,
            "temperature": 0}
    started = time.perf_counter()
    response = client.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()


def sweep() -> None:
    import numpy as np

    from mx_rag.cache._similarity import question_signature
    from mx_rag.embedding.local import TextEmbedding

    embedding = TextEmbedding()
    emit(environment("cache", kind="sweep", model=embedding.embedding_id, loadavg_start=loadavg()))

    def unit(texts: list[str]) -> np.ndarray:
        vectors = np.asarray([embedding.embed_query(text) for text in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    columns = [[row[i] for row in QUESTIONS] for i in range(3)]
    cached, paraphrases, near = (unit(column) for column in columns)
    signatures = [question_signature(q) for q in columns[0]]

    def best(vectors: np.ndarray, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The best same-kind cached question of each text (as the cache compares) and its similarity."""
        same = np.array([[question_signature(t) == s for s in signatures] for t in texts])
        scores = np.where(same, vectors @ cached.T, -1.0)
        return scores.argmax(axis=1), scores.max(axis=1)

    para_at, para_score = best(paraphrases, columns[1])
    _, near_score = best(near, columns[2])
    own = para_at == np.arange(len(QUESTIONS))
    for threshold in (0.8, 0.85, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98):
        hits = int((own & (para_score >= threshold)).sum())
        emit({"threshold": threshold, "paraphrases_hit": f"{hits}/{len(QUESTIONS)}",
              "near_misses_hit_wrong_answers": f"{int((near_score >= threshold).sum())}/{len(QUESTIONS)}"})
    emit({"summary": "sweep", "paraphrase_similarity": [round(float(v), 3) for v in para_score],
          "near_miss_best_similarity": [round(float(v), 3) for v in near_score], "loadavg_end": loadavg()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--keep", action="store_true", help="keep the temporary data folder")
    parser.add_argument("--sweep", action="store_true", help="only the threshold sweep over the questions' embeddings")
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return
    work = Path(tempfile.mkdtemp(prefix="mxrag-bench-cache-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "MXRAG_CACHE__ENABLED": "true",
           "MXRAG_CACHE__SIMILARITY_THRESHOLD": str(args.threshold)}
    emit(environment("cache", threshold=args.threshold, loadavg_start=loadavg()))
    mxrag = [sys.executable, "-m", "mx_rag.cli"]
    docs = work / "docs"
    docs.mkdir()
    shutil.copy(DOC, docs / DOC.name)
    subprocess.run([*mxrag, "ingest", str(docs), "--kb", "bench", "--data-dir", str(work / "data")], env=env,
                   check=True, capture_output=True)
    log = (work / "serve.log").open("w")
    server = subprocess.Popen([*mxrag, "serve", "--data-dir", str(work / "data"), "--port", "0"], env=env,
                              stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        threading.Thread(target=lambda: [log.write(line) for line in server.stdout], daemon=True).start()  # type: ignore[union-attr]
        with httpx.Client(base_url=url, timeout=600) as client:
            deadline = time.monotonic() + 600
            while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.5)
            ask(client, "Warm-up: who is Iwan Roberts?")
            misses, hits, paraphrase_hits, wrong = [], [], 0, 0
            for question, paraphrase, near in QUESTIONS:
                miss_s, first = ask(client, question)
                hit_s, again = ask(client, question)
                _, para = ask(client, paraphrase)
                _, other = ask(client, near)
                misses.append(miss_s)
                hits.append(hit_s)
                paraphrase_hits += bool(para.get("cached"))
                wrong += bool(other.get("cached"))
                emit({"question": question, "miss_ms": round(miss_s * 1000, 1), "hit_ms": round(hit_s * 1000, 1),
                      "first_cached": bool(first.get("cached")), "again_cached": bool(again.get("cached")),
                      "paraphrase_hit": bool(para.get("cached")), "near_miss_hit": bool(other.get("cached"))})
        p50_miss, p50_hit = percentile(misses, 0.5), percentile(hits, 0.5)
        emit({"summary": "cache", "p50_miss_ms": round(p50_miss * 1000, 1), "p50_hit_ms": round(p50_hit * 1000, 1),
              "hit_speedup": round(p50_miss / p50_hit, 1), "paraphrases_hit": f"{paraphrase_hits}/{len(QUESTIONS)}",
              "near_misses_hit_wrong_answers": f"{wrong}/{len(QUESTIONS)}", "threshold": args.threshold,
              "loadavg_end": loadavg()})
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
        log.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""Prompt compression on HotpotQA: answer F1/EM, prompt tokens and time to first token, with and without.

Each of the first ``--questions`` HotpotQA questions (../shared/data/multihop/hotpotqa_train.json,
at most 100) gets a context of its 2 gold paragraphs and its first 3 distractors, in the data set's
own order, as ``"<title>: <paragraph>"`` joined by blank lines (the selection of
``bench/answers.py hotpotqa``). That context is given to the embedded LLM (``LocalLLMServer``, the
registry's default model, ``default_threads()``) in the project's prompt layout (context, blank
line, short-answer instruction, blank line, question: ``_user_content_builder``), once per variant:

* ``none``: the context as it is (the baseline every compressor is compared with);
* ``rerank``: ``RerankCompressor`` with its default splitter and ``compress_rate`` (0.6). No
  cross-encoder can be installed offline (docs: ../shared/research/offline_assets.md, section 2), so
  its reranker scores pieces by the cosine of the default embedding (multilingual-e5-small, with
  e5's query/passage prompts): ``EmbeddingReranker`` below;
* ``cluster``: ``ClusterCompressor`` with its default splitter and ``compress_rate``, the default
  embedding, and the reference page's cluster function (sklearn ``HDBSCAN(min_cluster_size=2)``);
* ``llamaindex``: the peer, LlamaIndex's ``SentenceEmbeddingOptimizer`` (sentences scored by the same
  embedding against the question) with ``percentile_cutoff=0.4``: it keeps 40 % of the sentences,
  as ``compress_rate`` 0.6 keeps about 40 % of the characters (``context_before``/``context_after``
  0: its defaults of 1 also keep each kept sentence's neighbours, about 90 % of the context).

Every request is streamed at temperature 0 with at most 32 answer tokens and ``cache_prompt``
off, so that each one prefills its whole prompt (no variant profits from another's cached prefix).
TTFT is from sending the request to the first content delta; the compression's own time is
``compress_ms`` (TTFT + compression is what a user waits). Prompt tokens are the server's count.
The variants take turns in a rotating order per question.

Output: JSON lines on stdout (an environment line, then one line per variant with n, EM, F1,
containment, mean prompt tokens, TTFT p50/mean, compression p50 and the share of contexts that
still hold the answer string, and a line of each compressor against ``none``). Each answer is
appended to ``--records`` (``bench/results/compress-records.jsonl``) and questions already there are
skipped, so a long run can be stopped and resumed; summary lines average every recorded question.

Run (slow on 2 shared cores: about 1.5 min per question for the four variants at load 3)::

    flock /tmp/mxrag-bench.lock .venv/bin/python bench/compress.py --questions 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROOT, emit, environment, loadavg, package_version, percentile, rotated

HOTPOT = Path("/work/shared/data/multihop/hotpotqa_train.json")
RECORDS = ROOT / "bench" / "results" / "compress-records.jsonl"
VARIANTS = ("none", "rerank", "cluster", "llamaindex")
SHORT_ANSWER = (
    "Answer the question from the passages above with a short phrase only (a name, a date, a number, "
    "or yes or no), no explanation."
)
MAX_TOKENS = 32


def _contexts(count: int) -> list[dict[str, Any]]:
    items = json.loads(HOTPOT.read_text(encoding="utf-8"))[:count]
    rows = []
    for item in items:
        gold = {title for title, _ in item["supporting_facts"]}
        distractors = [title for title, _ in item["context"] if title not in gold][:3]
        keep = gold | set(distractors)
        paragraphs = [f"{title}: {''.join(sentences).strip()}" for title, sentences in item["context"] if title in keep]
        rows.append({"question": item["question"], "answer": item["answer"], "context": "\n\n".join(paragraphs)})
    return rows


def _compressors(embedding: Any) -> dict[str, Any]:
    """Each variant's ``(context, question) -> context``."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.postprocessor import SentenceEmbeddingOptimizer
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from sklearn.cluster import HDBSCAN

    from mx_rag.compress import ClusterCompressor, RerankCompressor
    from mx_rag.reranker.reranker import Reranker

    class EmbeddingReranker(Reranker):
        """Cosine of the default embedding's query and passage vectors (no cross-encoder offline)."""

        def rerank(self, query: str, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
            query_vector = np.asarray(embedding.embed_query(query))
            return np.asarray(embedding.embed_documents(list(texts))) @ query_vector

    class SameEmbedding(BaseEmbedding):
        """LlamaIndex's view of the same embedding (queries and texts get e5's prompts)."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return list(embedding.embed_query(query))

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(embedding.embed_documents([text])[0])

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [list(v) for v in embedding.embed_documents(texts)]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    def community(vectors: list[list[float]]) -> Any:  # the reference page's cluster function
        return HDBSCAN(min_cluster_size=min(2, len(vectors))).fit_predict(np.asarray(vectors))

    rerank = RerankCompressor(reranker=EmbeddingReranker())
    cluster = ClusterCompressor(cluster_func=community, embed=embedding)
    optimizer = SentenceEmbeddingOptimizer(embed_model=SameEmbedding(model_name="multilingual-e5-small"),
                                           percentile_cutoff=0.4, context_before=0, context_after=0)

    def llamaindex(context: str, question: str) -> str:
        nodes = [NodeWithScore(node=TextNode(text=part)) for part in context.split("\n\n")]
        kept = optimizer.postprocess_nodes(nodes, query_bundle=QueryBundle(question))
        return "\n\n".join(node.node.get_content() for node in kept)

    return {
        "none": lambda context, question: context,
        "rerank": rerank.compress_texts,
        "cluster": cluster.compress_texts,
        "llamaindex": llamaindex,
    }


def _ask(http: Any, server: Any, content: str) -> dict[str, Any]:
    """One streamed request: the answer, TTFT, total seconds and the server's prompt token count."""
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "stream": True,
        "cache_prompt": False,
        "stream_options": {"include_usage": True},
    }
    answer, ttft, prompt_tokens = "", None, None
    timings: dict[str, Any] = {}
    start = time.perf_counter()
    with http.stream("POST", server.chat_url, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            for choice in chunk.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content") or ""
                if delta and ttft is None:
                    ttft = time.perf_counter() - start
                answer += delta
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"].get("prompt_tokens")
            timings = chunk.get("timings") or timings
    total = time.perf_counter() - start
    return {
        "answer": answer.strip(),
        "ttft_s": round(ttft if ttft is not None else total, 3),
        "total_s": round(total, 3),
        "prompt_tokens": prompt_tokens if prompt_tokens is not None else timings.get("prompt_n"),
        "prompt_ms": timings.get("prompt_ms"),
    }


def _summaries(records: list[dict[str, Any]], model: str) -> None:
    by_variant: dict[str, dict[str, dict[str, Any]]] = {}
    for row in records:
        if row.get("model") == model:
            by_variant.setdefault(row["variant"], {})[row["question"]] = row
    common = set.intersection(*(set(rows) for rows in by_variant.values())) if by_variant else set()
    base = by_variant.get("none", {})
    for variant in VARIANTS:
        rows = [by_variant.get(variant, {})[q] for q in sorted(common) if q in by_variant.get(variant, {})]
        if not rows:
            continue
        ttft = [r["ttft_s"] for r in rows]
        line = {
            "bench": "compress",
            "variant": variant,
            "model": model,
            "n": len(rows),
            "em": round(statistics.fmean(r["em"] for r in rows), 3),
            "f1": round(statistics.fmean(r["f1"] for r in rows), 3),
            "contains": round(statistics.fmean(r["contains"] for r in rows), 3),
            "prompt_tokens_mean": round(statistics.fmean(r["prompt_tokens"] for r in rows), 1),
            "context_chars_mean": round(statistics.fmean(r["context_chars"] for r in rows), 1),
            "answer_in_context": round(statistics.fmean(r["answer_in_context"] for r in rows), 3),
            "ttft_p50_s": round(percentile(ttft, 0.5), 2),
            "ttft_mean_s": round(statistics.fmean(ttft), 2),
            "compress_p50_ms": round(percentile([r["compress_ms"] for r in rows], 0.5), 1),
            "loadavg_mean": round(statistics.fmean(r["loadavg_1m"] for r in rows), 2),
        }
        emit(line)
        if variant != "none" and base:
            pairs = [(r, base[r["question"]]) for r in rows]
            emit({
                "bench": "compress",
                "variant": variant,
                "against": "none",
                "n": len(pairs),
                "f1_delta": round(statistics.fmean(r["f1"] - b["f1"] for r, b in pairs), 3),
                "em_delta": round(statistics.fmean(r["em"] - b["em"] for r, b in pairs), 3),
                "prompt_tokens_ratio": round(sum(r["prompt_tokens"] for r, _ in pairs)
                                             / sum(b["prompt_tokens"] for _, b in pairs), 3),
                "ttft_p50_ratio": round(percentile([r["ttft_s"] for r, _ in pairs], 0.5)
                                        / percentile([b["ttft_s"] for _, b in pairs], 0.5), 3),
                "ttft_plus_compress_p50_ratio": round(
                    percentile([r["ttft_s"] + r["compress_ms"] / 1000 for r, _ in pairs], 0.5)
                    / percentile([b["ttft_s"] for _, b in pairs], 0.5), 3),
            })


def main() -> None:
    import httpx

    from mx_rag.corag.metrics import contains_answer, exact_match, f1_score, normalize_answer
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.llm.models import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=int, default=100, help="HotpotQA questions, at most 100")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a registry name or a GGUF path")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: default_threads())")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--records", type=Path, default=RECORDS)
    parser.add_argument("--deadline", type=float, default=None, help="stop starting questions after this many s")
    parser.add_argument("--until", default=None, help="stop starting questions at this UTC time (HH:MM)")
    parser.add_argument("--summary-only", action="store_true", help="print the summary of --records and stop")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    for variant in variants:
        if variant not in VARIANTS:
            raise SystemExit(f"bench/compress.py: --variants {variant!r} is not one of {', '.join(VARIANTS)}")

    records = []
    if args.records.exists():
        records = [json.loads(line) for line in args.records.read_text(encoding="utf-8").splitlines() if line]
    if args.summary_only:
        _summaries(records, args.model)
        return
    done = {(r["model"], r["variant"], r["question"]) for r in records}
    rows = _contexts(min(args.questions, 100))
    started = time.monotonic()
    embedding = TextEmbedding()
    embedding.embed_documents(["warm up"])  # model load, out of compress_ms
    compressors = _compressors(embedding)
    with LocalLLMServer(args.model, n_ctx=4096, n_parallel=1, n_threads=args.threads) as server, \
            httpx.Client(timeout=600) as http:
        emit(environment("compress", model=args.model, threads=server.n_threads, questions=len(rows),
                         loadavg=loadavg(), xllamacpp=package_version("xllamacpp"),
                         llama_index_core=package_version("llama-index-core"),
                         scikit_learn=package_version("scikit-learn")))
        _ask(http, server, "Say OK.")  # model load and first-call costs
        for variant in variants:  # the compressors' first-call costs (imports, the first batch)
            compressors[variant](rows[0]["context"], rows[0]["question"])
        for index, row in enumerate(rows):
            if (args.deadline is not None and time.monotonic() - started > args.deadline) or (
                    args.until is not None and time.strftime("%H:%M", time.gmtime()) >= args.until):
                emit({"bench": "compress", "stopped": "deadline", "questions_started": index})
                break
            for variant in rotated(variants, index):
                if (args.model, variant, row["question"]) in done:
                    continue
                t0 = time.perf_counter()
                context = compressors[variant](row["context"], row["question"])
                compress_ms = (time.perf_counter() - t0) * 1000
                from langchain_core.documents import Document

                from mx_rag.chain.single_text_to_text import _user_content_builder

                content = _user_content_builder(row["question"], [Document(page_content=context)], SHORT_ANSWER)
                try:
                    reply = _ask(http, server, content)
                except httpx.TransportError:  # one retry: a dropped connection is not the variant's fault
                    reply = _ask(http, server, content)
                record = {
                    "model": args.model,
                    "variant": variant,
                    "question": row["question"],
                    "gold": row["answer"],
                    **reply,
                    "em": exact_match(reply["answer"], row["answer"]),
                    "f1": round(f1_score(reply["answer"], row["answer"]), 4),
                    "contains": float(contains_answer(reply["answer"], row["answer"])),
                    "context_chars": len(context),
                    "answer_in_context": float(normalize_answer(row["answer"]) in normalize_answer(context)),
                    "compress_ms": round(compress_ms, 1),
                    "loadavg_1m": loadavg()[0],
                }
                records.append(record)
                with args.records.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
    _summaries(records, args.model)


if __name__ == "__main__":
    main()

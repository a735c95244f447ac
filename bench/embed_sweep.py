# SPDX-License-Identifier: Apache-2.0
"""Sweep how fast the bare embedding model can go on this machine: the limit ``bench/ingest.py`` measures against.

The model is all-MiniLM-L6-v2 (the one every system of ``bench/ingest.py`` uses), the texts a
sample of the chunks mx_rag's loaders and splitter make of the ``text`` corpus of ``bench/ingest.py``
(Python's documentation sources), every ``len/N``-th chunk so that the length mix is the corpus's.
One process loads the model once; then every configuration is measured ``--repeats`` times, the
configurations taking turns (A B C A B C ...; the order rotated each repeat) so that the load of
other jobs on a shared machine falls on all of them alike. Each figure is the median chunks/s, of
wall time and of the process's CPU time (on a shared machine the CPU time follows the configuration
more than the neighbours; with more threads it counts every thread's time).

A configuration is a comma-separated ``key=value`` list (defaults in brackets):

* ``impl``: ``loop`` (tokenizer + ``AutoModel`` + mean pooling, as ``TextEmbedding`` does) or
  ``st`` (``SentenceTransformer.encode``, which sorts by length and pads to the batch's longest) [loop];
* ``bs``: texts per forward pass [32];
* ``sort``: ``2`` sort the texts by token count (tokenised once more for the lengths), ``1`` by
  characters (as sentence-transformers does), longest first, before batching; ``0`` keep input order [1];
* ``pad``: ``longest`` (pad to the batch's longest text) or ``max`` (pad to ``max_seq_length``, 256) [longest];
* ``grad``: ``inference`` (``torch.inference_mode``), ``no_grad`` or ``none`` (autograd on) [inference];
* ``threads``: torch intra-op threads [1];
* ``overlap``: ``1`` tokenize the next batch in a thread while the model runs the current one [0];
* ``tok``: ``1`` time the tokenizer alone (no forward pass) [0].

Every ``loop`` configuration's vectors are compared with the first one's (the largest difference
is printed): none of these settings may change a vector beyond float noise.

Run::

    .venv/bin/python bench/embed_sweep.py --texts 160 --repeats 3 \
        "bs=1" "bs=8" "bs=32" "bs=32,sort=0" "impl=st,bs=32"
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _harness import Stopwatch, emit, rotating_rounds, utc_now

DEFAULTS: dict[str, Any] = {
    "impl": "loop", "bs": 32, "sort": 1, "pad": "longest", "grad": "inference", "threads": 1, "overlap": 0, "tok": 0,
}  # fmt: skip
MAX_LENGTH = 256


def parse_config(text: str) -> dict[str, Any]:
    config = dict(DEFAULTS)
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in DEFAULTS:
            raise SystemExit(f"unknown key {key!r} in {text!r}; keys: {', '.join(DEFAULTS)}")
        config[key] = type(DEFAULTS[key])(value)
    return config


def sample_texts(count: int) -> list[str]:
    from ingest import CHUNK_OVERLAP, CHUNK_SIZE, corpus_files

    from mx_rag.document import LoaderMng

    mng = LoaderMng.with_defaults(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    chunks: list[str] = []
    for path in corpus_files("text", quick=False)[1]:
        chunks.extend(d.page_content for d in mng.load_and_split(path) if d.page_content.strip())
    step = max(1, len(chunks) // count)
    return chunks[::step][:count]


def grad_context(torch: Any, grad: str) -> Any:
    if grad == "inference":
        return torch.inference_mode()
    if grad == "no_grad":
        return torch.no_grad()
    return contextlib.nullcontext()


def run_loop(torch: Any, tokenizer: Any, model: Any, texts: list[str], config: dict[str, Any]) -> list[list[float]]:
    """``TextEmbedding``'s loop, with every setting of the sweep exposed."""
    if config["sort"] == 2:  # by token count: tokenise once for the lengths (timed: it is part of the cost)
        ids = tokenizer(texts, truncation=True, max_length=MAX_LENGTH, return_attention_mask=False,
                        return_token_type_ids=False)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
    elif config["sort"] == 1:  # by characters, as sentence-transformers does
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    else:
        order = list(range(len(texts)))
    bs = config["bs"]
    batches = [order[start:start + bs] for start in range(0, len(order), bs)]
    padding = "max_length" if config["pad"] == "max" else True

    def tokenize(indices: list[int]) -> Any:
        return tokenizer([texts[i] for i in indices], padding=padding, truncation=True, max_length=MAX_LENGTH,
                         return_tensors="pt")

    out: list[list[float]] = [[] for _ in texts]
    if config["tok"]:
        for indices in batches:
            tokenize(indices)
        return out
    with grad_context(torch, config["grad"]), ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(tokenize, batches[0]) if config["overlap"] else None
        for number, indices in enumerate(batches):
            if ahead is not None:
                encoded = ahead.result()
                if number + 1 < len(batches):
                    ahead = pool.submit(tokenize, batches[number + 1])
            else:
                encoded = tokenize(indices)
            hidden = model(**encoded)[0]
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            vectors = torch.nn.functional.normalize(pooled, p=2, dim=-1).tolist()
            for i, vector in zip(indices, vectors, strict=True):
                out[i] = vector
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("configs", nargs="+", help="configurations, e.g. bs=8,sort=0")
    parser.add_argument("--texts", type=int, default=160, help="chunks per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per configuration (median)")
    args = parser.parse_args(argv)
    configs = [parse_config(c) for c in args.configs]

    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    from mx_rag.embedding.local.model_info import minilm_dir

    texts = sample_texts(args.texts)
    path = str(minilm_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    st_model = SentenceTransformer(path, device="cpu") if any(c["impl"] == "st" for c in configs) else None
    emit({"kind": "environment", "date": utc_now(), "cpu_count": os.cpu_count(), "loadavg": os.getloadavg(),
          "torch": torch.__version__, "transformers": transformers.__version__, "texts": len(texts),
          "chars_mean": round(statistics.mean(map(len, texts))), "repeats": args.repeats})
    with torch.inference_mode():  # warm up both
        model(**tokenizer(["warm up"], return_tensors="pt"))
    if st_model is not None:
        st_model.encode(["warm up"])

    for config in configs:  # one untimed pass over a few texts: first-call costs (oneDNN primitives) off the clock
        torch.set_num_threads(config["threads"])
        if config["impl"] == "st" and st_model is not None:
            st_model.encode(texts[:8], batch_size=config["bs"])
        else:
            run_loop(torch, tokenizer, model, texts[:8], config)
    seconds: list[list[float]] = [[] for _ in configs]
    cpu_seconds: list[list[float]] = [[] for _ in configs]
    reference: list[list[float]] | None = None
    max_diff = [0.0 for _ in configs]
    for _, index in rotating_rounds(range(len(configs)), args.repeats):
        config = configs[index]
        torch.set_num_threads(config["threads"])
        with Stopwatch() as watch:
            if config["impl"] == "st":
                assert st_model is not None
                vectors = st_model.encode(texts, batch_size=config["bs"], normalize_embeddings=True).tolist()
            else:
                vectors = run_loop(torch, tokenizer, model, texts, config)
        seconds[index].append(watch.seconds)
        cpu_seconds[index].append(watch.cpu_s)
        if not config["tok"]:
            if reference is None:
                reference = vectors
            pairs = zip(vectors, reference, strict=True)
            diff = max(abs(a - b) for u, v in pairs for a, b in zip(u, v, strict=True))
            max_diff[index] = max(max_diff[index], diff)
    for config, runs, cpus, diff in zip(configs, seconds, cpu_seconds, max_diff, strict=True):
        label = ",".join(f"{k}={v}" for k, v in config.items() if v != DEFAULTS[k]) or "default"
        rate = round(len(texts) / statistics.median(runs), 2)
        cpu_rate = round(len(texts) / statistics.median(cpus), 2)
        emit({"kind": "median", "config": label, "chunks_per_s": rate, "chunks_per_cpu_s": cpu_rate,
              "seconds_all": [round(s, 2) for s in runs], "cpu_s_all": [round(s, 2) for s in cpus],
              "max_abs_diff": diff})
    emit({"kind": "end", "loadavg": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

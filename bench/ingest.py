# SPDX-License-Identifier: Apache-2.0
"""Benchmark mx_rag's ingestion (parse, split, embed, store) against LangChain, LlamaIndex and the bare model.

Every system embeds with the same model on the CPU, read from the same local directory, with the
same prefix on every chunk text (``"passage: "`` for multilingual-e5-small, none for
all-MiniLM-L6-v2: what the model directory's sentence-transformers prompts say): ``--model``, by
default mx_rag's default model (``TextEmbedding().model_dir``, multilingual-e5-small converted into
``$MXRAG_HOME/models``); ``--model all-MiniLM-L6-v2`` measures MiniLM. Each worker reports the
directory it loaded and the prefix it used, and the summary refuses to print a ratio between
systems whose model directory or prefix differ. Every system splits with the same splitter:
LangChain's ``RecursiveCharacterTextSplitter`` with ``chunk_size=750``, ``chunk_overlap=150``
(characters) and mx_rag's default separators (paragraph, line, then sentence ends in Chinese and
English, then spaces; ``keep_separator="end"``), so that chunk counts match where the loaders
extract the same text. Systems:

* ``mx_rag``: ``LocalKnowledge.open(workdir, embedding_model=--model, chunk_size=750,
  chunk_overlap=150).sync(files)``: the ``LoaderMng.with_defaults`` loaders, ``TextEmbedding`` with
  its defaults (float32 transformers; int8 through ONNX Runtime on a CPU for the models of
  ``INT8_DEFAULT_MODELS``; the run line's ``variant`` says which; texts
  sorted by token count, the CPU's batch size of ``mx_rag.embedding.device.BATCH_SIZES``), SQLite
  chunk store with its keyword index and a FAISS index file in a fresh temporary folder. jieba (the
  keyword index's Chinese segmenter) starts inside the clock when the first Chinese chunk is stored,
  as it does for a user (``jieba_load_s`` says how long it took; ``jieba_dictionary``: ``table``
  when its words were read from the on-disk table, ``whole`` when its whole dictionary was loaded,
  see ``mx_rag.storage.document_store.text_tokens``). Then ``sync`` again over the same,
  unchanged files: the re-ingest time, reported as a fraction of the first run;
* ``mx_rag_int8``: the same with ``LocalKnowledge.open(..., int8=True)``: the int8 path, whether or
  not it is the default; ``mx_rag_fp32`` (not run unless named in ``--systems``): ``int8=False``;
* ``langchain``: langchain-community loaders (``TextLoader``, ``PyPDFLoader``, ``Docx2txtLoader``;
  for .pptx, which LangChain loads only through ``unstructured`` (not installed: it needs NLTK data
  downloaded at run time), a 15-line python-pptx loader in this file), ``split_documents``, then
  ``FAISS.from_documents`` with langchain-huggingface ``HuggingFaceEmbeddings`` (sentence-transformers,
  batches of 32, normalised vectors, ``encode_kwargs={"prompt": prefix}``), all in memory;
* ``llamaindex``: ``SimpleDirectoryReader(input_files=...)`` with its default file readers (pypdf,
  docx2txt, its python-pptx reader, plain text), ``VectorStoreIndex.from_documents`` with its default
  in-memory ``SimpleVectorStore``, ``HuggingFaceEmbedding`` (its default ``embed_batch_size`` of 10,
  ``text_instruction=prefix``)
  and the same LangChain splitter through ``LangchainNodeParser``. Metadata is excluded from the
  embedded text (LlamaIndex's default would prepend ``file_path: ...`` to every chunk), so that
  every system embeds exactly its chunk texts;
* ``bare_model``: the model at its best on this CPU, as ``bench/embed_sweep.py`` found it
  (docs/benchmarks.md has the sweep): transformers' tokenizer and ``AutoModel`` alone, the texts
  sorted by token count, batches of ``BARE_BATCH`` padded to their longest text, under
  ``torch.inference_mode``, the model's pooling (mean for both built-in models) and L2
  normalisation, over the prefixed chunk texts mx_rag's loaders and splitter produce; only the
  tokenising and encoding are timed. The float32 limit: what no float32 pipeline can beat;
* ``bare_int8``: the same loop over the int8 ONNX file mx_rag builds
  (``mx_rag.embedding.local.int8.ensure_int8_model``), run by ONNX Runtime with as many threads as
  torch: the int8 limit, the line mx_rag's int8 default is measured against;
* ``sentence_transformers`` (not run unless named in ``--systems``): the former bare-model line,
  ``SentenceTransformer.encode`` (batches of 32, sorted by characters, normalised) over the same
  texts; LangChain's ``HuggingFaceEmbeddings`` is this call.

Corpora:

* ``text``: Python 3.11's documentation sources, the ``*.rst.txt`` files under ``reference/``,
  ``tutorial/`` and ``using/`` of ``/usr/share/doc/python3.11/html/_sources`` (from the Debian
  package ``python3.11-doc``: ``apt-get install python3.11-doc``), sorted by path: 35 files, 0.9 MB,
  about 1,470 chunks;
* ``docs``: every .pdf, .docx and .pptx under ``/work/shared/data/docs`` (the ``pdf/`` folder and
  the Chinese Debian Reference PDF of 251 pages included; one PDF is password-protected and fails
  everywhere, one pptx is malformed) plus the English Debian Reference as text
  (``debian-reference.en.txt``: there is no English PDF), sorted by path: about 2,300 chunks.

Each system runs in its own subprocess (so its peak RSS, ``VmHWM`` from ``/proc/self/status``, is its
own; it includes the interpreter, the libraries and the model). In each, imports and loading the
model (one warm-up embedding) happen before the clock starts; the timed part is parse, split,
embed and store, end to end. Per corpus, the systems take turns in ``--rounds`` rounds (default 3),
the order rotated each round; each figure is the median over the rounds. torch runs with
``--torch-threads`` intra-op threads in every system (default 1: on the 2-core machine shared with
other jobs, 2 threads were 35 to 40 % slower than 1 for MiniLM encoding; ``OMP_NUM_THREADS`` is set
to the same value).

Output: JSON lines on stdout. First an environment line (with the load average), then one line per
run as it finishes, then per corpus one median line per system, and last a summary line with the
three bars, each marked pass or fail (on wall time, as asked; ``cpu_s`` and ``chunks_per_cpu_s``, the
process's CPU time over the timed part, are printed beside it because on a shared machine the wall
time of a run follows the other jobs' load more than the system under test):

* text: mx_rag's chunks/s at least every peer's; mx_rag in float32 (``mx_rag`` or ``mx_rag_fp32``)
  at least 97 % of ``bare_model``'s; mx_rag in int8 (``mx_rag`` or ``mx_rag_int8``) at least 97 % of
  ``bare_int8``'s. These two are judged on the paired ratio: the median over the rounds of the
  two systems' ratio within each round (``ratio_bar``); the ratio of the medians is printed too;
* docs: mx_rag's end-to-end time the lowest of mx_rag, LangChain and LlamaIndex;
* re-ingesting the unchanged corpus under 5 % of the first run's time (both corpora).

Run::

    .venv/bin/python bench/ingest.py            # full run: 78 min on an idle 2-core VM, 2 to 3 h on a shared one
    .venv/bin/python bench/ingest.py --quick    # smoke run: small subsets, 1 round, a few minutes
    .venv/bin/python bench/ingest.py --corpus text --systems mx_rag,bare_model
    .venv/bin/python bench/ingest.py --model all-MiniLM-L6-v2   # the same on MiniLM
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    THREAD_VARIABLES,
    Stopwatch,
    emit,
    environment,
    loadavg,
    loadavg_1m,
    memory_mb,
    package_version,
    pin_torch_threads,
    rotating_rounds,
    timed,
    worker_env,
)

BENCH = "ingest"
SYSTEMS = ("mx_rag", "mx_rag_int8", "langchain", "llamaindex", "bare_model", "bare_int8")
OPTIONAL_SYSTEMS = ("mx_rag_fp32", "sentence_transformers")
CORPORA = ("text", "docs")
CHUNK_SIZE, CHUNK_OVERLAP = 750, 150
EMBED_BATCH = 32  # LangChain's HuggingFaceEmbeddings and the sentence_transformers line (its default)
BARE_BATCH = 8  # the best of bench/embed_sweep.py's batch sizes on this CPU
PY_DOC_ROOT = Path("/usr/share/doc/python3.11/html/_sources")
PY_DOC_DIRS = ("reference", "tutorial", "using")
PY_DOC_QUICK = ("tutorial",)
QUICK_TEXT_FILES = 6
DOCS_ROOT = Path("/work/shared/data/docs")
DEBIAN_EN_TEXT = DOCS_ROOT / "debian-reference" / "debian-reference.en.txt"
DOC_SUFFIXES = (".pdf", ".docx", ".pptx")
RESULT_TAG = "INGEST_RESULT "


class BenchError(Exception):
    """The corpus is missing or a worker failed: no figures."""


# -- corpora ----------------------------------------------------------------------------------


def corpus_files(corpus: str, quick: bool) -> tuple[Path, list[Path]]:
    """The root (for mx_rag's white_paths) and the sorted files of a corpus."""
    if corpus == "text":
        if not PY_DOC_ROOT.is_dir():
            raise BenchError(
                f"{PY_DOC_ROOT} is missing: install Python's documentation sources with "
                "`apt-get install python3.11-doc` (Debian/Ubuntu; run `apt-get update` first if needed)"
            )
        dirs = PY_DOC_QUICK if quick else PY_DOC_DIRS
        files = sorted(p for d in dirs for p in (PY_DOC_ROOT / d).rglob("*.rst.txt"))
        return PY_DOC_ROOT, files[:QUICK_TEXT_FILES] if quick else files
    if not DOCS_ROOT.is_dir():
        raise BenchError(f"{DOCS_ROOT} is missing: the document corpus is the project's shared/data/docs")
    files = sorted(p for p in DOCS_ROOT.rglob("*") if p.is_file() and p.suffix.lower() in DOC_SUFFIXES)
    if quick:  # the small test documents only, not the 251-page Debian Reference
        return DOCS_ROOT, [p for p in files if "debian-reference" not in p.parts]
    if not any(p.suffix == ".pdf" and "debian-reference" in p.parts and ".en." in p.name for p in files):
        files = sorted([*files, DEBIAN_EN_TEXT])
    return DOCS_ROOT, files


# -- the model ---------------------------------------------------------------------------------


def model_spec(model: str) -> dict[str, Any]:
    """The directory, document prefix, pooling and max length every system uses for ``model``."""
    from mx_rag.embedding.local.model_info import read_model_info, resolve_max_length, resolve_pooling
    from mx_rag.embedding.local.text_embedding import TextEmbedding

    info = read_model_info(TextEmbedding(model).model_dir)
    return {"model": model, "model_dir": str(info.path.resolve()), "prefix": info.document_prefix,
            "pooling": resolve_pooling(info, None), "max_length": resolve_max_length(info, None)}


# -- workers (each in its own process) -----------------------------------------------------------


def quiet() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)  # pypdf's font warnings, LlamaIndex's INFO lines


def separators() -> list[str]:
    from mx_rag.document.doc_loader_mng import DEFAULT_SEPARATORS

    return list(DEFAULT_SEPARATORS)


def langchain_splitter() -> Any:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP, separators=separators(), keep_separator="end"
    )


def run_mx_rag(root: Path, files: list[Path], spec: dict[str, Any], int8: bool | None = None) -> dict[str, Any]:
    from mx_rag.knowledge.local import LocalKnowledge
    from mx_rag.storage.document_store import text_tokens

    workdir = Path(tempfile.mkdtemp(prefix="mxrag-ingest-bench-"))
    try:
        kb = LocalKnowledge.open(workdir, white_paths=[root], embedding_model=spec["model"], int8=int8,
                                 chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
        kb.embedding.embed_documents(["warm up"])  # loads the model outside the clock; jieba stays lazy
        with Stopwatch() as watch:
            first = kb.sync(files)
        reingest, second = timed(lambda: kb.sync(files))
        chunks = kb.knowledge.chunk_store.count()
        if kb.knowledge.vector_store.get_ntotal() != chunks:
            raise BenchError(f"mx_rag stored {chunks} chunks but {kb.knowledge.vector_store.get_ntotal()} vectors")
        if second.added or second.replaced or len(second.unchanged) != len(first.added):
            raise BenchError(f"the second sync re-ingested files: {second}")
        return {
            "files": len(files), "files_ok": len(first.added), "files_failed": len(first.failed),
            "chunks": chunks, "seconds": watch.seconds, "cpu_s": watch.cpu_s, "reingest_seconds": reingest,
            "jieba_load_s": text_tokens._load_seconds or 0.0, "jieba_dictionary": jieba_dictionary(text_tokens),
            "model_dir": str(kb.embedding.model_dir.resolve()),
            "prefix": kb.embedding._settings()[0].document_prefix, "variant": "int8" if kb.embedding.int8 else "fp32",
        }  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def jieba_dictionary(text_tokens: Any) -> str:
    """How jieba read its dictionary in this process: not at all, word by word from its table, or whole."""
    if text_tokens._jieba is None:
        return "none"
    return "table" if text_tokens._disk is not None else "whole"


def run_mx_rag_fp32(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    return run_mx_rag(root, files, spec, int8=False)


def run_mx_rag_int8(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    return run_mx_rag(root, files, spec, int8=True)


def langchain_pptx_loader() -> Any:
    """LangChain loads .pptx only through ``unstructured``; this is the same idea over python-pptx."""
    from langchain_core.document_loaders import BaseLoader
    from langchain_core.documents import Document

    class PptxLoader(BaseLoader):
        def __init__(self, file_path: str) -> None:
            self.file_path = file_path

        def lazy_load(self) -> Any:
            from pptx import Presentation

            for number, slide in enumerate(Presentation(self.file_path).slides, start=1):
                texts = [shape.text_frame.text for shape in slide.shapes if shape.has_text_frame]
                text = "\n".join(t for t in texts if t.strip())
                if text:
                    yield Document(page_content=text, metadata={"source": self.file_path, "page": number})

    return PptxLoader


def run_langchain(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    from langchain_community.document_loaders import Docx2txtLoader, PyPDFLoader, TextLoader
    from langchain_community.vectorstores import FAISS
    from langchain_huggingface import HuggingFaceEmbeddings

    loaders = {".pdf": PyPDFLoader, ".docx": Docx2txtLoader, ".pptx": langchain_pptx_loader(), ".txt": TextLoader}
    embeddings = HuggingFaceEmbeddings(
        model_name=spec["model_dir"], model_kwargs={"device": "cpu"},
        encode_kwargs={"batch_size": EMBED_BATCH, "normalize_embeddings": True, "prompt": spec["prefix"]},
    )  # fmt: skip
    embeddings.embed_query("warm up")
    start, cpu = time.perf_counter(), time.process_time()
    docs, failed = [], 0
    for path in files:
        try:
            docs.extend(loaders[path.suffix.lower()](str(path)).load())
        except Exception:  # a damaged or encrypted file: skip it, as a batch job would
            failed += 1
    loaded = time.perf_counter()
    chunks = langchain_splitter().split_documents(docs)
    split = time.perf_counter()
    store = FAISS.from_documents(chunks, embeddings)
    end = time.perf_counter()
    return {
        "files": len(files), "files_ok": len(files) - failed, "files_failed": failed,
        "chunks": len(store.index_to_docstore_id), "seconds": end - start, "cpu_s": time.process_time() - cpu,
        "load_s": loaded - start, "split_s": split - loaded, "embed_store_s": end - split,
        "model_dir": str(Path(embeddings.model_name).resolve()), "prefix": embeddings.encode_kwargs["prompt"],
    }  # fmt: skip


def run_llamaindex(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.node_parser import LangchainNodeParser
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    embed_model = HuggingFaceEmbedding(model_name=spec["model_dir"], device="cpu",
                                       text_instruction=spec["prefix"] or None)
    embed_model.get_text_embedding("warm up")
    parser = LangchainNodeParser(langchain_splitter())
    start, cpu = time.perf_counter(), time.process_time()
    docs = SimpleDirectoryReader(input_files=[str(p) for p in files]).load_data()
    for doc in docs:  # embed the chunk text alone, as the other systems do
        doc.excluded_embed_metadata_keys = list(doc.metadata)
    loaded = time.perf_counter()
    index = VectorStoreIndex.from_documents(docs, embed_model=embed_model, transformations=[parser])
    end = time.perf_counter()
    sources = {doc.metadata.get("file_path") for doc in docs}
    return {
        "files": len(files), "files_ok": len(sources), "files_failed": len(files) - len(sources),
        "chunks": len(index.index_struct.nodes_dict), "seconds": end - start, "cpu_s": time.process_time() - cpu,
        "load_s": loaded - start, "split_embed_store_s": end - loaded,
        "model_dir": str(Path(embed_model.model_name).resolve()), "prefix": embed_model.text_instruction or "",
    }  # fmt: skip


def mx_rag_chunk_texts(files: list[Path]) -> list[str]:
    from mx_rag.document import LoaderMng

    mng = LoaderMng.with_defaults(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    texts: list[str] = []
    for path in files:  # mx_rag's chunks, as ingest_files keeps them; not timed
        with contextlib.suppress(Exception):
            texts.extend(d.page_content for d in mng.load_and_split(path) if d.page_content.strip())
    return texts


def bare_encode(tokenizer: Any, model: Any, texts: list[str], batch_size: int, max_length: int) -> list[list[float]]:
    """The model alone, at its best on a CPU: texts sorted by token count, batches padded to their
    longest, inference mode, mean pooling, unit length (both built-in models' sentence-transformers head)."""
    import torch

    ids = tokenizer(texts, truncation=True, max_length=max_length, return_attention_mask=False,
                    return_token_type_ids=False)["input_ids"]  # fmt: skip
    order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
    out: list[list[float]] = [[] for _ in texts]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            indices = order[start:start + batch_size]
            encoded = tokenizer([texts[i] for i in indices], padding=True, truncation=True, max_length=max_length,
                                return_tensors="pt")  # fmt: skip
            hidden = model(**encoded)[0]
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            for i, vector in zip(indices, torch.nn.functional.normalize(pooled, dim=-1).tolist(), strict=True):
                out[i] = vector
    return out


def run_bare(files: list[Path], spec: dict[str, Any], model: Any) -> dict[str, Any]:
    import transformers

    if spec["pooling"] != "mean":
        raise BenchError(f"the bare lines pool by mean; {spec['model']} pools by {spec['pooling']}")
    texts = [spec["prefix"] + text for text in mx_rag_chunk_texts(files)]
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["model_dir"], local_files_only=True)
    bare_encode(tokenizer, model, ["warm up"], BARE_BATCH, spec["max_length"])
    with Stopwatch() as watch:
        vectors = bare_encode(tokenizer, model, texts, BARE_BATCH, spec["max_length"])
    return {"files": len(files), "chunks": len(vectors), "seconds": watch.seconds, "cpu_s": watch.cpu_s,
            "model_dir": spec["model_dir"], "prefix": spec["prefix"]}


def run_bare_model(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    import transformers

    model = transformers.AutoModel.from_pretrained(spec["model_dir"], local_files_only=True).eval()
    return run_bare(files, spec, model)


def run_bare_int8(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from mx_rag.embedding.local.int8 import Int8Encoder, ensure_int8_model

    model = Int8Encoder(ensure_int8_model(Path(spec["model_dir"])), torch.get_num_threads())
    return {**run_bare(files, spec, model), "variant": "int8"}


def run_sentence_transformers(root: Path, files: list[Path], spec: dict[str, Any]) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    texts = mx_rag_chunk_texts(files)
    model = SentenceTransformer(spec["model_dir"], device="cpu")
    model.encode(["warm up"])
    with Stopwatch() as watch:
        vectors = model.encode(texts, batch_size=EMBED_BATCH, normalize_embeddings=True, convert_to_numpy=True,
                               prompt=spec["prefix"])
    return {"files": len(files), "chunks": int(vectors.shape[0]), "seconds": watch.seconds, "cpu_s": watch.cpu_s,
            "model_dir": spec["model_dir"], "prefix": spec["prefix"]}


WORKERS = {
    "mx_rag": run_mx_rag, "mx_rag_fp32": run_mx_rag_fp32, "mx_rag_int8": run_mx_rag_int8,
    "langchain": run_langchain, "llamaindex": run_llamaindex,
    "bare_model": run_bare_model, "bare_int8": run_bare_int8, "sentence_transformers": run_sentence_transformers,
}  # fmt: skip
BARE_SYSTEMS = ("bare_model", "bare_int8", "sentence_transformers")  # embedding only: the text corpus alone


def worker_main(args: argparse.Namespace) -> int:
    threads = pin_torch_threads(args.torch_threads)
    quiet()
    root, files = corpus_files(args.corpus, args.quick)
    result = WORKERS[args.worker](root, files, model_spec(args.model))
    result.update(torch_threads=threads, peak_rss_mb=memory_mb()["peak_rss_mb"])
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# -- the parent: rounds, medians, bars ------------------------------------------------------


def spawn(system: str, corpus: str, args: argparse.Namespace) -> dict[str, Any]:
    threads = str(args.torch_threads)
    env = {**worker_env(args.torch_threads, THREAD_VARIABLES[:2]), "TQDM_DISABLE": "1"}  # OMP, MKL
    command = [sys.executable, os.path.abspath(__file__), "--worker", system, "--corpus", corpus,
               "--torch-threads", threads, "--model", args.model] + (["--quick"] if args.quick else [])  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"{system} on {corpus} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len(RESULT_TAG):])
    result["process_s"] = round(time.perf_counter() - started, 1)
    return result


def rounded(line: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 6 if k.endswith("fraction") else 3) if isinstance(v, float) else v for k, v in line.items()}


def median_line(corpus: str, system: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in runs]
    line: dict[str, Any] = {
        "bench": BENCH, "kind": "median", "corpus": corpus, "system": system, "rounds": len(runs),
        "chunks": runs[0]["chunks"], "seconds": statistics.median(seconds),
        "chunks_per_s": statistics.median(r["chunks"] / r["seconds"] for r in runs),
        "seconds_all": [round(s, 2) for s in seconds],  # round by round
        "chunks_per_s_all": [round(r["chunks"] / r["seconds"], 3) for r in runs],
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "chunks_per_cpu_s": statistics.median(r["chunks"] / r["cpu_s"] for r in runs),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
        "files": runs[0]["files"],
    }  # fmt: skip
    for key in ("files_ok", "files_failed", "model_dir", "prefix", "variant", "jieba_dictionary"):
        if key in runs[0]:
            line[key] = runs[0][key]
    for key in ("load_s", "split_s", "embed_store_s", "split_embed_store_s", "jieba_load_s"):
        if key in runs[0]:
            line[key] = statistics.median(r[key] for r in runs)
    if "reingest_seconds" in runs[0]:
        line["reingest_seconds"] = statistics.median(r["reingest_seconds"] for r in runs)
        line["reingest_fraction"] = statistics.median(r["reingest_seconds"] / r["seconds"] for r in runs)
    if len({r["chunks"] for r in runs}) > 1:
        line["chunks_differ_between_rounds"] = sorted({r["chunks"] for r in runs})
    return rounded(line)


def ratio_bar(line: dict[str, Any], name: str, mx: dict[str, Any] | None, limit: dict[str, Any] | None) -> None:
    """``<name>_chunks_per_s`` (and per CPU second) and a pass/fail bar at 97 %, when both ran.

    The ratio of the medians is printed; the bar is judged on the paired ratio: the median over
    the rounds of mx_rag's chunks/s over its limit's in the same round (``_paired``, each round's
    ratio in ``_by_round``). This machine's speed drifts by up to 20 % over minutes, the same work
    included, so two medians taken minutes apart can differ by more than the 3 % the bar allows;
    within a round the two runs are minutes apart at most, and the drift between rounds cancels."""
    if mx and limit:
        ratio = mx["chunks_per_s"] / limit["chunks_per_s"]
        line[f"text_{name}_chunks_per_s"] = round(ratio, 3)
        line[f"text_{name}_chunks_per_cpu_s"] = round(mx["chunks_per_cpu_s"] / limit["chunks_per_cpu_s"], 3)
        by_round = [a / b for a, b in zip(mx["chunks_per_s_all"], limit["chunks_per_s_all"], strict=False)]
        paired = statistics.median(by_round)
        line[f"text_{name}_chunks_per_s_by_round"] = [round(r, 3) for r in by_round]
        line[f"text_{name}_chunks_per_s_paired"] = round(paired, 3)
        line[f"bar_text_{name}_97pct"] = "pass" if paired >= 0.97 else "fail"


def summary_line(medians: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    line: dict[str, Any] = {"bench": BENCH, "kind": "summary"}
    models = {(m.get("model_dir"), m.get("prefix")) for m in medians.values()}
    if len(models) > 1:  # never compare two models: the ratio would measure the models, not the systems
        line["error"] = "the systems embedded with different models or prefixes: no ratio is printed"
        line["models"] = {f"{c}/{s}": [m.get("model_dir"), m.get("prefix")] for (c, s), m in medians.items()}
        return line
    text = {s: m for (c, s), m in medians.items() if c == "text"}
    mx = text.get("mx_rag")
    fp32 = text.get("mx_rag_fp32") or (mx if mx and mx.get("variant") == "fp32" else None)
    int8 = text.get("mx_rag_int8") or (mx if mx and mx.get("variant") == "int8" else None)
    ratio_bar(line, "mx_rag_fp32_over_bare_model", fp32, text.get("bare_model"))
    ratio_bar(line, "mx_rag_int8_over_bare_int8", int8, text.get("bare_int8"))
    if int8 and "bare_model" in text:
        line["text_mx_rag_int8_over_bare_model_chunks_per_s"] = round(
            int8["chunks_per_s"] / text["bare_model"]["chunks_per_s"], 3)
    peers = {s: m["chunks_per_s"] for s, m in text.items() if s in ("langchain", "llamaindex")}
    if mx and peers:
        line["text_chunks_per_s"] = {"mx_rag": mx["chunks_per_s"], **peers}
        line["bar_text_at_least_every_peer"] = "pass" if mx["chunks_per_s"] >= max(peers.values()) else "fail"
    docs = {s: m for (c, s), m in medians.items() if c == "docs" and s not in BARE_SYSTEMS}
    variants = {"mx_rag_fp32", "mx_rag_int8"}  # the bar is mx_rag's defaults against the peers
    if "mx_rag" in docs and len(set(docs) - variants) > 1:
        line["docs_seconds"] = {s: m["seconds"] for s, m in docs.items()}
        fastest = min((s for s in docs if s not in variants), key=lambda s: docs[s]["seconds"])
        line["docs_fastest"] = fastest
        line["bar_docs_lowest_time"] = "pass" if fastest == "mx_rag" else "fail"
    fractions = {c: m["reingest_fraction"] for (c, s), m in medians.items() if s == "mx_rag"}
    if fractions:
        line["reingest_fraction"] = fractions
        line["bar_reingest_under_5pct"] = "pass" if all(f < 0.05 for f in fractions.values()) else "fail"
    return line


def environment_line(args: argparse.Namespace, corpora: dict[str, list[Path]]) -> dict[str, Any]:
    import torch

    from mx_rag.embedding.device import default_batch_size

    packages = ("mxrag", "torch", "transformers", "sentence-transformers", "tokenizers", "faiss-cpu", "pypdf",
                "langchain-core", "langchain-community", "langchain-huggingface", "langchain-text-splitters",
                "llama-index-core", "llama-index-embeddings-huggingface", "llama-index-readers-file", "docx2txt",
                "onnxruntime")
    return environment(
        BENCH, "kind", platform=platform.platform(), cpu_count=os.cpu_count(), loadavg=loadavg(),
        versions={name: package_version(name) for name in packages},
        **model_spec(args.model), device="cpu",
        torch_threads=args.torch_threads, embed_batch={
            "mx_rag": default_batch_size(torch.device("cpu")), "langchain": EMBED_BATCH, "llamaindex": 10,
            "bare_model": BARE_BATCH, "bare_int8": BARE_BATCH, "sentence_transformers": EMBED_BATCH},
        splitter={"class": "RecursiveCharacterTextSplitter", "chunk_size": CHUNK_SIZE,
                  "chunk_overlap": CHUNK_OVERLAP, "separators": separators(), "keep_separator": "end"},
        corpora={name: {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
                 for name, files in corpora.items()},
        text_corpus=f"{PY_DOC_ROOT}/{{{','.join(PY_DOC_QUICK if args.quick else PY_DOC_DIRS)}}}/**/*.rst.txt",
        rounds=args.rounds, quick=args.quick, systems=args.systems,
    )  # fmt: skip


def check_peer_packages(args: argparse.Namespace) -> None:
    """Without docx2txt, LangChain's and LlamaIndex's .docx loaders fail and their chunks would be missing."""
    import importlib.util

    peers = {"langchain", "llamaindex"} & set(args.systems)
    if "docs" in args.corpora and peers and importlib.util.find_spec("docx2txt") is None:
        raise BenchError(
            f"docx2txt is not installed: the .docx loaders of {sorted(peers)} need it "
            "(`.venv/bin/pip install docx2txt`, or the `bench` extra)"
        )


def parent_main(args: argparse.Namespace) -> int:
    corpora = {c: corpus_files(c, args.quick)[1] for c in args.corpora}
    check_peer_packages(args)
    emit(environment_line(args, corpora))
    medians: dict[tuple[str, str], dict[str, Any]] = {}
    for corpus in args.corpora:
        systems = [s for s in args.systems if not (corpus == "docs" and s in BARE_SYSTEMS)]
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
        for turn, system in rotating_rounds(systems, args.rounds):
            result = spawn(system, corpus, args)
            runs[system].append(result)
            emit(rounded({"bench": BENCH, "kind": "run", "corpus": corpus, "system": system, "round": turn + 1,
                          **result, "chunks_per_s": result["chunks"] / result["seconds"],
                          "loadavg_1m": loadavg_1m()}))  # fmt: skip
        for system in systems:
            medians[corpus, system] = median_line(corpus, system, runs[system])
            emit(medians[corpus, system])
    summary = summary_line(medians)
    summary["loadavg_end"] = loadavg()
    emit(summary)
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per corpus; figures are medians")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads, the same for all")
    parser.add_argument("--corpus", choices=(*CORPORA, "both"), default="both")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated subset of " + ",".join(SYSTEMS + OPTIONAL_SYSTEMS))
    parser.add_argument("--model", default=None,
                        help="the model every system embeds with: a built-in name or a directory (default: mx_rag's)")
    parser.add_argument("--quick", action="store_true", help="smoke run: small subsets of both corpora, 1 round")
    parser.add_argument("--worker", choices=SYSTEMS + OPTIONAL_SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick and "--rounds" not in (argv if argv is not None else sys.argv):
        args.rounds = 1
    if args.model is None:
        from mx_rag.embedding.local.text_embedding import DEFAULT_MODEL

        args.model = DEFAULT_MODEL
    args.corpora = list(CORPORA) if args.corpus == "both" else [args.corpus]
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = set(args.systems) - set(SYSTEMS + OPTIONAL_SYSTEMS)
    if unknown or args.rounds < 1 or args.torch_threads < 1:
        parser.error(f"unknown systems {sorted(unknown)}" if unknown else "--rounds and --torch-threads must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return worker_main(args) if args.worker else parent_main(args)
    except BenchError as exc:
        print(f"ingest benchmark FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

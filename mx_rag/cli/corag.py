# SPDX-License-Identifier: Apache-2.0
"""``mxrag corag evaluate``: CoRAG against naive retrieval on a HotpotQA or MuSiQue file, in one command.

::

    mxrag corag evaluate hotpotqa.json --limit 2                   # quick look: 2 questions
    mxrag corag evaluate hotpotqa.json --save-file out/hotpotqa.json
    mxrag corag evaluate musique.json --llm-url http://gpu:8000/v1/chat/completions --llm-model qwen
    mxrag corag evaluate hotpotqa.json --retrieval-url http://127.0.0.1:8000/retrieve

Without ``--retrieval-url`` the command builds a knowledge base of every paragraph of the file
(FAISS + SQLite, multilingual-e5-small unless ``--embedding``; one ``"Title\\ntext"`` chunk per
paragraph) under ``--workdir`` and searches it in this process. The base is kept and reused by
later runs over the same paragraphs with the same embedding model; ``--limit`` does not change it
(the corpus is always the whole file). Without ``--llm-url`` the embedded LLM (``mxrag llm
serve``'s llama.cpp) is started for the run.

The report is ``CoRagEvaluator.evaluate``'s: a JSON array, the summary first, then one record per
question, written to ``--save-file``. The summary is printed on stdout as JSON; progress and
notes go to stderr (a bar on a terminal, else one line per finished question).

An evaluation is resumable: finished questions are kept in ``<save file>.partial.jsonl``, and
running the same command again (same file and settings) runs only the questions not done yet,
and those that failed. A finished report extends the same way: ``--limit 20`` after ``--limit 10``
(same ``--save-file``) runs only questions 11 to 20. ``--restart`` runs everything again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from mx_rag.cli.rag import EmbeddingOption

__all__ = ["app", "evaluate", "passage_retriever"]

app = typer.Typer(help="CoRAG: chain-of-retrieval question answering.", no_args_is_help=True)

KB_PREFIX = "kb-"
READY_FILE = "READY.json"
EMBED_BATCH = 64
LLM_TIMEOUT = 600.0  # seconds per LLM call: the embedded model on a busy CPU is slow
EMBEDDED_PARALLEL = 2  # default threads (and llama.cpp slots) with the embedded LLM
REMOTE_THREADS = 8  # default threads with --llm-url (CoRagBaseConfig's default)
MAX_SLOTS = 8  # llama.cpp slots at most: each reserves --ctx tokens of KV cache


def _note(message: str) -> None:
    typer.echo(message, err=True)


# -- knowledge base over the file's paragraphs ---------------------------------------------------


def _kb_key(passages: list[tuple[str, str]], embedding: str) -> str:
    digest = hashlib.sha256(embedding.encode())
    for _, text in passages:
        digest.update(b"\0" + text.encode("utf-8"))
    return digest.hexdigest()[:16]


def _open_stores(root: Path, dimension: int) -> tuple[Any, Any]:
    from mx_rag.knowledge.local import folder_stores

    docstore, vectors = folder_stores(root, dimension)
    return vectors, docstore


def _build(root: Path, passages: list[tuple[str, str]], embedding: Any) -> None:
    from mx_rag.storage.document_store import MxDocument

    vectors, docstore = _open_stores(root, embedding.dimension)
    for start in range(0, len(passages), EMBED_BATCH):
        batch = passages[start : start + EMBED_BATCH]
        texts = [text for _, text in batch]
        ids = docstore.add([MxDocument(text, {"title": title}) for title, text in batch], 1)
        vectors.add(ids, embedding.embed_documents(texts), document_id=1)
        _note(f"  embedded {min(start + EMBED_BATCH, len(passages))}/{len(passages)} paragraphs")
    (root / READY_FILE).write_text(json.dumps({"paragraphs": len(passages)}), encoding="utf-8")


def passage_retriever(workdir: Path, records: list[Any], embedding_model: str | None, k: int) -> Any:
    """A ``Retriever`` over every paragraph of ``records`` (HotpotQA ``context`` or MuSiQue
    ``paragraphs``), built once under ``workdir/kb-<hash>`` and reused afterwards.

    The base is built in a temporary folder and renamed when complete, so an interrupted build
    leaves nothing that a later run would take for a finished one.
    """
    from transformers.utils import logging as hf_logging

    from mx_rag.corag.datasets import iter_passages
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.embedding.local.text_embedding import INT8_SUFFIX
    from mx_rag.errors import ParameterError
    from mx_rag.knowledge.store import DEFAULT_EMBEDDING
    from mx_rag.retrievers import Retriever

    hf_logging.disable_progress_bar()
    passages = list(iter_passages(records))
    if not passages:
        raise ParameterError("the eval file has no paragraphs to search (HotpotQA 'context' or MuSiQue "
                             "'paragraphs'); pass --retrieval-url to use a retrieval API instead")
    model = embedding_model or DEFAULT_EMBEDDING
    embedding = TextEmbedding(model)
    root = workdir / f"{KB_PREFIX}{_kb_key(passages, model + (INT8_SUFFIX if embedding.int8 else ''))}"
    if (root / READY_FILE).is_file():
        _note(f"knowledge base: reusing {root} ({len(passages)} paragraphs)")
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        _note(f"knowledge base: embedding {len(passages)} paragraphs into {root}")
        building = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=workdir))
        try:
            _build(building, passages, embedding)
            if root.exists():  # an unfinished base of an older run, or another run finished first
                if (root / READY_FILE).is_file():
                    shutil.rmtree(building)
                else:
                    shutil.rmtree(root)
            if not root.exists():
                os.replace(building, root)
        finally:
            if building.exists():
                shutil.rmtree(building, ignore_errors=True)
    vectors, docstore = _open_stores(root, embedding.dimension)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=embedding.embed_documents, k=k)


# -- the LLM --------------------------------------------------------------------------------------


@contextmanager
def _chat_llm(llm_url: str | None, llm_model: str, max_tokens: int, ctx: int, parallel: int,
              llm_threads: int | None = None) -> Iterator[Any]:
    """A ``Text2TextLLM`` on ``llm_url``, or on the embedded LLM started for the block."""
    from mx_rag.llm import LLMParameterConfig, Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer, chosen_threads
    from mx_rag.llm.urls import chat_url
    from mx_rag.utils import ClientParam

    config = LLMParameterConfig(max_tokens=max_tokens, temperature=0.0)
    param = ClientParam(use_http=True, timeout=LLM_TIMEOUT)
    if llm_url:
        yield Text2TextLLM(base_url=chat_url(llm_url), model_name=llm_model, llm_config=config, client_param=param)
        return
    from mx_rag.llm.models import model_name

    threads = chosen_threads(llm_threads)
    _note(f"starting the embedded LLM ({model_name(None)} on llama.cpp, {threads} CPU thread{'s' * (threads > 1)})")
    with LocalLLMServer(n_ctx=ctx, n_parallel=parallel, n_threads=threads) as server:
        yield Text2TextLLM(base_url=server.chat_url, model_name=server.model_name, llm_config=config,
                           client_param=param)


# -- the command ----------------------------------------------------------------------------------


@contextmanager
def _evaluator_log() -> Iterator[None]:
    """The evaluator's notes and per-question progress lines (``INFO``) on stderr for the block."""
    log = logging.getLogger("mx_rag.corag.evaluator")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _selection(eval_file: Path, records: list[Any], limit: int | None, workdir: Path) -> tuple[Path, bool]:
    """The file to evaluate: ``eval_file`` itself, or a temporary copy of its first ``limit`` records."""
    if limit is None or limit >= len(records):
        return eval_file, False
    workdir.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{eval_file.stem}-first{limit}-", suffix=".json", dir=workdir)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(records[:limit], out, ensure_ascii=False)
    return Path(name), True


@app.command()
def evaluate(
    eval_file: Annotated[Path, typer.Argument(help="HotpotQA or MuSiQue questions: a JSON array or JSON Lines.")],
    save_file: Annotated[
        Path | None,
        typer.Option("--save-file", help="Where the report goes. Default: WORKDIR/<file name>-report.json."),
    ] = None,
    retrieval_url: Annotated[
        str | None,
        typer.Option("--retrieval-url", help="A retrieval API (POST {query, top_k}); default: a knowledge base "
                     "built from the file's paragraphs."),
    ] = None,
    workdir: Annotated[Path, typer.Option("--workdir", help="Folder of the knowledge bases and default reports.")] = (
        Path(".mxrag/corag")
    ),
    embedding: EmbeddingOption = None,
    llm_url: Annotated[
        str | None, typer.Option("--llm-url", help="An OpenAI-compatible server: its base URL (…/v1) or chat URL; "
                                  "default: the embedded LLM.")
    ] = None,
    llm_model: Annotated[str, typer.Option("--llm-model", help="Model name for --llm-url.")] = "default",
    num_threads: Annotated[
        int | None,
        typer.Option("--num-threads", help=f"Questions in parallel. Default: {REMOTE_THREADS} with --llm-url, "
                     f"{EMBEDDED_PARALLEL} with the embedded LLM (which then decodes as many at once).",
                     show_default=False),
    ] = None,
    llm_threads: Annotated[
        int | None,
        typer.Option("--llm-threads", help="CPU threads of the embedded LLM. Default: $MXRAG_LLM_THREADS, else "
                     "half the usable CPUs (1 to 8); all of them is faster on a machine doing nothing else.",
                     show_default=False),
    ] = None,
    max_path_length: Annotated[int, typer.Option("--max-path-length", help="Most sub-queries per question.")] = 3,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Evaluate only the first N questions.", show_default=False)
    ] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="Also run the naive-retrieval baseline.")] = True,
    recall: Annotated[bool, typer.Option("--recall/--no-recall", help="Compute retrieval recall.")] = True,
    num_contexts: Annotated[
        int, typer.Option("--num-contexts", help="Documents of the naive baseline; cap of CoRAG's for recall.")
    ] = 10,
    top_k: Annotated[int, typer.Option("--top-k", help="Documents per CoRAG retrieval.")] = 5,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Longest LLM reply, in tokens.")] = 64,
    ctx: Annotated[int, typer.Option("--ctx", help="The LLM's context window, in tokens.")] = 4096,
    early_stop: Annotated[
        bool, typer.Option("--early-stop/--no-early-stop", help="Let the model end a path when it knows enough.")
    ] = True,
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore the checkpoint or report of an earlier run and start over.")
    ] = False,
) -> None:
    """Evaluate CoRAG (and the naive baseline) on EVAL_FILE; print the summary as JSON.

    Resumable: finished questions are kept in SAVE_FILE.partial.jsonl, so running the same
    command again after an interruption (same file and settings) runs only the questions not done
    yet and those that failed. The checkpoint is removed once every question succeeded; a larger
    --limit with the same SAVE_FILE then runs only the new questions (--restart: all again).
    """
    from mx_rag.cli.common import fail
    from mx_rag.errors import MxRagError, ParameterError

    if limit is not None and limit < 1:
        fail(ParameterError(f"--limit must be >= 1, got {limit}"))
    if llm_threads is not None and (llm_url or not 1 <= llm_threads <= 1024):
        fail(ParameterError(f"--llm-threads is for the embedded LLM, in [1, 1024], got {llm_threads}"
                            + (" with --llm-url" if llm_url else "")))
    threads = num_threads if num_threads is not None else (REMOTE_THREADS if llm_url else EMBEDDED_PARALLEL)
    # absolute paths: the SDK's file checks refuse '..' components, which users type all the time
    eval_file, workdir = eval_file.resolve(), workdir.resolve()
    report_path = save_file.resolve() if save_file else workdir / f"{eval_file.stem}-report.json"
    try:
        report = _run(eval_file, report_path, retrieval_url, workdir, embedding, llm_url, llm_model, threads,
                      max_path_length, limit, naive, recall, num_contexts, top_k, max_tokens, ctx, early_stop,
                      restart, llm_threads)
    except MxRagError as exc:
        fail(exc)
    _note(f"report: {report_path} ({len(report) - 1} questions)")
    typer.echo(json.dumps(report[0], indent=2, ensure_ascii=False))


def _run(eval_file: Path, report_path: Path, retrieval_url: str | None, workdir: Path, embedding: str | None,
         llm_url: str | None, llm_model: str, threads: int, max_path_length: int, limit: int | None, naive: bool,
         recall: bool, num_contexts: int, top_k: int, max_tokens: int, ctx: int, early_stop: bool,
         restart: bool, llm_threads: int | None) -> list[Any]:
    from mx_rag.corag.config import MAX_THREADS, CoRagBaseConfig
    from mx_rag.corag.datasets import load_records
    from mx_rag.corag.evaluator import CoRagEvaluator
    from mx_rag.utils import ClientParam
    from mx_rag.utils.checks import check_int

    check_int("--num-threads", threads, 1, MAX_THREADS)
    records = load_records(eval_file, "eval_file")
    source: Any = retrieval_url or passage_retriever(workdir, records, embedding, top_k)
    selected, temporary = _selection(eval_file, records, limit, workdir)
    try:
        with _chat_llm(llm_url, llm_model, max_tokens, ctx, parallel=min(threads, MAX_SLOTS),
                       llm_threads=llm_threads) as llm:
            config = CoRagBaseConfig(llm, source, num_threads=threads, max_path_length=max_path_length,
                                     retrieve_top_k=top_k, client_param=ClientParam(use_http=True, timeout=120),
                                     context_tokens=ctx, early_stop=early_stop)
            _note(f"evaluating {min(limit or len(records), len(records))} questions with {threads} threads")
            with _evaluator_log():
                return CoRagEvaluator(config).evaluate(str(selected), str(report_path), calc_recall=recall,
                                                       enable_naive_retrieval=naive, num_contexts=num_contexts,
                                                       restart=restart)
    finally:
        if temporary:
            selected.unlink(missing_ok=True)

"""Run hostile-input cases, each in a child process under an address-space cap; print the results.

Usage: ``python tests/fuzz/hostile_runner.py --build DIR`` writes the files of ``hostile_cases``
into DIR, then runs them in a fresh process (so that the building leaves nothing in the memory
the children start from); ``python tests/fuzz/hostile_runner.py CASES.json`` runs a listing.
Either prints a JSON list, one object per case:
``outcome`` ("documents", "refused": our error, "crashed": any other exception, "killed": the
cap or the time limit ended the child), the error's type, its cause's type and message,
``peak_rss_mib`` (the child's ``ru_maxrss``, read with ``wait4``) and ``seconds``.

The libraries are imported once, in this process; each case runs in a forked child that sets
``RLIMIT_AS`` (1.5 GiB unless ``MXRAG_HOSTILE_CAP_MIB`` says otherwise) and a 120 s alarm first.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mx_rag.corag.retrieval_api import RetrievalApiClient, normalize_retrieve_api_results
from mx_rag.document import LoaderMng
from mx_rag.document import loader as loaders
from mx_rag.errors import MxRagError
from mx_rag.graphrag.json_repair import loads_tolerant
from mx_rag.llm import Img2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

CAP_MIB = int(os.environ.get("MXRAG_HOSTILE_CAP_MIB", "1536"))
ALARM_S = int(os.environ.get("MXRAG_HOSTILE_ALARM_S", "120"))
LOADERS = {name: getattr(loaders, name) for name in loaders.__all__ if name != "BaseLoader"}
MNG = LoaderMng.with_defaults()


def _documents(docs: list[Any], forbidden: str | None) -> dict[str, Any]:
    texts = [getattr(doc, "page_content", None) or getattr(doc, "text", "") for doc in docs]
    result: dict[str, Any] = {"outcome": "documents", "documents": len(docs), "chars": sum(map(len, texts))}
    if forbidden is not None:
        result["leaked"] = any(forbidden in text for text in texts)
    return result


def _nested_list(depth: int) -> Any:
    value: Any = ["innermost"]
    for _ in range(depth):
        value = [value]
    return value


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    kind, path, forbidden = case["kind"], case.get("path"), case.get("forbidden")
    if kind == "loader":
        kwargs: dict[str, Any] = {}
        if case.get("vlm"):  # nothing listens there: any request to the VLM fails the load
            param = ClientParam(use_http=True, retries=0, timeout=5)
            kwargs["vlm"] = Img2TextLLM(base_url="http://127.0.0.1:9/v1/chat/completions", model_name="vl",
                                        client_param=param)
        return _documents(LOADERS[case["loader"]](path, **kwargs).load(), forbidden)
    if kind == "mng":
        return _documents(MNG.load_and_split(path), forbidden)
    if kind == "json_repair":
        value = loads_tolerant(Path(path).read_text(encoding="utf-8"))
        return {"outcome": "documents", "documents": 1, "chars": len(json.dumps(value))}
    if kind == "normalize_nested":
        return _documents(normalize_retrieve_api_results({"chunks": _nested_list(case["depth"]), "passages": ["ok"]}),
                          None)
    if kind == "retrieval_body":
        with ScriptedServer() as server:
            server.enqueue(Reply.raw(Path(path).read_bytes(), content_type="application/json"))
            param = ClientParam(use_http=True, retries=0, timeout=30)
            with RetrievalApiClient(server.url("/retrieve"), client_param=param) as client:
                return _documents(client.retrieve("who?"), None)
    raise ValueError(f"unknown case kind {kind!r}")


def _child(case: dict[str, Any], write_fd: int) -> None:
    cap = CAP_MIB << 20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    signal.alarm(ALARM_S)  # SIGALRM's default action ends the child: reported as "killed"
    start = time.perf_counter()
    try:
        result = run_case(case)
    except BaseException as exc:  # every outcome is reported, none escapes
        cause = exc.__cause__
        result = {
            "outcome": "refused" if isinstance(exc, MxRagError) else ("value_error" if isinstance(exc, ValueError)
                                                                       else "crashed"),
            "error": type(exc).__name__,
            "cause": type(cause).__name__ if cause is not None else None,
            "message": str(exc)[:400],
        }
    result["seconds"] = round(time.perf_counter() - start, 2)
    os.write(write_fd, json.dumps(result).encode())
    os._exit(0)


def run(case: dict[str, Any]) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(case, write_fd)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    result: dict[str, Any] = json.loads(b"".join(chunks)) if chunks else {"outcome": "killed"}
    if os.WIFSIGNALED(status):
        result["signal"] = signal.Signals(os.WTERMSIG(status)).name
    result["name"] = case["name"]
    result["peak_rss_mib"] = round(usage.ru_maxrss / 1024)  # KiB on Linux
    return result


def main() -> None:
    if sys.argv[1] == "--build":
        from hostile_cases import build_cases

        listing = build_cases(Path(sys.argv[2]))
        os.execv(sys.executable, [sys.executable, __file__, str(listing)])
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps([run(case) for case in cases]))


if __name__ == "__main__":
    main()

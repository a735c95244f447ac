# SPDX-License-Identifier: Apache-2.0
"""Answers and chunks on the terminal: ``mxrag ask``, ``mxrag chat`` and ``mxrag search``.

The chain of an answer is the server's (``Answerer.chain``), so ``mxrag ask --chain hybrid`` answers
as ``model="kb/hybrid"`` does on ``mxrag serve``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer

from mx_rag.cli.files import shown_path
from mx_rag.cli.runtime import Opened

__all__ = ["Asking", "chat_loop", "print_chunks", "timed"]


@dataclass
class Asking:
    """One knowledge base, one chain, one LLM: asks questions and prints the answers."""

    opened: Opened
    llm: Any
    kb: str
    chain: str
    k: int | None
    max_tokens: int | None
    temperature: float | None

    def __post_init__(self) -> None:
        from mx_rag.app.answers import Answerer

        self.answerer = Answerer(self.opened.service, self.llm)

    def config(self) -> Any:
        from mx_rag.llm.llm_parameter import LLMParameterConfig

        llm = self.opened.settings.llm
        return LLMParameterConfig(max_tokens=self.max_tokens or llm.max_tokens,
                                  temperature=llm.temperature if self.temperature is None else self.temperature)

    def _chain(self, question: Any) -> Any:
        return self.answerer.chain(self.opened.who, self.kb, self.chain, question, self.k)

    def ask(self, text: str, history: list[dict[str, str]] | None = None, *, stream: bool = False,
            as_json: bool = False) -> str:
        """Print the answer to ``text`` and its sources; return the answer."""
        from mx_rag.app.answers import Question, source_entries

        question = Question(text, list(history or []))
        chain = self._chain(question)
        if not stream:
            result = self.answerer.answer(chain, question, self.config())
            answer = str(result.get("result", "")).strip()
            sources = _with_paths(source_entries(result), result)
            if as_json:
                typer.echo(json.dumps({"knowledge_base": self.kb, "chain": self.chain, "question": text,
                                       "answer": answer, "sources": sources}, ensure_ascii=False))
            else:
                typer.echo(answer)
                print_sources(sources)
            return answer
        return self._stream(chain, question, as_json)

    def _stream(self, chain: Any, question: Any, as_json: bool) -> str:
        """Print each delta of the answer as it comes (``Answerer.stream``), then the sources."""
        from mx_rag.app.answers import source_entries

        pieces, result = [], {}
        for kind, value in self.answerer.stream(chain, question, self.config()):
            if kind != "delta":
                result = value
                continue
            pieces.append(value)
            if as_json:
                typer.echo(json.dumps({"delta": value}, ensure_ascii=False))
            else:
                sys.stdout.write(value)
                sys.stdout.flush()
        sources = _with_paths(source_entries(result), result)
        if as_json:
            typer.echo(json.dumps({"sources": sources}, ensure_ascii=False))
        else:
            typer.echo("")
            print_sources(sources)
        return "".join(pieces).strip()


@contextlib.contextmanager
def timed(on: bool) -> Iterator[None]:
    """With ``on``, print the time of each stage run in the block (``mx_rag.utils.tracing``; a
    stage run more than once is summed) and the whole block's to stderr."""
    if not on:
        yield
        return
    from mx_rag.utils import tracing

    started = time.perf_counter()
    with tracing.timings() as stages:
        yield
    total: dict[str, float] = {}
    for name, seconds in stages:
        total[name] = total.get(name, 0.0) + seconds
    total["total"] = time.perf_counter() - started
    typer.echo("timings:", err=True)
    for name, seconds in total.items():
        typer.echo(f"  {name:<24}{seconds * 1000:10.1f} ms", err=True)


def _with_paths(entries: list[dict[str, Any]], result: dict[str, Any]) -> list[dict[str, Any]]:
    """The API's source entries, each with the full path of its file as the user would type it."""
    docs = result.get("source_documents") or []
    for entry, doc in zip(entries, docs, strict=False):
        source = doc.get("metadata", {}).get("source")
        if isinstance(source, str):
            entry["path"] = shown_path(source)
    return entries


def print_sources(sources: list[dict[str, Any]]) -> None:
    if not sources:
        typer.echo("\nSources: none (nothing in the knowledge base matched)")
        return
    typer.echo("\nSources:")
    for i, entry in enumerate(sources, start=1):
        typer.echo(f"  [{i}] {_where(entry)}")


def _where(entry: dict[str, Any]) -> str:
    name = entry.get("path") or entry.get("source") or "?"
    page = f", page {entry['page']}" if entry.get("page") is not None else ""
    score = f" (score {entry['score']:.2f})" if isinstance(entry.get("score"), (int, float)) else ""
    if entry.get("match") == "keyword":
        score = " (keyword match)"
    return f"{name}{page}{score}"


def print_chunks(docs: list[Any], as_json: bool, width: int = 300) -> None:
    """``mxrag search``'s output: each chunk with its file, page and score."""
    entries = []
    for doc in docs:
        meta = dict(doc.metadata)
        source = meta.get("source")
        entries.append({"text": doc.page_content, "path": shown_path(source) if isinstance(source, str) else None,
                        "page": meta.get("page"), "score": meta.get("score")})
    if as_json:
        typer.echo(json.dumps(entries, ensure_ascii=False))
        return
    if not entries:
        typer.echo("no chunk matched", err=True)
    for i, entry in enumerate(entries, start=1):
        text = " ".join(str(entry["text"]).split())
        typer.echo(f"[{i}] {_where(entry)}\n    {text[:width]}{'…' if len(text) > width else ''}")


CHAT_HELP = "Type a question. /clear forgets the conversation, /exit (or Ctrl-D) ends; Ctrl-C stops an answer."


def chat_loop(asking: Asking, stream: bool) -> None:
    """Read questions from stdin until EOF or /exit; the conversation goes with each question."""
    interactive = sys.stdin.isatty()
    if interactive:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        typer.echo(f"chatting with knowledge base {asking.kb!r} ({asking.chain} chain). {CHAT_HELP}", err=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C anywhere but in an answer ends the chat
        _converse(asking, stream, interactive)
        return
    typer.echo("", err=True)


def _converse(asking: Asking, stream: bool, interactive: bool) -> None:
    from mx_rag.app.answers import MAX_HISTORY
    from mx_rag.errors import MxRagError

    history: list[dict[str, str]] = []
    while True:
        try:
            line = input("> " if interactive else "")
        except EOFError:
            break
        text = line.strip()
        if text in ("/exit", "/quit"):
            break
        if text == "/clear":
            history.clear()
            typer.echo("(conversation cleared)", err=True)
            continue
        if text in ("/help", "?"):
            typer.echo(CHAT_HELP, err=True)
            continue
        if not text:
            continue
        try:
            answer = asking.ask(text, history, stream=stream)
        except KeyboardInterrupt:
            typer.echo("\n(answer stopped)", err=True)
            continue
        except MxRagError as exc:  # the conversation goes on: the LLM may be back for the next question
            typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
            continue
        typer.echo("")
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
        del history[:-(MAX_HISTORY - MAX_HISTORY % 2)]  # whole turns, as many as a chain takes

"""Helpers shared by the sample-generator and evaluator tests (imported by name: tests/corag is on sys.path).

* ``build_retriever``: a real knowledge base (MindFAISS + SQLiteDocstore + HashEmbedding) over
  every paragraph of the HotpotQA and MuSiQue samples, one ``"Title\\ntext"`` chunk each.
* ``RoutedLLM``: a ``ScriptedServer`` whose replies depend on the prompt (so many threads stay
  deterministic): sub-query prompts get the scripted sub-queries in order, sub-answer prompts
  the title of the top document, final-answer prompts the scripted answers (one per attempt),
  judge prompts YES/NO by exact match.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mx_rag.corag.datasets import iter_passages
from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

DATA = Path(__file__).resolve().parents[1] / "data" / "multihop"
HOTPOT = DATA / "hotpotqa_sample.json"
MUSIQUE = DATA / "musique_sample.json"
DIM = 1024


def load(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def build_retriever(root: Path, k: int = 5) -> Retriever:
    """A real dense retriever over every paragraph of both samples."""
    embed = HashEmbedding(DIM)
    passages = list(iter_passages(load(HOTPOT) + load(MUSIQUE)))
    docstore = SQLiteDocstore(db_path=str(root / "kb.db"))
    vectors = MindFAISS(x_dim=DIM, devs=[0], load_local_index=str(root / "kb.index"))
    texts = [text for _, text in passages]
    ids = docstore.add([MxDocument(text, {"title": title}) for title, text in passages], 1)
    vectors.add(ids, embed.embed_documents(texts), document_id=1)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=embed.embed_documents, k=k)


def make_llm(server: ScriptedServer, **kwargs: Any) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True, retries=0), **kwargs)


# -- prompt-aware scripted LLM ---------------------------------------------------------------------

_MAIN = re.compile(r"## Main question\n(.*?)\n", re.DOTALL)
_QUESTION = re.compile(r"## Question\n(.*?)\n", re.DOTALL)
_FIRST_DOC = re.compile(r"Document 1:\n(.*?)\n")
_JUDGE = re.compile(r"Question: (.*?)\nReference answer: (.*?)\nPredicted answer: (.*?)\n", re.DOTALL)


@dataclass
class Script:
    """What the LLM says for one main question."""

    subqueries: list[str]
    answers: list[str]  # final answer of attempt 1, 2, ... (the last one repeats)
    naive_answer: str = "unknown"


@dataclass
class RoutedLLM:
    """Serves a ``ScriptedServer`` whose replies are computed from each prompt."""

    scripts: dict[str, Script]
    on_final: Callable[[str], None] | None = None  # called with the question before answering
    fail_final: set[str] = field(default_factory=set)  # questions whose final answer gets HTTP 500
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:  # the SDK strips questions (one HotpotQA question ends with a space)
        self.scripts = {question.strip(): script for question, script in self.scripts.items()}
        self.fail_final = {question.strip() for question in self.fail_final}

    def reply(self, prompt: str) -> Reply:
        if prompt.startswith("You are an expert evaluator"):
            match = _JUDGE.search(prompt)
            assert match, prompt
            truths = [t.strip('"') for t in match.group(2).split(" or ")]
            return Reply.chat("YES" if match.group(3).strip() in truths else "NO")
        if "Write the next search query" in prompt:
            question = _MAIN.search(prompt).group(1)  # type: ignore[union-attr]
            done = len(re.findall(r"^Step \d+:", prompt, re.MULTILINE))
            script = self.scripts[question]
            if done < len(script.subqueries):
                return Reply.chat(f"SubQuery: {script.subqueries[done]}")
            return Reply.chat(f"Final Answer: {script.answers[0]}")
        if prompt.startswith("Answer the question using only"):
            asked = _QUESTION.search(prompt).group(1)  # type: ignore[union-attr]
            if asked in self.scripts:  # the naive baseline asks the main question itself
                return Reply.chat(self.scripts[asked].naive_answer)
            top = _FIRST_DOC.search(prompt)
            return Reply.chat(top.group(1) if top else "No relevant information available")
        if prompt.startswith("Answer the main question"):
            question = _MAIN.search(prompt).group(1)  # type: ignore[union-attr]
            if self.on_final is not None:
                self.on_final(question)
            if question in self.fail_final:
                return Reply.status(500, {"error": {"message": "scripted failure"}})
            with self.lock:
                attempt = self.calls.get(question, 0)
                self.calls[question] = attempt + 1
            answers = self.scripts[question].answers
            return Reply.chat(answers[min(attempt, len(answers) - 1)])
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")


class RoutedServer(ScriptedServer):
    """A ScriptedServer answering through a ``RoutedLLM`` (queued replies still go first)."""

    def __init__(self, router: RoutedLLM) -> None:
        super().__init__()
        self.router = router

    def _take(self, record: RecordedRequest) -> Reply | None:
        queued = super()._take(record)
        if queued is not None:
            return queued
        messages = (record.json or {}).get("messages") or [{}]
        return self.router.reply(str(messages[-1].get("content", "")))

    def prompts(self, prefix: str) -> list[str]:
        return [str(r.json["messages"][-1]["content"]) for r in self.requests
                if r.json and str(r.json["messages"][-1]["content"]).startswith(prefix)]

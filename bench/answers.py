# SPDX-License-Identifier: Apache-2.0
"""Answer quality of the embedded LLMs of the registry: HotpotQA, Chinese questions, the main job.

For each model (``--models``, default the registry's default) a ``LocalLLMServer`` is started
(``--threads``, default ``default_threads()``) and asked, at temperature 0, through
``Text2TextLLM`` with the project's prompt layout (documents, blank line, instruction, blank
line, question: ``_user_content_builder``):

* ``hotpotqa``: the first ``--hotpot`` questions of ../shared/data/multihop/hotpotqa_train.json
  (default 30), each answered from its 2 gold paragraphs and its first 3 distractors, with a
  short-answer instruction; EM and F1 computed the standard way (``mx_rag.corag.metrics``) and
  answer containment.
* ``chinese``: 10 questions written for this benchmark over the Chinese Debian Reference
  (../shared/data/docs/debian-reference/debian-reference.zh-cn.txt), each answered from the
  passage that holds its answer plus the passages of two other questions, with the default
  Chinese prompt (``DEFAULT_RAG_PROMPT``); right when the answer contains an accepted form.
* ``main_job``: the README's question ("Which file stores the vectors by default?") over this
  repository's docs/*.md in a fresh ``LocalKnowledge`` (all-MiniLM-L6-v2, k=3), answered by
  ``SingleText2TextChain``; right when the answer names ``faiss.index``.

Output: JSON lines on stdout (an environment line, one line per model and task with the scores
and seconds per question, and ``peak_rss_mb`` of this process, llama.cpp included). Slow on 2
cores: ``--hotpot 10`` is a reduced run (say so when you quote it).

Run::

    .venv/bin/python bench/answers.py                                   # the default model
    .venv/bin/python bench/answers.py --models qwen2.5-coder-1.5b,smollm2 --hotpot 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import ROOT, emit, loadavg_1m
from langchain_core.documents import Document

SHARED = ROOT.parent / "shared" / "data"
HOTPOT = SHARED / "multihop" / "hotpotqa_train.json"
ZH_TEXT = SHARED / "docs" / "debian-reference" / "debian-reference.zh-cn.txt"
SHORT_ANSWER = ("Answer the question from the passages above with a short phrase only (a name, a date, a number, "
                "or yes or no), no explanation.")
MAIN_QUESTION = "Which file stores the vectors by default?"
# (question, a distinctive piece of the passage holding the answer, accepted answers)
CHINESE: list[tuple[str, str, list[str]]] = [
    ("系统主机名保存在哪个文件中？", "此主机名保存在", ["/etc/hostname"]),
    ("硬盘和网络文件系统的挂载选项可以在哪个文件中设置？", "挂载选项可以在", ["/etc/fstab"]),
    ("加密文件系统的配置设置在哪个文件中？", "加密文件系统的配置设置在", ["/etc/crypttab"]),
    ("在默认的 Debian 系统中，有几个可切换的字符控制台？", "有6个可切换", ["6", "六"]),
    ("加密后的密码保存在哪个文件中？", "加密后的密码保存在", ["/etc/shadow"]),
    ("Linux 系统上默认的文件系统是什么？", "Ext4 文件系统是 Linux 系统上默认", ["ext4"]),
    ("默认的非交互 POSIX shell \"/bin/sh\" 指向哪个程序？", "默认的非交互 POSIX shell", ["dash"]),
    ("普通的档案库默认的 Pin-Priority 值是多少？", "默认的 Pin-Priority", ["500"]),
    ("Debian 默认的桌面环境是什么？", "Debian 默认的桌面环境", ["gnome"]),
    ("默认的语言环境是在哪个环境变量中定义的？", "默认的语言环境是在", ["lang"]),
]


def _passage(lines: list[str], anchor: str, before: int = 4, after: int = 8) -> str:
    """The lines around the first line holding ``anchor`` (the answer's passage)."""
    for index, line in enumerate(lines):
        if anchor in line:
            window = lines[max(0, index - before):index + after]
            return "\n".join(part.strip() for part in window if part.strip())
    raise SystemExit(f"bench/answers.py: {anchor!r} is not in {ZH_TEXT}")


def _ask(llm: Any, question: str, passages: list[str], prompt: str, max_tokens: int) -> tuple[str, float]:
    from mx_rag.chain.single_text_to_text import _user_content_builder
    from mx_rag.llm import LLMParameterConfig

    content = _user_content_builder(question, [Document(page_content=p) for p in passages], prompt)
    started = time.monotonic()
    answer = llm.chat(content, llm_config=LLMParameterConfig(max_tokens=max_tokens, temperature=0))
    return answer.strip(), time.monotonic() - started


def hotpotqa(llm: Any, count: int) -> dict[str, Any]:
    from mx_rag.corag.metrics import contains_answer, exact_match, f1_score

    items = json.loads(HOTPOT.read_text(encoding="utf-8"))[:count]
    em = f1 = contains = seconds = 0.0
    for item in items:
        gold = {title for title, _ in item["supporting_facts"]}
        paragraphs = {title: f"{title}: {''.join(sentences)}" for title, sentences in item["context"]}
        chosen = [t for t in paragraphs if t in gold] + [t for t in paragraphs if t not in gold][:3]
        answer, took = _ask(llm, item["question"], [paragraphs[t] for t in chosen], SHORT_ANSWER, 32)
        em += exact_match(answer, item["answer"])
        f1 += f1_score(answer, item["answer"])
        contains += contains_answer(answer, item["answer"])
        seconds += took
    n = len(items)
    return {"n": n, "em": round(em / n, 3), "f1": round(f1 / n, 3), "contains": round(contains / n, 3),
            "seconds_per_question": round(seconds / n, 1)}


def chinese(llm: Any) -> dict[str, Any]:
    from mx_rag.chain.single_text_to_text import DEFAULT_RAG_PROMPT

    lines = ZH_TEXT.read_text(encoding="utf-8").splitlines()
    passages = [_passage(lines, anchor) for _, anchor, _ in CHINESE]
    right, seconds, wrong = 0, 0.0, []
    for index, (question, _, accepted) in enumerate(CHINESE):
        context = [passages[index], passages[(index + 3) % len(CHINESE)], passages[(index + 7) % len(CHINESE)]]
        answer, took = _ask(llm, question, context, DEFAULT_RAG_PROMPT, 96)
        seconds += took
        if any(form in answer.lower() for form in accepted):
            right += 1
        else:
            wrong.append({"question": question, "answer": answer[:200]})
    return {"n": len(CHINESE), "right": right, "seconds_per_question": round(seconds / len(CHINESE), 1),
            "wrong": wrong}


def main_job(llm: Any) -> dict[str, Any]:
    from mx_rag.chain import SingleText2TextChain
    from mx_rag.knowledge.local import LocalKnowledge
    from mx_rag.llm import LLMParameterConfig

    docs = sorted((ROOT / "docs").glob("*.md"))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-answers-") as work:
        kb = LocalKnowledge.open(work, white_paths=[str(ROOT / "docs")])
        kb.sync(docs)
        chain = SingleText2TextChain(retriever=kb.retriever(k=3), llm=llm)
        started = time.monotonic()
        result = chain.query(MAIN_QUESTION, LLMParameterConfig(max_tokens=128, temperature=0))
        assert isinstance(result, dict)
        took = time.monotonic() - started
    answer = result["result"].strip()
    sources = [Path(doc["metadata"]["source"]).name for doc in result["source_documents"]]
    return {"question": MAIN_QUESTION, "answer": answer, "right": "faiss.index" in answer, "sources": sources,
            "seconds": round(took, 1)}


def run_model(name: str, args: argparse.Namespace) -> None:
    from mx_rag.llm import Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam

    started = time.monotonic()
    with LocalLLMServer(name, n_ctx=4096, n_parallel=1, n_threads=args.threads) as server:
        load = time.monotonic() - started
        llm = Text2TextLLM(base_url=server.chat_url, model_name=server.model_name,
                           client_param=ClientParam(use_http=True, timeout=600))
        common = {"model": name, "threads": server.n_threads, "load_s": round(load, 1)}
        tasks = {"hotpotqa": lambda: hotpotqa(llm, args.hotpot), "chinese": lambda: chinese(llm),
                 "main_job": lambda: main_job(llm)}
        for task in args.tasks.split(","):
            result = tasks[task]()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            emit({**common, "task": task, **result, "peak_rss_mb": round(peak)})


def main() -> None:
    from mx_rag.llm.models import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--models", default=DEFAULT_MODEL, help="comma-separated registry names or GGUF paths")
    parser.add_argument("--hotpot", type=int, default=30, help="HotpotQA questions (at most 100)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: default_threads())")
    parser.add_argument("--tasks", default="hotpotqa,chinese,main_job")
    args = parser.parse_args()
    emit({"env": {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count(),
                  "load_avg_1m": loadavg_1m(), "hotpot_questions": args.hotpot}})
    for name in args.models.split(","):
        run_model(name, args)


if __name__ == "__main__":
    main()

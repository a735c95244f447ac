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
* ``chinese``: 30 questions written for this benchmark over the Chinese Debian Reference
  (../shared/data/docs/debian-reference/debian-reference.zh-cn.txt), each answered from the
  passage that holds its answer plus the passages of two other questions, with the default
  Chinese prompt (``DEFAULT_RAG_PROMPT``); right when the answer contains an accepted form.
* ``pooled``: end to end over the pooled passages (retrieval included), the embedded defaults
  against a plain LangChain pipeline, both on the same llama.cpp server, in the same run:

  - ``mx_rag``: what ``mxrag ask`` does without options: the server's default chain
    (``[chain] type``, ``hybrid``: dense multilingual-e5-small + SQLite FTS5 fused by RRF with
    ``[chain] dense_weight`` and ``subject_links``, 4k candidates a side) at ``[chain] k`` (5),
    ``SingleText2TextChain`` with the served layout (``question_first_content``: the question,
    the passages, the instruction, the question);
  - ``langchain``: ``HuggingFaceEmbeddings`` (the same model, with e5's ``query: `` / ``passage: ``
    prompts), langchain-community ``FAISS``, ``as_retriever(k=5)``, a ``ChatPromptTemplate`` with
    the plain layout (the passages, the instruction, the question) and ``ChatOpenAI``.

  Both answer with the short-answer instruction (the Chinese set: the Chinese one). Data: the
  first ``--pooled`` questions (default 100) of HotpotQA (994 pooled paragraphs) and MuSiQue
  (1,890), ``"<title>: <paragraph>"`` chunks, one vector per paragraph computed once with
  mx_rag's ``TextEmbedding`` in float32 and given to both stores (so both search the same vectors; each
  embeds its questions itself); and the Chinese Debian Reference **PDF**, loaded and split by each
  system's own loader (mx_rag ``LoaderMng.with_defaults()``, LangChain ``PyPDFLoader`` and
  ``RecursiveCharacterTextSplitter`` at the same 750 / 150) with the ``--chinese`` questions of
  ``CHINESE`` (30). Reported per system and set: EM, F1, containment, recall@5 (supporting
  paragraphs among the 5 passages given to the LLM; Chinese: the answer's anchor in one of them,
  whitespace ignored) and seconds per question.
* ``main_job``: the README's question ("Which file stores the vectors by default?") over this
  repository's docs/*.md in a fresh ``LocalKnowledge`` (its default embedding and retriever),
  answered by ``SingleText2TextChain`` as ``mxrag ask`` does (``answer_prompt``,
  ``question_first_content``); right when the answer names ``faiss.index``.

Output: JSON lines on stdout (an environment line, one line per model and task with the scores
and seconds per question, and ``peak_rss_mb`` of this process, llama.cpp included). Slow on 2
cores: ``--hotpot 10`` is a reduced run (say so when you quote it). ``pooled`` appends each
answer with its scores to ``--records`` (``bench/results/answers-pooled.jsonl``: model, commit,
set, system, question, answer) and skips questions already there, so a run of hours can be
stopped and resumed; its lines average every recorded question of the sets asked for (``n``).
Delete the file's lines for a model to measure it afresh after a change to either pipeline.

Run::

    .venv/bin/python bench/answers.py                                   # the default model
    .venv/bin/python bench/answers.py --models qwen2.5-coder-1.5b,smollm2 --hotpot 10
    .venv/bin/python bench/answers.py --tasks pooled --pooled 100     # about 2 h 30 min on 2 idle cores
    .venv/bin/python bench/answers.py --tasks pooled --sets musique   # one set (resumes from --records)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import CACHE_DIR, ROOT, cached_vectors, emit, loadavg_1m
from langchain_core.documents import Document

SHARED = ROOT.parent / "shared" / "data"
HOTPOT = SHARED / "multihop" / "hotpotqa_train.json"
ZH_TEXT = SHARED / "docs" / "debian-reference" / "debian-reference.zh-cn.txt"
MUSIQUE = SHARED / "multihop" / "musique_train.json"
MUSIQUE_CORPUS = SHARED / "multihop" / "musique_train_corpus.json"
HOTPOT_CORPUS = SHARED / "multihop" / "hotpotqa_train_corpus.json"
ZH_PDF = SHARED / "docs" / "debian-reference" / "debian-reference.zh-cn.pdf"
SHORT_ANSWER_ZH = "请只根据上述信息，用一个简短的词语回答问题（名称、文件路径、命令或数字），不要解释。"
POOLED_K = 5
RECORDS = ROOT / "bench" / "results" / "answers-pooled.jsonl"
SHORT_ANSWER = (
    "Answer the question from the passages above with a short phrase only (a name, a date, a number, "
    "or yes or no), no explanation."
)
MAIN_QUESTION = "Which file stores the vectors by default?"
# (question, a distinctive piece of the passage holding the answer, accepted answers)
CHINESE: list[tuple[str, str, list[str]]] = [
    ("系统主机名保存在哪个文件中？", "此主机名保存在", ["/etc/hostname"]),
    ("硬盘和网络文件系统的挂载选项可以在哪个文件中设置？", "挂载选项可以在", ["/etc/fstab"]),
    ("加密文件系统的配置设置在哪个文件中？", "加密文件系统的配置设置在", ["/etc/crypttab"]),
    ("在默认的 Debian 系统中，有几个可切换的字符控制台？", "有6个可切换", ["6", "六"]),
    ("加密后的密码保存在哪个文件中？", "加密后的密码保存在", ["/etc/shadow"]),
    ("Linux 系统上默认的文件系统是什么？", "Ext4 文件系统是 Linux 系统上默认", ["ext4"]),
    ('默认的非交互 POSIX shell "/bin/sh" 指向哪个程序？', "默认的非交互 POSIX shell", ["dash"]),
    ("普通的档案库默认的 Pin-Priority 值是多少？", "默认的 Pin-Priority", ["500"]),
    ("Debian 默认的桌面环境是什么？", "Debian 默认的桌面环境", ["gnome"]),
    ("默认的语言环境是在哪个环境变量中定义的？", "默认的语言环境是在", ["lang"]),
    ("登录后显示的当日消息（Message Of The Day）欢迎信息保存在哪个文件里？", "中的欢迎信息", ["/etc/motd"]),
    ("Debian 通过哪个命令统一调用系统默认的文本编辑器？", "提供了对系统默认编辑器的统一访问", ["/usr/bin/editor"]),
    (
        "APT 用来追踪自动安装软件包的本地安装状态信息存放在哪个文件中？",
        "状态信息保存在",
        ["/var/lib/apt/extended_states", "extended_states"],
    ),
    ("通过 APT 远程下载的软件包在清除前缓存在哪个目录？", "远程获取的软件包都被保存在", ["/var/cache/apt"]),
    ("apt 软件包用于自动下载软件包的 cron 脚本是哪个文件？", "软件包有自己的 cron 脚本", ["/etc/cron.daily/apt"]),
    ("系统启动时 PID 为 1 的 init 程序默认位于哪个路径？", "init 程序的默认路径是", ["/sbin/init"]),
    ("要永久去掉内核启动参数 quiet 以查看启动日志，应编辑哪个文件？", "为固化这个修改", ["/etc/default/grub"]),
    ("系统管理员自己编写的 systemd 单元配置文件应放在哪个目录？", "系统管理员的配置文件", ["/etc/systemd/system"]),
    ("解析主机名时，DNS 方式查询的域名服务器写在哪个文件里？", "dns 方式被调用", ["/etc/resolv.conf", "resolv.conf"]),
    ("传统的 ifupdown 软件包使用哪个配置文件？", "它的配置文件位于", ["/etc/network/interfaces"]),
    ("许多非 MTA 程序把哪个文件的内容当作默认的邮件主机名？", "被许多非 MTA 程序用作", ["/etc/mailname"]),
    (
        "在 SSH 服务端，可以在哪个文件里给公钥条目加选项来限制主机和运行的命令？",
        "里给条目增加选项来限制主机",
        ["authorized_keys"],
    ),
    ("想知道 fontconfig 当前默认使用哪种字体，可以运行什么命令？", "查看 fontconfig 的默认字体", ["fc-match"]),
    (
        "显卡和输入设备已改由内核 DRM、KMS 和 udev 配置后，哪个旧的 X 服务器配置文件不应当存在于系统上？",
        "的 X 服务端配置文件",
        ["/etc/x11/xorg.conf", "xorg.conf"],
    ),
    (
        "系统范围的默认语言环境值通过创建哪个文件来设置，供 PAM 使用？",
        "来设置系统默认的语言环境值给",
        ["/etc/default/locale"],
    ),
    (
        "想一次性获得全部预先编译好的 locale 数据，应安装哪个软件包？",
        "软件包有所有预编译的语言环境数据",
        ["locales-all"],
    ),
    ("对于不是全天连续运行的机器，应安装哪个软件包来定时执行周期性命令？", "对那些非连续运行的系统", ["anacron"]),
    ("GnuPG 默认的公钥服务器在哪个配置文件里设置？", "默认良好的公钥服务器在", ["~/.gnupg/gpg.conf", "gpg.conf"]),
    ("编译时用 -lm 链接数学库，实际的库文件名是什么？", "实际的库文件位于", ["libm.so.6"]),
    ("从哪个 Debian 版本开始，默认内核就支持 KVM？", "默认的 Debian 内核就是支持 KVM", ["lenny"]),
]


def _passage(lines: list[str], anchor: str, before: int = 4, after: int = 8) -> str:
    """The lines around the first line holding ``anchor`` (the answer's passage)."""
    for index, line in enumerate(lines):
        if anchor in line:
            window = lines[max(0, index - before) : index + after]
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
    return {
        "n": n,
        "em": round(em / n, 3),
        "f1": round(f1 / n, 3),
        "contains": round(contains / n, 3),
        "seconds_per_question": round(seconds / n, 1),
    }


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
    return {"n": len(CHINESE), "right": right, "seconds_per_question": round(seconds / len(CHINESE), 1), "wrong": wrong}


def main_job(llm: Any) -> dict[str, Any]:
    from mx_rag.app.answers import answer_prompt
    from mx_rag.chain import SingleText2TextChain
    from mx_rag.chain.single_text_to_text import question_first_content
    from mx_rag.knowledge.local import LocalKnowledge
    from mx_rag.llm import LLMParameterConfig

    docs = sorted((ROOT / "docs").glob("*.md"))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-answers-") as work:
        kb = LocalKnowledge.open(work, white_paths=[str(ROOT / "docs")])
        kb.sync(docs)
        chain = SingleText2TextChain(retriever=kb.retriever(), llm=llm, prompt=answer_prompt(MAIN_QUESTION),
                                     user_content_builder=question_first_content)
        started = time.monotonic()
        result = chain.query(MAIN_QUESTION, LLMParameterConfig(max_tokens=128, temperature=0))
        assert isinstance(result, dict)
        took = time.monotonic() - started
    answer = result["result"].strip()
    sources = [Path(doc["metadata"]["source"]).name for doc in result["source_documents"]]
    return {
        "question": MAIN_QUESTION,
        "answer": answer,
        "right": "faiss.index" in answer,
        "sources": sources,
        "seconds": round(took, 1),
    }


# -- pooled: retrieval + answer, mx_rag's defaults against a plain LangChain pipeline ----------------


def _english_set(name: str, count: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Chunk texts and questions ({"question", "answer", "gold": texts of supporting paragraphs}).

    MuSiQue's ``answer`` lists the answer and its aliases (EM / F1 / containment take the best, as
    MuSiQue's evaluation and ``mxrag corag evaluate`` do); HotpotQA has one answer.
    """
    if name == "hotpotqa":
        corpus = json.loads(HOTPOT_CORPUS.read_text(encoding="utf-8"))
        by_title = {title: f"{title}: {''.join(sentences).strip()}" for title, sentences in corpus.items()}
        texts = list(by_title.values())
        items = json.loads(HOTPOT.read_text(encoding="utf-8"))[:count]
        return texts, [
            {"question": r["question"], "answer": r["answer"], "gold": {by_title[t] for t, _ in r["supporting_facts"]}}
            for r in items
        ]
    paragraphs = json.loads(MUSIQUE_CORPUS.read_text(encoding="utf-8"))
    texts = [f"{p['title']}: {p['text']}" for p in paragraphs]
    items = json.loads(MUSIQUE.read_text(encoding="utf-8"))[:count]
    return texts, [
        {
            "question": r["question"],
            "answer": [r["answer"], *r.get("answer_aliases", [])],  # scored against the best, as MuSiQue's own
            "gold": {f"{p['title']}: {p['paragraph_text']}" for p in r["paragraphs"] if p["is_supporting"]},
        }
        for r in items
    ]


def _squeeze(text: str) -> str:
    return "".join(text.split())


class _Pipelines:
    """The two pipelines over one corpus: ``ask(system, question, instruction)`` -> (answer, passages)."""

    def __init__(self, server: Any, embedding: Any, lc_embedding: Any, work: Path, name: str,
                 texts: list[str] | None) -> None:
        from langchain_community.vectorstores import FAISS
        from langchain_openai import ChatOpenAI

        from mx_rag.knowledge.store import DEFAULT_EMBEDDING
        from mx_rag.llm import Text2TextLLM
        from mx_rag.retrievers import HybridRetriever
        from mx_rag.server.settings import ServerSettings
        from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
        from mx_rag.storage.vectorstore import MindFAISS
        from mx_rag.utils import ClientParam

        chain = ServerSettings().chain
        if chain.type != "hybrid" or chain.k != POOLED_K:
            raise SystemExit(f"bench/answers.py: the defaults changed ({chain.type}, k={chain.k}): update the bench")
        if texts is None:  # the Chinese PDF: each system loads and splits it itself
            mx_texts, lc_texts = self._pdf_chunks()
            lc_store = FAISS.from_texts(lc_texts, lc_embedding)
        else:
            mx_texts = lc_texts = texts
        matrix, seconds = cached_vectors(embedding.embed_documents, DEFAULT_EMBEDDING, mx_texts, CACHE_DIR, name)
        vectors = matrix.tolist()
        self.embed_s = None if seconds is None else round(seconds, 1)  # None: vectors from an earlier run
        if texts is not None:  # the same vectors in LangChain's store
            lc_store = FAISS.from_embeddings(list(zip(texts, vectors, strict=True)), lc_embedding)
        self.docstore = SQLiteDocstore(work / f"{name}.db")
        ids = self.docstore.add(
            [MxDocument(page_content=t, metadata={}, document_name=name) for t in mx_texts], document_id=1
        )
        store = MindFAISS(x_dim=embedding.dimension, devs=None, load_local_index=None)
        store.add(ids, vectors, document_id=1)
        self.retrievers = {
            "mx_rag": HybridRetriever(
                vector_store=store, document_store=self.docstore, embed_func=embedding.embed_documents, k=POOLED_K,
                dense_weight=chain.dense_weight, subject_links=chain.subject_links,
            ),
            "langchain": lc_store.as_retriever(search_kwargs={"k": POOLED_K}),
        }
        self.llm = Text2TextLLM(
            base_url=server.chat_url, model_name=server.model_name, client_param=ClientParam(use_http=True, timeout=600)
        )
        self.chat = ChatOpenAI(
            base_url=server.chat_url.rsplit("/chat/completions", 1)[0],
            api_key="none",
            model=server.model_name,
            temperature=0,
            timeout=600,
            max_retries=0,
        )
        self.chunks = {"mx_rag": len(mx_texts), "langchain": len(lc_texts)}

    @staticmethod
    def _pdf_chunks() -> tuple[list[str], list[str]]:
        from langchain_community.document_loaders import PyPDFLoader
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        from mx_rag.document import LoaderMng

        mx = [d.page_content for d in LoaderMng.with_defaults().load_and_split(ZH_PDF) if d.page_content.strip()]
        splitter = RecursiveCharacterTextSplitter(chunk_size=750, chunk_overlap=150)
        lc = [
            d.page_content for d in splitter.split_documents(PyPDFLoader(str(ZH_PDF)).load()) if d.page_content.strip()
        ]
        return mx, lc

    def ask(self, system: str, question: str, instruction: str, max_tokens: int) -> tuple[str, list[str], float]:
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.runnables import RunnablePassthrough

        from mx_rag.chain import SingleText2TextChain
        from mx_rag.chain.single_text_to_text import question_first_content
        from mx_rag.llm import LLMParameterConfig

        started = time.monotonic()
        if system == "mx_rag":
            chain = SingleText2TextChain(llm=self.llm, retriever=self.retrievers["mx_rag"], prompt=instruction,
                                         user_content_builder=question_first_content)
            result = chain.query(question, LLMParameterConfig(max_tokens=max_tokens, temperature=0))
            assert isinstance(result, dict)
            passages = [doc["page_content"] for doc in result["source_documents"]]
            return result["result"].strip(), passages, time.monotonic() - started
        retriever = self.retrievers["langchain"]
        found: list[str] = []

        def context(docs: list[Document]) -> str:
            found.extend(doc.page_content for doc in docs)
            return "\n\n".join(doc.page_content for doc in docs)

        prompt = ChatPromptTemplate.from_messages(
            [("human", "{context}\n\n" + instruction.replace("{", "{{").replace("}", "}}") + "\n\n{question}")]
        )
        lc_chain = (
            {"context": retriever | context, "question": RunnablePassthrough()}
            | prompt
            | self.chat.bind(max_tokens=max_tokens)
            | StrOutputParser()
        )
        answer = lc_chain.invoke(question)
        return answer.strip(), found, time.monotonic() - started

    def close(self) -> None:
        self.docstore.close()


def langchain_embedding() -> Any:
    """LangChain's side: the same e5 model, with e5's prompts as a LangChain user would set them."""
    from langchain_huggingface import HuggingFaceEmbeddings

    from mx_rag.embedding.local.e5_convert import PROMPTS, ensure_e5_model

    return HuggingFaceEmbeddings(model_name=str(ensure_e5_model()),
                                 encode_kwargs={"prompt": PROMPTS["document"], "normalize_embeddings": True},
                                 query_encode_kwargs={"prompt": PROMPTS["query"], "normalize_embeddings": True})


def pooled(server: Any, args: argparse.Namespace, common: dict[str, Any]) -> None:
    from mx_rag.corag.metrics import contains_answer, exact_match, f1_score
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.knowledge.store import DEFAULT_EMBEDDING

    # float32 vectors: LangChain embeds its questions in float32, and int8 and float32 vectors are never
    # mixed in one index (int8's recall is bench/retrieval_defaults.py's)
    embedding = TextEmbedding(DEFAULT_EMBEDDING, int8=False)
    lc_embedding = langchain_embedding()  # loaded once for every set
    wanted = set(args.sets.split(","))
    sets: list[tuple[str, list[str] | None, list[dict[str, Any]]]] = [
        (name, *_english_set(name, args.pooled)) for name in ("hotpotqa", "musique") if args.pooled and name in wanted
    ]
    zh = [{"question": q, "anchor": _squeeze(a), "accepted": acc} for q, a, acc in CHINESE[: args.chinese]]
    if zh and "chinese" in wanted:
        sets.append(("chinese", None, zh))
    records = _Records(args.records, common["model"])
    systems = ("mx_rag", "langchain")
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-pooled-") as work:
        for name, texts, questions in sets:
            pipes = None
            try:
                for turn, item in enumerate(questions):
                    for system in systems if turn % 2 == 0 else systems[::-1]:
                        if records.get(name, system, item["question"]) is not None:
                            continue  # answered by an earlier run
                        pipes = pipes or _Pipelines(server, embedding, lc_embedding, Path(work), name, texts)
                        instruction = SHORT_ANSWER_ZH if name == "chinese" else SHORT_ANSWER
                        answer, passages, took = pipes.ask(system, item["question"], instruction, 48)
                        if name == "chinese":
                            score = {"right": float(any(form in answer.lower() for form in item["accepted"])),
                                     "recall_at_5": float(any(item["anchor"] in _squeeze(p) for p in passages))}
                        else:
                            score = {"em": exact_match(answer, item["answer"]), "f1": f1_score(answer, item["answer"]),
                                     "contains": contains_answer(answer, item["answer"]),
                                     "recall_at_5": len(item["gold"] & set(passages)) / len(item["gold"])}
                        records.add({"set": name, "system": system, "question": item["question"], "answer": answer,
                                     **score, "seconds": round(took, 1), "chunks": pipes.chunks[system],
                                     "embed_corpus_s": pipes.embed_s, "loadavg_1m": loadavg_1m()})
                    print(f"{name} {turn + 1}/{len(questions)}", file=sys.stderr, flush=True)
            finally:
                if pipes is not None:
                    pipes.close()
            for system in systems:
                rows = [records.get(name, system, item["question"]) for item in questions]
                done = [row for row in rows if row is not None]
                if not done:
                    continue
                keys = [key for key in ("em", "f1", "contains", "right", "recall_at_5") if key in done[0]]
                emit({
                    **common, "task": "pooled", "set": name, "system": system, "n": len(done),
                    "corpus_chunks": done[-1]["chunks"],
                    **{key: round(sum(row[key] for row in done) / len(done), 3) for key in keys},
                    "seconds_per_question": round(sum(row["seconds"] for row in done) / len(done), 1),
                    "records": str(args.records),
                })


class _Records:
    """Per-question results in a JSON-lines file, so that a long run resumes where it stopped."""

    def __init__(self, path: Path, model: str) -> None:
        self.path, self.model = path, model
        self.commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True, check=False).stdout.strip()
        self.rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row["model"] == model:
                    self.rows[row["set"], row["system"], row["question"]] = row

    def get(self, name: str, system: str, question: str) -> dict[str, Any] | None:
        return self.rows.get((name, system, question))

    def add(self, row: dict[str, Any]) -> None:
        row = {"model": self.model, "commit": self.commit, **row}
        self.rows[row["set"], row["system"], row["question"]] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_model(name: str, args: argparse.Namespace) -> None:
    from mx_rag.llm import Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam

    started = time.monotonic()
    with LocalLLMServer(name, n_ctx=4096, n_parallel=1, n_threads=args.threads) as server:
        load = time.monotonic() - started
        llm = Text2TextLLM(
            base_url=server.chat_url, model_name=server.model_name, client_param=ClientParam(use_http=True, timeout=600)
        )
        common = {"model": name, "threads": server.n_threads, "load_s": round(load, 1)}
        tasks = {
            "hotpotqa": lambda: hotpotqa(llm, args.hotpot),
            "chinese": lambda: chinese(llm),
            "main_job": lambda: main_job(llm),
        }
        for task in args.tasks.split(","):
            if task == "pooled":
                pooled(server, args, common)
                continue
            result = tasks[task]()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            emit({**common, "task": task, **result, "peak_rss_mb": round(peak)})


def main() -> None:
    from mx_rag.llm.models import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--models", default=DEFAULT_MODEL, help="comma-separated registry names or GGUF paths")
    parser.add_argument("--hotpot", type=int, default=30, help="HotpotQA questions (at most 100)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: default_threads())")
    parser.add_argument("--tasks", default="hotpotqa,chinese,main_job", help="also: pooled")
    parser.add_argument("--pooled", type=int, default=100, help="pooled: HotpotQA and MuSiQue questions each")
    parser.add_argument("--chinese", type=int, default=30, help="pooled: Chinese questions (at most 30)")
    parser.add_argument("--sets", default="hotpotqa,musique,chinese", help="pooled: which sets to run")
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help="pooled: per-question results; questions already there are not asked again")
    args = parser.parse_args()
    emit(
        {
            "env": {
                "python": sys.version.split()[0],
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "load_avg_1m": loadavg_1m(),
                "hotpot_questions": args.hotpot,
            }
        }
    )
    for name in args.models.split(","):
        run_model(name, args)


if __name__ == "__main__":
    main()

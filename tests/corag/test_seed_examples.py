"""The CoRAG reference page's four examples, run with only URLs and paths changed.

Each example is kept below as the reference page prints it (``SEED_*``); ``adapt`` swaps its
literal URLs and paths for the test's and refuses to run if a literal is missing, so nothing else
can drift. Then the code runs with ``exec`` and the test checks what the page documents: the
printed line, the return value's shape and the files written.

* LLM (``https://{ip}:{port}/v1/chat/completions``): a scripted OpenAI-compatible server behind
  TLS (deterministic sub-queries and answers per question, see ``corag_eval_helpers.RoutedLLM``),
  with a CA made for the test in place of ``/path/to/ca.crt``.
* Retrieval API (``http://your-retrieve-api.com/...``): the real retrieval app
  (``create_retrieval_app``) over a FAISS + SQLite knowledge base of every paragraph of
  ``tests/data/multihop``, served by uvicorn behind TLS with the same CA. It has to be https: the
  examples pair their http:// URL with ``ClientParam(ca_file=...)``, which refuses plain http
  (docs/differences.md, CoRAG).
* Files: the examples' relative paths become files under ``tmp_path`` built from
  ``tests/data/multihop``; the model for the fine-tuner is SmolLM2-135M-Instruct (the
  ``smollm2_hf_dir`` fixture) in place of Qwen2.5-7B-Instruct.

Two examples need more than URLs and paths, both recorded in docs/differences.md: the fine-tuner
example's NPU lines run only where ``torch_npu`` is installed (``GUARDED_NPU``), and its
``logging_dir`` argument is dropped where transformers no longer has it (transformers 5).
"""

from __future__ import annotations

import inspect
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from corag_eval_helpers import HOTPOT, MUSIQUE, RoutedLLM, RoutedServer, Script, build_retriever, load

from mx_rag.corag.corag_agent import ReasoningPath
from mx_rag.corag.sample_generator import SAMPLE_TYPES
from mx_rag.server import create_retrieval_app
from mx_rag.testing import ScriptedServer

HOTPOT_ITEMS = load(HOTPOT)
MUSIQUE_ITEMS = load(MUSIQUE)
LLM_URL = "https://{ip}:{port}/v1/chat/completions"
CA_FILE = "/path/to/ca.crt"

# -- the reference page's examples, verbatim ----------------------------------------------------

SEED_AGENT = '''\
from mx_rag.corag.corag_agent import CoRagAgent
from mx_rag.llm import Text2TextLLM, LLMParameterConfig
from mx_rag.utils import ClientParam

# 初始化LLM实例
llm = Text2TextLLM(base_url="https://{ip}:{port}/v1/chat/completions",
                   model_name="qianwen-7b",
                   llm_config=LLMParameterConfig(max_tokens=512),
                   client_param=ClientParam(ca_file="/path/to/ca.crt")
                   )

# 初始化CoRagAgent
agent = CoRagAgent(
    base_llm=llm,
    retrieve_api_url="http://your-retrieve-api.com/retrieve",
    retrieve_top_k=5,
    client_param=ClientParam(ca_file="/path/to/ca.crt")
)

# 生成推理路径
task_desc = "回答用户的复杂问题，通过多轮子查询获取相关信息"
rag_path = agent.sample_path(
    query="什么是CoRAG框架的工作原理？",
    task_desc=task_desc,
    max_path_length=3
)

# 生成最终答案
final_answer = agent.generate_final_answer(
    rag_path=rag_path,
    task_description=task_desc
)

print("最终答案:", final_answer)
'''

SEED_SAMPLE_GENERATOR = '''\
from mx_rag.corag.sample_generator import SampleGenerator
from mx_rag.corag.config import CoRagBaseConfig
from mx_rag.llm import Text2TextLLM, LLMParameterConfig
from mx_rag.utils import ClientParam

# 初始化LLM实例
llm = Text2TextLLM(base_url="https://{ip}:{port}/v1/chat/completions",
                   model_name="qianwen-7b",
                   llm_config=LLMParameterConfig(max_tokens=512),
                   client_param=ClientParam(ca_file="/path/to/ca.crt")
                   )


# 初始化配置
config = CoRagBaseConfig(
    base_llm=llm,
    retrieve_api_url="http://your-retrieve-api.com/query",
    num_threads=4,
    max_path_length=3,
    client_param=ClientParam(ca_file="/path/to/ca.crt")
)

# 初始化样本生成器
generator = SampleGenerator(config)

# 生成训练样本
samples = generator.generate(
    input_file="data/train_queries.json",
    output_file="results/corag_train_samples.jsonl",
    n_samples=3
)

print("生成的样本数量:", sum(len(query_samples) for query_samples in samples))
'''

SEED_FINETUNER = '''\
from mx_rag.corag import SubqueryFineTuner, FineTuneArguments
from transformers import TrainingArguments
import torch
import torch_npu
from torch_npu.contrib import transfer_to_npu

# 设置NPU设备
torch.npu.set_device(0)

# 配置微调参数
finetune_args = FineTuneArguments(
    model_name_or_path="Qwen/Qwen2.5-7B-Instruct",
    train_file="data/aligned_train.jsonl",
    max_len=2048
)

# 配置训练参数
train_args = TrainingArguments(
    output_dir="./output",
    do_train=True,
    per_device_train_batch_size=8,
    num_train_epochs=3,
    gradient_accumulation_steps=2,
    gradient_checkpointing=True,
    logging_dir="./logs",
    learning_rate=1e-5,
    logging_steps=10,
    save_steps=500,
    remove_unused_columns=False
)

# 创建微调器实例
tuner = SubqueryFineTuner(finetune_args, train_args)

# 执行训练
tuner.train()
'''

SEED_EVALUATOR = '''\
from mx_rag.corag.evaluator import CoRagEvaluator
from mx_rag.corag.config import CoRagBaseConfig
from mx_rag.llm import Text2TextLLM, LLMParameterConfig
from mx_rag.utils import ClientParam

# 初始化LLM实例
llm = Text2TextLLM(base_url="https://{ip}:{port}/v1/chat/completions",
                   model_name="qianwen-7b",
                   llm_config=LLMParameterConfig(max_tokens=512),
                   client_param=ClientParam(ca_file="/path/to/ca.crt")
                   )


# 初始化配置
config = CoRagBaseConfig(
    base_llm=llm,
    retrieve_api_url="http://your-retrieve-api.com/retrieve",
    num_threads=4,
    max_path_length=3,
    client_param=ClientParam(ca_file="/path/to/ca.crt")
)

# 初始化评估器
evaluator = CoRagEvaluator(config)

# 执行评估
eval_results = evaluator.evaluate(
    eval_file="data/eval_data.json",
    save_file="results/corag_eval_results.json",
    calc_recall=True,
    enable_naive_retrieval=True
)

# 输出评估结果
print("评估结果汇总:", eval_results[0])
'''

SEED_NPU = """\
import torch_npu
from torch_npu.contrib import transfer_to_npu

# 设置NPU设备
torch.npu.set_device(0)
"""
GUARDED_NPU = """\
try:  # changed: the NPU set-up runs only where torch_npu is installed
    import torch_npu
    from torch_npu.contrib import transfer_to_npu

    # 设置NPU设备
    torch.npu.set_device(0)
except ImportError:
    pass
"""
SEED_LOGGING_DIR = '    logging_dir="./logs",\n'


def adapt(code: str, literals: dict[str, str]) -> str:
    """``code`` with each quoted literal ``old`` replaced by the quoted ``new`` (every occurrence)."""
    for old, new in literals.items():
        quoted = json.dumps(old, ensure_ascii=False)
        assert quoted in code, f"{quoted} is not in the example"
        code = code.replace(quoted, json.dumps(new, ensure_ascii=False))
    return code


def run_example(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__seed_example__"}
    exec(compile(code, "<seed example>", "exec"), namespace)
    return namespace


def support_titles(item: dict[str, Any]) -> list[str]:
    if "supporting_facts" in item:
        return list(dict.fromkeys(title for title, _ in item["supporting_facts"]))
    return list(dict.fromkeys(p["title"] for p in item["paragraphs"] if p["is_supporting"]))


# -- servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.crt"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(scope="module")
def retrieval_url(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The retrieval API over a knowledge base of every multihop paragraph, served over https."""
    import uvicorn

    root = tmp_path_factory.mktemp("kb")
    pem = root / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    app = create_retrieval_app(build_retriever(root), max_top_k=50)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                            ssl_certfile=str(pem), ssl_keyfile=str(pem))
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the https retrieval server did not start"
        time.sleep(0.01)
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}/retrieve"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


class HttpsRoutedServer(RoutedServer):
    """``RoutedServer`` (replies computed from each prompt) behind TLS."""

    def __init__(self, router: RoutedLLM, ssl_context: ssl.SSLContext) -> None:
        ScriptedServer.__init__(self, ssl_context=ssl_context)
        self.router = router


def https_llm(ca: trustme.CA, router: RoutedLLM) -> HttpsRoutedServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return HttpsRoutedServer(router, context)


# -- CoRagAgent ---------------------------------------------------------------------------------

AGENT_QUERY = "什么是CoRAG框架的工作原理？"
AGENT_SUBQUERIES = ["What is chain-of-retrieval augmented generation?", "Who directed Maximum Overdrive?",
                    "Which airport is in Watertown, New York?"]


def test_agent_example(ca: trustme.CA, ca_file: str, retrieval_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    router = RoutedLLM({AGENT_QUERY: Script(AGENT_SUBQUERIES, ["It retrieves step by step."])})
    with https_llm(ca, router) as llm_server:
        code = adapt(SEED_AGENT, {LLM_URL: llm_server.url("/v1/chat/completions"), CA_FILE: ca_file,
                                  "http://your-retrieve-api.com/retrieve": retrieval_url})
        ns = run_example(code)
    path, answer = ns["rag_path"], ns["final_answer"]
    assert isinstance(path, ReasoningPath) and path.original_query == AGENT_QUERY
    assert path.subqueries == AGENT_SUBQUERIES  # max_path_length=3 steps
    assert len(path.subanswers) == len(path.document_ids) == len(path.documents) == len(path.reasoning_steps) == 3
    assert all(len(docs) == 5 for docs in path.documents)  # retrieve_top_k=5
    assert [len(ids) for ids in path.document_ids] == [5, 5, 5]
    assert path.documents[1][0].startswith("Maximum Overdrive\n")  # the real knowledge base answered
    assert path.subanswers[1] == "Maximum Overdrive"  # the scripted LLM names the top document
    assert answer == "It retrieves step by step."
    assert capsys.readouterr().out == "最终答案: It retrieves step by step.\n"
    bodies = [r.json for r in llm_server.requests]
    assert len(bodies) == 7 and all(b["max_tokens"] == 512 and b["model"] == "qianwen-7b" for b in bodies)
    first_prompt = bodies[0]["messages"][-1]["content"]
    assert "回答用户的复杂问题，通过多轮子查询获取相关信息" in first_prompt and AGENT_QUERY in first_prompt


# -- SampleGenerator ----------------------------------------------------------------------------


def test_sample_generator_example(ca: trustme.CA, ca_file: str, retrieval_url: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    items = HOTPOT_ITEMS[:4]
    # the documented input: one {"query", "answer"} object per line
    input_file = tmp_path / "data" / "train_queries.json"
    input_file.parent.mkdir()
    input_file.write_text("".join(json.dumps({"query": it["question"], "answer": it["answer"]}) + "\n"
                                  for it in items), encoding="utf-8")
    output_file = tmp_path / "results" / "corag_train_samples.jsonl"
    # the first question is answered wrongly, then right: rejection sampling takes the second path
    scripts = {it["question"]: Script(support_titles(it), [it["answer"]]) for it in items}
    scripts[items[0]["question"]].answers = ["a demon", items[0]["answer"]]
    router = RoutedLLM(scripts)
    with https_llm(ca, router) as llm_server:
        code = adapt(SEED_SAMPLE_GENERATOR, {
            LLM_URL: llm_server.url("/v1/chat/completions"), CA_FILE: ca_file,
            "http://your-retrieve-api.com/query": retrieval_url,
            "data/train_queries.json": str(input_file), "results/corag_train_samples.jsonl": str(output_file)})
        ns = run_example(code)
    samples = ns["samples"]
    assert len(samples) == 4 and router.calls[items[0]["question"].strip()] == 2
    for query_samples, item in zip(samples, items, strict=True):
        steps = len(support_titles(item))
        assert [s["type"] for s in query_samples] == [SAMPLE_TYPES[0], SAMPLE_TYPES[1]] * steps + [SAMPLE_TYPES[2]]
        assert all([m["role"] for m in s["messages"]] == ["user", "assistant"] for s in query_samples)
        assert query_samples[0]["messages"][1]["content"] == f"SubQuery: {support_titles(item)[0]}"
        assert query_samples[-1]["messages"][1]["content"] == f"Final Answer: {item['answer']}"
    total = sum(len(query_samples) for query_samples in samples)
    assert capsys.readouterr().out == f"生成的样本数量: {total}\n"
    written = [json.loads(line) for line in output_file.read_text(encoding="utf-8").splitlines()]
    # flushed per query as each finishes (4 threads), so the file is in completion order
    by_query = {q[0]["query_id"]: q for q in samples}
    assert len(written) == total and {w["query_id"] for w in written} == set(by_query)
    assert all([w for w in written if w["query_id"] == qid] == q for qid, q in by_query.items())


# -- CoRagEvaluator -----------------------------------------------------------------------------


@pytest.mark.parametrize("items", [HOTPOT_ITEMS[:4], MUSIQUE_ITEMS[:3]], ids=["hotpotqa", "musique"])
def test_evaluator_example(items: list[dict[str, Any]], ca: trustme.CA, ca_file: str, retrieval_url: str,
                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eval_file = tmp_path / "data" / "eval_data.json"
    eval_file.parent.mkdir()
    eval_file.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    save_file = tmp_path / "results" / "corag_eval_results.json"
    router = RoutedLLM({it["question"]: Script(support_titles(it), [it["answer"]]) for it in items})
    with https_llm(ca, router) as llm_server:
        code = adapt(SEED_EVALUATOR, {
            LLM_URL: llm_server.url("/v1/chat/completions"), CA_FILE: ca_file,
            "http://your-retrieve-api.com/retrieve": retrieval_url,
            "data/eval_data.json": str(eval_file), "results/corag_eval_results.json": str(save_file)})
        ns = run_example(code)
    eval_results = ns["eval_results"]
    summary, records = eval_results[0], eval_results[1:]
    assert summary["type"] == "Summary" and summary["total_samples"] == len(items) == len(records)
    assert summary["corag_accuracy"] == 1.0 and summary["corag_correct_count"] == len(items)
    assert summary["naive_accuracy"] == 0.0 and summary["naive_correct_count"] == 0  # it answers "unknown"
    assert summary["avg_path_time"] > 0 and summary["avg_time"] > 0
    assert 0.0 < summary["corag_micro_recall"] <= 1.0 and 0.0 <= summary["naive_micro_recall"] <= 1.0
    for record, item in zip(records, items, strict=True):
        assert record["question"] == item["question"].strip() and record["ground_truth"] == item["answer"]
        assert record["corag_prediction"] == item["answer"] and record["is_correct"] is True
        assert record["naive_prediction"] == "unknown" and record["naive_is_correct"] is False
        assert [s["subquery"] for s in record["reasoning_steps"]] == support_titles(item)[:3]  # max_path_length=3
        assert len(record["time"]) == 2
        for key in ("corag_recall", "naive_recall"):
            assert set(record[key]) == {"hits", "total", "recall"} and record[key]["total"] > 0
    assert capsys.readouterr().out == f"评估结果汇总: {summary}\n"
    assert json.loads(save_file.read_text(encoding="utf-8")) == eval_results


# -- SubqueryFineTuner --------------------------------------------------------------------------


def write_train_file(path: Path) -> None:
    """4 sub-query samples in SampleGenerator's format (HotpotQA questions, their supporting titles as the
    targets), with short prompts: three epochs of a 135M model must stay short on a 2-core CPU."""
    rows = []
    for item in HOTPOT_ITEMS:
        titles = support_titles(item)[:2]
        if len(titles) < 2:
            continue
        for step, title in enumerate(titles):
            history = f"Step 1: {titles[0]}\n" if step else ""
            prompt = f"{history}## Main question\n{item['question'].strip()}\nWrite the next search query."
            rows.append({"type": "subquery_generation", "messages": [
                {"role": "user", "content": prompt}, {"role": "assistant", "content": f"SubQuery: {title}"}]})
        if len(rows) == 4:
            break
    assert len(rows) == 4
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


@pytest.mark.slow
def test_finetuner_example(smollm2_hf_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments

    train_file = tmp_path / "data" / "aligned_train.jsonl"
    write_train_file(train_file)
    assert SEED_NPU in SEED_FINETUNER
    code = SEED_FINETUNER.replace(SEED_NPU, GUARDED_NPU)
    if "logging_dir" not in inspect.signature(TrainingArguments).parameters:  # removed in transformers 5
        assert SEED_LOGGING_DIR in code
        code = code.replace(SEED_LOGGING_DIR, "")
    literals = {"Qwen/Qwen2.5-7B-Instruct": str(smollm2_hf_dir), "data/aligned_train.jsonl": str(train_file),
                "./output": str(tmp_path / "output")}
    if "logging_dir" in code:
        literals["./logs"] = str(tmp_path / "logs")
    code = adapt(code, literals)
    ns = run_example(code)
    tuner = ns["tuner"]
    # 4 samples: one batch per epoch; the optimizer steps at each epoch's end despite 2 accumulation steps
    assert tuner.trainer.state.global_step == 3 and tuner.trainer.state.epoch == pytest.approx(3.0)
    out = tmp_path / "output"
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert (out / "tokenizer_config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert model.config.use_cache is True and tokenizer.pad_token is not None

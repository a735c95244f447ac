"""RAGEvaluator against a scripted OpenAI-compatible judge (what it asks, how it scores), plus llama.cpp once."""

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.evaluate import RAGEvaluator
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import HashEmbedding, Reply, ScriptedServer
from mx_rag.utils import ClientParam

ROW = {
    "user_input": ["Who proposed the theory of relativity?"],
    "response": ["Albert Einstein proposed it in 1905."],
    "retrieved_contexts": [["Albert Einstein proposed the theory of relativity.", "Bananas are yellow."]],
    "reference": ["Albert Einstein proposed the theory of relativity."],
}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def evaluator(server: ScriptedServer) -> RAGEvaluator:
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="judge",
                       client_param=ClientParam(use_http=True, retries=0))
    return RAGEvaluator(llm=llm, embeddings=HashEmbedding(256))


def _asked(server: ScriptedServer) -> list[str]:
    return [r.json["messages"][-1]["content"] for r in server.requests]


def test_faithfulness_is_the_share_of_supported_statements(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("1. Albert Einstein proposed relativity.\n2. He did so in 1905."),
                   Reply.chat("1: yes\n2: no"))
    scores = evaluator.evaluate(["faithfulness"], {k: ROW[k] for k in ("user_input", "response", "retrieved_contexts")},
                                language="english")
    assert scores == {"faithfulness": [0.5]}
    asked = _asked(server)
    assert "Answer: Albert Einstein proposed it in 1905." in asked[0]
    assert "Bananas are yellow." in asked[1] and "2. He did so in 1905." in asked[1]
    assert server.requests[0].json["temperature"] == 0.0


def test_context_precision_is_average_precision(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("1: no\n2: yes"))
    rows = {**ROW, "retrieved_contexts": [["Bananas are yellow.", "Albert Einstein proposed relativity."]]}
    assert evaluator.evaluate(["context_precision"], rows, language="english") == {"context_precision": [0.5]}


def test_similarity_key_and_nv_accuracy(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("Rating: 4"), Reply.chat("2"))
    rows = {**ROW, "response": ROW["reference"]}
    scores = evaluator.evaluate(["answer_similarity", "nv_accuracy"], rows, language="english")
    assert scores["semantic_similarity"] == [pytest.approx(1.0)]
    assert scores["nv_accuracy"] == [0.75]


def test_chinese_rows_get_chinese_prompts(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("阿尔伯特·爱因斯坦提出了相对论"), Reply.chat("1: 是"))
    rows = {"user_input": ["谁提出了相对论？"], "response": ["阿尔伯特·爱因斯坦提出了相对论"],
            "retrieved_contexts": [["相对论由阿尔伯特·爱因斯坦提出。"]]}
    assert evaluator.evaluate(["faithfulness"], rows) == {"faithfulness": [1.0]}
    assert _asked(server)[0].startswith("把下面的回答拆成")


def test_an_evasive_answer_is_not_relevant(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    rows = {"user_input": ["Who?"], "response": ["I don't know."]}
    assert evaluator.evaluate(["answer_relevancy"], rows) == {"answer_relevancy": [0.0]}
    assert server.requests == []


def test_a_failed_judge_gives_nan_for_that_row(evaluator: RAGEvaluator, server: ScriptedServer) -> None:
    server.enqueue(Reply.status(500, {"error": {"message": "overloaded"}}))
    scores = evaluator.evaluate(["nv_context_relevance"], {k: ROW[k] for k in ("user_input", "retrieved_contexts")})
    assert len(scores["nv_context_relevance"]) == 1
    # the first judge failed; the second (echo server) gave no rating: nothing to score
    assert math.isnan(scores["nv_context_relevance"][0])


def test_prompts_path_overrides_a_prompt(evaluator: RAGEvaluator, server: ScriptedServer, tmp_path: Path) -> None:
    (tmp_path / "english.json").write_text(json.dumps({"entities": "ENTITIES OF: {text}"}))
    server.enqueue(Reply.chat("Albert Einstein\nrelativity\nPrinceton"))
    scores = evaluator.evaluate(["context_entity_recall"], {k: ROW[k] for k in ("reference", "retrieved_contexts")},
                                language="english", prompts_path=str(tmp_path))
    assert scores == {"context_entity_recall": [pytest.approx(2 / 3)]}
    assert _asked(server) == ["ENTITIES OF: Albert Einstein proposed the theory of relativity."]
    (tmp_path / "english.json").write_text(json.dumps({"entities": "no placeholder"}))
    with pytest.raises(ParameterError, match=r"prompt 'entities' must be a str with the placeholders \['text'\]"):
        evaluator.evaluate(["context_entity_recall"], {k: ROW[k] for k in ("reference", "retrieved_contexts")},
                           language="english", prompts_path=str(tmp_path))


@pytest.mark.parametrize(
    ("metrics", "dataset", "message"),
    [
        ([], ROW, "metrics must be a list of 1 to 14"),
        (["faithfulness", "faithfulness"], ROW, "without repeated names"),
        (["bleu"], ROW, "metrics item must be one of"),
        (["faithfulness"], {"user_input": ["q"], "response": ["a"]}, "needs dataset keys"),
        (["faithfulness"], {**ROW, "response": ["a", "b"]}, "dataset lists must have one length"),
        (["faithfulness"], {**ROW, "extra": ["x"]}, "dataset must be a dict of 1 to 4"),
        (["faithfulness"], {**ROW, "response": [""]}, r"dataset\['response'\] item must have length"),
    ],
)
def test_bad_input_names_the_parameter(evaluator: RAGEvaluator, metrics: list, dataset: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ParameterError, match=message):
        evaluator.evaluate(metrics, dataset)


def test_language_is_checked(evaluator: RAGEvaluator) -> None:
    with pytest.raises(ParameterError, match="language must be None or one of"):
        evaluator.evaluate(["faithfulness"], ROW, language="french")
    with pytest.raises(ParameterError, match="llm must be a Text2TextLLM or a LangChain LLM"):
        RAGEvaluator(llm="judge")


@pytest.mark.llm
def test_metrics_run_on_the_embedded_llm(local_llm) -> None:  # type: ignore[no-untyped-def]
    llm = Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                       client_param=ClientParam(use_http=True, timeout=600))
    metrics = ["answer_similarity", "faithfulness", "nv_accuracy"]
    scores = RAGEvaluator(llm, HashEmbedding(256)).evaluate(metrics, ROW, language="english")
    assert sorted(scores) == ["faithfulness", "nv_accuracy", "semantic_similarity"]
    assert all(len(v) == 1 and (math.isnan(v[0]) or 0.0 <= v[0] <= 1.0) for v in scores.values())

"""GraphEvaluator: judgements from an OpenAI-compatible server on 127.0.0.1 (a scripted judge that
answers from the prompt), counts, scores, the actionable report, and the reference example."""

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphEvaluator
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.testing import RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

TEXT_1 = "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903 and later moved to Paris."
TEXT_2 = "The bridge opened in 1932. Because of the flood, the bridge was closed in 1950."
RELATIONS = [
    {
        "raw_text": TEXT_1,
        "entity_relations": [
            {"Head": "Marie Curie", "Relation": "born in", "Tail": "Warsaw"},
            {"Head": "Marie Curie", "Relation": "won", "Tail": "Nobel Prize"},
            {"Head": "Marie Curie", "Relation": "born in", "Tail": "Paris"},  # wrong
        ],
        "event_entity_relations": [{"Event": "She won the Nobel Prize in 1903", "Entity": ["Marie Curie", "1903"]}],
    },
    [{
        "raw_text": TEXT_2,
        "entity_relations": [{"Head": "bridge", "Relation": "opened in", "Tail": "1932"}],
        "event_relations": [{"Head": "the flood", "Relation": "because", "Tail": "the bridge was closed"}],
    }],
]


def judge(request: RecordedRequest) -> Reply:
    """Wrong: the Paris triple. Missed: 'moved to Paris' in text 1, 'closed in 1950' in text 2."""
    prompt = request.json["messages"][-1]["content"]
    if prompt.startswith("You check") and "does not support" in prompt:
        if TEXT_1 in prompt and '"Tail": "Paris"' in prompt:
            return Reply.chat('```json\n[{"Head": "Marie Curie", "Relation": "born in", "Tail": "Paris"}]\n```')
        return Reply.chat("[]")
    if TEXT_1 in prompt and "relations between entities" in prompt:
        return Reply.chat("[{'Head': 'Marie Curie', 'Relation': 'moved to', 'Tail': 'Paris'}]")
    if TEXT_2 in prompt and "relations between entities" in prompt:
        return Reply.chat('[{"Head": "bridge", "Relation": "closed in", "Tail": "1950"}]')
    if "events with the entities" in prompt:
        return Reply.chat('[{"Event": "later moved to Paris", "Entity": ["Marie Curie", "Paris"]}]')
    return Reply.chat("None")


@pytest.fixture(scope="module")
def judge_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(responder=judge) as srv:
        yield srv


@pytest.fixture
def evaluator(judge_server: ScriptedServer) -> GraphEvaluator:
    server = judge_server
    server.reset()
    config = LLMParameterConfig(temperature=0.5, top_p=0.8, max_tokens=8192)
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="judge", llm_config=config,
                       client_param=ClientParam(use_http=True, timeout=120))
    return GraphEvaluator(llm, config)


def test_scores_and_report(evaluator: GraphEvaluator, judge_server: ScriptedServer,
                           capsys: pytest.CaptureFixture) -> None:
    server = judge_server
    report = evaluator.evaluate(RELATIONS)
    entity = report.scores["entity_relations"]
    assert (entity.extracted, entity.wrong, entity.missed) == (4, 1, 2)
    assert entity.precision == pytest.approx(0.75) and entity.recall == pytest.approx(0.6)
    assert entity.f1 == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    events = report.scores["event_entity_relations"]
    assert (events.extracted, events.wrong, events.missed) == (2, 0, 2)
    assert report.scores["event_relations"].precision == 1.0
    worst = report.worst("entity_relations", 1)[0]
    assert worst.index == 0 and worst.wrong == [{"Head": "Marie Curie", "Relation": "born in", "Tail": "Paris"}]
    assert worst.missed == [{"Head": "Marie Curie", "Relation": "moved to", "Tail": "Paris"}]
    assert "entity_relations" in capsys.readouterr().out
    # two calls per kind present (wrong, missed): 2 + 2 for passage 1, 2 + 2 for passage 2
    assert len(server.requests) == 8
    assert all(r.json["temperature"] == 0.5 and r.json["top_p"] == 0.8 for r in server.requests)
    assert json.loads(json.dumps(report.to_dict()["entity_relations"]))["extracted"] == 4


def test_reference_example_reads_a_relations_file(evaluator: GraphEvaluator, tmp_path: Path) -> None:
    relations_path = tmp_path / "graph_relations.json"
    relations_path.write_text(json.dumps(RELATIONS), encoding="utf-8")
    with open(relations_path, encoding="utf-8") as f:
        relations = json.load(f)
        report = evaluator.evaluate(relations, verbose=False)
    assert set(report.scores) == {"entity_relations", "event_entity_relations", "event_relations"}


def test_unusable_answer_is_reported_not_scored(evaluator: GraphEvaluator, judge_server: ScriptedServer) -> None:
    server = judge_server
    server.enqueue(Reply.chat("I think it is fine, mostly."), Reply.status(500, {"error": {"message": "x"}}))
    report = evaluator.evaluate([{"raw_text": "A is B.", "entity_relations": []}], max_workers=1, verbose=False)
    assert len(report.failed) == 1 and report.failed[0][0] == 0
    assert report.scores == {}


def test_nothing_extracted_gives_nan_precision() -> None:
    from mx_rag.graphrag.graph_evaluator import KindScore

    score = KindScore(extracted=0, wrong=0, missed=3)
    assert math.isnan(score.precision) and score.recall == 0.0


@pytest.mark.parametrize(
    ("relations", "message"),
    [
        ([], "relations must be a list of 1 to 50000"),
        ([{"entity_relations": []}], r"relations\[0\] must be a dict with a non-empty 'raw_text'"),
        ([{"raw_text": "x", "entity_relations": "A-B"}], r"relations\[0\]\['entity_relations'\] must be a list"),
        ([{"raw_text": "x" * 4097}], "more than 4096"),
        ([{"raw_text": "x", "entity_relations": [[[[[["deep"]]]]]]}], "nested deeper than 5"),
    ],
)
def test_bad_relations(evaluator: GraphEvaluator, relations: list, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        evaluator.evaluate(relations)


def test_constructor_checks(evaluator: GraphEvaluator) -> None:
    with pytest.raises(ParameterError, match="llm_config must be a LLMParameterConfig"):
        GraphEvaluator(evaluator.llm, {"temperature": 0.5})  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="llm must be"):
        GraphEvaluator("llm", LLMParameterConfig())  # type: ignore[arg-type]


def test_import_paths() -> None:
    from mx_rag.graphrag.graph_evaluator import GraphEvaluator as same

    assert same is GraphEvaluator


def test_evaluates_what_a_pipeline_extracted(evaluator: GraphEvaluator, work_dir: Path, llm: Text2TextLLM,
                                             docs: dict[str, Path], loader_mng: LoaderMng) -> None:
    from mx_rag.graphrag import GraphRAGPipeline
    from mx_rag.graphrag.graph_evaluator import pipeline_relations
    from mx_rag.testing import HashEmbedding

    from .conftest import DIM, PARAGRAPHS

    pipeline = GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM)
    pipeline.upload_files(list(docs.values()), loader_mng)
    pipeline.build_graph()
    relations = pipeline_relations(pipeline)
    assert relations and {r["raw_text"] for r in relations} <= set(PARAGRAPHS.values())
    assert all(set(t) == {"Head", "Relation", "Tail"} for r in relations for t in r["entity_relations"])
    report = evaluator.evaluate(relations, verbose=False)
    assert report.scores["entity_relations"].extracted == sum(len(r["entity_relations"]) for r in relations)
    assert pipeline_relations(pipeline, max_passages=1) == relations[:1]
    with pytest.raises(ParameterError, match="pipeline must be a GraphRAGPipeline"):
        pipeline_relations(relations)

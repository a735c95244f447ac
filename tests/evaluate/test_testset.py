"""TestsetGenerator against a scripted LLM: parsing, grounding, spreading over sources, the file format."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.evaluate.report import compare, passage_recall, score_answer, summarize
from mx_rag.evaluate.testset import (
    TestsetGenerator,
    grounded,
    load_testset,
    parse_pair,
    pick_passages,
    save_testset,
)
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

CLUB = ("Norwich City Football Club is a professional football club based in Norwich, Norfolk, England. "
        "It plays its home matches at Carrow Road, its ground since 1935, and its fans call the team the Canaries.")
HARBOUR = ("The old harbour of Norwich received wool ships every spring during the fourteenth century, and "
           "merchants stored the wool in stone warehouses along the river Wensum before weaving it into "
           "worsted cloth for the markets of Flanders.")
ZH = "诺里奇城足球俱乐部是一家位于英格兰诺福克郡诺里奇的职业足球俱乐部，自1935年起在卡罗路球场进行主场比赛。" * 3


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def generator(server: ScriptedServer) -> TestsetGenerator:
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                       client_param=ClientParam(use_http=True, retries=0))
    return TestsetGenerator(llm)


def test_pairs_are_parsed_in_both_languages() -> None:
    assert parse_pair("**Question:** Where?\n**Answer:** Carrow Road") == ("Where?", "Carrow Road")
    assert parse_pair("问题：主场在哪里？\n答案：卡罗路球场") == ("主场在哪里？", "卡罗路球场")
    assert parse_pair("Carrow Road") is None


def test_grounding_keeps_answers_taken_from_the_passage() -> None:
    assert grounded("Carrow Road", CLUB, 0.6)
    assert not grounded("Old Trafford stadium", CLUB, 0.6)
    assert grounded("卡罗路球场", ZH, 0.6) and not grounded("老特拉福德", ZH, 0.6)


def test_passages_are_spread_over_sources() -> None:
    passages = [{"text": CLUB, "source": "a"}, {"text": CLUB + " More.", "source": "a"},
                {"text": HARBOUR, "source": "b"}, {"text": "short", "source": "c"}]
    picked = pick_passages(passages, 2)
    assert [p["source"] for p in picked] == ["a", "b"] and picked[0]["text"].endswith("More.")


def test_generate_skips_ungrounded_pairs(generator: TestsetGenerator, server: ScriptedServer, tmp_path: Path) -> None:
    server.enqueue(Reply.chat("Question: Where does Norwich City play?\nAnswer: Carrow Road"),
                   Reply.chat("Question: What did the harbour receive?\nAnswer: container ships from Asia"))
    items = generator.generate([{"text": CLUB, "source": "club.md"}, {"text": HARBOUR, "source": "harbour.md"}], 2)
    assert [(i.question, i.reference, i.source) for i in items] == [
        ("Where does Norwich City play?", "Carrow Road", "club.md")]
    assert items[0].passages == [CLUB]
    assert server.requests[0].json["temperature"] == 0.0 and CLUB in server.requests[0].json["messages"][-1]["content"]
    save_testset(items, tmp_path / "t.jsonl")
    assert load_testset(tmp_path / "t.jsonl") == items
    with pytest.raises(ParameterError, match=r"count must be in \[1, 10000\]"):
        generator.generate([], 0)


def test_scores_and_the_paired_comparison() -> None:
    assert passage_recall([CLUB], ["x", CLUB.upper()]) == 1.0 and passage_recall([CLUB], [HARBOUR]) == 0.0
    assert score_answer("Carrow Road.", "carrow road") == {"em": 1.0, "f1": 1.0}
    records = [{"setting": s, "id": str(i), "error": None, "recall": r, "em": 0.0, "f1": f, "seconds": 1.0,
                "metrics": {"faithfulness": float("nan")}}
               for s, rows in (("a", [(1.0, 1.0), (1.0, 0.5)]), ("b", [(0.0, 0.5), (1.0, 0.5)]))
               for i, (r, f) in enumerate(rows)]
    summary = summarize(records, ["a", "b"], ["faithfulness"])
    assert summary["a"]["recall"] == 1.0 and summary["b"]["f1"] == 0.5 and summary["a"]["faithfulness"] is None
    diff = compare(records, "a", "b", ["recall", "f1"])
    assert diff["paired_questions"] == 2 and diff["recall"]["mean_diff"] == 0.5 and diff["f1"]["mean_diff"] == 0.25

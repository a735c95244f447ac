# SPDX-License-Identifier: Apache-2.0
"""loads_tolerant on what small models write, and parse_extraction on the shapes they choose."""

from __future__ import annotations

import pytest

from mx_rag.graphrag.extraction import Entity, Extraction, Relation
from mx_rag.graphrag.json_repair import loads_tolerant
from mx_rag.graphrag.llm_extractor import approx_tokens, parse_extraction
from mx_rag.graphrag.merge import normalise_name, to_records


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ('Here it is:\n```json\n{"a": [1, 2,],}\n```\nHope this helps!', {"a": [1, 2]}),
        ("```\n[1, 2]", [1, 2]),
        ("{'name': 'O'Brien', 'type': 'person'}", {"name": "O'Brien", "type": "person"}),
        ('{"d": "He said "hi" to her", "x": 1}', {"d": 'He said "hi" to her', "x": 1}),
        ("{“实体”：[{“名称”：“北京大学”，“类型”：“机构”}]}", {"实体": [{"名称": "北京大学", "类型": "机构"}]}),
        ("{name: Ada Lovelace, born: 1815, alive: False, note: None}",
         {"name": "Ada Lovelace", "born": 1815, "alive": False, "note": None}),
        ('[{"a": 1} {"a": 2}]', [{"a": 1}, {"a": 2}]),
        ('[{"s": "A", "t": "B"}, {"s": "C", "t', [{"s": "A", "t": "B"}]),
        ('{"e": [{"n": "A"}], "r": [{"s": "A"}, {"s": "B", "t": "C', {"e": [{"n": "A"}], "r": [{"s": "A"}]}),
        ('{"a": "cut off', {}),
        ('{"a": 1, // a comment\n "b": /* inline */ 2}', {"a": 1, "b": 2}),
        ('{"u": "caf\\u00e9\\n"}', {"u": "café\n"}),
        ('{"a": 1} and then {"b": 2}', {"a": 1}),
        ("just [ words cut", []),
    ],
)
def test_loads_tolerant(text: str, expected: object) -> None:
    assert loads_tolerant(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "```\n```"])
def test_loads_tolerant_gives_up_loudly(text: str) -> None:
    with pytest.raises(ValueError, match="no JSON"):
        loads_tolerant(text)


def test_parse_extraction_shapes() -> None:
    full = {"Entities": [{"Name": "Ada", "Type": "person", "Description": "x"}, "London", {"type": "no name"}, 7],
            "relations": [{"source": "Ada", "target": "London", "relation": "born in"}, ["Ada", "met", "Babbage"],
                          {"source": "Ada"}]}
    assert parse_extraction(full) == Extraction(
        (Entity("Ada", "person", "x"), Entity("London")),
        (Relation("Ada", "London", "born in"), Relation("Ada", "Babbage", "met")),
    )
    triples = [{"Head": "A", "Relation": "r", "Tail": "B"}, {"头实体": "甲", "关系": "属于", "尾实体": "乙"}]
    assert parse_extraction(triples).relations == (Relation("A", "B", "r"), Relation("甲", "乙", "属于"))
    assert parse_extraction("text") == Extraction() and parse_extraction({"other": 1}) == Extraction()


def test_names_are_normalised_and_merged() -> None:
    assert normalise_name("  “Alan   Turing”. ") == "alan turing"
    assert normalise_name("ＡＢＣ") == "abc" and normalise_name("...") == ""
    nodes, edges = to_records([
        ("c1", Extraction((Entity("Alan Turing", "person", "a mathematician"),),
                          (Relation("alan turing", "Bletchley Park", "worked at"),
                           Relation("Alan Turing", "ALAN TURING", "is"),
                           Relation("Alan Turing", "Bletchley Park", "Worked  at", "during the war")))),
        ("c2", Extraction((Entity("ALAN TURING", "", "a computer scientist"),))),
    ])
    by_name = {n.name: n for n in nodes}
    assert set(by_name) == {"alan turing", "bletchley park"}
    assert by_name["alan turing"].label == "Alan Turing" and by_name["alan turing"].type == "person"
    assert dict(by_name["alan turing"].descriptions) == {"c1": "a mathematician", "c2": "a computer scientist"}
    assert [(e.key, dict(e.descriptions)) for e in edges] == [
        (("alan turing", "bletchley park", "worked at"), {"c1": "during the war"})]


def test_approx_tokens() -> None:
    assert approx_tokens("abcdefgh") == 2 and approx_tokens("北京大学") == 4 and approx_tokens("") == 0

# SPDX-License-Identifier: Apache-2.0
"""Prompts of graph RAG, in English and Chinese. ``{text}`` / ``{question}`` / ``{context}`` are
filled with ``str.replace`` (the texts may contain braces)."""

from __future__ import annotations

from mx_rag.utils.common import Lang

__all__ = ["CONCEPT_PROMPTS", "EXTRACTION_PROMPTS", "JSON_REPAIR_PROMPTS", "QUESTION_ENTITY_PROMPTS", "fill"]

_EXTRACT_EN = """Read the passage and list its entities (people, organisations, places, works, \
events, concepts) and the relations stated between them.
Answer with JSON only, in this shape:
{"entities": [{"name": "...", "type": "...", "description": "..."}],
 "relations": [{"source": "...", "target": "...", "relation": "...", "description": "..."}]}
Rules: use names exactly as written in the passage, never pronouns; "relation" is a short verb \
phrase without the entity names; every relation's source and target are entities of the list; \
descriptions are one short sentence from the passage.

Example passage: Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903.
Example answer: {"entities": [{"name": "Marie Curie", "type": "person", "description": "a physicist \
born in Warsaw"}, {"name": "Warsaw", "type": "place", "description": "a city"}, {"name": "Nobel Prize \
in Physics", "type": "award", "description": "won by Marie Curie in 1903"}], "relations": [{"source": \
"Marie Curie", "target": "Warsaw", "relation": "born in", "description": ""}, {"source": "Marie \
Curie", "target": "Nobel Prize in Physics", "relation": "won", "description": "in 1903"}]}

Passage: {text}
Answer:"""

_EXTRACT_CH = """阅读下面的段落，列出其中的实体（人物、组织、地点、作品、事件、概念）\
以及段落中明确说明的实体之间的关系。
只输出 JSON，格式如下：
{"entities": [{"name": "...", "type": "...", "description": "..."}],
 "relations": [{"source": "...", "target": "...", "relation": "...", "description": "..."}]}
要求：实体名称与原文一致，不使用代词；relation 是不含实体名称的简短动词短语；每个关系的 source 和 target \
都必须出现在实体列表中；description 是取自原文的一句简短说明。

示例段落：鲁迅出生于浙江绍兴，1918年发表了《狂人日记》。
示例输出：{"entities": [{"name": "鲁迅", "type": "人物", "description": "出生于浙江绍兴的作家"}, \
{"name": "浙江绍兴", "type": "地点", "description": "鲁迅的出生地"}, {"name": "狂人日记", "type": "作品", \
"description": "鲁迅1918年发表的小说"}], "relations": [{"source": "鲁迅", "target": "浙江绍兴", \
"relation": "出生于", "description": ""}, {"source": "鲁迅", "target": "狂人日记", "relation": "发表", \
"description": "1918年"}]}

段落：{text}
输出："""

_REPAIR_EN = """The text below was meant to be JSON of the shape \
{"entities": [...], "relations": [...]} but it is malformed. Rewrite it as valid JSON with the \
same content. Output the JSON only.

Text: {text}
JSON:"""

_REPAIR_CH = """下面的文本本应是 {"entities": [...], "relations": [...]} 形式的 JSON，但格式有误。\
请在不改变内容的前提下把它改写成合法的 JSON，只输出 JSON。

文本：{text}
JSON："""

_QUESTION_EN = """List the named entities (people, organisations, places, works, events, \
concepts) in the question, separated by commas. Output the list only.

Question: {question}
Entities:"""

_QUESTION_CH = """列出问题中的实体（人物、组织、地点、作品、事件、概念），用逗号分隔，只输出实体列表。

问题：{question}
实体："""

# Conceptualisation (``build_graph`` of a pipeline with ``conceptualize=True``). The placeholders are
# the original's: ``[ENTITY]`` and ``[CONTEXT]``, ``[EVENT]``, ``[RELATION]``.
_CONCEPT_RULES_EN = """Answer with 3 to 10 short phrases (one or two words each) naming abstract \
concepts of it: its kind, its category, broader ideas it belongs to, from specific to general. \
Separate the phrases with commas and write nothing else; do not repeat the input."""

_CONCEPT_ENTITY_EN = """Give the abstract concepts of an ENTITY, seen in its CONTEXT.
""" + _CONCEPT_RULES_EN + """

ENTITY: Mount Kilimanjaro
CONTEXT: Mount Kilimanjaro is located in Tanzania
Concepts: mountain, volcano, landmark, natural feature, place

ENTITY: [ENTITY]
CONTEXT: [CONTEXT]
Concepts:"""

_CONCEPT_EVENT_EN = """Give the abstract concepts of an EVENT.
""" + _CONCEPT_RULES_EN + """

EVENT: The team won the final after extra time
Concepts: victory, sports match, competition, achievement

EVENT: [EVENT]
Concepts:"""

_CONCEPT_RELATION_EN = """Give the abstract concepts of a RELATION between two things.
""" + _CONCEPT_RULES_EN + """

RELATION: works for
Concepts: employment, membership, affiliation, work

RELATION: [RELATION]
Concepts:"""

_CONCEPT_RULES_CH = """用3到10个简短短语（每个一到两个词）说明它的抽象概念：类型、类别、所属的更宽泛的概念，\
由具体到一般。短语之间用逗号分隔，不输出其他内容，不重复输入本身。"""

_CONCEPT_ENTITY_CH = """给出实体在其背景中的抽象概念。
""" + _CONCEPT_RULES_CH + """

实体：长江
背景：长江流经武汉
概念：河流, 水系, 自然地理, 地点

实体：[ENTITY]
背景：[CONTEXT]
概念："""

_CONCEPT_EVENT_CH = """给出事件的抽象概念。
""" + _CONCEPT_RULES_CH + """

事件：球队在加时赛后赢得了决赛
概念：胜利, 体育比赛, 竞争, 成就

事件：[EVENT]
概念："""

_CONCEPT_RELATION_CH = """给出两个事物之间关系的抽象概念。
""" + _CONCEPT_RULES_CH + """

关系：就职于
概念：雇佣, 隶属, 工作, 成员关系

关系：[RELATION]
概念："""

CONCEPT_PROMPTS = {
    Lang.EN: {"entity": _CONCEPT_ENTITY_EN, "event": _CONCEPT_EVENT_EN, "relation": _CONCEPT_RELATION_EN},
    Lang.CH: {"entity": _CONCEPT_ENTITY_CH, "event": _CONCEPT_EVENT_CH, "relation": _CONCEPT_RELATION_CH},
}
EXTRACTION_PROMPTS = {Lang.EN: _EXTRACT_EN, Lang.CH: _EXTRACT_CH}
JSON_REPAIR_PROMPTS = {Lang.EN: _REPAIR_EN, Lang.CH: _REPAIR_CH}
QUESTION_ENTITY_PROMPTS = {Lang.EN: _QUESTION_EN, Lang.CH: _QUESTION_CH}


def fill(template: str, **values: str) -> str:
    """``template`` with each ``{name}`` replaced (no other brace is interpreted)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template

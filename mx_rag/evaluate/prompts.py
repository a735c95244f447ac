# SPDX-License-Identifier: Apache-2.0
"""The judge prompts of ``RAGEvaluator``, in English and Chinese.

Each prompt asks for a plain answer a small local model can keep to: one item per line, or
``<number>: yes|no`` verdicts, or one number. Override any of them with ``prompts_path``: a
folder holding ``english.json`` / ``chinese.json`` that map prompt names to templates with the
same ``{placeholders}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.common import MB
from mx_rag.utils.file_check import check_dir

__all__ = ["LANGUAGES", "PROMPTS", "load_prompts"]

LANGUAGES = ("english", "chinese")
MAX_PROMPT_FILE = 4 * MB
MAX_PROMPT_FILES = 512
MAX_DEPTH = 64

PROMPTS: dict[str, dict[str, str]] = {
    "english": {
        "statements": (
            "Split the answer below into short, self-contained factual statements, one per line. "
            "Resolve pronouns. Write only the statements.\n\nQuestion: {question}\nAnswer: {answer}\n\nStatements:"
        ),
        "verdicts": (
            "Context:\n{context}\n\nFor each numbered statement below, decide whether the context above supports "
            "it. Reply with one line per statement, `<number>: yes` or `<number>: no`, and nothing else.\n\n"
            "{statements}"
        ),
        "questions": (
            "Write {n} different questions that the answer below answers, one per line. "
            "Write only the questions.\n\nAnswer: {answer}"
        ),
        "useful": (
            "Question: {question}\nAnswer: {answer}\n\nFor each numbered passage below, decide whether it was "
            "useful for arriving at the answer. Reply with one line per passage, `<number>: yes` or "
            "`<number>: no`, and nothing else.\n\n{passages}"
        ),
        "entities": (
            "List the named entities (people, places, organisations, dates, numbers, titles) in the text "
            "below, one per line. Write only the entities.\n\nText: {text}"
        ),
        "accuracy_1": (
            "Rate how well the candidate answer matches the reference answer to the question. Reply 4 if it "
            "states the same facts (names, numbers, dates, units), 2 if it is partly right, 0 if it is wrong or "
            "missing. Reply with the number only.\n\nQuestion: {question}\nReference answer: {reference}\n"
            "Candidate answer: {answer}\n\nRating:"
        ),
        "accuracy_2": (
            "Two answers to one question are below. Reply 4 if the second contains everything the first says, "
            "2 if it contains part of it, 0 if it contains none of it. Reply with the number only.\n\n"
            "Question: {question}\nFirst answer: {answer}\nSecond answer: {reference}\n\nRating:"
        ),
        "relevance_1": (
            "Does the context below hold what is needed to answer the question? Reply 2 if it does, 1 if "
            "partly, 0 if not. Reply with the number only.\n\nQuestion: {question}\nContext:\n{context}\n\nRating:"
        ),
        "relevance_2": (
            "Rate the relevance of this text to the question: 0 for unrelated, 1 for somewhat related, 2 for "
            "directly about it. Reply with the number only.\n\nText:\n{context}\nQuestion: {question}\n\nRating:"
        ),
        "grounded_1": (
            "Is every claim of the answer supported by the context? Reply 2 if all of it is, 1 if part of it "
            "is, 0 if none is. Reply with the number only.\n\nContext:\n{context}\nAnswer: {answer}\n\nRating:"
        ),
        "grounded_2": (
            "Read the answer, then the passages. Reply 2 if the passages back the whole answer, 1 if they back "
            "some of it, 0 if they back none of it. Reply with the number only.\n\nAnswer: {answer}\n"
            "Passages:\n{context}\n\nRating:"
        ),
    },
    "chinese": {
        "statements": (
            "把下面的回答拆成简短、独立的事实陈述，每行一条，代词换成所指的名称。只输出这些陈述。\n\n"
            "问题：{question}\n回答：{answer}\n\n陈述："
        ),
        "verdicts": (
            "上下文：\n{context}\n\n逐条判断下面编号的陈述能否由上面的上下文支持。每条一行，格式为“<编号>: 是”或"
            "“<编号>: 否”，不要输出其他内容。\n\n{statements}"
        ),
        "questions": "写出 {n} 个不同的问题，使下面的回答正好回答这些问题，每行一个。只输出问题。\n\n回答：{answer}",
        "useful": (
            "问题：{question}\n答案：{answer}\n\n逐条判断下面编号的段落对得出该答案是否有用。每段一行，格式为"
            "“<编号>: 是”或“<编号>: 否”，不要输出其他内容。\n\n{passages}"
        ),
        "entities": (
            "列出下面文本中的命名实体（人名、地名、机构、日期、数字、作品名），每行一个。只输出实体。\n\n文本：{text}"
        ),
        "accuracy_1": (
            "评价候选答案与参考答案的一致程度：事实（名称、数字、日期、单位）相同回答 4，部分正确回答 2，错误或缺失"
            "回答 0。只输出数字。\n\n问题：{question}\n参考答案：{reference}\n候选答案：{answer}\n\n评分："
        ),
        "accuracy_2": (
            "下面是同一问题的两个答案。第二个答案包含第一个答案的全部内容回答 4，包含部分回答 2，完全不包含回答 0。"
            "只输出数字。\n\n问题：{question}\n第一个答案：{answer}\n第二个答案：{reference}\n\n评分："
        ),
        "relevance_1": (
            "下面的上下文是否包含回答该问题所需的信息？包含回答 2，部分包含回答 1，不包含回答 0。只输出数字。\n\n"
            "问题：{question}\n上下文：\n{context}\n\n评分："
        ),
        "relevance_2": (
            "评价这段文本与问题的相关程度：无关回答 0，有些相关回答 1，直接相关回答 2。只输出数字。\n\n"
            "文本：\n{context}\n问题：{question}\n\n评分："
        ),
        "grounded_1": (
            "回答中的每个说法是否都有上下文支持？全部有回答 2，部分有回答 1，都没有回答 0。只输出数字。\n\n"
            "上下文：\n{context}\n回答：{answer}\n\n评分："
        ),
        "grounded_2": (
            "先读回答，再读段落。段落支持整个回答回答 2，支持一部分回答 1，都不支持回答 0。只输出数字。\n\n"
            "回答：{answer}\n段落：\n{context}\n\n评分："
        ),
    },
}

_FIELD = re.compile(r"{(\w+)}")


def _fields(template: str) -> set[str]:
    return set(_FIELD.findall(template))


def load_prompts(language: str, prompts_path: str | None) -> dict[str, str]:
    """The prompts of ``language``, with those of ``<prompts_path>/<language>.json`` in place of the defaults."""
    prompts = dict(PROMPTS[language])
    if prompts_path is None:
        return prompts
    folder = check_dir("prompts_path", prompts_path)
    files = [p for p in folder.rglob("*") if p.is_file()]
    if len(files) > MAX_PROMPT_FILES:
        raise ParameterError(f"prompts_path {prompts_path!r} holds {len(files)} files, more than {MAX_PROMPT_FILES}")
    for path in files:
        if len(path.relative_to(folder).parts) > MAX_DEPTH or path.stat().st_size > MAX_PROMPT_FILE:
            raise ParameterError(f"prompts_path: {str(path)!r} is deeper than {MAX_DEPTH} or larger than 4 MiB")
    chosen = folder / f"{language}.json"
    if not chosen.is_file():
        return prompts
    try:
        given: Any = json.loads(chosen.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ParameterError(f"prompts_path: {str(chosen)!r} is not JSON: {exc}") from exc
    if not isinstance(given, dict):
        raise ParameterError(f"prompts_path: {str(chosen)!r} must hold a JSON object of prompt name -> template")
    for name, template in given.items():
        if name not in prompts:
            raise ParameterError(f"prompts_path: unknown prompt {name!r} in {str(chosen)!r}; known: {sorted(prompts)}")
        if not isinstance(template, str) or _fields(template) != _fields(prompts[name]):
            raise ParameterError(f"prompts_path: prompt {name!r} must be a str with the placeholders "
                                 f"{sorted(_fields(prompts[name]))}")
        prompts[name] = template
    return prompts

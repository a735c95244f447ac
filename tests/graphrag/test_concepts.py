# SPDX-License-Identifier: Apache-2.0
"""``GraphRAGPipeline(conceptualize=True)``: concepts asked of a scripted OpenAI-compatible LLM,
embedded by the packaged MiniLM into a real FAISS concept store, clustered, and used to link
question words to entities at retrieval."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.graphrag.concepts import parse_concepts, text_key
from mx_rag.llm import Text2TextLLM
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import RecordedRequest, Reply
from mx_rag.utils import ClientParam
from tests.graphrag.conftest import RoutedServer, last_message, write_texts

DIM = 384
TEXTS = {
    "stallman": "Richard Stallman announced that he runs Trisquel on a ThinkPad X60.",
    "callahan": "Harry Callahan is a detective played by Clint Eastwood.",
}
EXTRACTIONS = {
    "Richard Stallman": {"entities": [{"name": "Richard Stallman", "type": "person"},
                                      {"name": "Trisquel", "type": "software"},
                                      {"name": "ThinkPad X60", "type": "product"}],
                         "relations": [{"source": "Richard Stallman", "target": "Trisquel", "relation": "runs"},
                                       {"source": "Trisquel", "target": "ThinkPad X60", "relation": "runs on"}]},
    "Harry Callahan": {"entities": [{"name": "Harry Callahan", "type": "character"},
                                    {"name": "Clint Eastwood", "type": "person"}],
                       "relations": [{"source": "Clint Eastwood", "target": "Harry Callahan", "relation": "plays"}]},
}  # fmt: skip
CONCEPTS = {
    "Richard Stallman": "person, programmer, activist",
    "Trisquel": "Concepts: operating system, software, Trisquel",  # a label and the entity itself
    "ThinkPad X60": "laptop, notebook, computer, hardware",
    "Harry Callahan": "character, detective, police officer",
    "Clint Eastwood": "person, actor, director",
    "runs": "operation, use",
    "runs on": "compatibility, platform",
    "plays": "acting, performance",
}
_ASKED = re.compile(r"(?:ENTITY|RELATION): (.*?)\n(?:CONTEXT: .*\n)?Concepts:$", re.S)


def _route(record: RecordedRequest) -> Reply | None:
    prompt = last_message(record)
    if "Passage:" in prompt:
        passage = prompt.rsplit("Passage:", 1)[1]
        return Reply.chat(next(json.dumps(v) for k, v in EXTRACTIONS.items() if k in passage))
    asked = _ASKED.search(prompt.rsplit("\n\n", 1)[1])
    return Reply.chat(CONCEPTS[asked.group(1)]) if asked else None


def _concept_prompts(server: RoutedServer) -> list[str]:
    return [last_message(r) for r in server.requests if "Concepts:" in last_message(r)]


def _llm(server: RoutedServer) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True, retries=0))


@pytest.fixture(scope="module")
def server() -> Iterator[RoutedServer]:
    with RoutedServer(_route) as srv:
        yield srv


@pytest.fixture(scope="module")
def embedding() -> Embeddings:
    from mx_rag.embedding.local import TextEmbedding

    return TextEmbedding("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("concepts")


@pytest.fixture(scope="module")
def built(server: RoutedServer, embedding: Embeddings, root: Path) -> GraphRAGPipeline:
    (root / "work").mkdir()
    paths = write_texts(root / "docs", TEXTS)
    llm = _llm(server)
    pipeline = GraphRAGPipeline(root / "work", llm, embedding, DIM, conceptualize=True)
    pipeline.upload_files([paths["stallman"], paths["callahan"]], LoaderMng.with_defaults(chunk_size=2000))
    pipeline.build_graph(threshold=0.65, max_workers=3)
    return pipeline


def test_concepts_are_asked_per_entity_and_relation_and_saved(built: GraphRAGPipeline, server: RoutedServer,
                                                              root: Path) -> None:
    prompts = _concept_prompts(server)
    assert len(prompts) == 8  # 5 entities, 3 relation labels
    thinkpad = next(p for p in prompts if p.endswith("ENTITY: ThinkPad X60\nCONTEXT: Trisquel runs on ThinkPad X60\n"
                                                     "Concepts:"))  # fmt: skip
    assert "ENTITY: [ENTITY]" not in thinkpad
    assert any(p.endswith("RELATION: runs on\nConcepts:") for p in prompts)
    concepts = built.concepts
    assert concepts is not None
    assert concepts.concepts_of("trisquel") == ["operating system", "software"]
    assert concepts.concepts_of("runs on", "relation") == ["compatibility", "platform"]
    assert concepts.nodes_with("person") == ["clint eastwood", "richard stallman"]
    rows = json.loads((root / "work" / "graph_concepts.json").read_text())["concepts"]
    assert {"node": "thinkpad x60", "conceptualized_node": "laptop, notebook, computer, hardware",
            "node_type": "entity"} in rows  # fmt: skip
    assert len(rows) == 8


def test_concept_vectors_are_stored_and_clustered(built: GraphRAGPipeline, embedding: Embeddings, root: Path) -> None:
    concepts = built.concepts
    assert concepts is not None
    names = {c for row in CONCEPTS.values() for c in parse_concepts(row, "")} - {"trisquel"}
    store = concepts.store
    assert isinstance(store, MindFAISS)
    assert sorted(store.get_all_ids()) == sorted(text_key(c) for c in names)
    scores, ids = store.search([embedding.embed_query("laptop")], k=1)
    assert ids[0][0] == text_key("laptop") and scores[0][0] == pytest.approx(1.0, abs=1e-4)
    synsets = concepts.synsets()
    assert ["computer", "hardware", "laptop", "notebook"] in synsets  # MiniLM: >= 0.66 apart in a chain
    assert ["acting", "actor"] in synsets and ["detective"] in synsets  # 0.60 apart: below 0.65
    assert ["person"] in synsets
    saved = json.loads((root / "work" / "graph_synset.json").read_text())
    assert saved["synsets"] == synsets and "notebook" in saved["neighbours"]["laptop"]
    assert (root / "work" / "graph_concept_vectors.index").exists()


def test_retrieval_links_entities_through_their_concepts(built: GraphRAGPipeline, embedding: Embeddings,
                                                          root: Path) -> None:
    question = "Which hardware did the activist mention?"
    seeds = built.as_retriever(mode="local", retrieval_top_k=1).link(question)
    q = np.array(embedding.embed_query(question))
    expected = float(q @ np.array(embedding.embed_query("hardware")))
    assert seeds["thinkpad x60"] == pytest.approx(expected, abs=1e-4)  # the concept, not the name
    by_name = float(q @ np.array(embedding.embed_query("ThinkPad X60")))
    assert by_name < expected - 0.1
    plain = GraphRAGPipeline(root / "work", None, embedding, DIM)  # the same files, no concepts
    assert plain.as_retriever(mode="local", retrieval_top_k=1).link(question) == {
        "thinkpad x60": pytest.approx(by_name, abs=1e-4)}
    contexts = built.retrieve_graph(question, mode="local", retrieval_top_k=1)
    assert contexts[0] == TEXTS["stallman"]


def test_a_later_build_asks_about_new_nodes_only_and_deletion_drops_concepts(
    server: RoutedServer, embedding: Embeddings, tmp_path: Path
) -> None:
    llm = _llm(server)
    paths = write_texts(tmp_path / "docs", TEXTS)
    (tmp_path / "work").mkdir()
    store = MindFAISS(x_dim=DIM, devs=[0], load_local_index=str(tmp_path / "work" / "mine.index"),
                      metric_type="COSINE")
    pipeline = GraphRAGPipeline(tmp_path / "work", llm, embedding, DIM, conceptualize=True,
                                concept_vector_store=store)
    loader = LoaderMng.with_defaults(chunk_size=2000)
    before = len(_concept_prompts(server))
    pipeline.upload_files([paths["stallman"]], loader)
    pipeline.build_graph(top_k=2)
    assert len(_concept_prompts(server)) - before == 5  # 3 entities, 2 relations
    pipeline.upload_files([paths["callahan"]], loader)
    pipeline.build_graph(top_k=2)
    assert len(_concept_prompts(server)) - before == 8  # + 2 entities, 1 relation
    assert text_key("laptop") in store.get_all_ids()
    pipeline.delete_document(paths["stallman"])
    concepts = pipeline.concepts
    assert concepts is not None
    assert concepts.concepts_of("thinkpad x60") == [] and concepts.concepts_of("runs", "relation") == []
    ids = set(store.get_all_ids())
    assert text_key("laptop") not in ids and text_key("programmer") not in ids
    assert text_key("person") in ids  # Clint Eastwood still has it
    assert concepts.nodes_with("person") == ["clint eastwood"]
    assert all("laptop" not in s for s in concepts.synsets())


def test_conceptualize_arguments_are_checked(server: RoutedServer, embedding: Embeddings, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="conceptualize=True needs an llm"):
        GraphRAGPipeline(tmp_path, None, embedding, DIM, conceptualize=True)
    with pytest.raises(ParameterError, match="conceptualize"):
        GraphRAGPipeline(tmp_path, None, embedding, DIM, conceptualize="yes")
    llm = _llm(server)
    pipeline = GraphRAGPipeline(tmp_path, llm, embedding, DIM, conceptualize=True)
    for kwargs, match in (({"top_k": 0}, "top_k"), ({"threshold": 1.5}, "threshold"),
                          ({"conceptualizer_prompts": {"entity": "x"}}, "conceptualizer_prompts"),
                          ({"conceptualizer_prompts": {"entity": "x", "event": "", "relation": "y"}},
                           r"conceptualizer_prompts\['event'\]")):  # fmt: skip
        with pytest.raises(ParameterError, match=match):
            pipeline.build_graph(**kwargs)


def test_custom_prompts_and_parsing(server: RoutedServer, embedding: Embeddings, tmp_path: Path) -> None:
    assert parse_concepts("Concepts: Laptop, laptop，电脑、 ThinkPad X60\n" + "word " * 20, "ThinkPad X60") == [
        "laptop", "电脑"]
    llm = _llm(server)
    paths = write_texts(tmp_path / "docs", {"callahan": TEXTS["callahan"]})
    pipeline = GraphRAGPipeline(tmp_path, llm, embedding, DIM, conceptualize=True)
    pipeline.upload_files([paths["callahan"]], LoaderMng.with_defaults(chunk_size=2000))
    prompts = {"entity": "Mine.\n\nENTITY: [ENTITY]\nCONTEXT: [CONTEXT]\nConcepts:", "event": "[EVENT]",
               "relation": "Mine.\n\nRELATION: [RELATION]\nConcepts:"}
    before = len(server.requests)
    pipeline.build_graph(conceptualizer_prompts=prompts)
    asked = [last_message(r) for r in server.requests[before:] if "Concepts:" in last_message(r)]
    assert sorted(asked) == sorted([
        "Mine.\n\nENTITY: Harry Callahan\nCONTEXT: Clint Eastwood plays Harry Callahan\nConcepts:",
        "Mine.\n\nENTITY: Clint Eastwood\nCONTEXT: Clint Eastwood plays Harry Callahan\nConcepts:",
        "Mine.\n\nRELATION: plays\nConcepts:"])  # fmt: skip

# SPDX-License-Identifier: Apache-2.0
"""GraphRAGPipeline on HotpotQA paragraphs with a scripted LLM: extraction (broken JSON
included), merge, retrieval, persistence, incremental builds, deletion, estimates, threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import KnowledgeError, ParameterError, StorageError
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, Relation
from mx_rag.testing import Reply, ScriptedServer

from .conftest import DIM, PARAGRAPHS, QUESTION, extraction_requests

Make = Callable[..., GraphRAGPipeline]


def node_names(pipeline: GraphRAGPipeline) -> set[str]:
    return {n.name for n in pipeline.graph.iter_nodes()}


def vector_ids(work_dir: Path) -> set[int]:
    from mx_rag.storage.vectorstore import MindFAISS

    return set(MindFAISS(x_dim=DIM, devs=[0], load_local_index=work_dir / "graph_node_vectors.index",
                         metric_type="COSINE").get_all_ids())


# -- extraction and merge ------------------------------------------------------------------------


def test_build_reads_broken_json_and_merges_entities(built: GraphRAGPipeline, server: ScriptedServer) -> None:
    assert len(extraction_requests(server)) == 4
    names = node_names(built)
    assert {"grace krilanovich", "the orange eats creeps", "two dollar radio", "columbus, ohio", "eric obenauf",
            "onufri publishing house", "tirana", "bujar hudhri"} == names  # gyldendal: prose, nothing
    radio = built.graph.get_node("two dollar radio")
    assert radio is not None and radio.label == "Two Dollar Radio" and radio.type == "publisher"
    assert len(radio.sources) == 2  # named by two chunks: one node
    assert "an independent mom-and-pop publishing house" in radio.description


def test_several_relations_between_one_pair_are_kept(built: GraphRAGPipeline) -> None:
    relations = {e.relation for e in built.graph.edges_of(["two dollar radio"]) if e.target == "columbus, ohio"}
    assert relations == {"based in", "opens headquarters in"}
    published = [e for e in built.graph.iter_edges() if e.relation == "published by"]
    assert [(e.source, e.target, e.description) for e in published] == [
        ("the orange eats creeps", "two dollar radio", "in September 2010")]


def test_node_vectors_are_keyed_by_node_id(built: GraphRAGPipeline, work_dir: Path) -> None:
    assert vector_ids(work_dir) == {n.id for n in built.graph.iter_nodes()}


def test_unreadable_answer_repaired_by_a_second_call(make_pipeline: Make, docs: dict[str, Path],
                                                      loader_mng: LoaderMng, server: ScriptedServer) -> None:
    pipeline = make_pipeline()
    pipeline.upload_files([docs["gyldendal"]], loader_mng)
    server.enqueue(Reply.chat("no JSON at all"),
                   Reply.chat('[{"Head": "Søren Gyldendal", "Relation": "founded", "Tail": "Gyldendal"}]'))
    pipeline.build_graph(repair_with_llm=True)
    assert node_names(pipeline) == {"søren gyldendal", "gyldendal"}
    assert "malformed" in str(server.requests[1].json)


def test_chinese_prompt_is_used_for_lang_ch(make_pipeline: Make, docs: dict[str, Path], loader_mng: LoaderMng,
                                            server: ScriptedServer) -> None:
    from mx_rag.utils.common import Lang

    pipeline = make_pipeline()
    pipeline.upload_files([docs["onufri"]], loader_mng)
    server.enqueue(Reply.chat('{"entities": [{"name": "Onufri"}], "relations": []}'))
    pipeline.build_graph(Lang.CH)
    assert "段落：" in str(server.requests[0].json)
    assert node_names(pipeline) == {"onufri"}


# -- retrieval -----------------------------------------------------------------------------------


def test_two_hop_question_reaches_both_paragraphs(built: GraphRAGPipeline) -> None:
    contexts = built.retrieve_graph(QUESTION, mode="local")
    assert contexts[0] == PARAGRAPHS["krilanovich"]
    assert PARAGRAPHS["two_dollar_radio"] in contexts
    assert PARAGRAPHS["onufri"] not in contexts and PARAGRAPHS["gyldendal"] not in contexts


def test_documents_carry_source_chunk_and_score(built: GraphRAGPipeline, docs: dict[str, Path]) -> None:
    found = built.as_retriever().invoke(QUESTION)
    first = found[0]
    assert first.metadata["type"] == "chunk" and first.metadata["source"] == str(docs["krilanovich"].resolve())
    assert first.metadata["score"] >= found[-1].metadata["score"] > 0
    assert first.metadata["chunk_id"] in built.graph.get_node("grace krilanovich").sources  # type: ignore[union-attr]


def test_triples_instead_of_text(built: GraphRAGPipeline) -> None:
    triples = built.retrieve_graph(QUESTION, use_text=False)
    assert triples == ["Grace Krilanovich wrote The Orange Eats Creeps",
                       "The Orange Eats Creeps published by Two Dollar Radio"]
    deeper = built.retrieve_graph(QUESTION, use_text=False, subgraph_depth=3)  # Columbus is 3 hops away
    assert deeper[:2] == triples and "Two Dollar Radio based in Columbus, Ohio" in deeper


def test_budget_and_top_k_trim_the_contexts(built: GraphRAGPipeline) -> None:
    assert len(built.retrieve_graph(QUESTION, reranker_top_k=1)) == 1
    assert built.retrieve_graph(QUESTION, max_context_chars=1) == [PARAGRAPHS["krilanovich"]]
    assert len(built.retrieve_graph(QUESTION, subgraph_depth=1, use_text=False)) < len(
        built.retrieve_graph(QUESTION, subgraph_depth=3, use_text=False))


def test_a_call_takes_its_count_as_k_or_reranker_top_k(built: GraphRAGPipeline) -> None:
    retriever = built.as_retriever(reranker_top_k=4)
    assert len(retriever.invoke(QUESTION, reranker_top_k=1)) == 1
    assert [d.page_content for d in retriever.invoke(QUESTION, k=2)] == [
        d.page_content for d in retriever.invoke(QUESTION, reranker_top_k=2)]
    with pytest.raises(ParameterError, match=r"reranker_top_k.*0"):
        retriever.invoke(QUESTION, reranker_top_k=0)
    with pytest.raises(ParameterError, match="not both"):
        retriever.invoke(QUESTION, k=1, reranker_top_k=1)


def test_llm_named_question_entities_are_linked(built: GraphRAGPipeline, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("Tirana, Nobody Known"))
    contexts = built.retrieve_graph("Which publishing house has its centre in the capital?", use_llm_entities=True)
    assert PARAGRAPHS["onufri"] in contexts
    assert "Entities:" in str(server.requests[-1].json)


def test_a_question_matching_nothing_gets_nothing(built: GraphRAGPipeline) -> None:
    assert built.retrieve_graph("zzz qqq", mode="local") == []


def test_concurrent_retrieval_gives_the_single_threaded_answers(built: GraphRAGPipeline) -> None:
    retriever = built.as_retriever()
    questions = [QUESTION, "Who founded Onufri Publishing House?", "Where is Two Dollar Radio?"]
    expected = {q: [d.page_content for d in retriever.invoke(q)] for q in questions}
    failures: list[str] = []

    def ask(worker: int) -> None:
        for i in range(15):
            question = questions[(worker + i) % len(questions)]
            if [d.page_content for d in retriever.invoke(question)] != expected[question]:
                failures.append(question)

    threads = [threading.Thread(target=ask, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# -- persistence ---------------------------------------------------------------------------------


def test_reopened_pipeline_gives_the_same_contexts(built: GraphRAGPipeline, make_pipeline: Make) -> None:
    before = built.retrieve_graph(QUESTION), built.retrieve_graph(QUESTION, use_text=False)
    reopened = make_pipeline()
    assert (reopened.retrieve_graph(QUESTION), reopened.retrieve_graph(QUESTION, use_text=False)) == before
    assert reopened.documents() == built.documents()


def test_a_corrupt_graph_file_raises(built: GraphRAGPipeline, make_pipeline: Make, work_dir: Path) -> None:
    graph_file = work_dir / "graph.json"
    graph_file.write_bytes(graph_file.read_bytes()[:-40])
    with pytest.raises(StorageError, match="graph file"):
        make_pipeline()
    (work_dir / "graph_chunks.json").write_text("{}")
    graph_file.unlink()
    with pytest.raises(StorageError, match="chunk registry"):
        make_pipeline()


def test_encrypted_files(make_pipeline: Make, docs: dict[str, Path], loader_mng: LoaderMng, work_dir: Path) -> None:
    def rot(text: str) -> str:
        return text.translate(str.maketrans("abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm"))

    pipeline = make_pipeline(encrypt_fn=rot, decrypt_fn=rot)
    pipeline.upload_files([docs["krilanovich"]], loader_mng)
    pipeline.build_graph()
    assert "krilanovich" not in (work_dir / "graph.json").read_text()
    assert "Krilanovich" not in (work_dir / "graph_chunks.json").read_text()
    assert make_pipeline(encrypt_fn=rot, decrypt_fn=rot).retrieve_graph(QUESTION) == [PARAGRAPHS["krilanovich"]]


# -- incremental builds and deletion -------------------------------------------------------------


def test_incremental_build_extracts_only_new_chunks(make_pipeline: Make, docs: dict[str, Path],
                                                    loader_mng: LoaderMng, server: ScriptedServer) -> None:
    pipeline = make_pipeline()
    pipeline.upload_files([docs["krilanovich"]], loader_mng)
    pipeline.build_graph()
    assert pipeline.retrieve_graph(QUESTION) == [PARAGRAPHS["krilanovich"]]
    pipeline.upload_files([docs["krilanovich"], docs["two_dollar_radio"]], loader_mng)
    estimate = pipeline.estimate_build()
    assert (estimate.documents, estimate.chunks, estimate.llm_calls) == (1, 1, 1)
    pipeline.build_graph()
    assert len(extraction_requests(server)) == 2
    assert PARAGRAPHS["two_dollar_radio"] in pipeline.retrieve_graph(QUESTION)
    copy = docs["krilanovich"].with_name("krilanovich_copy.txt")
    copy.write_text(PARAGRAPHS["krilanovich"])
    pipeline.upload_files([copy], loader_mng)
    assert pipeline.estimate_build().llm_calls == 0  # same text: from the cache
    pipeline.build_graph()
    assert len(extraction_requests(server)) == 2
    assert len(pipeline.graph.get_node("grace krilanovich").sources) == 2  # type: ignore[union-attr]


def test_estimate_before_building(make_pipeline: Make, docs: dict[str, Path], loader_mng: LoaderMng,
                                  server: ScriptedServer) -> None:
    pipeline = make_pipeline()
    pipeline.upload_files(list(docs.values()), loader_mng)
    estimate = pipeline.estimate_build()
    assert (estimate.documents, estimate.chunks, estimate.chunks_to_extract, estimate.llm_calls) == (4, 4, 4, 4)
    text_tokens = sum(len(t) for t in PARAGRAPHS.values()) // 4
    assert estimate.prompt_tokens > text_tokens and estimate.completion_tokens > 0
    assert estimate.total_tokens == estimate.prompt_tokens + estimate.completion_tokens
    assert server.requests == []


def test_delete_removes_what_only_that_document_supported(built: GraphRAGPipeline, docs: dict[str, Path],
                                                           work_dir: Path, make_pipeline: Make) -> None:
    removed = built.delete_document(docs["two_dollar_radio"])
    assert removed == ["columbus, ohio", "eric obenauf"]
    radio = built.graph.get_node("two dollar radio")
    assert radio is not None and "mom-and-pop" not in radio.description  # its description went too
    deleted_chunks = {c for e in built.graph.iter_edges() for c in e.sources} | {
        c for n in built.graph.iter_nodes() for c in n.sources}
    kept = {c for d in built.documents() for c in built._registry.chunk_ids(d)}
    assert deleted_chunks <= kept
    assert vector_ids(work_dir) == {n.id for n in built.graph.iter_nodes()}
    assert PARAGRAPHS["two_dollar_radio"] not in built.retrieve_graph(QUESTION)
    assert str(docs["two_dollar_radio"].resolve()) not in make_pipeline().documents()
    with pytest.raises(KnowledgeError, match="not in graph"):
        built.delete_document(docs["two_dollar_radio"])


def test_deleting_every_document_empties_everything(built: GraphRAGPipeline, docs: dict[str, Path],
                                                    work_dir: Path) -> None:
    for path in docs.values():
        built.delete_document(path)
    assert built.graph.count_nodes() == 0 and built.graph.count_edges() == 0
    assert vector_ids(work_dir) == set() and built.documents() == []
    assert "Krilanovich" not in (work_dir / "graph_chunks.json").read_text()  # no cached extraction left


def test_a_changed_document_replaces_its_old_version(built: GraphRAGPipeline, docs: dict[str, Path],
                                                     loader_mng: LoaderMng, server: ScriptedServer) -> None:
    docs["onufri"].write_text("Tirana is the capital of Albania.")
    server.enqueue(Reply.chat('{"entities": [{"name": "Tirana"}, {"name": "Albania"}], '
                              '"relations": [{"source": "Tirana", "target": "Albania", "relation": "capital of"}]}'))
    built.upload_files([docs["onufri"]], loader_mng)
    built.build_graph()
    names = node_names(built)
    assert {"tirana", "albania"} <= names and not {"onufri publishing house", "bujar hudhri"} & names


# -- plug-in extractor and validation ------------------------------------------------------------


class SentenceCooccurrence:
    """Capitalised words are entities; two in one sentence are related."""

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        out = []
        for chunk in chunks:
            entities: list[Entity] = []
            relations: list[Relation] = []
            for sentence in chunk.text.split(". "):
                words = sorted({w.strip(',."()') for w in sentence.split() if w[:1].isupper()} - {""})
                entities += [Entity(w) for w in words]
                relations += [Relation(a, b, "co-occurs with") for a in words for b in words if a < b]
            out.append(Extraction(tuple(entities), tuple(relations)))
        return out


def test_a_plugged_in_extractor_needs_no_llm(work_dir: Path, docs: dict[str, Path], loader_mng: LoaderMng) -> None:
    from mx_rag.testing import HashEmbedding

    pipeline = GraphRAGPipeline(work_dir, None, HashEmbedding(DIM), DIM, extractor=SentenceCooccurrence())
    pipeline.upload_files([docs["krilanovich"], docs["two_dollar_radio"]], loader_mng)
    assert pipeline.estimate_build().llm_calls == 0
    pipeline.build_graph()
    assert {"krilanovich", "radio", "columbus"} <= node_names(pipeline)
    assert PARAGRAPHS["two_dollar_radio"] in pipeline.retrieve_graph("Where is Columbus?")


def test_a_wrong_extractor_result_is_refused(work_dir: Path, docs: dict[str, Path], loader_mng: LoaderMng) -> None:
    from mx_rag.testing import HashEmbedding

    class Broken:
        def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
            return []

    pipeline = GraphRAGPipeline(work_dir, None, HashEmbedding(DIM), DIM, extractor=Broken())
    pipeline.upload_files([docs["krilanovich"]], loader_mng)
    with pytest.raises(ParameterError, match="one per chunk"):
        pipeline.build_graph()
    assert pipeline.graph.count_nodes() == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dim": 0}, "dim"),
        ({"graph_name": "1bad"}, "graph_name"),
        ({"graph_type": "neo4j"}, "graph_type"),
        ({"graph_type": "postgres"}, "postgres_url="),
        ({"colour": "blue"}, "unknown keyword arguments \\['colour'\\]"),
        ({"extractor": object()}, "extractor"),
    ],
)
def test_constructor_validation(work_dir: Path, llm: object, kwargs: dict[str, object], match: str) -> None:
    from mx_rag.testing import HashEmbedding

    args: dict[str, object] = {"work_dir": work_dir, "llm": llm, "embedding_model": HashEmbedding(DIM), "dim": DIM}
    args.update(kwargs)
    with pytest.raises(ParameterError, match=match):
        GraphRAGPipeline(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"retrieval_top_k": 0}, r"retrieval_top_k must be in \[1, 1000\], got 0"),
        ({"reranker_top_k": 1001}, "reranker_top_k"),
        ({"subgraph_depth": 6}, r"subgraph_depth must be in \[1, 5\], got 6"),
        ({"similarity_tail_threshold": 1.5}, "similarity_tail_threshold"),
        ({"use_text": "yes"}, "use_text"),
        ({"top_k": 3}, r"unknown as_retriever arguments \['top_k'\]"),
    ],
)
def test_retriever_validation(built: GraphRAGPipeline, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        built.as_retriever(**kwargs)


def test_build_and_query_misuse(make_pipeline: Make, docs: dict[str, Path], loader_mng: LoaderMng) -> None:
    pipeline = make_pipeline()
    with pytest.raises(KnowledgeError, match="upload_files"):
        pipeline.build_graph()
    with pytest.raises(KnowledgeError, match="empty"):
        pipeline.retrieve_graph(QUESTION)
    with pytest.raises(ParameterError, match="file_list"):
        pipeline.upload_files([], loader_mng)
    pipeline.upload_files([docs["krilanovich"]], loader_mng)
    with pytest.raises(ParameterError, match=r"unknown build_graph arguments \['triple_instructions'\]"):
        pipeline.build_graph(triple_instructions={})
    with pytest.raises(ParameterError, match="max_workers"):
        pipeline.build_graph(max_workers=0)


def test_every_built_document_stays_cached(built: GraphRAGPipeline, docs: dict[str, Path],
                                          loader_mng: LoaderMng) -> None:
    copies = []
    for stem, path in docs.items():
        copies.append(path.with_name(f"{stem}_copy.txt"))
        copies[-1].write_text(PARAGRAPHS[stem])
    built.upload_files(copies, loader_mng)
    assert built.estimate_build().llm_calls == 0


def test_extraction_calls_run_concurrently_up_to_max_workers(work_dir: Path, docs: dict[str, Path],
                                                             loader_mng: LoaderMng) -> None:
    from mx_rag.llm import Text2TextLLM
    from mx_rag.testing import HashEmbedding
    from mx_rag.utils import ClientParam

    from .conftest import RoutedServer, extraction_reply

    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def slow(record: object) -> Reply | None:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        threading.Event().wait(0.2)
        with lock:
            state["now"] -= 1
        return extraction_reply(record)  # type: ignore[arg-type]

    with RoutedServer(slow) as srv:
        llm = Text2TextLLM(base_url=srv.url("/v1/chat/completions"), model_name="scripted",
                           client_param=ClientParam(use_http=True, retries=0))
        pipeline = GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM)
        pipeline.upload_files(list(docs.values()), loader_mng)
        pipeline.build_graph(max_workers=2)
    assert 1 <= state["most"] <= 2
    assert "columbus, ohio" in node_names(pipeline)  # each answer went to its own chunk


def test_a_langchain_chat_model_extracts_the_graph(work_dir: Path, docs: dict[str, Path], loader_mng: LoaderMng,
                                                  server: ScriptedServer) -> None:
    """LangChain's ChatOpenAI (the real openai client) as the extraction LLM, through LangChainLLM."""
    from langchain_openai import ChatOpenAI

    from mx_rag.testing import HashEmbedding

    chat = ChatOpenAI(base_url=server.url("/v1"), api_key="sk-test",  # type: ignore[arg-type]
                      model="scripted", max_retries=0)
    pipeline = GraphRAGPipeline(work_dir, chat, HashEmbedding(DIM), DIM)
    pipeline.upload_files([docs["onufri"]], loader_mng)
    pipeline.build_graph()
    assert {"onufri publishing house", "tirana", "bujar hudhri"} <= node_names(pipeline)
    assert server.requests[0].path == "/v1/chat/completions"

"""Subject links on dense and hybrid retrieval: real MiniLM, real FAISS, real SQLite FTS5."""

from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.retrievers import HybridRetriever, Retriever
from mx_rag.retrievers.subject_links import capitalised_names, follow_subjects
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

PASSAGES = {
    1: "Velmora Press: Velmora Press is a publishing house in Lyon. Its first catalogue was edited by "
       "Ines Carvalho in 1998.",
    2: "Ines Carvalho: Ines Carvalho is an editor and translator. She grew up in the town of Evora.",
    3: "Halden Books: The founder of Halden Books, Tomas Berg, grew up in the town of Bergen.",
    4: "Velmora Press archive: Velmora Press opened a reading room in Geneva in 2004.",
    5: "Corvid House: The publisher Corvid House was started in Lyon by Mara Lenz, who grew up there.",
}  # fmt: skip
QUESTION = "In which town did the editor of Velmora Press's first catalogue grow up?"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, emb):  # type: ignore[no-untyped-def]
    root: Path = tmp_path_factory.mktemp("subjects")
    docstore = SQLiteDocstore(db_path=str(root / "sql.db"))
    vectors = MindFAISS(x_dim=384, devs=[0], load_local_index=str(root / "faiss.index"))
    for doc_id, text in PASSAGES.items():
        ids = docstore.add([MxDocument(text, {"n": doc_id})], doc_id)
        vectors.add(ids, emb.embed_documents([text]), document_id=doc_id)
    return docstore, vectors, emb


def test_capitalised_names() -> None:
    text = "Velmora Press: its catalogue was edited by Ines Carvalho and the Bank of Lyon. Lyon in 1998."
    assert capitalised_names(text) == ["velmora press", "ines carvalho", "bank of lyon", "lyon"]
    assert capitalised_names("系统内核 and apt-get") == []


def test_follow_subjects_keeps_heads_and_skips_a_passages_own_subject() -> None:
    names = {"a": ["acme", "zed"], "b": ["acme"]}
    subjects = {"acme": ["a", "c"], "zed": ["z1", "z2"]}  # "a" opens with "acme": its own subject
    order = follow_subjects(["a", "b", "c", "z2"], 1, lambda keys: {k: names[k] for k in keys},
                            lambda wanted: {n: subjects[n] for n in wanted})  # fmt: skip
    assert order == ["a", "z2", "b", "c"]  # z2 is ranked, z1 is not: the ranked one is followed


@pytest.mark.parametrize("kind", [Retriever, HybridRetriever])
def test_the_editors_own_passage_follows_the_passage_naming_her(stores, kind: type) -> None:  # type: ignore[no-untyped-def]
    docstore, vectors, emb = stores
    common = {"vector_store": vectors, "document_store": docstore, "embed_func": emb.embed_documents, "k": 3}
    linked = [d.metadata["n"] for d in kind(subject_links=1, **common).invoke(QUESTION)]
    assert linked[:2] == [1, 2], linked  # Velmora Press, then the passage about the editor it names
    plain = [d.metadata["n"] for d in kind(subject_links=0, **common).invoke(QUESTION)]
    assert plain[0] == 1 and plain[1] != 2  # without the link the editor's passage ranks lower
    scoped = kind(subject_links=1, filter_dict={"document_id": [1, 3, 4, 5]}, **common).invoke(QUESTION)
    assert 2 not in [d.metadata["n"] for d in scoped]  # the link search keeps the call's filter


def test_subject_links_is_checked(stores) -> None:  # type: ignore[no-untyped-def]
    docstore, vectors, emb = stores
    with pytest.raises(ParameterError, match=r"subject_links.*101"):
        Retriever(vector_store=vectors, document_store=docstore, embed_func=emb.embed_documents, subject_links=101)

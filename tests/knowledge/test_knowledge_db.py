"""KnowledgeDB: transactional add and delete across registry, chunk store and vector store."""

from pathlib import Path

import numpy as np
import pytest

from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge import KnowledgeDB
from tests.knowledge.conftest import USER, Stores, write


def consistent(kb: KnowledgeDB) -> None:
    report = kb.check()
    assert report.ok, report
    assert report.chunks == report.vectors == kb.vector_store.count()


def test_add_file_stores_chunks_and_vectors(kb: KnowledgeDB, stores: Stores) -> None:
    path = write(stores.docs / "a.txt", "x")
    doc_id = kb.add_file(path, ["alpha beta", "gamma delta"], stores.embed, [{"page": 1}, {"page": 2}])
    chunks = stores.chunk_store.search_by_document_id(doc_id)
    assert [c.page_content for c in chunks] == ["alpha beta", "gamma delta"]
    assert [c.metadata["page"] for c in chunks] == [1, 2]
    assert sorted(stores.vector_store.get_all_ids()) == sorted(c.chunk_id for c in chunks)
    assert kb.check_document_exist(str(path)) and kb.check_document_exist("a.txt")
    consistent(kb)


def test_two_files_with_the_same_name_are_two_documents(kb: KnowledgeDB, stores: Stores) -> None:
    a = write(stores.docs / "x" / "a.txt", "x")
    b = write(stores.docs / "y" / "a.txt", "y")
    kb.add_file(a, ["one"], stores.embed)
    kb.add_file(b, ["two"], stores.embed)
    assert len(kb.get_all_documents()) == 2
    with pytest.raises(KnowledgeError, match="several documents"):
        kb.delete_file("a.txt")
    kb.delete_file(str(a))
    assert [d.document_file_path for d in kb.get_all_documents()] == [str(b.resolve())]
    consistent(kb)


def test_duplicate_add_is_refused_and_changes_nothing(kb: KnowledgeDB, stores: Stores) -> None:
    path = write(stores.docs / "a.txt", "x")
    kb.add_file(path, ["one"], stores.embed)
    with pytest.raises(KnowledgeError, match="already in"):
        kb.add_file(path, ["two"], stores.embed)
    assert stores.chunk_store.count() == 1
    consistent(kb)


def failing_embed(texts: list[str]) -> list[list[float]]:
    raise RuntimeError("embedding service down")


@pytest.mark.parametrize(
    ("embed", "error"),
    [
        (failing_embed, RuntimeError),
        (lambda texts: [[0.1] * 63 for _ in texts], ParameterError),  # wrong dimension for the index
        (lambda texts: [[0.1] * 64], ParameterError),  # one vector for two texts
        (lambda texts: [[float("nan")] * 64 for _ in texts], ParameterError),
    ],
    ids=["embedder-raises", "wrong-dim", "count-mismatch", "nan"],
)
def test_failed_add_leaves_nothing(kb: KnowledgeDB, stores: Stores, embed: object, error: type) -> None:
    path = write(stores.docs / "a.txt", "x")
    with pytest.raises(error):
        kb.add_file(path, ["one", "two"], embed)  # type: ignore[arg-type]
    assert kb.get_all_documents() == []
    assert stores.chunk_store.count() == 0
    assert stores.vector_store.count() == 0
    assert kb.knowledge_store.all_document_ids() == set()


def test_failure_in_vector_store_rolls_back_chunks(kb: KnowledgeDB, stores: Stores,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(stores.docs / "a.txt", "x")
    kb.add_file(write(stores.docs / "keep.txt", "k"), ["kept chunk"], stores.embed)

    def broken_add(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(stores.vector_store, "add", broken_add)
    with pytest.raises(OSError, match="disk full"):
        kb.add_file(path, ["one", "two"], stores.embed)
    monkeypatch.undo()
    assert [d.document_name for d in kb.get_all_documents()] == ["keep.txt"]
    assert stores.chunk_store.count() == 1
    consistent(kb)


def test_add_file_outside_white_paths_by_default(kb: KnowledgeDB, stores: Stores, tmp_path: Path) -> None:
    """As the original (its chat_with_ascend app saves uploads outside white_paths): add_file stores
    what the caller parsed; only ``..`` is refused."""
    outside = write(tmp_path / "outside.txt", "text")
    doc_id = kb.add_file(outside, ["some text"], stores.embed)
    assert kb.get_all_documents()[0].document_file_path == str(outside) and doc_id > 0
    with pytest.raises(ParameterError, match=r"'\.\.'"):
        kb.add_file(str(stores.docs / ".." / "outside.txt"), ["secret"], stores.embed)


def test_strict_paths_refuses_paths_outside_white_paths(stores: Stores, tmp_path: Path) -> None:
    kb = stores.open(strict_paths=True)
    outside = write(tmp_path / "outside.txt", "secret")
    with pytest.raises(ParameterError, match="outside the allowed"):
        kb.add_file(outside, ["secret"], stores.embed)
    link = stores.docs / "link.txt"
    link.symlink_to(outside)
    with pytest.raises(ParameterError, match="outside the allowed"):
        kb.add_file(link, ["secret"], stores.embed)
    with pytest.raises(ParameterError, match=r"'\.\.'"):
        kb.add_file(str(stores.docs / ".." / "outside.txt"), ["secret"], stores.embed)
    assert stores.chunk_store.count() == 0


def test_members_cannot_add_or_delete(stores: Stores) -> None:
    admin = stores.open()
    path = write(stores.docs / "a.txt", "x")
    admin.add_file(path, ["one"], stores.embed)
    stores.knowledge_store.add_usr_id_to_knowledge("test", "member_1", "member")
    member = stores.open(user_id="member_1")
    assert [d.document_name for d in member.get_all_documents()] == ["a.txt"]
    with pytest.raises(KnowledgeError, match="not an admin"):
        member.add_file(write(stores.docs / "b.txt", "y"), ["two"], stores.embed)
    with pytest.raises(KnowledgeError, match="not an admin"):
        member.delete_file("a.txt")
    assert admin.check_document_exist("a.txt")


def test_unknown_knowledge_base_or_user(stores: Stores) -> None:
    with pytest.raises(KnowledgeError, match="does not exist"):
        stores.open(name="nope")
    with pytest.raises(KnowledgeError, match="does not exist"):
        stores.open(user_id="stranger")


def test_knowledge_bases_share_stores_without_mixing(stores: Stores) -> None:
    stores.knowledge_store.add_knowledge("other", USER)
    first, second = stores.open("test"), stores.open("other")
    first.add_file(write(stores.docs / "a.txt", "x"), ["alpha"], stores.embed)
    second.add_file(write(stores.docs / "a.txt", "x"), ["beta"], stores.embed)
    assert first.document_ids() != second.document_ids()
    first.delete_all()
    assert not stores.knowledge_store.check_knowledge_exist("test", USER)
    assert [d.document_name for d in second.get_all_documents()] == ["a.txt"]
    assert stores.chunk_store.count() == 1 and stores.vector_store.count() == 1


def test_ndarray_embeddings_are_accepted(kb: KnowledgeDB, stores: Stores) -> None:
    path = write(stores.docs / "a.txt", "x")
    kb.add_file(path, ["one", "two"], lambda texts: np.asarray(stores.embed(texts)))
    consistent(kb)


def test_repair_finishes_interrupted_work(kb: KnowledgeDB, stores: Stores) -> None:
    path = write(stores.docs / "a.txt", "x")
    doc_id = kb.add_file(path, ["one", "two"], stores.embed)
    stores.knowledge_store.set_document_status(doc_id, "pending")  # as a kill -9 mid-add leaves it
    reopened = stores.open()
    assert reopened.get_all_documents() == []
    assert stores.chunk_store.count() == 0 and stores.vector_store.count() == 0
    consistent(reopened)

"""KnowledgeStore: knowledge bases, members and roles per user."""

import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge import KnowledgeStore
from mx_rag.knowledge.store import DEFAULT_EMBEDDING, choose_embedding
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    return KnowledgeStore(db_path=str(tmp_path / "kb.db"))


def test_add_knowledge_is_idempotent_for_its_admin(store: KnowledgeStore) -> None:
    first = store.add_knowledge("manuals", "Default", "admin")
    assert store.add_knowledge("manuals", "Default", "admin") == first
    assert store.add_knowledge("papers", "Default") == first + 1
    assert store.get_all_usr_role_by_knowledge("manuals") == {"Default": "admin"}


def test_nobody_joins_someone_elses_knowledge_base_by_name(store: KnowledgeStore) -> None:
    store.add_knowledge("manuals", "alice_1", "admin")
    with pytest.raises(KnowledgeError, match="add_usr_id_to_knowledge"):
        store.add_knowledge("manuals", "mallory", "admin")
    assert not store.check_knowledge_exist("manuals", "mallory")
    assert store.get_all_knowledge_info("mallory") == []


def test_members_see_documents_only_admins_change_them(store: KnowledgeStore) -> None:
    store.add_knowledge("manuals", "alice_1")
    store.add_usr_id_to_knowledge("manuals", "bobby_2", "member")
    doc_id = store.add_doc_info("manuals", "a.txt", "/data/a.txt", "alice_1")
    assert [d.document_id for d in store.get_all_documents("manuals", "bobby_2")] == [doc_id]
    with pytest.raises(KnowledgeError, match="not an admin"):
        store.add_doc_info("manuals", "b.txt", "/data/b.txt", "bobby_2")
    with pytest.raises(KnowledgeError, match="not an admin"):
        store.delete_doc_info("manuals", "a.txt", "bobby_2")
    with pytest.raises(KnowledgeError, match="does not exist for user"):
        store.get_all_documents("manuals", "eve_666")
    assert store.delete_doc_info("manuals", "a.txt", "alice_1") == doc_id
    assert store.delete_doc_info("manuals", "a.txt", "alice_1") is None


def test_document_identity_is_the_full_path(store: KnowledgeStore) -> None:
    store.add_knowledge("kb", "Default")
    a = store.add_doc_info("kb", "a.pdf", "/x/a.pdf", "Default")
    b = store.add_doc_info("kb", "a.pdf", "/y/a.pdf", "Default")
    assert a != b
    with pytest.raises(KnowledgeError, match="already in"):
        store.add_doc_info("kb", "a.pdf", "/x/a.pdf", "Default")
    with pytest.raises(KnowledgeError, match="several documents"):
        store.delete_doc_info("kb", "a.pdf", "Default")
    assert store.delete_doc_info("kb", "/y/a.pdf", "Default") == b
    assert store.check_document_exist("kb", "a.pdf", "Default")  # now unambiguous


def test_last_member_needs_force(store: KnowledgeStore) -> None:
    store.add_knowledge("kb", "Default")
    with pytest.raises(KnowledgeError, match="force=True"):
        store.delete_usr_id_from_knowledge("kb", "Default", "admin")
    store.delete_usr_id_from_knowledge("kb", "Default", "admin", force=True)
    assert not store.check_knowledge_exist("kb", "Default")


@pytest.mark.parametrize("user_id", ["admin", "x" * 65, "bad user", "",  None, "a/b/c/d/e"])
def test_user_id_pattern(store: KnowledgeStore, user_id: object) -> None:
    with pytest.raises(ParameterError, match="user_id"):
        store.add_knowledge("kb", user_id)  # type: ignore[arg-type]


def test_bad_role_and_names(store: KnowledgeStore) -> None:
    with pytest.raises(ParameterError, match="role"):
        store.add_knowledge("kb", "Default", "member")
    with pytest.raises(ParameterError, match="knowledge_name"):
        store.add_knowledge("", "Default")
    store.add_knowledge("kb", "Default")
    with pytest.raises(ParameterError, match="role"):
        store.add_usr_id_to_knowledge("kb", "bobby_2", "owner")


def test_bare_file_name_and_shared_file_with_chunk_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = KnowledgeStore(db_path="sql.db")
    chunks = SQLiteDocstore(db_path="sql.db")
    store.add_knowledge("kb", "Default")
    doc_id = store.add_doc_info("kb", "a.txt", "/a.txt", "Default")
    assert chunks.add([MxDocument("hello")], doc_id)
    tables = set(inspect(create_engine(f"sqlite:///{tmp_path / 'sql.db'}")).get_table_names())
    assert {"knowledge_table", "document_table", "chunks_table"} <= tables
    assert oct(os.stat(tmp_path / "sql.db").st_mode & 0o777) == oct(0o600)


def test_a_knowledge_base_keeps_the_embedding_model_that_built_it(store: KnowledgeStore, tmp_path: Path) -> None:
    store.add_knowledge("kb", "Default", "admin")
    store.check_embedding("kb", "Default", "all-MiniLM-L6-v2", 384)  # recorded on first use
    store.check_embedding("kb", "Default", "all-MiniLM-L6-v2", 384)
    store.check_embedding("kb", "Default", "sentence-transformers/all-minilm-l6-v2", 384)  # another spelling
    reopened = KnowledgeStore(db_path=str(tmp_path / "kb.db"))  # another process later
    with pytest.raises(KnowledgeError, match=r"built with the embedding model 'all-MiniLM-L6-v2' \(384 dim.*'e5'"):
        reopened.check_embedding("kb", "Default", "e5", 384)
    with pytest.raises(KnowledgeError, match="does not exist"):
        store.check_embedding("nope", "Default", "e5", 384)
    with pytest.raises(ParameterError, match="dimension"):
        store.check_embedding("kb", "Default", "e5", 0)
    store.delete_usr_id_from_knowledge("kb", "Default", "admin", force=True)  # gone with its record
    store.add_knowledge("kb", "Default", "admin")
    store.check_embedding("kb", "Default", "e5", 768)


def test_embedding_models_lists_the_recorded_ones_most_used_first(store: KnowledgeStore) -> None:
    assert store.embedding_models() == []
    for name, model in (("a", "multilingual-e5-small"), ("b", "all-minilm-l6-v2"), ("c", "all-minilm-l6-v2")):
        store.add_knowledge(name, "Default", "admin")
        store.check_embedding(name, "Default", model, 384)
    assert store.embedding_models() == ["all-minilm-l6-v2", "multilingual-e5-small"]


def test_choose_embedding_keeps_what_built_the_folder() -> None:
    assert choose_embedding("/models/bge", ["all-minilm-l6-v2"]) == "/models/bge"  # configured wins
    assert choose_embedding(None, []) == DEFAULT_EMBEDDING == "multilingual-e5-small"  # a new folder
    assert choose_embedding(None, ["all-minilm-l6-v2"]) == "all-MiniLM-L6-v2"  # the built-in name, loadable
    # a folder of the user's cannot be guessed from its last part: the next built-in, else the default
    assert choose_embedding(None, ["my-encoder", "multilingual-e5-small"]) == "multilingual-e5-small"
    assert choose_embedding(None, ["my-encoder"]) == DEFAULT_EMBEDDING


def test_stage_files_registers_new_and_changed_files_invisibly_in_one_go(store: KnowledgeStore) -> None:
    store.add_knowledge("kb", "Default")
    old = store.add_doc_info("kb", "a.txt", "/x/a.txt", "Default", content_hash="h0")
    staged = store.stage_files("kb", "Default", [("/x/a.txt", "h1"), ("/x/b.txt", "h2")])
    (changed, replaces), (new, none) = staged
    assert (replaces, none) == (old, None)
    assert [d.document_id for d in store.get_all_documents("kb", "Default")] == [old]  # nothing shown yet
    store.commit_documents([new], [changed])
    rows = {d.document_file_path: d for d in store.get_all_documents("kb", "Default")}
    assert {p: (r.document_id, r.content_hash) for p, r in rows.items()} == {
        "/x/a.txt": (changed, "h1"), "/x/b.txt": (new, "h2")}
    store.add_usr_id_to_knowledge("kb", "bobby_2", "member")
    with pytest.raises(KnowledgeError, match="not an admin"):
        store.stage_files("kb", "bobby_2", [("/x/c.txt", None)])
    with pytest.raises(ParameterError, match=r"files\[0\]"):
        store.stage_files("kb", "Default", [("", None)])

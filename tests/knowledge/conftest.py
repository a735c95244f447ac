from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding

DIM = 64
USER = "Default"


@dataclass
class Stores:
    root: Path
    docs: Path
    knowledge_store: KnowledgeStore
    chunk_store: SQLiteDocstore
    vector_store: MindFAISS
    embed: Callable[[list[str]], list[list[float]]]

    def open(self, name: str = "test", user_id: str = USER, **kwargs: object) -> KnowledgeDB:
        return KnowledgeDB(knowledge_store=self.knowledge_store, chunk_store=self.chunk_store,
                           vector_store=self.vector_store, knowledge_name=name,
                           white_paths=[str(self.docs)], user_id=user_id, **kwargs)  # type: ignore[arg-type]


def open_stores(root: Path) -> Stores:
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    db = str(root / "sql.db")
    return Stores(
        root=root,
        docs=docs,
        knowledge_store=KnowledgeStore(db_path=db),
        chunk_store=SQLiteDocstore(db_path=db),
        vector_store=MindFAISS(x_dim=DIM, devs=[0], load_local_index=str(root / "faiss.index"), auto_save=True),
        embed=HashEmbedding(DIM).embed_documents,
    )


@pytest.fixture
def stores(tmp_path: Path) -> Stores:
    s = open_stores(tmp_path)
    s.knowledge_store.add_knowledge("test", USER, "admin")
    return s


@pytest.fixture
def kb(stores: Stores) -> KnowledgeDB:
    return stores.open()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path

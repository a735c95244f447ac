from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, ScriptedServer
from mx_rag.utils import ClientParam

FACTS = [
    "The mxVision architecture contains the stream manager, the plugin library and the model inference module.",
    "Bananas are yellow when ripe and grow in tropical climates.",
    "FAISS is a library for efficient similarity search of dense vectors.",
    "The Debian package manager apt resolves dependencies automatically.",
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def llm(server: ScriptedServer) -> Text2TextLLM:
    return Text2TextLLM(
        base_url=server.url("/v1/chat/completions"),
        model_name="scripted",
        client_param=ClientParam(use_http=True, retries=0),
    )


@pytest.fixture
def embed() -> HashEmbedding:
    return HashEmbedding(256)


@pytest.fixture
def stores(tmp_path: Path, embed: HashEmbedding) -> tuple[MindFAISS, SQLiteDocstore]:
    docstore = SQLiteDocstore(db_path=str(tmp_path / "sql.db"))
    vectors = MindFAISS(x_dim=256, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    ids = docstore.add(
        [MxDocument(text, {"source": f"fact{i}.txt", "type": "text"}) for i, text in enumerate(FACTS)], 1
    )
    vectors.add(ids, embed.embed_documents(FACTS), document_id=1)
    return vectors, docstore


@pytest.fixture
def retriever(stores: tuple[MindFAISS, SQLiteDocstore], embed: HashEmbedding) -> Retriever:
    vectors, docstore = stores
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=embed.embed_documents, k=2)

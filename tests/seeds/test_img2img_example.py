"""The Img2ImgChain example (seed 000) with a real tiny Chinese-CLIP built in the test and real images."""

import base64
import shutil
from pathlib import Path

from mx_rag.testing import ScriptedServer
from tests.embedding.embedding_helpers import build_tiny_clip

DATA = Path(__file__).resolve().parents[1] / "data" / "docs"


def build_image_knowledge_base(workdir: Path, img_emb, dim: int):  # type: ignore[no-untyped-def]
    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import ImageLoader
    from mx_rag.knowledge import KnowledgeDB, KnowledgeStore, upload_files
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    images = workdir / "images"
    images.mkdir()
    for name in ("example.jpg", "table-multi-row-column-cells.png"):
        shutil.copyfile(DATA / name, images / name)
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=ImageLoader, file_types=[".jpg", ".png"])
    img_vector_store = MindFAISS(x_dim=dim, devs=[0], load_local_index=str(workdir / "image_faiss.index"),
                                 auto_save=True)
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    knowledge_store.add_knowledge("images", "Default", "admin")
    kb = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=img_vector_store,
                     knowledge_name="images", white_paths=[str(images)], user_id="Default")
    files = sorted(str(p) for p in images.iterdir())
    assert upload_files(kb, files, loader_mng, img_emb.embed_images) == []
    return img_vector_store, chunk_store


def test_img2img_example(tmp_path: Path, minilm_path: str, https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.chain import Img2ImgChain
    from mx_rag.embedding.local import ImageEmbedding
    from mx_rag.llm import Img2ImgMultiModel
    from mx_rag.retrievers import Retriever
    from mx_rag.utils import ClientParam

    clip_dir = build_tiny_clip(tmp_path / "chinese-clip", Path(minilm_path), chinese=True)
    dev = 0
    img_emb = ImageEmbedding(model_name="ViT-B-16", model_path=str(clip_dir), dev_id=dev)
    img_vector_store, chunk_store = build_image_knowledge_base(tmp_path, img_emb, img_emb.dimension)
    # score_threshold=None instead of the seed's 0.5: a random tiny CLIP gives arbitrary cross-modal scores
    img_retriever = Retriever(vector_store=img_vector_store, document_store=chunk_store,
                              embed_func=img_emb.embed_documents, k=1)
    multi_model = Img2ImgMultiModel(model_name="sd",
                                    url=https_server.url("/img2img"),
                                    client_param=ClientParam(ca_file=ca_file, response_limit_size=10 * 1024 * 1024))
    img2img_chain = Img2ImgChain(multi_model=multi_model, retriever=img_retriever)
    llm_data = img2img_chain.query("查找小男孩图片",
                                   prompt="he is a knight, wearing armor, big sword in right hand. "
                                          "Blur the background, focus on the knight")
    assert llm_data["prompt"].startswith("he is a knight")
    assert base64.b64decode(llm_data["result"]).startswith(b"\x89PNG")
    sent = https_server.requests[-1].json["image"]
    stored = {(DATA / n).read_bytes() for n in ("example.jpg", "table-multi-row-column-cells.png")}
    assert base64.b64decode(sent) in stored  # the retrieved image itself went to the model

# SPDX-License-Identifier: Apache-2.0
"""Seed 000, Img2ImgChain (find a stored image by text, then transform it), as a runnable script.

Changed from the seed, and why (everything else is the seed's code, in the seed's order):
- no `from paddle.base import libpaddle`: a workaround for the original's Ascend stack; mx_rag needs no paddle.
- the CLIP: no Chinese-CLIP ships offline. By default the script builds a tiny *random* Chinese-CLIP (2 layers,
  32-dimensional vectors, 32-pixel images; the MiniLM tokenizer) in a temporary folder, the way the test suite
  does; it runs the real code path but its text-image scores are noise, so which image it finds is arbitrary.
  Pass --clip-path /path/to/chinese-clip-vit-base-patch16 for a real model. MindFAISS x_dim follows the model
  (img_emb.dimension: 32 for the tiny one, 512 for ViT-B-16, the seed's value).
- the image knowledge base: the seed retrieves from images uploaded earlier (/path/to/image_faiss.index); a fresh
  machine has none, so the script first uploads tests/data/docs/example.jpg (a pink flower) and
  table-multi-row-column-cells.png with ImageLoader and ImageEmbedding.embed_images, into a temporary folder.
- score_threshold: the seed's 0.5 with a real model; none with the tiny random one (its scores mean nothing).
- the image service: no image-generation model ships offline, so `mx_rag.testing.ScriptedServer` stands in for
  the Stable Diffusion service at /img2img; it answers every request with the same tiny 2x2 red PNG. The image
  the chain retrieved is really sent to it. Pass --url (and --ca-file) for a real image-to-image service.
- transport: plain http to the stand-in, ClientParam(use_http=True), instead of https + ca_file.
- description and prompt: about the flower that ships, instead of a little boy and a knight; --query/--prompt
  take any others. The script also prints which stored image the description matches.

Run (after `make setup`): .venv/bin/python examples/img2img.py [--clip-path DIR] [--url URL [--ca-file CA]]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from _common import DOCS, client_param_for

from mx_rag.chain import Img2ImgChain
from mx_rag.document import LoaderMng
from mx_rag.document.loader import ImageLoader
from mx_rag.embedding.local import ImageEmbedding
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge.handler import upload_files
from mx_rag.llm import Img2ImgMultiModel
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import ScriptedServer

IMAGES = [DOCS / "example.jpg", DOCS / "table-multi-row-column-cells.png"]
QUERY = "查找粉色花朵图片"  # "find the picture of a pink flower" (the seed: 查找小男孩图片, "find the little boy")
PROMPT = "a pink frangipani flower, painted in watercolour. Blur the background, focus on the flower"


def build_tiny_chinese_clip(directory: Path) -> Path:
    """A random 2-layer Chinese-CLIP with the packaged MiniLM's BERT tokenizer (as tests/embedding does)."""
    import torch
    import transformers

    from mx_rag.embedding.local.model_info import minilm_dir  # where the packaged MiniLM (and its tokenizer) is

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir()))
    text = {"vocab_size": tokenizer.vocab_size, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "pad_token_id": tokenizer.pad_token_id, "max_position_embeddings": 512}
    vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": 32, "patch_size": 8}
    torch.manual_seed(0)
    config = transformers.ChineseCLIPConfig(text_config=text, vision_config=vision, projection_dim=32)
    model = transformers.ChineseCLIPModel(config)
    processor_class: Any = getattr(transformers, "ChineseCLIPImageProcessorPil", None)
    processor = (processor_class or transformers.ChineseCLIPImageProcessor)(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    model.eval().save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    processor.save_pretrained(str(directory))
    return directory


def upload_images(workdir: Path, img_emb: ImageEmbedding, img_vector_store: MindFAISS,
                  chunk_store: SQLiteDocstore) -> None:
    """Not in the seed, which retrieves from images uploaded earlier: upload the two shipped images."""
    images = workdir / "images"
    images.mkdir()
    for image in IMAGES:
        shutil.copyfile(image, images / image.name)
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=ImageLoader, file_types=[".jpg", ".png"])
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    knowledge_store.add_knowledge("images", "Default", "admin")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=img_vector_store,
                               knowledge_name="images", white_paths=[str(images)], user_id="Default")
    files = sorted(str(p) for p in images.iterdir())
    failed = upload_files(knowledge_db, files, loader_mng, img_emb.embed_images)
    print(f"uploaded {len(files) - len(failed)} of {len(files)} images")


def main(args: argparse.Namespace, workdir: Path, url: str) -> None:
    if args.clip_path:
        clip_path = args.clip_path
    else:
        clip_path = str(build_tiny_chinese_clip(workdir / "tiny-chinese-clip"))
        print("using a tiny random Chinese-CLIP: which image matches is arbitrary (--clip-path for a real model)")
    dev = 0
    img_emb = ImageEmbedding(model_name="ViT-B-16", model_path=clip_path, dev_id=dev)
    img_vector_store = MindFAISS(x_dim=img_emb.dimension,
                                 devs=[dev],
                                 load_local_index=str(workdir / "image_faiss.index"),
                                 auto_save=True)
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    upload_images(workdir, img_emb, img_vector_store, chunk_store)
    score_threshold = args.score_threshold if args.score_threshold is not None else 0.5 if args.clip_path else None
    img_retriever = Retriever(vector_store=img_vector_store, document_store=chunk_store,
                              embed_func=img_emb.embed_documents, k=1, score_threshold=score_threshold)
    multi_model = Img2ImgMultiModel(model_name="sd",
                                    url=url,
                                    client_param=client_param_for(url, args.ca_file))
    img2img_chain = Img2ImgChain(multi_model=multi_model, retriever=img_retriever)
    llm_data = img2img_chain.query(args.query,
                                   prompt=args.prompt)
    print(llm_data)
    matched = [Path(doc.metadata["source"]).name for doc in img_retriever.invoke(args.query)]
    image = base64.b64decode(llm_data["result"])
    print(f"the description matches: {matched[0] if matched else 'no image'}; generated image: {len(image)} bytes")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--query", default=QUERY, help="description of the stored image to find")
    parser.add_argument("--prompt", default=PROMPT, help="what the image service should make of it")
    parser.add_argument("--clip-path", help="a Chinese-CLIP directory (default: a tiny random one)")
    parser.add_argument("--score-threshold", type=float, help="default: 0.5 with --clip-path, none without")
    parser.add_argument("--url", help="a real image-to-image service URL (default: the scripted stand-in)")
    parser.add_argument("--ca-file", help="CA certificate for an https --url")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-img2img-") as tmp, contextlib.ExitStack() as stack:
        if arguments.url:
            service_url = arguments.url
        else:
            stand_in = stack.enter_context(ScriptedServer())  # answers every /img2img request with a tiny PNG
            service_url = stand_in.url("/img2img")
        main(arguments, Path(tmp), service_url)

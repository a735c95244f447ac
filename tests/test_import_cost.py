"""Importing the package and its light sub-packages pulls in no heavy library."""

import subprocess
import sys

HEAVY = ("torch", "faiss", "transformers", "sentence_transformers", "pymilvus", "xllamacpp", "ray")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_import_mx_rag_is_light() -> None:
    modules = loaded_after("import mx_rag")
    assert not [m for m in modules if m.split(".")[0] in HEAVY]
    assert "httpx" not in modules


def test_llm_clients_do_not_import_heavy_libraries() -> None:
    modules = loaded_after(
        "import mx_rag.llm, mx_rag.utils, mx_rag.errors; from mx_rag.llm import Text2TextLLM, Img2TextLLM, "
        "Text2ImgMultiModel, Img2ImgMultiModel; import mx_rag.llm.local_server, mx_rag.cli.main"
    )
    assert not [m for m in modules if m.split(".")[0] in HEAVY]


def test_import_has_no_global_side_effects() -> None:
    code = (
        "import os, sys, logging; env = dict(os.environ); import mx_rag, mx_rag.llm, mx_rag.utils; "
        "from mx_rag.llm import Text2TextLLM; "
        "assert dict(os.environ) == env; assert not hasattr(sys, 'tracebacklimit'); "
        "assert logging.getLogger().handlers == []"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

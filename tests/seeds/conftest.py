"""Fixtures for running the specification's examples with only paths and URLs changed.

The examples talk HTTPS with a CA file, so the LLM, VLM and image services are one scripted
OpenAI-compatible server behind TLS with a CA made for the test.
"""

import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from mx_rag.testing import ScriptedServer

DATA = Path(__file__).resolve().parents[1] / "data" / "docs"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_server(ca: trustme.CA) -> Iterator[ScriptedServer]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    with ScriptedServer(ssl_context=ctx) as srv:
        yield srv


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.crt"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Plays the role of /path/: documents, index and database live here."""
    (tmp_path / "files").mkdir()
    for name in ("layout-parser-paper-fast.pdf", "fake.docx", "fake-power-point.pptx", "embedded-images.pdf"):
        shutil.copyfile(DATA / name, tmp_path / "files" / name)
    return tmp_path


@pytest.fixture(scope="session")
def minilm_path() -> str:
    from mx_rag.embedding.local.model_info import minilm_dir

    return str(minilm_dir())  # the packaged all-MiniLM-L6-v2 directory (plays bge-large-zh-v1.5)

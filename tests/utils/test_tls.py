"""TLS against a real local TLS server: CA pinning, system-store default, mutual TLS."""

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from mx_rag.errors import ParameterError, RemoteConnectionError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_files(ca: trustme.CA, tmp_path: Path) -> dict[str, str]:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    client = ca.issue_cert("client@mx-rag.test")
    cert_file, key_file = tmp_path / "client.pem", tmp_path / "client.key"
    for blob in client.cert_chain_pems:
        blob.write_to_path(str(cert_file), append=True)
    client.private_key_pem.write_to_path(str(key_file))
    return {"ca_file": str(ca_file), "cert_file": str(cert_file), "key_file": str(key_file)}


def server_context(ca: trustme.CA, *, require_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(ctx)
    return ctx


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[ScriptedServer]:
    with ScriptedServer(ssl_context=server_context(ca, require_client_cert=False)) as srv:
        yield srv


@pytest.fixture
def mtls_server(ca: trustme.CA) -> Iterator[ScriptedServer]:
    with ScriptedServer(ssl_context=server_context(ca, require_client_cert=True)) as srv:
        yield srv


def chat(server: ScriptedServer, **param: object) -> str:
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                       client_param=ClientParam(retries=0, **param))  # type: ignore[arg-type]
    return llm.chat("over tls")


def test_ca_file_pins_trust(tls_server: ScriptedServer, tls_files: dict[str, str]) -> None:
    assert tls_server.base_url.startswith("https://")
    assert chat(tls_server, ca_file=tls_files["ca_file"]) == "echo: over tls"


def test_default_verifies_against_system_store(tls_server: ScriptedServer) -> None:
    with pytest.raises(RemoteConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        chat(tls_server)


def test_pinned_ca_rejects_other_ca(tls_server: ScriptedServer, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(RemoteConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        chat(tls_server, ca_file=str(other))


def test_mutual_tls(mtls_server: ScriptedServer, tls_files: dict[str, str]) -> None:
    assert chat(mtls_server, **tls_files) == "echo: over tls"
    subject = dict(item[0] for item in mtls_server.requests[0].client_cert["subject"])
    assert "client@mx-rag.test" in str(subject) or mtls_server.requests[0].client_cert


def test_mutual_tls_without_client_cert_fails(mtls_server: ScriptedServer, tls_files: dict[str, str]) -> None:
    with pytest.raises(RemoteConnectionError):
        chat(mtls_server, ca_file=tls_files["ca_file"])


@pytest.mark.parametrize("name", ["ca_file", "cert_file", "crl_file"])
def test_missing_tls_file_is_a_parameter_error(tls_server: ScriptedServer, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        chat(tls_server, **{name: "/nonexistent/file.pem"})


def test_garbage_ca_file_is_a_parameter_error(tls_server: ScriptedServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ParameterError, match="TLS files"):
        chat(tls_server, ca_file=str(bad))

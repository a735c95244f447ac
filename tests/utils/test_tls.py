"""TLS against a real local TLS server on 127.0.0.1: CA pinning, system-store default, expired,
mismatched and revoked certificates, mutual TLS, and breaks of a TLS stream.

Expected behaviour (``build_ssl_context`` and the module doc of mx_rag/utils/http.py): every
refused certificate is a ``RemoteConnectionError`` whose message starts with "TLS failed" and
carries OpenSSL's reason; a TLS failure is not retried (it would fail the same way).
"""

import ssl
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from mx_rag.errors import ParameterError, RemoteConnectionError, RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.testing.scripted_server import Fault
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


def server_context(
    ca: trustme.CA, *, require_client_cert: bool, leaf: trustme.LeafCert | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    (leaf or ca.issue_cert("127.0.0.1", "localhost")).configure_cert(ctx)
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
                       client_param=ClientParam(**{"retries": 0, **param}))  # type: ignore[arg-type]
    return llm.chat("over tls")


def write_crl(path: Path, issuer: trustme.CA, revoked: list[trustme.LeafCert]) -> str:
    """A PEM CRL signed by ``issuer`` that revokes ``revoked``."""
    issuer_cert = x509.load_pem_x509_certificate(issuer.cert_pem.bytes())
    key = serialization.load_pem_private_key(issuer.private_key_pem.bytes(), password=None)
    now = datetime.now(timezone.utc)
    builder = (x509.CertificateRevocationListBuilder().issuer_name(issuer_cert.subject)
               .last_update(now - timedelta(minutes=5)).next_update(now + timedelta(days=1)))
    for leaf in revoked:
        serial = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now - timedelta(minutes=1)).build()
        )
    crl = builder.sign(key, hashes.SHA256())  # type: ignore[arg-type]
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return str(path)


def serve(ca: trustme.CA, leaf: trustme.LeafCert) -> ScriptedServer:
    return ScriptedServer(ssl_context=server_context(ca, require_client_cert=False, leaf=leaf))


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
    cert = mtls_server.requests[0].client_cert
    assert cert is not None and ("email", "client@mx-rag.test") in cert["subjectAltName"]


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


# -- refused server certificates ------------------------------------------------------------------


def test_expired_certificate_is_refused(ca: trustme.CA, tls_files: dict[str, str]) -> None:
    now = datetime.now(timezone.utc)
    leaf = ca.issue_cert("127.0.0.1", not_before=now - timedelta(days=30), not_after=now - timedelta(days=1))
    with serve(ca, leaf) as srv, pytest.raises(RemoteConnectionError, match=r"TLS failed.*certificate has expired"):
        chat(srv, ca_file=tls_files["ca_file"])


def test_certificate_for_another_host_is_refused(ca: trustme.CA, tls_files: dict[str, str]) -> None:
    with serve(ca, ca.issue_cert("api.mx-rag.test")) as srv, \
            pytest.raises(RemoteConnectionError, match=r"TLS failed.*mismatch.*127.0.0.1"):
        chat(srv, ca_file=tls_files["ca_file"])


def test_revoked_certificate_is_refused_with_crl_file(ca: trustme.CA, tls_files: dict[str, str],
                                                      tmp_path: Path) -> None:
    leaf = ca.issue_cert("127.0.0.1")
    crl = write_crl(tmp_path / "crl.pem", ca, [leaf])
    with serve(ca, leaf) as srv:
        assert chat(srv, ca_file=tls_files["ca_file"]) == "echo: over tls"  # no CRL given: accepted
        with pytest.raises(RemoteConnectionError, match=r"TLS failed.*certificate revoked"):
            chat(srv, ca_file=tls_files["ca_file"], crl_file=crl)


def test_crl_that_does_not_list_the_certificate_accepts_it(ca: trustme.CA, tls_files: dict[str, str],
                                                           tmp_path: Path) -> None:
    crl = write_crl(tmp_path / "crl.pem", ca, [ca.issue_cert("someone-else.test")])
    with serve(ca, ca.issue_cert("127.0.0.1")) as srv:
        assert chat(srv, ca_file=tls_files["ca_file"], crl_file=crl) == "echo: over tls"


def test_crl_of_another_issuer_fails_closed(ca: trustme.CA, tls_files: dict[str, str], tmp_path: Path) -> None:
    crl = write_crl(tmp_path / "crl.pem", trustme.CA(), [])
    with serve(ca, ca.issue_cert("127.0.0.1")) as srv, \
            pytest.raises(RemoteConnectionError, match=r"TLS failed.*unable to get certificate CRL"):
        chat(srv, ca_file=tls_files["ca_file"], crl_file=crl)


def test_crl_file_holding_a_certificate_is_refused(tls_server: ScriptedServer, tls_files: dict[str, str],
                                                   tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.pem"
    mixed.write_bytes(Path(write_crl(tmp_path / "crl.pem", trustme.CA(), [])).read_bytes()
                      + trustme.CA().cert_pem.bytes())  # the certificate would be trusted as a CA
    with pytest.raises(ParameterError, match=r"crl_file.*CRLs only"):
        chat(tls_server, ca_file=tls_files["ca_file"], crl_file=str(mixed))


def test_tls_failure_is_not_retried(tls_server: ScriptedServer, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(RemoteConnectionError, match=r"TLS failed.*CERTIFICATE_VERIFY_FAILED"):
        chat(tls_server, ca_file=str(other), retries=3, backoff=0.5)
    assert tls_server.connection_count == 1  # not 4


# -- mutual TLS -------------------------------------------------------------------------------------


def test_mutual_tls_with_certificate_and_key_in_one_file(mtls_server: ScriptedServer, tls_files: dict[str, str],
                                                         tmp_path: Path) -> None:
    both = tmp_path / "client-and-key.pem"
    both.write_bytes(Path(tls_files["cert_file"]).read_bytes() + Path(tls_files["key_file"]).read_bytes())
    assert chat(mtls_server, ca_file=tls_files["ca_file"], cert_file=str(both)) == "echo: over tls"


def test_client_certificate_of_another_ca_is_refused(mtls_server: ScriptedServer, tls_files: dict[str, str],
                                                     tmp_path: Path) -> None:
    stranger = trustme.CA().issue_cert("stranger@mx-rag.test")
    cert_file, key_file = tmp_path / "stranger.pem", tmp_path / "stranger.key"
    stranger.cert_chain_pems[0].write_to_path(str(cert_file))
    stranger.private_key_pem.write_to_path(str(key_file))
    with pytest.raises(RemoteConnectionError, match="TLS failed"):
        chat(mtls_server, ca_file=tls_files["ca_file"], cert_file=str(cert_file), key_file=str(key_file))
    assert mtls_server.requests == []


def test_key_that_does_not_match_the_certificate_is_a_parameter_error(ca: trustme.CA, tls_files: dict[str, str],
                                                                      tmp_path: Path) -> None:
    wrong_key = tmp_path / "wrong.key"
    ca.issue_cert("other@mx-rag.test").private_key_pem.write_to_path(str(wrong_key))
    with pytest.raises(ParameterError, match="TLS files could not be loaded"):
        Text2TextLLM(  # the construction itself fails
            base_url="https://127.0.0.1:1/v1/chat/completions", model_name="m",
            client_param=ClientParam(ca_file=tls_files["ca_file"], cert_file=tls_files["cert_file"],
                                     key_file=str(wrong_key)))


# -- breaks of a TLS connection -----------------------------------------------------------------------


def test_tls_stream_cut_without_close_notify_raises(tls_server: ScriptedServer, tls_files: dict[str, str]) -> None:
    tls_server.enqueue(Reply.stream(["one ", "two"], cut_after=1))
    llm = Text2TextLLM(base_url=tls_server.url("/v1/chat/completions"), model_name="m",
                       client_param=ClientParam(ca_file=tls_files["ca_file"], retries=0))
    seen = []
    with pytest.raises(RemoteResponseError, match="cut off"):
        for text in llm.chat_streamly("q"):
            seen.append(text)
    assert seen == ["one "]


def test_tls_reset_before_the_response_is_retried(tls_server: ScriptedServer, tls_files: dict[str, str]) -> None:
    tls_server.enqueue(Fault.reset(), Reply.chat("after the reset"))
    assert chat(tls_server, ca_file=tls_files["ca_file"], retries=1, backoff=0) == "after the reset"
    assert len(tls_server.requests) == 2

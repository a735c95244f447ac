# SPDX-License-Identifier: Apache-2.0
"""The TLS context of ``HttpClient``, built from ``ClientParam`` (see ``build_ssl_context``)."""

from __future__ import annotations

import functools
import os
import ssl

from mx_rag.errors import ParameterError
from mx_rag.utils._http_policy import _one_line
from mx_rag.utils.checks import fail
from mx_rag.utils.client_param import ClientParam

__all__ = ["build_ssl_context"]


def build_ssl_context(param: ClientParam) -> ssl.SSLContext:
    """TLS 1.2+, certificate and host name verified; ``ca_file`` pins trust to that CA.

    ``crl_file`` (PEM CRLs only: a certificate in it would be trusted as a CA, so one is
    refused) turns on revocation checking of the server's certificate: a revoked one, or one
    whose issuer has no CRL in the file, fails the handshake. Without any TLS file, one
    context on the system trust store is shared by all clients (loading the store takes tens
    of milliseconds; the context is never changed once made).
    """
    if not (param.ca_file or param.crl_file or param.cert_file or param.key_file):
        return _system_store_context()
    for name in ("ca_file", "crl_file", "cert_file", "key_file"):
        path = getattr(param, name)
        if path and not os.path.isfile(path):
            raise fail(f"ClientParam.{name}", path, "an existing file")
    if param.crl_file and _holds_certificate(param.crl_file):
        raise fail("ClientParam.crl_file", param.crl_file,
                   "a PEM file of CRLs only (it holds a certificate, which would be trusted as a CA)")
    try:
        ctx = _new_context(param.ca_file or None)
        if param.crl_file:
            ctx.load_verify_locations(cafile=param.crl_file)
            ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        if param.cert_file:
            ctx.load_cert_chain(param.cert_file, param.key_file or None)
    except (ssl.SSLError, OSError) as exc:
        raise ParameterError(f"ClientParam TLS files could not be loaded: {_one_line(str(exc))}") from exc
    return ctx


def _new_context(cafile: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@functools.lru_cache(maxsize=1)
def _system_store_context() -> ssl.SSLContext:
    return _new_context(None)


def _holds_certificate(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return b"-----BEGIN CERTIFICATE-----" in file.read()
    except OSError as exc:
        raise ParameterError(f"ClientParam.crl_file {path!r} could not be read: {exc}") from exc

# SPDX-License-Identifier: Apache-2.0
"""``mxrag mcp``: the knowledge bases as MCP tools over stdio, for desktop and IDE agents.

::

    mxrag mcp --data-dir ~/.mxrag                 # acts for the local user
    MXRAG_API_KEY=mxr_... mxrag mcp               # acts for the user of that key

The tools: ``list_knowledge_bases``, ``search``, ``ask``, ``add_document`` (see
``mx_rag.server.mcp_api``). stdout carries the MCP protocol only; logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any

import typer

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Folder of the knowledge bases (default .mxrag, or data_dir).")
]
ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A TOML settings file (default ./mxrag.toml when present).")
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option("--api-key", envvar="MXRAG_API_KEY", show_default=False,
                 help="Act for the user of this API key (default: the local user)."),
]


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr meanwhile: loading models and starting the embedded LLM
    must not write a byte to the protocol's stream."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _principal(settings: Any, api_key: str | None) -> Any:
    """The local user, or the user of ``api_key`` (checked before anything slow is loaded)."""
    from mx_rag.app.keys import KeyStore, Principal
    from mx_rag.app.workspace import open_registry
    from mx_rag.errors import ParameterError

    if not api_key:
        from mx_rag.app.users import LOCAL_USER

        return Principal(LOCAL_USER, admin=True)
    found = KeyStore(open_registry(settings).engine).authenticate(api_key.strip())
    if found is None:
        raise ParameterError("the API key (--api-key or MXRAG_API_KEY) is unknown or revoked")
    return found


def mcp(data_dir: DataDirOption = None, config: ConfigOption = None, api_key: ApiKeyOption = None) -> None:
    """Serve the knowledge bases as MCP tools over stdio until stdin closes.

    For desktop and IDE agents: configure the command `mxrag mcp --data-dir DIR` as an MCP
    server. The answers of `ask` come from the LLM at llm.url, or from the embedded LLM,
    started here when llm.url is unset.
    """
    from contextlib import ExitStack

    from mx_rag.cli.common import fail
    from mx_rag.errors import MxRagError
    from mx_rag.utils.lazy import extra_import

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="mxrag mcp: %(levelname)s %(name)s: %(message)s")
    with ExitStack() as stack:
        with _stdout_to_stderr():
            try:
                from mx_rag.app.settings import load_settings

                settings = load_settings(config, data_dir=data_dir)
                principal = _principal(settings, api_key)
                with extra_import("server", "mcp"):
                    from mx_rag.server.mcp_api import run_stdio
                from mx_rag.app.llm import running_llm
                from mx_rag.server.service import KnowledgeService

                llm = stack.enter_context(running_llm(settings))
                service = KnowledgeService(settings, llm)
                stack.callback(service.close)
            except MxRagError as exc:
                fail(exc)
        typer.echo(f"mxrag mcp: serving {settings.data_dir} over stdio for user {principal.user_id!r}", err=True)
        with suppress(KeyboardInterrupt):
            run_stdio(service, llm, principal)

# SPDX-License-Identifier: Apache-2.0
"""``mxrag serve``, ``mxrag keys`` and ``mxrag config``: the RAG server and what it needs.

::

    mxrag keys create alice_01 --admin        # prints the key once; the server now needs keys
    mxrag serve --port 8000                # OpenAI-compatible API, knowledge bases, MCP at /mcp
    mxrag config show                      # the effective settings, secrets masked
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

keys_app = typer.Typer(help="API keys of the server (stored hashed in the data folder).", no_args_is_help=True)
config_app = typer.Typer(help="The server's settings (mxrag.toml and MXRAG_* variables).", no_args_is_help=True)

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Folder of the knowledge bases (default .mxrag, or data_dir).")
]
ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A TOML settings file (default ./mxrag.toml when present).")
]


def _settings(config: Path | None, **overrides: Any) -> Any:
    from mx_rag.app.settings import load_settings
    from mx_rag.cli.common import fail
    from mx_rag.errors import MxRagError

    try:
        return load_settings(config, **overrides)
    except MxRagError as exc:
        fail(exc)


def serve(
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default 8000; 0 picks a free one).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default 1).")] = None,
    llm_url: Annotated[
        str | None, typer.Option("--llm-url", help="OpenAI-compatible LLM (base or chat URL); default: embedded.")
    ] = None,
) -> None:
    """Serve the knowledge bases: an OpenAI-compatible chat API, knowledge-base management, MCP.

    The first line of stdout is the server's URL. Without API keys (see `mxrag keys`) the server
    is in local single-user mode and listens on this machine only.
    """
    from contextlib import nullcontext

    from mx_rag.app.keys import KeyStore
    from mx_rag.app.workspace import open_registry
    from mx_rag.cli.common import fail
    from mx_rag.errors import MxRagError, ParameterError

    if llm_url:
        os.environ["MXRAG_LLM__URL"] = llm_url
    settings = _settings(config, data_dir=data_dir, host=host, port=port, workers=workers)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        keyed = KeyStore(open_registry(settings).engine).any_active()
    except MxRagError as exc:
        fail(exc)
    if not keyed and not settings.local_only:
        fail(ParameterError(f"host {settings.host!r} without API keys would serve everyone: create a key with "
                             "`mxrag keys create USER --admin`, or listen on 127.0.0.1"))
    mode = "API keys required" if keyed else "local mode: no API keys, this machine only"
    try:
        from mx_rag.llm.local_server import LocalLLMServer

        embedded: Any = nullcontext() if settings.llm.url else LocalLLMServer(n_parallel=2)
        with embedded as running:
            url = settings.llm.url or running.chat_url
            _export(config, settings, url)
            _run(settings, mode)
    except MxRagError as exc:
        fail(exc)


def _export(config: Path | None, settings: Any, llm_url: str) -> None:
    """Hand the settings to the workers (each builds its app from the environment)."""
    os.environ["MXRAG_DATA_DIR"] = str(settings.data_dir.resolve())
    os.environ["MXRAG_LLM__URL"] = llm_url
    if config is not None:
        os.environ["MXRAG_CONFIG"] = str(config.resolve())


def _run(settings: Any, mode: str) -> None:
    import uvicorn

    from mx_rag.server.runner import bind_socket
    from mx_rag.server.supervisor import Supervisor

    sock = bind_socket(settings.host, settings.port)  # a busy port fails here, with a clear error
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{sock.getsockname()[1]}"
    typer.echo(url)
    typer.echo(f"mxrag serve: {url} ({mode}); {settings.workers} worker(s); MCP at {url}/mcp", err=True)
    # uvicorn kills a worker that misses a 5 s health ping, with the requests it serves; a worker
    # starved of CPU (the embedded LLM on every core, an ingest) is slow, not hung: allow a minute
    config = uvicorn.Config("mx_rag.server.app:app_from_environment", factory=True, workers=settings.workers,
                            log_level="warning", timeout_graceful_shutdown=10, timeout_worker_healthcheck=60,
                            http="mx_rag.server.slow_clients:HeaderTimeoutH11")  # slow clients: a header deadline
    try:
        if settings.workers > 1:
            Supervisor(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


@keys_app.command("create")
def keys_create(
    user_id: Annotated[str, typer.Argument(help="The user the key acts for (6 to 64 of [A-Za-z0-9_-]).")],
    admin: Annotated[bool, typer.Option("--admin", help="May manage keys and any knowledge base of its user.")] = False,
    name: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create a key and print it (it is shown only this once)."""
    store = _guard(lambda: _keys(config, data_dir))
    typer.echo(_guard(lambda: store.create(user_id, admin=admin, name=name)))


@keys_app.command("list")
def keys_list(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """List the keys (id, start of the key, user, admin, revoked)."""
    for key in _guard(lambda: _keys(config, data_dir).list()):
        flags = ",".join(f for f, on in (("admin", key.admin), ("revoked", key.revoked)) if on) or "-"
        typer.echo(f"{key.id}\t{key.shown}…\t{key.user_id}\t{flags}\t{key.created:%Y-%m-%d %H:%M}\t{key.name}")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[int, typer.Argument(help="The id `mxrag keys list` shows.")],
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Revoke a key (every worker refuses it within 5 seconds)."""
    store = _guard(lambda: _keys(config, data_dir))
    _guard(lambda: store.revoke(key_id))
    typer.echo(f"revoked key {key_id}")


@config_app.command("show")
def config_show(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Print the effective settings (defaults, mxrag.toml, MXRAG_* variables), secrets masked."""
    typer.echo(_settings(config, data_dir=data_dir).show())


def _keys(config: Path | None, data_dir: Path | None) -> Any:
    from mx_rag.app.keys import KeyStore
    from mx_rag.app.workspace import open_registry

    return KeyStore(open_registry(_settings(config, data_dir=data_dir)).engine)


def _guard(action: Any) -> Any:
    from mx_rag.cli.common import fail
    from mx_rag.errors import MxRagError

    try:
        return action()
    except MxRagError as exc:
        fail(exc)

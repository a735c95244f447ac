# SPDX-License-Identifier: Apache-2.0
"""The ``mxrag`` command line: the root command; each group lives in its own module.

Importing this module imports typer only; each command imports what it needs.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="mxrag",
    help="mx_rag: a hardware-agnostic RAG SDK.",
    no_args_is_help=True,
    add_completion=False,
)


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
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and the libraries' log messages (or MXRAG_DEBUG=1).")
    ] = False,
) -> None:
    """mx_rag: a hardware-agnostic RAG SDK.

    Exit codes: 0 done, 1 a user or remote error (one line on stderr), 2 a usage error, 130 interrupted (143: SIGTERM).
    """
    if debug:
        from mx_rag.cli.runtime import set_debug

        set_debug(True)


def _register_rag_commands() -> None:
    from mx_rag.cli import llm

    app.add_typer(llm.llm_app, name="llm")
    from mx_rag.cli import rag

    app.command()(rag.ingest)
    app.command()(rag.ask)
    app.command()(rag.chat)
    app.command()(rag.search)
    from mx_rag.cli import serve

    app.command("serve-retrieval")(serve.serve_retrieval)
    from mx_rag.cli import corag

    app.add_typer(corag.app, name="corag")
    from mx_rag.cli import kb

    app.add_typer(kb.app, name="kb")
    from mx_rag.cli import graph_cmd

    app.add_typer(graph_cmd.app, name="graph")
    from mx_rag.cli import server_cmds

    app.command()(server_cmds.serve)
    app.add_typer(server_cmds.keys_app, name="keys")
    app.add_typer(server_cmds.config_app, name="config")
    from mx_rag.cli import mcp_cmd

    app.command("mcp")(mcp_cmd.mcp)
    from mx_rag.cli import eval_cmd

    app.command("eval")(eval_cmd.evaluate_kb)


_register_rag_commands()


def main() -> None:
    """Entry point of the ``mxrag`` script: a usage error is one line on stderr and exit code 2."""
    import sys

    from mx_rag.cli.common import usage_message

    usage_error: type[Exception] = typer.BadParameter.__mro__[1]  # the parser's UsageError (not exported)
    try:
        code = typer.main.get_command(app).main(prog_name="mxrag", standalone_mode=False)
    except usage_error as exc:
        typer.echo(f"error: {usage_message(exc)}", err=True)
        sys.exit(2)
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        typer.echo("error: interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)

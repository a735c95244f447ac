"""The allowed import layers of mx_rag, read from the source with ``ast`` (nothing is imported).

- No import cycle between modules: module-level imports and imports inside functions alike;
  only the lazy imports listed in ``LAZY_EXCEPTIONS`` may close a cycle.
- The packages form layers: the graph of package -> package imports (``TYPE_CHECKING`` ones
  included) has no cycle once ``LAZY_EXCEPTIONS`` are left out.
- The library never imports the application layer (``mx_rag.app``) or its adapters
  (``mx_rag.server``, ``mx_rag.cli``); ``mx_rag.app`` imports neither adapter; the server does
  not import the CLI; the CLI imports the server only in the modules that start a server.

The one exception is the original API's ``VectorStore.as_retriever`` (storage returning a
retriever), which imports ``mx_rag.retrievers.retriever`` inside the method.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mx_rag.utils.lazy import parse_source

SOURCE = Path(__file__).resolve().parents[1] / "mx_rag"

# (importer, imported) -> the only function that may hold the import (TYPE_CHECKING imports of
# the same module, for annotations, are allowed too)
LAZY_EXCEPTIONS = {
    ("mx_rag.storage.vectorstore.vectorstore", "mx_rag.retrievers.retriever"): "as_retriever",
}
APPLICATION = "mx_rag.app"
ADAPTERS = ("mx_rag.server", "mx_rag.cli")
# the CLI modules that start a server (mxrag serve, mxrag serve-retrieval, mxrag mcp)
SERVER_STARTERS = frozenset({"mx_rag.cli.server_cmds", "mx_rag.cli.serve", "mx_rag.cli.mcp_cmd"})


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    function: str | None  # the innermost enclosing function, None at module level
    type_checking: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        where = f" in {self.function}()" if self.function else ""
        return f"{self.importer}:{self.line}{where} -> {self.imported}"


@functools.cache
def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package ``__init__``) for every module under mx_rag/."""
    found = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _known(name: str) -> str | None:
    """``name``, or the nearest enclosing module that exists (``pkg.mod.Class`` -> ``pkg.mod``)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(name: str) -> list[Import]:
    path, is_package = modules()[name]
    package = name.split(".") if is_package else name.split(".")[:-1]
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> Iterable[str]:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
            return
        base = node.module or ""
        if node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        for alias in node.names:  # ``from pkg import module`` imports the module
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base

    def walk(node: ast.AST, function: str | None, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    walk_one(stmt, function, True)
                for stmt in child.orelse:
                    walk_one(stmt, function, type_checking)
            else:
                walk_one(child, function, type_checking)

    def walk_one(node: ast.AST, function: str | None, type_checking: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in dict.fromkeys(targets(node)):
                known = _known(target) if target.split(".")[0] == "mx_rag" else None
                if known is not None and known != name:
                    found.append(Import(name, known, node.lineno, function, type_checking))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        walk(node, function, type_checking)

    walk(parse_source(path.read_text(encoding="utf-8"), str(path)), None, False)
    return found


@functools.cache
def all_imports() -> tuple[Import, ...]:
    return tuple(found for name in modules() for found in _imports_of(name))


def _exempt(imp: Import) -> bool:
    return (imp.importer, imp.imported) in LAZY_EXCEPTIONS


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _package(name: str) -> str:
    """``mx_rag.storage.vectorstore.faiss_npu`` -> ``mx_rag.storage``; the root stays ``mx_rag``."""
    return ".".join(name.split(".")[:2])


def test_the_source_is_read() -> None:
    assert "mx_rag.retrievers.retriever" in modules() and len(all_imports()) > 500
    assert any(imp.type_checking for imp in all_imports()) and any(imp.function for imp in all_imports())


def test_no_import_cycle_between_modules() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in all_imports():
        if not imp.type_checking and not _exempt(imp):
            edges[imp.importer].add(imp.imported)
    cycles = _cycles(edges)
    detail = [str(imp) for cycle in cycles for imp in all_imports()
              if imp.importer in cycle and imp.imported in cycle and not imp.type_checking]
    assert not cycles, f"import cycles {cycles}:\n" + "\n".join(detail)


def test_the_exceptions_are_lazy_and_still_needed() -> None:
    for (importer, imported), function in LAZY_EXCEPTIONS.items():
        uses = [imp for imp in all_imports() if (imp.importer, imp.imported) == (importer, imported)]
        assert any(imp.function == function for imp in uses), f"{importer} -> {imported} is gone: drop the exception"
        wrong = [str(imp) for imp in uses if not imp.type_checking and imp.function != function]
        assert not wrong, f"only {function}() may import {imported}: {wrong}"


def test_packages_form_layers() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in all_imports():
        if not _exempt(imp) and _package(imp.importer) != _package(imp.imported):
            edges[_package(imp.importer)].add(_package(imp.imported))
    cycles = _cycles(edges)
    detail = [str(imp) for cycle in cycles for imp in all_imports() if not _exempt(imp)
              and _package(imp.importer) in cycle and _package(imp.imported) in cycle
              and _package(imp.importer) != _package(imp.imported)]
    assert not cycles, f"packages importing each other {cycles}:\n" + "\n".join(detail)


def _modules_in(*packages: str) -> set[str]:
    return {name for name in modules() if _package(name) in packages}


def _offending(importers: set[str], forbidden: Iterable[str]) -> list[str]:
    """The imports of a module in ``importers`` from a module within a package of ``forbidden``."""
    forbidden = tuple(forbidden)
    return [str(imp) for imp in all_imports()
            if imp.importer in importers and any(_within(imp.imported, f) for f in forbidden)]


def test_the_library_never_imports_the_application_or_its_adapters() -> None:
    library = set(modules()) - _modules_in(APPLICATION, *ADAPTERS)
    assert {"mx_rag", "mx_rag.storage.vectorstore.vectorstore"} <= library
    assert "mx_rag.server.service" not in library
    assert not _offending(library, (APPLICATION, *ADAPTERS))


def test_the_application_layer_never_imports_its_adapters() -> None:
    assert not _offending(_modules_in(APPLICATION), ADAPTERS)


def test_the_server_never_imports_the_cli() -> None:
    assert not _offending(_modules_in("mx_rag.server"), ("mx_rag.cli",))


def test_the_cli_imports_the_server_only_to_start_one() -> None:
    assert not _offending(_modules_in("mx_rag.cli") - SERVER_STARTERS, ("mx_rag.server",))


def test_the_server_starters_exist() -> None:
    """The allowed list names real modules (a rename must update it)."""
    assert set(modules()) >= SERVER_STARTERS

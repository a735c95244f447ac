"""mx_rag.utils.lazy: lazy package exports (PEP 562) and imports of optional extras."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import mx_rag.utils.lazy as lazy_module
from mx_rag.errors import ExtraNotInstalledError
from mx_rag.utils.lazy import check_extra, extra_import, lazy_exports, lazy_package, parse_source

PACKAGE = "lazy_pkg_for_tests"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A real package on disk: ``__init__`` exports two names lazily from ``heavy`` and ``broken``."""
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text(
        "from mx_rag.utils.lazy import lazy_exports\n"
        "__all__ = ['Heavy', 'Broken', 'Relative']\n"
        "__getattr__, __dir__ = lazy_exports(globals(), {\n"
        f"    'Heavy': '{PACKAGE}.heavy', 'Broken': '{PACKAGE}.broken', 'Relative': '.heavy'}},\n"
        "    extra='demo', extra_modules={'not_installed_demo_lib'})\n"
    )
    (root / "heavy.py").write_text("IMPORTS = [1]\nclass Heavy: pass\nRelative = 'relative'\n")
    (root / "broken.py").write_text("import not_installed_demo_lib\nBroken = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(PACKAGE)
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def test_names_load_on_first_access_and_are_cached(package: types.ModuleType) -> None:
    assert f"{PACKAGE}.heavy" not in sys.modules
    assert "Heavy" not in vars(package)
    heavy = package.Heavy
    assert heavy.__name__ == "Heavy" and heavy.__module__ == f"{PACKAGE}.heavy"
    assert vars(package)["Heavy"] is heavy  # cached: __getattr__ is not called again
    from lazy_pkg_for_tests import Heavy

    assert Heavy is heavy
    assert package.Relative == "relative"  # a module path relative to the package


def test_unknown_names_raise_attribute_error(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match=rf"^module '{PACKAGE}' has no attribute 'Nope'$"):
        _ = package.Nope
    assert not hasattr(package, "Nope")
    with pytest.raises(ImportError, match="cannot import name 'Nope'"):
        exec(f"from {PACKAGE} import Nope", {})


def test_dir_lists_every_export(package: types.ModuleType) -> None:
    names = dir(package)
    assert {"Heavy", "Broken", "Relative", "__all__"} <= set(names)
    assert names == sorted(names)
    assert f"{PACKAGE}.heavy" not in sys.modules  # dir() imports nothing


def test_a_missing_extra_module_names_the_extra(package: types.ModuleType) -> None:
    with pytest.raises(ExtraNotInstalledError, match=r'pip install "mxrag\[demo\]"') as info:
        _ = package.Broken
    assert info.value.module == "not_installed_demo_lib"
    assert info.value.extra == "demo"
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    assert isinstance(info.value, ImportError)  # callers catching ImportError keep working


def test_other_import_errors_propagate_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the extra's own modules count: a bug in our module must not pose as a missing extra."""
    root = tmp_path / "lazy_pkg_bug"
    root.mkdir()
    (root / "__init__.py").write_text(
        "from mx_rag.utils.lazy import lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(globals(), {'Thing': 'lazy_pkg_bug.thing'},"
        " extra='demo', extra_modules={'pypdf'})\n"
    )
    (root / "thing.py").write_text("import a_typo_in_our_code\nThing = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        package = importlib.import_module("lazy_pkg_bug")
        with pytest.raises(ModuleNotFoundError) as info:
            _ = package.Thing
        assert not isinstance(info.value, ExtraNotInstalledError)
        assert info.value.name == "a_typo_in_our_code"
    finally:
        for name in ("lazy_pkg_bug", "lazy_pkg_bug.thing"):
            sys.modules.pop(name, None)


def test_without_extra_import_errors_are_not_translated() -> None:
    module_globals: dict[str, object] = {"__name__": "plain_pkg"}
    getattr_, _ = lazy_exports(module_globals, {"X": "no_such_module_for_lazy_tests"})
    with pytest.raises(ModuleNotFoundError) as info:
        getattr_("X")
    assert not isinstance(info.value, ExtraNotInstalledError)


def test_extra_modules_need_an_extra() -> None:
    with pytest.raises(ValueError, match="extra_modules needs extra"):
        lazy_exports({"__name__": "p"}, {}, extra_modules={"x"})


def _write_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, init: str) -> None:
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text(init)
    (root / "parts.py").write_text("class A: pass\nclass B: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delitem(sys.modules, f"{name}.parts", raising=False)


def test_lazy_package_reads_its_type_checking_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    init = (
        "from typing import TYPE_CHECKING\n"
        "from mx_rag.utils.lazy import lazy_package\n"
        "if TYPE_CHECKING:\n"
        "    from lazy_pkg_tc.parts import A\n"
        "    from .parts import B\n"
        "__all__ = ['A', 'B']\n"
        "__getattr__, __dir__ = lazy_package(globals())\n"
    )
    _write_package(tmp_path, monkeypatch, "lazy_pkg_tc", init)
    package = importlib.import_module("lazy_pkg_tc")
    assert "lazy_pkg_tc.parts" not in sys.modules and {"A", "B"} <= set(dir(package))
    assert (package.A.__name__, package.B.__module__) == ("A", "lazy_pkg_tc.parts")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    from .parts import A\n__all__ = []\n", r"__all__ lacks \['A'\]"),
        ("    from .parts import A as Z\n__all__ = ['Z']\n", "reads only 'from module import names'"),
    ],
)
def test_lazy_package_refuses_what_it_cannot_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, message: str
) -> None:
    init = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n" + body
    init += "from mx_rag.utils.lazy import lazy_package\n__getattr__, __dir__ = lazy_package(globals())\n"
    _write_package(tmp_path, monkeypatch, "lazy_pkg_bad", init)
    with pytest.raises(ValueError, match=message):
        importlib.import_module("lazy_pkg_bad")
    with pytest.raises(ValueError, match="needs the source"):
        lazy_package({"__name__": "p", "__spec__": None})


def test_extra_import_raises_naming_module_and_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # "import pymilvus" now fails
    pattern = r"'pymilvus'.*mxrag\[milvus\]"
    with pytest.raises(ExtraNotInstalledError, match=pattern) as info, extra_import("milvus", "pymilvus"):
        import pymilvus  # noqa: F401
    assert (info.value.module, info.value.extra) == ("pymilvus", "milvus")


def test_extra_import_reports_the_top_level_package() -> None:
    with pytest.raises(ExtraNotInstalledError) as info, extra_import("embed", "transformers"):
        raise ModuleNotFoundError("No module named 'tokenizers.models'", name="tokenizers.models")
    assert info.value.module == "tokenizers"


def test_extra_import_falls_back_to_the_given_module_name() -> None:
    with pytest.raises(ExtraNotInstalledError) as info, extra_import("llm", "xllamacpp"):
        raise ImportError("libggml.so: cannot open shared object file")
    assert info.value.module == "xllamacpp"


def test_extra_import_only_filters_and_passes_nested_extra_errors() -> None:
    with pytest.raises(ModuleNotFoundError) as info, extra_import("faiss", "faiss", only={"faiss"}):
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
    assert not isinstance(info.value, ExtraNotInstalledError)
    inner = ExtraNotInstalledError("jieba", "all")
    with pytest.raises(ExtraNotInstalledError) as outer, extra_import("faiss", "faiss"):
        raise inner
    assert outer.value is inner  # an inner extra keeps its own name


def test_extra_import_lets_a_successful_block_run() -> None:
    with extra_import("demo", "json"):
        import json
    assert json.loads("1") == 1


def test_check_extra_finds_modules_without_importing() -> None:
    check_extra("demo", "json", "importlib")
    with pytest.raises(ExtraNotInstalledError, match=r"'no_such_module_for_lazy_tests'.*mxrag\[finetune\]"):
        check_extra("finetune", "json", "no_such_module_for_lazy_tests")


def test_the_helper_module_is_light() -> None:
    code = "import sys, mx_rag.utils.lazy; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert not [m for m in out.split() if m.split(".")[0] in ("torch", "transformers", "httpx", "langchain_core")]


def test_parse_source_from_many_threads_at_once() -> None:
    # CPython 3.11.7 shares one ast recursion counter between threads (gh-106905); parse_source
    # must return the same tree in every thread however the parses interleave
    source = Path(lazy_module.__file__).read_text(encoding="utf-8")
    expected = ast.dump(ast.parse(source))
    with ThreadPoolExecutor(8) as pool:
        dumps = list(pool.map(lambda _: ast.dump(parse_source(source)), range(64)))
    assert dumps == [expected] * 64

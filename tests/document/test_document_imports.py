"""The document packages import lazily; a missing parsing library names the extra to install."""

import importlib
import subprocess
import sys

import pytest

from mx_rag.errors import ExtraNotInstalledError

PARSERS = ("pypdf", "docx", "pptx", "openpyxl", "PIL", "bs4", "charset_normalizer")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return {name.split(".")[0] for name in out.split()}


def test_package_inits_import_no_parser() -> None:
    loaded = _loaded_after("import mx_rag.document, mx_rag.document.loader; from mx_rag.document import LoaderMng")
    assert not loaded & set(PARSERS) - {"charset_normalizer"}  # requests, under langchain, imports that one
    assert "httpx" not in loaded


def test_one_loader_imports_only_its_parser() -> None:
    loaded = _loaded_after("from mx_rag.document.loader import PdfLoader")
    assert "pypdf" in loaded
    assert not loaded & {"docx", "pptx", "openpyxl", "bs4"}


def test_public_names() -> None:
    import mx_rag.document
    import mx_rag.document.loader

    assert sorted(mx_rag.document.__all__) == ["LoaderInfo", "LoaderMng", "SplitterInfo"]
    for name in mx_rag.document.loader.__all__:
        assert getattr(mx_rag.document.loader, name).__name__ == name
    with pytest.raises(AttributeError, match="WordLoader"):
        _ = mx_rag.document.loader.WordLoader


@pytest.mark.parametrize(("name", "module", "library"), [
    ("PdfLoader", "mx_rag.document.loader.pdf_loader", "pypdf"),
    ("HtmlLoader", "mx_rag.document.loader.html_loader", "bs4"),
])
def test_missing_parser_names_the_extra(monkeypatch: pytest.MonkeyPatch, name: str, module: str,
                                        library: str) -> None:
    package = importlib.import_module("mx_rag.document.loader")
    monkeypatch.delitem(vars(package), name, raising=False)  # a name resolved earlier is cached
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # makes "import <library>" fail
    with pytest.raises(ExtraNotInstalledError, match=r'pip install "mxrag\[loaders\]"') as info:
        getattr(package, name)
    assert info.value.module == library

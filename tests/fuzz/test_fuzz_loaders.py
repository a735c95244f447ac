"""Every loader fed mutated real files: documents, or our error with a one-line message.

Each example mutates one of the files of tests/data/docs (byte flips, truncation, splices from
the other files, inserted junk and format tokens; for .docx, .pptx and .xlsx also mutations of
the XML members re-zipped) and loads it either with the loader itself or through
``LoaderMng.load_and_split``. A third-party exception, a multi-line message or a hang (the
pytest-timeout limit) fails the example.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_helpers import Mutant, check_contract, fuzz, mutated_bytes, mutated_zip
from hypothesis import given
from hypothesis import strategies as st

from mx_rag.document import LoaderMng
from mx_rag.document.loader import (
    DocxLoader,
    ExcelLoader,
    HtmlLoader,
    ImageLoader,
    MarkdownLoader,
    PdfLoader,
    PowerPointLoader,
    TextLoader,
)

pytestmark = pytest.mark.timeout(300)

MNG = LoaderMng.with_defaults(chunk_size=200, chunk_overlap=20)

# target: (loader, suffix, seed files, zip-based, CI examples)
TARGETS = {
    "pdf": (PdfLoader, ".pdf", ["layout-parser-paper-fast.pdf", "korean-text-with-tables.pdf",
                                "embedded-images.pdf", "pdf-bad-color-space.pdf", "password.pdf",
                                "copy-protected.pdf"], False, 20),
    "docx": (DocxLoader, ".docx", ["fake.docx", "docx-tables.docx", "docx-hdrftr.docx", "contains-pictures.docx"],
             True, 40),
    "pptx": (PowerPointLoader, ".pptx", ["fake-power-point.pptx", "fake-power-point-table.pptx",
                                         "fake-power-point-malformed.pptx", "picture.pptx"], True, 40),
    "xlsx": (ExcelLoader, ".xlsx", ["stanley-cups.xlsx", "emoji.xlsx", "empty.xlsx"], True, 40),
    "html": (HtmlLoader, ".html", ["fake-html.html", "example-10k-1p.html"], False, 30),
    "md": (MarkdownLoader, ".md", ["codeblock.md", "simple-table.md", "umlauts-non-utf8.md"], False, 40),
    "txt": (TextLoader, ".txt", ["norwich-city.txt", "fake-text-utf-16.txt", "fake-text-all-whitespace.txt"],
            False, 40),
    "image": (ImageLoader, ".png", ["table-multi-row-column-cells.png", "example.jpg"], False, 40),
}


def _load(loader: type, path: Path, route: str) -> object:
    if route == "mng":
        return check_contract(lambda: MNG.load_and_split(path))
    return check_contract(lambda: loader(path).load())


def _target_test(name: str):  # type: ignore[no-untyped-def]
    loader, suffix, seeds, zipped, examples = TARGETS[name]
    mutate = mutated_zip if zipped else mutated_bytes

    @fuzz(examples)
    @given(mutant=st.sampled_from(seeds).flatmap(mutate), route=st.sampled_from(["loader", "mng"]))
    def run(work_dir: Path, mutant: Mutant, route: str) -> None:
        path = work_dir / f"mutated-{name}{suffix}"
        path.write_bytes(mutant.content)
        outcome = _load(loader, path, route)
        assert outcome is not None

    run.__name__ = f"test_mutated_{name}_files_load_or_raise_our_error"
    return run


test_mutated_pdf_files_load_or_raise_our_error = _target_test("pdf")
test_mutated_docx_files_load_or_raise_our_error = _target_test("docx")
test_mutated_pptx_files_load_or_raise_our_error = _target_test("pptx")
test_mutated_xlsx_files_load_or_raise_our_error = _target_test("xlsx")
test_mutated_html_files_load_or_raise_our_error = _target_test("html")
test_mutated_md_files_load_or_raise_our_error = _target_test("md")
test_mutated_txt_files_load_or_raise_our_error = _target_test("txt")
test_mutated_image_files_load_or_raise_our_error = _target_test("image")


@fuzz(40)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000),
       suffix=st.sampled_from([".html", ".md", ".txt"]))
def test_arbitrary_text_loads_as_html_markdown_or_text(work_dir: Path, text: str, suffix: str) -> None:
    path = work_dir / f"text{suffix}"
    path.write_bytes(text.encode("utf-8"))
    outcome = check_contract(lambda: MNG.load_and_split(path))
    if suffix == ".txt":  # valid UTF-8 always decodes; only blank text gives no chunk
        assert isinstance(outcome, list)
        assert bool(outcome) == bool(text.replace("\x00", "").strip())

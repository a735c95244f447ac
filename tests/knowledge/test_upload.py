"""upload_files / upload_dir / delete_files with real loaders on real files."""

import shutil
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.knowledge import FilesLoadInfo, KnowledgeDB, delete_files, upload_dir, upload_files
from mx_rag.knowledge.handler import FileHandlerError
from tests.knowledge.conftest import Stores, write

DATA = Path(__file__).resolve().parents[1] / "data" / "docs"


@pytest.fixture
def mng() -> LoaderMng:
    return LoaderMng.with_defaults(chunk_size=300, chunk_overlap=30)


def copy(name: str, docs: Path, as_name: str | None = None) -> Path:
    target = docs / (as_name or Path(name).name)
    shutil.copyfile(DATA / name, target)
    return target


def truncated(name: str, target: Path) -> Path:
    """A real file cut in half: a malformed document of the same type."""
    data = (DATA / name).read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def test_upload_real_documents(kb: KnowledgeDB, stores: Stores, mng: LoaderMng) -> None:
    files = [copy(n, stores.docs) for n in ("fake.docx", "norwich-city.txt", "fake-power-point.pptx")]
    assert upload_files(kb, [str(f) for f in files], mng, stores.embed) == []
    names = sorted(d.document_name for d in kb.get_all_documents())
    assert names == ["fake-power-point.pptx", "fake.docx", "norwich-city.txt"]
    txt = next(d for d in kb.get_all_documents() if d.document_name == "norwich-city.txt")
    chunks = stores.chunk_store.search_by_document_id(txt.document_id)
    assert len(chunks) > 1 and all(len(c.page_content) <= 300 for c in chunks)
    assert all(c.metadata["source"].endswith("norwich-city.txt") for c in chunks)
    assert kb.check().ok


def test_bad_file_fails_alone_and_leaves_nothing(kb: KnowledgeDB, stores: Stores, mng: LoaderMng) -> None:
    good = copy("fake.docx", stores.docs)
    bad = truncated("fake-power-point.pptx", stores.docs / "broken.pptx")
    assert upload_files(kb, [str(bad), str(good)], mng, stores.embed) == [str(bad)]
    assert [d.document_name for d in kb.get_all_documents()] == ["fake.docx"]
    assert kb.check().ok


def test_bad_paths_raise_before_anything_is_stored(kb: KnowledgeDB, stores: Stores, mng: LoaderMng,
                                                   tmp_path: Path) -> None:
    good = copy("fake.docx", stores.docs)
    outside = write(tmp_path / "outside.txt", "secret")
    with pytest.raises(ParameterError, match="outside the allowed"):
        upload_files(kb, [str(good), str(outside)], mng, stores.embed)
    with pytest.raises(ParameterError, match="existing regular file"):
        upload_files(kb, [str(good), str(stores.docs / "missing.txt")], mng, stores.embed)
    assert kb.get_all_documents() == []


def test_duplicates_need_force_and_force_replaces_after_parse(kb: KnowledgeDB, stores: Stores,
                                                              mng: LoaderMng) -> None:
    path = write(stores.docs / "notes.txt", "The first version talks about apples.")
    assert upload_files(kb, [str(path)], mng, stores.embed) == []
    with pytest.raises(FileHandlerError, match="force=True"):
        upload_files(kb, [str(path)], mng, stores.embed)
    path.write_text("The second version talks about pears.", encoding="utf-8")
    assert upload_files(kb, [str(path)], mng, stores.embed, force=True) == []
    (doc,) = kb.get_all_documents()
    assert "pears" in stores.chunk_store.search_by_document_id(doc.document_id)[0].page_content

    keep = copy("fake.docx", stores.docs, "keep.docx")
    assert upload_files(kb, [str(keep)], mng, stores.embed) == []
    truncated("fake.docx", keep)  # the new version cannot be parsed
    assert upload_files(kb, [str(keep)], mng, stores.embed, force=True) == [str(keep)]
    assert kb.check_document_exist(str(keep)), "the old version was lost"
    assert kb.check().ok


def test_upload_dir_and_delete_files(kb: KnowledgeDB, stores: Stores, mng: LoaderMng) -> None:
    copy("fake.docx", stores.docs)
    copy("norwich-city.txt", stores.docs)
    write(stores.docs / "data.bin", "binary")
    (stores.docs / "sub").mkdir()
    result = upload_dir(FilesLoadInfo(knowledge=kb, dir_path=str(stores.docs), loader_mng=mng,
                                      embed_func=stores.embed))
    assert sorted(Path(p).name for p in result) == ["data.bin", "sub"]
    assert len(kb.get_all_documents()) == 2
    delete_files(kb, ["fake.docx", str(stores.docs / "norwich-city.txt")])
    assert kb.get_all_documents() == []
    assert stores.chunk_store.count() == 0 and stores.vector_store.count() == 0


def test_too_many_files(stores: Stores, mng: LoaderMng) -> None:
    kb = stores.open(max_file_count=1)
    files = [str(write(stores.docs / f"{i}.txt", "text")) for i in range(2)]
    with pytest.raises(FileHandlerError, match="max_file_count"):
        upload_files(kb, files, mng, stores.embed)


def test_unchanged_files_are_skipped_and_changed_ones_replaced(kb: KnowledgeDB, stores: Stores,
                                                               mng: LoaderMng) -> None:
    from mx_rag.knowledge.ingest import ingest_files

    files = [str(write(stores.docs / f"n{i}.txt", f"note number {i} about apples")) for i in range(3)]
    first = ingest_files(kb, files, mng, stores.embed)
    assert first.added == files and first.failed == []
    ids_before = stores.chunk_store.get_all_chunk_id()
    write(stores.docs / "n1.txt", "note number 1 now about pears")
    again = ingest_files(kb, files, mng, stores.embed, force=True)
    assert again.unchanged == [files[0], files[2]] and again.replaced == [files[1]]
    ids_after = stores.chunk_store.get_all_chunk_id()
    assert set(ids_before) - set(ids_after) and set(ids_after) > {i for i in ids_before if i in ids_after}
    assert kb.check().ok


def test_small_files_are_stored_in_one_vector_write(kb: KnowledgeDB, stores: Stores, mng: LoaderMng,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    saves = []
    original = stores.vector_store._save
    monkeypatch.setattr(stores.vector_store, "_save", lambda: (saves.append(1), original())[1])
    files = [str(write(stores.docs / f"s{i}.txt", f"short file {i}")) for i in range(12)]
    assert upload_files(kb, files, mng, stores.embed) == []
    assert len(kb.get_all_documents()) == 12
    assert len(saves) == 1
    assert kb.check().ok


def test_an_embedding_failure_fails_only_its_file(kb: KnowledgeDB, stores: Stores, mng: LoaderMng) -> None:
    def picky(texts: list[str]) -> list[list[float]]:
        if any("POISON" in t for t in texts):
            raise RuntimeError("the embedding service refused a text")
        return stores.embed(texts)

    files = [str(write(stores.docs / f"p{i}.txt", "POISON" if i == 2 else f"fine text {i}")) for i in range(4)]
    assert upload_files(kb, files, mng, picky) == [files[2]]
    assert sorted(d.document_name for d in kb.get_all_documents()) == ["p0.txt", "p1.txt", "p3.txt"]
    assert kb.check().ok


BAD_EMBED_FUNCS = [
    ("not-callable", "embed", r"embed_func must be a callable, or a dict"),
    ("unknown-key", {"dense": "EMBED", "colbert": "EMBED"}, r"embed_func may only have the keys \['dense', 'sparse'\]"
                                                            r", got unknown key\(s\) \['colbert'\]"),
    ("both-none", {"dense": None, "sparse": None}, r"embed_func must be a callable, or a dict .* at least one set, "
                                                   r"got \{'dense': None, 'sparse': None\}"),
    ("empty-dict", {}, r"embed_func must be a callable, or a dict .* at least one set, got \{\}"),
    ("value-not-callable", {"dense": "EMBED", "sparse": 3},
     r"embed_func\['sparse'\] must be a callable or None, got 3"),
]


def _resolve(embed_func: object, stores: Stores) -> object:
    """Put the real embedder where the table says ``"EMBED"``."""
    if isinstance(embed_func, dict):
        return {key: stores.embed if value == "EMBED" else value for key, value in embed_func.items()}
    return embed_func


@pytest.mark.parametrize(("embed_func", "match"), [case[1:] for case in BAD_EMBED_FUNCS],
                         ids=[case[0] for case in BAD_EMBED_FUNCS])
def test_a_bad_embed_func_raises_before_anything_is_stored(kb: KnowledgeDB, stores: Stores, mng: LoaderMng,
                                                           embed_func: object, match: str) -> None:
    files = [str(copy("fake.docx", stores.docs)), str(write(stores.docs / "a.txt", "some text about apples"))]
    with pytest.raises(ParameterError, match=match):
        upload_files(kb, files, mng, _resolve(embed_func, stores))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=match):
        upload_dir(FilesLoadInfo(knowledge=kb, dir_path=str(stores.docs), loader_mng=mng,
                                 embed_func=_resolve(embed_func, stores)))  # type: ignore[arg-type]
    assert kb.get_all_documents() == []
    assert stores.chunk_store.count() == 0 and stores.vector_store.count() == 0


@pytest.mark.parametrize("form", ["callable", "dense-only", "dense-and-none"])
def test_embed_func_forms_that_are_accepted(kb: KnowledgeDB, stores: Stores, mng: LoaderMng, form: str) -> None:
    embed_func = {"callable": stores.embed, "dense-only": {"dense": stores.embed},
                  "dense-and-none": {"dense": stores.embed, "sparse": None}}[form]
    path = write(stores.docs / "a.txt", "some text about apples")
    assert upload_files(kb, [str(path)], mng, embed_func) == []  # type: ignore[arg-type]
    assert [d.document_name for d in kb.get_all_documents()] == ["a.txt"]
    assert stores.vector_store.count() == stores.chunk_store.count() > 0


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("knowledge", None, r"FilesLoadInfo.knowledge must be a KnowledgeDB, got None"),
        ("knowledge", "test", r"FilesLoadInfo.knowledge must be a KnowledgeDB, got 'test'"),
        ("loader_mng", None, r"FilesLoadInfo.loader_mng must be a LoaderMng, got None"),
        ("loader_mng", {".txt": "TextLoader"}, r"FilesLoadInfo.loader_mng must be a LoaderMng"),
        ("dir_path", None, r"FilesLoadInfo.dir_path must be a str or os.PathLike path, got None"),
        ("dir_path", "/no/such/directory", r"FilesLoadInfo.dir_path must be an existing directory"),
        ("embed_func", None, r"embed_func must be a callable, or a dict"),
        ("force", "yes", r"FilesLoadInfo.force must be a bool, got 'yes'"),
        ("load_image", 1, r"FilesLoadInfo.load_image must be a bool, got 1"),
    ],
)
def test_upload_dir_checks_every_field_first(kb: KnowledgeDB, stores: Stores, mng: LoaderMng, field: str,
                                             value: object, match: str) -> None:
    write(stores.docs / "a.txt", "some text about apples")
    fields: dict[str, object] = {"knowledge": kb, "dir_path": str(stores.docs), "loader_mng": mng,
                                 "embed_func": stores.embed, field: value}
    with pytest.raises(ParameterError, match=match):
        upload_dir(FilesLoadInfo(**fields))  # type: ignore[arg-type]
    assert kb.get_all_documents() == [] and stores.chunk_store.count() == 0


def test_upload_files_checks_knowledge_and_loader_mng(kb: KnowledgeDB, stores: Stores, mng: LoaderMng) -> None:
    path = str(write(stores.docs / "a.txt", "some text about apples"))
    with pytest.raises(ParameterError, match=r"knowledge must be a KnowledgeDB, got None"):
        upload_files(None, [path], mng, stores.embed)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"loader_mng must be a LoaderMng, got None"):
        upload_files(kb, [path], None, stores.embed)
    with pytest.raises(ParameterError, match=r"force must be a bool, got 1"):
        upload_files(kb, [path], mng, stores.embed, force=1)  # type: ignore[arg-type]
    assert kb.get_all_documents() == []

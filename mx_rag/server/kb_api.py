# SPDX-License-Identifier: Apache-2.0
"""Knowledge-base management routes (JSON; uploads as multipart/form-data).

=======  ===============================================  ===========================================
GET      /v1/knowledge-bases                              the caller's knowledge bases
POST     /v1/knowledge-bases  ``{"name": "handbook"}``    create one (201); ``"graph": true`` keeps a graph
GET      /v1/knowledge-bases/{kb}                         its documents, chunk counts and sizes
DELETE   /v1/knowledge-bases/{kb}                         delete it with its documents
POST     /v1/knowledge-bases/{kb}/documents               upload files (field ``files``): a job (202)
GET      /v1/knowledge-bases/{kb}/documents               its documents
DELETE   /v1/knowledge-bases/{kb}/documents/{id}          delete one document
GET      /v1/knowledge-bases/{kb}/jobs/{job}              an upload's progress and per-file results
POST     /v1/knowledge-bases/{kb}/retrieve                CoRAG's retrieval API over the knowledge base
=======  ===============================================  ===========================================

POST and DELETE need an admin key, and in an existing knowledge base the admin role of the key's
user (a member reads and asks only): 403 otherwise.

An upload is checked whole before anything is kept: every file must have a supported type and
fit the size limit (streamed to disk, never held in memory); otherwise the answer is 400/413 and
nothing is stored. Ingestion then runs in the background.
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the routes.

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.datastructures import UploadFile

from mx_rag.app.users import Principal
from mx_rag.errors import ParameterError
from mx_rag.server.errors import ApiError
from mx_rag.server.service import KnowledgeService
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["kb_router"]


class CreateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=64)
    graph: StrictBool = False


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: StrictStr = Field(min_length=1, max_length=TEXT_MAX_LEN)
    top_k: StrictInt = Field(default=5, ge=1, le=100)


def kb_router(service: KnowledgeService, principal: Any, admin: Any) -> APIRouter:
    """The routes, acting for ``principal(request)``; those that change something for
    ``admin(request)`` (an admin key, see ``auth``)."""
    router = APIRouter(prefix="/v1/knowledge-bases")
    Who = Annotated[Principal, Depends(principal)]
    Admin = Annotated[Principal, Depends(admin)]
    upload = service.settings.upload

    @router.get("")
    def list_kbs(who: Who) -> dict[str, Any]:
        return {"knowledge_bases": [service.describe(who, name) for name in service.names(who)]}

    @router.post("", status_code=201)
    def create(body: CreateRequest, who: Admin) -> dict[str, Any]:
        return service.create(who, body.name, graph=body.graph)

    @router.get("/{kb}")
    def show(kb: str, who: Who) -> dict[str, Any]:
        return service.describe(who, kb)

    @router.delete("/{kb}")
    def delete(kb: str, who: Admin) -> dict[str, Any]:
        service.delete(who, kb)
        return {"deleted": kb}

    @router.get("/{kb}/documents")
    def documents(kb: str, who: Who) -> dict[str, Any]:
        return {"documents": service.describe(who, kb)["documents"]}

    @router.delete("/{kb}/documents/{document_id}")
    def delete_document(kb: str, document_id: int, who: Admin) -> dict[str, Any]:
        service.delete_document(who, kb, document_id)
        return {"deleted": document_id}

    @router.post("/{kb}/documents", status_code=202)
    async def upload_documents(kb: str, request: Request, who: Admin) -> JSONResponse:
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise ApiError(415, "unsupported_media_type", "upload files as multipart/form-data in the field 'files'")
        service.require_admin(who, kb)  # 404 or 403 before reading the body
        limit = upload.max_file_mb * 1024 * 1024
        form = await request.form(max_files=upload.max_files, max_part_size=limit + 1)
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise ApiError(400, "invalid_argument", "no files in the field 'files'")
        staged: dict[str, Path] = {}
        try:
            for item in files:
                name = service.check_upload_name(item.filename or "")
                if name in staged:
                    raise ParameterError(f"the upload names {name!r} twice")
                if (item.size or 0) > limit:
                    raise ApiError(413, "file_too_large", f"{name!r} is over the limit of {upload.max_file_mb} MiB")
                staged[name] = service.save_upload(who, kb, name, item.file)
        except BaseException:
            for partial in staged.values():
                partial.unlink(missing_ok=True)
            raise
        finally:
            await form.close()
        job = service.start_ingest(who, kb, staged)
        return JSONResponse(job.as_dict(), status_code=202)

    @router.get("/{kb}/jobs/{job_id}")
    def job(kb: str, job_id: str, who: Who) -> dict[str, Any]:
        return service.job(who, kb, job_id).as_dict()

    @router.post("/{kb}/retrieve")
    def retrieve(kb: str, body: RetrieveRequest, who: Who) -> dict[str, Any]:
        from mx_rag.retrievers.sources import RetrieverSource

        docs = RetrieverSource(service.retriever(who, kb, k=body.top_k)).retrieve_strict(body.query, body.top_k)
        return {"document_ids": [d.id for d in docs], "documents": [d.text for d in docs]}

    return router

# SPDX-License-Identifier: Apache-2.0
"""``ParameterErrorInit``: a pydantic model whose invalid arguments raise ``ParameterError``.

Put it first among the bases of a pydantic model (a LangChain retriever, LLM or chat model)::

    class Retriever(ParameterErrorInit, BaseRetriever):
        k: int = 1

so ``Retriever(k="x")`` raises the SDK's ``ParameterError`` (through ``as_parameter_error``: our
own checks inside validators surface unchanged) instead of pydantic's ``ValidationError``. The
constructor takes keyword arguments only, as pydantic models do.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from mx_rag.utils.checks import as_parameter_error

__all__ = ["ParameterErrorInit"]


class ParameterErrorInit:
    """Mixin: a pydantic ``ValidationError`` at construction is raised as ``ParameterError``."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise as_parameter_error(exc) from exc

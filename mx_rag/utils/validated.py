# SPDX-License-Identifier: Apache-2.0
"""Pydantic models with the SDK's checks: ``ParameterErrorInit`` (invalid arguments raise
``ParameterError``), and the field validators written once: ``instance_field``, ``callable_field``.

Put it first among the bases of a pydantic model (a LangChain retriever, LLM or chat model)::

    class Retriever(ParameterErrorInit, BaseRetriever):
        k: int = 1

so ``Retriever(k="x")`` raises the SDK's ``ParameterError`` (through ``as_parameter_error``: our
own checks inside validators surface unchanged) instead of pydantic's ``ValidationError``. The
constructor takes keyword arguments only, as pydantic models do.

A field that must be an instance of a class, or a callable, is checked by one line::

    _check_config = instance_field("llm_config", LLMParameterConfig, optional=True)
    _check_embed = callable_field("embed_func", "a callable taking a list of texts")
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError, field_validator

from mx_rag.utils.checks import as_parameter_error, check_instance, fail

__all__ = ["ParameterErrorInit", "callable_field", "instance_field"]


class ParameterErrorInit:
    """Mixin: a pydantic ``ValidationError`` at construction is raised as ``ParameterError``."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise as_parameter_error(exc) from exc


def instance_field(name: str, cls: type, *, optional: bool = False) -> Any:
    """A "before" validator of the field ``name``: an instance of ``cls`` (or None when ``optional``),
    else ``ParameterError("<name> must be a <cls>, got ...")``. Assign it in the class body."""

    def check(_: type, value: Any) -> Any:
        return None if optional and value is None else check_instance(name, value, cls)

    return field_validator(name, mode="before")(classmethod(check))


def callable_field(name: str, expected: str) -> Any:
    """A "before" validator of the field ``name``: a callable, else ``ParameterError`` saying
    ``expected`` ("a callable taking a list of texts"). Assign it in the class body."""

    def check(_: type, value: Any) -> Any:
        if not callable(value):
            raise fail(name, value, expected)
        return value

    return field_validator(name, mode="before")(classmethod(check))

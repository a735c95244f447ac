# SPDX-License-Identifier: Apache-2.0
"""The original's ``create(**kwargs)`` construction hook, and the registry behind its factories.

``Creatable.create(**kwargs)`` is the class's constructor called with keyword arguments; a missing
required argument raises ``ParameterError`` naming it (the original logged and returned None).
``create_from(registry, kind_name, kwargs)`` picks a class by a type name (``embedding_type``,
``similarity_type``) and calls its ``create``; the classes are imported on first use, so a factory
module imports no torch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import fail

__all__ = ["Creatable", "Factory", "create_from"]

C = TypeVar("C", bound="Creatable")


class Creatable:
    """Adds ``create(**kwargs)``: the constructor, keyword arguments only."""

    @classmethod
    def create(cls: type[C], **kwargs: Any) -> C:
        """A new instance from keyword arguments (the parameters of the class itself)."""
        signature = inspect.signature(cls.__init__)
        params = list(signature.parameters.values())[1:]  # drop self
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        named = {p.name for p in params if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                           inspect.Parameter.VAR_KEYWORD)}
        unknown = sorted(set(kwargs) - named)
        if unknown and not takes_any:
            raise ParameterError(f"{cls.__name__}.create got unknown parameters {unknown}; it takes {sorted(named)}")
        missing = [p.name for p in params if p.default is inspect.Parameter.empty
                   and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
                   and p.name not in kwargs]
        if missing:
            raise ParameterError(f"{cls.__name__}.create needs the parameter {missing[0]!r}")
        return cls(**kwargs)


def create_from(registry: Mapping[str, str], kind_name: str, kwargs: dict[str, Any]) -> Any:
    """``Class.create(**rest)`` for the class that ``kwargs[kind_name]`` names in ``registry``.

    ``registry`` maps a type name to ``"module.path:ClassName"``.
    """
    if kind_name not in kwargs:
        raise ParameterError(f"{kind_name} is required, one of {sorted(registry)}")
    rest = dict(kwargs)
    kind = rest.pop(kind_name)
    if not isinstance(kind, str) or kind not in registry:
        raise fail(kind_name, kind, f"one of {sorted(registry)}")
    module_name, _, class_name = registry[kind].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.create(**rest)


class Factory:
    """Base of the SDK's factories (``EmbeddingFactory``, ``RerankerFactory``): one keyword (the
    subclass's ``KIND``, such as ``embedding_type``) names the class, the other keywords go to its
    ``create`` (its constructor). The classes are imported on first use, so a factory module
    imports no torch.

    Raises (from the subclass's ``create_*``):
        ParameterError: the type keyword is missing or unknown, or the class refuses an argument.
    """

    KIND: ClassVar[str]

    @classmethod
    def _create(cls, registry: Mapping[str, str], kwargs: dict[str, Any]) -> Any:
        return create_from(registry, cls.KIND, kwargs)

# SPDX-License-Identifier: Apache-2.0
"""The settings moved to ``mx_rag.app.settings``; these names stay importable from here."""

from mx_rag.app.settings import (
    CHAIN_TYPES,
    CONFIG_ENV,
    DEFAULT_CONFIG,
    CacheSettings,
    ChainSettings,
    EmbeddingSettings,
    GraphSettings,
    LLMSettings,
    ServerSettings,
    StoreSettings,
    UploadSettings,
    load_settings,
)

__all__ = [
    "CHAIN_TYPES",
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "CacheSettings",
    "ChainSettings",
    "EmbeddingSettings",
    "GraphSettings",
    "LLMSettings",
    "ServerSettings",
    "StoreSettings",
    "UploadSettings",
    "load_settings",
]

# SPDX-License-Identifier: Apache-2.0
"""``ServerSettings``: what ``mxrag``, ``mxrag serve`` and ``mxrag mcp`` run with, from ``mxrag.toml`` and
the environment.

Every setting has an offline default (the embedded LLM, multilingual-e5-small, FAISS + SQLite in ``.mxrag``).
Sources, strongest first: arguments given in code (the command's options), environment
variables ``MXRAG_<SECTION>__<NAME>`` (e.g. ``MXRAG_LLM__API_KEY``, ``MXRAG_DATA_DIR``), then the
TOML file (``mxrag.toml`` in the working directory, or ``MXRAG_CONFIG``)::

    data_dir = "/srv/mxrag"
    [llm]
    url = "http://127.0.0.1:8080/v1"
    model = "qwen2.5"
    [stores]
    postgres_url = "postgresql://mxrag@db/mxrag"
    milvus_url = "http://milvus:19530"
    [chain]
    k = 5
    type = "parallel"

Secrets (the LLM key, database URLs that may hold passwords) are ``SecretStr``: they are masked in
``show()`` and in every log line, and never written back to a file. Settings are immutable.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from mx_rag.app.chains import CHAIN_TYPES, ChainType
from mx_rag.errors import ParameterError
from mx_rag.utils.checks import as_parameter_error

__all__ = ["CHAIN_TYPES", "ChainType", "ServerSettings", "load_settings"]
CONFIG_ENV = "MXRAG_CONFIG"
DEFAULT_CONFIG = "mxrag.toml"
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]*@")
_config_file: ContextVar[str | None] = ContextVar("mxrag_config_file", default=None)  # load_settings(config=)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMSettings(_Section):
    url: str | None = Field(
        default=None, description="OpenAI-compatible base or chat URL; None starts the embedded LLM"
    )
    model: str = Field(default="default", min_length=1, max_length=256)
    api_key: SecretStr | None = None
    timeout: float = Field(default=300.0, gt=0, le=3600)
    max_tokens: int = Field(default=512, ge=1, le=100_000)
    temperature: float = Field(default=0.0, ge=0, le=2)


class EmbeddingSettings(_Section):
    model: str | None = Field(
        default=None,
        description="a path or built-in name; None: the model the data folder's knowledge bases were built with, "
        "else multilingual-e5-small",
    )


class StoreSettings(_Section):
    postgres_url: SecretStr | None = Field(default=None, description="chunks in PostgreSQL instead of SQLite")
    registry_url: SecretStr | None = Field(
        default=None,
        description="knowledge bases, API keys and upload jobs in PostgreSQL instead of data_dir's sql.db "
        "(servers on several machines share it; usually the same URL as postgres_url)",
    )
    milvus_url: str | None = Field(default=None, description="vectors in Milvus instead of FAISS")
    milvus_token: SecretStr | None = Field(default=None, description="Milvus credentials (user:password or a token)")
    milvus_collection: str = Field(default="mxrag_chunks", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


class ChainSettings(_Section):
    # Chosen by measurement (bench/retrieval_defaults.py, docs/benchmarks.md "Retrieval defaults"): with
    # multilingual-e5-small, dense + keyword fused with dense ranks counted twice and one subject link
    # finds 0.925 of HotpotQA's supporting paragraphs at k=5 (dense alone 0.87), MuSiQue 0.628 and 28 of
    # 30 Chinese questions (dense 25); k=5 finds 6.5 to 8 points more than k=3. dense_weight and
    # subject_links are HybridRetriever's defaults (a test holds them equal).
    type: ChainType = "hybrid"
    k: int = Field(default=5, ge=1, le=100)
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    reranker: str | None = Field(default=None, description="a local reranker model path or name; None: no reranking")
    dense_weight: float = Field(
        default=2.0, ge=0.1, le=10,
        description="hybrid chain: how much more a dense rank counts than a keyword rank (1 for an English-only "
        "embedding model over Chinese documents, whose dense ranking is noise)",
    )  # fmt: skip
    subject_links: int = Field(
        default=1, ge=0, le=100,
        description="hybrid chain: results whose named entities are followed to the chunks about them; 0: off",
    )  # fmt: skip


class GraphSettings(_Section):
    extractor: Literal["offline", "llm"] = Field(
        default="offline", description="how graph knowledge bases find entities: offline (spaCy/jieba) or the LLM"
    )
    store: Literal["networkx", "postgres"] = Field(
        default="networkx", description="where a new graph knowledge base keeps its graph: a networkx file in the data "
        "folder, or PostgreSQL at [stores] postgres_url (needed to build it on a Ray cluster)"
    )


class UploadSettings(_Section):
    max_file_mb: int = Field(default=100, ge=1, le=100)
    max_files: int = Field(default=100, ge=1, le=1000)
    chunk_size: int = Field(default=750, ge=50, le=100_000)
    chunk_overlap: int = Field(default=150, ge=0, le=10_000)
    job_lease_s: float = Field(
        default=30.0, ge=1, le=3600,
        description="an upload job whose worker stopped renewing its lease this long is marked failed",
    )  # fmt: skip

    @model_validator(mode="after")
    def _overlap_below_size(self) -> UploadSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ParameterError(f"upload.chunk_overlap must be in [0, {self.chunk_size - 1}] (below upload.chunk_size "
                                 f"= {self.chunk_size}), got {self.chunk_overlap}")
        return self


class IngestSettings(_Section):
    ray_address: str | None = Field(
        default=None, min_length=1, max_length=1024,
        description="ingest on this Ray cluster (\"auto\": the one this machine belongs to), into PostgreSQL and "
        "Milvus; None: in this process",
    )  # fmt: skip
    ray_embedders: int = Field(default=2, ge=1, le=1024, description="embedding actors on the cluster")
    ray_embed_cpus: float = Field(default=1.0, ge=0.01, le=256, description="CPUs each embedding actor reserves (a "
                                  "fraction lets actors that wait on a remote model server share a core)")
    ray_batch_chunks: int = Field(default=256, ge=1, le=100_000, description="chunks per embedding call and write")
    ray_min_files: int = Field(default=30, ge=1, le=100_000, description="with ray_address, a server upload job of at "
                               "least this many files runs on the cluster (its files sent with the tasks); a "
                               "smaller one in the server")
    ray_extractors: int = Field(default=2, ge=1, le=1024, description="graph knowledge bases: entity extraction "
                                "actors on the cluster")
    ray_extract_cpus: float = Field(default=1.0, ge=0.01, le=256, description="CPUs each extraction actor "
                                    "reserves")


class CacheSettings(_Section):
    enabled: bool = Field(default=False, description="answer repeated questions from a cache, per user and "
                          "knowledge base, cleared for a knowledge base when its documents change")
    similarity_threshold: float | None = Field(
        default=None, ge=0, le=1, description="None: the same question only; else similar questions whose "
        "embeddings' cosine similarity is at least this hit too")
    size: int = Field(default=1000, ge=1, le=100_000, description="answers kept per cache")


class ServerSettings(BaseSettings):
    """The settings of one server (see the module docstring for the sources)."""

    model_config = SettingsConfigDict(
        env_prefix="MXRAG_", env_nested_delimiter="__", extra="forbid", frozen=True, toml_file=DEFAULT_CONFIG
    )

    data_dir: Path = Path(".mxrag")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    stores: StoreSettings = StoreSettings()
    chain: ChainSettings = ChainSettings()
    upload: UploadSettings = UploadSettings()
    graph: GraphSettings = GraphSettings()
    cache: CacheSettings = CacheSettings()
    ingest: IngestSettings = IngestSettings()
    max_body_mb: int = Field(default=16, ge=1, le=1024, description="largest JSON request body")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = _config_file.get() or os.environ.get(CONFIG_ENV, DEFAULT_CONFIG)
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=toml_path)

    def show(self) -> str:
        """The effective settings as TOML-like lines, secrets masked."""
        lines: list[str] = []
        sections = []
        for name, value in self:
            if isinstance(value, BaseModel):
                sections.append((name, value))
            else:
                lines.append(f"{name} = {_shown(value)}")
        for name, section in sections:
            lines.append(f"[{name}]")
            lines.extend(f"{key} = {_shown(value)}" for key, value in section)
        return "\n".join(lines)

    @property
    def local_only(self) -> bool:
        """Whether the server listens on this machine only."""
        return self.host in ("127.0.0.1", "localhost", "::1")


def _shown(value: Any) -> str:
    if isinstance(value, SecretStr):
        return '"**********"'
    if value is None:
        return "(unset)"
    if isinstance(value, str):  # a URL's password too (https://user:PASS@host)
        masked = _URL_PASSWORD.sub(r"\1**********@", value)
        return f'"{masked}"'
    if isinstance(value, Path):
        return f'"{value}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


def load_settings(config: str | Path | None = None, **overrides: Any) -> ServerSettings:
    """Settings from ``config`` (or ``$MXRAG_CONFIG`` / ``./mxrag.toml`` when present), the
    environment, then ``overrides`` (None values are ignored).

    Raises:
        ParameterError: a setting is invalid, or ``config`` names a missing file.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    if config is not None and not Path(config).is_file():
        raise ParameterError(f"config file {str(config)!r} does not exist")
    token = _config_file.set(None if config is None else str(config))
    try:
        return ServerSettings(**given)
    except ValidationError as exc:
        raise as_parameter_error(exc, ServerSettings) from exc
    finally:
        _config_file.reset(token)

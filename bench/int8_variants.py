# SPDX-License-Identifier: Apache-2.0
"""int8 on a CPU: ONNX Runtime's dynamic quantisation against torch's, next to float32, on one model.

The same texts (mx_rag's chunks of ``bench/ingest.py``'s text corpus, with the model's document
prefix) go through the same loop (``bench/ingest.py``'s ``bare_encode``: sorted by token count,
batches of 8, mean pooling, unit length) with three models, taking turns for ``--rounds`` rounds:

* ``torch_fp32``: transformers ``AutoModel`` in float32 (the ``bare_model`` line);
* ``torch_int8``: the same after ``torch.ao.quantization.quantize_dynamic`` (qint8 ``Linear``);
* ``onnx_int8``: the int8 ONNX file mx_rag builds (``mx_rag.embedding.local.int8``), in ONNX Runtime.

torch and ONNX Runtime get ``--threads`` threads (default 1). Output: JSON lines: an environment
line, one line per run (chunks/s), and per variant its median chunks/s, its ratio to float32 in the
same run and the cosine of its vectors to float32's (median, minimum). Run::

    flock /tmp/mxrag-bench.lock .venv/bin/python bench/int8_variants.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import emit, environment, loadavg, loadavg_1m, package_version, pin_torch_threads
from ingest import BARE_BATCH, bare_encode, corpus_files, model_spec, mx_rag_chunk_texts

BENCH = "int8_variants"
VARIANTS = ("torch_fp32", "torch_int8", "onnx_int8")


def models(spec: dict[str, Any], threads: int) -> dict[str, Any]:
    import torch
    import transformers

    from mx_rag.embedding.local.int8 import Int8Encoder, ensure_int8_model

    fp32 = transformers.AutoModel.from_pretrained(spec["model_dir"], local_files_only=True).eval()
    base = transformers.AutoModel.from_pretrained(spec["model_dir"], local_files_only=True).eval()
    int8 = torch.ao.quantization.quantize_dynamic(base, {torch.nn.Linear}, dtype=torch.qint8)
    onnx = Int8Encoder(ensure_int8_model(Path(spec["model_dir"])), threads)
    return {"torch_fp32": fp32, "torch_int8": int8, "onnx_int8": onnx}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default="multilingual-e5-small", help="a built-in name or a model directory")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the quick text corpus (6 files)")
    args = parser.parse_args(argv)
    import warnings

    import numpy as np
    import transformers

    warnings.filterwarnings("ignore")
    threads = pin_torch_threads(args.threads)
    spec = model_spec(args.model)
    texts = [spec["prefix"] + t for t in mx_rag_chunk_texts(corpus_files("text", args.quick)[1])]
    emit(environment(BENCH, "kind", platform=platform.platform(), cpu_count=os.cpu_count(), loadavg=loadavg(),
                     threads=threads, texts=len(texts), **spec, torch=package_version("torch"),
                     onnxruntime=package_version("onnxruntime")))
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["model_dir"], local_files_only=True)
    encoders = models(spec, threads)
    speeds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    vectors: dict[str, Any] = {}
    for turn in range(args.rounds):
        for name in VARIANTS[turn % 3:] + VARIANTS[:turn % 3]:
            bare_encode(tokenizer, encoders[name], ["warm up"], BARE_BATCH, spec["max_length"])
            start = time.perf_counter()
            vectors[name] = np.asarray(bare_encode(tokenizer, encoders[name], texts, BARE_BATCH, spec["max_length"]))
            speeds[name].append(len(texts) / (time.perf_counter() - start))
            emit({"bench": BENCH, "kind": "run", "variant": name, "round": turn + 1,
                  "chunks_per_s": round(speeds[name][-1], 2), "loadavg_1m": loadavg_1m()})
    base = statistics.median(speeds["torch_fp32"])
    for name in VARIANTS:
        cosine = (vectors[name] * vectors["torch_fp32"]).sum(axis=1)
        speed = statistics.median(speeds[name])
        emit({"bench": BENCH, "kind": "median", "variant": name, "chunks_per_s": round(speed, 2),
              "over_torch_fp32": round(speed / base, 3),
              "cosine_median": round(float(np.median(cosine)), 4), "cosine_min": round(float(cosine.min()), 4),
              "loadavg_1m": loadavg_1m()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

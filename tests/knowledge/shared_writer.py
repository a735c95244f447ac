"""Child process for test_shared_folder.py: add documents to a shared knowledge-base folder.

Usage: python -m tests.knowledge.shared_writer ROOT TAG COUNT
Writes COUNT documents named <TAG>-<i>.txt, each with 18 chunks naming the document, then exits.
"""

import sys
from pathlib import Path

from tests.knowledge.conftest import open_stores, write


def chunk_texts(tag: str, i: int) -> list[str]:
    return [f"{tag} document {i} chunk {j}: " + f"{tag}{i} marker{j} " * 8 for j in range(18)]


def main() -> None:
    root, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    stores = open_stores(root)
    kb = stores.open()
    print("ready", flush=True)
    sys.stdin.readline()  # the parent starts both writers at once
    for i in range(count):
        path = write(stores.docs / f"{tag}-{i}.txt", f"{tag} {i}")
        kb.add_file(path, chunk_texts(tag, i), stores.embed)
    print("done", flush=True)


if __name__ == "__main__":
    main()

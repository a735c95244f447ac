"""Child process for test_crash.py: add and delete documents in a loop until killed."""

import sys
from pathlib import Path

from tests.knowledge.conftest import open_stores, write

root = Path(sys.argv[1])
stores = open_stores(root)
kb = stores.open()
print("ready", flush=True)
i = 0
while True:
    path = write(stores.docs / f"doc{i}.txt", "x")
    kb.add_file(path, [f"chunk {j} of document {i} " * 20 for j in range(50)], stores.embed)
    if i % 3 == 2:
        kb.delete_file(str(stores.docs / f"doc{i - 1}.txt"))
    i += 1

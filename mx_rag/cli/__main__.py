# SPDX-License-Identifier: Apache-2.0
"""``python -m mx_rag.cli``: the same as the ``mxrag`` script."""

from mx_rag.cli.main import main

if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""The ``mxrag`` command line (``mx_rag.cli.main``); run it as ``mxrag`` or ``python -m mx_rag.cli``."""

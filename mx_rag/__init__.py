# SPDX-License-Identifier: Apache-2.0
"""mx_rag: a hardware-agnostic RAG SDK.

Importing this package is cheap: it imports no torch, faiss, transformers or HTTP client.
Sub-packages import their heavy dependencies when first used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

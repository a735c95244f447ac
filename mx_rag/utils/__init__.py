# SPDX-License-Identifier: Apache-2.0
"""Shared utilities: ``ClientParam`` (connection settings) and ``Lang``."""

from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import Lang

__all__ = ["ClientParam", "Lang"]

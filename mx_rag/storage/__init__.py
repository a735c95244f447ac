# SPDX-License-Identifier: Apache-2.0
"""Stores: vector indexes (``vectorstore``) and chunk databases (``document_store``)."""

# SPDX-License-Identifier: Apache-2.0
"""Tools around the SDK: ``finetune`` (embedding-model fine-tuning data, training and evaluation)."""

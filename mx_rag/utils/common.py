# SPDX-License-Identifier: Apache-2.0
"""Limits shared across the SDK (the original's numbers) and the ``Lang`` enum."""

from __future__ import annotations

from enum import Enum

KB = 1024
MB = 1024 * KB
GB = 1024 * MB

TEXT_MAX_LEN = 1_000_000          # query text of chains and retrievers
MAX_PROMPT_LENGTH = MB            # prompts, templates, image-generation prompts
LLM_TEXT_MAX_LEN = 4 * MB         # Text2TextLLM query and each system-message value
MAX_IMAGE_CONTENT_LEN = 10 * MB   # base64 source image of Img2ImgMultiModel
MAX_TOKEN_NUM = 100_000
INT_32_MAX = 2**31 - 1
MAX_TOP_K = 10_000
MAX_URL_LENGTH = 2048
MAX_MODEL_NAME_LENGTH = 128
MAX_DEVICE_ID = 63
MAX_BATCH_SIZE = 1024
MAX_PATH_LENGTH = 1024
MAX_FILE_SIZE = 100 * MB

# sys_messages limits (list length, keys per dict, key length, value length)
MAX_SYS_MESSAGES = 16
MAX_MESSAGE_KEYS = 16
MAX_MESSAGE_KEY_LEN = 16
MAX_ROLE_LEN = 16

IMAGE_OUTPUT_FORMATS = ("png", "jpeg", "jpg", "webp")
IMAGE_SIZE_PATTERN = r"^\d{1,5}\*\d{1,5}$"


class Lang(Enum):
    """Document language, used by loaders and graph RAG prompts."""

    EN = "en"
    CH = "ch"

# SPDX-License-Identifier: Apache-2.0
"""Supervised fine-tuning data for :class:`~mx_rag.corag.subquery_finetuner.SubqueryFineTuner`.

* :func:`load_chat_samples` reads the JSONL file written by ``SampleGenerator``: one sample a
  line, either ``{"type": "subquery_generation", "messages": [{"role": ..., "content": ...}, ...]}``
  or a bare list of messages.
* :func:`encode_chat` renders a conversation with the tokenizer's own chat template (ChatML when
  the tokenizer has none), tokenizes it and builds the labels: the tokens of every assistant
  message (its content and the template's end-of-turn token) are supervised, everything else
  (system and user turns, the assistant header, padding) is ``-100``.
* :class:`ChatCollator` pads a batch on the right (inputs with the pad id, labels with ``-100``).

Nothing here imports torch at module import time.

Example:
    >>> samples = load_chat_samples("corag_train_samples.jsonl")  # doctest: +SKIP
    >>> encoded = encode_chat(tokenizer, samples[0], max_len=2048)  # doctest: +SKIP
    >>> encoded.input_ids[:3], encoded.labels[:3]  # doctest: +SKIP
    ([1, 9690, 198], [-100, -100, -100])
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError

__all__ = ["CHATML_TEMPLATE", "IGNORE_INDEX", "ChatCollator", "EncodedChat", "encode_chat", "load_chat_samples"]

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
MAX_LINE_CHARS = 10_000_000
# Used when the tokenizer has no chat template (the reference SDK always renders this way).
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_ROLE_ALIASES = {"observation": "system"}  # the reference's collator maps this role to system

Message = dict[str, str]


def _messages_of(record: Any, where: str) -> tuple[str | None, list[Message]]:
    """(sample type, normalised messages) of one JSONL record; ParameterError if malformed."""
    sample_type: str | None = None
    if isinstance(record, dict):
        raw = record.get("messages")
        kind = record.get("type")
        sample_type = kind if isinstance(kind, str) else None
    else:
        raw = record
    if not isinstance(raw, list) or not raw:
        raise ParameterError(f"{where}: expected a non-empty list of messages or an object with a 'messages' list")
    messages: list[Message] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content"), str):
            raise ParameterError(f"{where}: message {index} must be an object with str 'role' and 'content'")
        role: str = message["role"]
        messages.append({"role": _ROLE_ALIASES.get(role, role), "content": message["content"]})
    return sample_type, messages


def load_chat_samples(path: str | os.PathLike[str], sample_types: Sequence[str] | None = None,
                      *, name: str = "train_file") -> list[list[Message]]:
    """The conversations of a JSONL training file, in file order.

    Args:
        path: a JSONL file; blank lines are skipped.
        sample_types: keep only the samples whose ``type`` is listed (samples without a type are
            kept only when this is None, the default, which keeps everything).
        name: the parameter name used in error messages.

    Raises:
        ParameterError: the file is missing or unreadable, a line is not JSON or not a sample,
            or no sample is left.

    Example:
        >>> load_chat_samples("train.jsonl", sample_types=["subquery_generation"])  # doctest: +SKIP
        [[{'role': 'user', 'content': '...'}, {'role': 'assistant', 'content': 'SubQuery: ...'}], ...]
    """
    file = Path(path)
    if not file.is_file():
        raise ParameterError(f"{name} {str(file)!r} does not exist or is not a file (expected a JSONL file)")
    wanted = set(sample_types) if sample_types is not None else None
    samples: list[list[Message]] = []
    skipped = 0
    try:
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{name} {str(file)!r} line {number}"
                if len(line) > MAX_LINE_CHARS:
                    raise ParameterError(f"{where}: longer than {MAX_LINE_CHARS} characters")
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise ParameterError(f"{where}: not valid JSON ({exc})") from None
                sample_type, messages = _messages_of(record, where)
                if wanted is not None and sample_type not in wanted:
                    skipped += 1
                    continue
                samples.append(messages)
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{name} {str(file)!r} cannot be read: {exc}") from exc
    if not samples:
        detail = f" of types {sorted(wanted)} ({skipped} of other types)" if wanted is not None else ""
        raise ParameterError(f"{name} {str(file)!r} holds no training samples{detail}")
    return samples


@dataclass(frozen=True)
class EncodedChat:
    """One tokenized conversation: ``labels[i]`` is ``input_ids[i]`` or ``-100`` (not supervised)."""

    input_ids: list[int]
    labels: list[int]

    @property
    def supervised(self) -> int:
        """How many tokens carry a label."""
        return sum(1 for label in self.labels if label != IGNORE_INDEX)


def _render(tokenizer: Any, messages: list[Message], template: str | None, generation_prompt: bool) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                         chat_template=template)
    return str(text)


def assistant_spans(tokenizer: Any, messages: list[Message]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans the loss is computed on.

    A span covers one assistant message as the template renders it: its content and the
    end-of-turn token, without the assistant header and without trailing whitespace. It is found
    by rendering the conversation up to the message (with the generation prompt, i.e. the header)
    and up to and including it; templates that rewrite earlier turns fall back to locating the
    content text itself.
    """
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    full = _render(tokenizer, messages, template, False)
    eos = getattr(tokenizer, "eos_token", None) or ""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:index], template, True) if index else ""
        through = _render(tokenizer, messages[: index + 1], template, False)
        if index and through.startswith(before) and full.startswith(through) and len(before) >= cursor:
            start, end = len(before), len(before) + len(through[len(before):].rstrip())
        else:
            start = full.find(message["content"], cursor)
            if start < 0:
                raise ParameterError(f"the chat template dropped assistant message {index}; cannot build labels")
            end = start + len(message["content"])
            if eos and full.startswith(eos, end):
                end += len(eos)
        if end > start:
            spans.append((start, end))
        cursor = max(cursor, end)
    return full, spans


def _tokenize_with_offsets(tokenizer: Any, text: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[bool]]:
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoding["input_ids"])
    mask = [any(a <= start < b for a, b in spans) for start, _ in encoding["offset_mapping"]]
    return ids, mask


def _tokenize_by_segment(tokenizer: Any, text: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[bool]]:
    """For tokenizers without offsets: tokenize the supervised and other pieces separately."""
    ids: list[int] = []
    mask: list[bool] = []
    cursor = 0
    pieces: list[tuple[str, bool]] = []
    for start, end in spans:
        pieces += [(text[cursor:start], False), (text[start:end], True)]
        cursor = end
    pieces.append((text[cursor:], False))
    for piece, supervised in pieces:
        if piece:
            piece_ids = list(tokenizer(piece, add_special_tokens=False)["input_ids"])
            ids += piece_ids
            mask += [supervised] * len(piece_ids)
    return ids, mask


def encode_chat(tokenizer: Any, messages: list[Message], max_len: int, *,
                use_offsets: bool | None = None) -> EncodedChat | None:
    """Tokenize one conversation with assistant-only labels, right-truncated to ``max_len``.

    Returns None when no supervised token is left (no assistant message, or truncation cut it off).

    Args:
        tokenizer: a transformers tokenizer.
        messages: ``[{"role": ..., "content": ...}, ...]``.
        max_len: the maximum number of tokens.
        use_offsets: map spans to tokens through the offsets of a fast tokenizer (default when
            available) or tokenize the pieces separately (``False``; slow tokenizers).

    Example:
        >>> enc = encode_chat(tok, [{"role": "user", "content": "Q?"},
        ...                         {"role": "assistant", "content": "SubQuery: A"}], 128)  # doctest: +SKIP
        >>> tok.decode([t for t in enc.labels if t != -100])  # doctest: +SKIP
        'SubQuery: A<|im_end|>'
    """
    text, spans = assistant_spans(tokenizer, messages)
    if not spans:
        return None
    offsets = bool(getattr(tokenizer, "is_fast", False)) if use_offsets is None else use_offsets
    ids, mask = (_tokenize_with_offsets if offsets else _tokenize_by_segment)(tokenizer, text, spans)
    ids, mask = ids[:max_len], mask[:max_len]
    if not any(mask):
        return None
    return EncodedChat(input_ids=ids, labels=[t if m else IGNORE_INDEX for t, m in zip(ids, mask, strict=True)])


class ChatCollator:
    """Pads :class:`EncodedChat` features (or dicts with ``input_ids`` and ``labels``) on the right.

    Example:
        >>> batch = ChatCollator(pad_token_id=2)([EncodedChat([5, 6], [-100, 6])])  # doctest: +SKIP
        >>> sorted(batch)  # doctest: +SKIP
        ['attention_mask', 'input_ids', 'labels']
    """

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None) -> None:
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: Sequence[Any]) -> dict[str, Any]:
        import torch

        rows = [(f.input_ids, f.labels) if isinstance(f, EncodedChat) else (f["input_ids"], f["labels"])
                for f in features]
        width = max(len(ids) for ids, _ in rows)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for row, (ids, labs) in enumerate(rows):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            labels[row, : len(labs)] = torch.tensor(labs, dtype=torch.long)
            attention[row, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}

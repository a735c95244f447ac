# SPDX-License-Identifier: Apache-2.0
"""Token-to-sentence pooling (the sentence-transformers modes), computed in float32."""

from __future__ import annotations

import torch


def pool(hidden: torch.Tensor, mask: torch.Tensor, method: str) -> torch.Tensor:
    """Pool ``hidden`` ``[batch, tokens, dim]`` over the tokens where ``mask`` is 1, then L2-normalise.

    ``lasttoken`` finds the last real token whether the batch is padded on the right or the left.
    """
    hidden = hidden.float()
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    if method == "cls":
        pooled = hidden[:, 0]
    elif method == "mean":
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    elif method == "max":
        pooled = hidden.masked_fill(weights == 0, torch.finfo(hidden.dtype).min).amax(dim=1)
    elif method == "lasttoken":
        last = mask.shape[1] - 1 - mask.flip(dims=[1]).long().argmax(dim=1)
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    else:
        raise ValueError(f"unknown pooling method {method!r}")
    return torch.nn.functional.normalize(pooled, p=2, dim=-1)

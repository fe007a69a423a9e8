"""The generate example's causal transformer of ``_text_model.Block`` s (imports torch).

:meth:`Decoder.step` runs new tokens against a :class:`Cache` of the earlier ones' keys and values
(one decode step costs one token's work); :meth:`Decoder.forward` runs the whole sequence again, as
a model without a cache does at every step.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._text_model import Block


class Cache:
    """Keys and values of every layer, preallocated for ``length`` positions; ``filled`` of them hold
    tokens. Written in place, so a decode step does not copy the cache."""

    def __init__(self, layers: int, batch: int, heads: int, length: int, head_dim: int, like):
        shape = (batch, heads, length, head_dim)
        self.k = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in range(layers)]
        self.v = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in range(layers)]
        self.filled = 0


class Decoder(nn.Module):
    """Token + position embeddings, ``layers`` causal blocks, a tied-size linear head to the vocabulary.

    Sequences are left-padded: ``valid`` (bool, batch x positions) is False on padding, which no
    other query attends to; a position's embedding counts its real tokens only.
    """

    def __init__(self, vocab: int, max_len: int, d_model: int, layers: int, heads: int, ff: int):
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, ff) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def new_cache(self, batch: int, length: int) -> Cache:
        d = self.tok.weight.shape[1]
        return Cache(len(self.blocks), batch, self.heads, length, d // self.heads, self.tok.weight)

    def forward(self, ids, valid):
        """Logits of the last position, the whole sequence run (no cache)."""
        return self._run(ids, valid, None)

    def step(self, ids, valid, cache: Cache):
        """Logits of the last position of ``ids``, the new tokens, run against ``cache`` (``valid``
        covers every position so far); the cache then holds them too."""
        out = self._run(ids, valid, cache)
        cache.filled += ids.shape[1]
        return out

    def _run(self, ids, valid, cache: Cache | None):
        n, total = ids.shape[1], valid.shape[1]
        pos = (valid.long().cumsum(1) - 1).clamp(min=0)[:, total - n :]
        x = self.tok(ids) + self.pos(pos.clamp(max=self.max_len - 1))
        query_at = torch.arange(total - n, total, device=ids.device)[:, None]
        key_at = torch.arange(total, device=ids.device)[None, :]
        # a padding query sees itself: no row all masked (NaN)
        own = (key_at == query_at)[None, None]
        mask = (key_at <= query_at)[None, None] & (valid[:, None, None, :] | own)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache, i)
        return self.head(self.norm(x[:, -1]))

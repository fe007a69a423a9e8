"""The text example's transformer encoder (imports torch; loaded by ``text.build`` only), written
out so every projection is an ``nn.Linear`` (int8 dynamic quantization then covers attention too)
and the trace shows plain ``aten::linear`` and ``scaled_dot_product_attention``."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + mlp(norm(x)); with a ``cache`` (the generate
    example's ``_causal_model.Cache``) this step's keys and values are appended to ``layer``'s and
    attention runs over all of them."""

    def __init__(self, d_model: int, heads: int, ff: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.ff1, self.ff2 = nn.Linear(d_model, ff), nn.Linear(ff, d_model)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor, cache=None, layer: int = 0):
        b, n, d = x.shape
        q, k, v = (
            self.qkv(self.norm1(x))
            .view(b, n, 3, self.heads, d // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        if cache is not None:
            end = cache.filled + n
            cache.k[layer][:, :, cache.filled : end] = k.to(cache.k[layer].dtype)
            cache.v[layer][:, :, cache.filled : end] = v.to(cache.v[layer].dtype)
            k, v = cache.k[layer][:, :, :end].to(q.dtype), cache.v[layer][:, :, :end].to(q.dtype)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class Encoder(nn.Module):
    """Token + position embeddings, ``layers`` blocks, a linear head on the first ([CLS]) position:
    ``forward(ids, mask)``, both (batch, seq), mask True on real tokens: logits (batch, labels)."""

    def __init__(
        self, vocab: int, max_len: int, d_model: int, layers: int, heads: int, ff: int, labels: int
    ):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, ff) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, labels)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos.weight[: ids.shape[1]]
        attn_mask = mask[:, None, None, :]
        for block in self.blocks:
            x = block(x, attn_mask)
        return self.head(self.norm(x[:, 0]))

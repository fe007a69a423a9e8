"""The text and generate examples' transformers (imports torch; loaded by their ``build`` only).

Every projection is an ``nn.Linear``, so int8 dynamic quantization covers attention too and the
trace shows plain ``aten::linear`` and ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import ConfigError


class Block(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + mlp(norm(x)); with a :class:`Cache` this
    step's keys and values are appended to ``layer``'s and attention runs over all of them."""

    def __init__(self, d_model: int, heads: int, ff: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.ff1, self.ff2 = nn.Linear(d_model, ff), nn.Linear(ff, d_model)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor, cache=None, layer: int = 0):
        q, k, v = self.qkv_heads(x)
        if cache is not None:
            end = cache.filled + x.shape[1]
            cache.k[layer][:, :, cache.filled : end] = k.to(cache.k[layer].dtype)
            cache.v[layer][:, :, cache.filled : end] = v.to(cache.v[layer].dtype)
            k, v = cache.k[layer][:, :, :end].to(q.dtype), cache.v[layer][:, :, :end].to(q.dtype)
        return self.attend(x, q, k, v, attn_mask)

    def qkv_heads(self, x: torch.Tensor):
        """Queries, keys and values of ``norm1(x)``, each (batch, heads, positions, head_dim)."""
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads)
        return qkv.permute(2, 0, 3, 1, 4)

    def attend(self, x: torch.Tensor, q, k, v, attn_mask: torch.Tensor) -> torch.Tensor:
        """``x`` plus the attention of ``q`` over ``k``, ``v``, then plus the MLP of its norm."""
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.proj(a.transpose(1, 2).reshape(x.shape))
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


class Cache:
    """Keys and values of every layer, preallocated for ``length`` positions; ``filled`` of them hold
    tokens. Written in place, so a decode step does not copy the cache."""

    def __init__(self, layers: int, batch: int, heads: int, length: int, head_dim: int, like):
        shape = (batch, heads, length, head_dim)
        self.k = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in range(layers)]
        self.v = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in range(layers)]
        self.filled = 0


class Decoder(nn.Module):
    """Token + position embeddings, ``layers`` causal blocks, a linear head to the vocabulary.
    Sequences are left-padded: ``valid`` (bool, batch x positions) is False on padding, which no
    other query attends to; a position's embedding counts its real tokens only."""

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


class GenerateSteps:
    """The step API a continuous batcher (``batching.continuous_live``) drives: ``max_num_seqs``
    sequences of at most ``max_len`` tokens, each a slot of one preallocated :class:`Cache`.
    ``join``/``leave`` between steps; ``prefill(seq, n)`` returns the first token once the prompt is
    done, else None; ``decode(seqs)`` makes one token per sequence, each at its own position (which
    :meth:`Decoder.step`, one ``filled`` for all rows, cannot express).
    """

    def __init__(self, model: Decoder, max_num_seqs: int, max_len: int) -> None:
        self.model, self.max_len = model, max_len
        self.cache = model.new_cache(max_num_seqs, max_len)
        self.device = self.cache.k[0].device
        self.free = list(range(max_num_seqs - 1, -1, -1))
        self.prompt: dict[int, list[int]] = {}
        self.length = [0] * max_num_seqs  # tokens in the slot's cache
        self.last = [0] * max_num_seqs  # the slot's newest token, the next decode's input

    @staticmethod
    def lengths(item: dict) -> tuple[int, int]:
        return len(item["prompt"]), int(item["answer_tokens"])

    def join(self, item: dict) -> int:
        if not self.free:
            raise ConfigError(f"all {len(self.length)} sequences are running; one must leave first")
        prompt, answer = self.lengths(item)
        if prompt + answer > self.max_len:
            raise ConfigError(
                f"a request of {prompt} + {answer} tokens does not fit {self.max_len} positions"
            )
        slot = self.free.pop()
        self.prompt[slot], self.length[slot] = list(item["prompt"]), 0
        return slot

    def leave(self, slot: int) -> None:
        del self.prompt[slot]
        self.free.append(slot)

    def prefill(self, slot: int, n: int) -> int | None:
        start, prompt = self.length[slot], self.prompt[slot]
        ids = torch.tensor([prompt[start : start + n]], dtype=torch.int64, device=self.device)
        view = Cache.__new__(Cache)  # the slot's rows of the shared cache, filled to start
        view.k = [k[slot : slot + 1] for k in self.cache.k]
        view.v = [v[slot : slot + 1] for v in self.cache.v]
        view.filled = start
        valid = torch.ones((1, start + ids.shape[1]), dtype=torch.bool, device=self.device)
        with torch.inference_mode():
            logits = self.model.step(ids, valid, view)
        self.length[slot] = start + ids.shape[1]
        if self.length[slot] < len(prompt):
            return None
        self.last[slot] = int(logits.argmax(-1)[0])
        return self.last[slot]

    def decode(self, slots: list[int]) -> list[int]:
        rows = torch.tensor(slots, dtype=torch.int64, device=self.device)
        pos = torch.tensor([self.length[s] for s in slots], dtype=torch.int64, device=self.device)
        tokens = torch.tensor(
            [[self.last[s]] for s in slots], dtype=torch.int64, device=self.device
        )
        with torch.inference_mode():
            new = self._decode(rows, pos, tokens).argmax(-1).tolist()
        for s, t in zip(slots, new):
            self.length[s] += 1
            self.last[s] = t
        return new

    def _decode(self, rows, pos, tokens):
        """Logits of one new token per row, at position ``pos[row]``, against the row's cache."""
        m = self.model
        x = m.tok(tokens) + m.pos(pos.clamp(max=m.max_len - 1))[:, None]
        width = int(pos.max()) + 1
        mask = (torch.arange(width, device=pos.device)[None, :] <= pos[:, None])[:, None, None, :]
        for i, blk in enumerate(m.blocks):
            q, k, v = blk.qkv_heads(x)
            keys, values = self.cache.k[i], self.cache.v[i]
            keys[rows, :, pos] = k[:, :, 0].to(keys.dtype)
            values[rows, :, pos] = v[:, :, 0].to(values.dtype)
            kk, vv = keys[rows, :, :width].to(q.dtype), values[rows, :, :width].to(q.dtype)
            x = blk.attend(x, q, kk, vv, mask)
        return m.head(m.norm(x[:, -1]))

"""The generate example's step API: what a continuous batcher (``batching.continuous_live``) needs.

Sequences ``join(item)`` (a slot of one preallocated KV :class:`Cache`) and ``leave(seq)`` between
steps; ``prefill(seq, n)`` runs the next ``n`` prompt tokens of one sequence (returning its first
token when the prompt is done, else None); ``decode(seqs)`` makes one token per sequence, each at
its own position (which ``Decoder.step``, one ``filled`` for all rows, cannot express: it runs the
blocks itself); ``lengths(item)`` is ``(prompt tokens, answer tokens)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ._causal_model import Cache, Decoder


class GenerateSteps:
    """``max_num_seqs`` sequences of at most ``max_len`` tokens stepped through ``model``."""

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
        b, _, d = x.shape
        for i, blk in enumerate(m.blocks):
            q, k, v = (
                blk.qkv(blk.norm1(x))
                .view(b, 1, 3, blk.heads, d // blk.heads)
                .permute(2, 0, 3, 1, 4)
            )
            keys, values = self.cache.k[i], self.cache.v[i]
            keys[rows, :, pos] = k[:, :, 0].to(keys.dtype)
            values[rows, :, pos] = v[:, :, 0].to(values.dtype)
            kk = keys[rows, :, :width].to(q.dtype)
            vv = values[rows, :, :width].to(q.dtype)
            a = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            x = x + blk.proj(a.transpose(1, 2).reshape(b, 1, d))
            x = x + blk.ff2(F.gelu(blk.ff1(blk.norm2(x))))
        return m.head(m.norm(x[:, -1]))

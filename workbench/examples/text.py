"""Example ``text``: classify a support message (a ``str``, or UTF-8 ``bytes``) into intents.
Compute-bound.

Stages: ``parse`` (NFKC, control characters dropped, whitespace collapsed; an empty or over-long
text is a ValueError), ``preprocess`` (the example's wordpiece tokenizer on ``data/vocab.txt``,
``[CLS]`` ... ``[SEP]`` padded or cut to ``max_len``, ids and mask to the device), ``forward`` (a
seeded random pre-norm transformer encoder classifying ``[CLS]``; every projection an
``nn.Linear``, so int8 covers them), ``postprocess`` (top-k labels) and ``serialize``.

Options (``config.options``):
    seed (int, 0): weights and request stream.
    max_len (int, 64): tokens per text including [CLS] and [SEP].
    d_model (int, 192), layers (int, 3), heads (int, 4), ff (int, 4 * d_model).
    top_k (int, 3): labels per response.
    max_chars (int, 5000): longer texts are rejected in ``parse``.
    pin_memory (bool, True): on CUDA, pinned host memory and non_blocking copy.
    padding ("max_len"): pad every batch to ``max_len``, or ``"longest"``: to its longest text (the
        forward's time then tracks the padded length, ``seq_len`` of preprocess's ``describe=``).
    cuda_graph (bool, False): on CUDA, replay the forward from a CUDA graph per batch shape
        (``_cuda_graph``), the fix for a launch-bound forward; needs ``padding="max_len"``.
"""

from __future__ import annotations

import itertools
import random
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from ..config import PipelineConfig, Range, option_ranges
from ..errors import ConfigError, PipelineError
from ..pipeline import Pipeline
from ..precision import check_precision, prepare_model
from . import (
    SEED,
    SIZE,
    TOP_K,
    check_batch,
    data_file,
    example_pipeline,
    option,
    serialize,
    to_device,
    top_labels,
)

LABELS = tuple(
    "billing refund shipping_delay damaged_item wrong_item order_status return_request "
    "account_access password_reset cancel_subscription upgrade_plan payment_failed app_crash "
    "privacy_request promo_code invoice_request address_change warranty_claim praise other".split()
)
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
_WORDS = re.compile(r"\w+|[^\w\s]")
_SPACES = re.compile(r"\s+")


class WordPiece:
    """Greedy longest-match-first wordpiece tokenizer over a one-token-per-line vocabulary."""

    def __init__(self, path: Path, max_len: int, max_word_chars: int = 48):
        tokens = path.read_text(encoding="utf-8").split("\n")
        self.ids = {tok: i for i, tok in enumerate(t for t in tokens if t)}
        missing = [s for s in SPECIALS if s not in self.ids]
        if missing:
            raise PipelineError(
                f"{path}: vocabulary lacks {missing}; run `make data` to regenerate it"
            )
        self.pad, self.unk, self.cls, self.sep = (self.ids[s] for s in SPECIALS)
        self.max_len, self.max_word_chars = max_len, max_word_chars

    def encode(self, text: str) -> tuple[list[int], bool]:
        """Token ids ``[CLS]`` wordpieces ``[SEP]`` (at most ``max_len``, unpadded) and whether any were cut."""
        out, budget, truncated = [self.cls], self.max_len - 1, False
        for word in _WORDS.findall(text.lower()):
            out.extend(self.word_ids(word))
            if len(out) > budget:
                del out[budget:]
                truncated = True
                break
        out.append(self.sep)
        return out, truncated

    def word_ids(self, word: str) -> list[int]:
        whole = self.ids.get(word)
        if whole is not None:
            return [whole]
        if len(word) > self.max_word_chars:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    break
            else:
                return [self.unk]
            pieces.append(found)
            start = end
        return pieces


PADDINGS = ("max_len", "longest")


@option_ranges(
    seed=SEED,
    max_len=Range(4, 4_096, integer=True),
    d_model=Range(8, 8_192, integer=True),
    heads=Range(1, 256, integer=True),
    layers=Range(1, 256, integer=True),
    ff=SIZE,
    top_k=TOP_K,
    max_chars=Range(1, 10**7, integer=True),
)
def build(config: PipelineConfig) -> Pipeline:
    """The text pipeline for ``config`` (see the module docstring for stages and options)."""
    import torch  # 1-2 s and 300 MB: only when the pipeline is built

    from ._cuda_graph import GraphedForward  # imports torch
    from ._causal_model import Encoder  # imports torch

    check_precision(config)  # first: an impossible combination fails before any work
    seed, max_len = option(config, "seed", 0), option(config, "max_len", 64)
    d_model, heads = option(config, "d_model", 192), option(config, "heads", 4)
    layers, ff = option(config, "layers", 3), option(config, "ff", 4 * d_model)
    top_k = min(option(config, "top_k", 3), len(LABELS))
    max_chars = option(config, "max_chars", 5000)
    padding, cuda_graph = _padding_options(config)
    if d_model % heads:
        raise ConfigError(f"option d_model ({d_model}) must be a multiple of heads ({heads})")
    tokenizer = WordPiece(data_file("vocab.txt"), max_len)
    torch.manual_seed(seed)
    encoder = Encoder(len(tokenizer.ids), max_len, d_model, layers, heads, ff, len(LABELS))
    model = prepare_model(encoder, config)
    run_model = model  # the graph wraps it after the eager smoke test below

    def preprocess(texts: list[str]):
        encoded = [tokenizer.encode(t) for t in texts]
        width = max_len if padding == "max_len" else max(len(seq) for seq, _ in encoded)
        ids = torch.full((len(encoded), width), tokenizer.pad, dtype=torch.int64)
        for row, (seq, _) in enumerate(encoded):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int64)
        info = [(len(seq), cut) for seq, cut in encoded]
        return info, to_device(ids, config), to_device(ids != tokenizer.pad, config)

    def forward(batch):
        info, ids, mask = batch
        with torch.inference_mode():
            return info, run_model(ids, mask)

    def postprocess(scored):
        info, logits = scored
        with torch.inference_mode():
            labels = top_labels(logits, LABELS, top_k)
        return [{"labels": c, "tokens": n, "truncated": cut} for (n, cut), c in zip(info, labels)]

    pipe = example_pipeline(
        "text", config, model, lambda: text_items(seed), lambda: forward(preprocess(["smoke test"]))
    )
    if cuda_graph:  # after the smoke test, so a capture error is not reported as a precision error
        run_model = GraphedForward(model)
    pipe.add("parse", lambda batch: parse(batch, max_chars))
    pipe.add("preprocess", preprocess, describe=describe_padding)
    pipe.add("forward", forward)
    pipe.add("postprocess", postprocess)
    pipe.add("serialize", serialize)
    return pipe


def _padding_options(config: PipelineConfig) -> tuple[str, bool]:
    """``(padding, cuda_graph)`` checked against each other and the device (``pin_memory`` read)."""
    padding = option(config, "padding", "max_len", str)
    if padding not in PADDINGS:
        raise ConfigError(f"option padding must be one of {', '.join(PADDINGS)}, got {padding!r}")
    option(config, "pin_memory", True, bool)
    cuda_graph = option(config, "cuda_graph", False, bool)
    if cuda_graph and not config.is_cuda:
        raise ConfigError(
            f"option cuda_graph needs device cuda (a CUDA graph replays GPU launches), "
            f"got device {config.device}"
        )
    if cuda_graph and padding != "max_len":
        raise ConfigError(
            f"option cuda_graph needs padding='max_len' (a graph replays fixed shapes), "
            f"got padding={padding!r}"
        )
    return padding, cuda_graph


def describe_padding(batch) -> dict[str, float]:
    """What the forward pass's cost can track: the padded length it runs on and the longest real input."""
    info, ids, _ = batch
    return {"seq_len": float(ids.shape[1]), "tokens": float(max(n for n, _ in info))}


def parse(batch: list, max_chars: int = 5000) -> list[str]:
    """Clean texts; ValueError names the request when one is not usable."""
    return [_clean(i, t, max_chars) for i, t in enumerate(check_batch(batch, "text"))]


def _clean(index: int, text, max_chars: int) -> str:
    where = f"text request {index}"
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
    if not isinstance(text, str):
        raise ValueError(f"{where}: expected a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise ValueError(f"{where}: {len(text)} characters, more than max_chars={max_chars}")
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if ch.isprintable() or ch.isspace())
    text = _SPACES.sub(" ", text).strip()
    if not text:
        raise ValueError(f"{where}: empty text")
    return text


_OPENERS = ("", "hi", "hello,", "hey there!", "good morning.", "dear support team,")
_BODIES = (
    "my order #{num} arrived {adj} and the {thing} is {state}.",
    "i was charged twice for my {plan} subscription this month, please refund me.",
    "the app keeps crashing when i open the {screen} page on my {device}.",
    "i can't login to my account since {when}; the password reset email never arrives.",
    "where is my package? tracking number {code} has not updated in {small} days.",
    "i want to return the {thing} because the size is wrong and the color is different.",
    "please cancel my {plan} plan before the renewal on the {small}th.",
    "the promo code {code} does not work at checkout, it says invalid.",
    "can you send me an invoice for order {num}? my company {name} needs it for taxes.",
    "i moved to {name} street {small}, please update my delivery address.",
    "great service, {name} from your team was really helpful, thanks!",
    "my payment with {bank} failed three times but the money left my account.",
)
_CLOSERS = (
    "",
    "thanks",
    "thank you!",
    "please help asap.",
    "this is really frustrating!!",
    "regards, {name}",
)
_SYLLABLES = ("ka", "lo", "mir", "ven", "tas", "rhu", "quel", "zo", "dri", "an", "sel", "bor")
_SLOTS = {
    "adj": ("late", "yesterday", "broken", "two weeks late", "without a box"),
    "thing": ("jacket", "phone case", "coffee machine", "headphones", "book", "lamp"),
    "state": ("missing", "damaged", "the wrong size", "scratched", "not working"),
    "plan": ("premium", "family", "student", "yearly", "monthly"),
    "screen": ("settings", "checkout", "profile", "orders", "notifications"),
    "device": ("iphone", "android phone", "tablet", "laptop"),
    "when": ("yesterday", "last week", "this morning", "monday"),
    "bank": ("my visa card", "paypal", "my bank", "apple pay"),
}


def text_items(seed: int) -> Iterator[str]:
    """An endless, seeded stream of support messages, ~10 to ~90 words (some exceed max_len)."""
    rng = random.Random(seed)
    for _ in itertools.count():
        bodies = [rng.choice(_BODIES) for _ in range(rng.randint(1, 4))]
        parts = [rng.choice(_OPENERS), *bodies, rng.choice(_CLOSERS)]
        yield " ".join(p for p in parts if p).format_map(_SlotFiller(rng))


class _SlotFiller(dict):
    """Fills ``{slot}`` placeholders: phrases, numbers, codes and made-up names (out of vocabulary)."""

    def __init__(self, rng: random.Random):
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        rng = self.rng
        if key in _SLOTS:
            return rng.choice(_SLOTS[key])
        if key == "num":
            return str(rng.randrange(10_000, 99_999))
        if key == "small":
            return str(rng.randint(2, 28))
        if key == "code":
            return "".join(
                rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(rng.randint(6, 10))
            )
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()

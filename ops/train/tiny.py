"""Tiny BLOOM checkpoints built on the spot: a byte-level BPE tokenizer trained on a given corpus
and a randomly initialised `BloomForCausalLM`, saved with `save_pretrained`.

They load through `model.runner.loading` exactly like SeqGPT-560M does, so tests and offline demos run the
real code path without any download.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import BloomConfig, BloomForCausalLM, PreTrainedTokenizerFast

from model.runner.loading import MANIFEST

# BLOOM's special tokens, at BLOOM's ids (unk/bos/eos/pad = 0/1/2/3).
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]


def train_tokenizer(corpus: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    # Byte-level like BLOOM's own: any input encodes, and a character may span several tokens.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return _as_bloom_tokenizer(tokenizer)


def train_char_tokenizer(corpus: Iterable[str]) -> PreTrainedTokenizerFast:
    """One token per character seen in `corpus`, UTF-8 bytes for any other (byte fallback).

    A small model learns to copy a value from the document far more easily when the value's
    tokens are the document's tokens one for one: BPE merges cut a name differently depending on
    what surrounds it, so the answer's tokens need not appear in the prompt at all.
    """
    chars = sorted(set("".join(corpus)))
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for char in chars:
        vocab.setdefault(char, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tokenizer.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    return _as_bloom_tokenizer(tokenizer)


def _as_bloom_tokenizer(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """With BLOOM's special tokens and SeqGPT's left padding."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        padding_side="left",
    )


def build_tiny_bloom(
    directory: Path,
    corpus: Iterable[str],
    *,
    seed: int = 0,
    vocab_size: int = 1000,
    hidden_size: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    initializer_range: float = 0.02,
) -> Path:
    """Write a random-weight BLOOM checkpoint with its tokenizer to `directory`; deterministic in `seed`.

    A larger `initializer_range` gives peakier, more varied greedy outputs than BLOOM's default,
    which makes equivalence tests meaningful (the default model repeats one token).
    """
    tokenizer = train_tokenizer(corpus, vocab_size)
    model = init_tiny_bloom(
        tokenizer,
        seed=seed,
        hidden_size=hidden_size,
        n_layer=n_layer,
        n_head=n_head,
        initializer_range=initializer_range,
    )
    config = model.config
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    manifest = {"recipe": "random-tiny-bloom", "seed": seed, "weights": "random", "config": config.to_diff_dict()}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return directory


def init_tiny_bloom(
    tokenizer: PreTrainedTokenizerFast,
    *,
    seed: int,
    hidden_size: int,
    n_layer: int,
    n_head: int,
    initializer_range: float = 0.02,
) -> BloomForCausalLM:
    """A randomly initialised BLOOM sized for `tokenizer`, with BLOOM's special-token ids."""
    config = BloomConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        initializer_range=initializer_range,
    )
    torch.manual_seed(seed)
    return BloomForCausalLM(config)

"""A stand-in for SeqGPT-560M's tokenizer: byte-level BPE with BLOOM's vocabulary size, built offline.

BLOOM's tokenizer (250,880 entries: thousands of Chinese multi-character tokens, space-glued tokens like
" word") cannot be downloaded here, yet the constraint code (model/grammar/vocab.py, source.py) must be
measured against a vocabulary that large. The tokenizers of ops/train/tiny.py stop at a few thousand entries,
so a benchmark that only widens the LM head measures the wrong tables.

Recipe, deterministic in (corpus, seed):
1. Train a byte-level BPE with ops/train/tiny.py's train_tokenizer (same pre-tokenizer, decoder, special tokens
   at ids 0-3), fed windows of at most four Chinese characters: trained on whole texts, 20 documents
   teach it phrases such as "广州博信建设有限公司" as single tokens, which BLOOM does not have.
2. Add the corpus' frequent Chinese n-grams (2-4 characters).
3. Add single characters: the corpus', then the whole CJK block in a seeded order.
4. Add seeded pairs and triples of common characters until the vocabulary has `size` entries.

Every added token is the last of a chain of merges appended to the merge list, planned from the pieces BPE
gives the token's text at that point (a simulation of BPE), so encoding text really yields the long tokens.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import pre_tokenizers
from transformers import PreTrainedTokenizerFast

from model.runner.loading import MANIFEST
from ops.train.tiny import SPECIAL_TOKENS, init_tiny_bloom, train_tokenizer

# BLOOM's own size is 250,880; a round default keeps the benchmark tables readable.
STANDIN_SIZE = 250_000
# Vocabulary the trainer may grow to, "a few thousand merges"; a small corpus stops it earlier (~1k).
TRAINED_MERGES = 4_000
# Longest Chinese word the trainer sees, so that no trained token holds more characters (BLOOM's rarely do).
TRAINING_WINDOW = 4
# The CJK Unified Ideographs block.
CJK_FIRST, CJK_LAST = 0x4E00, 0x9FFF
# Pairs and triples are drawn from the corpus' characters, then the block's, up to this many.
COMMON_CHARS = 3_500
# Share of pairs among the drawn n-grams, the rest triples: BLOOM's Chinese tokens are mostly short.
PAIR_SHARE = 0.8
# Draws in a row that add nothing before the filling gives up (the pool is then exhausted).
MAX_FRUITLESS_DRAWS = 100_000


def build_standin_tokenizer(corpus: Iterable[str], size: int = STANDIN_SIZE, seed: int = 0) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of `size` entries (fewer only if the character pools run dry) whose
    long Chinese tokens are reachable by merges; ids 0-3 are <unk>, <s>, </s>, <pad> as in ops/train/tiny.py."""
    texts = list(corpus)
    trained = train_tokenizer(_training_words(texts), TRAINED_MERGES)
    spec = json.loads(trained.backend_tokenizer.to_str())
    bpe = _MergeTable(spec["model"]["vocab"], spec["model"]["merges"])
    spelling = _ByteSpelling()
    rng = random.Random(seed)

    for ngram in _frequent_cjk_ngrams(texts):
        bpe.add_token(spelling.symbols(ngram), size)
    singles = _single_characters(texts, rng)
    for char in singles:
        bpe.add_token(spelling.symbols(char), size)
    common = [c for c in singles[:COMMON_CHARS] if len(bpe.segment(spelling.symbols(c))) == 1]
    while common and len(bpe.vocab) < size and bpe.fruitless_draws < MAX_FRUITLESS_DRAWS:
        ngram = "".join(rng.choices(common, k=2 if rng.random() < PAIR_SHARE else 3))
        # Planned from bytes, not from whole characters: trained merges join the end of one character to
        # the start of the next (b"\xa5" + b"\xe4\xb8", from 以上), so a character-level plan could miss.
        bpe.add_token(spelling.symbols(ngram), size)

    spec["model"]["vocab"] = bpe.vocab
    spec["model"]["merges"] = [list(pair) for pair in bpe.merges]
    with tempfile.TemporaryDirectory() as scratch:
        # From a file: tokenizer_object would be deep-copied, which for 250k entries costs seconds.
        path = Path(scratch) / "tokenizer.json"
        path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        return PreTrainedTokenizerFast(
            tokenizer_file=str(path),
            unk_token=SPECIAL_TOKENS[0],
            bos_token=SPECIAL_TOKENS[1],
            eos_token=SPECIAL_TOKENS[2],
            pad_token=SPECIAL_TOKENS[3],
            padding_side="left",
        )


def save_standin_model(
    directory: Path,
    corpus: Iterable[str],
    size: int = STANDIN_SIZE,
    hidden_size: int = 16,
    n_layer: int = 1,
    n_head: int = 1,
    seed: int = 0,
) -> Path:
    """Write the stand-in tokenizer and a random tiny BLOOM sized for it to `directory`, loadable by
    model.runner.loading.load_model; the manifest marks it as ours, as ops/train/tiny.py's checkpoints are."""
    tokenizer = build_standin_tokenizer(corpus, size, seed)
    model = init_tiny_bloom(tokenizer, seed=seed, hidden_size=hidden_size, n_layer=n_layer, n_head=n_head)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    manifest = {
        "recipe": "standin-tokenizer-random-bloom",
        "seed": seed,
        "weights": "random",
        "tokenizer_size": len(tokenizer),
        "config": model.config.to_diff_dict(),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return directory


class _MergeTable:
    """BPE vocab and ranked merges that grow together, with BPE's own segmentation to plan new merges."""

    def __init__(self, vocab: dict[str, int], merges: list[list[str]] | list[str]) -> None:
        self.vocab = dict(vocab)
        # Older tokenizer.json files spell a merge "a b"; byte-level symbols never hold a space.
        self.merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.fruitless_draws = 0

    def segment(self, pieces: list[str]) -> list[str]:
        """The tokens BPE makes of `pieces` (one pre-tokenized word): merge the lowest-ranked adjacent
        pair, leftmost first, until no pair has a rank, as the tokenizers library does."""
        pieces = list(pieces)
        while len(pieces) > 1:
            best, at = None, -1
            for i in range(len(pieces) - 1):
                rank = self.ranks.get((pieces[i], pieces[i + 1]))
                if rank is not None and (best is None or rank < best):
                    best, at = rank, i
            if best is None:
                break
            pieces[at : at + 2] = [pieces[at] + pieces[at + 1]]
        return pieces

    def add_token(self, pieces: list[str], size: int) -> None:
        """Make the word `pieces` one token by chaining merges onto its current tokens, left to right.

        The chain ranks after every existing merge and its links follow each other, so on this word
        BPE first reproduces the current tokens, then applies the chain. A chain that would take the
        vocabulary past `size` is skipped, so a shorter one can fill it to exactly `size`."""
        tokens = self.segment(pieces)
        chain = []
        for right in tokens[1:]:
            left = chain[-1][0] + chain[-1][1] if chain else tokens[0]
            chain.append((left, right))
        new_tokens = sum(a + b not in self.vocab for a, b in chain)
        if not chain or len(self.vocab) + new_tokens > size:
            self.fruitless_draws += 1
            return
        self.fruitless_draws = 0
        for pair in chain:
            self.ranks[pair] = len(self.merges)
            self.merges.append(pair)
            self.vocab.setdefault(pair[0] + pair[1], len(self.vocab))


class _ByteSpelling:
    """Text to byte-level symbols (one per UTF-8 byte), with the table read off the tokenizers library's
    own pre-tokenizer rather than written out here a second time; a dict look-up per byte is far cheaper
    than a call to the pre-tokenizer per n-gram."""

    def __init__(self) -> None:
        # One character per UTF-8 length and lead byte, so that every byte valid in UTF-8 occurs.
        codes = [*range(0x800), *range(0x800, 0x10000, 0x1000), 0x10000, 0x40000, 0x80000, 0xC0000, 0x100000]
        sample = "".join(chr(code) for code in codes if not 0xD800 <= code < 0xE000) + chr(0xD7FF)
        symbols = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(sample)[0][0]
        self._symbol = dict(zip(sample.encode(), symbols, strict=True))

    def symbols(self, text: str) -> list[str]:
        return [self._symbol[byte] for byte in text.encode()]


def _is_cjk(char: str) -> bool:
    return CJK_FIRST <= ord(char) <= CJK_LAST


def _cjk_runs(text: str) -> Iterator[str]:
    run: list[str] = []
    for char in text + "\n":
        if _is_cjk(char):
            run.append(char)
        elif run:
            yield "".join(run)
            run = []


def _training_words(texts: list[str]) -> Iterator[str]:
    """The trainer's texts: each Chinese run as all its windows of up to TRAINING_WINDOW characters (each a
    word of its own, so no token grows longer; sliding, so no pair is cut at an arbitrary offset), and
    what lies between the runs as it is."""
    for text in texts:
        rest = text
        for run in _cjk_runs(text):
            before, _, rest = rest.partition(run)
            if before:
                yield before
            width = min(TRAINING_WINDOW, len(run))
            yield from (run[i : i + width] for i in range(len(run) - width + 1))
        if rest:
            yield rest


def _frequent_cjk_ngrams(texts: list[str]) -> list[str]:
    """Chinese n-grams (2-4 characters) seen at least twice, most frequent first; ties by the text so
    the order never depends on hashing."""
    counts: Counter[str] = Counter()
    for text in texts:
        for run in _cjk_runs(text):
            for n in range(2, 5):
                counts.update(run[i : i + n] for i in range(len(run) - n + 1))
    return sorted((ngram for ngram, count in counts.items() if count >= 2), key=lambda g: (-counts[g], g))


def _single_characters(texts: list[str], rng: random.Random) -> list[str]:
    """The corpus' Chinese characters, most frequent first, then the rest of the CJK block shuffled."""
    seen = Counter(char for text in texts for char in text if _is_cjk(char))
    block = [chr(code) for code in range(CJK_FIRST, CJK_LAST + 1) if chr(code) not in seen]
    rng.shuffle(block)
    return sorted(seen, key=lambda char: (-seen[char], char)) + block
